"""A scripted Gemini ``generateContent`` server on 127.0.0.1, for testing the real client path.

The server plays an agent from a script: for each user input, a list of turns, each
turn a list of function calls ``(name, args)``; after the last turn it answers with
text. The turn is the number of ``model`` entries already in the request's
``contents``, so real tool execution can happen between requests (several calls in
one turn become several ``functionCall`` parts: parallel calls).

API (everything a test needs)::

    with GeminiServer({"What is 2 + 3?": [[("add_numbers", {"a": 3, "b": 2})]]}) as server:
        server.inject(Fault.rate_limit(retry_after=2), requests=[1])  # by request number
        server.inject(Fault.error(400), input="What is 2 + 3?")  # by input, every time
        server.inject(Fault.hang(5), input="What is 2 + 3?", times=1)  # its first request
        ...  # base_url=server.url; then inspect server.requests (RecordedRequest objects)

Fault kinds: ``Fault.rate_limit`` (429 + ``Retry-After`` + RetryInfo), ``Fault.error``
(any status with a Google-style error body; 500/503/400 ..., optional ``Retry-After``),
``Fault.echo_key`` (an error quoting the request's API key), ``Fault.bad_key`` (Google's answer
to a key that is not valid: 400 INVALID_ARGUMENT, reason API_KEY_INVALID),
``Fault.malformed`` (``"not_json"`` or ``"no_candidates"``), ``Fault.finish`` (a candidate
with no content and this ``finishReason``: ``SAFETY``, ``MALFORMED_FUNCTION_CALL``, ...),
``Fault.at_token_limit`` (the turn's text cut half-way, ``finishReason`` ``MAX_TOKENS``),
``Fault.hang`` (sleep, then answer normally), ``Fault.json_body`` (a 200 whose body is this
JSON, sent as JSON even to a request for a stream). Each :class:`RecordedRequest` has its arrival
time (``at``, monotonic seconds), so retry and back-off tests can measure the gaps between
attempts; :attr:`GeminiServer.max_in_flight` is the most requests it was answering at once.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Call = tuple[str, Mapping[str, Any]]
Turn = Sequence[Call]
# (input text, turn number, number of calls in the answer or 0 for text) -> (prompt, candidates)
UsageFn = Callable[[str, int, int], tuple[int, int]]

MODEL_VERSION = "gemini-2.5-flash"
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


# /{version}/models/{model}:{rpc}: the SDKs have sent v1beta and v1 as the version (google-genai
# moved to v1 in 3.6); the server answers both and the tests assert the model and method only
_METHOD_PATH = re.compile(r"^/v1[a-z0-9]*/models/(?P<model>[^/:?]+):(?P<rpc>\w+)(?:\?.*)?$")


def default_usage(text: str, turn: int, n_calls: int) -> tuple[int, int]:
    """Deterministic token counts: prompt ``100 + 10*turn``, candidates ``5 + n_calls``."""
    return 100 + 10 * turn, 5 + n_calls


@dataclass(frozen=True)
class Fault:
    """One way to answer a request badly; build with the class methods."""

    kind: str  # "status" | "not_json" | "finish" | "json_body" | ...: see the class methods
    status: int = 200
    message: str = ""
    retry_after: str | None = None
    seconds: float = 0.0
    details: tuple[dict[str, Any], ...] = ()
    encode: Callable[[str], str] | None = None  # how {api_key} is quoted in ``message``
    reason: str | None = None  # the candidate's finishReason (finish)
    body: Any = None  # the JSON answered (json_body)

    @classmethod
    def error(
        cls, status: int, message: str | None = None, retry_after: float | str | None = None
    ) -> Fault:
        """An HTTP error with Google's JSON error body (``{"error": {code, message, status}}``)."""
        if isinstance(retry_after, (int, float)):
            retry_after = f"{retry_after:g}"
        return cls(
            "status",
            status=status,
            message=message or f"scripted {status} error",
            retry_after=retry_after,
        )

    @classmethod
    def rate_limit(cls, retry_after: float | str | None = 1, message: str | None = None) -> Fault:
        """429 RESOURCE_EXHAUSTED with a ``Retry-After`` header (seconds) and a RetryInfo detail.

        ``retry_after=None`` sends neither; a string is sent as is (an HTTP date, say).
        """
        message = message or "Resource has been exhausted (e.g. check quota)."
        return cls.error(429, message, retry_after)

    @classmethod
    def echo_key(cls, status: int = 400, encode: Callable[[str], str] | None = None) -> Fault:
        """An error whose message quotes the API key the request carried, as a misbehaving
        endpoint or proxy might (``{api_key}`` in any error message is replaced by it), as
        ``encode`` gives it (``urllib.parse.quote``, say; by default as is)."""
        message = "API key {api_key} not valid. Please pass a valid API key."
        return replace(cls.error(status, message), encode=encode)

    @classmethod
    def bad_key(cls) -> Fault:
        """What Google answers to an API key that is not valid (a 400, not a 401)."""
        message = "API key not valid. Please pass a valid API key."
        info = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"},
        }
        localized = {
            "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
            "locale": "en-US",
            "message": message,
        }
        return cls("status", status=400, message=message, details=(info, localized))

    @classmethod
    def malformed(cls, how: str = "not_json") -> Fault:
        """A 200 whose body is not JSON (``"not_json"``) or has no ``candidates``."""
        if how not in ("not_json", "no_candidates"):
            raise ValueError(f"malformed: expected not_json or no_candidates, got {how!r}")
        return cls(how)

    @classmethod
    def finish(cls, reason: str, message: str = "") -> Fault:
        """A 200 whose candidate has no content, only ``finishReason`` (and ``finishMessage``),
        as Gemini answers when it withholds a reply (``SAFETY``) or cannot parse the
        function call the model wrote (``MALFORMED_FUNCTION_CALL``)."""
        return cls("finish", message=message, reason=reason)

    @classmethod
    def at_token_limit(cls) -> Fault:
        """The turn's answer with its text cut half-way and ``finishReason`` ``MAX_TOKENS``."""
        return cls("max_tokens", reason="MAX_TOKENS")

    @classmethod
    def json_body(cls, body: Any) -> Fault:
        """A 200 whose body is ``body`` as JSON (``application/json``), not events, even
        answering a request for a stream: as a gateway answers with an error in JSON."""
        return cls("json_body", body=body)

    @classmethod
    def hang(cls, seconds: float = 30.0) -> Fault:
        """Sleep ``seconds`` (cut short when the server stops), then answer normally."""
        return cls("hang", seconds=seconds)


