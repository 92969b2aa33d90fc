"""The one writer of a run: the journal it appends to, its manifest, and its removal."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tcbreplay._store.files import (
    FOLDING,
    file_record,
    not_written,
    write_error,
    write_json_atomic,
    writing,
    written_sha256,
)
from tcbreplay._store.journal import ChunkJournal
from tcbreplay._store.locks import (
    WAIT_HINT,
    WRITABLE_HINT,
    LeaseLock,
    Lock,
    acquire_lock,
    held_shards,
    release_lock,
    sign_lock,
    take_lock,
)
from tcbreplay._store.manifest import read_manifest
from tcbreplay._store.objects import is_remote, remove_object, remove_tree, same_version, version
from tcbreplay._store.schema import (
    DATA_FILES,
    DIVERGENCES,
    JOURNAL,
    JOURNAL_CHUNKS,
    LOCK,
    MANIFEST,
    SCHEMA_VERSION,
    shard_journal,
    shard_lock,
)
from tcbreplay.errors import (
    InputError,
    RunLockedError,
    TcbReplayError,
)

# Hidden folders of deletions under way or cut short: ``<prefix><run_id>-<random>``. No run id
# starts with a dot, so no run is ever named so.
DELETED_PREFIX = ".deleted-"


def discard_folder(path: Path) -> None:
    """Remove a folder of the store: renamed away in one step, then deleted. (On object
    storage, which cannot rename a folder, its manifest goes first: what is left of a removal
    cut short is no run, and no command reads it.)"""
    if is_remote(path):
        with writing(path, hint=WRITABLE_HINT):
            remove_object(path / MANIFEST)
            remove_tree(path)
        return
    away = path.with_name(f"{DELETED_PREFIX}{path.name}-{secrets.token_hex(4)}")
    with writing(path, hint=WRITABLE_HINT):
        os.rename(path, away)
    shutil.rmtree(away, ignore_errors=True)


# Checks a run's manifest as it is once its writer holds the run's lock, before the writer
# writes anything: raises to refuse the run (left as it was), or returns the fields to write
# into the manifest at once. Read and written under one lock, a check of what the writers of
# a run must agree on cannot be passed by two of them at once (a compare-and-set).
Claim = Callable[[dict[str, Any]], dict[str, Any]]


class RunWriter:
    """The one writer of a run: appends finished samples to the journal, then folds it in."""

    def __init__(
        self,
        path: Path,
        lock: Lock | None = None,
        claim: Claim | None = None,
        existing: bool = False,
    ) -> None:
        """Take the run (``lock``: its lock, already taken; ``claim``: see :data:`Claim`;
        ``existing``: a run written before, whose data files must be those it wrote)."""
        from tcbreplay._store.journal import drop_torn_tail

        self.dir = path
        self.run_id = path.name
        # a local lock is signed once the run is this writer's: one refused leaves its text
        if lock is None:
            lock_fd = take_lock(path / LOCK) if is_remote(path) else acquire_lock(path / LOCK)
        self._lock_fd: Lock | None = lock_fd if lock is None else lock
        self._failed: TcbReplayError | None = None
        self._journal: Any = None
        try:
            refuse_shards(path)
            if existing:  # before anything of it changes
                self._check_unchanged()
            # (the manifest as it was before this writer: a recording that records nothing
            # puts it back as it was, see finish_run)
            self.before: dict[str, Any] | None = None
            fields = None
            if claim is not None:
                self.before = read_manifest(path)
                fields = claim(self.before)
            if lock is None and isinstance(self._lock_fd, int):
                sign_lock(self._lock_fd, path / LOCK)
            if isinstance(self._lock_fd, LeaseLock):  # on object storage: batches of lines
                with writing(path / JOURNAL_CHUNKS, hint=WRITABLE_HINT):
                    self._journal = ChunkJournal(path / JOURNAL_CHUNKS, self._lock_fd)
            else:
                with writing(path / JOURNAL, hint=WRITABLE_HINT):
                    drop_torn_tail(path / JOURNAL)
                    self._journal = (path / JOURNAL).open("a", encoding="utf-8")
            if fields:
                self.update_manifest(**fields)
        except BaseException:
            if self._journal is not None:
                self._close_journal()
            if lock is None:  # one given stays the giver's to release
                release_lock(lock_fd)
            raise

    @property
    def manifest(self) -> dict[str, Any]:
        return read_manifest(self.dir)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        self._check_lock()
        write_json_atomic(self.dir / MANIFEST, manifest, hint=WRITABLE_HINT)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        manifest = {**self.manifest, **fields}
        if manifest.get(FOLDING) is None:  # (the mark of a fold under way, gone once done)
            manifest.pop(FOLDING, None)
        self.write_manifest(manifest)
        return manifest

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished sample; it survives a crash of this process from now on."""
        self.append_line(journal_line(record))

    def append_line(self, line: str) -> None:
        """Append one finished sample already encoded by :func:`journal_line`. After a failed
        append (a full disk) none is tried again: a torn line stays the journal's last."""
        if self._failed is not None:
            raise self._failed
        try:
            self._journal.write(line + "\n")
            self._journal.flush()
        except TcbReplayError as exc:  # (object storage: another writer took the run over)
            self._failed = exc
            raise
        except OSError as exc:
            self._failed = write_error(self.dir / JOURNAL, exc, hint=WRITABLE_HINT)
            raise self._failed from exc

    def forget(self) -> None:
        """In a forked child: close this writer's files unflushed; the parent keeps the lock."""
        if isinstance(self._journal, ChunkJournal):
            self._journal.forget()
        else:
            os.close(self._journal.fileno())
        if isinstance(self._lock_fd, LeaseLock):
            self._lock_fd.forget()
        elif self._lock_fd is not None:
            os.close(self._lock_fd)
        self._lock_fd = None

    def _check_lock(self) -> None:
        """Refuse to write once another process took the run over (object storage only: a
        writer whose lock was not renewed for its lease, paused or cut off)."""
        if isinstance(self._lock_fd, LeaseLock):
            self._lock_fd.check()

    def fold(self, records: list[dict[str, Any]] | None = None) -> bool:
        """Fold the journal into the Parquet files and record their sha256 in the manifest;
        whether it did (a :class:`ShardWriter` leaves it to the last shard).

        ``records``: a whole run's samples held in memory by a writer that appended none
        (an import, which is all or nothing), folded as if read back from the journal.
        """
        self._close_journal()
        self._fold(records)
        return True

    def _fold(self, records: list[dict[str, Any]] | None = None) -> None:
        from tcbreplay._store.journal import fold_journal

        self._check_lock()
        self._check_unchanged()
        # Until the fold has recorded its files, they may be the old ones or the fold's: a
        # fold cut short (before it recorded them) leaves them unvouched for (FOLDING), and
        # is folded again from the journal it kept
        self.update_manifest(**{FOLDING: True})
        fold_journal(self.dir, records, before_write=self._check_lock)
        # the files are written in this version's layout (a version 1 run's included)
        names = [*DATA_FILES, *([DIVERGENCES] if (self.dir / DIVERGENCES).exists() else [])]
        self.update_manifest(
            schema_version=SCHEMA_VERSION,
            files={name: file_record(self.dir / name) for name in names},
            **{FOLDING: None},
        )

    def _check_unchanged(self) -> None:
        """Refuse to fold into data files that are not those the run wrote (rows removed or
        changed by hand): the fold would keep them, and record their hash as the run's own.
        A file of the version the manifest recorded is not read; another (a copied store)
        is hashed."""
        manifest = self.manifest
        for name in DATA_FILES:
            path, recorded = self.dir / name, written_sha256(manifest, name)
            if recorded is None:
                continue
            known = manifest["files"][name]
            with writing(path, hint=WRITABLE_HINT):
                unchanged = not path.exists() or same_version(known, version(path))
                digest = recorded if unchanged else file_record(path)["sha256"]
            if digest != recorded:
                raise not_written(path, manifest)

    def discard(self) -> None:
        """Remove the run (one this writer made and could not finish), then release it."""
        try:
            self._close_journal()
            discard_folder(self.dir)
        finally:
            self.close()

    def _close_journal(self) -> None:
        # a line a failed append left in the buffer is lost: that sample is recorded again
        if isinstance(self._journal, ChunkJournal):
            with writing(self.dir / JOURNAL_CHUNKS, hint=WRITABLE_HINT):
                self._journal.close()  # its last batch: a failure to write it is said
            return
        with suppress(OSError):
            self._journal.close()

    def close(self) -> None:
        try:
            if not self._journal.closed:
                self._close_journal()
        finally:
            if self._lock_fd is not None:
                release_lock(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_shard_store(path: Path, flag: str = "--shard") -> None:
    """Refuse shards of a run on object storage (``flag``: what asked for them): they hold
    their locks with the file system's own (flock)."""
    if is_remote(path):
        raise InputError(
            f"{flag}: a store on object storage takes one writer per run",
            hint="record the shards into a shared file system's store",
        )


def refuse_shards(path: Path) -> None:
    """Refuse to write a run while shards of it record (``record --shard``)."""
    held = held_shards(path)
    if held:
        name, holder = next(iter(held.items()))
        raise RunLockedError(
            f"run {path.name!r} is being recorded in shards ({name} by {holder})",
            hint=f"{WAIT_HINT}; or record it as another shard (--shard)",
        )


# how often a shard looks whether the run's lock is free (another shard holds it for moments)
_LOCK_POLL_S = 0.02
SHARD_WHO = "shard"
# how long a shard waits for another writer of the run (one making it, a shard starting at
# the same moment) before it is refused
_OTHERS_S = 10.0


class ShardWriter(RunWriter):
    """The writer of one shard of a run (``record --shard I/N``): appends to a journal of
    its own under a lock of its own, so that N of them (on as many machines sharing the
    store) record one run side by side. Each takes the run's lock only for moments (to
    start, to write the manifest, to fold); the last shard to finish folds every journal
    into the run's files. A shard killed leaves its journal, which its rerun extends (or
    the next fold takes in): nothing is lost, and nothing recorded twice."""

    def __init__(self, path: Path, shard: tuple[int, int], claim: Claim | None = None) -> None:
        """Take shard ``shard`` (I, N) of the run at ``path``; ``claim``: see :data:`Claim`
        (called under the run's lock before this shard takes or writes anything, so that a
        shard refused leaves neither a lock nor a journal of its own)."""
        from tcbreplay._store.journal import drop_torn_tail

        check_shard_store(path)
        self.dir = path
        self.run_id = path.name
        self.shard = shard
        self._failed = None
        self._lock_fd = None
        self._journal = None
        self._shard_fd: Lock | None = None
        try:
            with self.exclusive(signed=False):
                others = {n: h for n, h in held_shards(path).items() if n != shard_lock(shard)}
                stranger = next(
                    (
                        f"{n} by {h}"
                        for n, h in others.items()
                        if not n.endswith(f"-of-{shard[1]}.lock")
                    ),
                    None,
                )
                if stranger is not None:
                    raise RunLockedError(
                        f"run {self.run_id!r} is being recorded in other shards ({stranger}), "
                        f"not in {shard[1]}",
                        hint=f"give every shard the same N; or {WAIT_HINT}",
                    )
                fields = None if claim is None else claim(read_manifest(path))
                self.before = None  # (the last shard to finish writes the manifest)
                self._sign()  # (a shard refused leaves the run's lock as it was)
                self._shard_fd = take_lock(path / shard_lock(shard))
                journal = path / shard_journal(shard)
                with writing(journal, hint=WRITABLE_HINT):
                    drop_torn_tail(journal)
                    self._journal = journal.open("a", encoding="utf-8")
                if fields:
                    self.update_manifest(**fields)
        except BaseException:
            if self._journal is not None:
                self._close_journal()
            if self._shard_fd is not None:
                release_lock(self._shard_fd)
                self._shard_fd = None
            raise

    @contextmanager
    def exclusive(self, signed: bool = True) -> Iterator[None]:
        """Hold the run's lock for the block, waiting while another shard holds it; a writer
        of the whole run holding it is refused at once. ``signed``: the lock names this shard
        at once (else once :meth:`_sign` is called)."""
        if self._lock_fd is not None:
            yield
            return
        deadline = time.monotonic() + _OTHERS_S
        while True:
            try:
                fd = acquire_lock(self.dir / LOCK)
                break
            except RunLockedError as exc:
                shard = str(exc).split(" by ", 1)[-1].startswith(SHARD_WHO)
                if not shard and time.monotonic() > deadline:
                    raise
                time.sleep(_LOCK_POLL_S)
        self._lock_fd = fd
        try:
            if signed:
                self._sign()
            yield
        finally:
            self._lock_fd = None
            os.close(fd)

    def _sign(self) -> None:
        """Name this shard in the run's lock, which it holds."""
        assert isinstance(self._lock_fd, int)
        sign_lock(self._lock_fd, self.dir / LOCK, f"{SHARD_WHO} {self.shard[0]}/{self.shard[1]}")

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        with self.exclusive():
            super().write_manifest(manifest)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        with self.exclusive():
            return super().update_manifest(**fields)

    def forget(self) -> None:
        super().forget()
        if self._shard_fd is not None:
            release_lock(self._shard_fd)
        self._shard_fd = None

    def fold(self, records: list[dict[str, Any]] | None = None) -> bool:
        """Release this shard; fold every journal when no other shard records (this was the
        last), and say whether it did. (A shard's samples are always journaled.)"""
        if records is not None:
            raise ValueError("a shard folds its journal, not records held in memory")
        self._close_journal()
        if self._shard_fd is not None:
            release_lock(self._shard_fd)
            self._shard_fd = None
        with self.exclusive():
            if held_shards(self.dir):
                return False
            self._fold()
        return True

    def close(self) -> None:
        super().close()
        if self._shard_fd is not None:
            release_lock(self._shard_fd)
            self._shard_fd = None


def journal_line(record: dict[str, Any]) -> str:
    """A finished sample as one line of the journal (without the newline)."""
    return json.dumps(record, ensure_ascii=False, default=str)
