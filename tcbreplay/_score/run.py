"""Score a stored run: translate its raw messages, compute the metrics, write the results.

Scoring reads the run directory only (no LLM, tools module, dataset file or
network) and imports neither LangChain nor LangGraph. Three scorers exist: ``spec``,
the default (the metric spec, docs/metrics.md; :mod:`tcbreplay._score.scorers.default`),
``abet`` (the original benchmark's evaluator, see :mod:`tcbreplay._score.scorers.abet`) and
``bfcl`` (the Berkeley Function Calling Leaderboard's AST checker,
:mod:`tcbreplay._score.scorers.bfcl`).
"""

from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay._machine import usable_cores
from tcbreplay._score import translate
from tcbreplay._score.audit_record import audit_record
from tcbreplay._score.exact_match import summarize_exact_match
from tcbreplay._score.gold_run import gold_calls, use_gold
from tcbreplay._score.metrics import summarize, trial_summary
from tcbreplay._score.options import DASHBOARD_MODES, ScoreOptions
from tcbreplay._score.results import (
    Scored,
    ScoreResult,
    category_breakdown,
    tool_breakdown,
    write_results,
)
from tcbreplay._score.roles import focus_tools, restrict, tool_roles
from tcbreplay._score.scorers.abet import score_tables_abet
from tcbreplay._score.scorers.bfcl import score_run_bfcl
from tcbreplay._score.scorers.default import ScoredPart, score_part
from tcbreplay._store.runs import Run, Store
from tcbreplay._store.schema import DEFAULT_SCORER, JOURNAL, SCORES_SCHEMA, utcnow
from tcbreplay._store.views import connect, connect_tables, query_text
from tcbreplay._version import __version__
from tcbreplay.errors import InputError, StoreError, TcbReplayWarning


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
        return _score_run(run, options, allow_incomplete, write, dashboard, store)


