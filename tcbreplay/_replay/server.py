"""The HTTP/1.1 server ``serve`` runs: asyncio's (on uvloop, the event loop recordings run on),
one thread, with a reader of requests of its own.

It reads what the APIs' clients send: a request line, headers, and a body of the length
its ``Content-Length`` gives (a chunked body is refused with 411), requests one after another
on a kept-alive connection (HTTP/1.0's closed unless asked otherwise). Anything it cannot
read gets a 4xx status and one line of JSON, and the connection is closed when what follows
cannot be told apart. Requests are answered one at a time, as they come, by the service's
``handle(wire, body)``; a failure there is a 500 with one line of JSON (and on stderr the
error's one line when the store is at fault, its traceback when tcbreplay is), never the
server's end.

Why not ``http.server``: its thread per connection and header parser answered about 5,000
trivial requests a second on this project's 2 shared cores where this answered 40,000 (at
a load average of 14), and ``serve`` is to answer thousands of real ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tcbreplay._replay.routes import (
    SERVED,
    WIRES,
    base_url_hint,
    cancel_of,
    doubled_version,
    kept,
    route,
    shape,
)
from tcbreplay._secrets import redact, shown_path
from tcbreplay.errors import InputError, TcbReplayError

# the largest request body read (a conversation of a long agent run fits many times)
MAX_BODY = 64 * 2**20
# the largest request line and headers
MAX_HEAD = 64 * 2**10
# seconds a connection may go without sending a byte: one in the middle of a request gets
# 408, an idle kept-alive one is closed (connections that sent half a request and waited
# were held for ever, and enough of them took every file descriptor)
IDLE_SECONDS = 30.0
# connections held at once; one more is answered 503 and closed
MAX_CONNECTIONS = 4096
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 502: "Bad Gateway", 503: "Service Unavailable",
            409: "Conflict", 411: "Length Required", 413: "Content Too Large",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented", 505: "HTTP Version Not Supported"}  # fmt: skip


@dataclass
class Reply:
    """An HTTP answer: status, content type and body."""

    status: int
    body: bytes
    content_type: str = "application/json"
    allow: str | None = None  # a 405's Allow header: the methods the path takes


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


class _Refused(Exception):
    """A request that cannot be read; ``close``: what follows it cannot be read either."""

    def __init__(self, status: int, message: str, close: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.close = close


def _parse(buffer: bytearray) -> tuple[int, _Request] | None:
    """The first request in ``buffer`` and the bytes it takes, None while it is incomplete;
    :class:`_Refused` for one that cannot be read."""
    end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
    if end < 0:
        if buffer.find(b"\n\n", 0, MAX_HEAD + 2) >= 0:  # (never inside a head of CRLF lines)
            raise _Refused(400, "request and header lines end in CRLF (\\r\\n), not LF alone")
        if len(buffer) > MAX_HEAD:
            raise _Refused(431, f"a request line and headers of more than {MAX_HEAD} bytes")
        return None
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    words = lines[0].split(" ")
    if len(words) != 3 or not words[2].startswith("HTTP/") or not words[1].startswith("/"):
        raise _Refused(400, f"not an HTTP request line: {_shown_line(lines[0])!r}")
    method, target, version = words
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise _Refused(505, f"{version}: HTTP/1.1 only")
    headers: dict[str, str] = {}
    for number, line in enumerate(lines[1:], 1):
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            # (never the line itself: a header's value may be a key, as Authorization's)
            named = f" {redact(name[:40])!r}" if colon and name.strip() else ""
            raise _Refused(400, f"header line {number}{named}: not a header line (Name: value, "
                                "no space before the colon; its value not shown)")  # fmt: skip
        name, value = name.lower(), value.strip()
        if name in headers and name == "content-length" and headers[name] != value:
            raise _Refused(400, "two Content-Length headers that differ")
        headers[name] = value
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    if "transfer-encoding" in headers:
        raise _Refused(411, "a chunked request body: a body with a Content-Length is required")
    length = headers.get("content-length")
    if length is None:
        if method == "POST":
            raise _Refused(411, "a request body with a Content-Length is required")
        return end + 4, _Request(method, target, headers, b"", keep_alive)
    if not (length.isascii() and length.isdigit()):  # (str.isdigit takes "²" too)
        raise _Refused(400, f"Content-Length {length[:40]!r}: not a length")
    digits = length.lstrip("0") or "0"  # (int() refuses a text of over 4,300 digits)
    size = int(digits) if len(digits) <= len(str(MAX_BODY)) else MAX_BODY + 1
    if size > MAX_BODY:  # (the length as given, up to 40 digits: not MAX_BODY + 1)
        raise _Refused(413, f"a request body of {digits[:40]} bytes: at most {MAX_BODY}")
    if len(buffer) < end + 4 + size:
        return None
    body = bytes(buffer[end + 4 : end + 4 + size])
    return end + 4 + size, _Request(method, target, headers, body, keep_alive)


def _shown_line(line: str) -> str:
    """A request line as a reply says it: cut to 80 characters, each query string as
    ``?...`` (a client may put its key there) and secrets' values redacted."""
    words = [word.split("?", 1)[0] + "?..." if "?" in word else word for word in line.split(" ")]
    return redact(" ".join(words))[:80]


