"""Score a stored run: translate its raw messages, compute the metrics, write the results.

Scoring reads the run directory only (no LLM, tools module, dataset file or
network) and imports neither LangChain nor LangGraph. Three scorers exist: ``spec``,
the default (the metric spec, docs/metrics.md; :mod:`tcbreplay._score.scorers.default`),
``abet`` (the original benchmark's evaluator, see :mod:`tcbreplay._score.scorers.abet`) and
``bfcl`` (the Berkeley Function Calling Leaderboard's AST checker,
:mod:`tcbreplay._score.scorers.bfcl`).
"""

from __future__ import annotations

import shlex
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
from tcbreplay._score.engines import local_parts, ray_parts
from tcbreplay._score.gold_run import gold_calls, use_gold
from tcbreplay._score.metrics import trial_summary
from tcbreplay._score.options import DASHBOARD_MODES, ScoreOptions
from tcbreplay._score.parts import Focus, PartPlan, PartResult
from tcbreplay._score.results import (
    PartSink,
    ResultsWriter,
    Scored,
    ScoreResult,
    write_results,
)
from tcbreplay._score.roles import focus_tools, tool_roles
from tcbreplay._score.stored import stored_scoring
from tcbreplay._store.files import staged
from tcbreplay._store.locks import WRITABLE_HINT
from tcbreplay._store.objects import is_remote
from tcbreplay._store.runs import Run, Store
from tcbreplay._store.schema import (
    DEFAULT_SCORER,
    JOURNAL,
    JOURNAL_CHUNKS,
    SCORES_SCHEMA,
    counted_as,
    utcnow,
)
from tcbreplay._store.shards import SELECTION, finish_hint, shard_command, shard_progress
from tcbreplay._store.views import connect, connect_tables, query_text, shown_status
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
    each_part: PartSink | None = None,
    retry: str | None = None,
) -> ScoreResult:
    """Score one run from its raw traces; write per-sample scores, summary and dashboard file.

    ``engine``: ``local`` scores the run's parts in threads of this process, ``ray`` as Ray
    tasks (``ray_address``: the cluster's; see :mod:`tcbreplay._ray`), with the same results.
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
    check_engine(engine, ray_address)
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
            each_part, retry,
        )  # fmt: skip


def _score_run(
    run: Run, options: ScoreOptions, allow_incomplete: bool, write: bool, dashboard: str,
    store: Store | None = None, engine: str = "local", ray_address: str | None = None,
    each_part: PartSink | None = None, retry: str | None = None,
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
                source = ray_parts(ray, run, ranges, plan, gold)
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
    summary = stored_scoring(run, options, audit)
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


# how a run that scores without --allow-incomplete ended: every sample recorded, imported,
# or the samples asked for (record --limit, --sample-id)
SCORABLE = ("complete", "imported", "partial")


def _journal_place(run: Run) -> tuple[str, str]:
    """Where a run's finished samples wait before they are folded, and what folds them."""
    if is_remote(run.dir):
        return f"the journal's batches ({JOURNAL_CHUNKS}/)", "`record --resume`"
    if any(run.dir.glob("journal-*-of-*.jsonl")):  # record --shard I/N's journals
        return "the shards' journals (journal-I-of-N.jsonl)", "the last shard to finish"
    if run.manifest.get("source") in ("replay", "collect"):  # (record --resume refuses them)
        return JOURNAL, f"`{run.resume_command()}`"
    return JOURNAL, "`record --resume`"


def check_scorable(run: Run, allow_incomplete: bool, retry: str | None = None) -> None:
    """Refuse runs with nothing stored (saying what finished samples wait in the journal,
    where scoring does not read), and unfinished runs unless allowed (the journal's samples
    of one scored as it is are among its warnings: recording_warnings), saying to run
    ``retry`` with --allow-incomplete (default: score)."""
    status = shown_status(run) or run.status
    if not run.has_data():
        journal = _waiting(run)
        raise StoreError(
            f"run {run.run_id!r} has no stored samples yet (status {status})"
            + (f": {journal}" if journal else ""),
            hint=finish_hint(run),
        )
    if status not in SCORABLE and not allow_incomplete:
        raise StoreError(
            f"run {run.run_id!r} is {status}: not every sample was recorded",
            hint=f"{finish_hint(run)}; or {retry.split()[1] if retry else 'score'} what is "
            f"there with: {retry or _incomplete_score(run)}",
        )


