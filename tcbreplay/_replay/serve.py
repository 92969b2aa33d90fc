"""``serve``: a recorded run answering over HTTP, as OpenAI's and Anthropic's APIs, so that
agents outside LangChain (an SDK in a loop, any framework with a base URL) replay too.

Each request is read in its API's form (:mod:`tcbreplay._replay.wire`), made canonical and
fingerprinted as a replay's are (:mod:`tcbreplay._replay.fingerprint`), and answered with
the recorded turn of that fingerprint. A request that matches none gets HTTP 409 naming the
nearest recorded request (its sample, trial and turn) and the first difference from it.

Which conversation is which: HTTP requests carry no sample or trial, and several recorded
turns may share a fingerprint (every trial's first turn, samples of one input). A request
that carries an answer this server gave goes on in the sample and trial that answer came
from (its conversation is found by the messages up to that answer); a conversation's first
request, or one this server never answered before, takes the recorded turns of its
fingerprint in turn (the first such conversation trial 0, the next trial 1, and so on).

Sampling settings: a request's count only where the recording has that setting (a request
that sets another temperature than the recorded one diverges on ``params``); those it has
not (Anthropic's required ``max_tokens`` against a recording made without it) are left out,
as are all of a recording whose model takes none (sim) or whose settings are unknown
(imports).

The server is the standard library's threaded HTTP/1.1 server (keep-alive, one thread per
connection, requests answered one at a time under a lock: the work is Python's and holds
the GIL anyway). A streamed answer is sent whole, as events, with its length.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tcbreplay._inputs import limits
from tcbreplay._replay.divergence import Divergence, message_index
from tcbreplay._replay.fingerprint import (
    Request,
    assistant_turns,
    canonical_json,
    canonical_messages,
    canonical_request,
    canonical_tools,
    fingerprint,
    sha256_text,
)
from tcbreplay._replay.recording import Key, RecordedRun, Turn
from tcbreplay._replay.wire import ROUTES, WIRES, Answer, Wire, WireError, WireRequest
from tcbreplay._store.schema import utcnow

# the largest request body read (a conversation of a long agent run fits many times)
MAX_BODY = 64 * 2**20
# conversations remembered, to tell which sample and trial a request goes on (the oldest
# are forgotten first)
CONVERSATIONS = 100_000


@dataclass
class Conversation:
    """A conversation this server answers: its recorded sample and trial, the turns served
    (turn, position of the recorded message), and where it diverged."""

    key: Key | None
    served: list[tuple[int, int]] = field(default_factory=list)
    divergence: Divergence | None = None
    thread: str | None = None  # the hash of its messages up to its last answer
    started_at: str = field(default_factory=lambda: utcnow().isoformat())
    log_slot: tuple[str, int] | None = None  # its sample and trial in the log run


@dataclass
class Reply:
    """An HTTP answer: status, content type and body."""

    status: int
    body: bytes
    content_type: str = "application/json"


class ReplayService:
    """Answers requests from a recorded run (see the module); ``log``, when given, is told
    of every request answered and every divergence
    (:class:`~tcbreplay._replay.serve_log.ServeLog`)."""

    def __init__(self, recording: RecordedRun, log: Any = None) -> None:
        self.recording = recording
        self.log = log
        recording.index()  # every turn's fingerprint, before the first request
        self._lock = threading.Lock()
        self._threads: OrderedDict[str, Conversation] = OrderedDict()
        self._started: dict[str, int] = {}  # fingerprint -> conversations begun with it
        self.served = 0
        self.diverged = 0

    def handle(self, wire_name: str, body: bytes) -> Reply:
        """The reply to a request body sent to ``wire_name``'s path."""
        wire = WIRES[wire_name]
        try:
            parsed = _body(body)
            request = wire.read(parsed)
        except WireError as exc:
            return Reply(exc.status, wire.error(exc.status, _one_line(str(exc)), exc.kind))
        canonical = self._canonical(request)
        with self._lock:
            return self._answer(wire, request, canonical)

    def _canonical(self, request: WireRequest) -> Request:
        recording = self.recording
        params: dict[str, Any] = {}
        if recording.params_known:
            given = {k: v for k, v in request.params.items() if k in recording.params}
            params = {**recording.params, **given}
        return canonical_request(request.messages, canonical_tools(request.tools), params)

    def _answer(self, wire: Wire, request: WireRequest, canonical: Request) -> Reply:
        items = canonical["messages"]
        turn = assistant_turns(items)
        conversation = self._conversation(canonical) if turn else None
        print_ = fingerprint(canonical)
        hit = self._match(print_, conversation)
        if conversation is None:
            conversation = Conversation(hit[0] if hit else None)
        if hit is None:
            return self._diverged(wire, request, canonical, conversation, turn)
        key, recorded = hit
        if conversation.key != key:  # it went on in another sample: served from there on
            conversation.served = []
        conversation.key = key
        conversation.divergence = None
        conversation.served = [s for s in conversation.served if s[0] < turn]
        conversation.served.append((turn, recorded.position))
        message = self.recording.sample(key).message(recorded.position)
        self._remember(conversation, canonical, message)
        self.served += 1
        if self.log is not None:
            self.log.served(conversation, request.messages, message)
        answer = Answer.of(message, turn)
        if request.stream:
            return Reply(200, wire.stream(answer, request), "text/event-stream")
        return Reply(200, wire.answer(answer, request))

    def _match(self, print_: str, conversation: Conversation | None) -> tuple[Key, Turn] | None:
        """The recorded turn that answers a request of this fingerprint (see the module)."""
        found = self.recording.matches(print_)
        if not found:
            return None
        if conversation is not None:
            mine = next((hit for hit in found if hit[0] == conversation.key), None)
            if mine is not None:
                return mine
        if len(found) == 1:
            return found[0]
        n = self._started.get(print_, 0)
        self._started[print_] = n + 1
        return found[n % len(found)]

    def _conversation(self, canonical: Request) -> Conversation | None:
        """The conversation a request goes on, found by its messages up to its last answer."""
        items = canonical["messages"]
        last = max(k for k, item in enumerate(items) if item["role"] == "assistant")
        return self._threads.get(_thread(canonical["system"], items[: last + 1]))

    def _remember(self, conversation: Conversation, canonical: Request, message: Any) -> None:
        _, answer, _ = canonical_messages([message])
        thread = _thread(canonical["system"], [*canonical["messages"], *answer])
        if conversation.thread is not None:
            self._threads.pop(conversation.thread, None)
        conversation.thread = thread
        self._threads[thread] = conversation
        if len(self._threads) > CONVERSATIONS:
            self._threads.popitem(last=False)

    def _diverged(
        self, wire: Wire, request: WireRequest, canonical: Request, conversation: Conversation,
        turn: int,
    ) -> Reply:  # fmt: skip
        items = canonical["messages"]
        where, divergence = self.recording.nearest(canonical, conversation.key,
                                                   _tool_output(items))  # fmt: skip
        if conversation.key is None and where is not None:
            conversation.key = where[0]
        conversation.divergence = divergence
        self.diverged += 1
        if self.log is not None:
            self.log.diverged(conversation, request.messages)
        nearest = None
        if where is not None:
            (sample_id, trial), number = where
            nearest = {"sample_id": sample_id, "trial": trial, "turn": number}
        message = f"no recorded turn answers this request: {divergence.line()}"
        if nearest is not None:
            message += f" (nearest: sample {nearest['sample_id']}, trial {nearest['trial']}, "
            message += f"turn {nearest['turn']})"
        body = wire.error(409, _one_line(message), "divergence", nearest=nearest,
                          divergence=divergence.to_dict())  # fmt: skip
        return Reply(409, body)


