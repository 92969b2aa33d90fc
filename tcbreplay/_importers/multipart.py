"""The langsmith SDK's ``/runs/multipart`` bodies, as a capture keeps them: one after another
as they were sent, each plain or compressed with zstd (the SDK compresses once the server says
it takes zstd, so a capture may mix both).

A body's parts are named ``post.<run id>`` (the run), ``post.<run id>.<field>`` (one of its
large fields: ``inputs``, ``outputs``, ``events``, ``extra``, ``error``, ``serialized``), the
same with ``patch``, or ``attachment.<run id>.<name>`` (left out). A compressed body is unpacked
a little at a time within the archive limits of :mod:`tcbreplay._importers.archives`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from tcbreplay import _json
from tcbreplay._importers import archives
from tcbreplay.errors import InputError, TraceError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# how a capture begins: a boundary line, then a run's part
FIRST_PART = re.compile(rb'\A--[^\r\n]+\r\nContent-Disposition: form-data; name="(post|patch)\.')
# compressed bytes unpacked at a time: a zstd block unpacks to at most 128 KiB, so a chunk this
# small unpacks to a bounded amount before the cap is checked
_ZSTD_CHUNK = 1024
_PART_NAME = re.compile(rb'^Content-Disposition:[^\r\n]*\bname="([^"]*)"', re.I | re.M)
# a run's fields the multipart endpoint sends as parts of their own
_RUN_PARTS = ("inputs", "outputs", "events", "extra", "error", "serialized")


def bodies(data: bytes, label: str) -> Iterator[bytes]:
    """The ``/runs/multipart`` bodies of a capture, one after another as sent, each as it is
    or compressed (the SDK compresses once the server says it may: its first bodies may not
    be)."""
    pos, n, unpacked = 0, 0, 0
    while pos < len(data):
        if data.startswith(ZSTD_MAGIC, pos):
            cap = _unpack_cap(len(data)) - unpacked
            frame, pos = _unzstd_frame(data, pos, cap, f"{label}: body {n}")
            unpacked += len(frame)
            if frame.startswith(ZSTD_MAGIC):
                raise TraceError(f"{label}: body {n}: compressed twice")
            for body in bodies(frame, label):  # a frame may hold several bodies
                yield body
                n += 1
        else:
            eol = data.find(b"\r\n", pos)
            boundary = data[pos:eol] if eol > pos else b""
            if not boundary.startswith(b"--"):
                raise TraceError(f"{label}: body {n}: not a multipart body (no boundary line)")
            end = data.find(b"\r\n" + boundary + b"--", pos)
            if end < 0:
                raise TraceError(f"{label}: body {n}: its multipart body does not end")
            yield data[pos : end + len(boundary) + 4]
            n, pos = n + 1, end + len(boundary) + 4
        while data[pos : pos + 2] == b"\r\n":
            pos += 2


def runs(body: bytes, label: str) -> Iterator[tuple[str, str, Any]]:
    """The runs of a ``/runs/multipart`` body: a part ``post.<id>`` holds a run, a part
    ``post.<id>.<field>`` one of its fields (the same for ``patch``)."""
    eol = body.find(b"\r\n")
    boundary = body[:eol] if eol > 0 else b""
    end = body.rfind(b"\r\n" + boundary + b"--")
    if not boundary.startswith(b"--") or end < 0:
        raise TraceError(f"{label}: not a multipart body (boundary lines)")
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for part in body[eol + 2 : end].split(b"\r\n" + boundary + b"\r\n"):
        headers, sep, content = part.partition(b"\r\n\r\n")
        name = _PART_NAME.search(headers)
        if not sep or name is None:
            raise TraceError(f"{label}: a part without a name")
        op, _, rest = name.group(1).decode("utf-8", "replace").partition(".")
        if op not in ("post", "patch"):
            continue  # an attachment
        run_id, _, field = rest.partition(".")
        place = f"{label}: part {name.group(1).decode('utf-8', 'replace')}"
        try:
            value = _json.loads(content.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TraceError(f"{place}: not JSON") from exc
        except _json.LimitError as exc:
            raise TraceError(f"{place}: {exc}", hint=_json.HINT) from None
        run = runs.setdefault((op, run_id), {"id": run_id})
        if not field:
            if not isinstance(value, dict):
                raise TraceError(f"{place}: a run must be an object")
            run.update(value)
        elif field in _RUN_PARTS:
            run[field] = value
    for (op, run_id), run in runs.items():
        yield f"{label}: {op}.{run_id}", op, run


def _unpack_cap(size: int) -> int:
    """How much a capture of ``size`` bytes may unpack to: the archive limits'."""
    return min(archives.MAX_MEMBER_BYTES, size * archives.MAX_RATIO + archives.RATIO_GRACE)


def _unzstd_frame(data: bytes, pos: int, cap: int, label: str) -> tuple[bytes, int]:
    """The zstd frame at ``pos`` unpacked (at most ``cap`` bytes), and where it ends. It is
    fed a little at a time, so a frame that unpacks beyond the cap is stopped early."""
    zstandard = _zstandard()
    unpacker = zstandard.ZstdDecompressor().decompressobj()
    out = bytearray()
    try:
        while not unpacker.eof and pos < len(data):
            chunk = data[pos : pos + _ZSTD_CHUNK]
            out += unpacker.decompress(chunk)
            pos += len(chunk) - (len(unpacker.unused_data) if unpacker.eof else 0)
            if len(out) > cap:
                raise TraceError(
                    f"{label}: unpacks to more than {cap} bytes", hint=archives.ARCHIVE_HINT
                )
    except zstandard.ZstdError as exc:
        raise TraceError(f"{label}: not zstd-compressed data zstandard can read ({exc})") from exc
    if not unpacker.eof:
        raise TraceError(f"{label}: its zstd-compressed body is cut short")
    return bytes(out), pos


def unzstd_head(head: bytes) -> bytes:
    """The start of what a zstd-compressed head unpacks to (empty if it cannot be read)."""
    try:
        unpacker = _zstandard().ZstdDecompressor().decompressobj()
        out = b""
        for pos in range(0, len(head), _ZSTD_CHUNK):
            out += unpacker.decompress(head[pos : pos + _ZSTD_CHUNK])
            if len(out) >= 4096 or unpacker.eof:
                break
        return out[:4096]
    except Exception:  # a sniff: any head it cannot read is not LangSmith's
        return b""


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:  # a dependency of langsmith, which langchain-core needs
        raise InputError(
            "reading zstd-compressed payloads needs zstandard", hint="pip install zstandard"
        ) from None
    return zstandard
