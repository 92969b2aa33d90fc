"""The received files of a collected run: each request ``collect`` acknowledged, kept as it
came (:data:`JSON_FILE`, :data:`PROTO_FILE`) in the order it came (:data:`ORDER_FILE`), read
back when more of a trace comes or when a stopped collection is taken up again."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from tcbreplay._importers.otel import spans as otlp
from tcbreplay._importers.otel.otlp_json import decode_json
from tcbreplay._importers.otel.otlp_proto import decode_proto
from tcbreplay._store.files import replace_with
from tcbreplay.errors import TraceError

JSON_FILE = "received.otlp.jsonl"
PROTO_FILE = "received.otlp.pb"
# the order the requests came in across the two files: a letter a request kept, in the order
# they came (j: the next of JSON_FILE, p: of PROTO_FILE), written after the request itself
ORDER_FILE = "received.order"
_TAGS = {JSON_FILE: b"j", PROTO_FILE: b"p"}

Log = Callable[[str], None]


class ReceivedFiles:
    """The received files of the run in ``run_dir``, open to append (the order file once
    :meth:`open_order` is called, after what they hold is read again)."""

    def __init__(self, run_dir: Path, run_id: str, log: Log) -> None:
        self.dir = run_dir
        self.run_id = run_id
        self.log = log
        self._files: dict[str, BinaryIO] = {
            name: (run_dir / name).open("ab") for name in (JSON_FILE, PROTO_FILE)
        }

    def open_order(self) -> None:
        """Open the order file to append (once :meth:`arrived` has written it whole)."""
        self._files[ORDER_FILE] = (self.dir / ORDER_FILE).open("ab")

    def drop_torn_tails(self) -> None:
        """Cut the received files after their last whole request (a kill mid-write)."""
        from tcbreplay._store.journal import drop_torn_tail

        drop_torn_tail(self.dir / JSON_FILE)
        _drop_torn_frame(self.dir / PROTO_FILE)
        for name in (JSON_FILE, PROTO_FILE):  # (their positions were read before the cut)
            self._files[name].seek(0, os.SEEK_END)

    def append(self, name: str, body: bytes) -> tuple[str, int, int]:
        """Keep a request's ``body`` in the received file ``name`` (a line of JSON, or a
        protobuf request after its size), flushed, then its letter in the order file; where
        it is (file, offset, size)."""
        if name == JSON_FILE:
            raw = body.replace(b"\r", b"").replace(b"\n", b"") + b"\n"
        else:
            raw = len(body).to_bytes(4, "big") + body
        f = self._files[name]
        start = f.tell()
        f.write(raw)
        f.flush()  # kept: from here on a kill -9 loses nothing of it
        self._files[ORDER_FILE].write(_TAGS[name])  # (after it: a tag names a whole one)
        self._files[ORDER_FILE].flush()
        at = start + 4 if name == PROTO_FILE else start
        return (name, at, len(raw) - (4 if name == PROTO_FILE else 0))

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def arrived(self) -> list[tuple[str, int, int]]:
        """The requests of the received files (file, offset, size) in the order they came, as
        the order file tells it, which is then written whole: a request it does not name (the
        last, when a kill came between it and its letter; every one of a run collected before
        the file was kept) comes after those it names, JSON's first, and is said where both
        files hold such requests."""
        queues: dict[bytes, list[tuple[str, int, int]]] = {b"j": [], b"p": []}
        offset = 0
        with (self.dir / JSON_FILE).open("rb") as f:
            for line in f:
                queues[b"j"].append((JSON_FILE, offset, len(line)))
                offset += len(line)
        data = (self.dir / PROTO_FILE).read_bytes()
        at = 0
        while at + 4 <= len(data):
            size = int.from_bytes(data[at : at + 4], "big")
            queues[b"p"].append((PROTO_FILE, at + 4, size))
            at += 4 + size
        path = self.dir / ORDER_FILE
        said = path.read_bytes() if path.exists() else b""
        out = []
        taken = {b"j": 0, b"p": 0}
        for tag in (said[k : k + 1] for k in range(len(said))):
            if tag in taken and taken[tag] < len(queues[tag]):
                out.append(queues[tag][taken[tag]])
                taken[tag] += 1
        left = {tag: queues[tag][n:] for tag, n in taken.items()}
        if left[b"j"] and left[b"p"]:
            self.log(
                f"collect: {self.run_id}: {len(left[b'j']) + len(left[b'p'])} requests of the "
                f"received files are not in {ORDER_FILE} (a run collected before it was kept): "
                "read JSON's first, then protobuf's"
            )
        out += left[b"j"] + left[b"p"]
        tags = b"".join(_TAGS[name] for name, _, _ in out)
        if tags != said:
            replace_with(path, lambda tmp: tmp.write_bytes(tags))
        return out

    def read(self, name: str, start: int, size: int) -> otlp.Batch | None:
        """The request kept at ``start`` of ``name``, decoded; None (said in the log) for one
        that cannot be read."""
        with (self.dir / name).open("rb") as f:
            f.seek(start)
            body = f.read(size)
        try:
            if name == JSON_FILE:
                return decode_json(json.loads(body), f"{name} at byte {start}")
            return decode_proto(body, f"{name} at byte {start}")
        except (ValueError, TraceError) as exc:
            self.log(f"collect: {name} at byte {start}: skipped ({exc})")
            return None


def _drop_torn_frame(path: Path) -> None:
    """Cut a framed protobuf file after its last whole request."""
    if not path.exists():
        return
    data = path.read_bytes()
    at = 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        if at + 4 + size > len(data):
            break
        at += 4 + size
    if at != len(data):
        with path.open("rb+") as f:
            f.truncate(at)
