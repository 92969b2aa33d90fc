"""Writing files so that nothing half-written is left behind, and failures of the place written
to (a full disk, a read-only folder) as one typed error naming the file.

Every file tcbreplay writes goes to a temporary name beside it and is renamed over its name
once whole; a write that fails or is interrupted removes its temporary file. Files that belong
together (a scoring's results, an export) are renamed only once all of them are whole. On object
storage, which has no renames, the temporary file is local and is uploaded as one object
(:mod:`tcbreplay._store.objects`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from tcbreplay._store import objects
from tcbreplay._store.objects import is_remote
from tcbreplay._store.storage_errors import ACCESS_DENIED, storage_failure
from tcbreplay.errors import (
    StoreError,
    StoreWriteError,
    StoreWriteRefused,
    TcbReplayError,
    first_line,
)

T = TypeVar("T")

_SPACE = "free some disk space, then run the command again"
_HINTS = {
    errno.ENOSPC: _SPACE,
    errno.EDQUOT: _SPACE,
    errno.EFBIG: "the file system (or a limit on file sizes) allows no file that large",
}
# the failures of a store that refuses writes (a read-only mount, permissions)
_REFUSALS = (errno.EROFS, errno.EACCES, errno.EPERM)
# a library that reports an operating-system failure as text only (Polars: "(os error 28)")
_OS_ERROR_TEXT = re.compile(r"\(os error (\d+)\)")


def os_failure(exc: BaseException) -> OSError | None:
    """The operating-system error behind ``exc``: itself, or the one a library named in its
    message; None for any other exception."""
    if isinstance(exc, TcbReplayError):
        return None
    if isinstance(exc, OSError) and exc.errno:
        return exc
    match = _OS_ERROR_TEXT.search(str(exc))
    if match:
        code = int(match.group(1))
        return OSError(code, os.strerror(code))
    return exc if isinstance(exc, OSError) else None


def reason(exc: OSError) -> str:
    """The cause of an operating-system error in a few words ("No space left on device")."""
    return os.strerror(exc.errno) if exc.errno else first_line(exc)


def write_error(
    path: Path, exc: OSError, error: type[TcbReplayError] = StoreWriteError, hint: str | None = None
) -> TcbReplayError:
    """The one-line error of a failure to write ``path``."""
    if error is StoreWriteError and exc.errno in _REFUSALS:
        error = StoreWriteRefused
    return error(f"{path}: cannot write: {reason(exc)}", hint=_HINTS.get(exc.errno or 0, hint))


def remove(path: Path) -> None:
    """Remove a temporary file, if it is there (a failure to remove it changes nothing)."""
    with suppress(OSError):
        if is_remote(path):
            objects.remove_object(path)
        else:
            path.unlink(missing_ok=True)


@contextmanager
def writing(
    path: Path,
    *temps: Path,
    error: type[TcbReplayError] = StoreWriteError,
    hint: str | None = None,
) -> Iterator[None]:
    """While ``path`` is written: on any failure remove the temporary files ``temps``, and turn
    an operating-system error into ``error`` naming ``path`` and the cause."""
    try:
        yield
    except BaseException as exc:
        for tmp in temps:
            remove(tmp)
        failure = os_failure(exc)
        if is_remote(path) and not isinstance(exc, TcbReplayError):
            found = storage_failure(exc, objects.url(path))
            if found is not None:
                why, remote_hint = found
                if error is StoreWriteError and why.startswith(ACCESS_DENIED):
                    error = StoreWriteRefused
                raise error(f"{path}: cannot write: {why}", hint=remote_hint or hint) from exc
        if failure is None:
            raise
        raise write_error(path, failure, error, hint) from exc


TEMPORARY_SUFFIX = ".tmp"


def temporary(path: Path) -> Path:
    """The temporary name a file is written under before it is renamed to ``path``."""
    return path.with_name(path.name + TEMPORARY_SUFFIX)


def replace_with(path: Path, write: Callable[[Path], T], **how: Any) -> T:
    """Write ``path`` through ``write(temporary path)`` and a rename (``how``: as
    :func:`writing`); on object storage, an upload of a local temporary file."""
    if is_remote(path):
        with writing(path, **how):
            return objects.upload_with(path, write)
    tmp = temporary(path)
    with writing(path, tmp, **how):
        result = write(tmp)
        os.replace(tmp, path)
    return result


def write_jsonl_atomic(path: Path, rows: Iterable[Any]) -> None:
    """Write one JSON value per line to a temporary file and rename it over ``path``."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")

    replace_with(path, write)


def copy_atomic(source: Path, path: Path) -> None:
    """Copy the file ``source`` (local or remote) to ``path``, as the other writes: whole, or
    not at all."""

    try:
        f = source.open("rb")
    except OSError as exc:  # the file copied is the one to name
        raise StoreError(f"{source}: cannot be read ({exc.strerror or exc})") from exc

    def write(tmp: Path) -> None:
        with tmp.open("wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)

    with f:
        replace_with(path, write)


def json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"


def write_json_atomic(path: Path, obj: Any, **how: Any) -> None:
    """Write JSON to a temporary file and rename it over ``path`` (``how``: as :func:`writing`)."""
    text = json_text(obj)
    replace_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), **how)


