"""Replay one trial of a sample: run it through the agent with the recorded model, then say
what it came to, from its :class:`~tcbreplay._replay.state.SampleReplay`: its status
(``diverged`` where a request went unanswered, or where its agent stopped before asking for
every recorded turn), its divergence, and the ``metadata.replay`` of its row."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tcbreplay._inputs.dataset import Sample
from tcbreplay._record.failures import Outcome
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.sample import run_sample
from tcbreplay._replay.divergence import Divergence
from tcbreplay._replay.fingerprint import canonical_messages
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._replay.state import SampleReplay, current_replay
from tcbreplay._secrets import redact
from tcbreplay._store.records import sample_record
from tcbreplay._store.schema import utcnow
from tcbreplay.errors import LiveCallRefused


def sample_runner(recording: RecordedRun, *, first_message: bool, live: bool = False) -> Any:
    """How the replay runs one trial of a sample: with its :class:`SampleReplay`, which then
    decides its status, divergence and metadata (``first_message``: the user's message is
    the one the sample's messages start with; ``live``: a model goes on live, ``--then``)."""

    async def run_one(
        agent: Any, sample: Sample, run_id: str, options: RecordOptions, trial: int, index: int
    ) -> tuple[dict[str, Any], Outcome]:
        key = (sample.sample_id, trial)
        state = SampleReplay(key, recording)
        recorded = recording.samples.get(key)
        if recorded is None or recorded.status == "missing":
            # a trial the parent holds no recording of (an import's trace files, a serve
            # log, may hold some trials of a sample): nothing to replay, no divergence
            return _unrecorded(sample, run_id, trial, index, state), Outcome("missing", True)
        if first_message and recorded is not None:
            text = recorded.first_human()
            if text is not None and text != sample.input:
                sample = dataclasses.replace(sample, input=text)
        token = current_replay.set(state)
        try:
            record, outcome = await run_sample(agent, sample, run_id, options, trial, index)
        finally:
            current_replay.reset(token)
        _ended_early(state, record)
        _ended_as_recorded(state, record)
        divergence = state.divergence
        diverged = divergence is not None
        if divergence is not None and not state.continued and record["error_type"] in (
            "DivergenceError", None,
        ):  # fmt: skip
            record["status"] = "diverged"
            record["error_type"] = None
            record["error"] = redact(f"diverged at {divergence.line()}")
        if state.recorded_error and recorded is not None:  # the recording's error, as stored
            record["error_type"], record["error"] = recorded.error
        record["metadata"] = {**(record.get("metadata") or {}), "replay": state.to_dict()}
        record["divergences"] = [] if divergence is None else [divergence.to_dict()]
        # a divergence, or a live call --offline refused, is the replay's outcome, not a
        # model that cannot be reached (which would stop the run)
        refused = record["error_type"] == LiveCallRefused.__name__ or state.recorded_error
        answered = outcome.answered or diverged or refused
        if live and (state.live_calls or record["status"] == "ok"):
            # the model that can fail to be reached is the live one: only its answers say it
            # is reached (the recording's turns served answer whatever it does), and a sample
            # that never called it says nothing of it
            answered = state.live_answered > 0
        outcome = dataclasses.replace(outcome, status=record["status"], answered=answered)
        return record, outcome

    return run_one


def _unrecorded(
    sample: Sample, run_id: str, trial: int, index: int, state: SampleReplay
) -> dict[str, Any]:
    now = utcnow().isoformat()
    error = f"no recording of trial {trial} in {state.recording.run_id}"
    record = sample_record(run_id, sample, status="missing", messages=[], attempts=0,
                           started_at=now, finished_at=now, error=error, trial=trial,
                           sample_index=index)  # fmt: skip
    record["metadata"] = {**(record.get("metadata") or {}), "replay": state.to_dict()}
    record["divergences"] = []
    return record


def _ended_as_recorded(state: SampleReplay, record: dict[str, Any]) -> None:
    """A sample whose agent failed itself (a recursion limit, a node's exception) where its
    recording did, every recorded turn served, with the recording's error type: no change
    (the replay's model finds only an error met where a next turn would be asked)."""
    recorded = state.recording.samples.get(state.key)
    if (
        recorded is None or recorded.status != "error" or record["status"] != "error"
        or state.divergence is not None or state.live_calls or state.recorded_error
    ):  # fmt: skip
        return
    if state.turns_reached >= len(recorded.turns) and record["error_type"] == recorded.error[0]:
        state.recorded_error = True


def _ended_early(state: SampleReplay, record: dict[str, Any]) -> None:
    """A sample that ended without error, and without asking for every recorded turn,
    diverged: where the recording has its next message and the replay nothing."""
    recorded = state.recording.samples.get(state.key)
    if record["status"] != "ok" or state.divergence is not None or state.live_calls:
        return
    # (turns asked for, not answers served: an agent that asked one turn twice and stopped
    # had as many answers as the recording's two turns)
    if recorded is None or state.turns_reached >= len(recorded.turns):
        return
    replayed = [json.loads(m["message"]) for m in record["messages"]]
    _, mine, _ = canonical_messages(replayed, state.recording.system)
    _, theirs, _ = canonical_messages(
        (json.loads(t) for t in recorded.texts), state.recording.system
    )
    k = len(mine)
    state.divergence = Divergence(
        state.turns_reached,
        "messages",
        f"messages[{k}]",
        json.dumps(theirs[k], ensure_ascii=False, sort_keys=True) if k < len(theirs) else None,
        None,
    )
