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

A store is a folder (a ``file://`` URL is the folder it names) or a URL of one of
:data:`STORE_SCHEMES`; any other URL (``memory://``, ``https://``, fsspec's chained
``simplecache::s3://``) is refused before a filesystem is made, and so is a place holding a
wildcard, which fsspec and DuckDB would take for a pattern (:data:`WILDCARDS`).
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePath
from typing import Any, TypeVar, cast
from urllib.parse import unquote, urlsplit

from tcbreplay._store import s3_limits
from tcbreplay._store.s3_limits import client_options
from tcbreplay._store.storage_errors import no_bucket_hint, s3_answer, storage_failure
from tcbreplay.errors import InputError, StoreError, TcbReplayError, first_line

T = TypeVar("T")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# fsspec's chained URL (simplecache::s3://...): filesystems wrapped in others
_CHAINED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)::")
# a URL of the local filesystem (file:///PATH, file:/PATH, file://localhost/PATH)
_FILE_URL = re.compile(r"^(file|local):(?=/)", re.IGNORECASE)
# the schemes of the local filesystem, which stores name as folders
_LOCAL_SCHEMES = frozenset({"file", "local"})
# the schemes of object storage a store may be on (durable, read and written through their
# fsspec filesystem), and the package each filesystem is installed with: no other is taken
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
             "abfs": "adlfs", "abfss": "adlfs"}  # fmt: skip
STORE_SCHEMES = tuple(_PACKAGES)
EXTRA_HINT = "pip install 'tcbreplay[s3]'"
# what the libraries that read and delete a store take as a pattern in a path, not as a
# name: fsspec (glob.has_magic: * ? [; its rm and glob expand them), DuckDB's read_parquet
# and Polars (* ? [...]); ] closes [. Braces are no pattern to any of them (DuckDB 2.0,
# Polars 2.1, fsspec 2026.6: tried), and stay allowed.
WILDCARDS = "*?[]"
# what a bucket's name is made of (S3's and Cloud Storage's rules, and legacy S3 names' capitals
# and underscores)
_BUCKET = re.compile(r"[A-Za-z0-9._-]+")
_SAFE_HINT = "name the store without * ? [ ]: letters, digits, '.', '_', '-' and '/' are safe"


def is_url(text: object) -> bool:
    """Whether ``text`` is a URL of a scheme other than file's: of object storage, or of one
    that :func:`store_root` refuses."""
    if not isinstance(text, str):
        return False
    match = _SCHEME.match(text)
    return match is not None and match.group(1).lower() not in _LOCAL_SCHEMES


def is_remote(path: object) -> bool:
    """Whether ``path`` is a place on object storage (a UPath, not a local path)."""
    return path is not None and not isinstance(path, PurePath | str)


