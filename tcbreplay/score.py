"""Score a stored run: translate its raw messages, compute the metrics, write the results.

Scoring reads the run directory only (no LLM, tools module, dataset file or
network) and imports neither LangChain nor LangGraph. Two scorers exist:
``spec`` (the metric spec in the README) and ``abet`` (the original benchmark's
evaluator, see :mod:`tcbreplay.abet`).
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import __version__, abet, translate
from tcbreplay.arguments import decide_nested, defaults_table, judge_pairs, typed_values
from tcbreplay.audit import audit_record
from tcbreplay.cores import usable_cores
from tcbreplay.dashboard import write_dashboard
from tcbreplay.errors import InputError, StoreError, TcbReplayWarning
from tcbreplay.metrics import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
    NameScores,
    choose_pairs,
    name_scores,
    summarize,
)
from tcbreplay.sql import SCORES_SCHEMA, connect, connect_tables
from tcbreplay.store import (
    JOURNAL,
    Run,
    Store,
    utcnow,
    write_frame,
    write_json_atomic,
    write_table,
)

DASHBOARD_MODES = ("mismatches", "all", "none")
SCORERS = ("spec", "abet")


@dataclass(frozen=True)
class ScoreOptions:
    """Scoring options; each combination gets its own results folder."""

    scorer: str = "spec"
    rel_tol: float = DEFAULT_REL_TOL
    abs_tol: float = DEFAULT_ABS_TOL

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise InputError(f"--scorer {self.scorer!r}: choose one of {', '.join(SCORERS)}")
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise InputError("--rel-tol and --abs-tol must not be negative")

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
    def from_dict(cls, obj: dict[str, Any]) -> ScoreOptions:
        return cls(
            scorer=obj.get("scorer", "spec"),
            rel_tol=obj.get("rel_tol", DEFAULT_REL_TOL),
            abs_tol=obj.get("abs_tol", DEFAULT_ABS_TOL),
        )


@dataclass
class Scored:
    """What a scorer computes: per-sample scores, run-level numbers, breakdowns, agent calls."""

    scores: pl.DataFrame
    metrics: dict[str, Any]
    tables: translate.CallTables
    by_tool: list[dict[str, Any]] | None = None
    by_category: list[dict[str, Any]] = field(default_factory=list)
    pairs: pl.DataFrame | None = None


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
    check_scorable(run, allow_incomplete)
    audit = audit_record(run, options.to_dict())  # hashes files in a thread meanwhile
    parts = _parts(run, options)
    # parts run side by side, so each gets its share of the cores
    con = connect(runs=[run], with_scores=False, threads=max(1, usable_cores() // parts))
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
    """Write the result files side by side (Arrow, Polars and DuckDB release the GIL)."""
    folder = run.scores_dir(options.scoring)
    result.scores_path = folder / "scores.parquet"
    with ThreadPoolExecutor(max_workers=3) as pool:
        # derived results, rewritten by every scoring: fast compression
        jobs = [
            pool.submit(
                write_table, scores.to_arrow().cast(SCORES_SCHEMA), result.scores_path, level=1
            )
        ]
        if scored.pairs is not None:
            jobs.append(pool.submit(write_frame, scored.pairs, folder / "pairs.parquet"))
        board = None
        if dashboard != "none":
            board = pool.submit(write_dashboard, run, scores, scored.tables, summary, dashboard)
        for job in jobs:
            job.result()
        if board is not None:
            result.dashboard_path = board.result()
    # the summary last: its presence marks a complete scoring
    write_json_atomic(folder / "summary.json", summary)


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


def compute_scores(
    con: Any, specs: list[dict[str, Any]], options: ScoreOptions, parts: int | None = None
) -> Scored:
    """Score the run bound to ``con`` (with ``specs``, its tools) with the chosen scorer.

    The spec scorer cuts a large run into ``parts`` ranges of samples (by default one per
    core) scored side by side, each on its own cursor: every number is per sample, so the
    parts join into exactly the one-part result.
    """
    if options.scorer == "abet":
        return _abet_scores(translate.load_calls(con, translate.split_samples(con, 1)[0]))
    if parts is None:
        parts = _parts_for(con.execute("select count(*) from samples").fetchone()[0])
    ranges = translate.split_samples(con, parts)
    if len(ranges) == 1:
        return _joined([_spec_part(con, ranges[0], specs, options)])
    cursors = [con.cursor() for _ in ranges]
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=len(ranges))
    jobs: list[Future] = []
    try:
        for cursor, samples in zip(cursors, ranges, strict=True):
            jobs.append(pool.submit(_spec_part, cursor, samples, specs, options, stop))
        # polled, not waited on: Ctrl-C reaches the main thread (the only one to raise
        # KeyboardInterrupt) within moments even when the kernel hands the signal to a
        # part's thread, and no lock of the futures is ever held by this thread
        while not _settled(jobs):
            time.sleep(0.1)
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
    """How many parts the run is scored in: one per core for a large run (spec scorer)."""
    if options.scorer != "spec":
        return 1
    import pyarrow.parquet as pq

    try:
        samples = pq.read_metadata(run.samples_path).num_rows
    except (OSError, pa.ArrowInvalid):
        return 1  # opening the run's views reports what is wrong with the file
    return _parts_for(samples)


def _parts_for(samples: int) -> int:
    return usable_cores() if samples >= SPLIT_MIN_SAMPLES else 1


@dataclass
class _Part:
    """The spec scorer's results for one range of samples (``s`` local to it)."""

    scores: pl.DataFrame
    tables: translate.CallTables
    tool_counts: pl.DataFrame
    pairs: pl.DataFrame


