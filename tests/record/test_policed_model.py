"""The chat model an agent of one's own is given keeps to the recording's call policy: its
rate limit, with asynchronous and synchronous calls, on a clock the test moves."""

from __future__ import annotations

import asyncio

from clocks import FakeClock

from tcbreplay._record.agent import CallPolicy, SampleState, current_sample
from tcbreplay._record.models.sim import (
    SAMPLE_ID_KEY,
    TRIAL_KEY,
    SimChatModel,
    SimTransientError,
    parse_sim_options,
)
from tcbreplay._record.policed_model import under_policy
from tcbreplay._record.retry import RateLimiter

CONFIG = {"metadata": {SAMPLE_ID_KEY: "s", TRIAL_KEY: 0}}


def _sim(options: str = "seed=1") -> SimChatModel:
    return SimChatModel.from_settings(parse_sim_options(options), {"s": [("list_items", {})]})


def test_a_factory_s_model_keeps_to_max_rpm_whether_called_async_or_not():
    """--max-rpm 2 let a factory's 6 calls through in 0.1 s (the rate limiter was the built-in
    agent's middleware's alone), while the manifest said max_rpm 2."""
    clock = FakeClock()
    policy = CallPolicy(limiter=RateLimiter(rpm=2, clock=clock), clock=clock)
    model = under_policy(_sim(), policy).bind_tools([])

    async def three() -> None:
        for _ in range(3):
            await model.ainvoke("hi", config=CONFIG)

    asyncio.run(three())
    assert clock.sleeps == [60.0]  # the third waits for the window
    for _ in range(2):  # the fourth fits beside the third; the fifth waits
        model.invoke("hi", config=CONFIG)
    assert clock.sleeps == [60.0, 60.0]


def test_a_factory_s_model_counts_its_retries_and_keeps_the_failure_that_ended_a_call():
    clock = FakeClock()
    policy = CallPolicy(retries=2, backoff=1.0, clock=clock)
    model = under_policy(_sim("seed=1,fault_rate=1"), policy)
    state = SampleState()

    async def call() -> BaseException:
        current_sample.set(state)
        try:
            await model.ainvoke("hi", config=CONFIG)
        except SimTransientError as exc:
            return exc
        raise AssertionError("the sim answered")

    error = asyncio.run(call())
    assert state.retries == 2 and len(clock.sleeps) == 2
    assert state.model_error is error