def store_root(root: str | os.PathLike[str]) -> Path:
    """The place a ``--store`` value names: a local folder, or a UPath for a URL.

    Decided before anything is written, read or deleted, and before any filesystem is made:
    a folder (or a ``file://`` URL of one), or a URL of one of :data:`STORE_SCHEMES`;
    anything else (``memory://``, ``https://``, a chained ``simplecache::s3://``...) is an
    :class:`InputError`, as is a place holding a wildcard (:data:`WILDCARDS`).

    A remote place is typed as a Path: it offers pathlib's API (``/``, ``name``, ``parent``,
    ``exists``, ``read_text``, ``glob``...); code that needs more (renames, locks, handing it
    to Arrow or DuckDB) asks :func:`is_remote` first."""
    if is_remote(root):
        return cast(Path, root)
    text = os.fspath(root)
    if any(ord(char) < 32 or char == "\x7f" for char in text):
        # (a command printed to run next could not quote it for a shell to paste)
        raise InputError(
            "--store: the store's name holds a control character (a tab, a newline...)",
            hint="name the store without one: letters, digits, '.', '_', '-' and '/' are safe",
        )
    _check_scheme(text)
    if _FILE_URL.match(text):
        return _local_root(text, _file_url_path(text))
    if not is_url(text):
        return _local_root(text, text)
    scheme = text.split("://", 1)[0].lower()
    text = scheme + text[len(scheme) :]  # a scheme is case-insensitive (S3://)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (raises on a port that is no number)
    except ValueError:  # s3://[bad/x, s3://b:x/p; the reason is not shown: it may quote a secret
        raise InputError(
            f"--store {scheme}://...: not a URL tcbreplay can read (its bucket, or a port)",
            hint=f"give {scheme}://BUCKET/PREFIX",
        ) from None
    if (
        parts.username is not None
        or parts.password is not None
        or ":" in parts.netloc  # no bucket has one: KEY:SECRET cut short by a / in the secret
        or parts.query
        or parts.fragment
        or "#" in text
    ):
        raise InputError(
            f"--store {scheme}://...: the URL holds credentials or options; tcbreplay takes "
            "none (and shows none)",
            hint=f"give the store as {scheme}://BUCKET/PREFIX, its credentials in the cloud's "
            "environment or config files (for S3: AWS_PROFILE, AWS_ACCESS_KEY_ID, ~/.aws)",
        )
    _check_no_wildcards(text, text)
    if not parts.netloc:
        raise InputError(f"--store {text}: no bucket", hint=f"give {scheme}://BUCKET/PREFIX")
    if not _BUCKET.fullmatch(parts.netloc):  # (not shown: s3://KEY%3ASECRET%40bucket/p)
        raise InputError(
            f"--store {scheme}://...: its bucket name holds a character no bucket name has "
            "(they are letters, digits, '.', '_' and '-')",
            hint=f"give {scheme}://BUCKET/PREFIX, its credentials in the cloud's environment or "
            "config files",
        )
    # an empty folder name: s3://b//p, s3://b/${EMPTY}/p, s3://b/p/${EMPTY}/ (a slash at the
    # end is none: s3://b/p/ is s3://b/p)
    if "//" in parts.path:
        raise InputError(
            f"--store {text}: an empty folder name (//) in the prefix",
            hint=f"give {scheme}://BUCKET/PREFIX with one slash between names",
        )
    # keys of their own to S3, not folders; %2e%2e too, which DuckDB's readers decode
    if {".", ".."} & {unquote(name) for name in parts.path.split("/")}:
        raise InputError(
            f"--store {text}: a '.' or '..' folder name in the prefix, which object storage "
            "keeps as a name (and the store's readers resolve)",
            hint=f"give {scheme}://BUCKET/PREFIX without . or .. between its slashes",
        )
    try:
        from upath import UPath
    except ImportError:
        raise InputError(
            f"--store {text}: a store on object storage needs tcbreplay's s3 extra",
            hint=EXTRA_HINT,
        ) from None
    try:
        # listings are not cached: another process may write the store meanwhile
        path = UPath(text.rstrip("/"), use_listings_cache=False, **client_options(scheme))
        _tries(path.fs)  # (the scheme's filesystem, which may be missing)
    except ImportError as exc:
        package = _PACKAGES.get(scheme, "the fsspec filesystem of " + scheme)
        raise InputError(
            f"--store {text}: {scheme}:// needs {package}, which is not installed",
            hint=EXTRA_HINT if package == "s3fs" else f"pip install {package}",
        ) from exc
    except ValueError as exc:  # a scheme fsspec does not know
        raise InputError(f"--store {text}: {first_line(exc)}") from exc
    return cast(Path, path)


def _tries(fs: Any) -> Any:
    """``fs``, trying a request again on its own (s3fs: on timeouts) S3FS_RETRIES times."""
    if _is_s3(fs):
        fs.retries = s3_limits.S3FS_RETRIES
    return fs


def _accepted() -> str:
    """The schemes a store may be on, as a hint lists them."""
    names = [f"{scheme}://" for scheme in STORE_SCHEMES]
    return ", ".join(names[:-1]) + " or " + names[-1]


