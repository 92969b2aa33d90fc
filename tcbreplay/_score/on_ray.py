"""Scoring on Ray (``score --engine ray``): the run's parts scored by actors the cluster keeps
between commands, each reading the store itself.

Ray starts a job's worker processes anew for every command that joins a cluster, and each
then imports the scoring libraries and opens the run: about a second and a half of a command
that scores a million samples in under three (BENCHMARKS.md, "Scale"). So the parts are
scored by :class:`Scorer` actors that outlive the command: one per CPU of the cluster, named
and detached (Ray's ``lifetime="detached"``) in the :data:`NAMESPACE` namespace. The next
command that joins the cluster finds them started, their imports done; one idle for
:data:`KEEP_S` seconds (``score --ray-keep``: the last scoring's) leaves the cluster and
frees its memory, and one idle for :data:`CLOSE_S` closes the run it had open. Kept for no
time (``--ray-keep 0``), they leave as the scoring ends, the command stopping them; on
Ctrl-C too, parts begun included.

Each reserves a hundredth of a CPU, spread over the cluster's machines: idle, it holds
nothing another job misses, and busy, it scores one part at a time, with
:data:`tcbreplay._score.engines.AHEAD` parts given to it ahead. Their names carry a digest
of the tcbreplay code the command runs (:func:`code_digest`), so that a command of other
code never uses them: it starts scorers of its own, and the others leave once idle. A scorer
killed (kill -9, a machine lost) is started again by Ray, which gives it its parts again (a
part's results depend only on the store); one gone for good (it left as the command found it,
or died too often) is started anew, and its part given to it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import threading
import time
import warnings
from collections import deque
from collections.abc import Generator
from dataclasses import replace
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pyarrow as pa

from tcbreplay._ray import cluster_cpus, own_ray
from tcbreplay._score.engines import AHEAD
from tcbreplay._score.gold_run import use_gold
from tcbreplay._score.parts import PartPlan, PartResult, score_range
from tcbreplay._store.objects import is_remote
from tcbreplay._store.run_dir import Run
from tcbreplay._store.store_urls import store_root
from tcbreplay._store.views import connect
from tcbreplay._words import count as counted
from tcbreplay._words import noun_for
from tcbreplay.errors import EngineError, TcbReplayError, TcbReplayWarning

# the Ray namespace of the scorers
NAMESPACE = "tcbreplay"
# seconds a scorer stays on the cluster after its last part, and keeps the run it scored open
KEEP_S = 300.0
CLOSE_S = 5.0
# times Ray starts a scorer again after it died (over its life), giving it its parts again
RETRIES = 3


def ray_parts(
    ray: ModuleType,
    run: Run,
    ranges: list[tuple[int, int]],
    plan: PartPlan,
    gold: pa.Table | None = None,
    keep_s: float = KEEP_S,
) -> Generator[PartResult]:
    """Score ``ranges`` of ``run`` with ``plan`` on the scorers of the Ray ``ray`` has joined
    (see :func:`tcbreplay._ray.ray_session`), one per CPU of its cluster, each reading the
    store itself (``gold``: the calls of ``--gold-run``); yield the results in order. The
    scorers stay ``keep_s`` seconds idle on the cluster after it (0: they are stopped as it
    ends)."""
    kept = scorers(ray, cluster_cpus(ray), keep_s)
    for found in kept:  # (those started already, and any given no part by this scoring)
        found.keep.remote(keep_s)
    gold_ref = None if gold is None else ray.put(gold)
    scoring = secrets.token_hex(8)  # this scoring's, for the scorers' connections (see below)

    def submit(i: int) -> Any:
        return kept[i % len(kept)].score.remote(location(run), ranges[i], plan, gold_ref, scoring)

    def again(i: int) -> Any:
        # the scorer left the cluster as this command found it (idle for its time), or died
        # more often than Ray starts it again: one started anew scores the part
        kept[i % len(kept)] = scorer(ray, i % len(kept), keep_s)
        return submit(i)

    pending: deque[tuple[int, Any]] = deque()
    given = 0
    try:
        while given < len(ranges) or pending:
            while given < len(ranges) and len(pending) < AHEAD * len(kept):
                pending.append((given, submit(given)))
                given += 1
            i, ref = pending.popleft()
            yield _result(ray, ref, lambda: again(i))  # noqa: B023 (called at once)
    except BaseException:
        # Ctrl-C, a failed part, or the caller done (a file it writes failed): the parts not
        # begun are not scored (one a scorer has begun runs to its end, and is dropped)
        for _, ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        raise
    finally:
        if not keep_s:  # (another scoring using them meanwhile starts them anew)
            for kept_scorer in kept:
                with contextlib.suppress(Exception):
                    ray.kill(kept_scorer, no_restart=True)


def scorers(ray: Any, count: int, keep_s: float = KEEP_S) -> list[Any]:
    """``count`` scorers of this code on the cluster ``ray`` has joined: those there already,
    the others started, which a warning says on a cluster that outlives the command (unless
    they are kept for no time)."""
    started = sum(not _there(ray, k) for k in range(count))
    if started and keep_s and not own_ray():
        where = ray.get_runtime_context().gcs_address
        warnings.warn(
            TcbReplayWarning(
                f"started {counted(started, 'scorer')} on the Ray cluster at {where}: "
                f"they stay there for the next scorings, and leave after {_idle(keep_s)} "
                "idle (--ray-keep 0: as the scoring ends)"
            ),
            stacklevel=2,
        )
    return [scorer(ray, k, keep_s) for k in range(count)]


def _idle(seconds: float) -> str:
    """``seconds`` in words: 5 minutes, 1 second, 1.5 minutes."""
    value, unit = (seconds / 60, "minute") if seconds >= 60 else (seconds, "second")
    return f"{value:g} {noun_for(value, unit)}"


def _there(ray: Any, k: int) -> bool:
    """Whether scorer ``k`` of this code is on the cluster."""
    try:
        ray.get_actor(_name(k), namespace=NAMESPACE)
    except ValueError:  # (Ray's word for no such actor)
        return False
    return True


def _name(k: int) -> str:
    return f"scorer-{code_digest()}-{k}"


def scorer(ray: Any, k: int, keep_s: float = KEEP_S) -> Any:
    """Scorer ``k`` of this code on the cluster ``ray`` has joined, started if not there."""
    return (
        ray.remote(Scorer)
        .options(
            name=_name(k),
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            # a hundredth of a CPU: nothing another job misses, but only on machines that
            # have CPUs for Ray's work (not a head node started with none)
            num_cpus=0.01,
            scheduling_strategy="SPREAD",
            max_restarts=RETRIES,
            max_task_retries=RETRIES,
        )
        .remote(keep_s, CLOSE_S)
    )


class Scorer:
    """A Ray actor that scores the parts it is given, one at a time (see the module); it
    closes the run it scored once idle for ``close_s`` seconds, and leaves the cluster once
    idle for ``keep_s``, or what the last scoring gave (at least ``close_s``: a scoring that
    keeps them for no time stops them itself)."""

    def __init__(self, keep_s: float, close_s: float) -> None:
        self._keep_s, self._close_s = keep_s, close_s
        self._scoring = threading.Lock()
        self._last = time.monotonic()
        if _in_actor():
            threading.Thread(target=self._while_idle, daemon=True).start()

    def score(
        self, run_dir: str, samples: tuple[int, int], plan: PartPlan, gold: pa.Table | None,
        scoring: str,
    ) -> PartResult:  # fmt: skip
        with self._scoring:
            try:
                return score_in_task(run_dir, samples, plan, gold, scoring)
            finally:
                self._last = time.monotonic()

    def keep(self, keep_s: float) -> None:
        """Stay ``keep_s`` seconds idle from now on (a later scoring's ``--ray-keep``): the
        scoring's parts come after this call, so a scorer idle that long already does not
        leave before them."""
        self._keep_s = keep_s
        self._last = time.monotonic()

    def pid(self) -> int:
        """The scorer's process."""
        return os.getpid()

    def _while_idle(self) -> None:
        import ray

        me = ray.get_runtime_context().current_actor
        while True:
            keep_s = max(self._keep_s, self._close_s)
            time.sleep(min(self._close_s, keep_s) / 2)
            if not self._scoring.acquire(blocking=False):
                continue
            try:
                idle = time.monotonic() - self._last
                if idle >= self._close_s:
                    close_connections()
                if idle >= keep_s:
                    ray.kill(me, no_restart=True)
                    return
            finally:
                self._scoring.release()


def _in_actor() -> bool:
    import ray

    return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None


@cache
def code_digest() -> str:
    """A digest of the tcbreplay code this process runs (its modules and SQL files)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".sql")):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read())
    return digest.hexdigest()[:16]


def _result(ray: Any, ref: Any, again: Any) -> PartResult:
    """The part ``ref`` will hold, as Polars frames (see _frames); if its scorer is gone,
    the part ``again()`` scores anew."""
    try:
        try:
            return _frames(ray.get(ref))
        except ray.exceptions.RayActorError:
            return _frames(ray.get(again()))
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, TcbReplayError):  # the store's error, as scoring here says it
            raise exc.cause from None
        raise EngineError(f"a part failed on Ray: {exc}") from exc
    except ray.exceptions.RayError as exc:  # a scorer lost more often than Ray restarts it
        raise EngineError(f"Ray lost a part: {exc}") from exc


def location(run: Run) -> str:
    """Where a scorer finds ``run``: its folder's absolute path, or its URL on object storage
    (read with the credentials of the machine the scorer runs on)."""
    return str(run.dir if is_remote(run.dir) else run.dir.resolve())


def score_in_task(
    run_dir: str, samples: tuple[int, int], plan: PartPlan, gold: pa.Table | None,
    scoring: str,
) -> PartResult:  # fmt: skip
    """A part scored by a scorer: the run opened from its :func:`location`, on the
    connection the scorer keeps for the parts of one scoring (``scoring``: its token),
    opened by the first of them."""
    run, con = _task_connection(run_dir, gold, scoring)
    with run.reading():
        cursor = con.cursor()
        try:
            return _tables(score_range(cursor, samples, plan))
        finally:
            cursor.close()


# A scorer scores the parts of one scoring one after another: it opens the run and its DuckDB
# connection once for them all (0.1-0.2 s: a connection, the files' footers), not once per
# part. The connection of an earlier scoring (another token: the run may have grown since) is
# closed when a part of a new one comes, or when the scorer has been idle a while.
_TASK_CONNECTION: dict[str, tuple[Run, Any]] = {}


def _task_connection(run_dir: str, gold: pa.Table | None, scoring: str) -> tuple[Run, Any]:
    key = f"{scoring} {run_dir}"
    if key not in _TASK_CONNECTION:
        close_connections()
        run = Run(store_root(run_dir))
        with run.reading():
            con = connect(runs=[run], traces_only=True, threads=1)
            try:
                if gold is not None:
                    use_gold(con, gold)
            except BaseException:
                con.close()
                raise
        _TASK_CONNECTION[key] = (run, con)
    return _TASK_CONNECTION[key]


def close_connections() -> None:
    """Close the run this process keeps open for a scoring, if any."""
    for _, old in _TASK_CONNECTION.values():
        old.close()
    _TASK_CONNECTION.clear()


# A part's frames cross from a scorer to the driver as Arrow tables, whose buffers Ray's
# object store hands over without copying them into a pickle (a Polars frame is pickled
# whole: for a part of 250,000 samples, 116 MB written and read again, a third of a second
# each way).
_FRAMES = ("scores", "pairs", "tool_counts", "summary_rows", "trial_rows")


def _tables(part: PartResult) -> PartResult:
    """``part`` with its frames as Arrow tables, to return from a scorer (see _FRAMES)."""
    found: dict[str, Any] = {name: getattr(part, name) for name in _FRAMES}
    return replace(part, **{k: v.to_arrow() for k, v in found.items() if v is not None})


# The scores and pairs rows stay Arrow tables on the driver: its writer takes them as they
# are, where making them Polars frames and Arrow tables again cost it about 0.15 s a part of
# 250,000 samples, on the one process every part passes through.
_KEPT_AS_TABLES = ("scores", "pairs")


def _frames(part: PartResult) -> PartResult:
    """A part a scorer returned (:func:`_tables`) with its frames as Polars frames again, but
    its scores and pairs rows (see _KEPT_AS_TABLES)."""
    found: dict[str, Any] = {
        name: getattr(part, name) for name in _FRAMES if name not in _KEPT_AS_TABLES
    }
    frames: dict[str, Any] = {k: pl.from_arrow(v) for k, v in found.items() if v is not None}
    return replace(part, **frames)
