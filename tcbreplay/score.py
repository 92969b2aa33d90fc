"""Score a stored run: translate its raw messages, compute the metrics, write the results.

Scoring reads the run directory only (no LLM, tools module, dataset file or
network) and imports neither LangChain nor LangGraph. Two scorers exist:
``spec`` (the metric spec in the README) and ``abet`` (the original benchmark's
evaluator, see :mod:`tcbreplay.abet`).
"""

from __future__ import annotations

import math
import re
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import __version__, abet, spec, translate
from tcbreplay.audit import audit_record
from tcbreplay.cores import usable_cores
from tcbreplay.dashboard import write_dashboard
from tcbreplay.errors import InputError, StoreError, TcbReplayWarning
from tcbreplay.metrics import DEFAULT_ABS_TOL, DEFAULT_REL_TOL, summarize
from tcbreplay.sql import SCORES_SCHEMA, connect, connect_tables
from tcbreplay.store import (
    JOURNAL,
    Run,
    Store,
    utcnow,
    write_frame,
    write_json_atomic,
)

DASHBOARD_MODES = ("mismatches", "all", "none")
SCORERS = ("spec", "abet")
_TOLERANCES = re.compile(r"spec_rel-([^_]+)_abs-([^_]+)")


@dataclass(frozen=True)
class ScoreOptions:
    """Scoring options; each combination gets its own results folder."""

    scorer: str = "spec"
    rel_tol: float = DEFAULT_REL_TOL
    abs_tol: float = DEFAULT_ABS_TOL

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise InputError(f"--scorer {self.scorer!r}: choose one of {', '.join(SCORERS)}")
        for option, value in (("--rel-tol", self.rel_tol), ("--abs-tol", self.abs_tol)):
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{option} {value}: must be a finite number, not negative")

    @property
    def scoring(self) -> str:
        """The results folder: ``spec``, ``abet``, or ``spec_rel-<r>_abs-<a>``."""
        if self.scorer == "abet":
            return "abet"
        if (self.rel_tol, self.abs_tol) == (DEFAULT_REL_TOL, DEFAULT_ABS_TOL):
            return "spec"
        return f"spec_rel-{self.rel_tol:g}_abs-{self.abs_tol:g}"

    def to_dict(self) -> dict[str, Any]:
        if self.scorer == "abet":
            return {"scorer": "abet"}
        return {"scorer": "spec", "rel_tol": self.rel_tol, "abs_tol": self.abs_tol}

    @classmethod
    def from_scoring(cls, scoring: str) -> ScoreOptions | None:
        """The options a results folder's name stands for; None for a name none give."""
        if scoring in SCORERS:
            return cls(scorer=scoring)
        match = _TOLERANCES.fullmatch(scoring)
        if match is None:
            return None
        try:
            options = cls(rel_tol=float(match[1]), abs_tol=float(match[2]))
        except (ValueError, InputError):
            return None
        # only the options' own name (spec_rel-1e-09_abs-1e-09 is named spec)
        return options if options.scoring == scoring else None

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ScoreOptions:
        return cls(
            scorer=obj.get("scorer", "spec"),
            rel_tol=obj.get("rel_tol", DEFAULT_REL_TOL),
            abs_tol=obj.get("abs_tol", DEFAULT_ABS_TOL),
        )


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


def score_run(
    store: Store,
    run_id: str,
    options: ScoreOptions | None = None,
    *,
    allow_incomplete: bool = False,
    write: bool = True,
    dashboard: str = "mismatches",
) -> ScoreResult:
    """Score one run from its raw traces; write per-sample scores, summary and dashboard file."""
    options = options or ScoreOptions()
    if dashboard not in DASHBOARD_MODES:
        raise InputError(f"--dashboard {dashboard!r}: choose one of {', '.join(DASHBOARD_MODES)}")
    run = store.open_run(run_id)
    with run.reading():  # no record --overwrite meanwhile
        return _score_run(run, options, allow_incomplete, write, dashboard)


