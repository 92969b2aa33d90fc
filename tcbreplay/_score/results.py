"""A scoring's results: computed scores, their files in the run folder, and reading them back.

A scoring writes ``scores.parquet``, ``pairs.parquet`` and the dashboard file under
temporary names, then ``summary.json`` (with its audit record) last: its presence marks a
complete scoring.
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import _json
from tcbreplay._score import translate
from tcbreplay._score.audit_record import AUDITED_FILES
from tcbreplay._score.dashboard import dashboard_path, write_dashboard
from tcbreplay._score.options import ScoreOptions
from tcbreplay._store.files import json_text, staged
from tcbreplay._store.locks import WRITABLE_HINT
from tcbreplay._store.parquet import read_table, write_frame_to
from tcbreplay._store.runs import DEFAULT_STORE, Run
from tcbreplay._store.schema import SCORES_SCHEMA
from tcbreplay.errors import InputError, StoreError, first_line


def rescore_hint(run: Run, scoring: str) -> str | None:
    """The command that writes the run's scoring folder ``scoring`` again."""
    options = ScoreOptions.from_scoring(scoring)
    if options is None:
        return None
    store = run.dir.parent
    where = "" if store == Path(DEFAULT_STORE) else f" --store {shlex.quote(str(store))}"
    flags = options.score_flags()
    return f"score it again: tcbreplay score {shlex.quote(run.run_id)}{flags}{where}"


def read_summary(run: Run, folder: Path) -> tuple[dict[str, Any], ScoreOptions]:
    """A stored scoring's summary.json and the options it was scored with, checked for the
    shape its readers rely on."""
    path = folder / "summary.json"
    hint = rescore_hint(run, folder.name)
    try:
        summary = _json.loads(path.read_text())
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        raise StoreError(f"{path}: unreadable summary ({first_line(exc)})", hint=hint) from exc
    if not isinstance(summary, dict):
        raise StoreError(f"{path}: not a scoring summary (not a JSON object)", hint=hint)
    for key in ("options", "audit"):
        if summary.get(key) is not None and not isinstance(summary[key], dict):
            raise StoreError(f"{path}: {key} is not an object", hint=hint)
    hashes = (summary.get("audit") or {}).get("inputs_sha256")
    if hashes is not None and not (
        isinstance(hashes, dict)
        and all(name in AUDITED_FILES and isinstance(v, str) for name, v in hashes.items())
    ):
        raise StoreError(
            f"{path}: audit.inputs_sha256 is not the sha256 of {', '.join(AUDITED_FILES)}",
            hint=hint,
        )
    try:
        options = ScoreOptions.from_dict(summary.get("options") or {})
    except (InputError, TypeError) as exc:
        raise StoreError(f"{path}: options: {first_line(exc)}", hint=hint) from exc
    return summary, options


def read_scoring_file(run: Run, path: Path, columns: list[str]) -> pl.DataFrame:
    """A stored scoring's Parquet file (scores or pairs), with at least ``columns``."""
    hint = rescore_hint(run, path.parent.name)
    try:
        # read by Arrow, which reports a corrupt file where Polars may panic
        frame = pl.from_arrow(read_table(path))
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise StoreError(
            f"{path}: not a readable Parquet file ({first_line(exc)})", hint=hint
        ) from exc
    assert isinstance(frame, pl.DataFrame)
    if "trial" not in frame.columns and "sample_id" in frame.columns:
        # scored before trials (store version 1): every row is trial 0
        at = frame.columns.index("sample_id") + 1
        frame = frame.insert_column(at, pl.Series("trial", [0] * frame.height, pl.Int32))
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise StoreError(f"{path}: no column {', '.join(missing)}", hint=hint)
    return frame


def write_results(
    run: Run, options: ScoreOptions, scored: Scored, scores: pl.DataFrame,
    summary: dict[str, Any], dashboard: str, result: ScoreResult,
) -> None:  # fmt: skip
    """Write the result files side by side (Arrow, Polars and DuckDB release the GIL), one
    scoring process at a time."""
    with run.writing_results():
        _write_files(run, options, scored, scores, summary, dashboard, result)


def _write_files(
    run: Run, options: ScoreOptions, scored: Scored, scores: pl.DataFrame,
    summary: dict[str, Any], dashboard: str, result: ScoreResult,
) -> None:  # fmt: skip
    folder = run.scores_dir(options.scoring)
    result.scores_path = folder / "scores.parquet"
    dashboard_file = dashboard_path(run) if dashboard != "none" else None
    # every file under a temporary name until all are whole: a full disk, or a kill, leaves
    # the results of the scoring before as they were (and no scores without their summary);
    # a failure removes the folders made for them
    with staged(hint=WRITABLE_HINT) as files:
        for place in [folder] + ([dashboard_file.parent] if dashboard_file else []):
            files.folder(place)
        with ThreadPoolExecutor(max_workers=3) as pool:
            # derived results, rewritten by every scoring: fast compression
            frame = scores.cast(_scores_dtypes())
            jobs = [pool.submit(files.write, result.scores_path, partial(write_frame_to, frame))]
            if scored.pairs is not None:
                pairs = partial(write_frame_to, scored.pairs)
                jobs.append(pool.submit(files.write, folder / "pairs.parquet", pairs))
            if dashboard_file is not None:
                parts = scored.parts()
                write = partial(write_dashboard, run, scores, parts, summary, dashboard)
                jobs.append(pool.submit(files.write, dashboard_file, write))
            for job in jobs:
                job.result()
        # the summary last: its presence marks a complete scoring
        text = json_text(summary)
        files.write(folder / "summary.json", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    result.dashboard_path = dashboard_file


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


@dataclass
class ScoreResult:
    """A scored run: the summary, the per-sample scores, and where they were written."""

    run_id: str
    summary: dict[str, Any]
    scores: pl.DataFrame
    scores_path: Path | None = None
    dashboard_path: Path | None = None
    pairs: pl.DataFrame | None = None
    # what a reader of the metrics must know first: samples in error, a partial run
    warnings: list[str] = field(default_factory=list)


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