def _check_scheme(text: str) -> None:
    """Refuse a URL of a scheme no store can be on, and fsspec's chained URLs, naming only
    the scheme (the rest of a URL may hold credentials)."""
    chained = _CHAINED.match(text)
    if chained:
        raise InputError(
            f"--store {chained.group(1)}::...: a chained URL (fsspec's PROTOCOL::URL) is not a "
            "store tcbreplay can write and read",
            hint=f"give a folder, or a URL of {_accepted()} (such as s3://BUCKET/PREFIX)",
        )
    match = _SCHEME.match(text)
    if match is None:
        return
    scheme = match.group(1).lower()
    if scheme in _LOCAL_SCHEMES:
        return
    if scheme not in _PACKAGES:
        raise InputError(
            f"--store {scheme}://...: {scheme}:// is not a store tcbreplay can write and read",
            hint=f"give a folder, or a URL of {_accepted()} (such as s3://BUCKET/PREFIX)",
        )
    if "::" in text:  # fsspec would take what follows for another URL, and store before it
        raise InputError(
            f"--store {scheme}://...: '::' chains URLs in fsspec, which would store the runs "
            "under the part before it",
            hint=f"give {scheme}://BUCKET/PREFIX, its names without '::'",
        )


def local_store_path(text: str | os.PathLike[str]) -> str | None:
    """The local folder a ``--store`` value names: the value itself, or the path of a
    ``file://`` URL (``file:///PATH``, ``file://localhost/PATH``); None for any other URL, and
    for a file URL that names no local path (which :func:`store_root` refuses)."""
    text = os.fspath(text)
    if is_url(text) or _CHAINED.match(text):
        return None
    if not _FILE_URL.match(text):
        return text
    try:
        return _file_url_path(text)
    except InputError:
        return None


def _file_url_path(text: str) -> str:
    """The path a ``file:`` URL names (percent-escapes decoded)."""
    scheme = text.split(":", 1)[0].lower()
    elsewhere = InputError(
        f"--store {scheme}://...: a file URL names a folder of this machine",
        hint="give file:///PATH (three slashes), or the folder's path",
    )
    try:
        parts = urlsplit(text)
    except ValueError:  # file://[x/p
        raise elsewhere from None
    if parts.netloc.lower() not in ("", "localhost") or not parts.path:
        raise elsewhere
    if parts.query or parts.fragment or "#" in text:
        raise InputError(
            f"--store {text}: the URL holds options; tcbreplay takes none",
            hint="give file:///PATH, or the folder's path",
        )
    return unquote(parts.path)


# a relative path whose first name Arrow would take for a URL's scheme (foo:bar/x)
_LIKE_A_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _local_root(given: str, local: str) -> Path:
    """The folder of a local store, checked: no mistyped URL of object storage, and no
    wildcard in its path as DuckDB reads it (resolved: a folder linked or relative to one
    holding a wildcard reads as a pattern too)."""
    _check_not_url_like(local)
    _check_no_wildcards(given, local)
    _check_no_wildcards(given, os.path.realpath(local))
    if _LIKE_A_SCHEME.match(local):
        # Arrow takes foo:bar/samples.parquet for a URL of a scheme foo; an absolute path not
        return Path(local).absolute()
    return Path(local)


def _check_no_wildcards(given: str, place: str) -> None:
    """Refuse a store whose place holds a wildcard (see :data:`WILDCARDS`): DuckDB would read,
    and fsspec delete, the runs of every store the pattern matches."""
    found = next((char for char in place if char in WILDCARDS), None)
    if found is None:
        return
    where = "" if found in given else f" (its folder {place})"
    raise InputError(
        f"--store {given}{where}: {found!r} is a wildcard to the libraries that read and "
        "delete the store, which would take other stores' runs for its own",
        hint=_SAFE_HINT,
    )


# a store URL written with one slash (s3:/bucket): a folder named "s3:" would be made
_ONE_SLASH = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/?(?!/)")


def _mistyped_scheme(text: str) -> str | None:
    """The object store's scheme of a URL written with one slash or none (``s3:/bucket``,
    ``s3:bucket``), which as a path would make a folder named ``s3:``; None otherwise."""
    match = _ONE_SLASH.match(text)
    return match.group(1).lower() if match and match.group(1).lower() in _PACKAGES else None


def names_object_storage(text: str) -> bool:
    """Whether ``text`` is meant as a place on object storage: a URL (``s3://``, ``https://``),
    or one mistyped with a single slash (``s3:/bucket``)."""
    return is_url(text) or _mistyped_scheme(text) is not None


