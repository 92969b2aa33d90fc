"""One sample recorded: the agent run on its input, its messages and any failure as a journal
record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

from tcbreplay._inputs.dataset import Sample
from tcbreplay._record.agent import SampleState, current_sample
from tcbreplay._record.failures import LONG_WAIT, Outcome, stop_reason
from tcbreplay._record.messages import serialize_messages
from tcbreplay._record.models.sim import SAMPLE_ID_KEY, TRIAL_KEY
from tcbreplay._record.options import RecordOptions
from tcbreplay._secrets import redact
from tcbreplay._store.records import sample_record
from tcbreplay._store.schema import ASKED_FORMAT_KEY, SENT_SYSTEM_KEY, SENT_TOOLS_KEY, utcnow


async def run_sample(
    agent: Any, sample: Sample, run_id: str, options: RecordOptions, trial: int = 0,
    sample_index: int | None = None,
) -> tuple[dict, Outcome]:  # fmt: skip
    """Run one trial of a sample (``sample_index``: its row's number, see
    :func:`tcbreplay._store.schema.row_index`); return its journal record (agent and provider
    failures become data) and what the runner needs to decide whether the run goes on.

    Transient model-call failures are retried inside the agent (see :mod:`tcbreplay._record.agent`);
    ``attempts`` is 1 plus those retries. A sample past ``--timeout`` stops with its messages.
    """
    started_at = utcnow()
    t0 = time.perf_counter()
    state = SampleState()
    current_sample.set(state)
    last: Any = None  # the graph's last state
    error: BaseException | None = None
    deadline = asyncio.timeout(options.timeout)
    try:
        async with deadline:
            async for last in agent.astream(  # noqa: B007 (its last value is read below)
                {"messages": [{"role": "user", "content": sample.input}]},
                config={
                    "metadata": {SAMPLE_ID_KEY: sample.sample_id, TRIAL_KEY: trial},
                    "recursion_limit": options.recursion_limit,
                },
                stream_mode="values",
            ):
                pass
    except TimeoutError as exc:  # the sample's deadline, or a model call's (CallTimeout)
        expired = deadline.expired()
        error = (
            SampleTimeout(f"sample did not finish within {options.timeout:g} s") if expired else exc
        )
    except Exception as exc:  # agent behaviour and provider failures are data
        error = exc
    except (asyncio.CancelledError, SystemExit) as exc:
        # the agent's own (a graph of one's own may raise them): the sample's error; a
        # cancellation of the task that runs it (Ctrl-C, a stopped run) goes on
        task = asyncio.current_task()
        if isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling():
            raise
        error = AgentRaised(f"the agent raised {type(exc).__name__}{_args(exc)}")
    try:
        messages = serialize_messages(state_messages(last), state.timings)
    except AgentStateError as exc:
        messages = []
        error = error or AgentStateError(f"sample {sample.sample_id}: {exc}")
    if error is not None:
        state.keep_failed_call()
    record = sample_record(
        run_id,
        sample,
        status="ok" if error is None else "error",
        messages=messages,
        attempts=1 + state.retries,
        started_at=started_at.isoformat(),
        finished_at=utcnow().isoformat(),
        duration_s=time.perf_counter() - t0,
        error_type=None if error is None else type(error).__name__,
        error=None if error is None else _one_line(error),
        trial=trial,
        sample_index=sample_index,
        metadata=_kept(state),
    )
    # only a model call's failure can stop the run, never a tool's or the sample's deadline
    stop = None
    if error is not None and state.model_error is not None:
        stop = LONG_WAIT if state.asked_wait else stop_reason(state.model_error)
    outcome = Outcome(
        status=record["status"],
        answered=state.answered > 0,
        stop=stop,
        error=None if error is None else f"{record['error_type']}: {record['error']}",
        wait=state.asked_wait if stop == LONG_WAIT else None,
        attempts=record["attempts"],
    )
    return record, outcome


class SampleTimeout(TimeoutError):
    """A sample ran past ``--timeout``."""


class AgentRaised(RuntimeError):
    """The agent raised what ends a task or a program (``CancelledError``, ``SystemExit``):
    its sample's error, not the recording's end."""


class AgentStateError(ValueError):
    """The agent's last state holds no messages that can be read."""


def state_messages(state: Any) -> list[Any]:
    """The messages of a graph's last state, as LangChain messages: those a graph keeps in
    any form LangChain's ``convert_to_messages`` reads (message objects, ``{"role": ...,
    "content": ...}`` dicts, ``(role, content)`` pairs), as a state without the
    ``add_messages`` reducer keeps them; raises :class:`AgentStateError` saying what the state
    holds instead, or that there is none (None: the graph gave no state) or no message."""
    from langchain_core.messages import convert_to_messages

    if state is None:
        raise AgentStateError("the graph returned no messages: its stream ended without a state")
    if isinstance(state, Mapping):
        if "messages" not in state:
            keys = ", ".join(repr(k) for k in list(state)[:5]) or "none"
            raise AgentStateError(
                f"the graph's last state holds no 'messages' (its keys: {keys}): the "
                "conversation is kept under 'messages'"
            )
        messages = state["messages"]
    elif hasattr(state, "messages"):
        messages = state.messages
    else:
        raise AgentStateError(
            f"the graph's last state is {type(state).__name__}, not a mapping with 'messages'"
        )
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise AgentStateError(
            f"the graph's last state has 'messages' {type(messages).__name__}, not a list "
            "of messages"
        )
    messages = list(messages)
    if not messages:
        raise AgentStateError(
            "the graph returned no messages: its last state's 'messages' is empty"
        )
    for k, message in enumerate(messages):
        try:
            messages[k] = convert_to_messages([message])[0]
        except Exception as exc:  # (LangChain's ValueError, TypeError, NotImplementedError...)
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # (not its link)
            raise AgentStateError(
                f"the graph's last state: messages[{k}] ({type(message).__name__}) is no "
                f"message LangChain reads: {why[:200]}"
            ) from None
    return messages


def _args(exc: BaseException) -> str:
    """``(5)`` of ``SystemExit(5)``: what the agent gave it, if anything."""
    return f"({', '.join(repr(a) for a in exc.args)})" if exc.args else ""


def _one_line(exc: BaseException) -> str:
    """The error text stored with a sample: one line, without any secret a provider or a
    proxy may have quoted (redacted before it is cut, so no part of a key is left)."""
    text = redact(" ".join(str(exc).split())) or type(exc).__name__
    return text[:2000]


def _kept(state: SampleState) -> dict[str, Any] | None:
    """What a trial's metadata keeps of its requests that its messages lack (an agent of
    one's own's): the system messages they began with, the answer formats they asked for, the
    tools they were sent where those are not the sample's."""
    kept = {
        SENT_SYSTEM_KEY: state.sent_system(),
        ASKED_FORMAT_KEY: state.asked_formats(),
        SENT_TOOLS_KEY: state.sent_tools(),
    }
    return {k: v for k, v in kept.items() if v is not None} or None
