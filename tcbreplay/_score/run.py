"""Score a stored run: translate its raw messages, compute the metrics, write the results.

Scoring reads the run directory only (no LLM, tools module, dataset file or
network) and imports neither LangChain nor LangGraph. Three scorers exist: ``spec``,
the default (the metric spec, docs/metrics.md; :mod:`tcbreplay._score.scorers.default`),
``abet`` (the original benchmark's evaluator, see :mod:`tcbreplay._score.scorers.abet`) and
``bfcl`` (the Berkeley Function Calling Leaderboard's AST checker,
:mod:`tcbreplay._score.scorers.bfcl`).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import ExitStack
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay._machine import usable_cores
from tcbreplay._ray import check_engine, cluster_cpus, ray_session
from tcbreplay._score import fold, translate
from tcbreplay._score.audit_record import audit_record
from tcbreplay._score.engines import local_parts
from tcbreplay._score.gold_run import gold_calls, use_gold
from tcbreplay._score.metrics import trial_summary
from tcbreplay._score.options import DASHBOARD_MODES, ScoreOptions
from tcbreplay._score.parts import Focus, PartPlan, PartResult
from tcbreplay._score.results import Scored, ScoreResult, write_results
from tcbreplay._score.results_writer import PartSink, ResultsWriter
from tcbreplay._score.roles import focus_tools, tool_roles
from tcbreplay._score.scorable import check_scorable, recording_warnings
from tcbreplay._score.stored import stored_scoring
from tcbreplay._score.tool_params import tools_table
from tcbreplay._store.files import staged
from tcbreplay._store.locks import WRITABLE_HINT
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DEFAULT_SCORER, SCORES_SCHEMA, utcnow
from tcbreplay._store.views import connect, connect_tables, query_text
from tcbreplay._version import __version__
from tcbreplay.errors import InputError, StoreError, StoreWriteRefused, first_line


def score_run(
    store: Store,
    run_id: str,
    options: ScoreOptions | None = None,
    *,
    allow_incomplete: bool = False,
    write: bool = True,
    dashboard: str = "mismatches",
    engine: str = "local",
    ray_address: str | None = None,
    ray_keep: float | None = None,
    each_part: PartSink | None = None,
    retry: str | None = None,
) -> ScoreResult:
    """Score one run from its raw traces; write per-sample scores, summary and dashboard file.

    ``engine``: ``local`` scores the run's parts in threads of this process, ``ray`` as Ray
    tasks (``ray_address``: the cluster's; see :mod:`tcbreplay._ray`), with the same results;
    ``ray_keep``: the seconds its scorers stay on the cluster, idle, after it (default
    :data:`tcbreplay._score.on_ray.KEEP_S`; 0: they are stopped as it ends).
    ``each_part`` (with ``write=False``): each part's scores and pairs are handed to it in
    sample order as they come, and not kept (the result holds the summary only), so what is
    held does not grow with the run; a scorer that takes the whole run at once hands it the
    whole run's. ``retry``: the command an unfinished run's hint says to run with
    --allow-incomplete (default: this run's ``score``), as the caller's user typed it."""
    if each_part is not None and write:
        raise ValueError("each_part: the scores are handed over instead of written")
    options = options or ScoreOptions()
    if dashboard not in DASHBOARD_MODES:
        raise InputError(f"--dashboard {dashboard!r}: choose one of {', '.join(DASHBOARD_MODES)}")
    check_engine(engine, ray_address, ray_keep)
    if engine == "ray" and options.scorer != DEFAULT_SCORER:
        raise InputError(
            f"--engine ray scores with --scorer spec; --scorer {options.scorer} scores the "
            "whole run at once, on this machine",
            hint="leave out --engine ray",
        )
    run = store.open_run(run_id)
    with run.reading():  # no record --overwrite meanwhile
        return _score_run(
            run, options, allow_incomplete, write, dashboard, store, engine, ray_address,
            each_part, retry, ray_keep,
        )  # fmt: skip


def _score_run(
    run: Run, options: ScoreOptions, allow_incomplete: bool, write: bool, dashboard: str,
    store: Store | None = None, engine: str = "local", ray_address: str | None = None,
    each_part: PartSink | None = None, retry: str | None = None, ray_keep: float | None = None,
) -> ScoreResult:  # fmt: skip
    check_scorable(run, allow_incomplete, retry)
    gold = None
    if options.gold_run is not None:
        gold = gold_calls(store or Store(run.dir.parent), run, options.gold_run)
    # hashes files in a thread meanwhile
    audit = audit_record(run, options.to_dict(), run.scores_dir(options.scoring), strict=write)
    if options.scorer == "bfcl" or options.focused or options.gold_run or options.side != "agent":
        # the dashboard file has the original benchmark's metrics of every agent call against
        # the dataset's gold only
        dashboard = "none"
    if options.scorer != DEFAULT_SCORER:
        return _score_whole(run, options, write, dashboard, gold, audit, each_part)
    parts = _parts(run, options)
    # parts run side by side, a worker per core, so each gets its share of the cores
    threads = max(1, usable_cores() // _workers(parts))
    con = connect(runs=[run], traces_only=True, threads=threads)
    try:
        absent = use_gold(con, gold) if gold is not None else 0
        with ExitStack() as stack:
            if engine == "ray":
                ray = stack.enter_context(ray_session(ray_address))
                count = _parts_for(_samples(con), cluster_cpus(ray))
            else:
                count = _parts_for(_samples(con))
            plan, ranges = _plan(con, run, options, count, dashboard if write else "none")
            if engine == "ray":
                from tcbreplay._score.on_ray import KEEP_S, ray_parts  # (Ray's engine only)

                keep_s = KEEP_S if ray_keep is None else ray_keep
                source = ray_parts(ray, run, ranges, plan, gold, keep_s)
            else:
                source = local_parts(con, ranges, plan, _workers(len(ranges)))
            if not write:
                results = ResultsWriter(run, options, "none", None, each_part)
                _fold(source, results, con)
                summary = _summary(run, options, results, audit, plan)
                if each_part is not None:
                    return _result(run, summary, absent)
                scores = results.scores()
                return _result(run, summary, absent, scores=scores, pairs=results.pairs_frame())
            try:
                with (
                    run.writing_results() as check,
                    staged(hint=WRITABLE_HINT, before_write=check) as files,
                ):
                    results = ResultsWriter(run, options, plan.dashboard, files)
                    try:
                        _fold(source, results, con)
                        summary = _summary(run, options, results, audit, plan)
                        results.finish(summary)
                    finally:
                        results.close()
            except StoreWriteRefused as exc:
                if (stored := _stored_instead(run, options, audit, exc)) is None:
                    raise
                return stored
            found = _result(
                run, summary, absent, scores_path=results.scores_path,
                dashboard_path=results.dashboard_path,
            )  # fmt: skip
            if results.replaced_roles:
                found.warnings.append(results.replaced_roles)
            return found
    finally:
        con.close()


def _score_whole(
    run: Run, options: ScoreOptions, write: bool, dashboard: str, gold: pa.Table | None,
    audit: Any, each_part: PartSink | None = None,
) -> ScoreResult:  # fmt: skip
    """Score a run with a scorer that takes the whole run at once (abet, bfcl)."""
    con = connect(runs=[run], with_scores=False)
    absent = 0
    try:
        if gold is not None:
            absent = use_gold(con, gold)
        scored = compute_scores(con, tool_schemas(run), options)
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
        **_run_fields(run, options),
        "by_tool": scored.by_tool,
        "by_category": scored.by_category,
        **trial_summary(scores),
        "audit": audit.finish(scores),
    }
    if each_part is not None:
        each_part(scores, scored.pairs)
        return _result(run, summary, absent)
    result = _result(run, summary, absent, scores=scores, pairs=scored.pairs)
    if write:
        try:
            write_results(run, options, scored, scores, summary, dashboard, result)
        except StoreWriteRefused as exc:
            if (stored := _stored_instead(run, options, audit, exc)) is None:
                raise
            return stored
    return result


def _stored_instead(
    run: Run, options: ScoreOptions, audit: Any, refused: StoreWriteRefused
) -> ScoreResult | None:
    """The scoring stored for ``options``, said as such, when the store ``refused`` this
    scoring its writes (read-only credentials, a read-only mount) and the stored one is what
    it would have written (see :mod:`tcbreplay._score.stored`); None otherwise."""
    try:
        summary = stored_scoring(run, options, audit)
    except StoreError as exc:  # (a stored file not as written: never printed as stored)
        raise StoreError(
            f"{exc.message}; it cannot stand in for this scoring, whose writes the store "
            f"refuses ({first_line(refused)})",
            hint=exc.hint,
        ) from exc
    if summary is None:
        return None
    folder = run.scores_dir(options.scoring)
    found = _result(run, summary, 0, scores_path=folder / "scores.parquet")
    found.warnings.append(
        f"the store refuses this scoring's writes ({first_line(refused)}): these are the "
        f"results stored at {summary.get('scored_at', 'an earlier scoring')}, which scoring "
        "the run again would write again (the same files, options, SQL and toolkit version); "
        "the dashboard file is left as it is"
    )
    return found


def _fold(source: Generator[PartResult], results: ResultsWriter, con: Any) -> None:
    """Fold the parts in, then refuse a run in which two rows share a sample_id and trial
    (stored scores, audits and comparisons key on them)."""
    try:
        for part in source:
            results.add(part)
    finally:
        source.close()  # (parts still being scored stop)
    if results.repeated_key():
        _check_repeated(con)


def _summary(
    run: Run, options: ScoreOptions, results: ResultsWriter, audit: Any, plan: PartPlan
) -> dict[str, Any]:
    numbers = results.numbers()
    return {
        "run_id": run.run_id,
        **numbers["metrics"],
        **_extra(plan),
        **_run_fields(run, options),
        "by_tool": numbers["by_tool"],
        "by_category": numbers["by_category"],
        **(trial_summary(pl.concat(results.trial_rows)) if results.trial_rows else {"trials": 1}),
        "audit": audit.finish(),
    }


def _run_fields(run: Run, options: ScoreOptions) -> dict[str, Any]:
    """The summary's fields about the run and the scoring, beside its numbers."""
    return {
        "scoring": options.scoring,
        "options": options.to_dict(),
        "model": (run.manifest.get("model") or {}).get("id"),
        "simulated": bool((run.manifest.get("model") or {}).get("simulated")),
        "run_status": run.status,
        "scored_at": utcnow().isoformat(),
        "toolkit_version": __version__,
    }


def _result(run: Run, summary: dict[str, Any], absent: int, **found: Any) -> ScoreResult:
    result = ScoreResult(
        run_id=run.run_id, summary=summary, warnings=recording_warnings(run, summary), **found
    )
    if absent:
        gold_run = summary["options"].get("gold_run")
        result.warnings.append(
            f"{absent} samples (or trials) of {run.run_id} are not in --gold-run "
            f"{gold_run} and score against no calls"
        )
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


# runs smaller than this are scored in one part
SPLIT_MIN_SAMPLES = 50_000
# the most samples a part holds: what scoring holds at once does not grow with the run
# (a part of this size holds about 150 MB while it is scored)
PART_SAMPLES = 250_000


def compute_scores(
    con: Any, schemas: list[dict[str, Any]], options: ScoreOptions, parts: int | None = None
) -> Scored:
    """Score the run bound to ``con`` (with ``schemas``, its tools' schemas) with the chosen scorer.

    The default scorer cuts a large run into ``parts`` ranges of samples (by default two per
    core, more for a run of more than ``PART_SAMPLES`` a core), scored a worker per core,
    each on its own cursor: every number is per sample, so the parts join into exactly the
    one-part result.
    """
    if options.scorer != DEFAULT_SCORER:
        scored = _scored_whole(con, options)
        _check_unique_ids(scored.scores["sample_id"], scored.scores["trial"])
        return scored
    count = parts if parts is not None else _parts_for(_samples(con))
    plan, ranges = _plan(con, None, options, count, "none", schemas, keep=True)
    results = ResultsWriter(None, options, "none", None)
    _fold(local_parts(con, ranges, plan, _workers(len(ranges))), results, con)
    scores = results.scores().drop("run_id", "scoring", "valid", "error_type")
    numbers = results.numbers()
    return Scored(
        scores=scores,
        metrics={**numbers["metrics"], **_extra(plan)},
        flat=results.flat,
        by_tool=numbers["by_tool"],
        by_category=numbers["by_category"],
        pairs=results.pairs_frame(),
    )


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
        raise _repeated(sid, trial)


def _check_repeated(con: Any) -> None:
    """Ask the store which sample_id and trial name more than one row, if any does (two
    keys' hashes were equal)."""
    for sid, trial in con.execute(query_text("score_repeated_keys")).fetchall():
        raise _repeated(sid, trial)


def _repeated(sample_id: str, trial: int) -> StoreError:
    return StoreError(
        f"samples.parquet: sample_id {sample_id!r}, trial {trial} names more than one sample"
    )


def _scored_whole(con: Any, options: ScoreOptions) -> Scored:
    # the scorers that take the whole run, imported when asked for (a default scoring's
    # start does without them)
    if options.scorer == "abet":
        from tcbreplay._score.scorers.abet import score_tables_abet

        return score_tables_abet(translate.load_calls(con, translate.split_samples(con, 1)[0]))
    from tcbreplay._score.scorers.bfcl import score_run_bfcl

    return score_run_bfcl(con)


def _samples(con: Any) -> int:
    return int(con.execute("select count(*) from samples").fetchone()[0])


def _plan(
    con: Any, run: Run | None, options: ScoreOptions, parts: int, dashboard: str,
    schemas: list[dict[str, Any]] | None = None, keep: bool = False,
) -> tuple[PartPlan, list[tuple[int, int]]]:  # fmt: skip
    """What every part needs (the tools' parameters, the roles and the focus, the trials),
    and the ranges of samples the run is cut into."""
    if schemas is None:
        assert run is not None
        schemas = tool_schemas(run)
    ranges = translate.split_samples(con, parts)
    roles, focus = _roles(con, schemas, options)
    ((rows, trials),) = con.execute(
        "select count(*), coalesce(max(trial), 0) + 1 from samples"
    ).fetchall()
    plan = PartPlan(
        run_id=run.run_id if run is not None else "",
        options=options,
        tools=tools_table(con, schemas),
        roles=roles,
        focus=focus,
        dashboard=dashboard,
        trials=int(trials),
        exact=rows > fold.EXACT_FROM_ROWS,
        keep=keep,
    )
    return plan, ranges


def _extra(plan: PartPlan) -> dict[str, Any]:
    """The roles of a scoring, and its focus (the tools kept, or left out)."""
    extra: dict[str, Any] = {"roles": plan.roles}
    if plan.focus is not None:
        extra["focus"] = {"exclude" if plan.focus[1] else "tools": sorted(plan.focus[0])}
    return extra


def _parts(run: Run, options: ScoreOptions) -> int:
    """How many parts the run is scored in on this machine (the default scorer), from the
    samples its files' footers count."""
    if options.scorer != DEFAULT_SCORER:
        return 1
    from tcbreplay._store.parquet import read_metadata

    try:
        samples = sum(read_metadata(path).num_rows for path in run.samples_paths)
    except (OSError, pa.ArrowInvalid):
        return 1  # opening the run's views reports what is wrong with the file
    return _parts_for(samples)


def _parts_for(samples: int, cores: int | None = None) -> int:
    # two per core (of this machine, or ``cores``): a worker whose first part is done while
    # another's still runs goes on with a second, so the cores stay busy to the end (see
    # BENCHMARKS.md); more for a run of more than PART_SAMPLES per part
    if samples < SPLIT_MIN_SAMPLES:
        return 1
    return max(2 * (cores or usable_cores()), -(-samples // PART_SAMPLES))


def _workers(parts: int) -> int:
    """Parts scored at once: one per core."""
    return min(parts, usable_cores())


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
