"""The per-sample half of ``audit verify``: a re-score's scores compared with a stored file.

The re-score hands its parts over in sample order (``score_run(each_part=...)``), and the
stored scores file, written in that order too, is read alongside, a row group at a time:
each part is compared with the stored rows of its sample indexes, so what is held is a part
and a row group whatever the run's size. A row that finds no partner in its range (rows added
to or removed from the file, a file in another order) waits to be paired at the end. The
differences come out as a comparison of the whole files gives them: samples on one side
only first, sorted, then per column the rows in sample order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

KEYS = ["sample_id", "trial"]
# run_id is the directory's name: a run copied or renamed keeps its numbers; scoring is the
# folder's, and a scoring stored as spec under an earlier version's defaults (abs_tol 1e-9)
# is re-scored with the options it records, whose name today differs
UNCOMPARED = (*KEYS, "run_id", "scoring")
_ROW = "__row"  # a fresh row's place in the whole run's scores


@dataclass
class Difference:
    """One field that differs between stored and recomputed results."""

    scoring: str
    sample_id: str | None
    field: str
    stored: Any
    recomputed: Any


class ScoresCheck:
    """Fresh scores, given part by part in sample order (:meth:`add`), compared with the
    stored ones, read from ``stored`` as the parts need them (``empty``: its columns, no
    rows); :meth:`finish` says what differs."""

    def __init__(self, scoring: str, empty: pl.DataFrame, stored: Iterator[pl.DataFrame]):
        self.scoring = scoring
        self.rows = 0  # the fresh rows compared
        self._stored_rows = 0  # the stored rows read
        empty = empty.drop("scoring", strict=False)
        self._empty = empty
        self._stored = stored
        self._held = empty  # stored rows read past the last part's sample indexes
        self._columns: list[str] = []
        self._found: dict[str, list[tuple[int, Difference]]] = {}
        self._fresh_left: list[pl.DataFrame] = []  # rows not paired in their part's range
        self._stored_left: list[pl.DataFrame] = []
        self._misfiled: list[tuple[str, int, Any]] = []  # stored rows of another scoring

    def add(self, fresh: pl.DataFrame) -> None:
        """Compare the next part of the fresh scores with the stored rows of its range."""
        self._columns = self._columns or fresh.columns
        fresh = fresh.with_row_index(_ROW, offset=self.rows)
        self.rows += fresh.height
        top = fresh["sample_index"].max()
        stored = self._stored_upto(top) if isinstance(top, int) else self._empty
        fresh_left, stored_left = self._compare(fresh, stored)
        self._fresh_left.append(fresh_left)
        self._stored_left.append(stored_left)

    def finish(self) -> list[Difference]:
        """Pair the rows left over with each other, and list every difference."""
        rest = [self._taken(batch) for batch in self._stored]
        stored = pl.concat([*self._stored_left, self._held, *rest])
        fresh_parts = self._fresh_left
        fresh = pl.concat(fresh_parts) if fresh_parts else pl.DataFrame()
        self._fresh_left = self._stored_left = []
        self._held = self._empty
        if fresh.height and stored.height:
            fresh, stored = self._compare(fresh, stored)
        out = []
        fresh_ids = set(fresh.select(KEYS).iter_rows()) if fresh.height else set()
        stored_ids = set(stored.select(KEYS).iter_rows())
        for key in sorted(fresh_ids - stored_ids):
            out.append(Difference(self.scoring, label(*key), "sample", None, "present"))
        for key in sorted(stored_ids - fresh_ids):
            out.append(Difference(self.scoring, label(*key), "sample", "present", None))
        for column in self._columns:
            found = sorted(self._found.get(column, []), key=lambda item: item[0])
            out += [difference for _, difference in found]
        if self._stored_rows != self.rows and not out:  # a row given twice pairs up twice
            out.append(Difference(self.scoring, None, "rows", self._stored_rows, self.rows))
        for sid, trial, given in self._misfiled:  # the views file a row by this column
            out.append(Difference(self.scoring, label(sid, trial), "scoring", given, self.scoring))
        return out

    def _taken(self, batch: pl.DataFrame) -> pl.DataFrame:
        """A batch of stored rows as read: counted, and its rows filed under another scoring
        than the folder's (the views file a row by its ``scoring``) noted, that column gone."""
        self._stored_rows += batch.height
        if "scoring" not in batch.columns:
            return batch
        other = batch.filter(pl.col("scoring").ne_missing(self.scoring))
        self._misfiled += other.select(*KEYS, "scoring").iter_rows()
        return batch.drop("scoring")

    def _stored_upto(self, top: int) -> pl.DataFrame:
        """The stored rows of sample indexes up to ``top`` (and any without one): read on
        until a row past it, held for the next part."""
        index = pl.col("sample_index")
        mine = index.is_null() | (index <= top)
        taken = []
        while True:
            if self._held.height:
                taken.append(self._held.filter(mine))
                self._held = self._held.filter(~mine)
                if self._held.height:
                    break
            batch = next(self._stored, None)
            if batch is None:
                break
            self._held = self._taken(batch)
        return pl.concat(taken) if taken else self._empty

    def _compare(
        self, fresh: pl.DataFrame, stored: pl.DataFrame
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Note the differences of the rows of ``fresh`` and ``stored`` that pair up; return
        the rows of each that do not."""
        if _aligned(fresh, stored):  # as written: row for row (a fifth of the time of a join)
            renamed = stored.drop(KEYS).rename(lambda name: f"{name}__stored")
            joined = pl.concat([fresh, renamed], how="horizontal")
            fresh_left, stored_left = fresh.clear(), stored.clear()
        else:
            joined = fresh.join(stored, on=KEYS, suffix="__stored", maintain_order="left")
            fresh_left = fresh.join(stored, on=KEYS, how="anti")
            stored_left = stored.join(fresh, on=KEYS, how="anti")
        differ = {
            column: ~pl.col(column).eq_missing(pl.col(f"{column}__stored"))
            for column in self._columns
            if column not in UNCOMPARED and f"{column}__stored" in joined.columns
        }
        if differ:  # the rows that differ anywhere first: most often none
            joined = joined.filter(pl.any_horizontal(*differ.values()))
        for column, differs in differ.items():
            found_rows = joined.filter(differs)
            rows = found_rows.select(_ROW, *KEYS, column, f"{column}__stored").iter_rows()
            found = self._found.setdefault(column, [])
            for row, sid, trial, new, old in rows:
                found.append((row, Difference(self.scoring, label(sid, trial), column, old, new)))
        return fresh_left, stored_left


def _aligned(fresh: pl.DataFrame, stored: pl.DataFrame) -> bool:
    """Whether the rows of both pair up in order (a key without a value pairs with none)."""
    if fresh.height != stored.height:
        return False
    keys = stored.select(KEYS)
    return not any(keys.null_count().row(0)) and keys.equals(fresh.select(KEYS))


def label(sample_id: str, trial: int) -> str:
    """A sample named as the user knows it: its id, and its trial when it has several."""
    return sample_id if not trial else f"{sample_id} (trial {trial})"


# pairs that differ listed one by one, the rest counted
PAIRS_SHOWN = 5


class PairsCheck:
    """A re-score's pairs (each agent call's gold call, and its arguments' counts), given
    part by part in sample order (:meth:`add`), compared row for row with the stored pairs
    file, read alongside a batch at a time (``stored``; None: there is no such file): the
    file lists each sample's pairs in the order scoring writes them, so what is held is a
    part and a batch whatever the run's size. :meth:`finish` says what differs."""

    def __init__(self, scoring: str, stored: Iterator[pl.DataFrame] | None) -> None:
        self.scoring = scoring
        self._stored = stored
        self._fresh = pl.DataFrame()  # rows of either side not compared yet
        self._held = pl.DataFrame()
        self._at = 0  # the rows compared
        self._fresh_rows = self._stored_rows = 0
        self._differ = 0
        self._shown: list[Difference] = []

    def add(self, fresh: pl.DataFrame | None) -> None:
        """Compare the next part's pairs with as many stored rows."""
        if fresh is None or not fresh.height:
            return
        self._fresh_rows += fresh.height
        self._fresh = pl.concat([self._fresh, fresh]) if self._fresh.height else fresh
        while self._stored is not None and self._held.height < self._fresh.height:
            batch = next(self._stored, None)
            if batch is None:
                break
            self._stored_rows += batch.height
            self._held = pl.concat([self._held, batch]) if self._held.height else batch
        self._compare(min(self._fresh.height, self._held.height))

    def finish(self) -> list[Difference]:
        """Every difference: the rows that differ (the first few shown), and a file with
        other rows than the re-score's, or none."""
        if self._stored is None:
            if not self._fresh_rows:
                return []
            return [Difference(self.scoring, None, "pairs.parquet", None, "present")]
        for batch in self._stored:
            self._stored_rows += batch.height
        out = list(self._shown)
        if self._differ > len(self._shown):
            more = self._differ - len(self._shown)
            out.append(Difference(self.scoring, None, "pairs", f"{more} more pairs", "differ"))
        if self._stored_rows != self._fresh_rows:
            out.append(
                Difference(self.scoring, None, "pairs rows", self._stored_rows, self._fresh_rows)
            )
        return out

    def _compare(self, count: int) -> None:
        if not count:
            return
        fresh, stored = self._fresh.head(count), self._held.head(count)
        self._fresh, self._held = self._fresh.slice(count), self._held.slice(count)
        columns = [c for c in fresh.columns if c in stored.columns]
        renamed = stored.select(columns).rename(lambda name: f"{name}__stored")
        joined = pl.concat([fresh.select(columns), renamed], how="horizontal")
        differs = [~pl.col(c).eq_missing(pl.col(f"{c}__stored")) for c in columns]
        found = joined.with_row_index(_ROW, offset=self._at).filter(pl.any_horizontal(differs))
        self._at += count
        self._differ += found.height
        for row in found.head(PAIRS_SHOWN - len(self._shown)).iter_rows(named=True):
            column = next((c for c in columns if row[c] != row[f"{c}__stored"]), columns[0])
            self._shown.append(
                Difference(
                    self.scoring,
                    label(row["sample_id"], row.get("trial") or 0),
                    f"pairs row {row[_ROW]}: {column}",
                    row[f"{column}__stored"],
                    row[column],
                )
            )
