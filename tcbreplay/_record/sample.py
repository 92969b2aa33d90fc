"""One sample recorded: the agent run on its input, its messages and any failure as a journal
record.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tcbreplay._inputs.dataset import Sample
from tcbreplay._record.agent import SampleState, current_sample
from tcbreplay._record.failures import LONG_WAIT, Outcome, stop_reason
from tcbreplay._record.messages import serialize_messages
from tcbreplay._record.models.sim import SAMPLE_ID_KEY, TRIAL_KEY
from tcbreplay._record.options import RecordOptions
from tcbreplay._secrets import redact
from tcbreplay._store.schema import SENT_SYSTEM_KEY, sample_record, utcnow


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
    messages: list[Any] = []
    error: BaseException | None = None
    deadline = asyncio.timeout(options.timeout)
    try:
        async with deadline:
            async for value in agent.astream(
                {"messages": [{"role": "user", "content": sample.input}]},
                config={
                    "metadata": {SAMPLE_ID_KEY: sample.sample_id, TRIAL_KEY: trial},
                    "recursion_limit": options.recursion_limit,
                },
                stream_mode="values",
            ):
                messages = value["messages"]
    except TimeoutError as exc:  # the sample's deadline, or a model call's (CallTimeout)
        expired = deadline.expired()
        error = (
            SampleTimeout(f"sample did not finish within {options.timeout:g} s") if expired else exc
        )
    except Exception as exc:  # agent behaviour and provider failures are data
        error = exc
    record = sample_record(
        run_id,
        sample,
        status="ok" if error is None else "error",
        messages=serialize_messages(messages, state.timings),
        attempts=1 + state.retries,
        started_at=started_at.isoformat(),
        finished_at=utcnow().isoformat(),
        duration_s=time.perf_counter() - t0,
        error_type=None if error is None else type(error).__name__,
        error=None if error is None else _one_line(error),
        trial=trial,
        sample_index=sample_index,
        metadata=None if (sent := state.sent_system()) is None else {SENT_SYSTEM_KEY: sent},
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
    )
    return record, outcome


class SampleTimeout(TimeoutError):
    """A sample ran past ``--timeout``."""


def _one_line(exc: BaseException) -> str:
    """The error text stored with a sample: one line, without any secret a provider or a
    proxy may have quoted (redacted before it is cut, so no part of a key is left)."""
    text = redact(" ".join(str(exc).split())) or type(exc).__name__
    return text[:2000]
