"""A scoring's results: computed scores, and their files written in the run folder (read
back by :mod:`tcbreplay._score.read_results`).

A scoring writes ``scores.parquet``, ``pairs.parquet`` and the dashboard file under
temporary names, then ``summary.json`` (with its audit record) last: its presence marks a
complete scoring. The default scorer writes them part by part as the parts come
(:class:`tcbreplay._score.results_writer.ResultsWriter`); the others from the whole run's
results (:func:`write_results`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tcbreplay import _json
from tcbreplay._score.dashboard import (
    dashboard_path,
    dashboard_record,
    write_dashboard,
)
from tcbreplay._score.flat_calls import CallTables, FlatCalls
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.result_hashes import seal, write_frame_hashed
from tcbreplay._store.files import json_text, staged
from tcbreplay._store.locks import WRITABLE_HINT
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import SCORES_SCHEMA


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
    flat: list[FlatCalls] = field(default_factory=list)
    by_tool: list[dict[str, Any]] | None = None
    by_category: list[dict[str, Any]] = field(default_factory=list)
    pairs: pl.DataFrame | None = None
    _tables: CallTables | None = None

    @property
    def tables(self) -> CallTables:
        if self._tables is None:
            self._tables = _joined_tables([flat.tables() for flat in self.flat])
        return self._tables

    def parts(self) -> list[FlatCalls]:
        """The run's calls in consecutive ranges of samples, in sample order: the parts
        scored, or one range of the tables (as the original evaluator leaves them)."""
        if self.flat or self._tables is None:
            return self.flat
        return [FlatCalls.of_tables(self._tables)]


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


def _joined_tables(tables: list[CallTables]) -> CallTables:
    """Call tables of consecutive ranges of samples, their ``s`` numbered run-wide."""
    if len(tables) == 1:
        return tables[0]
    offsets = np.cumsum([0] + [t.samples.height for t in tables])[:-1].tolist()

    def shifted(side: str) -> pl.DataFrame:
        frames = [getattr(t, side) for t in tables]
        return pl.concat(
            [f.with_columns(pl.col("s") + k) for f, k in zip(frames, offsets, strict=True)]
        )

    return CallTables(
        samples=pl.concat([t.samples.drop("s") for t in tables]).with_row_index("s"),
        agent=shifted("agent"),
        gold=shifted("gold"),
    )