class Staged:
    """Files written under temporary names and renamed into place together once every one is
    whole (see :func:`staged`)."""

    def __init__(
        self, error: type[TcbReplayError], hint: str | None,
        before_write: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        self._error = error
        self._hint = hint
        self._before_write = before_write or (lambda: None)
        self._files: list[tuple[Path, Path]] = []
        self._folders: list[Path] = []  # made for the files, deepest first
        self._lock = threading.Lock()  # files may be written from threads side by side
        self._local: tempfile.TemporaryDirectory[str] | None = None  # for remote files

    def folder(self, path: Path) -> None:
        """Make the folder ``path`` (and its parents) for files to come; a failure removes
        those this made, once empty. (Object storage has no folders to make.)"""
        if is_remote(path):
            return
        missing = []
        while not path.exists():
            missing.append(path)
            path = path.parent
        for made in reversed(missing):
            with writing(made, error=self._error, hint=self._hint):
                made.mkdir(exist_ok=True)
            self._folders.insert(0, made)

    def write(self, path: Path, write: Callable[[Path], T]) -> T:
        """Write ``path`` through ``write(temporary path)``; it takes its name on commit."""
        with self._lock:
            tmp = self._temporary(path)
            self._files.append((tmp, path))
        with writing(path, tmp, error=self._error, hint=self._hint):
            return write(tmp)

    def _temporary(self, path: Path) -> Path:
        """Beside ``path``; for a file on object storage, in a local folder of this set's."""
        if not is_remote(path):
            return temporary(path)
        if self._local is None:
            self._local = tempfile.TemporaryDirectory(prefix="tcbreplay-staged-")
        return Path(self._local.name) / f"{len(self._files)}-{path.name}"

    def begin(self, path: Path) -> Path:
        """The temporary name of ``path``, which the caller writes bit by bit (failures of the
        place as :func:`writing` turns them); it takes its name on commit."""
        with self._lock:
            tmp = self._temporary(path)
            self._files.append((tmp, path))
        return tmp

    def writing(self, path: Path) -> Any:
        """While ``path`` (begun) is written: a failure of the place as one typed error."""
        return writing(path, error=self._error, hint=self._hint)

    def commit(self) -> None:
        """Rename every file into place, in the order they were begun.

        Each rename is one step, but a set of them is not (nor are uploads to object storage,
        done in that order instead): so the files a set replaces are removed first, the last
        one (whose presence marks the set complete: a scoring's summary, an export's
        manifest) first of all, and it takes its place last. A commit cut short (a kill -9
        between two renames) leaves some of the new files without that last one, which reads
        as unfinished, and never a new file beside an older set's."""
        if len(self._files) > 1:
            for _, path in reversed(self._files):
                with writing(path, error=self._error, hint=self._hint):
                    if is_remote(path):
                        self._before_write()
                        objects.remove_object(path)
                    else:
                        path.unlink(missing_ok=True)
        while self._files:
            tmp, path = self._files[0]
            with writing(path, error=self._error, hint=self._hint):
                if is_remote(path):
                    self._before_write()
                    objects.upload(tmp, path)
                else:
                    os.replace(tmp, path)
            self._files.pop(0)
        self._folders = []

    def discard(self) -> None:
        for tmp, _ in self._files:
            remove(tmp)
        self._files = []
        for path in self._folders:
            with suppress(OSError):
                path.rmdir()
        self._folders = []
        if self._local is not None:
            self._local.cleanup()
            self._local = None


@contextmanager
def staged(
    error: type[TcbReplayError] = StoreWriteError, hint: str | None = None,
    before_write: Callable[[], None] | None = None,
) -> Iterator[Staged]:  # fmt: skip
    """Files that belong together: written under temporary names in the block, renamed into
    place when it ends well; a failure or an interruption (before the renames, which take
    microseconds) leaves the files that were there as they were and no temporary file.
    ``before_write``: called before each object is removed or uploaded on object storage (a
    writer's check that it still holds its lock)."""
    files = Staged(error, hint, before_write)
    try:
        yield files
        files.commit()
    finally:
        files.discard()


# the first part of a file name the store builds (with "_<run id>.json" after it, a run id
# being at most 128 characters: within a file name's 255 bytes)
MAX_NAME_PART_BYTES = 100


def names_a_file(text: object) -> bool:
    """Whether ``text`` (a benchmark title, taken from a manifest or an imported log) can
    begin the name of a file in a run's folder: not a path out of it, not a hidden name, not
    too long."""
    return (
        isinstance(text, str)
        and "/" not in text
        and "\0" not in text
        and not text.startswith(".")
        and len(text.encode("utf-8", "surrogatepass")) <= MAX_NAME_PART_BYTES
    )


def output_target(path: Path) -> tuple[Path, bool]:
    """Where to write a file a user names (``-o``), and whether to write it in place: a path
    that is no regular file (a FIFO, a device such as /dev/stdout, a pipe behind it) is written
    as it is; a file is replaced through a temporary file beside it, a symlink's target."""
    if is_remote(path):
        return path, False
    if path.exists() and not path.is_file() and not path.is_dir():
        return path, True
    return Path(os.path.realpath(path)), False


# a manifest's mark of a fold under way: its data files may be the old ones or the fold's,
# until the fold records them (one cut short is folded again from the journal it kept)
FOLDING = "folding"


def written_sha256(manifest: dict[str, Any], name: str) -> str | None:
    """The sha256 a run's ``manifest`` recorded for its data file ``name`` when the run wrote
    it (None for a run that recorded none: an import, an older version; or while a fold is
    under way, or was cut short: see FOLDING)."""
    if manifest.get(FOLDING):
        return None
    files = manifest.get("files")
    known = files.get(name) if isinstance(files, dict) else None
    digest = known.get("sha256") if isinstance(known, dict) else None
    return digest if isinstance(digest, str) else None


# the manifest's sha256 of the run's dataset.jsonl as the run wrote it (``dataset`` block):
# its ``sha256`` is of the file the run was made from, which a run stores normalised
DATASET_SHA256 = "stored_sha256"


def written_dataset_sha256(manifest: dict[str, Any]) -> str | None:
    """The sha256 a run's ``manifest`` recorded for its ``dataset.jsonl`` when the run wrote
    it (None for a run written before it was recorded)."""
    dataset = manifest.get("dataset")
    digest = dataset.get(DATASET_SHA256) if isinstance(dataset, dict) else None
    return digest if isinstance(digest, str) else None


# how a run of each origin (its manifest's source; a recording's is none) is made again
_MADE_AGAIN = {
    "import": "import its traces again under another --run-id",
    "collect": "import its received files (received.otlp.*) under another --run-id",
    "replay": "replay its parent again with --overwrite",
}


def made_again(manifest: dict[str, Any]) -> str:
    """How the run of ``manifest`` is made again, by its origin (a fix hint's words)."""
    return _MADE_AGAIN.get(str(manifest.get("source")), "record the run again with --overwrite")


def not_written(path: Path, manifest: dict[str, Any]) -> StoreError:
    """The error for a run's data file whose sha256 is not the one its ``manifest``
    recorded, saying how a run of its origin is made again."""
    return StoreError(
        f"{path}: not the file the run wrote (its sha256 is not the one manifest.json "
        f"recorded): it was changed or replaced since; restore it, or {made_again(manifest)}"
    )


def check_dataset_written(manifest: dict[str, Any], path: Path, data: bytes) -> None:
    """Refuse a run's ``dataset.jsonl`` (at ``path``, its bytes ``data``) whose sha256 is not
    the one ``manifest`` recorded when the run wrote it, as :func:`not_written`: an export
    takes the gold calls from it, and would carry others than the run's scores (a run written
    before the sha256 was recorded is taken as it is)."""
    import hashlib

    recorded = written_dataset_sha256(manifest)
    if recorded is not None and hashlib.sha256(data).hexdigest() != recorded:
        raise not_written(path, manifest)


def check_dataset_file(manifest: dict[str, Any], path: Path) -> None:
    """Refuse, as :func:`check_dataset_written`, a run's ``dataset.jsonl`` at ``path`` whose
    sha256 is not the one ``manifest`` recorded, reading it to hash it: a resumed recording
    takes its inputs from it (a run written before the sha256 was recorded is taken as it is)."""
    recorded = written_dataset_sha256(manifest)
    if recorded is None:
        return
    try:
        with objects.failures(path.parent):
            digest = file_record(path)["sha256"]
    except OSError as exc:
        raise StoreError(f"{path}: cannot read it: {first_line(exc)}") from exc
    if digest != recorded:
        raise not_written(path, manifest)


def check_unchanged(folder: Path, manifest: dict[str, Any], names: Iterable[str]) -> None:
    """Refuse a run's data files ``names`` that are not those it wrote (changed by hand, or
    damaged since), as :func:`not_written`: a file of the version ``manifest`` recorded is
    not read, another (a copied store) is hashed; a file of no recorded sha256 is taken as
    it is."""
    for name in names:
        path, recorded = folder / name, written_sha256(manifest, name)
        if recorded is None:
            continue
        try:
            with objects.failures(folder):
                if not path.exists():
                    continue
                if objects.same_version(manifest["files"][name], objects.version(path)):
                    continue
                digest = file_record(path)["sha256"]
        except OSError as exc:
            raise StoreError(f"{path}: cannot read it: {first_line(exc)}") from exc
        if digest != recorded:
            raise not_written(path, manifest)


def file_record(path: Path) -> dict[str, Any]:
    """sha256, size and modification time of a file, as the manifest keeps them."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    stat = path.stat()  # (of an object: its size and last upload)
    return {"sha256": digest.hexdigest(), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def make_dir(path: Path) -> bool:
    """Make the folder ``path``; whether this made it (False: it was there)."""
    try:
        path.mkdir()
    except FileExistsError:
        return False
    return True
