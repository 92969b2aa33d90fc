"""The locks of a run folder (``flock``, released by the kernel when their process dies): the
one writer's, on ``writer.lock``, which names the process holding it; and the folder's own,
shared by readers and exclusive for a deletion (see :class:`tcbreplay._store.runs.Run`). On
object storage the writer's lock is an object its holder renews
(:class:`tcbreplay._store.objects.LeaseLock`), and readers take none."""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tcbreplay._store.files import writing
from tcbreplay._store.objects import LeaseLock, is_remote, lease_holder
from tcbreplay.errors import RunLockedError

# a writer's lock: a file descriptor holding a flock, or a lock object on object storage
Lock = int | LeaseLock

WAIT_HINT = "wait for it to finish; a writer that died releases the run by itself"
# where writing a lock file fails (a read-only store)
WRITABLE_HINT = "the store must be writable: give another --store, or fix its permissions"


def deleted_meanwhile(run_id: str) -> RunLockedError:
    return RunLockedError(
        f"run {run_id!r} was deleted by another process (record --overwrite) as it was opened",
        hint="run the command again",
    )


def same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file or folder open as ``fd``."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


@contextmanager
def dir_lock(path: Path, how: int) -> Iterator[bool]:
    """flock ``how`` on directory ``path`` while the block runs; whether it was taken (always,
    unless ``how`` holds LOCK_NB)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, how)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def take_lock(path: Path) -> Lock:
    """Take the lock of a run (``path``: its writer.lock) or raise naming the process that
    holds it."""
    if is_remote(path):
        with writing(path, hint=WRITABLE_HINT):
            return LeaseLock.take(path, f"run {path.parent.name!r}")
    fd = acquire_lock(path)
    try:
        sign_lock(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def acquire_lock(path: Path) -> int:
    """Take the lock of a run (``path``: its writer.lock) without writing in it yet; see
    :func:`sign_lock`."""
    with writing(path, hint=WRITABLE_HINT):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise RunLockedError(
            f"run {path.parent.name!r} is being written by {holder}", hint=WAIT_HINT
        ) from None
    if not same_file(fd, path):  # the run's folder was renamed away (deleted) meanwhile
        os.close(fd)
        raise deleted_meanwhile(path.parent.name)
    return fd


def sign_lock(fd: int, path: Path) -> None:
    """Write in a lock just taken the process that holds it (the first bytes a writer
    writes: on a full disk this fails, the lock still held)."""
    with writing(path, hint=WRITABLE_HINT):
        os.ftruncate(fd, 0)
        since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        os.write(fd, f"pid {os.getpid()} since {since}".encode())


def _holder(fd: int) -> str:
    """Who holds a run's lock, as its lock file says. A writer that has just taken the lock
    writes its pid a moment later: an empty file is read again for up to 0.2 s."""
    for _ in range(40):
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            return text
        time.sleep(0.005)
    return "another process"


def release_lock(lock: Lock) -> None:
    """Let go of a writer's lock."""
    if isinstance(lock, LeaseLock):
        lock.release()
    else:
        os.close(lock)


def lock_holder(path: Path) -> str | None:
    """The process that holds a run's lock (``path``: its writer.lock), None if none does.
    Looked at without writing anything."""
    if is_remote(path):
        return lease_holder(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        return None
    finally:
        os.close(fd)
