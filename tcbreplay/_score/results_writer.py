"""The default scorer's results written part by part as its parts come, in sample order:
each part's rows to the scores and pairs files (in row groups of one size whatever the
parts', each file in a thread of its own) and its listed samples to the dashboard file's
body, then the dashboard file and the summary (last). A scorer of the whole run writes its
results in one go (:func:`tcbreplay._score.results.write_results`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tcbreplay._score.dashboard import (
    BETWEEN,
    TAIL,
    dashboard_path,
    dashboard_record,
    head_text,
)
from tcbreplay._score.exact_match import summarize_exact_match
from tcbreplay._score.flat_calls import FlatCalls
from tcbreplay._score.fold import Tally
from tcbreplay._score.hashed_file import HashedFile
from tcbreplay._score.metrics import summarize
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.parts import PartResult, tool_sums
from tcbreplay._score.result_hashes import seal
from tcbreplay._score.results import category_breakdown, other_roles, tool_breakdown
from tcbreplay._store.files import Staged, json_text, remove
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import ROW_GROUP_ROWS, SCORES_SCHEMA

# what is handed a part's scores and pairs (None: a scorer without pairs) as they come
PartSink = Callable[[pl.DataFrame, pl.DataFrame | None], None]

# the dashboard file's samples held in memory before they go to its body file
BODY_BUFFER = 8 << 20


# the columns of the scores and pairs files that hold few distinct values
_FEW_VALUES = frozenset({"run_id", "scoring", "category", "status", "error_type", "tool"})
# the column of the scores file whose values grow with its rows (in sample order)
_SORTED = frozenset({"sample_index"})


class ResultsWriter:
    """The default scorer's results, folded part by part in sample order: each part's rows
    written to the scores and pairs files and its listed samples to the dashboard file's body
    (``files``: the scoring's staged files; None: the rows are kept in memory instead, or
    handed to ``each_part`` when given), its tally added up, the hashes of its keys and its
    rows for pass^k kept."""

    def __init__(
        self, run: Run | None, options: ScoreOptions, dashboard: str, files: Staged | None,
        each_part: PartSink | None = None,
    ) -> None:  # fmt: skip
        self.run = run
        self._each_part = each_part
        self.tally = Tally()
        self.summary_rows: list[pl.DataFrame] = []
        self.tools: pl.DataFrame | None = None
        self.keys: list[np.ndarray] = []
        self.trial_rows: list[pl.DataFrame] = []
        self.frames: list[pl.DataFrame] = []  # in memory: the scores, pairs and calls
        self.pairs: list[pl.DataFrame] = []
        self.flat: list[FlatCalls] = []
        self.listed = 0
        self._files = files
        self._writers: dict[Path, pq.ParquetWriter] = {}
        # each Parquet file as its writer writes it, and its sha256 (for the audit record)
        self._sinks: dict[Path, tuple[Any, HashedFile]] = {}
        self._pending: dict[Path, list[pa.Table]] = {}
        # each file's rows written in a thread of its own (Arrow releases the GIL while it
        # encodes) while the next part is folded in, one part's at a time: the last part's
        # are written while the run-level numbers are computed
        self._threads: ThreadPoolExecutor | None = None
        self._writing: list[Future[None]] = []
        self.scores_path: Path | None = None
        self.dashboard_path: Path | None = None
        self.replaced_roles: str | None = None  # the warning of other_roles, once finished
        self._body: Any = None
        # the dashboard file's samples held here up to BODY_BUFFER bytes, then in its body
        # file: a small run's are written after its scores files (whose failure names them)
        self._board: list[bytes] = []
        self._board_bytes = 0
        if files is None or run is None:
            return
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tcbreplay-write")
        folder = run.scores_dir(options.scoring)
        files.folder(folder)
        self.scores_path = folder / "scores.parquet"
        self.pairs_path = folder / "pairs.parquet"
        self._tmp = {path: files.begin(path) for path in (self.scores_path, self.pairs_path)}
        self._pending = {self.scores_path: [], self.pairs_path: []}  # (in this order)
        # made now (the rows follow in row groups): a store that cannot take the scores file
        # is named by it, before the dashboard file's body below is written
        with files.writing(self.scores_path):
            self._tmp[self.scores_path].touch()
        if dashboard != "none":
            self.dashboard_path = dashboard_path(run)
            files.folder(self.dashboard_path.parent)
            self._tmp[self.dashboard_path] = files.begin(self.dashboard_path)
            # the samples first, beside it: the head (the run-level numbers) is known last
            self._body_path = self._tmp[self.dashboard_path].with_suffix(".body")

    def add(self, part: PartResult) -> None:
        """Fold in the next part (parts come in sample order)."""
        if part.tally is not None:
            self.tally.add(part.tally)
        if part.summary_rows is not None:
            self.summary_rows.append(part.summary_rows)
        counts = part.tool_counts
        self.tools = counts if self.tools is None else tool_sums(pl.concat([self.tools, counts]))
        self.keys.append(part.keys)
        if part.trial_rows is not None:
            self.trial_rows.append(part.trial_rows)
        if self._files is None and self._each_part is not None:
            self._each_part(_frame(part.scores), _frame(part.pairs))
            return
        if self._files is None:
            self.frames.append(_frame(part.scores))
            self.pairs.append(_frame(part.pairs))
            if part.flat is not None:
                self.flat.append(part.flat)
            return
        assert self.scores_path is not None
        self._written()  # the part before's rows first (memory held: two parts' rows)
        self._start_writing({
            self.scores_path: _large_strings(_table(part.scores), SCORES_SCHEMA),
            self.pairs_path: _large_strings(_table(part.pairs)),
        })  # fmt: skip
        if self.dashboard_path is not None and part.listed:
            chunk = (BETWEEN if self.listed else b"") + part.board
            self.listed += part.listed
            if self._body is None and self._board_bytes + len(chunk) <= BODY_BUFFER:
                self._board.append(chunk)
                self._board_bytes += len(chunk)
                return
            with self._files.writing(self.dashboard_path):
                if self._body is None:
                    self._body = self._body_path.open("wb")
                for held in (*self._board, chunk):
                    self._body.write(held)
            self._board, self._board_bytes = [], 0

    def _start_writing(self, tables: dict[Path, pa.Table], last: bool = False) -> None:
        """Start :meth:`_write` of each file's rows, each in its thread."""
        assert self._threads is not None
        self._writing = [
            self._threads.submit(self._write, path, table, last) for path, table in tables.items()
        ]

    def _written(self) -> None:
        """Wait until the rows being written are; raise the first failure (in file order)."""
        jobs, self._writing = self._writing, []
        failed = [job.exception() for job in jobs]  # (waits for each)
        for error in failed:
            if error is not None:
                raise error

    def _write(self, path: Path, table: pa.Table, last: bool = False) -> None:
        """Add rows to a file, written in row groups of ``ROW_GROUP_ROWS`` whatever the parts'
        sizes (``last``: the rest too): the file is the same bytes however the run was cut."""
        assert self._files is not None
        pending = self._pending.setdefault(path, [])
        pending.append(table)
        rows = sum(t.num_rows for t in pending)
        if rows < ROW_GROUP_ROWS and not last:
            return
        whole = pa.concat_tables(pending)
        full = whole.num_rows if last else whole.num_rows - whole.num_rows % ROW_GROUP_ROWS
        self._pending[path] = [whole.slice(full)]
        with self._files.writing(path):
            writer = self._writers.get(path)
            if writer is None:
                # derived results, rewritten by every scoring: fast compression,
                # dictionaries only for the columns of few values (a sample id's would be
                # tried on every row group and given up: a fifth of the writing time), and
                # statistics only where a reader's filter can skip row groups by them (the
                # sample_index; the others' cost a fifth of what is left); integers delta
                # encoded (indexes and counts: a tenth less writing time, files a third
                # smaller than plain; see BENCHMARKS.md)
                schema = whole.schema
                opened = self._tmp[path].open("wb")
                self._sinks[path] = (opened, HashedFile(opened))
                writer = pq.ParquetWriter(
                    self._sinks[path][1], schema, compression="zstd", compression_level=1,
                    use_dictionary=[n for n in schema.names if n in _FEW_VALUES],
                    write_statistics=[n for n in schema.names if n in _SORTED],
                    column_encoding={
                        f.name: "DELTA_BINARY_PACKED"
                        for f in schema if pa.types.is_integer(f.type)
                    },
                )  # fmt: skip
                self._writers[path] = writer
            writer.write_table(whole.slice(0, full), row_group_size=ROW_GROUP_ROWS)

    def finish(self, summary: dict[str, Any]) -> None:
        """Close the files, and write the dashboard file and the summary (last)."""
        assert self._files is not None
        self._written()
        rest = {path: pending[0].slice(0, 0) for path, pending in self._pending.items() if pending}
        if rest:
            self._start_writing(rest, last=True)
            self._written()
        hashes = {}
        for path, writer in self._writers.items():
            with self._files.writing(path):
                writer.close()
                opened, hashed = self._sinks.pop(path)
                opened.close()
            hashes[path.name] = hashed.hexdigest()
        self._writers = {}
        if self.dashboard_path is not None:
            with self._files.writing(self.dashboard_path):
                if self._body is not None:
                    self._body.close()
                with self._tmp[self.dashboard_path].open("wb") as written:
                    assert self.run is not None
                    out = HashedFile(written)  # (its sha256 as it is written, not read back)
                    out.write(head_text(self.run, summary))
                    if self._body is not None:
                        with self._body_path.open("rb") as body:
                            out.copy_from(body)
                    for held in self._board:
                        out.write(held)
                    out.write(TAIL)
                record = dashboard_record(self.dashboard_path, out.hexdigest())
                summary["audit"]["dashboard"] = record
        seal(summary, hashes)
        text = json_text(summary)
        folder = self.pairs_path.parent
        self.replaced_roles = other_roles(folder, summary)
        self._files.write(folder / "summary.json", lambda tmp: tmp.write_text(text, "utf-8"))

    def close(self) -> None:
        """Release what writing holds (after a failure too)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)  # (rows being written: the writers are theirs)
            self._threads = None
            self._writing = []
        for writer in self._writers.values():
            with suppress(Exception):
                writer.close()
        self._writers = {}
        for opened, _ in self._sinks.values():
            with suppress(OSError):
                opened.close()
        self._sinks = {}
        self._board, self._board_bytes = [], 0
        if self._body is not None:
            with suppress(OSError):
                self._body.close()
            remove(self._body_path)
            self._body = None

    def numbers(self) -> dict[str, Any]:
        """The run-level numbers: the metrics with the n behind each, then per tool and per
        category (of the tally, or of the rows kept)."""
        by_tool = tool_breakdown(self.tools) if self.tools is not None else []
        if self.summary_rows:
            rows = pl.concat(self.summary_rows, rechunk=True)  # summed as over one part
            metrics = {**summarize(rows), **summarize_exact_match(rows)}
            return {"metrics": metrics, "by_tool": by_tool, "by_category": category_breakdown(rows)}
        return {
            "metrics": self.tally.metrics(),
            "by_tool": by_tool,
            "by_category": self.tally.by_category(),
        }

    def scores(self) -> pl.DataFrame:
        """The scores kept in memory, in sample order."""
        return pl.concat(self.frames, rechunk=True)

    def pairs_frame(self) -> pl.DataFrame:
        return pl.concat(self.pairs)

    def repeated_key(self) -> bool:
        """Whether two parts' rows (or two rows of a part) may share a (sample_id, trial):
        two equal hashes, which the store is then asked about."""
        keys = np.sort(np.concatenate(self.keys), kind="stable")  # sorted runs: merged
        return bool((keys[1:] == keys[:-1]).any())


def _frame(rows: pl.DataFrame | pa.Table) -> pl.DataFrame:
    """A part's rows (see :class:`PartResult`) as a Polars frame."""
    if isinstance(rows, pl.DataFrame):
        return rows
    frame = pl.from_arrow(rows)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _table(rows: pl.DataFrame | pa.Table) -> pa.Table:
    """A part's rows (see :class:`PartResult`) as an Arrow table."""
    return rows if isinstance(rows, pa.Table) else rows.to_arrow()


def _large_strings(table: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
    """``table`` in ``schema`` (its own if none), with texts as Arrow's large strings, as the
    scores files have held them from the first (Polars may hand out views or plain strings):
    a file's bytes do not depend on which path wrote it. Cast only where a type differs
    (a cast imports pyarrow.compute: see tcbreplay._score.texts)."""
    text = (pa.types.is_string_view, pa.types.is_string)
    target = pa.schema(
        pa.field(f.name, pa.large_string()) if any(t(f.type) for t in text) else f
        for f in (table.schema if schema is None else schema)
    )
    return table if table.schema.equals(target) else table.cast(target)
