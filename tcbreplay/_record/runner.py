"""The record runner: build a LangGraph agent, run samples concurrently, hand messages to the store.

Recording knows nothing about metrics. Each finished sample (ok or error, with
whatever messages it produced) is appended to the run's journal at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import Dataset, Sample
from tcbreplay._inputs.tools import code_sha256
from tcbreplay._ray import check_engine, ray_module, ray_session
from tcbreplay._record.agent import CallPolicy, aclose_model, build_agent, inline_tracing_hooks
from tcbreplay._record.agent_factory import (
    AGENT_FIELD,
    AgentFactory,
    build_custom_agent,
    load_agent_factory,
)
from tcbreplay._record.failures import (
    PROCESS_DIED,
    Breaker,
    ChildFailed,
    MaxErrors,
    Outcome,
    RecordStop,
    stop_hint,
    stop_message,
)
from tcbreplay._record.loop import lean_gc, run_loop
from tcbreplay._record.messages import serialize_messages
from tcbreplay._record.models import (
    TRANSPORT_SETTINGS,
    ModelChoice,
    build_chat_model,
    check_credentials,
    effective_settings,
)
from tcbreplay._record.options import STAGGER, ProgressFn, RecordOptions
from tcbreplay._record.retry import RateLimiter, RecentUse, recent_use
from tcbreplay._record.sample import SampleTimeout, run_sample
from tcbreplay._record.tool_names import check_tool_names
from tcbreplay._store.files import FOLDING
from tcbreplay._store.locks import lock_holder
from tcbreplay._store.runs import Run, Store, validate_run_id
from tcbreplay._store.schema import LOCK, new_manifest, row_index, utcnow
from tcbreplay._store.shards import (
    SELECTION,
    SETTLED,
    SHARD_SELECTION,
    ShardProgress,
    deal,
    select,
    shard_command,
    shard_progress,
)
from tcbreplay._store.writer import RunWriter, check_shard_store
from tcbreplay.errors import (
    InputError,
    RecordError,
    RunExistsError,
    RunLockedError,
    StoreError,
    TcbReplayError,
    first_line,
)

__all__ = [
    "AgentPlan", "RecordOptions", "RecordSummary", "SampleTimeout", "record_run", "run_plan",
    "serialize_messages",
]  # fmt: skip


@dataclass
class RecordSummary:
    """What a recording did, for the CLI to render."""

    run_id: str
    run_dir: str
    status: str
    total: int
    recorded: int
    ok: int
    errors: int
    retries: int
    duration_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    simulated: bool = False
    error_types: dict[str, int] = field(default_factory=dict)
    attempted: int = 0
    processes: int = 1
    trials: int = 1  # recordings of each sample (``total`` counts every one)
    # when this recording wrote the run's manifest as it ended (None: a shard that left that
    # to the last shard to finish)
    finished_at: str | None = None
    # a shard's, while its recording is under way: what its selection misses, of which shards
    sharding: ShardProgress | None = None
    # a recording that resumed a run another left unfinished (killed, or stopped): what it
    # found ("interrupted": a recording or its fold cut short; "failed"); None otherwise
    took_over: str | None = None


def fingerprint(
    inputs: BenchmarkInputs,
    choice: ModelChoice,
    agent: str | None = None,
    former: bool = False,
    code: Mapping[str, Any] | None = None,
) -> str:
    """sha256 of everything that decides what a recording should contain (``agent``: the
    ``--agent`` factory, only when given, so runs of the built-in agent keep theirs; ``code``:
    the sha256 of the user's code it runs, see :func:`user_code`, only when there is any). The
    sim model is named by its settings alone, however they were spelled (``sim:seed=7``,
    ``sim`` with ``--model-option seed=7``); ``former``: as tcbreplay hashed it before, with
    the model string as given."""
    fields = inputs.manifest_fields()
    basis = {
        "dataset": inputs.dataset.entries(),
        "tools": fields["tools"]["specs"],
        "system_prompt": fields["system_prompt"]["text"],
        "model": "sim" if choice.simulated and not former else choice.id,
        "settings": {k: v for k, v in choice.settings.items() if k not in TRANSPORT_SETTINGS},
        **({"agent": agent} if agent else {}),
        **({"code": dict(code)} if code else {}),
    }
    text = json.dumps(basis, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def user_code(inputs: BenchmarkInputs, agent: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sha256 of the code of the user's a recording runs, which a resumed run must run
    too: the module of the ``--agent`` factory (``agent``: what the manifest records of it),
    and the modules that define the tools of ``--tools`` (as a replay hashes them, see
    :func:`tcbreplay._inputs.tools.code_sha256`). tcbreplay's own modules (the built-in
    benchmarks' tools) are left out: they change with tcbreplay, which the manifest's
    versions record, and the fingerprints of runs of the built-in agent and tools stay as
    they were."""
    code: dict[str, Any] = {}
    if agent is not None:
        code["agent"] = agent.get("sha256")
    tools = code_sha256(inputs.toolset.tools or [], inputs.toolset.source)
    tools = {name: sha for name, sha in tools.items() if name.partition(".")[0] != "tcbreplay"}
    if tools:
        code["tools"] = tools
    return code


def _run_fingerprint(
    store: Store, run_id: str, inputs: BenchmarkInputs, choice: ModelChoice,
    agent: str | None, overwrite: bool, code: Mapping[str, Any] | None = None,
) -> str:  # fmt: skip
    """The fingerprint a recording of run ``run_id`` checks the run's against: a former one
    (see :func:`fingerprint`) when an older tcbreplay recorded the run of these same inputs,
    so that its run is resumed as before: before the user's ``code`` was hashed, and, of the
    sim model, before its settings alone named it."""
    print_ = fingerprint(inputs, choice, agent, code=code)
    if overwrite or not store.exists(run_id):
        return print_
    try:
        stored = store.open_run(run_id, writing=True).manifest.get("fingerprint")
    except TcbReplayError:  # said by the recording's own look at the run
        return print_
    formers = {fingerprint(inputs, choice, agent)}
    if choice.simulated:
        formers.add(fingerprint(inputs, choice, agent, former=True))
    return stored if stored in formers else print_


def default_run_id(inputs: BenchmarkInputs, choice: ModelChoice, agent: str | None = None) -> str:
    """``<benchmark>-<model>-<fingerprint>``: the same command names the same run."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", choice.name if not choice.simulated else "sim")
    return f"{inputs.name}-{model}-{fingerprint(inputs, choice, agent)[:10]}"


# runs one trial of a sample: (agent, sample, run_id, options, trial, sample_index) ->
# (journal record, outcome); run_sample, or a replay's
SampleRunner = Callable[..., Awaitable[tuple[dict[str, Any], Outcome]]]


@dataclass
class AgentPlan:
    """What a recording runs each sample with: the chat model, the tools and system prompt
    the agent is built with (``factory``: a user's own agent, see
    :mod:`tcbreplay._record.agent_factory`; None: the built-in one), the function that runs
    one trial of a sample, and ``finish``: the manifest fields that the stored rows give,
    written when the recording ends (``finish(rows, manifest)``)."""

    chat_model: Any
    tools: list[Any]
    system_prompt: str
    factory: tuple[AgentFactory, str] | None = None  # the factory and its MODULE:FACTORY
    run_one: SampleRunner | None = None  # None: run_sample
    finish: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None
    middleware: tuple[Any, ...] = ()  # the built-in agent's, after the recording's

    def agent(self, policy: CallPolicy) -> Any:
        """The agent of one process (``policy``: its model calls', kept by the built-in
        agent's middleware or by the model a factory is given)."""
        if self.factory is not None:
            factory, source = self.factory
            return build_custom_agent(
                factory, source, self.chat_model, self.tools, self.system_prompt, policy
            )
        return build_agent(self.chat_model, self.tools, self.system_prompt, policy, self.middleware)


def runnable_tools(inputs: BenchmarkInputs) -> list[Any]:
    """The inputs' tools as code to run, refused where there is none to run."""
    tools = inputs.toolset.tools
    if tools is None:
        raise InputError(
            f"{inputs.toolset.source}: JSON tool schemas have no code to run",
            hint="record needs tools from a Python module:attr; JSON schemas suit import",
        )
    own = next((s for s in inputs.dataset.samples if s.tools is not None), None)
    if own is not None:
        place = own.where or f"entry {own.index}"
        raise InputError(
            f"{Path(inputs.dataset.source).name}: {place}: has tools of its own, which have no "
            "code to run",
            hint="record runs the tools of --tools for every sample; a dataset whose entries "
            "carry their own tools suits import",
        )
    return tools


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
    :mod:`tcbreplay._record.on_ray`; ``ray_address``: the cluster's; ``rate_windows``: in
    such a task, the actor holding the shards' rate windows).

    Raises :class:`~tcbreplay.errors.RecordError` when the recording stops on an error
    retrying cannot fix (see :mod:`tcbreplay._record.failures`), or, with ``max_errors``,
    when more samples than it allows are left in error; the run is kept either way.
    """
    if isinstance(sample_ids, str):  # one id, not its letters
        sample_ids = [sample_ids]
    sample_ids = _once(sample_ids)
    tools = runnable_tools(inputs)
    check_tool_names(
        (t.name for t in inputs.toolset.schemas), choice, f"--tools {inputs.toolset.source}"
    )
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
                shard=shard, rate_windows=windows,
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
    model = {**choice.to_dict(), "effective_settings": effective_settings(choice, chat_model)}
    named = run_id is not None
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
    limit: int | None = None,
    sample_ids: Sequence[str] | None = None,
    budget: MaxErrors | None = None,
    simulated: bool = False,
    why_stopped: Callable[[RecordStop], str] = str,
    how_to_go_on: Callable[[RecordStop], str | None] = lambda stop: None,
    source: str | None = None,
    shard: tuple[int, int] | None = None,
    rate_windows: Any = None,
) -> RecordSummary:
    """Run ``plan`` over the samples of ``inputs`` into run ``run_id``: a new run (its
    manifest ``model``, ``fields`` and ``fingerprint``, which a resumed run must have), or
    the one of that id resumed (see :func:`record_run`). ``source``: the manifest's
    ``source`` of the runs this makes (None: recordings; ``replay``); ``shard`` and
    ``rate_windows``: see :func:`record_run`. A stop is said by ``why_stopped``, with the
    hint ``how_to_go_on`` gives (None: to record the failed samples again)."""
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
        store.delete_run(run_id)
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
        _check_resumable(run.manifest, print_, run, source, shard, _changed(inputs, fields))
        recorded: dict[tuple[str, int], str] = {}

        def claim(manifest: dict[str, Any]) -> dict[str, Any]:
            """Check the run as it is under its lock, and say what this recording writes
            into it: in one step, so that of two shards starting at once with other
            selections one is refused (both passed when the check read the manifest of the
            resume, and the write came later)."""
            nonlocal opts, recorded
            found.update(status=manifest.get("status"), folding=manifest.get(FOLDING))
            _check_resumable(manifest, print_, run, source, shard, _changed(inputs, fields))
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
                _in_process(agent, chat_model, samples, writer, opts, progress, breaker,
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
            f"recording of {run_id} stopped: {why_stopped(stop)}",
            hint=how_to_go_on(stop)
            or f"the run keeps its {stop.summary.recorded} finished samples; "
            + retry_hint(Run(writer.dir), shard, asked),
            summary=stop.summary,
        ) from None
    except ChildFailed as exc:  # killed (the kernel's out-of-memory killer, a signal)
        raise RecordError(
            f"recording of {run_id} stopped: {exc}",
            hint="the run keeps the samples its processes finished; "
            + retry_hint(Run(writer.dir), shard, asked),
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


def _progress(
    run_dir: Path, shard: tuple[int, int] | None, inputs: BenchmarkInputs
) -> ShardProgress | None:
    """Where the sharded recording of the run in ``run_dir`` stands once shard ``shard`` has
    finished (None: not a shard, or the run settled)."""
    if shard is None:
        return None
    return shard_progress(Run(run_dir), inputs.dataset.ids())


# one recording of a sample: the sample, its trial and its row's sample_index
Task = tuple[Sample, int, int]


def _tasks(
    samples: list[Sample],
    trials: int,
    entries: int,
    recorded: dict[tuple[str, int], str],
    redo: set[str],
    shard: tuple[int, int] | None = None,
) -> list[Task]:
    """The trials of ``samples`` (those selected, of a dataset of ``entries``) to record,
    trial by trial in dataset order: those not recorded yet, and those stored with a status
    in ``redo``; ``shard`` (I, N): only those of shard I (see :func:`deal`)."""
    out = []
    for s, trial in deal(samples, trials, shard):
        status = recorded.get((s.sample_id, trial))
        if status is None or status in redo:
            out.append((s, trial, row_index(s.index, trial, entries)))
    return out


def _shard_rows(
    samples: list[Sample], trials: int, entries: int, shard: tuple[int, int] | None
) -> set[int] | None:
    """The row numbers of shard ``shard``'s rows (None: not a shard, every row is its)."""
    if shard is None:
        return None
    return {row_index(s.index, trial, entries) for s, trial in deal(samples, trials, shard)}


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (``--shard 2/4``) as (I, N): two whole numbers in ASCII digits, nothing else
    (int() would also take ' 1', '+1', '1_0' and other scripts' digits)."""
    match = _SHARD.fullmatch(text)
    if match is None:
        raise InputError(f"--shard {text!r}: write it I/N, such as 2/4")
    i, n = int(match[1]), int(match[2])
    check_shard((i, n))
    return i, n


_SHARD = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")


def check_shard(shard: tuple[int, int] | None) -> None:
    if shard is not None and not 1 <= shard[0] <= shard[1]:
        raise InputError(f"--shard {shard[0]}/{shard[1]}: I must be from 1 to N")


def check_shard_count(shard: tuple[int, int] | None, samples: int, trials: int) -> None:
    """Refuse more shards than the trials of the ``samples`` a recording selects: the shards
    split those (row by row), so shards past them would record nothing, and every shard
    would wait on a share of ``--max-rpm`` too small to send anything (``--shard 1/999999999``
    made a run that never completes)."""
    if shard is None or shard[1] <= samples * trials:
        return
    some = f"{samples} sample{'s' if samples != 1 else ''}"
    count = some if trials == 1 else f"{samples * trials} trials ({some} x {trials} trials)"
    raise InputError(
        f"--shard {shard[0]}/{shard[1]}: N is more than the {count} this recording selects",
        hint=f"give N from 1 to {samples * trials}: the rows selected are dealt out one by one "
        "to the shards, so that each records one at least",
    )


def check_shard_rate(shard: tuple[int, int] | None, options: RecordOptions) -> None:
    """Refuse more shards than ``--max-rpm`` allows calls a minute: the calls are shared out
    whole (see :meth:`RecordOptions.rate_limiter`), so some shard would have none and never
    send a call. Every shard of such a recording is refused alike, not only those left
    without, so that none of them starts a run the others cannot finish. (``--processes``
    above the calls is not refused: a recording runs fewer, see
    :meth:`RecordOptions.processes_for`; nor is ``--engine ray``, which starts fewer tasks.)"""
    calls = options.calls_per_minute()
    if shard is None or calls is None or shard[1] <= calls:
        return
    raise InputError(
        f"--shard {shard[0]}/{shard[1]}: --max-rpm {options.max_rpm:g} is fewer calls a minute "
        f"than the {shard[1]} shards, so some shard would never send one",
        hint=f"give N from 1 to {calls}, or --max-rpm {shard[1]} or more: each shard keeps to "
        "a whole share of the calls",
    )


def _await_run(store: Store, run_id: str, wait_s: float = 10.0) -> None:
    """Wait while another process is making run ``run_id`` (its folder there, its manifest
    not yet), up to ``wait_s``; a folder left by a creation that died is then made anew."""
    deadline = time.monotonic() + wait_s
    while (
        store.run_dir(run_id).is_dir()
        and not store.exists(run_id)
        and lock_holder(store.run_dir(run_id) / LOCK) is not None
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)


def _stored_runner(store: Store, run_id: str, overwrite: bool) -> dict[str, Any] | None:
    """The runner settings of run ``run_id``, which a recording resuming it keeps unless
    given anew (None: no such run, or one ``overwrite`` deletes)."""
    if overwrite or not store.exists(run_id):
        return None
    return store.open_run(run_id, writing=True).manifest.get("runner")


def _given_trials(options: RecordOptions | Mapping[str, Any] | None) -> int | None:
    """The trials this recording was asked for (None: the run's own)."""
    if isinstance(options, RecordOptions):
        return options.trials
    return None if options is None else options.get("trials")


def _check_trials(
    run_id: str,
    given: int | None,
    manifest: dict[str, Any],
    recorded: dict[tuple[str, int], str],
    shard: tuple[int, int] | None,
) -> None:
    """Refuse ``--trials`` fewer than the run holds (its count would leave some out, and a
    run of 114 samples out of 94 would read complete), and, while a sharded recording is
    under way, trials other than its shards'."""
    if given is None:
        return
    held = max((trial for _, trial in recorded), default=-1) + 1
    if given < held:
        raise InputError(
            f"--trials {given}: run {run_id!r} holds trials 0 to {held - 1}, which it would "
            "then leave out of its count",
            hint=f"give --trials {held} or more, or leave --trials out to keep the run's",
        )
    stored = (manifest.get("runner") or {}).get("trials")
    if shard is not None and manifest.get("status") not in SETTLED and given != stored:
        raise InputError(
            f"--trials {given}: run {run_id!r} is being recorded in shards with --trials "
            f"{stored}; every shard of a recording takes the same",
            hint=f"give --trials {stored}, or leave --trials out",
        )


def _check_selection(
    run_id: str, selection: dict[str, Any], manifest: dict[str, Any], shard: tuple[int, int] | None
) -> None:
    """Refuse a shard asked for other samples (``--limit``, ``--sample-id``) than the shards
    of the recording under way: the run would be complete, partial or neither depending on
    which shard finished last."""
    stored = manifest.get(SHARD_SELECTION)
    if shard is None or stored is None or manifest.get("status") in SETTLED:
        return
    for key, option in (("limit", "--limit"), ("sample_ids", "--sample-id")):
        if stored.get(key) != selection[key]:
            theirs = "none" if stored.get(key) is None else stored[key]
            raise InputError(
                f"{option}: run {run_id!r} is being recorded in shards with {option} {theirs}; "
                "every shard of a recording takes the same",
                hint=f"give the shards the same {option}",
            )


def _stored_trials(runner: dict[str, Any], recorded: dict[tuple[str, int], str]) -> int:
    """The trials a resumed run was started with (a run older than trials: 1)."""
    stored = runner.get("trials")
    most = max((trial for _, trial in recorded), default=0) + 1
    return max(stored if isinstance(stored, int) and stored > 0 else 1, most)


def _options(
    options: RecordOptions | Mapping[str, Any] | None, stored: Mapping[str, Any] | None = None
) -> RecordOptions:
    if isinstance(options, RecordOptions):
        return options
    return RecordOptions.resolve(options or {}, stored)


def _once(sample_ids: Sequence[str] | None) -> list[str] | None:
    """``--sample-id``s, each once (in the order first given): an id given twice is one
    sample, asked for once."""
    return list(dict.fromkeys(sample_ids)) if sample_ids else None


def _select(dataset: Dataset, limit: int | None, sample_ids: Sequence[str] | None) -> list[Sample]:
    """The samples ``--sample-id`` names (all when none), in dataset order, the first
    ``--limit`` of them (see :func:`select`), parsed (only they, of a stored dataset)."""
    ids = dataset.ids()
    if sample_ids:
        known = set(ids)
        for sample_id in sample_ids:
            if sample_id not in known:
                raise InputError(
                    f"--sample-id {sample_id!r}: the dataset has no sample of that id",
                    hint=f"its ids are like {', '.join(ids[:3])}" if ids else None,
                )
    if limit is not None and limit < 1:
        raise InputError(f"--limit {limit}: must be at least 1")
    return dataset.take(select(ids, limit, sample_ids))


def retry_hint(
    run: Run, shard: tuple[int, int] | None = None, selection: dict[str, Any] | None = None
) -> str:
    """How to record a run's failed and missing samples again, with other transport settings:
    those of the recording's ``selection`` (``limit``, ``sample_ids``), of its ``shard``."""
    command = shard_command(run, shard, selection or {}, "--retry-errors")
    return (
        f"once fixed, continue with: {command} (it takes --model-option base_url=... or "
        "timeout=..., --call-timeout, --max-rpm and --max-tpm anew)"
    )


def errors_message(summary: RecordSummary, budget: MaxErrors) -> str:
    kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.error_types.items()))
    return (
        f"{summary.errors} of {summary.recorded} samples of run {summary.run_id} ended in error "
        f"({kinds}); --max-errors allows {budget}"
    )


def _changed(
    inputs: BenchmarkInputs, fields: dict[str, Any]
) -> Callable[[dict[str, Any]], str | None]:
    """What says, of a run's manifest, which module of the user's code a recording of
    ``inputs`` (its manifest's ``fields``) finds changed since the run was recorded: that of
    the ``--agent`` factory, or of ``--tools`` (tcbreplay's own not: see :func:`user_code`);
    None when neither is."""

    def changed(manifest: dict[str, Any]) -> str | None:
        agent, was = fields.get(AGENT_FIELD) or {}, manifest.get(AGENT_FIELD) or {}
        if (
            agent
            and was.get("factory") == agent.get("factory")
            and was.get("sha256") not in (None, agent.get("sha256"))
        ):
            return f"the module of --agent {agent['factory']} changed since the run was recorded"
        tools, source = manifest.get("tools") or {}, inputs.toolset.source
        if (
            tools.get("source") == source
            and source.partition(".")[0] != "tcbreplay"
            and tools.get("sha256") not in (None, inputs.toolset.sha256)
        ):
            return f"the module of --tools {source} changed since the run was recorded"
        return None

    return changed


def _check_resumable(
    manifest: dict[str, Any],
    expected: str,
    run: Run,
    source: str | None = None,
    shard: tuple[int, int] | None = None,
    changed: Callable[[dict[str, Any]], str | None] | None = None,
) -> None:
    """Refuse a run this recording cannot extend: imported, made another way (a replay when
    recording, a recording when replaying: ``source``), of other inputs (``changed`` says
    which module of the user's code changed, if one did), or with a data file that is no
    Parquet file (its footer read only: the file is read in full when the journal is folded
    into it, after the recording, which a broken file would have wasted)."""
    import pyarrow as pa

    from tcbreplay._store.parquet import read_schema

    if manifest.get("source") in ("import", "collect"):
        how = "imported" if manifest["source"] == "import" else "collected"
        raise InputError(f"run {run.run_id!r} was {how}, not recorded: it cannot be resumed")
    if manifest.get("source") != source:
        made = "a replay" if manifest.get("source") == "replay" else "a recording"
        raise InputError(
            f"run {run.run_id!r} exists as {made}",
            hint=f"finish it with: {run.resume_command()}; or use another --run-id"
            if manifest.get("source") == "replay"
            else "use another --run-id, or --overwrite to replace it",
        )
    if manifest.get("fingerprint") != expected:
        code = changed(manifest) if changed is not None else None
        which = code or "dataset, tools, prompt or model, or the code of --agent or --tools"
        hint = (
            "give every shard the same inputs, or use another --run-id"
            if shard is not None  # (--overwrite is refused with --shard)
            else "use another --run-id, or --overwrite to replace it"
        )
        raise InputError(
            f"run {run.run_id!r} exists with other inputs ({which})",
            hint=f"to go on with the run, put the module back as it was; or {hint}"
            if code
            else hint,
        )
    for path in (run.samples_path, run.messages_path):
        if not path.exists():
            continue
        try:
            read_schema(path)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise StoreError(f"{path}: not a readable Parquet file ({first_line(exc)})") from exc


class RecordInterrupted(Exception):
    """Ctrl-C stopped a recording; everything finished so far was kept."""

    def __init__(self, summary: RecordSummary) -> None:
        super().__init__(f"recording of {summary.run_id} interrupted")
        self.summary = summary


def _record(
    run: Callable[[], None],
    samples: list[Task],
    writer: RunWriter,
    simulated: bool,
    total: int,
    wanted: tuple[set[str], int] | None = None,
    finish: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None,
) -> RecordSummary:
    """Run ``run`` (the recording of ``samples``), then finish the run; ``wanted``: the
    sample ids and trials a partial recording asked for (None: the whole dataset)."""
    started = time.perf_counter()
    try:
        if samples:
            with inline_tracing_hooks(), lean_gc():
                run()
    except KeyboardInterrupt:
        summary = finish_run(writer, "interrupted", time.perf_counter() - started, total, None,
                          finish)  # fmt: skip
        summary.simulated = simulated
        raise RecordInterrupted(summary) from None
    except RecordStop as stop:
        line = f"{stop.reason}: {stop.outcome.error}"
        summary = finish_run(writer, "failed", time.perf_counter() - started, total, line, finish)
        summary.simulated = simulated
        summary.attempted = len(samples)
        stop.summary = summary
        raise
    except ChildFailed as exc:  # (said in the manifest, as a stop is)
        line = f"{PROCESS_DIED}: {exc}"
        finish_run(writer, "failed", time.perf_counter() - started, total, line, finish)
        raise
    except BaseException:
        finish_run(writer, "failed", time.perf_counter() - started, total, None, finish)
        raise
    status = "partial" if wanted is not None else "complete"
    summary = finish_run(
        writer, status, time.perf_counter() - started, total, None, finish, wanted=wanted
    )
    summary.simulated = simulated
    summary.attempted = len(samples)
    return summary


def finish_run(
    writer: RunWriter,
    status: str,
    duration: float,
    total: int,
    stopped: str | None = None,
    finish: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None,
    *,
    wanted: tuple[set[str], int] | None = None,
) -> RecordSummary:
    """Fold the journal, write totals and status (and what ``finish`` makes of the rows) into
    the manifest, release the run.

    ``partial`` (some samples left out on purpose) becomes ``complete`` once every sample
    is stored, and ``incomplete`` while some that were asked for (``wanted``: sample ids and
    trials) are not (a shard of the selection not recorded yet); ``complete`` becomes
    ``incomplete`` while some are not. ``stopped`` says why
    a recording stopped early (kept in the manifest, like the status, until the next one).
    A shard that is not the last to finish leaves the manifest to the last one (status
    ``recording``)."""
    try:
        folded = writer.fold()
        rows = _stored_rows(writer.dir)
        if not folded:
            status = "recording"
        ok = sum(1 for r in rows if r["status"] == "ok")
        error_types: dict[str, int] = {}
        for r in rows:
            if r["status"] != "ok":
                key = r["error_type"] or r["status"]
                error_types[key] = error_types.get(key, 0) + 1
        before = writer.manifest.get("totals") or {}
        tokens_in = [r["input_tokens"] for r in rows if r["input_tokens"] is not None]
        tokens_out = [r["output_tokens"] for r in rows if r["output_tokens"] is not None]
        totals: dict[str, Any] = {
            "samples": total,
            "recorded": len(rows),
            "ok": ok,
            "errors": len(rows) - ok,
            "retries": sum(max(0, (r["attempts"] or 1) - 1) for r in rows),
            "input_tokens": sum(tokens_in) if tokens_in else None,
            "output_tokens": sum(tokens_out) if tokens_out else None,
            # (the run's: each recording's, resumed or not, added up as its tokens are)
            "duration_s": round((before.get("duration_s") or 0) + duration, 3),
        }
        diverged = error_types.get("diverged", 0)
        if diverged:  # a replay's samples that diverged (counted among the errors)
            totals["diverged"] = diverged
        if status == "recording":
            pass
        elif status == "partial" and len(rows) >= total:
            status = "complete"
        elif (status == "partial" and wanted is not None and _short_of(rows, *wanted)) or (
            status == "complete" and len(rows) < total
        ):
            status = "incomplete"
        ending: dict[str, Any] = {"stopped": stopped} if stopped else {}
        if not stopped and "stopped" in writer.manifest:
            ending["stopped"] = None  # an earlier recording's, resumed since
        if finish is not None and folded:
            ending.update(finish(rows, writer.manifest))
        finished_at = None
        before = getattr(writer, "before", None)
        ended = {**writer.manifest, "status": status, "totals": totals, **ending}
        if folded and before is not None and _same_but_times(ended, before):
            # nothing recorded (a rerun of a finished recording): the manifest, which scorings'
            # audit records hash, is put back as it was
            writer.write_manifest(before)
            finished_at = before.get("finished_at")
        elif folded:
            finished_at = utcnow().isoformat()
            writer.update_manifest(status=status, finished_at=finished_at, totals=totals, **ending)
    finally:
        writer.close()
    return RecordSummary(
        run_id=writer.run_id,
        run_dir=str(writer.dir),
        status=status,
        total=total,
        recorded=totals["recorded"],
        ok=ok,
        errors=totals["errors"],
        retries=totals["retries"],
        duration_s=duration,
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        error_types=error_types,
        finished_at=finished_at,
    )


def _same_but_times(ended: dict[str, Any], before: dict[str, Any]) -> bool:
    """Whether a manifest as a recording would end it differs from the one before it only in
    its times (its finish, and the duration added to the totals)."""

    def timeless(manifest: dict[str, Any]) -> dict[str, Any]:
        totals = {k: v for k, v in (manifest.get("totals") or {}).items() if k != "duration_s"}
        kept = {k: v for k, v in manifest.items() if k not in ("finished_at", "totals")}
        return {**kept, "totals": totals}

    return "finished_at" in before and timeless(ended) == timeless(before)


def _short_of(rows: list[dict[str, Any]], ids: set[str], trials: int) -> bool:
    """Whether ``rows`` lack some trial (below ``trials``) of a sample of ``ids``."""
    held = sum(1 for r in rows if r["sample_id"] in ids and (r.get("trial") or 0) < trials)
    return held < len(ids) * trials


def _stored_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of a run's samples file, with those its journals hold (folded or not)."""
    from tcbreplay._store.journal import journal_records
    from tcbreplay._store.parquet import read_table
    from tcbreplay._store.schema import SAMPLES, sample_rows

    rows: dict[tuple[str, int], dict[str, Any]] = {}
    if (run_dir / SAMPLES).exists():
        for row in read_table(run_dir / SAMPLES).to_pylist():
            rows[(row["sample_id"], row.get("trial") or 0)] = row
    for row in sample_rows(list(journal_records(run_dir))):
        rows[(row["sample_id"], row.get("trial") or 0)] = row
    return list(rows.values())


async def _in_process(
    agent: Any,
    chat_model: Any,
    samples: list[Task],
    writer: RunWriter,
    options: RecordOptions,
    progress: ProgressFn | None,
    breaker: Breaker,
    run_one: SampleRunner | None = None,
) -> None:
    queue: asyncio.Queue[Task] = asyncio.Queue()
    run = run_one or run_sample
    for job in samples:
        queue.put_nowait(job)

    async def worker(k: int) -> None:
        await asyncio.sleep(k * STAGGER)
        while True:
            try:
                sample, trial, index = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            record, outcome = await run(agent, sample, writer.run_id, options, trial, index)
            writer.append(record)
            if progress is not None:
                progress(record)
            breaker.see(outcome)

    workers = [asyncio.ensure_future(worker(k)) for k in range(min(options.workers, len(samples)))]
    try:
        await asyncio.gather(*workers)
    finally:
        # a stopped run ends its samples in flight at once (they are recorded when resumed)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await aclose_model(chat_model)


def _library_versions() -> dict[str, str]:
    out = {}
    for name in ("langchain", "langchain-core", "langgraph", "langchain-google-genai"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
