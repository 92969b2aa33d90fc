"""The event loop recordings run on, and the garbage collector held back while they run.

Both are about CPU: LangGraph spends a few milliseconds per model turn, and with
many workers on one loop every millisecond is a delay for the other workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Coroutine, Iterator
from typing import Any

# Young-generation threshold while recording (Python's default is 700). LangChain
# allocates many short-lived containers per call, and collecting every 700 of them
# kept the collector busy (see BENCHMARKS.md); memory stays flat.
GC_GEN0_THRESHOLD = 50_000


def run_loop(main: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run``, on uvloop when it is installed (less CPU per wake-up)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


@contextlib.contextmanager
def lean_gc() -> Iterator[None]:
    """Freeze what exists now out of the collector's way and collect the young less often.

    Everything built before the run (modules, the agent, the dataset) lives as long
    as the run, yet every full collection walks it; ``gc.freeze`` moves it to the
    permanent generation (which forked children share without copying). The
    previous thresholds are restored and the objects unfrozen on the way out (unless
    something else had frozen objects before: then freezing is left to it).
    """
    old = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # someone else's frozen objects stay theirs
    if freeze:
        gc.freeze()
    gc.set_threshold(max(old[0], GC_GEN0_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if freeze:
            gc.unfreeze()
