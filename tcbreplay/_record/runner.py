"""The record runner: build a LangGraph agent, run samples concurrently, hand messages to the store.

Recording knows nothing about metrics. Each finished sample (ok or error, with
whatever messages it produced) is appended to the run's journal at once.

Its parts, each a module: what names a run (:mod:`~tcbreplay._record.run_identity`), what a
recording runs each sample with (:mod:`~tcbreplay._record.plan`), which rows it records
(:mod:`~tcbreplay._record.selection`), taking up a run that exists
(:mod:`~tcbreplay._record.resume`), running its samples in this process
(:mod:`~tcbreplay._record.in_process`) or in several (:mod:`~tcbreplay._record.processes`),
and ending it (:mod:`~tcbreplay._record.finish`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from importlib import metadata
from typing import Any

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._ray import check_engine, ray_module, ray_session
from tcbreplay._record.agent import CallPolicy
from tcbreplay._record.agent_factory import AGENT_FIELD, load_agent_factory
from tcbreplay._record.failures import (
    Breaker,
    ChildFailed,
    MaxErrors,
    RecordStop,
    stop_hint,
    stop_message,
)
from tcbreplay._record.finish import RecordInterrupted, RecordSummary, _record, finish_run
from tcbreplay._record.in_process import record_in_process
from tcbreplay._record.loop import run_loop
from tcbreplay._record.messages import serialize_messages
from tcbreplay._record.models import (
    ModelChoice,
    build_chat_model,
    check_credentials,
    effective_settings,
    model_profile,
)
from tcbreplay._record.options import ProgressFn, RecordOptions
from tcbreplay._record.plan import AgentPlan, runnable_tools
from tcbreplay._record.resume import (
    _await_run,
    _changed,
    _check_resumable,
    _check_selection,
    _check_trials,
    _given_trials,
    _options,
    _stored_runner,
    _stored_trials,
)
from tcbreplay._record.retry import RateLimiter, RecentUse, recent_use
from tcbreplay._record.run_identity import _run_fingerprint, default_run_id, fingerprint, user_code
from tcbreplay._record.sample import SampleTimeout
from tcbreplay._record.selection import (
    _once,
    _progress,
    _select,
    _shard_rows,
    _tasks,
    check_shard,
    check_shard_count,
    check_shard_rate,
    parse_shard,
)
from tcbreplay._record.tool_names import check_toolset_names
from tcbreplay._store.files import FOLDING
from tcbreplay._store.manifest import new_manifest
from tcbreplay._store.run_dir import Run, validate_run_id
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import utcnow
from tcbreplay._store.shards import SELECTION, SHARD_SELECTION, shard_command
from tcbreplay._store.writer import check_shard_store
from tcbreplay._words import count
from tcbreplay.errors import InputError, RecordError, RunExistsError, RunLockedError

# with the names of the runner's parts (see the module's docstring) that callers import from here
__all__ = [
    "AgentPlan", "RecordInterrupted", "RecordOptions", "RecordSummary", "SampleTimeout",
    "check_shard_rate", "fingerprint", "finish_run", "parse_shard", "record_run", "run_plan",
    "serialize_messages",
]  # fmt: skip


def record_run(
    inputs: BenchmarkInputs,
    choice: ModelChoice,
    store: Store,
    *,
    run_id: str | None = None,
    options: RecordOptions | Mapping[str, Any] | None = None,
    progress: ProgressFn | None = None,
    retry_errors: bool = False,
    overwrite: bool = False,
    limit: int | None = None,
    sample_ids: Sequence[str] | None = None,
    max_errors: MaxErrors | str | int | float | None = None,
    agent: str | None = None,
    shard: tuple[int, int] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    rate_windows: Any = None,
    named: bool | None = None,
) -> RecordSummary:
    """Record the samples of ``inputs`` that the run does not hold yet; return its summary.

    A new run id starts a run. An existing run with the same inputs is resumed:
    only samples not yet stored are recorded (with ``retry_errors``, also those
    stored with status error). ``overwrite`` deletes the existing run first.

    ``options``: the runner settings; a mapping gives only some of them, the rest being the
    resumed run's stored ones (the defaults for a new run). Each sample is recorded
    ``trials`` times (trials 0 to K - 1; by default a resumed run's trials, else 1).
    ``limit`` and ``sample_ids`` (a string: one id) record only the first ``limit`` samples
    of the dataset, or of those with these ids (each for every trial): the run is then
    ``partial``, and a later recording of it can complete it. ``agent``: a
    ``MODULE:FACTORY`` that builds the agent (see :mod:`tcbreplay._record.agent_factory`),
    instead of the built-in one.
    ``shard`` (I, N): record only shard I of N (the rows selected, dealt out one by one by
    their place in the selection: see :mod:`tcbreplay._store.shards`), beside the other
    shards on this or other machines sharing the store, with
    its share of ``--max-rpm``/``--max-tpm`` (see :meth:`RecordOptions.rate_limiter`: N
    above the calls a minute is refused); the last shard to finish completes the run (see
    :class:`tcbreplay._store.writer.ShardWriter`). ``engine="ray"``: the shards recorded
    as Ray tasks, no more than ``--max-rpm``'s calls a minute (see
    :mod:`tcbreplay._record.on_ray`; ``ray_address``: the cluster's; ``rate_windows`` and
    ``named``: in such a task, the actor holding the shards' rate windows, and whether the
    recording was given its run id, which the task is given either way).

    Raises :class:`~tcbreplay.errors.RecordError` when the recording stops on an error
    retrying cannot fix (see :mod:`tcbreplay._record.failures`), or, with ``max_errors``,
    when more samples than it allows are left in error; the run is kept either way.
    """
    if isinstance(sample_ids, str):  # one id, not its letters
        sample_ids = [sample_ids]
    sample_ids = _once(sample_ids)
    tools = runnable_tools(inputs)
    check_toolset_names(inputs.toolset, choice)
    budget = None if max_errors is None else MaxErrors.parse(max_errors)
    check_engine(engine, ray_address)
    if engine == "ray":
        if shard is not None:
            raise InputError("--shard and --engine ray cannot be combined: Ray's tasks are the "
                             "shards")  # fmt: skip
        check_shard_store(store.root, "--engine ray (shards)")
        ray_module()  # missing: refused before anything is written
        # no more tasks than the trials the recording selects (see check_shard_count)
        selected = len(_select(inputs.dataset, limit, sample_ids))
        most = selected * (_given_trials(options) or 1)
        named = run_id is not None
        run_id = validate_run_id(
            default_run_id(inputs, choice, agent) if run_id is None else run_id
        )
        # nor more than the calls a minute: a shard with a share of none would never send one
        calls = _options(options, _stored_runner(store, run_id, overwrite)).calls_per_minute()
        if calls is not None:
            most = min(most, calls)
        root = Store(store.root.resolve())

        def record_shard(shard: tuple[int, int], windows: Any) -> RecordSummary:
            return record_run(
                inputs, choice, root, run_id=run_id, options=options, retry_errors=retry_errors,
                limit=limit, sample_ids=sample_ids, max_errors=max_errors, agent=agent,
                shard=shard, rate_windows=windows, named=named,
            )  # fmt: skip

        from tcbreplay._record.on_ray import record_on_ray

        # Ray joined first: a cluster that cannot be reached leaves the run as it was
        with ray_session(ray_address):
            if overwrite and store.run_dir(run_id).is_dir():
                store.delete_run(run_id)
            return record_on_ray(record_shard, max(1, most), ray_address)
    if isinstance(options, Mapping):
        RecordOptions.resolve(options)  # refuse bad settings before anything is written
    factory = load_agent_factory(agent) if agent else None
    check_credentials(choice)
    gold = {s.sample_id: [(c.name, c.args) for c in s.target] for s in inputs.dataset.samples}
    chat_model = build_chat_model(choice, gold)
    plan = AgentPlan(
        chat_model,
        tools,
        inputs.system_prompt,
        None if factory is None else (factory[0], agent or ""),
    )
    if plan.factory is not None:
        plan.agent(CallPolicy())  # a factory that fails does so before the run is made
    fields: dict[str, Any] = {"libraries": _library_versions()}
    if factory is not None:
        fields[AGENT_FIELD] = factory[1]
    model = {
        **choice.to_dict(),
        "effective_settings": effective_settings(choice, chat_model),
        # (not in the fingerprint: the same inputs and model are the same run)
        "profile": model_profile(chat_model),
    }
    named = run_id is not None if named is None else named
    run_id = validate_run_id(default_run_id(inputs, choice, agent) if run_id is None else run_id)
    code = user_code(inputs, None if factory is None else factory[1])
    return run_plan(
        inputs,
        plan,
        store,
        run_id=run_id,
        model=model,
        fingerprint=_run_fingerprint(store, run_id, inputs, choice, agent, overwrite, code),
        fields=fields,
        options=options,
        progress=progress,
        retry_errors=retry_errors,
        overwrite=overwrite,
        limit=limit,
        sample_ids=sample_ids,
        budget=budget,
        simulated=choice.simulated,
        why_stopped=lambda stop: stop_message(stop, choice),
        how_to_go_on=lambda stop: stop_hint(stop, run_id, named),
        shard=shard,
        rate_windows=rate_windows,
        named=named,
    )


def run_plan(
    inputs: BenchmarkInputs,
    plan: AgentPlan,
    store: Store,
    *,
    run_id: str,
    model: dict[str, Any],
    fingerprint: str,
    fields: dict[str, Any],
    options: RecordOptions | Mapping[str, Any] | None = None,
    progress: ProgressFn | None = None,
    retry_errors: bool = False,
    overwrite: bool = False,
    overwrite_if: Callable[[Run], bool] | None = None,
    limit: int | None = None,
    sample_ids: Sequence[str] | None = None,
    budget: MaxErrors | None = None,
    simulated: bool = False,
    why_stopped: Callable[[RecordStop], str] = str,
    how_to_go_on: Callable[[RecordStop], str | None] = lambda stop: None,
    source: str | None = None,
    shard: tuple[int, int] | None = None,
    rate_windows: Any = None,
    named: bool = True,
) -> RecordSummary:
    """Run ``plan`` over the samples of ``inputs`` into run ``run_id``: a new run (its
    manifest ``model``, ``fields`` and ``fingerprint``, which a resumed run must have), or
    the one of that id resumed (see :func:`record_run`). ``source``: the manifest's
    ``source`` of the runs this makes (None: recordings; ``replay``); ``shard`` and
    ``rate_windows``: see :func:`record_run`; ``named``: the run id was given (``--run-id``),
    not the recording's default. A stop is said by ``why_stopped``, with the hint
    ``how_to_go_on`` gives (None: to record the failed samples again). ``overwrite_if``:
    what the run to overwrite must still be, asked under the lock that deletes it (else it
    is kept, and resumed or refused as a run that is not overwritten is)."""
    check_shard(shard)
    sample_ids = _once(sample_ids)
    if shard is not None:
        check_shard_store(store.root)  # before anything is written
    if shard is not None and overwrite:
        raise InputError(
            "--overwrite and --shard cannot be combined: each shard would delete what the "
            "others recorded",
            hint="give the shards another --run-id, or remove the run's folder from the "
            "store before they start",
        )
    selected = _select(inputs.dataset, limit, sample_ids)
    # what the shards of one recording must agree on beside their inputs (see _check_selection)
    selection = {"limit": limit, "sample_ids": sorted(sample_ids) if sample_ids else None}
    asked = selection if source is None else None  # (a replay's command names its own)
    # the manifest's: with the shards' N (the latest shard's: Ray's may change when run again),
    # or what a recording not in shards asked for (an interrupted one's hint asks for it)
    kept = {SHARD_SELECTION: {**selection, "shards": shard[1]}} if shard else {SELECTION: asked}
    print_ = fingerprint
    if overwrite and store.run_dir(run_id).is_dir():  # a run, or a folder without a manifest
        store.delete_run(run_id, only_if=overwrite_if)
    writer = None
    already = 0
    found: dict[str, Any] = {}  # a resumed run's status and fold mark, as the claim read them
    recent = RecentUse()  # a resumed run's calls and tokens of the last minute
    entries = len(inputs.dataset)
    if shard is not None:  # shards started at once: one makes the run, the others wait
        _await_run(store, run_id)
    if not store.exists(run_id):
        opts = _options(options)
        check_shard_count(shard, len(selected), opts.trials or 1)
        check_shard_rate(shard, opts)
        manifest = new_manifest(
            run_id,
            utcnow().isoformat(),
            inputs.manifest_fields(),
            model,
            fingerprint=print_,
            **({"source": source} if source else {}),
            **fields,
            runner=opts.to_dict(),
            **kept,
        )
        try:
            writer = store.create_run(manifest, inputs.dataset.for_run())
            tasks = _tasks(selected, opts.trials or 1, entries, {}, set(), shard)
        except RunLockedError:
            if shard is None:
                raise
            _await_run(store, run_id)  # another shard makes it: resumed below
        except RunExistsError:
            pass  # made by another process since the look above: resumed below, as it is now
        if writer is not None and shard is not None:  # made: now recorded as one shard
            writer.close()
            writer = None
    if writer is None:
        # Checked before the writer takes the run, a run of other inputs is refused at once;
        # everything is checked again under the run's lock (claim).
        run = store.open_run(run_id, writing=True)
        # a task of Ray's is one recording's shard, not one the user asked for (--shard)
        given = shard if rate_windows is None else None
        _check_resumable(run.manifest, print_, run, source, given, _changed(inputs, fields),
                         named)  # fmt: skip
        recorded: dict[tuple[str, int], str] = {}

        def claim(manifest: dict[str, Any]) -> dict[str, Any]:
            """Check the run as it is under its lock, and say what this recording writes
            into it: in one step, so that of two shards starting at once with other
            selections one is refused (both passed when the check read the manifest of the
            resume, and the write came later)."""
            nonlocal opts, recorded
            found.update(status=manifest.get("status"), folding=manifest.get(FOLDING))
            _check_resumable(manifest, print_, run, source, given, _changed(inputs, fields),
                             named)  # fmt: skip
            recorded = run.recorded_ids()
            _check_trials(run_id, _given_trials(options), manifest, recorded, shard)
            _check_selection(run_id, selection, manifest, shard)
            opts = _options(options, manifest.get("runner"))
            trials = opts.trials or _stored_trials(manifest.get("runner") or {}, recorded)
            opts = replace(opts, trials=trials)
            check_shard_count(shard, len(selected), trials)
            check_shard_rate(shard, opts)
            # this recording's runner and transport settings are the ones a later resume reuses
            return {
                "status": "recording",
                "runner": opts.to_dict(),
                "model": model,
                **kept,
            }

        writer = store.resume_run(run_id, shard, claim)
        if opts.max_rpm or opts.max_tpm:  # the calls of the last minute still count
            recent = recent_use(writer.dir, _shard_rows(selected, opts.trials or 1, entries, shard))
        redo = {"error", "missing"} if retry_errors else set()
        tasks = _tasks(selected, opts.trials or 1, entries, recorded, redo, shard)
        already = sum(1 for status in recorded.values() if status not in redo)
    samples = tasks
    total = entries * (opts.trials or 1)
    processes = opts.processes_for(len(samples), shard)
    on_retry = getattr(progress, "retry", None)

    def agent_for(process: int, on_retry: Callable[[BaseException], None] | None) -> Any:
        """The agent of process ``process`` (0-based), with its share of the rate limits."""
        if rate_windows is not None and processes == 1 and (opts.max_rpm or opts.max_tpm):
            from tcbreplay._record.on_ray import SharedLimiter

            # kept by an actor, so that the task run again after its worker died keeps to
            # it (forked processes cannot call Ray: theirs stay their own)
            own = opts.rate_limiter(process, processes, shard)
            limiter: RateLimiter = SharedLimiter(
                rate_windows, shard, own.rpm, own.tpm, recent, opts.run_parts(own)
            )
        else:  # each process starts with its part of the recent calls
            limiter = opts.rate_limiter(process, processes, shard, recent)
        policy = CallPolicy(
            retries=opts.retries,
            backoff=opts.backoff,
            call_timeout=opts.call_timeout,
            limiter=limiter,
            on_retry=on_retry,
        )
        return plan.agent(policy)

    breaker = Breaker(min(opts.workers, len(samples)))
    chat_model = plan.chat_model

    def record_samples() -> None:
        if processes == 1:
            agent = agent_for(0, on_retry)
            run_loop(
                record_in_process(agent, chat_model, samples, writer, opts, progress, breaker,
                                  plan.run_one)
            )  # fmt: skip
        else:
            from tcbreplay._record.processes import record_in_processes

            record_in_processes(
                processes, agent_for, chat_model, samples, writer, opts, progress, breaker.see,
                plan.run_one,
            )  # fmt: skip

    if hasattr(progress, "start"):
        progress.start(len(samples), already)  # type: ignore[union-attr]
    partial = len(selected) < entries
    try:
        wanted = ({s.sample_id for s in selected}, opts.trials or 1) if partial else None
        summary = _record(record_samples, samples, writer, simulated, total, wanted, plan.finish)
    except RecordStop as stop:
        stop.summary.processes = processes
        stop.summary.attempted = breaker.seen
        stop.summary.trials = opts.trials or 1
        stop.summary.sharding = _progress(writer.dir, shard, inputs)
        raise RecordError(
            f"{_what(source)} of {run_id} stopped: {why_stopped(stop)}",
            hint=how_to_go_on(stop)
            or f"the run keeps its {count(stop.summary.recorded, 'finished sample')}; "
            + retry_hint(Run(writer.dir), shard, asked),
            summary=stop.summary,
        ) from None
    except ChildFailed as exc:  # killed (the kernel's out-of-memory killer, a signal)
        raise RecordError(
            f"{_what(source)} of {run_id} stopped: {exc}",
            hint="the run keeps the samples its processes finished; "
            + retry_hint(Run(writer.dir), shard, asked, source),
        ) from None
    summary.processes = processes
    summary.trials = opts.trials or 1
    summary.sharding = _progress(writer.dir, shard, inputs)
    if shard is None and (found.get("folding") or found.get("status") in ("recording", "failed")):
        summary.took_over = "failed" if found.get("status") == "failed" else "interrupted"
    if budget is not None and not budget.allows(summary.errors, summary.recorded):
        raise RecordError(errors_message(summary, budget),
                          hint=retry_hint(Run(writer.dir), shard, asked),
                          summary=summary)  # fmt: skip
    return summary


def _what(source: str | None) -> str:
    """What a run made from ``source`` is called in its stop line ("replay", "recording")."""
    return "replay" if source == "replay" else "recording"


def retry_hint(
    run: Run, shard: tuple[int, int] | None = None, selection: dict[str, Any] | None = None,
    source: str | None = None,
) -> str:  # fmt: skip
    """How to record a run's failed and missing samples again, with other transport settings:
    those of the recording's ``selection`` (``limit``, ``sample_ids``), of its ``shard``; a
    replay's (``source``): its command, which replays its missing samples, and takes no
    setting anew."""
    if source is not None:
        return f"continue with: {run.resume_command()}"
    command = shard_command(run, shard, selection or {}, "--retry-errors")
    return (
        f"once fixed, continue with: {command} (it takes --model-option base_url=... or "
        "timeout=..., --call-timeout, --max-rpm and --max-tpm anew)"
    )


def errors_message(summary: RecordSummary, budget: MaxErrors) -> str:
    kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.error_types.items()))
    return (
        f"{summary.errors} of {count(summary.recorded, 'sample')} of run {summary.run_id} ended "
        f"in error ({kinds}); --max-errors allows {budget}"
    )


def _library_versions() -> dict[str, str]:
    out = {}
    for name in ("langchain", "langchain-core", "langgraph", "langchain-google-genai"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