def _check_not_url_like(text: str) -> None:
    """Refuse a local --store that is an object store's URL mistyped (see _mistyped_scheme)."""
    scheme = _mistyped_scheme(text)
    if scheme is not None:
        raise InputError(
            f"--store {scheme}:...: a URL of object storage takes two slashes",
            hint=f"give {scheme}://BUCKET/PREFIX",
        )


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
    return _tries(_asks_once(cast(Any, type(fs)))(skip_instance_cache=True, **options))


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
    return _info_etag(fs.info(where))


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
    return opened, (url(path), _info_etag(info), size)


def _info_etag(info: dict[str, Any]) -> str:
    """An object's version as its filesystem's info names it (S3's ETag, GCS's md5)."""
    return str(info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("mtime"))


def version(path: Path) -> dict[str, Any]:
    """What tells one version of a file from another without reading it: its size and
    modification time, and of an object its ETag too (which another upload of other bytes
    changes within the same second)."""
    stat = path.stat()  # (of an object: one request, its size, last upload and ETag)
    found: dict[str, Any] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if is_remote(path):
        found["etag"] = _info_etag(cast(Any, stat).as_info())
    return found


def same_version(known: Any, now: dict[str, Any]) -> bool:
    """Whether a file's recorded version ``known`` (the manifest's size and modification
    time of it) is its :func:`version` ``now``."""
    return (
        isinstance(known, dict)
        and known.get("size") == now["size"]
        and known.get("mtime_ns") == now["mtime_ns"]
    )


def written_ago(path: Path, store_clock: bool = False) -> tuple[float, str]:
    """How long ago an object was last written, and its version: by this machine's clock
    against the store's time of the write, or (``store_clock``) by the store's own clock
    alone, read from an object written beside it for the purpose (removed at once): a
    machine whose clock is off by a minute would otherwise take a live writer's lock, or
    wait an hour for a dead one's. That costs a write, so only a writer asks for it."""
    fs, where = fs_path(path)
    info = fs.info(where)  # (one HEAD: its version and its time of writing both)
    etag = _info_etag(info)
    written = _modified(fs, where, info)
    if not store_clock:
        return time.time() - written, etag
    probe = path.with_name(f"{path.name}{CLOCK_PROBE}{os.getpid()}-{time.monotonic_ns()}")
    fs_probe, probe_where = fs_path(probe)
    fs_probe.pipe_file(probe_where, b"")
    try:
        now = _modified(fs_probe, probe_where, fs_probe.info(probe_where))
    finally:
        with suppress(Exception):  # (its work done: one left is removed by a later reading)
            remove_object(probe)
    _remove_old_probes(path, now)
    return now - written, etag


# the clock probes beside a lock: ``writer.lock.clock-<pid>-<n>``
CLOCK_PROBE = ".clock-"
_CLOCK_PROBE = re.compile(r".+\.clock-\d+-\d+")
# A clock probe this old by the store's clock (seconds) is one whose removal failed, not one
# another process is reading now (a probe lives for two requests, which a silent endpoint
# gives up on within about 3 minutes)
OLD_PROBE_S = 300.0
_looked_beside: set[str] = set()  # the locks whose old probes this process looked for


def is_clock_probe(name: str) -> bool:
    """Whether ``name`` is a clock probe's, which a lock leaves beside it when the probe's
    removal fails (an empty object, part of no run)."""
    return _CLOCK_PROBE.fullmatch(name) is not None


def _remove_old_probes(lock: Path, now: float) -> None:
    """Remove the clock probes beside ``lock`` older than OLD_PROBE_S at the store's time
    ``now`` (their removal failed: a 503, a policy that refused it), once per process and
    lock: best done, never failing the reading of the clock."""
    if url(lock) in _looked_beside:
        return
    _looked_beside.add(url(lock))
    fs, folder = fs_path(lock.parent)
    with suppress(Exception):
        for entry in fs.ls(folder, detail=True):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if not (name.startswith(lock.name + CLOCK_PROBE) and is_clock_probe(name)):
                continue
            if entry.get("type") == "file" and now - _modified(fs, entry["name"], entry) >= (
                OLD_PROBE_S
            ):
                with suppress(Exception):
                    fs.rm_file(entry["name"])


def _modified(fs: Any, where: str, info: dict[str, Any]) -> float:
    """An object's time of writing, in seconds since 1970, by the store's clock."""
    modified = info.get("LastModified") or fs.modified(where)
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=dt.UTC)
    return float(modified.timestamp())


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
