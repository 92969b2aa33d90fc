"""Where the parts of a scoring run: threads of this process, or Ray tasks.

Either way the parts' results come back in sample order, as soon as each and those before
it are done, with at most a few parts scored ahead of the one awaited: the results are
written and folded part by part (:class:`tcbreplay._score.results.ResultsWriter`), and memory
holds a few parts whatever the run's size. A failed part stops the others within moments,
and so does Ctrl-C; on Ray, a task whose worker died is run again by Ray (a part's results
depend only on the store).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from types import ModuleType
from typing import Any

import polars as pl
import pyarrow as pa

from tcbreplay._ray import cluster_cpus
from tcbreplay._score.gold_run import use_gold
from tcbreplay._score.parts import PartPlan, PartResult, score_range
from tcbreplay._store.objects import is_remote, store_root
from tcbreplay._store.runs import Run
from tcbreplay._store.views import connect
from tcbreplay.errors import EngineError, TcbReplayError

# how often the main thread looks whether the awaited part is done (a wake-up costs
# microseconds): Ctrl-C reaches the main thread, the only one to raise KeyboardInterrupt,
# within moments even when the kernel hands the signal to a part's thread
_POLL_S = 0.01
# parts scored ahead of the one awaited, per worker
AHEAD = 2


def local_parts(
    con: Any, ranges: list[tuple[int, int]], plan: PartPlan, workers: int
) -> Generator[PartResult]:
    """Score ``ranges`` of ``con``'s run with ``plan``, ``workers`` threads side by side, each
    part on its own cursor; yield the results in order."""
    if len(ranges) == 1:
        yield score_range(con, ranges[0], plan)
        return
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=workers)
    pending: deque[tuple[Future, Any]] = deque()
    given = 0
    try:
        while given < len(ranges) or pending:
            while given < len(ranges) and len(pending) < AHEAD * workers:
                cursor = con.cursor()
                job = pool.submit(score_range, cursor, ranges[given], plan, stop)
                pending.append((job, cursor))
                given += 1
            job, cursor = pending[0]
            # polled, not waited on (see _POLL_S), and no lock of the futures is ever held
            # by this thread; a failed part raises before the one awaited is done
            while not job.done():
                for other, _ in pending:
                    if other.done() and other.exception() is not None:
                        other.result()
                time.sleep(_POLL_S)
            pending.popleft()
            cursor.close()
            yield job.result()
    except BaseException:
        # Ctrl-C, a failed part, or the caller done (a file it writes failed): the other
        # parts stop at their next step, and whatever query a part runs (or starts next) is
        # interrupted, until every part has stopped
        stop.set()
        _stop_parts(pending)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for _, cursor in pending:
            cursor.close()


def _stop_parts(pending: deque[tuple[Future, Any]]) -> None:
    while not all(job.done() for job, _ in pending):
        try:
            for _, cursor in pending:  # an interrupt only stops a query already running
                cursor.interrupt()
            time.sleep(0.05)
        except KeyboardInterrupt:  # Ctrl-C again: the parts are being stopped already
            continue


def ray_parts(
    ray: ModuleType,
    run: Run,
    ranges: list[tuple[int, int]],
    plan: PartPlan,
    gold: pa.Table | None = None,
) -> Generator[PartResult]:
    """Score ``ranges`` of ``run`` with ``plan`` as tasks of the Ray ``ray`` has joined (see
    :func:`tcbreplay._ray.ray_session`), each reading the store itself (``gold``: the calls
    of ``--gold-run``); yield the results in order."""
    task = ray.remote(num_cpus=1)(score_in_task)
    ahead = AHEAD * cluster_cpus(ray)
    gold_ref = None if gold is None else ray.put(gold)
    scoring = secrets.token_hex(8)  # this scoring's, for the tasks' connections (see below)
    pending: deque[Any] = deque()
    given = 0
    try:
        while given < len(ranges) or pending:
            while given < len(ranges) and len(pending) < ahead:
                pending.append(task.remote(location(run), ranges[given], plan, gold_ref, scoring))
                given += 1
            yield _result(ray, pending.popleft())
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


def _result(ray: Any, ref: Any) -> PartResult:
    try:
        return _frames(ray.get(ref))
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, TcbReplayError):  # the store's error, as scoring here says it
            raise exc.cause from None
        raise EngineError(f"a part failed on Ray: {exc}") from exc
    except ray.exceptions.RayError as exc:  # a worker lost more often than Ray retries
        raise EngineError(f"Ray lost a part: {exc}") from exc


def location(run: Run) -> str:
    """Where a task finds ``run``: its folder's absolute path, or its URL on object storage
    (read with the credentials of the machine the task runs on)."""
    return str(run.dir if is_remote(run.dir) else run.dir.resolve())


def score_in_task(
    run_dir: str, samples: tuple[int, int], plan: PartPlan, gold: pa.Table | None,
    scoring: str,
) -> PartResult:  # fmt: skip
    """A part scored in a Ray task: the run opened from its :func:`location`, on the
    connection this worker process keeps for the parts of one scoring (``scoring``: its
    token), opened by the first of them."""
    run, con = _task_connection(run_dir, gold, scoring)
    with run.reading():
        cursor = con.cursor()
        try:
            return _tables(score_range(cursor, samples, plan))
        finally:
            cursor.close()


# A Ray worker process runs the parts of one scoring one after another: it opens the run and
# its DuckDB connection once for them all (0.1-0.2 s: a connection, the files' footers), not
# once per part. The connection of an earlier scoring (another token: the run may have grown
# since) is closed when a part of a new one comes.
_TASK_CONNECTION: dict[str, tuple[Run, Any]] = {}


def _task_connection(run_dir: str, gold: pa.Table | None, scoring: str) -> tuple[Run, Any]:
    key = f"{scoring} {run_dir}"
    if key not in _TASK_CONNECTION:
        for _, old in _TASK_CONNECTION.values():
            old.close()
        _TASK_CONNECTION.clear()
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


# A part's frames cross from a task to the driver as Arrow tables, whose buffers Ray's object
# store hands over without copying them into a pickle (a Polars frame is pickled whole: for
# a part of 250,000 samples, 116 MB written and read again, a third of a second each way).
_FRAMES = ("scores", "pairs", "tool_counts", "summary_rows", "trial_rows")


def _tables(part: PartResult) -> PartResult:
    """``part`` with its frames as Arrow tables, to return from a task (see _FRAMES)."""
    found: dict[str, Any] = {name: getattr(part, name) for name in _FRAMES}
    return replace(part, **{k: v.to_arrow() for k, v in found.items() if v is not None})


# The scores and pairs rows stay Arrow tables on the driver: its writer takes them as they
# are, where making them Polars frames and Arrow tables again cost it about 0.15 s a part of
# 250,000 samples, on the one process every part passes through.
_KEPT_AS_TABLES = ("scores", "pairs")


def _frames(part: PartResult) -> PartResult:
    """A part a task returned (:func:`_tables`) with its frames as Polars frames again, but
    its scores and pairs rows (see _KEPT_AS_TABLES)."""
    found: dict[str, Any] = {
        name: getattr(part, name) for name in _FRAMES if name not in _KEPT_AS_TABLES
    }
    frames: dict[str, Any] = {k: pl.from_arrow(v) for k, v in found.items() if v is not None}
    return replace(part, **frames)