def _score_run(
    run: Run, options: ScoreOptions, allow_incomplete: bool, write: bool, dashboard: str
) -> ScoreResult:
    check_scorable(run, allow_incomplete)
    audit = audit_record(run, options.to_dict())  # hashes files in a thread meanwhile
    parts = _parts(run, options)
    # parts run side by side, a worker per core, so each gets its share of the cores
    con = connect(runs=[run], with_scores=False, threads=max(1, usable_cores() // _workers(parts)))
    try:
        scored = compute_scores(con, tool_specs(run), options, parts)
    finally:
        con.close()
    scores = scored.scores.with_columns(
        pl.lit(run.run_id).alias("run_id"), pl.lit(options.scoring).alias("scoring")
    ).select(SCORES_SCHEMA.names)
    summary = {
        "run_id": run.run_id,
        **scored.metrics,
        "scoring": options.scoring,
        "options": options.to_dict(),
        "model": (run.manifest.get("model") or {}).get("id"),
        "simulated": bool((run.manifest.get("model") or {}).get("simulated")),
        "run_status": run.status,
        "scored_at": utcnow().isoformat(),
        "toolkit_version": __version__,
        "by_tool": scored.by_tool,
        "by_category": scored.by_category,
        "audit": audit.finish(scores),
    }
    result = ScoreResult(run_id=run.run_id, summary=summary, scores=scores, pairs=scored.pairs)
    if write:
        _write_results(run, options, scored, scores, summary, dashboard, result)
    return result


def _write_results(
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
    with ThreadPoolExecutor(max_workers=3) as pool:
        # derived results, rewritten by every scoring: fast compression
        jobs = [pool.submit(write_frame, scores.cast(_scores_dtypes()), result.scores_path)]
        if scored.pairs is not None:
            jobs.append(pool.submit(write_frame, scored.pairs, folder / "pairs.parquet"))
        board = None
        if dashboard != "none":
            board = pool.submit(write_dashboard, run, scores, scored.parts(), summary, dashboard)
        for job in jobs:
            job.result()
        if board is not None:
            result.dashboard_path = board.result()
    # the summary last: its presence marks a complete scoring
    write_json_atomic(folder / "summary.json", summary)


@cache
def _scores_dtypes() -> dict[str, pl.DataType]:
    """The Polars types of the store's scores columns."""
    frame = pl.from_arrow(SCORES_SCHEMA.empty_table())
    assert isinstance(frame, pl.DataFrame)
    return dict(frame.schema)


def score_tables(
    samples: pa.Table,
    messages: pa.Table,
    tool_specs: list[dict[str, Any]],
    options: ScoreOptions | None = None,
    *,
    parts: int | None = None,
) -> pl.DataFrame:
    """Per-sample scores of in-memory ``samples`` and ``messages`` tables (store schemas);
    ``parts``: see :func:`compute_scores`."""
    con = connect_tables(samples, messages)
    try:
        return compute_scores(con, tool_specs, options or ScoreOptions(), parts).scores
    finally:
        con.close()


def tool_specs(run: Run) -> list[dict[str, Any]]:
    """The run's tool specs from its manifest (scoring needs their parameters)."""
    specs = (run.manifest.get("tools") or {}).get("specs")
    if specs is None:
        raise StoreError(f"{run.dir / 'manifest.json'}: no tools.specs, which scoring needs")
    return specs


def check_scorable(run: Run, allow_incomplete: bool) -> None:
    """Refuse runs with nothing stored, and unfinished runs unless allowed; say so when
    finished samples wait in the journal, where scoring does not read."""
    status = run.status
    waiting = run.unfolded_records()
    journal = (
        f"{waiting} finished samples wait in {JOURNAL}, which `record --resume` folds into "
        "the Parquet files that scoring reads"
        if waiting
        else ""
    )
    if not run.has_data():
        raise StoreError(
            f"run {run.run_id!r} has no stored samples yet (status {status})"
            + (f": {journal}" if journal else ""),
            hint=f"finish it with: {run.resume_command()}",
        )
    if status not in ("complete", "imported") and not allow_incomplete:
        raise StoreError(
            f"run {run.run_id!r} is {status}: not every sample was recorded",
            hint=f"finish it with: {run.resume_command()}, "
            "or score what is there with --allow-incomplete",
        )
    if journal:
        warnings.warn(
            TcbReplayWarning(f"{journal}; run {run.run_id!r} is scored without them"),
            stacklevel=2,
        )


# runs smaller than this are scored in one part
SPLIT_MIN_SAMPLES = 50_000
# how often the main thread looks whether the parts are done (a wake-up costs microseconds)
_POLL_S = 0.01


def compute_scores(
    con: Any, specs: list[dict[str, Any]], options: ScoreOptions, parts: int | None = None
) -> Scored:
    """Score the run bound to ``con`` (with ``specs``, its tools) with the chosen scorer.

    The spec scorer cuts a large run into ``parts`` ranges of samples (by default two per
    core), scored a worker per core, each on its own cursor: every number is per sample, so
    the parts join into exactly the one-part result.
    """
    scored = _scored(con, specs, options, parts)
    _check_unique_ids(scored.scores["sample_id"])
    return scored


def _check_unique_ids(ids: pl.Series) -> None:
    """Refuse a run in which two samples share a sample_id (stored scores, audits and
    comparisons key on it). Their 64-bit hashes are compared first, a fifth of the time of
    comparing the texts, which is done only when two hashes are equal."""
    hashes = np.sort(ids.hash().to_numpy())
    if not (hashes[1:] == hashes[:-1]).any() or ids.n_unique() == len(ids):
        return
    repeated = ids.filter(ids.is_duplicated())[0]
    raise StoreError(f"samples.parquet: sample_id {repeated!r} names more than one sample")


def _scored(
    con: Any, specs: list[dict[str, Any]], options: ScoreOptions, parts: int | None
) -> Scored:
    if options.scorer == "abet":
        return _abet_scores(translate.load_calls(con, translate.split_samples(con, 1)[0]))
    if parts is None:
        parts = _parts_for(con.execute("select count(*) from samples").fetchone()[0])
    ranges = translate.split_samples(con, parts)
    tools = translate.tools_table(con, specs)
    if len(ranges) == 1:
        return _joined([_spec_part(con, ranges[0], tools, options)])
    cursors = [con.cursor() for _ in ranges]
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=_workers(len(ranges)))
    jobs: list[Future] = []
    try:
        for cursor, samples in zip(cursors, ranges, strict=True):
            jobs.append(pool.submit(_spec_part, cursor, samples, tools, options, stop))
        # polled, not waited on: Ctrl-C reaches the main thread (the only one to raise
        # KeyboardInterrupt) within moments even when the kernel hands the signal to a
        # part's thread, and no lock of the futures is ever held by this thread; often,
        # since the last part's end is when the results can be joined and written
        while not _settled(jobs):
            time.sleep(_POLL_S)
        for job in jobs:  # a failed part raises before the others are waited for
            if job.done() and job.exception() is not None:
                job.result()
        return _joined([job.result() for job in jobs])
    except BaseException:
        # Ctrl-C or a failed part: the other parts stop at their next step, and whatever
        # query a part runs (or starts next) is interrupted, until every part has stopped
        stop.set()
        _stop_parts(jobs, cursors)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for cursor in cursors:
            cursor.close()


def _stop_parts(jobs: list[Future], cursors: list[Any]) -> None:
    while not all(job.done() for job in jobs):
        try:
            for cursor in cursors:  # an interrupt only stops a query already running
                cursor.interrupt()
            time.sleep(0.05)
        except KeyboardInterrupt:  # Ctrl-C again: the parts are being stopped already
            continue


def _parts(run: Run, options: ScoreOptions) -> int:
    """How many parts the run is scored in: two per core for a large run (spec scorer)."""
    if options.scorer != "spec":
        return 1
    import pyarrow.parquet as pq

    try:
        samples = pq.read_metadata(run.samples_path).num_rows
    except (OSError, pa.ArrowInvalid):
        return 1  # opening the run's views reports what is wrong with the file
    return _parts_for(samples)


def _parts_for(samples: int) -> int:
    # two per core: a worker whose first part is done while another's still runs goes on
    # with a second, so the cores stay busy to the end (4 parts on 2 cores: 0.1-0.2 s
    # faster at 1M than 2, in interleaved runs)
    return 2 * usable_cores() if samples >= SPLIT_MIN_SAMPLES else 1


def _workers(parts: int) -> int:
    """Parts scored at once: one per core."""
    return min(parts, usable_cores())


def _spec_part(
    con: Any, samples: tuple[int, int], tools: translate.Tools, options: ScoreOptions,
    stop: threading.Event | None = None,
) -> spec.SpecPart:  # fmt: skip
    flat = translate.load_flat(con, samples)
    _go_on(stop)
    return spec.score_part(flat, tools, options.rel_tol, options.abs_tol)


def _settled(jobs: list[Future]) -> bool:
    """Every part is done, or one has failed."""
    done = [job for job in jobs if job.done()]
    return len(done) == len(jobs) or any(job.exception() is not None for job in done)


class _Stopped(Exception):
    """A part given up because another part failed or scoring was interrupted."""


def _go_on(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped


def _joined(parts: list[spec.SpecPart]) -> Scored:
    """The parts (in sample order) as one run's results."""
    scores = pl.concat([p.scores for p in parts], rechunk=True)  # sums as over one part
    return Scored(
        scores=scores,
        metrics=summarize(scores),
        flat=[p.flat for p in parts],
        by_tool=_by_tool(pl.concat([p.tool_counts for p in parts])),
        by_category=_by_category(scores),
        pairs=pl.concat([p.pairs for p in parts]),
    )


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


def _by_tool(counts: pl.DataFrame) -> list[dict[str, Any]]:
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


def _by_category(scores: pl.DataFrame, pooled_tsa: bool = False) -> list[dict[str, Any]]:
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


def _abet_scores(tables: translate.CallTables) -> Scored:
    """The original evaluator, sample by sample over ``json.loads``-ed arguments."""
    samples = tables.samples
    agent_by: dict[int, list[tuple[str, Any]]] = {}
    for s, name, args in tables.agent.select("s", "name", "args").iter_rows():
        agent_by.setdefault(s, []).append((name, translate.read_args(args)))
    gold_by: dict[int, list[tuple[str, Any]]] = {}
    for s, name, args in tables.gold.select("s", "name", "args").iter_rows():
        gold_by.setdefault(s, []).append((name, translate.read_args(args)))
    counts = [abet.sample_counts(agent_by.get(s, []), gold_by.get(s, [])) for s in samples["s"]]
    scores = samples.select("sample_id", "sample_index", "category", "status").with_columns(
        pl.Series("n_gold", [c["n_gold"] for c in counts], dtype=pl.Int32),
        pl.Series("n_agent", [c["n_agent"] for c in counts], dtype=pl.Int32),
        pl.Series(
            "tsa", [c["hits"] / c["n_gold"] if c["n_gold"] else None for c in counts], pl.Float64
        ),
        pl.Series("tp", [c["tp"] for c in counts], dtype=pl.Float64),
        pl.Series(
            "ahr",
            [c["args_invalid"] / c["args_total"] if c["args_total"] else None for c in counts],
            pl.Float64,
        ),
        pl.Series("args_invalid", [c["args_invalid"] for c in counts], dtype=pl.Int64),
        pl.Series("args_total", [c["args_total"] for c in counts], dtype=pl.Int64),
        pl.Series("args_missing", [None] * len(counts), dtype=pl.Int64),
        pl.Series("pairs", [c["pairs"] for c in counts], dtype=pl.Int32),
    )
    metrics = {**abet.summarize(counts), "n_errors": int((scores["status"] != "ok").sum())}
    by_category = _by_category(scores, pooled_tsa=True)
    return Scored(scores=scores, metrics=metrics, by_category=by_category, _tables=tables)
