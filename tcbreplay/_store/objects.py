"""Stores on object storage: a store named by a URL (``s3://bucket/prefix``, ``gs://...``).

Such a store is read and written through fsspec, the filesystem layer Arrow, Polars and DuckDB
all take, and its places are universal_pathlib's ``UPath`` (pathlib's API over fsspec), so the
store's code reads them as it reads folders. What a folder gives and an object store does not
is made here by other means:

- No renames: a file is written whole to a local temporary file, then uploaded; an upload is
  one object that appears whole or not at all (a multipart upload too, once completed).
- No appends: the journal is a series of numbered objects, ``journal/<n>.jsonl``, each a batch
  of finished samples (:class:`ChunkJournal`).
- No ``flock``, and no process whose death frees a lock: the writer's lock is an object,
  ``writer.lock``, created only if absent (S3's conditional write ``If-None-Match: *``: of two
  writers that create it at once, one wins, the other gets 412) and renewed by its holder
  every few seconds (``If-Match`` its last version); a lock not renewed for :data:`LEASE_S`
  is a dead writer's, which the next writer replaces (again ``If-Match``, so of two only one
  does). Journal batches are created only if absent too: a writer that lost its lock
  (paused past its lease) cannot write over another's batch.

Credentials come from each cloud's own environment and files (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_PROFILE``, ``~/.aws/config``, ``AWS_ENDPOINT_URL_S3``...), read by the cloud's library;
a store URL holding credentials is refused, and tcbreplay writes none anywhere.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePath
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from tcbreplay.errors import InputError, RunLockedError, StoreError, TcbReplayError, first_line

T = TypeVar("T")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# the schemes of the local filesystem, which stores name as folders
_LOCAL_SCHEMES = frozenset({"file", "local"})
# what a scheme's fsspec filesystem is installed with
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
             "abfs": "adlfs", "abfss": "adlfs"}  # fmt: skip
EXTRA_HINT = "pip install 'tcbreplay[s3]'"

# A writer's lock not renewed for this long is a dead writer's (seconds); its holder renews it
# every RENEW_S. Read at each use, so that tests can shorten them.
LEASE_S = 30.0
RENEW_S = 5.0
# A journal batch is written once it holds this many samples, or its first is this old.
BATCH_LINES = 1000
BATCH_S = 1.0


def is_url(text: object) -> bool:
    """Whether ``text`` names a store on object storage (a URL of a scheme other than file)."""
    if not isinstance(text, str):
        return False
    match = _SCHEME.match(text)
    return match is not None and match.group(1).lower() not in _LOCAL_SCHEMES


def is_remote(path: object) -> bool:
    """Whether ``path`` is a place on object storage (a UPath, not a local path)."""
    return path is not None and not isinstance(path, PurePath | str)


def store_root(root: str | os.PathLike[str]) -> Path:
    """The place a ``--store`` value names: a local folder, or a UPath for a URL.

    A remote place is typed as a Path: it offers pathlib's API (``/``, ``name``, ``parent``,
    ``exists``, ``read_text``, ``glob``...); code that needs more (renames, locks, handing it
    to Arrow or DuckDB) asks :func:`is_remote` first."""
    if is_remote(root):
        return cast(Path, root)
    text = os.fspath(root)
    if not is_url(text):
        return Path(text)
    scheme = text.split("://", 1)[0].lower()
    parts = urlsplit(text)
    if parts.username is not None or parts.password is not None or parts.query:
        raise InputError(
            f"--store {scheme}://...: the URL holds credentials or options; tcbreplay takes "
            "none (and shows none)",
            hint=f"give the store as {scheme}://BUCKET/PREFIX, its credentials in the cloud's "
            "environment or config files (for S3: AWS_PROFILE, AWS_ACCESS_KEY_ID, ~/.aws)",
        )
    if not parts.netloc:
        raise InputError(f"--store {text}: no bucket", hint=f"give {scheme}://BUCKET/PREFIX")
    try:
        from upath import UPath
    except ImportError:
        raise InputError(
            f"--store {text}: a store on object storage needs tcbreplay's s3 extra",
            hint=EXTRA_HINT,
        ) from None
    try:
        # listings are not cached: another process may write the store meanwhile
        path = UPath(text.rstrip("/"), use_listings_cache=False)
        path.fs  # noqa: B018 (the scheme's filesystem, which may be missing)
    except ImportError as exc:
        package = _PACKAGES.get(scheme, "the fsspec filesystem of " + scheme)
        raise InputError(
            f"--store {text}: {scheme}:// needs {package}, which is not installed",
            hint=EXTRA_HINT if package == "s3fs" else f"pip install {package}",
        ) from exc
    except ValueError as exc:  # a scheme fsspec does not know
        raise InputError(f"--store {text}: {first_line(exc)}") from exc
    return cast(Path, path)


def fs_path(path: Path) -> tuple[Any, str]:
    """The fsspec filesystem of a remote place, and the place as that filesystem names it."""
    remote = cast(Any, path)
    return remote.fs, remote.path


def arrow_source(path: Path) -> tuple[str, Any]:
    """What Arrow reads a store file as: (path, filesystem), filesystem None for a local one."""
    if is_remote(path):
        fs, where = fs_path(path)
        return where, fs
    return str(path), None


def url(path: Path) -> str:
    """A remote place as the URL DuckDB and people read (``s3://bucket/key``)."""
    return str(path)


def upload_with(path: Path, write: Callable[[Path], T]) -> T:
    """Write ``path`` (remote) through ``write(local temporary path)``, then upload it as one
    object: it appears whole, or not at all."""
    with tempfile.TemporaryDirectory(prefix="tcbreplay-upload-") as folder:
        tmp = Path(folder) / path.name
        result = write(tmp)
        upload(tmp, path)
    return result


def upload(local: Path, path: Path) -> None:
    fs, where = fs_path(path)
    fs.put_file(str(local), where)


def put_bytes(path: Path, data: bytes) -> None:
    fs, where = fs_path(path)
    fs.pipe_file(where, data)


def remove_object(path: Path) -> None:
    """Remove an object if it is there."""
    fs, where = fs_path(path)
    with suppress(FileNotFoundError):
        fs.rm_file(where)


def remove_tree(path: Path) -> None:
    """Remove every object under ``path``."""
    fs, where = fs_path(path)
    with suppress(FileNotFoundError):
        fs.rm(where, recursive=True)


def exists(path: Path) -> bool:
    """Whether an object, or a folder holding some, is at ``path``: a failure to look (no
    credentials, access denied) raises, where pathlib's ``exists`` would say False."""
    fs, where = fs_path(path)
    return bool(fs.exists(where))


def list_names(folder: Path) -> list[str]:
    """The names of the objects and folders right under a remote folder."""
    fs, where = fs_path(folder)
    try:
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(where, detail=False))
    except FileNotFoundError:
        return []


