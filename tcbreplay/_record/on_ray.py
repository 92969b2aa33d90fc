"""Recording on Ray (``record --engine ray``): the run's shards as Ray tasks, one per CPU of
the cluster, each recording its shard as ``record --shard I/N`` would (its own journal, its
share of the rate limits) into the store every machine of the cluster reads at the same path.

A task whose worker dies (kill -9, a machine lost) is run again by Ray, and its shard resumes
from its journal: nothing recorded is lost, and nothing is recorded twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tcbreplay._ray import cluster_cpus, ray_session
from tcbreplay.errors import EngineError, TcbReplayError

# times Ray runs a shard's task again after its worker died
RETRIES = 3


def record_on_ray(
    record_shard: Callable[[tuple[int, int]], Any],
    tasks: int,
    address: str | None = None,
) -> Any:
    """Run ``record_shard(shard)`` for the shards of the run as Ray tasks (at most ``tasks``
    of them, one per CPU of the cluster), and return the summary of the shard that finished
    last (the one that completed the run), counting what every shard recorded."""
    with ray_session(address) as ray:
        n = max(1, min(tasks, cluster_cpus(ray)))
        remote = ray.remote(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)(record_shard)
        refs = [remote.remote((k + 1, n)) for k in range(n)]
        try:
            summaries = [_result(ray, ref) for ref in refs]
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
    last = next((s for s in summaries if s.status != "recording"), summaries[-1])
    last.attempted = sum(s.attempted for s in summaries)
    last.processes = sum(s.processes for s in summaries)
    return last


def _result(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, TcbReplayError):  # a shard's own error, as here
            raise exc.cause from None
        raise EngineError(f"a shard failed on Ray: {exc}") from exc
    except ray.exceptions.RayError as exc:  # its worker lost more often than Ray retries
        raise EngineError(f"Ray lost a shard: {exc}") from exc
