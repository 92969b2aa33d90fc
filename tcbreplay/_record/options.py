"""How a recording runs: workers, processes, retries, timeouts and rate limits (the manifest's
``runner``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from tcbreplay._clock import SYSTEM_CLOCK, Clock
from tcbreplay._machine import usable_cores
from tcbreplay._record.retry import RateLimiter, RecentUse
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
        if self.max_rpm is not None and self.max_rpm < 1:
            # calls are whole and the window a minute: below 1, none could ever be sent
            raise InputError(
                f"--max-rpm {self.max_rpm}: must be at least 1 (a call a minute)",
                hint="give --max-rpm 1 or more: model calls are counted whole, per minute",
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
            raise InputError(
                f"options: not a runner setting: {', '.join(map(repr, unknown))}",
                hint=f"runner settings: {', '.join(sorted(names))}",
            )
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

    def calls_per_minute(self) -> int | None:
        """``--max-rpm`` in whole calls (6.5 allows 6: a call is made or not); None: no limit."""
        return None if self.max_rpm is None else math.floor(self.max_rpm)

    def shard_calls(self, shard: tuple[int, int] | None = None) -> int | None:
        """Shard I of N's whole share of the calls a minute (the run's without ``shard``)."""
        calls = self.calls_per_minute()
        if calls is None or shard is None:
            return calls
        return whole_shares(calls, shard[1])[shard[0] - 1]

    def rate_limiter(
        self,
        process: int = 0,
        processes: int = 1,
        shard: tuple[int, int] | None = None,
        recent: RecentUse | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> RateLimiter:
        """Process ``process`` (0-based) of ``processes``'s limiter (of shard I of N): its
        share of the run-wide ``--max-rpm``/``--max-tpm``, its windows started with its part
        of ``recent`` (the calls and tokens the run, or the shard, stored in the last minute).

        The calls a minute are split in whole numbers, among the shards, then among a
        shard's processes: R split K ways gives the first R mod K floor(R/K) + 1 and the rest
        floor(R/K), which sum to R. (Equal shares, 1.5 of 6 for each of 4 processes, let each
        send 2: 8 a minute.) Split shard by shard, the shares hold when shards run other
        process counts (a resumed shard with few samples left runs fewer). No share is 0: a
        shard of none is refused (the runner's ``check_shard_rate``), and a recording runs
        no more processes than its calls (:meth:`processes_for`). ``--max-tpm`` is split in
        equal, fractional, shares: tokens are counted only once a call is made.

        A process of share s of its shard's S counts s/S of each call of ``recent`` (1/P of
        its tokens) and admits a call only while a whole one fits (:meth:`RateLimiter.acquire`),
        so the processes together add at most S less what the shard stored. A process with
        little left to do does not hand its share to the others. Of each call of the run's
        other rows (``recent.others``) it counts s/R (R: ``--max-rpm``), its part of the run's
        (:meth:`run_parts`): all processes of all shards together then add at most R less
        what the run stored, however a recording with another N, or none, dealt the rows
        that hold it. (Its own rows' calls count more, s/S: those its shard's predecessor
        made, which no shard running on meanwhile counts.)
        """
        calls = self.shard_calls(shard)
        rpm = None if calls is None else whole_shares(calls, processes)[process]
        if rpm == 0:  # (it would limit nothing: RateLimiter takes 0 as no limit)
            raise ValueError(f"process {process} of {processes} has no share of {calls} calls")
        shards = 1 if shard is None else shard[1]
        tpm = None if self.max_tpm is None else self.max_tpm / (shards * processes)
        limiter = RateLimiter(rpm, tpm, clock=clock)
        if recent is not None:
            share = 1.0 if rpm is None or calls is None else rpm / calls
            limiter.prefill(
                recent, calls=share, tokens=1 / processes, others=self.run_parts(limiter)
            )
        return limiter

    def run_parts(self, limiter: RateLimiter) -> tuple[float, float]:
        """The parts of the run's calls and tokens a minute that ``limiter``'s limits are
        (1 for a limit the run has not): what it counts of each call and token of rows that
        other shards stored."""
        calls = self.calls_per_minute()
        return (
            limiter.rpm / calls if calls and limiter.rpm else 1.0,
            limiter.tpm / self.max_tpm if self.max_tpm and limiter.tpm else 1.0,
        )

    def processes_for(self, samples: int, shard: tuple[int, int] | None = None) -> int:
        """Processes a recording of ``samples`` runs: as :meth:`process_count` says, no more
        than the samples, nor than its whole calls a minute (``--max-rpm 2 --processes 4``
        runs 2: a process with a share of none would never send a call, and 2 calls a
        minute need no more)."""
        processes = min(self.process_count(), max(1, samples))
        calls = self.shard_calls(shard)
        return processes if calls is None else max(1, min(processes, calls))


def whole_shares(total: int, parts: int) -> list[int]:
    """``total`` split ``parts`` ways in whole numbers as even as can be, the larger first:
    they sum to ``total`` (7 in 3: 3, 2, 2)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# The most trials of a sample a recording makes (each one is a stored row).
MAX_TRIALS = 10_000


# With ``--processes`` left out: a process for every this many workers (at most one per core).
# One event loop keeps up with about this many workers waiting on fast model turns.
WORKERS_PER_PROCESS = 32


# Seconds between the starts of a process's workers, so that their model calls do not all
# start (and come back) at once: one event loop serves such a burst one worker after another.
STAGGER = 0.005


ProgressFn = Callable[[dict[str, Any]], None]