def _is_s3(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "s3" in protocol


def _precondition_failed(exc: BaseException) -> bool:
    """Whether a write was refused by its condition (HTTP 412)."""
    if isinstance(exc, FileExistsError):
        return True
    cause = exc.__cause__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code")
    return code == "PreconditionFailed"


class PreconditionFailed(Exception):
    """A conditional write found the object other than it expected."""


def create_object(path: Path, data: bytes) -> str:
    """Create an object only if none is there (S3: ``If-None-Match: *``); its version (ETag).
    Raises :class:`PreconditionFailed` if one is."""
    fs, where = fs_path(path)
    try:
        out = fs.pipe_file(where, data, mode="create")
    except OSError as exc:
        if _precondition_failed(exc):
            raise PreconditionFailed(str(path)) from exc
        raise
    return _etag(fs, where, out)


def replace_object(path: Path, data: bytes, etag: str) -> str:
    """Replace an object only if it is still the version ``etag`` (S3: ``If-Match``); its new
    version. Raises :class:`PreconditionFailed` otherwise. (A filesystem without conditional
    writes compares, then writes: not atomic.)"""
    fs, where = fs_path(path)
    try:
        if _is_s3(fs):
            out = fs.pipe_file(where, data, IfMatch=etag)
        else:
            if _etag(fs, where, None) != etag:
                raise PreconditionFailed(str(path))
            out = fs.pipe_file(where, data)
    except FileNotFoundError as exc:
        raise PreconditionFailed(str(path)) from exc
    except OSError as exc:
        if _precondition_failed(exc):
            raise PreconditionFailed(str(path)) from exc
        raise
    return _etag(fs, where, out)


def delete_object(path: Path, etag: str) -> None:
    """Delete an object if it is still the version ``etag`` (else leave it)."""
    fs, where = fs_path(path)
    try:
        if _is_s3(fs):
            bucket, key, _ = fs.split_path(where)
            fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=etag)
            fs.invalidate_cache(where)
        elif _etag(fs, where, None) == etag:
            fs.rm_file(where)
    except OSError:
        pass  # changed meanwhile (taken over), or gone


