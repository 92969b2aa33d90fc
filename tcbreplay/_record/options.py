"""How a recording runs: workers, processes, retries, timeouts and rate limits (the manifest's
``runner``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from tcbreplay._machine import usable_cores
from tcbreplay._record.retry import RateLimiter
from tcbreplay.errors import InputError


@dataclass(frozen=True)
class RecordOptions:
    """Runner settings, recorded in the manifest."""

    workers: int = 4
    retries: int = 2
    timeout: float | None = 300.0
    call_timeout: float | None = 120.0
    backoff: float = 1.0
    recursion_limit: int = 50
    max_rpm: float | None = None
    max_tpm: float | None = None
    processes: int | None = None  # None: one per WORKERS_PER_PROCESS workers, at most one per core
    trials: int | None = None  # runs of each sample; None: the run's (resumed), else 1

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise InputError("--workers must be at least 1")
        if self.processes is not None:
            if self.processes < 1:
                raise InputError("--processes must be at least 1")
            if self.processes > self.workers:
                raise InputError(
                    f"--processes {self.processes} is more than --workers {self.workers}: "
                    "each process runs at least one worker"
                )
        if self.trials is not None and not 1 <= self.trials <= MAX_TRIALS:
            raise InputError(f"--trials {self.trials}: must be from 1 to {MAX_TRIALS}")
        if self.retries < 0:
            raise InputError("--retries must not be negative")
        if not math.isfinite(self.backoff) or self.backoff < 0:
            raise InputError(f"--backoff {self.backoff}: must be a finite number, not negative")
        # None means no limit; NaN or infinity would break the deadlines and the limiter
        for name in ("timeout", "call_timeout", "max_rpm", "max_tpm"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InputError(
                    f"--{name.replace('_', '-')} {value}: must be a finite number, above 0"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "retries": self.retries,
            "timeout": self.timeout,
            "call_timeout": self.call_timeout,
            "backoff": self.backoff,
            "recursion_limit": self.recursion_limit,
            "max_rpm": self.max_rpm,
            "max_tpm": self.max_tpm,
            "processes": self.process_count(),
            "trials": self.trials or 1,
        }

    @classmethod
    def resolve(
        cls, given: Mapping[str, Any], stored: Mapping[str, Any] | None = None
    ) -> RecordOptions:
        """The settings ``given``, the rest from a resumed run's ``stored`` runner settings
        (its manifest's ``runner``), the defaults for anything neither holds.

        A stored process count is kept only while the workers are too: it was made for them.
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise TypeError(f"not a runner setting: {', '.join(unknown)}")
        kept = {k: v for k, v in (stored or {}).items() if k in names and k not in given}
        if "workers" in given:
            kept.pop("processes", None)
        return cls(**{**kept, **given})

    def process_count(self) -> int:
        """Processes that run the agents: as given, or one per 32 workers up to the cores.

        The default is one process except on Linux: children are forked, and on macOS a
        forked child can crash in system frameworks its parent has touched.
        """
        if self.processes is not None:
            return self.processes
        if not sys.platform.startswith("linux"):
            return 1
        return max(1, min(usable_cores(), self.workers // WORKERS_PER_PROCESS))

    def rate_limiter(self, processes: int = 1) -> RateLimiter:
        """One process's limiter: an equal share of the run-wide ``--max-rpm``/``--max-tpm``.

        Each of N processes keeps to 1/N of each limit in its own sliding window, so the
        run as a whole never exceeds it (a process with little left to do does not hand
        its share to the others).
        """
        rpm, tpm = (None if v is None else v / processes for v in (self.max_rpm, self.max_tpm))
        return RateLimiter(rpm, tpm)


# The most trials of a sample a recording makes (each one is a stored row).
MAX_TRIALS = 10_000


# With ``--processes`` left out: a process for every this many workers (at most one per core).
# One event loop keeps up with about this many workers waiting on fast model turns.
WORKERS_PER_PROCESS = 32


# Seconds between the starts of a process's workers, so that their model calls do not all
# start (and come back) at once: one event loop serves such a burst one worker after another.
STAGGER = 0.005


ProgressFn = Callable[[dict[str, Any]], None]