def _wire_asked(buffer: bytearray) -> str:
    """The wire whose path a request's line names (its errors in that API's shape), else
    OpenAI's."""
    line = bytes(buffer[: buffer.find(b"\r\n") if b"\r\n" in buffer else 2048])
    words = line.decode("latin-1").split(" ")
    path = words[1].split("?", 1)[0] if len(words) > 1 else ""
    return shape(path)


class _Connection(asyncio.Protocol):
    """One client's connection: its requests read and answered in turn."""

    def __init__(self, server: ReplayServer) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: Any = None
        self.closing = False
        self.continued = False  # "100 Continue" sent for the request being read
        self._idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.server.connections += 1
        if self.server.connections > MAX_CONNECTIONS:
            message = f"more than {MAX_CONNECTIONS} connections at once: try again"
            self._send(Reply(503, WIRES["openai"].error(503, message)), close=True)
            return
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._wait()

    def _wait(self) -> None:
        """(Again) the clock of a connection that sends nothing (see IDLE_SECONDS)."""
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(IDLE_SECONDS, self._timed_out)

    def _timed_out(self) -> None:
        if self.closing:
            return
        if self.buffer:  # half a request: said, as HTTP says a request that took too long
            message = f"no byte of the request came for {IDLE_SECONDS:g} s"
            self._send(Reply(408, WIRES[_wire_asked(self.buffer)].error(408, message)),
                       close=True)  # fmt: skip
        else:
            self.closing = True
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._wait()
        self.buffer += data
        try:
            self._answer_all()
        except Exception:  # a crash in tcbreplay: said, shown, and the server goes on
            sys.stderr.write(redact(traceback.format_exc()))
            self._send(Reply(500, WIRES["openai"].error(500, "the server failed: see its log")),
                       close=True)  # fmt: skip

    def _answer_all(self) -> None:
        while self.buffer and not self.closing:
            try:
                found = _parse(self.buffer)
            except _Refused as refused:  # (in the error shape of the path asked, if any)
                wire = WIRES[_wire_asked(self.buffer)]
                self._send(Reply(refused.status, wire.error(refused.status, str(refused))),
                           close=refused.close)  # fmt: skip
                return
            if found is None:
                self._continue()
                return
            taken, request = found
            del self.buffer[:taken]
            self.continued = False
            self._send(self.server.answer(request), close=not request.keep_alive)
            if self.server.verbose:
                sys.stderr.write(f"{request.method} {shown_path(request.path)}\n")

    def _continue(self) -> None:
        """Tell a client that waits before sending its body (``Expect: 100-continue``) to go on."""
        if self.continued or b"\r\n\r\n" not in self.buffer:
            return
        head = bytes(self.buffer[: self.buffer.find(b"\r\n\r\n")]).lower()
        if b"\r\nexpect: 100-continue" in head:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.continued = True

    def _send(self, reply: Reply, close: bool = False) -> None:
        stream = reply.content_type == "text/event-stream"
        body = reply.body if stream else reply.body + b"\n"
        head = (
            f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, '')}\r\n"
            f"Server: tcbreplay-serve\r\nContent-Type: {reply.content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            + ("Cache-Control: no-cache\r\n" if stream else "")
            # the OpenAI and Anthropic SDKs retry a 409 (and a 5xx) unless told not to: asked
            # again, a recording answers the same, and each retry was logged as a trial
            + ("X-Should-Retry: false\r\n" if reply.status >= 400 else "")
            + ("Connection: close\r\n" if close else "")
            + (f"Allow: {reply.allow}\r\n" if reply.allow else "")
            + "\r\n"
        )
        self.transport.write(head.encode("latin-1") + body)
        if close:
            self.closing = True
            self.transport.close()
        elif self._idle is not None:  # (idle from its last answer on, not its last byte)
            self._wait()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.connections -= 1
        if self._idle is not None:
            self._idle.cancel()