def _spec_part(
    con: Any, samples: tuple[int, int], specs: list[dict[str, Any]], options: ScoreOptions,
    stop: threading.Event | None = None,
) -> _Part:  # fmt: skip
    tables = translate.load_calls(con, samples)
    _go_on(stop)
    return _spec_scores(con, tables, specs, options, stop)


def _settled(jobs: list[Future]) -> bool:
    """Every part is done, or one has failed."""
    done = [job for job in jobs if job.done()]
    return len(done) == len(jobs) or any(job.exception() is not None for job in done)


class _Stopped(Exception):
    """A part given up because another part failed or scoring was interrupted."""


def _go_on(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped


def _joined(parts: list[_Part]) -> Scored:
    """The parts (in sample order) as one run's results."""
    scores = pl.concat([p.scores for p in parts], rechunk=True)  # sums as over one part
    return Scored(
        scores=scores,
        metrics=summarize(scores),
        tables=_joined_tables([p.tables for p in parts]),
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


def _spec_scores(
    con: Any, tables: translate.CallTables, specs: list[dict[str, Any]], options: ScoreOptions,
    stop: threading.Event | None = None,
) -> _Part:  # fmt: skip
    samples, agent, gold = tables.samples, tables.agent, tables.gold
    n = samples.height
    # tool names as integer codes (the tools' own names included, for their parameters)
    declared = pl.Series([spec["name"] for spec in specs], dtype=pl.String)
    names = pl.Enum(pl.concat([agent["name"], gold["name"], declared]).unique().sort())
    agent = agent.with_columns(pl.col("name").cast(names).to_physical().alias("code"))
    gold = gold.with_columns(pl.col("name").cast(names).to_physical().alias("code"))
    with ThreadPoolExecutor(max_workers=1) as pool:  # Polars and numpy release the GIL
        pending = pool.submit(_args_ids, agent["args"], gold["args"])
        a_s, g_s = agent["s"].to_numpy(), gold["s"].to_numpy()
        named = name_scores(n, a_s, agent["code"].to_numpy(), g_s, gold["code"].to_numpy())
        ids, args = pending.result()
    agent = agent.with_columns(ids.slice(0, agent.height).alias("args_id"))
    gold = gold.with_columns(ids.slice(agent.height).alias("args_id"))
    _go_on(stop)
    pairs = _candidate_pairs(agent, gold, named)
    pairs = _pair_stats(con, pairs, args, specs, names, options)
    _go_on(stop)
    pairs = pairs.filter(pl.Series(choose_pairs(pairs, named.n_agent, named.n_gold, named.same)))
    pairs = pairs.sort("s", "i")  # in call order, however the part was cut
    s = pairs["s"].to_numpy()

    def per_sample(column: str | None) -> np.ndarray:
        weights = None if column is None else pairs[column].to_numpy().astype(np.int64)
        return np.bincount(s, weights=weights, minlength=n).astype(np.int64)

    invalid, valid = per_sample("invalid"), per_sample("valid")
    total = invalid + valid
    with np.errstate(divide="ignore", invalid="ignore"):
        ahr = np.where(total > 0, invalid / np.maximum(total, 1), np.nan)
    scores = pl.DataFrame(
        {
            "sample_id": samples["sample_id"],
            "sample_index": samples["sample_index"],
            "category": samples["category"],
            "status": samples["status"],
            "n_gold": pl.Series(named.n_gold, dtype=pl.Int32),
            "n_agent": pl.Series(named.n_agent, dtype=pl.Int32),
            "tsa": pl.Series(named.tsa, dtype=pl.Float64).fill_nan(None),
            "tp": pl.Series(named.tp, dtype=pl.Float64),
            "ahr": pl.Series(ahr, dtype=pl.Float64).fill_nan(None),
            "args_invalid": invalid,
            "args_total": total,
            "args_missing": per_sample("missing"),
            "pairs": pl.Series(per_sample(None), dtype=pl.Int32),
        }
    )
    chosen = pairs.select(
        samples["sample_id"].gather(pairs["s"]).alias("sample_id"),
        pl.col("i").alias("agent_index"),
        pl.col("j").alias("gold_index"),
        names.categories.gather(pairs["tool"]).alias("tool"),
        pl.col("invalid").alias("args_invalid"),
        pl.col("valid").alias("args_valid"),
        pl.col("missing").alias("args_missing"),
    )
    return _Part(
        scores=scores,
        tables=tables,
        tool_counts=_tool_counts(agent, gold, pairs, names),
        pairs=chosen,
    )


def _args_ids(agent_args: pl.Series, gold_args: pl.Series) -> tuple[pl.Series, pl.DataFrame]:
    """One id per distinct arguments text, shared by agent and gold calls: the ids of
    ``agent_args`` then ``gold_args``, and the distinct texts (``id``, ``args``)."""
    # categories of this call's own (parts scored side by side share no string table)
    texts = pl.concat([agent_args, gold_args]).cast(pl.Categorical(pl.Categories.random()))
    distinct = texts.unique()
    return texts.to_physical(), pl.DataFrame(
        {"id": distinct.to_physical(), "args": distinct.cast(pl.String)}
    )


def _candidate_pairs(agent: pl.DataFrame, gold: pl.DataFrame, named: NameScores) -> pl.DataFrame:
    """Agent and gold calls of the same sample and name that the pairing may choose.

    Where a sample's name sequences are equal, the only pairing with the most pairs
    is call by call, so only those pairs are candidates; elsewhere, the same-name pairs
    that lie on a longest common subsequence of the two name sequences
    (``named.pair_*``), since a pairing with the most pairs is such a subsequence.
    """
    a_same = pl.Series(named.same[agent["s"].to_numpy()])
    g_same = pl.Series(named.same[gold["s"].to_numpy()])
    # the calls of equal-sequence samples line up row by row (both sorted by sample, index)
    a_diag, g_diag = agent.filter(a_same), gold.filter(g_same)
    # calls are sorted by (sample, index): a call's row is its sample's first row + index
    a_row = (np.cumsum(named.n_agent) - named.n_agent)[named.pair_s] + named.pair_i
    g_row = (np.cumsum(named.n_gold) - named.n_gold)[named.pair_s] + named.pair_j
    return pl.concat(
        [
            pl.DataFrame(
                {
                    "s": a_diag["s"],
                    "i": a_diag["i"],
                    "j": g_diag["j"],
                    "tool": a_diag["code"],
                    "a_id": a_diag["args_id"],
                    "g_id": g_diag["args_id"],
                }
            ),
            pl.DataFrame(
                {
                    "s": named.pair_s,
                    "i": named.pair_i,
                    "j": named.pair_j,
                    "tool": agent["code"].gather(a_row),
                    "a_id": agent["args_id"].gather(a_row),
                    "g_id": gold["args_id"].gather(g_row),
                }
            ),
        ]
    )


def _pair_stats(
    con: Any, pairs: pl.DataFrame, args: pl.DataFrame, specs: list[dict[str, Any]],
    names: pl.Enum, options: ScoreOptions,
) -> pl.DataFrame:  # fmt: skip
    """Per candidate pair: the agent's invalid and valid arguments, gold keys left out."""
    kv = typed_values(translate.arg_values(con, args))
    defaults = defaults_table(specs).with_columns(
        pl.col("name").cast(names).to_physical().alias("tool")
    )
    judged = judge_pairs(pairs, kv, defaults.drop("name"), options.rel_tol, options.abs_tol)
    if (judged["undecided"] > 0).any():
        judged = decide_nested(judged, args, specs, names, options.rel_tol, options.abs_tol)
    return judged.drop("undecided")


def _tool_counts(
    agent: pl.DataFrame, gold: pl.DataFrame, pairs: pl.DataFrame, names: pl.Enum
) -> pl.DataFrame:
    """Per tool name: gold and agent calls, chosen pairs and their argument counts (calls
    and ``pairs`` with ``code``/``tool``: codes of ``names``)."""
    gold_n = gold.group_by("code").agg(pl.len().alias("gold_calls"))
    agent_n = agent.group_by("code").agg(pl.len().alias("agent_calls"))
    paired = pairs.group_by(pl.col("tool").alias("code")).agg(
        pl.len().alias("paired"),
        pl.col("invalid").sum().alias("args_invalid"),
        (pl.col("invalid") + pl.col("valid")).sum().alias("args_total"),
        pl.col("missing").sum().alias("args_missing"),
    )
    table = (
        gold_n.join(agent_n, on="code", how="full", coalesce=True)
        .join(paired, on="code", how="left")
        .fill_null(0)
    )
    return table.select(
        names.categories.gather(table["code"]).alias("tool"),
        pl.exclude("code").cast(pl.Int64),
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


def _by_category(scores: pl.DataFrame) -> list[dict[str, Any]]:
    """Per dataset category: the run-level numbers of its samples."""
    if scores["category"].null_count() == scores.height:
        return []
    table = (
        scores.group_by("category")
        .agg(
            pl.len().alias("n_samples"),
            pl.col("tsa").mean().alias("tsa"),
            pl.col("tp").mean().alias("tp"),
            (pl.col("args_invalid").sum() / pl.col("args_total").sum()).alias("ahr"),
        )
        .with_columns(pl.col("ahr").fill_nan(None))
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
        agent_by.setdefault(s, []).append((name, json.loads(args)))
    gold_by: dict[int, list[tuple[str, Any]]] = {}
    for s, name, args in tables.gold.select("s", "name", "args").iter_rows():
        gold_by.setdefault(s, []).append((name, json.loads(args)))
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
    return Scored(scores=scores, metrics=metrics, tables=tables, by_category=_by_category(scores))
