"""Replay a recorded run: every sample (and trial) through the agent again, its model the
recording itself, with the record runner (workers, processes, resume, the journal).

The replay is an ordinary run (scored, diffed, reported like any), whose manifest holds a
``replay`` block: the parent run, the fork rule (``--then``, ``--fork-at``), the changes
under test, the command that made it (which finishes it when run again), and once it ends
``turns_served``, ``live_calls``, ``diverged_samples``, ``tool_outputs_compared`` and
``tool_outputs_drifted``. Each sample's row keeps its own share under ``metadata.replay``
(the turns served, each with the position of the parent's message it was served from), and
each sample that diverged a row of the ``divergences`` table.

A sample diverges at its first request that the recording does not answer
(:mod:`tcbreplay._replay.model`), or when it ends with recorded turns it never asked for
(its agent stopped early): its status is ``diverged``, unless ``--then`` carried it on live
(each trial's own replay: :mod:`tcbreplay._replay.sample`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.tools import code_sha256
from tcbreplay._record.agent import CallPolicy
from tcbreplay._record.agent_factory import AGENT_FIELD, load_agent_factory
from tcbreplay._record.failures import REPLAY, replay_stop_hint, stop_message
from tcbreplay._record.finish import RecordSummary
from tcbreplay._record.models import (
    ModelChoice,
    build_chat_model,
    check_credentials,
    parse_model,
)
from tcbreplay._record.options import ProgressFn, RecordOptions
from tcbreplay._record.plan import AgentPlan
from tcbreplay._record.runner import run_plan
from tcbreplay._record.tool_names import check_toolset_names
from tcbreplay._replay.fingerprint import canonical_json
from tcbreplay._replay.inputs import replay_inputs, stored_dataset
from tcbreplay._replay.model import RecordedChatModel
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._replay.sample import sample_runner
from tcbreplay._replay.stopped import replaced_stop, still_replaced
from tcbreplay._replay.tools import RecordedOutputTool, stub_tools, unknown_tools_middleware
from tcbreplay._store.files import check_unchanged
from tcbreplay._store.run_dir import Run, validate_run_id
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DATA_FILES, DIVERGENCES
from tcbreplay._store.shards import SELECTION, SHARD_SELECTION, select
from tcbreplay._store.store_urls import DEFAULT_STORE
from tcbreplay.errors import InputError, StoreError, TcbReplayWarning

SOURCE = "replay"  # the manifest's source of a replay
# the divergences a summary lists
SHOWN = 20
# a selection of at most this many samples and trials is read at once, before it is replayed
PREFETCH = 4096


@dataclass
class ReplaySummary(RecordSummary):
    """What a replay did: the recording's summary, and the replay's block."""

    parent_run_id: str = ""
    turns_served: int = 0
    live_calls: int = 0
    diverged_samples: int = 0
    forked_samples: int = 0  # samples --fork-at sent to the --then model at its turn
    tool_outputs_compared: int = 0
    tool_outputs_drifted: int = 0
    tool_outputs: dict[str, int] = field(default_factory=dict)
    divergences: list[dict[str, Any]] = field(default_factory=list)  # the first SHOWN
    divergences_total: int = 0  # the divergences view's rows of the run (all of them)
    # the run held every sample of a replay with these inputs already: nothing replayed now
    already_replayed: bool = False
    by_component: dict[str, int] = field(default_factory=dict)
    # samples whose recording goes on with another user message, which the agent cannot send
    awaiting_user: int = 0
    # samples that ended in the error their recording ended in, where it did
    recorded_errors: int = 0
    # --offline: every call for the --then model was refused (forked samples went on with none)
    offline: bool = False


def replay_run(
    store: Store | str | Path,
    run_id: str,
    *,
    new_run_id: str | None = None,
    system_prompt: str | Path | None = None,
    tools: str | None = None,
    dataset: str | Path | None = None,
    agent: str | None = None,
    then: str | None = None,
    then_options: Mapping[str, str] | None = None,
    fork_at: int | None = None,
    recorded_tools: bool = False,
    offline: bool = False,
    options: RecordOptions | Mapping[str, Any] | None = None,
    progress: ProgressFn | None = None,
    overwrite: bool = False,
    limit: int | None = None,
    sample_ids: Sequence[str] | None = None,
) -> ReplaySummary:
    """Replay run ``run_id`` of ``store`` (a Store or its path) into run ``new_run_id`` (by
    default ``<run_id>-replay-<hash of the options>``); see the module.

    ``system_prompt``, ``tools``, ``dataset`` and ``agent`` (a ``MODULE:FACTORY``) are the
    changes under test, as ``record`` takes them; by default, the run's own. ``then``: a
    model (as ``record --model`` names it, ``then_options`` its settings) that goes on
    where a sample diverges; ``fork_at``: the turn from which every sample goes on with it.
    ``recorded_tools``: tools answer with their recorded outputs instead of running.
    ``offline``: any request for the live model fails at once. ``options``: the runner's
    (workers, processes, timeouts; trials are the run's). Running it again finishes a
    replay that was cut short.
    """
    if then_options and then is None:
        raise InputError(
            f"--model-option {next(iter(then_options))}: sets the --then model; give --then MODEL"
        )
    if offline and then is None:  # (it refuses the --then model's calls: there are none)
        raise InputError("--offline: refuses the --then model's calls; give --then MODEL")
    if fork_at is not None and (then is None or fork_at < 0):
        raise InputError(
            f"--fork-at {fork_at}: needs --then MODEL (the model that goes on from that turn)"
            if then is None
            else f"--fork-at {fork_at}: a turn is 0 or more"
        )
    store = store if isinstance(store, Store) else Store(store)
    parent = store.open_run(run_id)
    # a parent whose data files were changed or damaged since it wrote them is refused before
    # the replay's run is made (its samples would each fail to be read, in a failed run)
    check_unchanged(parent.dir, parent.manifest, DATA_FILES)
    recording = RecordedRun.load(parent)
    inputs = replay_inputs(parent, recording, system_prompt=system_prompt, tools=tools,
                           dataset=dataset)  # fmt: skip
    run_tools = _tools(inputs, recorded_tools, run_id)
    trials = max((trial for _, trial in recording.samples), default=0) + 1
    held = recording.recorded_ids()
    known = set(inputs.dataset.ids())  # (an id the dataset lacks is refused by the runner)
    unrecorded = [sid for sid in sample_ids or () if sid in known and sid not in held]
    if unrecorded:
        raise InputError(
            f"--sample-id {unrecorded[0]!r}: run {run_id!r} holds no recording of it, to replay"
        )
    lacking = [] if sample_ids else [sid for sid in inputs.dataset.ids() if sid not in held]
    if lacking or (not sample_ids and parent.status == "partial"):
        # a run recorded in part (--limit, a shard, interrupted, an import of some traces):
        # the samples it recorded, which alone have anything to replay
        asked = _asked(parent, inputs.dataset.ids() if dataset is None else None)
        if asked is not None:  # those its recording asked for (--limit, --sample-id)
            unrecorded = [sid for sid in lacking if sid in asked]
            if unrecorded:
                warnings.warn(
                    f"run {run_id!r} holds no recording of {len(unrecorded)} of the "
                    f"{len(asked)} samples its recording asked for (such as "
                    f"{unrecorded[0]!r}): the replay replays the {len(held)} it holds",
                    TcbReplayWarning,
                    stacklevel=2,
                )
        elif lacking and parent.status != "partial":
            warnings.warn(
                f"run {run_id!r} holds no recording of {len(lacking)} of the dataset's "
                f"samples (such as {lacking[0]!r}): the replay replays the {len(held)} it holds",
                TcbReplayWarning,
                stacklevel=2,
            )
        sample_ids = sorted(held)
        chosen = None
        if dataset is not None:  # the samples the parent recorded, which it must hold
            missing = [sid for sid in sample_ids if sid not in known]
            if missing:
                raise InputError(
                    f"--dataset {dataset}: no sample {missing[0]!r} (of {len(missing)} missing), "
                    f"which run {run_id!r} recorded; a replay's dataset holds the samples the "
                    "run recorded",
                    hint="give a dataset with them, or choose samples with --sample-id",
                )
    elif limit is not None or sample_ids:
        # a few samples: their messages read at once, from the row groups that hold them
        ids = inputs.dataset.ids()
        chosen = select(ids, limit, sample_ids)
        if len(chosen) * trials <= PREFETCH:
            recording.prefetch([(ids[k], t) for k in chosen for t in range(trials)])
    else:
        chosen = None
    live, then_choice = None, None
    if then is not None:
        then_choice = parse_model(then, then_options, "--then")
        if not offline:  # (offline, the live model is sent nothing)
            named = None if tools else f"run {run_id!r}'s tools ({inputs.toolset.source})"
            check_toolset_names(inputs.toolset, then_choice, named)
            check_credentials(then_choice)
        live = build_chat_model(then_choice, _gold(inputs, then_choice, chosen))
    chat_model = RecordedChatModel(recording=recording, live=live, fork_at=fork_at, offline=offline,
                                   system=inputs.system_prompt)  # fmt: skip
    factory_source = agent or ((parent.manifest.get(AGENT_FIELD) or {}).get("factory"))
    factory = load_agent_factory(factory_source) if factory_source else None
    plan = AgentPlan(
        chat_model,
        run_tools,
        inputs.system_prompt,
        None if factory is None else (factory[0], factory_source or ""),
        run_one=sample_runner(recording, first_message=dataset is None, live=live is not None),
        finish=replay_totals,
        middleware=(unknown_tools_middleware(),) if recorded_tools else (),
    )
    if plan.factory is not None:
        plan.agent(CallPolicy())  # a factory that fails does so before the run is made
    fork = None
    if then_choice is not None:
        fork = {"rule": "fork-at" if fork_at is not None else "then", "model": then_choice.id,
                "turn": fork_at}  # fmt: skip
    basis = replay_basis(parent, inputs, factory_source, then_choice, fork_at, recorded_tools,
                         offline)  # fmt: skip
    # the code that runs, so that a tool or an agent changed under the same name is a replay
    # of its own, never an earlier one's result
    basis["code"] = {
        "tools": {} if recorded_tools else code_sha256(run_tools, inputs.toolset.source),
        "agent": None if factory is None else factory[1].get("sha256"),
    }
    print_ = _sha256(basis)
    new_run_id = validate_run_id(new_run_id or f"{run_id}-replay-{print_[:8]}")
    if new_run_id == run_id:
        raise InputError(f"--run-id {new_run_id}: the replay needs a run id of its own")
    replace_if = None
    if not overwrite:
        print_ = _former_fingerprint(store, new_run_id, basis, inputs) or print_
        if replaced_stop(store, new_run_id, run_id, print_) is not None:
            # (nothing the live model answered is lost: see the module; checked again, and
            # said, under the lock that deletes the run)
            overwrite, replace_if = True, still_replaced(run_id, print_)
    command = _command(run_id, new_run_id, store, system_prompt, tools, dataset, agent, then,
                       then_options, fork_at, recorded_tools, offline)  # fmt: skip
    block = {
        "parent_run_id": run_id,
        "fork": fork,
        "recorded_tools": recorded_tools,
        "offline": offline,
        "changes": {
            "system_prompt": None if system_prompt is None else str(system_prompt),
            "tools": tools,
            "dataset": None if dataset is None else str(dataset),
            "agent": agent,
        },
        "command": command,
    }
    simulated = bool((parent.manifest.get("model") or {}).get("simulated")) and (
        then_choice is None or then_choice.simulated
    )
    model = {
        "id": f"replay:{run_id}",
        "provider": SOURCE,
        "name": run_id,
        "settings": {},
        "simulated": simulated,
        "then": None if then_choice is None else then_choice.to_dict(),
    }
    fields: dict[str, Any] = {SOURCE: block}
    if factory is not None:
        fields[AGENT_FIELD] = factory[1]
    given = dict(options) if isinstance(options, Mapping) else {}
    opts: Any = (
        dataclasses.replace(options, trials=trials)
        if isinstance(options, RecordOptions)
        else {**given, "trials": trials}
    )
    summary = run_plan(
        inputs,
        plan,
        store,
        run_id=new_run_id,
        model=model,
        fingerprint=print_,
        fields=fields,
        options=opts,
        progress=progress,
        overwrite=overwrite,
        overwrite_if=replace_if,
        limit=limit,
        sample_ids=sample_ids,
        simulated=simulated,
        why_stopped=lambda stop: stop_message(stop, then_choice, REPLAY),
        how_to_go_on=lambda stop: replay_stop_hint(stop, new_run_id, command),
        source=SOURCE,
    )
    done = replay_summary(store, summary)
    if fork_at is not None and done.recorded and not done.forked_samples:
        warnings.warn(
            f"--fork-at {fork_at}: no sample reached turn {fork_at}, so none was forked (turn 0 "
            "is a sample's first request)",
            TcbReplayWarning,
            stacklevel=2,
        )
    return done


def _asked(parent: Run, ids: list[str] | None) -> set[str] | None:
    """The samples the parent's recording asked for, when its manifest says it asked for some
    only (``--limit``, ``--sample-id``, of a recording in shards or not); None when it asked
    for the whole dataset or does not say. ``ids``: the parent's dataset's sample ids (None:
    read from its stored dataset)."""
    manifest = parent.manifest
    selection = manifest.get(SHARD_SELECTION) or manifest.get(SELECTION)
    if not isinstance(selection, dict):
        return None
    limit, chosen = selection.get("limit"), selection.get("sample_ids")
    if limit is None and not chosen:
        return None
    if ids is None:
        ids = stored_dataset(parent).ids()
    return {ids[k] for k in select(ids, limit, chosen)}


def replay_basis(
    parent: Run, inputs: BenchmarkInputs, agent: str | None, then: ModelChoice | None,
    fork_at: int | None, recorded_tools: bool, offline: bool,
) -> dict[str, Any]:  # fmt: skip
    """What decides what a replay of ``parent`` should contain: its fingerprint's basis (the
    default run id's hash), the dataset by the sha256 of its stored form (of a parent's own,
    of its file: no entry parsed)."""
    return {
        "parent": parent.run_id,
        "parent_fingerprint": parent.manifest.get("fingerprint")
        or (parent.manifest.get("files") or {}).get("messages.parquet"),
        "dataset_sha256": inputs.dataset.sha256_stored(),
        "tools": inputs.toolset.to_list(),
        "system_prompt": inputs.system_prompt,
        "agent": agent,
        "then": None if then is None else [then.id, then.settings],
        "fork_at": fork_at,
        "recorded_tools": recorded_tools,
        "offline": offline,
    }


def _sha256(basis: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(basis).encode()).hexdigest()


def _former_fingerprint(
    store: Store, run_id: str, basis: dict[str, Any], inputs: BenchmarkInputs
) -> str | None:
    """The fingerprint of replay ``run_id`` when an older tcbreplay made it of these same
    inputs (its fingerprint hashed the dataset's entries, read whole here, once): so that
    one cut short is finished by giving its ``--run-id``. None: no such run."""
    if not store.exists(run_id):
        return None
    manifest = store.open_run(run_id, writing=True).manifest
    stored = manifest.get("fingerprint")
    block = manifest.get(SOURCE) or {}
    if manifest.get("source") != SOURCE or block.get("parent_run_id") != basis["parent"]:
        return None
    if stored == _sha256(basis):
        return None
    # before the code was hashed (its replay's tools and agent taken as they are now)
    uncoded = {k: v for k, v in basis.items() if k != "code"}
    if _sha256(uncoded) == stored:
        return stored
    former = {k: v for k, v in uncoded.items() if k != "dataset_sha256"}
    former["dataset"] = inputs.dataset.entries()
    return stored if _sha256(former) == stored else None


def _gold(
    inputs: BenchmarkInputs, choice: ModelChoice, chosen: list[int] | None
) -> dict[str, list[tuple[str, Any]]]:
    """The gold plans of the samples replayed (``chosen``: their positions; None: all), which
    the ``sim`` model plays where it goes on; none for another model."""
    if not choice.simulated:
        return {}
    samples = inputs.dataset.samples if chosen is None else inputs.dataset.take(chosen)
    return {s.sample_id: [(c.name, c.args) for c in s.target] for s in samples}


def _tools(inputs: BenchmarkInputs, recorded: bool, run_id: str) -> list[Any]:
    """The agent's tools: the inputs' code, or stubs of JSON schemas (recorded outputs
    only), wrapped to serve recorded outputs with ``recorded``."""
    tools = inputs.toolset.tools
    if tools is None:
        if not recorded:
            raise InputError(
                f"run {run_id!r}: its tools are JSON schemas ({inputs.toolset.source}), with no "
                "code to run",
                hint="replay with --recorded-tools (tools answer with their recorded outputs), "
                "or give --tools MODULE:ATTR",
            )
        tools = stub_tools(inputs.toolset.to_list())
    return [RecordedOutputTool.wrap(t) for t in tools] if recorded else list(tools)


def replay_totals(rows: list[dict[str, Any]], manifest: dict[str, Any]) -> dict[str, Any]:
    """The replay block with the run's totals, from its sample rows' ``metadata.replay``."""
    block = dict(manifest.get(SOURCE) or {})
    served = live = diverged = served_tools = forked = recorded_errors = 0
    outcomes: dict[str, int] = {}
    for row in rows:
        replay = (json.loads(row["metadata"]) if row.get("metadata") else {}).get(SOURCE) or {}
        served += len(replay.get("served") or [])
        live += int(replay.get("live_calls") or 0)
        diverged += replay.get("diverged_at") is not None
        forked += replay.get("forked_at") is not None
        recorded_errors += bool(replay.get("recorded_error"))
        served_tools += int(replay.get("tool_outputs_served") or 0)
        for outcome, n in (replay.get("tool_outputs") or {}).items():
            outcomes[outcome] = outcomes.get(outcome, 0) + int(n)
    block.update(
        turns_served=served,
        live_calls=live,
        diverged_samples=diverged,
        forked_samples=forked,
        tool_outputs_compared=sum(outcomes.values()),
        tool_outputs_drifted=outcomes.get("drift", 0),
        tool_outputs={k: outcomes[k] for k in sorted(outcomes)},
        tool_outputs_served=served_tools,
        recorded_errors=recorded_errors,
    )
    return {SOURCE: block}


def replay_summary(store: Store, summary: RecordSummary) -> ReplaySummary:
    """A recording's summary with its replay block and first divergences."""
    from tcbreplay._store.parquet import read_table

    run = store.open_run(summary.run_id)
    block = run.manifest.get(SOURCE) or {}
    rows: list[dict[str, Any]] = []
    if (run.dir / DIVERGENCES).exists():
        try:
            rows = read_table(run.dir / DIVERGENCES).to_pylist()
        except OSError as exc:
            raise StoreError(f"{run.dir / DIVERGENCES}: cannot be read ({exc})") from exc
    by_component: dict[str, int] = {}
    awaiting = 0
    for row in rows:
        by_component[row["component"]] = by_component.get(row["component"], 0) + 1
        if row["replayed"] is None and row["recorded"] and '"role": "user"' in row["recorded"]:
            awaiting += 1
    return ReplaySummary(
        **dataclasses.asdict(summary),
        parent_run_id=str(block.get("parent_run_id") or ""),
        turns_served=int(block.get("turns_served") or 0),
        live_calls=int(block.get("live_calls") or 0),
        diverged_samples=int(block.get("diverged_samples") or 0),
        forked_samples=int(block.get("forked_samples") or 0),
        tool_outputs_compared=int(block.get("tool_outputs_compared") or 0),
        tool_outputs_drifted=int(block.get("tool_outputs_drifted") or 0),
        tool_outputs=dict(block.get("tool_outputs") or {}),
        divergences=[{k: v for k, v in r.items() if k != "run_id"} for r in rows[:SHOWN]],
        divergences_total=len(rows),
        already_replayed=not summary.attempted and bool(summary.recorded),
        by_component=by_component,
        awaiting_user=awaiting,
        recorded_errors=int(block.get("recorded_errors") or 0),
        offline=bool(block.get("offline")),
    )


def _command(
    run_id: str, new_run_id: str, store: Store, system_prompt: Any, tools: Any, dataset: Any,
    agent: Any, then: Any, then_options: Mapping[str, str] | None, fork_at: Any,
    recorded_tools: bool, offline: bool,
) -> str:  # fmt: skip
    """The ``tcbreplay replay`` command that makes (and finishes) this replay."""
    words = ["tcbreplay", "replay", run_id, "--run-id", new_run_id]
    for flag, value in (("--system-prompt", system_prompt), ("--tools", tools),
                        ("--dataset", dataset), ("--agent", agent), ("--then", then),
                        ("--fork-at", fork_at)):  # fmt: skip
        if value is not None:
            words += [flag, str(value)]
    for key, value in (then_options or {}).items():
        words += ["--model-option", f"{key}={value}"]
    words += [flag for flag, on in (("--recorded-tools", recorded_tools),
                                    ("--offline", offline)) if on]  # fmt: skip
    if store.root != Path(DEFAULT_STORE):
        words += ["--store", str(store.root)]
    return " ".join(shlex.quote(w) for w in words)
