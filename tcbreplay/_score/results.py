"""A scoring's results: computed scores, and their files written in the run folder (read
back by :mod:`tcbreplay._score.read_results`).

A scoring writes ``scores.parquet``, ``pairs.parquet`` and the dashboard file under
temporary names, then ``summary.json`` (with its audit record) last: its presence marks a
complete scoring. The default scorer writes them part by part as the parts come
(:class:`ResultsWriter`); the others from the whole run's results (:func:`write_results`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tcbreplay import _json
from tcbreplay._score import translate
from tcbreplay._score.dashboard import (
    BETWEEN,
    TAIL,
    dashboard_path,
    dashboard_record,
    head_text,
    write_dashboard,
)
from tcbreplay._score.exact_match import summarize_exact_match
from tcbreplay._score.fold import Tally
from tcbreplay._score.hashed_file import HashedFile
from tcbreplay._score.metrics import summarize
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.parts import PartResult, tool_sums
from tcbreplay._score.result_hashes import seal, write_frame_hashed
from tcbreplay._store.files import Staged, json_text, remove, staged
from tcbreplay._store.locks import WRITABLE_HINT
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import ROW_GROUP_ROWS, SCORES_SCHEMA


def write_results(
    run: Run, options: ScoreOptions, scored: Scored, scores: pl.DataFrame,
    summary: dict[str, Any], dashboard: str, result: ScoreResult,
) -> None:  # fmt: skip
    """Write the result files side by side (Arrow, Polars and DuckDB release the GIL), one
    scoring process at a time."""
    with run.writing_results() as check:
        _write_files(run, options, scored, scores, summary, dashboard, result, check)


def _write_files(
    run: Run, options: ScoreOptions, scored: Scored, scores: pl.DataFrame,
    summary: dict[str, Any], dashboard: str, result: ScoreResult, check: Callable[[], None],
) -> None:  # fmt: skip
    folder = run.scores_dir(options.scoring)
    result.scores_path = folder / "scores.parquet"
    dashboard_file = dashboard_path(run) if dashboard != "none" else None
    # every file under a temporary name until all are whole: a full disk, or a kill, leaves
    # the results of the scoring before as they were (and no scores without their summary);
    # a failure removes the folders made for them
    with staged(hint=WRITABLE_HINT, before_write=check) as files:
        for place in [folder] + ([dashboard_file.parent] if dashboard_file else []):
            files.folder(place)
        with ThreadPoolExecutor(max_workers=3) as pool:
            # derived results, rewritten by every scoring: fast compression
            frame = scores.cast(_scores_dtypes())
            # (each file's sha256 as it is written, for the audit record)
            hashed = {"scores.parquet": pool.submit(
                files.write, result.scores_path, partial(write_frame_hashed, frame)
            )}  # fmt: skip
            if scored.pairs is not None:
                pairs = partial(write_frame_hashed, scored.pairs)
                hashed["pairs.parquet"] = pool.submit(files.write, folder / "pairs.parquet", pairs)
            jobs: list[Future[Any]] = list(hashed.values())
            if dashboard_file is not None:
                parts = scored.parts()
                write = partial(write_dashboard, run, scores, parts, summary, dashboard)
                board = pool.submit(files.write, dashboard_file, write)  # (its sha256)
                jobs.append(board)
            for job in jobs:
                job.result()
        if dashboard_file is not None:
            summary["audit"]["dashboard"] = dashboard_record(dashboard_file, board.result())
        seal(summary, {name: job.result() for name, job in hashed.items()})
        # the summary last: its presence marks a complete scoring
        replaced = other_roles(folder, summary)
        if replaced:
            result.warnings.append(replaced)
        text = json_text(summary)
        files.write(folder / "summary.json", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    result.dashboard_path = dashboard_file


def other_roles(folder: Path, summary: dict[str, Any]) -> str | None:
    """The warning that the scoring stored in ``folder``, which this one replaces, had other
    roles (``--role`` does not name the folder: a focus on a role keeps other tools then), or
    None; it goes with the scoring's other warnings (``ScoreResult.warnings``)."""
    try:
        earlier = _json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none there (or unreadable: replaced as it is)
        return None
    old = earlier.get("roles") if isinstance(earlier, dict) else None
    if isinstance(old, dict) and old != (summary.get("roles") or {}):
        return (
            f"scores/{folder.name} held a scoring with other roles ({_roles_text(old)}); "
            f"this one's ({_roles_text(summary.get('roles') or {})}) replace it"
        )
    return None


def _roles_text(roles: dict[str, Any]) -> str:
    return ", ".join(f"{tool}={role}" for tool, role in sorted(roles.items())) or "none"


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
        self.flat: list[translate.FlatCalls] = []
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


@cache
def _scores_dtypes() -> pl.Schema:
    """The Polars types of the store's scores columns."""
    frame = pl.from_arrow(SCORES_SCHEMA.empty_table())
    assert isinstance(frame, pl.DataFrame)
    return frame.schema


