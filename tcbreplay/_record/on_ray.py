"""Recording on Ray (``record --engine ray``): the run's shards as Ray tasks, one per CPU of
the cluster, each recording its shard as ``record --shard I/N`` would (its own journal, its
share of the rate limits) into the store every machine of the cluster reads at the same path.

A task whose worker dies (kill -9, a machine lost) is run again by Ray, and its shard resumes
from its journal: nothing recorded is lost, and nothing is recorded twice. Nor does it start
its share of ``--max-rpm``/``--max-tpm`` afresh: the shards' rate windows are held by one
actor for the length of the recording (:class:`RateWindows`), where the task run again finds
its shard's window as the dead one left it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tcbreplay._ray import cluster_cpus, ray_session
from tcbreplay._record.retry import RateLimiter, RecentUse
from tcbreplay._store.run_dir import Run
from tcbreplay._store.store_urls import store_root
from tcbreplay.errors import EngineError, StoreError, TcbReplayError

# times Ray runs a shard's task again after its worker died
RETRIES = 3


def record_on_ray(
    record_shard: Callable[[tuple[int, int], Any], Any],
    tasks: int,
    address: str | None = None,
) -> Any:
    """Run ``record_shard(shard, windows)`` for the shards of the run as Ray tasks (at most
    ``tasks`` of them, one per CPU of the cluster; ``windows``: the :class:`RateWindows`
    actor), and return the summary of the shard that settled the run (see :func:`settling`),
    counting what every shard recorded. The caller keeps ``tasks`` within the
    calls a minute of ``--max-rpm``, so that every shard has a whole call of it."""
    with ray_session(address) as ray:
        n = max(1, min(tasks, cluster_cpus(ray)))
        # no CPU of its own: it only keeps time; made anew (windows empty) if its process dies
        windows = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(RateWindows)
        actor = windows.remote()
        remote = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(record_shard)
        refs = [remote.remote((k + 1, n), actor) for k in range(n)]
        try:
            summaries = [_result(ray, ref) for ref in refs]
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
    last = settling(summaries)
    last.attempted = sum(s.attempted for s in summaries)
    last.processes = sum(s.processes for s in summaries)
    return last


def settling(summaries: list[Any]) -> Any:
    """Of the summaries of a recording's shards, all finished, the one of the shard that
    wrote the run's manifest last: its state once every shard has finished. (A shard that
    finishes before another starts writes it too, the run then ``incomplete``: the first
    summary that did is not the run's state.) Found by the ``finished_at`` it wrote, which
    the manifest holds; failing that (a manifest that cannot be read), the one that counted
    the most rows, as the run's rows only grow while it is recorded."""
    wrote = [s for s in summaries if s.finished_at is not None]
    if not wrote:
        return summaries[-1]
    try:
        finished_at = Run(store_root(wrote[0].run_dir)).manifest.get("finished_at")
    except StoreError:
        finished_at = None
    return next(
        (s for s in wrote if s.finished_at == finished_at),
        max(wrote, key=lambda s: s.recorded),
    )


def _result(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, TcbReplayError):  # a shard's own error, as here
            raise exc.cause from None
        raise EngineError(f"a shard failed on Ray: {exc}") from exc
    except ray.exceptions.RayError as exc:  # its worker lost more often than Ray retries
        raise EngineError(f"Ray lost a shard: {exc}") from exc


class RateWindows:
    """The rate windows of a recording's shards, a Ray actor's (one per recording): each
    shard's process asks it before every model call, so that a shard's task that Ray runs
    again waits on the window its dead worker filled, rather than on a new one."""

    def __init__(self) -> None:
        self._limiters: dict[Any, RateLimiter] = {}

    def _limiter(
        self,
        key: Any,
        rpm: float | None,
        tpm: float | None,
        recent: RecentUse | None = None,
        others: tuple[float, float] = (1.0, 1.0),
    ) -> RateLimiter:
        limiter = self._limiters.get(key)
        if limiter is None:
            limiter = self._limiters[key] = RateLimiter(rpm, tpm)
            if recent is not None:
                limiter.prefill(recent, others=others)
        return limiter

    async def acquire(
        self,
        key: Any,
        rpm: float | None,
        tpm: float | None,
        recent: RecentUse | None = None,
        others: tuple[float, float] = (1.0, 1.0),
    ) -> float:
        """Wait until one more call of ``key`` fits its windows; the seconds waited.
        ``recent``: what the stored rows say the shard (and, counted as ``others`` parts of
        one, the run's other rows) called in the last minute, which a window made now starts
        with (a window this actor holds already knows better)."""
        limiter = self._limiter(key, rpm, tpm, recent, others)
        before = limiter.waited
        await limiter.acquire()
        return limiter.waited - before

    def record_tokens(self, key: Any, rpm: float | None, tpm: float | None, tokens: int) -> None:
        self._limiter(key, rpm, tpm).record_tokens(tokens)


class SharedLimiter(RateLimiter):
    """A shard's limiter whose windows the :class:`RateWindows` actor holds (``key``: the
    shard); its limits, the shard's share, as a :class:`RateLimiter`'s; ``recent``: the
    shard's calls of the last minute its stored rows show, for a window the actor makes,
    and ``others`` the parts of one it counts of each call and token of the run's other rows
    (:meth:`tcbreplay._record.options.RecordOptions.run_parts`)."""

    def __init__(
        self,
        windows: Any,
        key: Any,
        rpm: float | None,
        tpm: float | None,
        recent: RecentUse | None = None,
        others: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        super().__init__(rpm, tpm)
        self._windows = windows
        self._key = key
        self._recent = recent
        self._others = others

    async def acquire(self) -> None:
        if self.active:
            recent, self._recent = self._recent, None  # (sent once)
            self.waited += await self._windows.acquire.remote(
                self._key, self.rpm, self.tpm, recent, self._others
            )

    def record_tokens(self, tokens: int | None) -> None:
        if self.tpm and tokens:  # (not waited for: its call is made)
            self._windows.record_tokens.remote(self._key, self.rpm, self.tpm, tokens)
