"""A clock the test moves: sleeping advances it at once, so nothing races the machine's time."""

from __future__ import annotations

import asyncio

from tcbreplay._clock import Clock


class FakeClock(Clock):
    """Starts at ``start``; ``advance`` moves it; ``sleep`` moves it and yields to the loop.

    ``sleeps`` lists every wait asked of it, in order, so a test can assert the waits
    themselves instead of timing them.
    """

    def __init__(self, start: float = 1000.0, epoch: float = 1_800_000_000.0) -> None:
        self.t = start
        self.epoch = epoch  # the wall clock at `start`
        self.start = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def now(self) -> float:
        return self.epoch + (self.t - self.start)

    def advance(self, seconds: float) -> None:
        self.t += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)

    def sleep_blocking(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += max(0.0, seconds)