@dataclass
class _Rule:
    fault: Fault
    requests: frozenset[int] | None
    input: str | None
    times: int | None
    hits: int = 0

    def matches(self, number: int, text: str | None) -> bool:
        if self.requests is not None and number not in self.requests:
            return False
        if self.input is not None and text != self.input:
            return False
        return self.times is None or self.hits < self.times


@dataclass
class RecordedRequest:
    """One request as the server saw it, with what it answered."""

    number: int  # 1-based, in arrival order
    at: float  # time.monotonic() on arrival
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or the raw text when it is not JSON
    input: str | None = None  # the first user text in contents
    turn: int | None = None  # model entries already in contents
    status: int | None = None  # None: a hang cut short by stop()
    response: Any = None  # the JSON sent back (None for faults without a JSON body)
    fault: Fault | None = None

    @property
    def model(self) -> str | None:
        """The model named in the path, whatever the API version before it (``v1beta``, ``v1``)."""
        match = _METHOD_PATH.match(self.path)
        return match.group("model") if match else None

    @property
    def rpc(self) -> str | None:
        """The method named in the path: ``generateContent``, ``streamGenerateContent``, ..."""
        match = _METHOD_PATH.match(self.path)
        return match.group("rpc") if match else None


@dataclass
class GeminiServer:
    """A threaded loopback server speaking ``generateContent``; use as a context manager.

    ``script`` maps each user input to its turns; ``answers`` optionally maps an input to its
    final text (default ``"Done."``); ``usage`` gives each response's token counts.
    An input that is not in the script gets a 400 and is listed in :attr:`unknown_inputs`.
    """

    script: Mapping[str, Sequence[Turn]] = field(default_factory=dict)
    answers: Mapping[str, str] = field(default_factory=dict)
    usage: UsageFn = default_usage
    model_version: str = MODEL_VERSION
    requests: list[RecordedRequest] = field(default_factory=list, init=False)
    unknown_inputs: list[str] = field(default_factory=list, init=False)
    max_in_flight: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._rules: list[_Rule] = []
        self._in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> GeminiServer:
        handler = type("Handler", (_Handler,), {"app": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # ends hangs at once
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> GeminiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the client's ``base_url``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    # -- faults ------------------------------------------------------------------------------

    def inject(
        self,
        fault: Fault,
        *,
        requests: Iterable[int] | None = None,
        input: str | None = None,
        times: int | None = None,
    ) -> None:
        """Answer with ``fault`` on these 1-based request numbers and/or for this input.

        ``times`` caps how often the rule fires (``input="x", times=1``: only the first
        request for ``x``). Rules are tried in the order they were added; the first wins.
        """
        self._rules.append(
            _Rule(fault, None if requests is None else frozenset(requests), input, times)
        )

    # -- inspection --------------------------------------------------------------------------

    def requests_for(self, text: str) -> list[RecordedRequest]:
        """Every request whose first user text is ``text``, in arrival order."""
        return [r for r in self.requests if r.input == text]

    @property
    def responses(self) -> list[Any]:
        """The JSON bodies sent back, in request order (None where there was none)."""
        return [r.response for r in self.requests]

    # -- the agent ---------------------------------------------------------------------------

    def _answer(self, text: str, turn: int) -> dict[str, Any]:
        turns = self.script[text]
        if turn < len(turns):
            calls = list(turns[turn])
            parts: list[dict[str, Any]] = [
                {"functionCall": {"name": name, "args": dict(args)}} for name, args in calls
            ]
        else:
            calls = []
            parts = [{"text": self.answers.get(text, "Done.")}]
        prompt, candidates = self.usage(text, turn, len(calls))
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt,
                "candidatesTokenCount": candidates,
                "totalTokenCount": prompt + candidates,
            },
            "modelVersion": self.model_version,
        }

    def _handle(self, handler: _Handler) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            self._answer_request(handler)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer_request(self, handler: _Handler) -> None:
        arrived = time.monotonic()
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw
        text, turn = _input_and_turn(body)
        with self._lock:
            record = RecordedRequest(
                number=len(self.requests) + 1,
                at=arrived,
                method=handler.command,
                path=handler.path,
                headers={k.lower(): v for k, v in handler.headers.items()},
                body=body,
                input=text,
                turn=turn,
            )
            self.requests.append(record)
            rule = next((r for r in self._rules if r.matches(record.number, text)), None)
            if rule is not None:
                rule.hits += 1
                record.fault = rule.fault
        fault = record.fault
        if fault is not None and fault.kind == "hang":
            if self._stop.wait(fault.seconds):
                return
            fault = None
        if fault is not None and fault.kind == "max_tokens" and text in self.script:
            answer = self._answer(text, turn or 0)
            candidate = answer["candidates"][0]
            candidate["finishReason"] = "MAX_TOKENS"
            for part in candidate["content"]["parts"]:
                if "text" in part:
                    part["text"] = part["text"][: len(part["text"]) // 2]
            self._send_json(handler, record, 200, answer)
            return
        if fault is not None:
            self._send_fault(handler, record, fault)
            return
        if record.rpc not in ("generateContent", "streamGenerateContent"):
            self._send_error(handler, record, 404, f"no such method: {handler.path}")
            return
        if text is None or text not in self.script:
            with self._lock:
                self.unknown_inputs.append(str(text))
            self._send_error(handler, record, 400, f"gemini_server: no script for input {text!r}")
            return
        self._send_json(handler, record, 200, self._answer(text, turn or 0))

    def _send_fault(self, handler: _Handler, record: RecordedRequest, fault: Fault) -> None:
        if fault.kind == "json_body":
            record.status, record.response = 200, fault.body
            _write(handler, 200, json.dumps(fault.body).encode(), "application/json")
        elif fault.kind == "not_json":
            record.status = 200
            _write(handler, 200, b"<html>upstream proxy error</html>", "text/html")
        elif fault.kind == "no_candidates":
            usage = {"promptTokenCount": 1, "candidatesTokenCount": 0, "totalTokenCount": 1}
            self._send_json(handler, record, 200, {"usageMetadata": usage})
        elif fault.kind == "finish":
            candidate = {"finishReason": fault.reason, "index": 0}
            if fault.message:
                candidate["finishMessage"] = fault.message
            usage = {"promptTokenCount": 1, "totalTokenCount": 1}
            body = {"candidates": [candidate], "usageMetadata": usage}
            self._send_json(handler, record, 200, {**body, "modelVersion": self.model_version})
        else:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            key = record.headers.get("x-goog-api-key", "")
            message = fault.message.replace("{api_key}", (fault.encode or str)(key))
            self._send_error(
                handler, record, fault.status, message, fault.retry_after, headers, fault.details
            )

    def _send_error(
        self,
        handler: _Handler,
        record: RecordedRequest,
        status: int,
        message: str,
        retry_after: str | None = None,
        headers: Mapping[str, str] | None = None,
        details: Sequence[dict[str, Any]] = (),
    ) -> None:
        error: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
        }
        if details:
            error["details"] = list(details)
        if retry_after is not None and retry_after.replace(".", "", 1).isdigit():
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{retry_after}s",
                }
            ]
        self._send_json(handler, record, status, {"error": error}, headers)

    def _send_json(
        self,
        handler: _Handler,
        record: RecordedRequest,
        status: int,
        obj: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        record.status = status
        record.response = obj
        payload = json.dumps(obj).encode()
        if record.rpc == "streamGenerateContent" and status == 200:
            _write(handler, status, b"data: " + payload + b"\r\n\r\n", "text/event-stream", headers)
        else:
            _write(handler, status, payload, "application/json; charset=UTF-8", headers)


class _Handler(BaseHTTPRequestHandler):
    app: GeminiServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        # BrokenPipe/ConnectionReset: the client gave up (its timeout) before the answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.app._handle(self)

    do_GET = do_POST

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass


def _write(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: bytes,
    content_type: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(payload)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(payload)
    handler.wfile.flush()


def _input_and_turn(body: Any) -> tuple[str | None, int | None]:
    """The first user text in ``contents`` and the number of ``model`` entries."""
    if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
        return None, None
    text = None
    turn = 0
    for content in body["contents"]:
        if not isinstance(content, dict):
            continue
        if content.get("role") == "model":
            turn += 1
        elif text is None and content.get("role") == "user":
            for part in content.get("parts") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    text = part["text"]
                    break
    return text, turn


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass (for threaded checks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
