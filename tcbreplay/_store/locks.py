"""The locks of a run folder (``flock``, released by the kernel when their process dies): the
one writer's, on ``writer.lock``, which names the process holding it; and the folder's own,
shared by readers and exclusive for a deletion (see :class:`tcbreplay._store.run_dir.Run`).
On object storage the writer's lock is an object its holder renews
(:class:`LeaseLock`), and readers take none."""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tcbreplay._store.files import writing
from tcbreplay._store.lock_clock import written_ago
from tcbreplay._store.objects import (
    PreconditionFailed,
    create_object,
    delete_object,
    is_remote,
    read_bytes,
    replace_object,
    url,
)
from tcbreplay._store.schema import LOCK, SHARD_LOCKS
from tcbreplay.errors import RunLockedError

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


def _taken_meanwhile(what: str) -> RunLockedError:
    return RunLockedError(
        f"{what} was taken by another process at the same moment", hint="wait for it to finish"
    )


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


def sign_lock(fd: int, path: Path, who: str = "") -> None:
    """Write in a lock just taken the process that holds it (the first bytes a writer
    writes: on a full disk this fails, the lock still held); ``who``: what it is, before
    its pid (``shard 2/4``)."""
    with writing(path, hint=WRITABLE_HINT):
        os.ftruncate(fd, 0)
        since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        os.write(fd, f"{who + ' ' if who else ''}pid {os.getpid()} since {since}".encode())


def _holder(fd: int) -> str:
    """Who holds a run's lock, as its lock file says. A writer that has just taken the lock
    writes its pid a moment later: an empty file is read again for up to 0.2 s."""
    for _ in range(40):
        text = _shown(os.pread(fd, 200, 0).decode(errors="replace"))
        if text:
            return text
        time.sleep(0.005)
    return "another process"


# the most of a lock's text an error quotes
SHOWN_CHARS = 120


def _shown(text: str) -> str:
    """A lock file's text as an error quotes it: one line, cut short (anyone who can write
    the store can write the lock, and a line of its own would read as tcbreplay's)."""
    line = " ".join(text.split())
    return line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 3] + "..."


def held_shards(run_dir: Path) -> dict[str, str]:
    """The shard locks of a run that a live process holds (``record --shard``): its file's
    name -> the process holding it."""
    out = {}
    for path in sorted(run_dir.glob(SHARD_LOCKS)):
        holder = lock_holder(path)
        if holder is not None:
            out[path.name] = holder
    return out


def being_written(run_dir: Path) -> bool:
    """Whether a live process writes the run now: its writer holds the run's lock, or a
    shard's recording its own (what ``runs``, ``score`` and the hints to finish a run ask)."""
    return lock_holder(run_dir / LOCK) is not None or bool(held_shards(run_dir))


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


# -- on object storage ----------------------------------------------------------------------

# A writer's lock not renewed for this long is a dead writer's (seconds); its holder renews it
# every RENEW_S. Read at each use, so that tests can shorten them.
LEASE_S = 30.0
RENEW_S = 5.0


def holder_text() -> str:
    since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return f"pid {os.getpid()} on {socket.gethostname()} since {since}"


class LeaseLock:
    """A lock object on object storage, held while its holder renews it (see the module's
    docstring); one process holds it at a time."""

    def __init__(self, path: Path, etag: str, text: str) -> None:
        self.path = path
        self._etag = etag
        self._body = text.encode()
        self.lost: RunLockedError | None = None
        self._renewed = time.monotonic()  # when the store last took this holder's renewal
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._thread = threading.Thread(target=self._keep, name="tcbreplay-lease", daemon=True)
        self._thread.start()

    @classmethod
    def take(cls, path: Path, what: str) -> LeaseLock:
        """Take the lock at ``path`` (``what``: the run, as errors name it), or raise a
        :class:`RunLockedError` naming its holder while that holder renews it."""
        text = holder_text()
        try:
            etag = create_object(path, text.encode())
        except PreconditionFailed:
            try:
                age, etag = written_ago(path, store_clock=True)
                holder = read_bytes(path).decode(errors="replace").strip() or "another process"
            except FileNotFoundError:  # released meanwhile: try once more
                try:
                    etag = create_object(path, text.encode())
                except PreconditionFailed:  # and taken again by another
                    raise _taken_meanwhile(what) from None
                return cls(path, etag, text)
            if age < LEASE_S:
                raise RunLockedError(
                    f"{what} is being written by {holder} (its lock {url(path)} renewed "
                    f"{max(0, round(age))} s ago)",
                    hint=f"wait for it to finish; a writer that died releases it "
                    f"{round(LEASE_S)} s after its last renewal",
                ) from None
            try:  # a dead writer's: replaced, unless another process took it meanwhile
                etag = replace_object(path, text.encode(), etag)
            except PreconditionFailed:
                raise _taken_meanwhile(what) from None
        return cls(path, etag, text)

    def _keep(self) -> None:
        while not self._stop.wait(RENEW_S):
            with self._mutex:
                if self._stop.is_set() or not self._renew():
                    return

    def _renew(self) -> bool:
        """Renew the lease (under the mutex); False once another process took it over."""
        if self.lost is not None:
            return False
        try:
            self._etag = replace_object(self.path, self._body, self._etag)
        except PreconditionFailed:
            self.lost = RunLockedError(
                f"{url(self.path)}: another process took this lock over (this one did "
                f"not renew it for {round(LEASE_S)} s)",
                hint="the run is that process's now: run the command again once it is done",
            )
            return False
        except Exception:
            return True  # (the store out of reach a moment: tried again at the next turn)
        self._renewed = time.monotonic()
        return True

    def check(self) -> None:
        """Raise if another process took the lock over. A holder whose last renewal is
        overdue (the process was paused: SIGSTOP, a swapped-out machine) renews first, so
        that it never writes once its lease may have passed to another process."""
        if self.lost is None and time.monotonic() - self._renewed >= 2 * RENEW_S:
            with self._mutex:
                if time.monotonic() - self._renewed >= 2 * RENEW_S:
                    self._renew()
        if self.lost is not None:
            raise self.lost

    def release(self) -> None:
        """Stop renewing the lock and remove it (unless another process holds it by now)."""
        self._stop.set()
        with self._mutex:
            if self.lost is None:
                delete_object(self.path, self._etag)

    def forget(self) -> None:
        """In a forked child: let go of the lock without a word to the store (the parent
        keeps it; the child has no renewing thread)."""
        self._stop.set()


def lease_holder(path: Path) -> str | None:
    """The holder of the lock at ``path`` while it is renewed, None if no live one is."""
    try:
        age, _ = written_ago(path)
        if age >= LEASE_S:
            return None
        return _shown(read_bytes(path)[:200].decode(errors="replace")) or "another process"
    except FileNotFoundError:
        return None


def wait_for_lease(path: Path, what: str) -> LeaseLock:
    """Take the lock at ``path``, waiting while another process holds it."""
    while True:
        try:
            return LeaseLock.take(path, what)
        except RunLockedError:
            time.sleep(min(1.0, RENEW_S))


# a writer's lock: a file descriptor holding a flock, or a lock object on object storage
Lock = int | LeaseLock
