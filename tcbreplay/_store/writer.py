"""The one writer of a run: the journal it appends to, its manifest, and its removal."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from contextlib import suppress
from pathlib import Path
from typing import Any

from tcbreplay._store.files import (
    file_record,
    write_error,
    write_json_atomic,
    writing,
)
from tcbreplay._store.locks import (
    WRITABLE_HINT,
    take_lock,
)
from tcbreplay._store.schema import (
    DATA_FILES,
    DIVERGENCES,
    JOURNAL,
    LOCK,
    MANIFEST,
    SCHEMA_VERSION,
    read_manifest,
)
from tcbreplay.errors import (
    TcbReplayError,
)

# Hidden folders of deletions under way or cut short: ``<prefix><run_id>-<random>``. No run id
# starts with a dot, so no run is ever named so.
DELETED_PREFIX = ".deleted-"


def discard_folder(path: Path) -> None:
    """Remove a folder of the store: renamed away in one step, then deleted."""
    away = path.with_name(f"{DELETED_PREFIX}{path.name}-{secrets.token_hex(4)}")
    with writing(path, hint=WRITABLE_HINT):
        os.rename(path, away)
    shutil.rmtree(away, ignore_errors=True)


class RunWriter:
    """The one writer of a run: appends finished samples to the journal, then folds it in."""

    def __init__(self, path: Path, lock: int | None = None) -> None:
        """Take the run (``lock``: its lock, already taken)."""
        self.dir = path
        self.run_id = path.name
        from tcbreplay._store.journal import drop_torn_tail

        self._lock_fd: int | None = take_lock(path / LOCK) if lock is None else lock
        self._failed: TcbReplayError | None = None
        try:
            with writing(path / JOURNAL, hint=WRITABLE_HINT):
                drop_torn_tail(path / JOURNAL)
                self._journal = (path / JOURNAL).open("a", encoding="utf-8")
        except BaseException:
            if lock is None:  # one given stays the giver's to release
                os.close(self._lock_fd)
            raise

    @property
    def manifest(self) -> dict[str, Any]:
        return read_manifest(self.dir)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.dir / MANIFEST, manifest, hint=WRITABLE_HINT)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        manifest = {**self.manifest, **fields}
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
        except OSError as exc:
            self._failed = write_error(self.dir / JOURNAL, exc, hint=WRITABLE_HINT)
            raise self._failed from exc

    def forget(self) -> None:
        """In a forked child: close this writer's files unflushed; the parent keeps the lock."""
        os.close(self._journal.fileno())
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        self._lock_fd = None

    def fold(self) -> None:
        """Fold the journal into the Parquet files and record their sha256 in the manifest."""
        from tcbreplay._store.journal import fold_journal

        self._close_journal()
        fold_journal(self.dir)
        # the files are written in this version's layout (a version 1 run's included)
        names = [*DATA_FILES, *([DIVERGENCES] if (self.dir / DIVERGENCES).exists() else [])]
        self.update_manifest(
            schema_version=SCHEMA_VERSION,
            files={name: file_record(self.dir / name) for name in names},
        )

    def discard(self) -> None:
        """Remove the run (one this writer made and could not finish), then release it."""
        try:
            self._close_journal()
            discard_folder(self.dir)
        finally:
            self.close()

    def _close_journal(self) -> None:
        # a line a failed append left in the buffer is lost: that sample is recorded again
        with suppress(OSError):
            self._journal.close()

    def close(self) -> None:
        if not self._journal.closed:
            self._close_journal()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def journal_line(record: dict[str, Any]) -> str:
    """A finished sample as one line of the journal (without the newline)."""
    return json.dumps(record, ensure_ascii=False, default=str)