def _etag(fs: Any, where: str, response: object) -> str:
    if isinstance(response, dict) and response.get("ETag"):
        return str(response["ETag"])
    info = fs.info(where)
    return str(info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("mtime"))


def _age(fs: Any, where: str) -> tuple[float, str]:
    """How long ago an object was last written (by the store's clock), and its version."""
    info = fs.info(where)
    modified = info.get("LastModified") or fs.modified(where)
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=dt.UTC)
    return time.time() - modified.timestamp(), _etag(fs, where, None)


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
            fs, where = fs_path(path)
            try:
                age, etag = _age(fs, where)
                holder = fs.cat_file(where).decode(errors="replace").strip() or "another process"
            except FileNotFoundError:  # released meanwhile: try once more
                etag = create_object(path, text.encode())
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
                raise RunLockedError(
                    f"{what} was taken by another process at the same moment",
                    hint="wait for it to finish",
                ) from None
        return cls(path, etag, text)

    def _keep(self) -> None:
        while not self._stop.wait(RENEW_S):
            with self._mutex:
                if self._stop.is_set():
                    return
                try:
                    self._etag = replace_object(self.path, self._body, self._etag)
                except PreconditionFailed:
                    self.lost = RunLockedError(
                        f"{url(self.path)}: another process took this lock over (this one did "
                        f"not renew it for {round(LEASE_S)} s)",
                        hint="the run is that process's now: run the command again once it is done",
                    )
                    return
                except Exception:
                    continue

    def check(self) -> None:
        """Raise if another process took the lock over."""
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
    fs, where = fs_path(path)
    try:
        age, _ = _age(fs, where)
        if age >= LEASE_S:
            return None
        return fs.cat_file(where).decode(errors="replace").strip() or "another process"
    except FileNotFoundError:
        return None


def wait_for_lease(path: Path, what: str) -> LeaseLock:
    """Take the lock at ``path``, waiting while another process holds it."""
    while True:
        try:
            return LeaseLock.take(path, what)
        except RunLockedError:
            time.sleep(min(1.0, RENEW_S))


