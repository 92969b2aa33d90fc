"""The machine as this process uses it: how many cores it may use (its CPU affinity where
the OS reports one), how much memory is free, and Python's collector of reference cycles held
off while a stage builds a large structure it keeps whole."""

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


def free_memory() -> int | None:
    """Bytes of memory the machine could give a process now (Linux's MemAvailable: free
    memory and the caches it may drop; elsewhere the free pages), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


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
