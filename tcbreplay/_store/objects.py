"""Stores on object storage: a store named by a URL (``s3://bucket/prefix``, ``gs://...``).

Such a store is read and written through fsspec, the filesystem layer Arrow, Polars and DuckDB
all take, and its places are universal_pathlib's ``UPath`` (pathlib's API over fsspec), so the
store's code reads them as it reads folders. What a folder gives and an object store does not
is made here by other means:

- No renames: a file is written whole to a local temporary file, then uploaded; an upload is
  one object that appears whole or not at all (a multipart upload too, once completed).
- No appends: the journal is a series of numbered objects, ``journal/<n>.jsonl``, each a batch
  of finished samples (:class:`tcbreplay._store.journal.ChunkJournal`).
- No ``flock``, and no process whose death frees a lock: the writer's lock is an object,
  ``writer.lock``, created only if absent (S3's conditional write ``If-None-Match: *``: of two
  writers that create it at once, one wins, the other gets 412) and renewed by its holder
  every few seconds (``If-Match`` its last version); a lock not renewed for its lease is a
  dead writer's, which the next writer replaces (again ``If-Match``, so of two only one
  does: :class:`tcbreplay._store.locks.LeaseLock`). Journal batches are created only if
  absent too: a writer that lost its lock (paused past its lease) cannot write over another's
  batch.

Credentials come from each cloud's own environment and files (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_PROFILE``, ``~/.aws/config``, ``AWS_ENDPOINT_URL_S3``...), read by the cloud's library;
a store URL holding credentials is refused, and tcbreplay writes none anywhere.

Which ``--store`` values name a store, and which are refused:
:mod:`tcbreplay._store.store_urls`; a lock's age by the store's clock:
:mod:`tcbreplay._store.lock_clock`.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePath
from typing import Any, TypeVar, cast

from tcbreplay._store import s3_limits
from tcbreplay._store.storage_errors import no_bucket_hint, s3_answer, storage_failure
from tcbreplay.errors import StoreError, TcbReplayError

T = TypeVar("T")


def is_remote(path: object) -> bool:
    """Whether ``path`` is a place on object storage (a UPath, not a local path)."""
    return path is not None and not isinstance(path, PurePath | str)


def with_retries(fs: Any) -> Any:
    """``fs``, trying a request again on its own (s3fs: on timeouts) S3FS_RETRIES times."""
    if _is_s3(fs):
        fs.retries = s3_limits.S3FS_RETRIES
    return fs


def fs_path(path: Path) -> tuple[Any, str]:
    """The fsspec filesystem of a remote place, and the place as that filesystem names it."""
    remote = cast(Any, path)
    fs = remote.fs
    if _is_s3(fs):
        _without_continue(fs)
    return fs, remote.path


def _without_continue(fs: Any) -> None:
    """``fs``'s S3 client sending a body at once, without ``Expect: 100-continue``.

    botocore asks for a ``100 Continue`` before each upload's body, and aiohttp (under
    s3fs) waits for it with no time limit: an endpoint that went silent held a write, and
    the command, for ever (24 minutes until it answered again, Ctrl-C or not), where reads
    give up after S3_READ_S. Sent at once, a body's answer is waited for as a read's is."""
    client = fs.s3  # (made once per filesystem: no request is sent)
    if getattr(fs, "_tcbreplay_client", None) is client:
        return
    client.meta.events.register_last(
        "before-call.s3", _drop_continue, unique_id="tcbreplay-no-100-continue"
    )
    fs._tcbreplay_client = client


def _drop_continue(params: dict[str, Any], **kwargs: Any) -> None:
    params.get("headers", {}).pop("Expect", None)


def reader_fs(fs: Any) -> Any:
    """The filesystem DuckDB reads a store through, for one connection: ``fs``, reading on S3
    exactly the bytes DuckDB asks for, and asking a file's size once.

    DuckDB reads the column chunks its query needs and skips row groups by their statistics;
    s3fs's default cache turns each such read into a 50 MB read-ahead, which for the
    1M-sample run fetched several times the 467 MB messages file, and took scoring on moto
    about a quarter longer (``make bench-s3``). And DuckDB opens a file again for each scan
    (each thread, each query), which s3fs begins with a request for its size: 170 of them for
    the 1M run's scoring, one per file with this one's (see :func:`_asks_once`); the instance
    is the connection's own, so a file written after it was made is seen anew by the next."""
    if not _is_s3(fs):
        return fs
    options = {**fs.storage_options, "default_cache_type": "none"}
    return with_retries(_asks_once(cast(Any, type(fs)))(skip_instance_cache=True, **options))


