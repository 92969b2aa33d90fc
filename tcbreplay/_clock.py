"""The clock that waits and measures: rate limits, backoff between retries, progress rates.

One object passed to what reads time, so that a test can hand it a clock it moves itself
(tests/clocks.py) instead of racing the machine's: under load, a sleep of 0.3 s can last
a second, and a measured rate drifts from the expected one.
"""

from __future__ import annotations

import time


class Clock:
    """The machine's clocks: monotonic seconds, wall-clock seconds, and an async sleep."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: for intervals and rates."""
        return time.monotonic()

    def now(self) -> float:
        """Seconds since the epoch: for dates a provider sends (``Retry-After: <date>``)."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` without blocking the event loop."""
        import asyncio  # here: a scoring never waits, and the import costs 40 ms at start

        await asyncio.sleep(seconds)

    def sleep_blocking(self, seconds: float) -> None:
        """Wait ``seconds`` blocking the thread: a synchronous model call's, in a thread of
        its own."""
        time.sleep(seconds)


SYSTEM_CLOCK = Clock()
