"""What a ``--store`` value names: a local folder, or a place on object storage.

A store is a folder (a ``file://`` URL is the folder it names) or a URL of one of
:data:`STORE_SCHEMES`; any other URL (``memory://``, ``https://``, fsspec's chained
``simplecache::s3://``) is refused before a filesystem is made, and so is a place holding a
wildcard, which fsspec and DuckDB would take for a pattern (:data:`WILDCARDS`), or a URL
holding credentials (tcbreplay takes none: each cloud's library reads its own). How a store
on object storage is then read and written: :mod:`tcbreplay._store.objects`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

from tcbreplay._store.objects import is_remote, with_retries
from tcbreplay._store.s3_limits import client_options
from tcbreplay.errors import InputError, first_line

# the store a command without --store reads and writes (a folder of the working directory)
DEFAULT_STORE = "traces"

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
        with_retries(path.fs)  # (the scheme's filesystem, which may be missing)
    except ImportError as exc:
        package = _PACKAGES.get(scheme, "the fsspec filesystem of " + scheme)
        raise InputError(
            f"--store {text}: {scheme}:// needs {package}, which is not installed",
            hint=EXTRA_HINT if package == "s3fs" else f"pip install {package}",
        ) from exc
    except ValueError as exc:  # a scheme fsspec does not know
        raise InputError(f"--store {text}: {first_line(exc)}") from exc
    return cast(Path, path)


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