@functools.cache
def _asks_once(base: Any) -> Any:
    """A subclass of the async fsspec filesystem ``base`` (s3fs's) whose instances ask each
    file's details (``_info``, behind its size, existence and type: a ``HEAD`` on S3) once,
    and keep them."""

    class AsksOnce(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._details: dict[str, Any] = {}  # (path: the future of its details)

        async def _info(
            self, path: str, bucket: Any = None, key: Any = None, refresh: bool = False,
            version_id: Any = None,
        ) -> dict[str, Any]:  # fmt: skip
            # (the bucket and key are the path's; a version or a refresh: asked as asked)
            if refresh or version_id is not None:
                return cast(dict[str, Any], await super()._info(path, refresh=refresh,
                                                                version_id=version_id))  # fmt: skip
            import asyncio  # (s3fs's loop runs it; a command on a local store never needs it)

            name = self._strip_protocol(path)
            asking = self._details.get(name)
            if asking is None:  # (DuckDB's threads ask at once: one request, all wait for it)
                asking = self._details[name] = asyncio.ensure_future(super()._info(path))
            try:
                return cast(dict[str, Any], await asyncio.shield(asking))
            except BaseException:
                if self._details.get(name) is asking:  # an absence, a failure: asked again
                    del self._details[name]
                raise

        async def _glob(self, path: str, **kwargs: Any) -> Any:
            # the files a pattern matches, as DuckDB's glob of a local folder gives them:
            # fsspec's gives folders too (a run's scores/), which DuckDB then opened as files
            kwargs.setdefault("withdirs", False)
            return await super()._glob(path, **kwargs)

    AsksOnce.__name__ = AsksOnce.__qualname__ = f"{base.__name__}AsksOnce"
    return AsksOnce


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


def read_bytes(path: Path) -> bytes:
    fs, where = fs_path(path)
    return bytes(fs.cat_file(where))


def put_bytes(path: Path, data: bytes) -> None:
    fs, where = fs_path(path)
    fs.pipe_file(where, data)


def remove_object(path: Path) -> None:
    """Remove an object if it is there."""
    fs, where = fs_path(path)
    with suppress(FileNotFoundError):
        fs.rm_file(where)


def remove_tree(path: Path) -> None:
    """Remove every object under ``path``, and nothing else: the objects listed under its
    exact prefix, each removed by its key. (fsspec's ``rm(path, recursive=True)`` takes
    ``path`` for a glob pattern: ``s3://b/zz*/run`` removed ``zz1/run`` and ``zz2/run``.)"""
    fs, where = fs_path(path)
    try:
        keys = list(fs.find(where))  # a listing of the prefix where/: no pattern is expanded
    except FileNotFoundError:
        return
    if not keys:
        return
    if _is_s3(fs):
        _delete_keys(fs, keys)
    else:
        for key in keys:  # the filesystem's delete of one object by its name
            with suppress(FileNotFoundError):
                fs.rm_file(key)
    fs.invalidate_cache(where)


def _delete_keys(fs: Any, keys: list[str]) -> None:
    """Delete S3 objects by their keys, a thousand a request (S3's DeleteObjects); raise if
    S3 kept any."""
    bucket = fs.split_path(keys[0])[0]
    for start in range(0, len(keys), 1000):
        batch = [{"Key": fs.split_path(key)[1]} for key in keys[start : start + 1000]]
        out = fs.call_s3("delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        errors = out.get("Errors") or []
        if errors:
            first = errors[0]
            raise OSError(
                f"{len(errors)} objects not deleted, such as {first.get('Key')}: "
                f"{first.get('Code')} {first.get('Message')}"
            )


def exists(path: Path) -> bool:
    """Whether an object, or a folder holding some, is at ``path``: a failure to look (no
    credentials, access denied) raises, where pathlib's ``exists`` would say False."""
    fs, where = fs_path(path)
    return bool(fs.exists(where))


def is_file(path: Path) -> bool:
    """Whether a file is at ``path``. On object storage a failure to look (a timeout, access
    denied) raises: fsspec's ``isfile`` says False then, and a command went on to its next
    request, which waited as long again."""
    if not is_remote(path):
        return path.is_file()
    fs, where = fs_path(path)
    try:
        return bool(fs.info(where).get("type") == "file")
    except FileNotFoundError:
        return False


def check_bucket(path: Path) -> None:
    """Refuse a place whose bucket does not exist (where an empty prefix of one that does
    is a store with no runs yet)."""
    fs, where = fs_path(path)
    bucket = where.split("/", 1)[0]
    with failures(path):
        there = fs.exists(bucket)
    if not there:
        raise StoreError(f"{url(path)}: no such bucket ({bucket})", hint=no_bucket_hint(url(path)))


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
    return s3_answer(exc).get("Error", {}).get("Code") == "PreconditionFailed"


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
    return info_etag(fs.info(where))


def open_known(path: Path) -> tuple[Any, tuple[str, str, int]]:
    """An object opened for reading only the bytes asked (no read-ahead), after one request
    for its details; and the version it was opened at: (URL, ETag, size). On S3 a read of
    the object replaced since fails (s3fs compares the ETag of each response) rather than
    mixing two versions."""
    fs, where = fs_path(path)
    info = fs.info(where)
    size = int(info["size"])
    opened = fs.open(where, "rb", size=size, cache_type="none")
    opened.details = info  # (else asked again at the first read)
    return opened, (url(path), info_etag(info), size)


def info_etag(info: dict[str, Any]) -> str:
    """An object's version as its filesystem's info names it (S3's ETag, GCS's md5)."""
    return str(info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("mtime"))


def version(path: Path) -> dict[str, Any]:
    """What tells one version of a file from another without reading it: its size and
    modification time, and of an object its ETag too (which another upload of other bytes
    changes within the same second)."""
    stat = path.stat()  # (of an object: one request, its size, last upload and ETag)
    found: dict[str, Any] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if is_remote(path):
        found["etag"] = info_etag(cast(Any, stat).as_info())
    return found


def same_version(known: Any, now: dict[str, Any]) -> bool:
    """Whether a file's recorded version ``known`` (the manifest's size and modification
    time of it) is its :func:`version` ``now``."""
    return (
        isinstance(known, dict)
        and known.get("size") == now["size"]
        and known.get("mtime_ns") == now["mtime_ns"]
    )


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
        found = storage_failure(exc, url(place))
        if found is None:
            raise
        why, hint = found
        raise StoreError(f"{url(place)}: {why}", hint=hint) from exc
