"""A LangSmith stand-in on 127.0.0.1 that keeps what the ``langsmith`` SDK sends it, for the
LangSmith dialect's fixtures and its live test.

It answers ``GET /info`` as a LangSmith server of the chosen ``mode`` does: ``multipart`` (runs
go to ``/runs/multipart``), ``zstd`` (the same, compressed with zstd) or ``batch`` (it has no
multipart endpoint: the SDK falls back to ``/runs/batch``). Every ``POST``/``PATCH`` under
``/runs`` is kept as a :class:`Posted` (its path, content type and encoding, and body: never the
headers, which hold the API key). ``POST /runs/query`` answers ``Client.list_runs()`` with the
runs it was sent, each its posts and patches merged, in the shape LangSmith's query answers
(with ``session_id`` and ``status`` as the server fills them).

Its decoding of the bodies is its own (the standard library's multipart parser), not
tcbreplay's: what the importer reads is checked against it.

    with LangSmithServer("multipart") as server:
        ...  # LANGSMITH_ENDPOINT=server.url; then server.posted, server.runs()
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# the project the runs are stored under, as the query answers name it
SESSION_ID = "3f0e2a4c-9d55-4c1e-8a4b-6f1e2d3c4b5a"
_RUN_PARTS = ("inputs", "outputs", "events", "extra", "error", "serialized")


@dataclass(frozen=True)
class Posted:
    """One request the SDK sent: where, its content type and encoding, and its body."""

    method: str
    path: str
    content_type: str
    encoding: str | None
    body: bytes

    def decoded(self) -> bytes:
        """The body, uncompressed."""
        if self.encoding == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(self.body)
        return self.body

    def operations(self) -> list[tuple[str, dict[str, Any]]]:
        """The run operations the request holds: ``("post" | "patch", run)``."""
        body = self.decoded()
        if self.content_type.startswith("multipart/form-data"):
            return _multipart_operations(self.content_type, body)
        doc = json.loads(body)
        if self.path.endswith("/runs/batch"):
            return [(op, run) for op in ("post", "patch") for run in doc.get(op) or []]
        if self.method == "PATCH":
            return [("patch", {"id": self.path.rsplit("/", 1)[-1], **doc})]
        return [("post", doc)]


class LangSmithServer:
    """A loopback LangSmith that keeps the runs it is sent; see the module docstring."""

    def __init__(self, mode: str = "multipart") -> None:
        if mode not in ("multipart", "zstd", "batch"):
            raise ValueError(f"mode {mode!r}: multipart, zstd or batch")
        self.mode = mode
        self.posted: list[Posted] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LangSmithServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def runs(self) -> list[dict[str, Any]]:
        """Every run sent, its post and patches merged, in the order first posted."""
        merged: dict[str, dict[str, Any]] = {}
        with self._lock:
            posted = list(self.posted)
        for request in posted:
            for _, run in request.operations():
                merged.setdefault(str(run["id"]), {}).update(run)
        for run in merged.values():
            run.setdefault("session_id", SESSION_ID)
            run["status"] = "error" if run.get("error") else "success"
            run["is_root"] = run.get("parent_run_id") is None
        return list(merged.values())

    def _info(self) -> dict[str, Any]:
        return {
            "version": "0.12.0",
            "batch_ingest_config": {
                "use_multipart_endpoint": self.mode != "batch",
                "scale_up_qsize_trigger": 1000,
                "scale_up_nthreads_limit": 16,
                "scale_down_nempty_trigger": 4,
                "size_limit": 100,
                "size_limit_bytes": 20_971_520,
            },
            "instance_flags": {"zstd_compression_enabled": self.mode == "zstd"},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, doc: Any = None) -> None:
                body = json.dumps(doc if doc is not None else {}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer(200, server._info() if self.path.startswith("/info") else {})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.startswith("/runs/query"):
                    self._answer(200, {"runs": server.runs(), "cursors": {"next": None}})
                    return
                if self.path.endswith("/runs/multipart") and server.mode == "batch":
                    self._answer(404, {"detail": "Not Found"})
                    return
                posted = Posted(
                    self.command,
                    self.path,
                    self.headers.get("Content-Type", ""),
                    self.headers.get("Content-Encoding"),
                    body,
                )
                with server._lock:
                    server.posted.append(posted)
                self._answer(202)

            do_PATCH = do_POST

        return Handler


def _multipart_operations(content_type: str, body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The run operations of a ``/runs/multipart`` body: a part ``post.<id>`` (or ``patch.``)
    holds the run, parts ``post.<id>.<field>`` its large fields."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    ops: dict[tuple[str, str], dict[str, Any]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        op, run_id, *field = str(name).split(".")
        if op not in ("post", "patch"):
            continue  # attachments
        value = json.loads(part.get_payload(decode=True))
        run = ops.setdefault((op, run_id), {"id": str(uuid.UUID(run_id))})
        if field:
            assert field[0] in _RUN_PARTS, name
            run[field[0]] = value
        else:
            run.update(value)
    return [(op, run) for (op, _), run in ops.items()]
