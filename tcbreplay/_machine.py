"""The machine as this process uses it: how many cores it may use (its CPU affinity where
the OS reports one), how much memory is free, and Python's collector of reference cycles held
off while a stage builds a large structure it keeps whole."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
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
    records, a slice of exported traces) triggers full collections that walk every one of them
    again and again, for nothing: they are all reachable. On 106,672 OTLP spans this was a
    third of the import (``make bench-otel``); reading 60,000 samples' traces took 15.8 CPU s
    with it and 4.6 s without. The collector is back on, as it was, once no block and no
    :func:`collector_paused_for` holds it off (a cycle made meanwhile is collected then).
    """
    _hold()
    try:
        yield
    finally:
        _release()


def collector_paused_for(seconds: float) -> None:
    """Pause the cyclic collector for the process's next ``seconds``, as
    :func:`collector_paused` does for a block (a child forked meanwhile collects from its
    start: it has no timer)."""
    _hold()
    os.register_at_fork(after_in_child=_forked)
    timer = threading.Timer(seconds, _release)
    timer.daemon = True
    timer.start()


# how many blocks and timers hold the collector off, and whether it was on before the first
_holds = 0
_was_on = False
_lock = threading.Lock()


def _hold() -> None:
    global _holds, _was_on
    with _lock:
        if _holds == 0:
            _was_on = gc.isenabled()
            gc.disable()
        _holds += 1


def _release() -> None:
    global _holds
    with _lock:
        _holds = max(_holds - 1, 0)  # (a child forked inside a block starts with none)
        if _holds == 0 and _was_on:
            gc.enable()


def _forked() -> None:
    global _holds, _lock
    _holds, _lock = 0, threading.Lock()
    if _was_on:
        gc.enable()