def _thread(system: str, items: list[Any]) -> str:
    return sha256_text(canonical_json([system, items]))


def _tool_output(items: list[dict[str, Any]]) -> Callable[[str], str | None]:
    """Names a difference inside a tool message's content ``tool_output``: the client's
    tool answered otherwise than the recorded one."""

    def name(path: str) -> str | None:
        i = message_index(path)
        if i is None or i >= len(items) or items[i].get("role") != "tool":
            return None
        return "tool_output" if path.startswith(f"messages[{i}].content") else None

    return name


def _body(body: bytes) -> dict[str, Any]:
    try:
        value = limits.loads(body)
    except (ValueError, limits.LimitError) as exc:  # JSONDecodeError is a ValueError
        raise WireError(f"the request body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise WireError("the request body must be a JSON object")
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a reply is one write: nothing to wait for
    server_version = "tcbreplay-serve"
    server: _Server

    def do_POST(self) -> None:
        wire = ROUTES.get(self.path.split("?", 1)[0].rstrip("/"))
        if wire is None:
            self._error(404, f"no such path: {self.path} (POST /v1/chat/completions or "
                        "/v1/messages)")  # fmt: skip
            return
        body = self._body(WIRES[wire])
        if body is None:
            return
        try:
            reply = self.server.service.handle(wire, body)
        except Exception as exc:  # a crash in tcbreplay: said, shown, and the server goes on
            traceback.print_exc(file=sys.stderr)
            reply = Reply(500, WIRES[wire].error(500, _one_line(f"{type(exc).__name__}: {exc}")))
        self._send(reply)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("", "/v1"):
            service = self.server.service
            info = {"run_id": service.recording.run_id, "samples": len(service.recording.samples),
                    "served": service.served, "diverged": service.diverged,
                    "endpoints": sorted(ROUTES)}  # fmt: skip
            self._send(Reply(200, json.dumps(info).encode()))
        else:
            self._error(404 if path not in ROUTES else 405, f"GET {self.path}: not served "
                        "(POST /v1/chat/completions or /v1/messages)")  # fmt: skip

    def _body(self, wire: Wire) -> bytes | None:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None:
            self._error(411, "a request body with a Content-Length is required", wire)
            return None
        try:
            size = int(length)
            if size < 0:
                raise ValueError
        except ValueError:
            self._error(400, f"Content-Length {length!r}: not a length", wire)
            return None
        if size > MAX_BODY:
            self._error(413, f"a request body of {size} bytes: at most {MAX_BODY}", wire)
            return None
        body = self.rfile.read(size)
        if len(body) < size:
            self.close_connection = True
            return None
        return body

    def _error(self, status: int, message: str, wire: Wire | None = None) -> None:
        self._send(Reply(status, (wire or WIRES["openai"]).error(status, message)))

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a bad request line, headers too long) as JSON too."""
        self.close_connection = True
        self._send(Reply(code, WIRES["openai"].error(code, _one_line(message or self.responses.get(
            code, ("error",))[0]))))  # fmt: skip

    def _send(self, reply: Reply) -> None:
        body = reply.body + (b"" if reply.content_type == "text/event-stream" else b"\n")
        head = (
            f"{self.protocol_version} {reply.status} {self.responses.get(reply.status, ('',))[0]}"
            f"\r\nServer: {self.server_version}\r\nContent-Type: {reply.content_type}"
            f"\r\nContent-Length: {len(body)}\r\n"
        )
        if reply.content_type == "text/event-stream":
            head += "Cache-Control: no-cache\r\n"
        if self.close_connection:
            head += "Connection: close\r\n"
        self.wfile.write(head.encode("latin-1") + b"\r\n" + body)
        self.wfile.flush()
        self.log_request(reply.status)

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.command} {self.path} {code}\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    service: ReplayService
    verbose: bool = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client gone mid-reply is no error of the server's
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ReplayServer:
    """An HTTP server of a recorded run (see the module), in a thread of its own or in the
    foreground (:meth:`serve_forever`). ``port`` 0 takes a free one (:attr:`url` says
    which)."""

    def __init__(
        self, service: ReplayService, host: str = "127.0.0.1", port: int = 0,
        verbose: bool = False,
    ) -> None:  # fmt: skip
        self.service = service
        self._server = _Server((host, port), _Handler)
        self._server.service = service
        self._server.verbose = verbose
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> ReplayServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> Any:
        """Stop serving, close the socket, and close the log (its summary, or None)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        log, self.service.log = self.service.log, None
        return None if log is None else log.close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_run(
    store: Any, run_id: str, *, host: str = "127.0.0.1", port: int = 0,
    log_run: str | None = None, verbose: bool = False,
) -> ReplayServer:  # fmt: skip
    """A server of run ``run_id`` of ``store`` (a Store or its path), not started yet: use it
    as a context manager (it serves in a thread), or call :meth:`ReplayServer.serve_forever`.
    ``log_run``: the run it logs to (:mod:`tcbreplay._replay.serve_log`). Loopback only
    unless ``host`` says otherwise."""
    from tcbreplay._replay.serve_log import ServeLog
    from tcbreplay._store.runs import Store

    store = store if isinstance(store, Store) else Store(store)
    parent = store.open_run(run_id)
    recording = RecordedRun.load(parent)
    log = None if log_run is None else ServeLog.open(store, parent, recording, log_run)
    try:
        service = ReplayService(recording, log)
        return ReplayServer(service, host, port, verbose)
    except BaseException:
        if log is not None:
            log.close()
        raise