class ReplayServer:
    """An HTTP server of a service's ``handle(wire, body) -> Reply`` (see the module), bound
    at once (``port`` 0 takes a free one: :attr:`url` says which); it serves in the
    foreground (:meth:`serve_forever`, until :meth:`stop` or Ctrl-C) or in a thread of its
    own (:meth:`start`, or as a context manager). Closing it closes the service's log."""

    def __init__(self, service: Any, host: str = "127.0.0.1", port: int = 0,
                 verbose: bool = False) -> None:  # fmt: skip
        self.service = service
        self.verbose = verbose
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._socket.bind((host, port))
            self._socket.listen(1024)
            self._socket.setblocking(False)
        except OSError as exc:
            self._socket.close()
            raise InputError(
                f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})",
                hint="--port 0 takes a free port" if exc.errno == errno.EADDRINUSE else None,
            ) from None
        except BaseException:
            self._socket.close()
            raise
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._ready = threading.Event()
        self._stop_asked = False  # a stop asked before the loop runs: serving ends at once
        self._thread: threading.Thread | None = None
        self.connections = 0  # held now (the loop's thread alone counts them)

    @property
    def host(self) -> str:
        return str(self._socket.getsockname()[0])

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}"

    def answer(self, request: _Request) -> Reply:
        """The reply to one request read off a connection."""
        path = request.path.split("?", 1)[0].rstrip("/")
        wire = route(path)
        if request.method == "POST" and wire is not None:
            try:
                return self.service.handle(wire, request.body, request.path)
            except TcbReplayError as exc:  # the store unreadable: one line, as a command says
                message = redact(" ".join(str(exc).split()))
                print(f"Error: {message}", file=sys.stderr, flush=True)
                return Reply(500, WIRES[wire].error(500, message))
            except Exception as exc:  # a crash in tcbreplay: said, and the server goes on
                sys.stderr.write(redact(traceback.format_exc()))
                message = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))
                return Reply(500, WIRES[wire].error(500, message))
        if request.method == "GET" and path in ("", "/v1"):
            return Reply(200, self.service.info())
        asked = kept(path)
        if request.method in ("GET", "DELETE") and asked is not None:
            return self.service.retrieve(*asked, request.path, request.method)
        cancel = cancel_of(path)
        if request.method == "POST" and cancel is not None:
            return self.service.cancel(*cancel)
        status = 405 if wire is not None or path in ("", "/v1") or asked or cancel else 404
        message = f"{request.method} {shown_path(request.path)[:200]}: not served ({SERVED})"
        meant = doubled_version(path) if status == 404 else None
        if meant is not None:  # (answered in the shape its client reads)
            message += base_url_hint(meant)
        allow = (
            None
            if status == 404
            else ("POST" if wire is not None or cancel else "GET, DELETE" if asked else "GET")
        )
        return Reply(status, WIRES[meant or shape(path)].error(status, message), allow=allow)

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` (or Ctrl-C, which raises KeyboardInterrupt here)."""
        from tcbreplay._record.loop import lean_gc, run_loop

        with lean_gc():
            run_loop(self._serve())

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopped = loop.create_future()
        server = await loop.create_server(lambda: _Connection(self), sock=self._socket)
        self._ready.set()
        if self._stop_asked:
            self._stopped.set_result(None)
        try:
            await self._stopped
        finally:
            server.close()

    def stop(self) -> None:
        """Stop serving (from any thread, or a signal handler), or not start."""
        self._stop_asked = True
        loop, stopped = self._loop, self._stopped
        if loop is None or stopped is None or loop.is_closed():
            return

        def done() -> None:
            if not stopped.done():
                stopped.set_result(None)

        with contextlib.suppress(RuntimeError):  # closed meanwhile: stopped already
            loop.call_soon_threadsafe(done)

    def start(self) -> ReplayServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        self._ready.wait(30)
        return self

    def close(self) -> Any:
        """Stop serving, close the socket and the service's log (its summary, or None)."""
        self.stop()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        self._socket.close()
        close: Callable[[], Any] | None = getattr(self.service, "close", None)
        return None if close is None else close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
