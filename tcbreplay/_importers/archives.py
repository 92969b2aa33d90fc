"""How large a zip archive may unpack, checked before a reader unpacks it whole.

An archive (an inspect_ai ``.eval`` log is a zip file) is read whole by its reader, so each
member may unpack to at most :data:`MAX_MEMBER_BYTES`, all of them to
:data:`MAX_ARCHIVE_BYTES`, and a member beyond :data:`RATIO_GRACE` to at most
:data:`MAX_RATIO` times its compressed size (see :func:`zip_problem`).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Iterator

from tcbreplay._json import one_line

MAX_MEMBER_BYTES = 256 * 2**20
MAX_ARCHIVE_BYTES = 2**30
MAX_RATIO = 100
# members that unpack to no more than this may have any ratio (small JSON texts compress well)
RATIO_GRACE = 2**20
_CHUNK = 2**20

ARCHIVE_HINT = (
    f"tcbreplay reads .eval logs (zip files) whose members unpack to at most "
    f"{MAX_MEMBER_BYTES >> 20} MiB each and {MAX_ARCHIVE_BYTES >> 30} GiB in all, and a member "
    f"beyond {RATIO_GRACE >> 20} MiB to at most {MAX_RATIO} times its compressed size"
)


class _Unreadable(Exception):
    pass


def zip_problem(data: bytes) -> str | None:
    """What in the zip archive ``data`` unpacks beyond the limits or cannot be unpacked, or None.

    Every member is unpacked a chunk at a time, never whole, and the bytes it really yields
    are counted (the sizes an archive declares may lie): a bomb is refused after at most
    :data:`MAX_RATIO` times its compressed size (or :data:`RATIO_GRACE`) is unpacked.
    Members are read as a zip reader reads them: the compressed bytes after the local header
    the central directory points at. Stored, deflated and zstd members are read (zstd, which
    inspect_ai writes, with the ``zstandard`` package inspect_ai needs).
    """
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
        return f"not a zip file ({type(exc).__name__}: {one_line(exc)})"
    total = 0
    for info in members:
        name = info.filename
        size = 0
        try:
            for chunk in _unpacked_sizes(data, info):
                size += chunk
                total += chunk
                if size > MAX_MEMBER_BYTES:
                    return f"member {name!r} unpacks to more than {_bytes(MAX_MEMBER_BYTES)}"
                if size > RATIO_GRACE and size > MAX_RATIO * info.compress_size:
                    return (
                        f"member {name!r} unpacks to more than {MAX_RATIO} times its "
                        f"{info.compress_size:,} compressed bytes"
                    )
                if total > MAX_ARCHIVE_BYTES:
                    return f"its members unpack to more than {_bytes(MAX_ARCHIVE_BYTES)} in all"
        except _Unreadable as exc:
            return f"member {name!r} {exc}"
    return None


def _unpacked_sizes(data: bytes, info: zipfile.ZipInfo) -> Iterator[int]:
    """The sizes of the chunks a member unpacks to, one chunk at a time."""
    header = data[info.header_offset : info.header_offset + 30]
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise _Unreadable("has no local header where the central directory says")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    start = info.header_offset + 30 + name_length + extra_length
    packed = data[start : start + info.compress_size]
    if info.compress_type == zipfile.ZIP_STORED:
        yield len(packed)
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        inflate = zlib.decompressobj(-15)
        while not inflate.eof:
            try:
                chunk = inflate.decompress(packed, _CHUNK)
            except zlib.error as exc:
                raise _cannot_unpack(exc) from None
            packed = inflate.unconsumed_tail
            if not chunk and not packed:
                break
            yield len(chunk)
    elif info.compress_type == _ZSTD:
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(packed, read_across_frames=True)
        while True:
            try:
                chunk = reader.read(_CHUNK)
            except zstandard.ZstdError as exc:
                raise _cannot_unpack(exc) from None
            if not chunk:
                break
            yield len(chunk)
    else:
        raise _Unreadable(
            f"is compressed with method {info.compress_type}, which tcbreplay does not unpack"
        )


_ZSTD = 93  # the zip method number of Zstandard


def _cannot_unpack(exc: Exception) -> _Unreadable:
    return _Unreadable(f"cannot be unpacked ({type(exc).__name__}: {one_line(exc)})")


def _bytes(n: int) -> str:
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n:,} bytes"
