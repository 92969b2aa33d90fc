"""Where the parts of a scoring run: threads of this process (here), or the scorers a Ray
cluster keeps (:mod:`tcbreplay._score.on_ray`).

Either way the parts' results come back in sample order, as soon as each and those before
it are done, with at most a few parts scored ahead of the one awaited: the results are
written and folded part by part (:class:`tcbreplay._score.results_writer.ResultsWriter`),
and memory holds a few parts whatever the run's size. A failed part stops the others within moments,
and so does Ctrl-C.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tcbreplay._score.parts import PartPlan, PartResult, score_range

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