def tool_breakdown(counts: pl.DataFrame) -> list[dict[str, Any]]:
    """Per tool name, the counts of :func:`_tool_counts` (of one or more parts), with AHR
    and recall."""
    table = (
        counts.group_by("tool")
        .agg(pl.exclude("tool").sum())
        .with_columns(
            (pl.col("args_invalid") / pl.col("args_total")).alias("ahr"),
            (pl.col("paired") / pl.col("gold_calls")).alias("recall"),
        )
        .with_columns(pl.col("ahr", "recall").fill_nan(None))
    )
    return _records(table.sort("tool"))


def category_breakdown(scores: pl.DataFrame, pooled_tsa: bool = False) -> list[dict[str, Any]]:
    """Per dataset category: the run-level numbers of its samples (``pooled_tsa``: tsa as
    hits over the category's gold calls, as the original evaluator pools it)."""
    if scores["category"].null_count() == scores.height:
        return []
    tsa = pl.col("tsa").mean()
    if pooled_tsa:  # a sample's hits = its tsa × its gold calls, an integer
        hits = (pl.col("tsa").fill_null(0) * pl.col("n_gold")).round()
        tsa = hits.sum() / pl.col("n_gold").sum()
    table = (
        scores.group_by("category")
        .agg(
            pl.len().alias("n_samples"),
            tsa.alias("tsa"),
            pl.col("tp").mean().alias("tp"),
            (pl.col("args_invalid").sum() / pl.col("args_total").sum()).alias("ahr"),
        )
        .with_columns(pl.col("tsa", "ahr").fill_nan(None))
        .sort("category", nulls_last=True)
    )
    return _records(table)


def _records(table: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in table.to_dicts():
        out.append(
            {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
        )
    return out


@dataclass
class Scored:
    """What a scorer computes: per-sample scores, run-level numbers, breakdowns, agent calls
    (``tables``: built from the parts' flat calls when first asked for)."""

    scores: pl.DataFrame
    metrics: dict[str, Any]
    flat: list[translate.FlatCalls] = field(default_factory=list)
    by_tool: list[dict[str, Any]] | None = None
    by_category: list[dict[str, Any]] = field(default_factory=list)
    pairs: pl.DataFrame | None = None
    _tables: translate.CallTables | None = None

    @property
    def tables(self) -> translate.CallTables:
        if self._tables is None:
            self._tables = _joined_tables([flat.tables() for flat in self.flat])
        return self._tables

    def parts(self) -> list[translate.FlatCalls]:
        """The run's calls in consecutive ranges of samples, in sample order: the parts
        scored, or one range of the tables (as the original evaluator leaves them)."""
        if self.flat or self._tables is None:
            return self.flat
        return [translate.FlatCalls.of_tables(self._tables)]


class ScoreResult:
    """A scored run: the summary, the per-sample scores, and where they were written.

    ``scores`` and ``pairs`` of a scoring written part by part are read back from its files
    when first asked for (a run of millions of samples is scored without holding them)."""

    def __init__(
        self,
        run_id: str,
        summary: dict[str, Any],
        scores: pl.DataFrame | None = None,
        scores_path: Path | None = None,
        dashboard_path: Path | None = None,
        pairs: pl.DataFrame | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        self.run_id = run_id
        self.summary = summary
        self._scores = scores
        self.scores_path = scores_path
        self.dashboard_path = dashboard_path
        self._pairs = pairs
        # what a reader of the metrics must know first: samples in error, a partial run
        self.warnings = warnings if warnings is not None else []

    @property
    def scores(self) -> pl.DataFrame:
        if self._scores is None:
            if self.scores_path is None:
                raise ValueError("a scoring without scores")
            self._scores = pl.read_parquet(self.scores_path)
        return self._scores

    @scores.setter
    def scores(self, frame: pl.DataFrame) -> None:
        self._scores = frame

    @property
    def pairs(self) -> pl.DataFrame | None:
        if self._pairs is None and self.scores_path is not None:
            path = self.scores_path.parent / "pairs.parquet"
            if path.exists():
                self._pairs = pl.read_parquet(path)
        return self._pairs

    @pairs.setter
    def pairs(self, frame: pl.DataFrame | None) -> None:
        self._pairs = frame


def _joined_tables(tables: list[translate.CallTables]) -> translate.CallTables:
    """Call tables of consecutive ranges of samples, their ``s`` numbered run-wide."""
    if len(tables) == 1:
        return tables[0]
    offsets = np.cumsum([0] + [t.samples.height for t in tables])[:-1].tolist()

    def shifted(side: str) -> pl.DataFrame:
        frames = [getattr(t, side) for t in tables]
        return pl.concat(
            [f.with_columns(pl.col("s") + k) for f, k in zip(frames, offsets, strict=True)]
        )

    return translate.CallTables(
        samples=pl.concat([t.samples.drop("s") for t in tables]).with_row_index("s"),
        agent=shifted("agent"),
        gold=shifted("gold"),
    )
