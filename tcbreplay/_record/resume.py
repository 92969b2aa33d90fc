"""Taking up a run that exists: waiting for a shard that is making it, refusing one this
recording cannot extend (imported, made another way, of other inputs, other trials or
another selection than its shards'), and the runner settings it keeps unless given anew.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._record.agent_factory import AGENT_FIELD
from tcbreplay._record.options import RecordOptions
from tcbreplay._store.locks import lock_holder
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import LOCK
from tcbreplay._store.shards import SETTLED, SHARD_SELECTION
from tcbreplay.errors import InputError, StoreError, first_line


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


def _changed(
    inputs: BenchmarkInputs, fields: dict[str, Any]
) -> Callable[[dict[str, Any]], str | None]:
    """What says, of a run's manifest, which module of the user's code a recording of
    ``inputs`` (its manifest's ``fields``) finds changed since the run was recorded: that of
    the ``--agent`` factory, or of ``--tools`` (tcbreplay's own not: see
    :func:`tcbreplay._record.run_identity.user_code`); None when neither is."""

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
    named: bool = True,
) -> None:
    """Refuse a run this recording cannot extend: imported, made another way (a replay when
    recording, a recording when replaying: ``source``), of other inputs (``changed`` says
    which module of the user's code changed, if one did), or with a data file that is no
    Parquet file (its footer read only: the file is read in full when the journal is folded
    into it, after the recording, which a broken file would have wasted). ``shard``: the
    user's ``--shard`` (not Ray's tasks, one recording); ``named``: the recording was given
    its run id (``--run-id``), which the hints then say to change."""
    import pyarrow as pa

    from tcbreplay._store.parquet import read_schema

    if manifest.get("source") in ("import", "collect"):
        how = "imported" if manifest["source"] == "import" else "collected"
        raise InputError(f"run {run.run_id!r} was {how}, not recorded: it cannot be resumed")
    other = "use another --run-id" if named else "give the recording a --run-id of its own"
    if manifest.get("source") != source:
        made = "a replay" if manifest.get("source") == "replay" else "a recording"
        raise InputError(
            f"run {run.run_id!r} exists as {made}",
            hint=f"finish it with: {run.resume_command()}; or {other}"
            if manifest.get("source") == "replay"
            else f"{other}, or --overwrite to replace it",
        )
    if manifest.get("fingerprint") != expected:
        code = changed(manifest) if changed is not None else None
        which = code or "dataset, tools, prompt or model, or the code of --agent or --tools"
        hint = (
            f"give every shard the same inputs, or {other}"
            if shard is not None  # (--overwrite is refused with --shard)
            else f"{other}, or --overwrite to replace it"
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
