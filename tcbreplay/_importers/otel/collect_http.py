"""The OTLP/HTTP side of ``collect``: the receiver and its handler, and the checks of each
request (its body's length or chunks, its compression, its content type, its payload)
before anything of it is kept; a request refused is answered 4xx and said in the log."""

from __future__ import annotations

import json
import sys
import threading
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from tcbreplay._importers.otel import spans as otlp
from tcbreplay._importers.otel.collect_files import JSON_FILE, PROTO_FILE
from tcbreplay._importers.otel.otlp_json import decode_json
from tcbreplay._importers.otel.otlp_proto import decode_proto
from tcbreplay._secrets import redact, shown_path
from tcbreplay.errors import InputError, TraceError

# at most this many bytes in one request (a batch of 512 large spans fits many times over)
MAX_BODY = 64 * 2**20
PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}


class Sink(Protocol):
    """What the receiver hands requests to (a collector)."""

    refused: int
    log: Callable[[str], None]

    def receive(self, body: bytes, content_type: str, encoding: str = "") -> int: ...


class BodyError(Exception):
    """A request body that cannot be read: too large, or badly chunked."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def decode_request(
    body: bytes, content_type: str, encoding: str, limit: int
) -> tuple[otlp.Batch, str, bytes]:
    """A request's body decoded (``limit``: its most bytes once decompressed), the received
    file it is kept in and what of it is kept (its secrets redacted). A
    :class:`TraceError` for a body that cannot be read."""
    coding = encoding.strip().lower()  # (content codings are case-insensitive: RFC 9110)
    if coding == "gzip":
        body = gunzip(body, limit)
    elif coding not in ("", "identity"):
        raise TraceError(f"Content-Encoding {encoding!r}: send gzip or none")
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json":
        body = body.removeprefix(b"\xef\xbb\xbf")  # (a BOM mid-file: a line import refuses)
        try:
            # OTLP/JSON is UTF-8; json.loads(bytes) takes UTF-16 and UTF-32 too, kept and
            # acknowledged, then unreadable from the received file
            doc = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise TraceError(f"not UTF-8 JSON (OTLP/JSON is UTF-8; {exc})") from exc
        except (ValueError, RecursionError) as exc:
            raise TraceError(f"not JSON ({exc})") from exc
        batch = decode_json(doc, "request", whole=True)
        if batch.redacted:  # the request as kept: its secrets redacted (see decode_json)
            body = json.dumps(doc, ensure_ascii=False).encode()
        return batch, JSON_FILE, body
    if kind in ("application/x-protobuf", "application/protobuf"):
        batch = decode_proto(body, "request", whole=True)
        return batch, PROTO_FILE, batch.kept or body
    raise TraceError(
        f"Content-Type {content_type!r}: send application/x-protobuf or application/json"
    )


def gunzip(body: bytes, limit: int) -> bytes:
    """A gzip body (of one member or more) decompressed, at most ``limit`` bytes of it: a
    :class:`BodyError` (413) past that, before more is made (a few MB of gzip can hold
    gigabytes), a :class:`TraceError` for what is not gzip."""
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data:
            member = zlib.decompressobj(wbits=31)
            while data and not member.eof:
                chunk = member.decompress(data, limit + 1 - size)
                size += len(chunk)
                if size > limit:
                    raise BodyError(413, f"a request of more than {limit} bytes once decompressed")
                out.append(chunk)
                data = member.unconsumed_tail
            if not member.eof:
                raise TraceError("not gzip data (cut short)")
            data = member.unused_data.lstrip(b"\x00")  # (padding after the last member)
    except zlib.error as exc:
        raise TraceError(f"not gzip data ({exc})") from exc
    return b"".join(out)


def read_body(rfile: Any, headers: Any, limit: int = MAX_BODY) -> bytes:
    """A request's body, by its ``Content-Length`` or in chunks (``Transfer-Encoding:
    chunked``, as OpenTelemetry's JavaScript exporters send it), at most ``limit`` bytes."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        parts: list[bytes] = []
        size = 0
        while True:
            line = rfile.readline(1024)
            size_text = line.split(b";")[0].strip()
            try:
                chunk = int(size_text, 16)
                if not size_text.isalnum():  # (int() takes a sign, and "_" between digits)
                    raise ValueError
            except ValueError:
                raise BodyError(400, f"a badly chunked body (chunk size {line[:20]!r})") from None
            if chunk == 0:
                while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            size += chunk
            if size > limit:
                raise BodyError(413, f"a request of more than {limit} bytes")
            parts.append(_whole(rfile, chunk))
            rfile.readline(1024)  # the chunk's CRLF
    given = (headers.get("Content-Length") or "0").strip()
    if not (given.isascii() and given.isdigit()):
        raise BodyError(400, f"Content-Length {given[:40]!r}: not a length")
    length = int(given)
    if length > limit:
        raise BodyError(413, f"a request of {length} bytes, more than {limit}")
    return _whole(rfile, length)