def _waiting(run: Run) -> str:
    """What finished samples wait in the run's journal, unread by scoring ('' for none)."""
    waiting = run.unfolded_records()
    if not waiting:
        return ""
    where, folder = _journal_place(run)
    return (
        f"{waiting} finished samples wait in {where}, which {folder} folds into the Parquet "
        "files that scoring reads"
    )


def recording_warnings(run: Run, metrics: dict[str, Any]) -> list[str]:
    """What a reader must know before the metrics: samples that ended in error while
    recording (they score with the calls made before the error), a partial or unfinished run."""
    out = []
    n, errors = metrics.get("n_samples", 0), metrics.get("n_errors", 0)
    each = counted_as((run.manifest.get("totals") or {}).get("trials") or metrics.get("trials"))
    status = shown_status(run) or run.status  # (interrupted, not recording, once none writes)
    replayed = run.manifest.get("source") == "replay"
    sharded = None if status in SCORABLE or replayed else shard_progress(run)
    if replayed:
        diverged = int((run.manifest.get("totals") or {}).get("diverged") or 0)
        if diverged:
            out.append(
                f"{diverged} of {n} {each} diverged from their recording and score with the "
                'calls made until then (tcbreplay sql "select * from divergences" says where)'
            )
        errors -= diverged
    if errors:
        imported = run.manifest.get("source") == "import"
        # (with what the recording asked for: a bare --retry-errors records the whole dataset)
        asked = run.manifest.get(SELECTION)
        retry = shard_command(run, None, asked if isinstance(asked, dict) else {}, "--retry-errors")
        again = f"; re-run them with: {retry}"
        if sharded is not None:  # not the whole run's: the selection's, once no shard records
            retry = shard_command(run, None, sharded.selection, "--retry-errors")
            again = f"; re-run them, once every shard has finished, with: {retry}"
        if replayed:
            again = f"; replay them again with: {run.resume_command()} --overwrite"
        out.append(
            f"{errors} of {n} {each} "
            + ("are stored as errors or missing" if imported else "ended in error while recording")
            + (
                " and score with the calls their traces hold (a missing one, none)"
                if imported
                else " and score with the calls made before the error"
            )
            + ": these metrics do not measure the model alone"
            + ("" if imported else again)
        )
    total = (run.manifest.get("totals") or {}).get("samples")
    if status == "partial":
        out.append(
            f"partial run: {n} of {total} {each} recorded; the metrics cover only those "
            f"({_rest(run, replayed)})"
        )
    elif sharded is not None:  # counted against what the shards were asked for
        out.append(
            f"run {status}: {sharded.asked - sharded.missing} of the {sharded.counted()} "
            f"recorded, scored as they are; {sharded.next_steps(run)}"
        )
    elif status not in SCORABLE:
        # (a run cut short before its manifest had its totals says how many it holds)
        of = f" of {total}" if isinstance(total, int) else ""
        out.append(f"run {status}: {n}{of} {each} recorded, scored as they are")
    journal = _waiting(run)
    if journal:  # (a killed recording's: in the result's warnings, as the others are)
        out.append(f"{journal}; run {run.run_id!r} is scored without them")
    return out


def _rest(run: Run, replayed: bool) -> str:
    """How a partial run gets the rest of its samples: recorded, replayed; a serve log holds
    the conversations its clients had, and a replay every sample its partial parent holds
    (the command that made it again would do nothing: helper-71)."""
    if not replayed:
        return f"record the rest with: {run.resume_command()}"
    block = run.manifest.get("replay") or {}
    if block.get("served_by"):
        return "a serve log holds the conversations its clients had"
    parent_id = block.get("parent_run_id")
    parent = Run(run.dir.parent / str(parent_id)) if parent_id else None
    try:
        partial = parent is not None and parent.status == "partial"
    except StoreError:  # (the parent removed since, or unreadable: the command as it is)
        partial = False
    if parent is not None and partial:
        return (f"its parent {parent_id} holds no more: record the rest of it with: "
                f"{parent.resume_command()}, then replay again")  # fmt: skip
    return f"replay the rest with: {run.resume_command()}"


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
        tools=translate.tools_table(con, schemas),
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


def _incomplete_score(run: Run) -> str:
    """The command that scores what an unfinished run holds (which diff and report then
    read), naming its store unless it is the default."""
    return f"tcbreplay score {shlex.quote(run.run_id)}{run.store_option()} --allow-incomplete"