def _score_run(
    run: Run, options: ScoreOptions, allow_incomplete: bool, write: bool, dashboard: str,
    store: Store | None = None,
) -> ScoreResult:  # fmt: skip
    check_scorable(run, allow_incomplete)
    gold = None
    if options.gold_run is not None:
        gold = gold_calls(store or Store(run.dir.parent), run, options.gold_run)
    audit = audit_record(run, options.to_dict())  # hashes files in a thread meanwhile
    parts = _parts(run, options)
    # parts run side by side, a worker per core, so each gets its share of the cores
    con = connect(runs=[run], with_scores=False, threads=max(1, usable_cores() // _workers(parts)))
    absent = 0
    try:
        if gold is not None:
            absent = use_gold(con, gold)
        scored = compute_scores(con, tool_schemas(run), options, parts)
    finally:
        con.close()
    verdicts = [  # only the bfcl scorer gives a verdict per sample, the default one outcomes
        pl.lit(None, pl.Boolean).alias("exact"),
        pl.lit(None, pl.Boolean).alias("write_exact"),
        pl.lit(None, pl.Int32).alias("first_divergence"),
        pl.lit(None, pl.Boolean).alias("covered"),
        pl.lit(None, pl.Boolean).alias("valid"),
        pl.lit(None, pl.String).alias("error_type"),
    ]
    scores = scored.scores.with_columns(
        pl.lit(run.run_id).alias("run_id"),
        pl.lit(options.scoring).alias("scoring"),
        *(c for c in verdicts if c.meta.output_name() not in scored.scores.columns),
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
        **trial_summary(scores),
        "audit": audit.finish(scores),
    }
    result = ScoreResult(
        run_id=run.run_id,
        summary=summary,
        scores=scores,
        pairs=scored.pairs,
        warnings=recording_warnings(run, scored.metrics),
    )
    if absent:
        result.warnings.append(
            f"{absent} samples (or trials) of {run.run_id} are not in --gold-run "
            f"{options.gold_run} and score against no calls"
        )
    if options.scorer == "bfcl" or options.focused or options.gold_run or options.side != "agent":
        # the dashboard file has the original benchmark's metrics of every agent call against
        # the dataset's gold only
        dashboard = "none"
    if write:
        write_results(run, options, scored, scores, summary, dashboard, result)
    return result


def score_tables(
    samples: pa.Table,
    messages: pa.Table,
    tool_schemas: list[dict[str, Any]],
    options: ScoreOptions | None = None,
    *,
    parts: int | None = None,
) -> pl.DataFrame:
    """Per-sample scores of in-memory ``samples`` and ``messages`` tables (store schemas);
    ``parts``: see :func:`compute_scores`."""
    con = connect_tables(samples, messages)
    try:
        return compute_scores(con, tool_schemas, options or ScoreOptions(), parts).scores
    finally:
        con.close()


def tool_schemas(run: Run) -> list[dict[str, Any]]:
    """The run's tool schemas from its manifest (scoring needs their parameters)."""
    schemas = (run.manifest.get("tools") or {}).get("specs")
    if schemas is None:
        raise StoreError(f"{run.dir / 'manifest.json'}: no tools.specs, which scoring needs")
    return schemas


# how a run that scores without --allow-incomplete ended: every sample recorded, imported,
# or the samples asked for (record --limit, --sample-id)
SCORABLE = ("complete", "imported", "partial")


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
    if status not in SCORABLE and not allow_incomplete:
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


def recording_warnings(run: Run, metrics: dict[str, Any]) -> list[str]:
    """What a reader must know before the metrics: samples that ended in error while
    recording (they score as agents that made no calls), a partial or unfinished run."""
    out = []
    n, errors = metrics.get("n_samples", 0), metrics.get("n_errors", 0)
    status = run.status
    replayed = run.manifest.get("source") == "replay"
    if replayed:
        diverged = int((run.manifest.get("totals") or {}).get("diverged") or 0)
        if diverged:
            out.append(
                f"{diverged} of {n} samples diverged from their recording and score with the "
                'calls made until then (tcbreplay sql "select * from divergences" says where)'
            )
        errors -= diverged
    if errors:
        imported = run.manifest.get("source") == "import"
        again = f"; re-run them with: {run.resume_command('--retry-errors')}"
        if replayed:
            again = f"; replay them again with: {run.resume_command()} --overwrite"
        out.append(
            f"{errors} of {n} samples "
            + ("are stored as errors or missing" if imported else "ended in error while recording")
            + " and score as samples without calls: these metrics do not measure the model alone"
            + ("" if imported else again)
        )
    total = (run.manifest.get("totals") or {}).get("samples")
    if status == "partial":
        out.append(
            f"partial run: {n} of {total} samples recorded; the metrics cover only those "
            f"({'replay' if replayed else 'record'} the rest with: {run.resume_command()})"
        )
    elif status not in SCORABLE:
        out.append(f"run {status}: {n} of {total} samples recorded, scored as they are")
    return out


# runs smaller than this are scored in one part
SPLIT_MIN_SAMPLES = 50_000
# how often the main thread looks whether the parts are done (a wake-up costs microseconds)
_POLL_S = 0.01


def compute_scores(
    con: Any, schemas: list[dict[str, Any]], options: ScoreOptions, parts: int | None = None
) -> Scored:
    """Score the run bound to ``con`` (with ``schemas``, its tools' schemas) with the chosen scorer.

    The default scorer cuts a large run into ``parts`` ranges of samples (by default two per
    core), scored a worker per core, each on its own cursor: every number is per sample, so
    the parts join into exactly the one-part result.
    """
    scored = _scored(con, schemas, options, parts)
    _check_unique_ids(scored.scores["sample_id"], scored.scores["trial"])
    return scored


def _check_unique_ids(ids: pl.Series, trials: pl.Series) -> None:
    """Refuse a run in which two rows share a sample_id and trial (stored scores, audits and
    comparisons key on them). Their 64-bit hashes are compared first, a fifth of the time of
    comparing the texts, which is done only when two hashes are equal."""
    # a trial moves the id's hash by a multiple of an odd constant: distinct for distinct trials
    mixed = ids.hash().to_numpy() + trials.cast(pl.UInt64).to_numpy() * np.uint64(
        0x9E3779B97F4A7C15
    )
    hashes = np.sort(mixed)
    if not (hashes[1:] == hashes[:-1]).any():
        return
    keys = pl.DataFrame({"sample_id": ids, "trial": trials})
    repeated = keys.filter(keys.is_duplicated())
    if repeated.height:
        sid, trial = repeated.row(0)
        raise StoreError(
            f"samples.parquet: sample_id {sid!r}, trial {trial} names more than one sample"
        )


def _scored(
    con: Any, schemas: list[dict[str, Any]], options: ScoreOptions, parts: int | None
) -> Scored:
    if options.scorer == "abet":
        return score_tables_abet(translate.load_calls(con, translate.split_samples(con, 1)[0]))
    if options.scorer == "bfcl":
        return score_run_bfcl(con)
    if parts is None:
        parts = _parts_for(con.execute("select count(*) from samples").fetchone()[0])
    ranges = translate.split_samples(con, parts)
    tools = translate.tools_table(con, schemas)
    roles, focus = _roles(con, schemas, options)
    if len(ranges) == 1:
        return _joined([_scored_part(con, ranges[0], tools, options, roles, focus)], roles, focus)
    cursors = [con.cursor() for _ in ranges]
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=_workers(len(ranges)))
    jobs: list[Future] = []
    try:
        for cursor, samples in zip(cursors, ranges, strict=True):
            jobs.append(
                pool.submit(_scored_part, cursor, samples, tools, options, roles, focus, stop)
            )
        # polled, not waited on: Ctrl-C reaches the main thread (the only one to raise
        # KeyboardInterrupt) within moments even when the kernel hands the signal to a
        # part's thread, and no lock of the futures is ever held by this thread; often,
        # since the last part's end is when the results can be joined and written
        while not _settled(jobs):
            time.sleep(_POLL_S)
        for job in jobs:  # a failed part raises before the others are waited for
            if job.done() and job.exception() is not None:
                job.result()
        return _joined([job.result() for job in jobs], roles, focus)
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
    """How many parts the run is scored in: two per core for a large run (the default scorer)."""
    if options.scorer != DEFAULT_SCORER:
        return 1
    from tcbreplay._store.parquet import read_metadata

    try:
        samples = read_metadata(run.samples_path).num_rows
    except (OSError, pa.ArrowInvalid):
        return 1  # opening the run's views reports what is wrong with the file
    return _parts_for(samples)


def _parts_for(samples: int) -> int:
    # two per core: a worker whose first part is done while another's still runs goes on
    # with a second, so the cores stay busy to the end (see BENCHMARKS.md)
    return 2 * usable_cores() if samples >= SPLIT_MIN_SAMPLES else 1


def _workers(parts: int) -> int:
    """Parts scored at once: one per core."""
    return min(parts, usable_cores())


# the tools a focused scoring keeps (or, exclude, leaves out); None: every tool
Focus = tuple[frozenset[str], bool] | None


def _roles(
    con: Any, schemas: list[dict[str, Any]], options: ScoreOptions
) -> tuple[dict[str, str], Focus]:
    """Each tool's role in this scoring (the schemas', the samples' own tools', ``--role``),
    and the tools of its focus."""
    try:
        own = con.execute(query_text("score_tool_roles")).fetchall()
    except duckdb.Error as exc:
        raise StoreError(f"samples.parquet: cannot read the samples' tools: {exc}") from exc
    roles = tool_roles(schemas, options.roles, own)
    focus = None
    if options.focused:
        known = [s.get("name") for s in schemas] + [name for name, _ in own]
        focus = focus_tools(options.only, options.without, roles, [n for n in known if n])
    return roles, focus


def _scored_part(
    con: Any, samples: tuple[int, int], tools: translate.Tools, options: ScoreOptions,
    roles: dict[str, str], focus: Focus = None, stop: threading.Event | None = None,
) -> ScoredPart:  # fmt: skip
    flat = translate.load_flat(con, samples, options.side)
    if focus is not None:  # every metric over the calls to the chosen tools only
        flat = restrict(flat, focus[0], exclude=focus[1])
    own_tools = None
    if flat.tools is not None:
        own_tools = translate.sample_tool_sets(con, flat.tools, flat.samples["sample_id"])
    _go_on(stop)
    part = score_part(flat, tools, options.compare, own_tools)
    writes = [name for name, role in roles.items() if role == "write"]
    if focus is not None:  # the write tools the focus keeps
        writes = [name for name in writes if (name in focus[0]) != focus[1]]
    if writes:  # write_exact: exact of the write calls alone, in any order
        _go_on(stop)
        only = score_part(restrict(flat, writes, order_free=True), tools, options.compare,
                          own_tools, covered=False)  # fmt: skip
        part.scores = part.scores.with_columns(only.scores["exact"].alias("write_exact"))
    return part


def _settled(jobs: list[Future]) -> bool:
    """Every part is done, or one has failed."""
    done = [job for job in jobs if job.done()]
    return len(done) == len(jobs) or any(job.exception() is not None for job in done)


class _Stopped(Exception):
    """A part given up because another part failed or scoring was interrupted."""


def _go_on(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped


def _joined(parts: list[ScoredPart], roles: dict[str, str], focus: Focus = None) -> Scored:
    """The parts (in sample order) as one run's results, scored with ``roles`` (and
    ``focus``: the tools kept, or left out)."""
    scores = pl.concat([p.scores for p in parts], rechunk=True)  # sums as over one part
    extra: dict[str, Any] = {"roles": roles}
    if focus is not None:
        extra["focus"] = {"exclude" if focus[1] else "tools": sorted(focus[0])}
    return Scored(
        scores=scores,
        metrics={**summarize(scores), **summarize_exact_match(scores), **extra},
        flat=[p.flat for p in parts],
        by_tool=tool_breakdown(pl.concat([p.tool_counts for p in parts])),
        by_category=category_breakdown(scores),
        pairs=pl.concat([p.pairs for p in parts]),
    )