def _whole(rfile: Any, size: int) -> bytes:
    """The next ``size`` bytes of ``rfile``: a body that ends before (the client closed the
    connection, or sent less than it announced) is refused, never read as a request."""
    data = bytes(rfile.read(size))
    if len(data) < size:
        raise BodyError(400, f"the body ended after {len(data)} of its {size} bytes")
    return data


class _Handler(BaseHTTPRequestHandler):
    collector: Sink
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        kind = PATHS.get(self.path.split("?")[0])
        try:
            body = read_body(self.rfile, self.headers)
        except BodyError as exc:
            self.close_connection = True  # the rest of the body is not read
            self._refuse(exc.code, str(exc))
            return
        if kind is None:
            path = shown_path(self.path)  # (a query string may hold a key)
            self._refuse(404, f"no such path {path!r}: post to /v1/traces or /v1/logs")
            return
        try:
            spans = self.collector.receive(
                body,
                self.headers.get("Content-Type") or "",
                self.headers.get("Content-Encoding") or "",
            )
        except TraceError as exc:
            self._refuse(400, str(exc))
            return
        except BodyError as exc:
            self.close_connection = exc.code == 503  # (the collector stops: it takes no more)
            self._refuse(exc.code, str(exc))
            return
        except Exception as exc:  # a crash of ours must not end the receiver: say it, refuse
            self._refuse(500, f"{type(exc).__name__}: {exc}")
            raise
        self._answer(200, "", spans)

    def _not_posted(self) -> None:
        self.close_connection = True  # (a body it may have sent is not read)
        self._refuse(405, f"{self.command}: post OTLP export requests (POST /v1/traces)")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _not_posted

    def _refuse(self, code: int, why: str) -> None:
        why = redact(why)  # (it may quote a header or a value the client sent)
        self.collector.refused += 1
        self.collector.log(
            f"collect: {self.client_address[0]} {shown_path(self.path)}: refused ({code}): {why}"
        )
        self._answer(code, why)

    def _answer(self, code: int, message: str, spans: int = 0) -> None:
        proto = "protobuf" in (self.headers.get("Content-Type") or "")
        if code == 200:
            payload = b"" if proto else b"{}"
        else:
            payload = json.dumps({"code": 3, "message": message}).encode()
        self.send_response(code)
        ctype = "application/x-protobuf" if proto and code == 200 else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the collector logs what matters


class Receiver(ThreadingHTTPServer):
    """The OTLP/HTTP receiver of a collector, on ``host:port`` (port 0: any free one)."""

    daemon_threads = True
    # connections the kernel holds until they are accepted (socketserver's default, 5,
    # reset the connections of a burst of exporters, and lost their spans)
    request_queue_size = 1024

    def __init__(self, host: str, port: int) -> None:
        """Bound, but answering nothing until :meth:`serve` is given the collector: a port that
        cannot be had leaves the store as it was."""
        handler = type("Handler", (_Handler,), {})
        try:
            super().__init__((host, port), handler)
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self.collector: Sink | None = None

    def serve(self, collector: Sink) -> threading.Thread:
        """Answer requests into ``collector``, in a thread of its own (returned, started)."""
        self.collector = self.RequestHandlerClass.collector = collector  # type: ignore[attr-defined]
        serving = threading.Thread(target=self.serve_forever, args=(0.1,), daemon=True)
        serving.start()
        return serving

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone before its answer is a line of the log; anything else, a traceback."""
        exc = sys.exc_info()[1]
        if self.collector is not None and isinstance(
            exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
        ):
            self.collector.log(f"collect: {client_address[0]}: the client left ({exc})")
            return
        super().handle_error(request, client_address)

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"
