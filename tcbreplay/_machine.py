"""The machine as this process uses it: how many cores it may use (its CPU affinity where
the OS reports one), and Python's collector of reference cycles held off while a stage
builds a large structure it keeps whole."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting still frees what is dropped).

    Building millions of objects that all live to the end (an import's spans, messages and
    records) triggers full collections that walk every one of them again and again, for
    nothing: they are all reachable. On 106,672 OTLP spans this was a third of the import
    (``make bench-otel``). The collector is back on, as it was, on the way out.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