class ChunkJournal:
    """A run's journal on object storage: finished samples, one JSON line each, written in
    numbered objects ``journal/<n>.jsonl`` (n from 1, created only if absent), a batch at a
    time: once it holds :data:`BATCH_LINES` samples or its first is :data:`BATCH_S` old, and
    when the journal closes. A process killed loses the samples of the batch not written yet
    (at most a second's), besides those in flight; no batch is ever half written."""

    def __init__(self, folder: Path, lock: LeaseLock | None) -> None:
        self.folder = folder
        self._lock = lock
        numbers = chunk_numbers(folder)
        self._next = max(numbers, default=0) + 1
        self._lines: list[str] = []
        self._first = 0.0
        self._mutex = threading.Lock()
        self._failed: BaseException | None = None
        self.closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="tcbreplay-journal", daemon=True)
        self._thread.start()

    def write(self, text: str) -> None:
        """Add finished samples' lines (each ending in a newline)."""
        with self._mutex:
            if self._failed is not None:
                raise self._failed
            if not self._lines:
                self._first = time.monotonic()
            self._lines.append(text)
            if len(self._lines) >= BATCH_LINES:
                self._write_batch()

    def flush(self) -> None:
        """Write the batch if it is due (a batch per append would be a request per sample)."""
        with self._mutex:
            if self._failed is not None:
                raise self._failed
            if self._lines and time.monotonic() - self._first >= BATCH_S:
                self._write_batch()

    def _tick(self) -> None:
        while not self._stop.wait(BATCH_S / 4):
            with suppress(Exception):  # kept in _failed: the next write raises it
                self.flush()

    def _write_batch(self) -> None:
        data = "".join(self._lines).encode("utf-8")
        path = self.folder / chunk_name(self._next)
        try:
            if self._lock is not None:
                self._lock.check()
            create_object(path, data)
        except PreconditionFailed as exc:
            self._failed = RunLockedError(
                f"{url(path)}: written by another process meanwhile: two processes write this run",
                hint="let one of them finish, then record the rest",
            )
            raise self._failed from exc
        except BaseException as exc:
            self._failed = exc
            raise
        self._next += 1
        self._lines = []

    def close(self) -> None:
        """Write what is left, and stop."""
        self._stop.set()
        with self._mutex:
            if not self.closed:
                self.closed = True
                if self._lines and self._failed is None:
                    self._write_batch()

    def forget(self) -> None:
        """In a forked child: drop the journal without writing (the parent writes it)."""
        self._stop.set()
        self.closed = True
        self._lines = []


_CHUNK = re.compile(r"^(\d{12})\.jsonl$")


def chunk_name(number: int) -> str:
    return f"{number:012d}.jsonl"


def chunk_numbers(folder: Path) -> list[int]:
    """The numbers of the journal batches in ``folder``, in order."""
    found = (_CHUNK.match(name) for name in list_names(folder))
    return sorted(int(m.group(1)) for m in found if m)


def chunks(folder: Path) -> Iterator[Path]:
    for number in chunk_numbers(folder):
        yield folder / chunk_name(number)


# the libraries whose exceptions are failures of the object store (its credentials, its
# network, its answers), by the module they come from
_STORAGE_MODULES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "google", "adlfs",
                    "azure", "fsspec")  # fmt: skip
_CREDENTIALS_HINT = (
    "tcbreplay takes no credentials: give them to the cloud's own library, in its environment "
    "or config files (for S3: AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
    "~/.aws/credentials; AWS_ENDPOINT_URL_S3 for another S3 service)"
)


def storage_failure(exc: BaseException) -> tuple[str, str | None] | None:
    """A failure of object storage in a few words, and a hint; None for any other exception.
    (Asked only of what a remote place's operations raised: any OSError is the store's.)"""
    module = type(exc).__module__ or ""
    if not (isinstance(exc, OSError) or module.split(".")[0] in _STORAGE_MODULES):
        return None
    name = type(exc).__name__
    text = first_line(exc) or name
    if "Credential" in name or "credential" in text.lower():
        return text, _CREDENTIALS_HINT
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        return f"access denied ({text})", _CREDENTIALS_HINT
    if "Endpoint" in name or "connect" in text.lower():
        return text, "is the network up, and the endpoint right (AWS_ENDPOINT_URL_S3)?"
    return text, None


@contextmanager
def failures(place: Path) -> Iterator[None]:
    """While a store on object storage is read: a failure of the store (credentials, network,
    permissions) becomes a :class:`StoreError` naming ``place``."""
    try:
        yield
    except TcbReplayError:
        raise
    except Exception as exc:
        if not is_remote(place):
            raise
        found = storage_failure(exc)
        if found is None:
            raise
        why, hint = found
        raise StoreError(f"{url(place)}: {why}", hint=hint) from exc
