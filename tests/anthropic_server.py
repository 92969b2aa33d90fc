"""A scripted Anthropic Messages server on 127.0.0.1, for the real ``anthropic`` client (and
LangChain's ChatAnthropic), as ``openai_server.py`` is for OpenAI's.

It plays an agent from a script: for each user input (the first user message's text), a list
of turns, each a list of tool calls ``(name, input)``; after the last turn it answers with
``answers[input]`` (or "Done."). The turn is the number of assistant messages already in the
request. A request with ``"stream": true`` is answered with the API's server-sent events
(``message_start``, a block's ``content_block_start``/``_delta``/``_stop`` each, then
``message_delta`` with the stop reason and ``message_stop``).

    with AnthropicServer({"What is 2 + 3?": [[("add_numbers", {"a": 3, "b": 2})]]}) as server:
        server.inject(Fault.cut(), input="What is 2 + 3?", turn=0, times=1)
        ...  # base_url=server.url; server.requests: the JSON bodies received

Fault kinds (each after a 200): ``Fault.at_token_limit`` (the answer's text cut half-way,
``stop_reason`` ``max_tokens``, streamed or not); for requests not streamed only,
``Fault.error_body`` (a body ``{"type": "error", "error": {...}}`` of this type,
``overloaded_error`` by default, instead of the message), ``Fault.body`` (a 200 whose body is
the JSON given, a gateway's); for requests streamed or not, ``Fault.json_body`` (a 200 whose
body is the JSON given, no events, as a gateway may answer a request for a stream); for
streams only, ``Fault.cut``
(the stream stops half-way through the first block's input JSON or text, before the stop
reason, and closes),
``Fault.error_event`` (an ``error`` event of this type, ``overloaded_error`` by default, after
the first block's delta, as the API sends one mid-stream).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Call = tuple[str, Mapping[str, Any]]
MODEL = "claude-sonnet-4-5-20250929"


@dataclass(frozen=True)
class Fault:
    """One way to answer a request badly; build with the class methods."""

    kind: str  # "cut" | "error_event" | "max_tokens" | "error_body" | "body" | "json_body"
    error_type: str = "overloaded_error"
    message: str = "Overloaded"  # (the body, as JSON: body)

    @classmethod
    def cut(cls) -> Fault:
        """A stream cut off half-way through its first block, before its stop reason."""
        return cls("cut")

    @classmethod
    def at_token_limit(cls) -> Fault:
        """The answer's text cut half-way, ``"stop_reason": "max_tokens"``."""
        return cls("max_tokens")

    @classmethod
    def error_body(cls, error_type: str = "overloaded_error", message: str = "Overloaded") -> Fault:
        """A 200 whose body is ``{"type": "error", "error": {"type": error_type, "message":
        message}}``, to a request not streamed."""
        return cls("error_body", error_type, message)

    @classmethod
    def body(cls, body: Mapping[str, Any]) -> Fault:
        """A 200 whose body is ``body`` instead of the message, to a request not streamed."""
        return cls("body", message=json.dumps(dict(body)))

    @classmethod
    def json_body(cls, body: Mapping[str, Any]) -> Fault:
        """A 200 whose body is ``body`` as JSON, to a request streamed or not (no events)."""
        return cls("json_body", message=json.dumps(dict(body)))

    @classmethod
    def error_event(cls, error_type: str = "overloaded_error") -> Fault:
        """An ``error`` event after the first block's delta."""
        return cls("error_event", error_type)


@dataclass
class _Rule:
    fault: Fault
    input: str | None
    turn: int | None
    times: int | None
    hits: int = 0


class AnthropicServer:
    """``POST {url}/v1/messages`` answered from a script (see the module docstring)."""

    def __init__(
        self,
        script: Mapping[str, Sequence[Sequence[Call]]],
        answers: Mapping[str, str] | None = None,
    ) -> None:
        self.script = dict(script)
        self.answers = dict(answers or {})
        self.requests: list[dict[str, Any]] = []
        self._rules: list[_Rule] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the client's ``base_url``."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def inject(
        self,
        fault: Fault,
        *,
        input: str | None = None,
        turn: int | None = None,
        times: int | None = None,
    ) -> None:
        """Answer with ``fault`` the requests of this input at this turn (``times``: only so
        many of them; a fault of streams leaves others whole). Rules are tried in the order
        they were added."""
        self._rules.append(_Rule(fault, input, turn, times))

    def __enter__(self) -> AnthropicServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with server._lock:
                    server.requests.append(body)
                    number = len(server.requests)
                    fault = server._fault(body)
                message = server.answer(body, number)
                if fault is not None and fault.kind == "max_tokens":
                    message["stop_reason"] = "max_tokens"
                    for block in message["content"]:
                        if block["type"] == "text":
                            block["text"] = block["text"][: len(block["text"]) // 2]
                    fault = None
                if fault is not None and fault.kind == "error_body" and not body.get("stream"):
                    error = {"type": fault.error_type, "message": fault.message}
                    message = {"type": "error", "error": error}
                if fault is not None and fault.kind == "body" and not body.get("stream"):
                    message = json.loads(fault.message)
                if fault is not None and fault.kind == "json_body":
                    message = json.loads(fault.message)
                if not body.get("stream") or (fault is not None and fault.kind == "json_body"):
                    payload = json.dumps(message).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # (HTTP/1.0: the stream ends when the connection closes)
                for event, data in _events(message, fault):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    def _fault(self, body: dict[str, Any]) -> Fault | None:
        text, turn = _input_and_turn(body)
        for rule in self._rules:
            if rule.input is not None and rule.input != text:
                continue
            if rule.turn is not None and rule.turn != turn:
                continue
            if rule.times is not None and rule.hits >= rule.times:
                continue
            rule.hits += 1
            return rule.fault
        return None

    def answer(self, body: dict[str, Any], number: int) -> dict[str, Any]:
        """The message for a request: the script's next turn of calls, or the answer."""
        text, turn = _input_and_turn(body)
        turns = self.script.get(text or "", [])
        if turn < len(turns):
            content = [
                {"type": "tool_use", "id": f"toolu_{number}_{k}", "name": name, "input": dict(args)}
                for k, (name, args) in enumerate(turns[turn])
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": self.answers.get(text or "", "Done.")}]
            stop = "end_turn"
        prompt = 20 + 10 * len(body.get("messages") or [])
        return {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 7},
        }


def _input_and_turn(body: dict[str, Any]) -> tuple[str | None, int]:
    """The first user message's text, and the number of assistant messages."""
    messages = body.get("messages") or []
    user = next((m for m in messages if m.get("role") == "user"), {})
    text = user.get("content")
    if isinstance(text, list):
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    return text, sum(1 for m in messages if m.get("role") == "assistant")


def _events(message: dict[str, Any], fault: Fault | None) -> list[tuple[str, dict[str, Any]]]:
    """A message as the API streams it; with ``fault``, up to where the fault breaks it."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for k, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty, text, kind = {**block, "input": {}}, json.dumps(block["input"]), "input_json"
        else:
            empty, text, kind = {**block, "text": ""}, block["text"], "text"
        half = len(text) // 2
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": k, "content_block": empty},
            )
        )
        for part in (text[:half], text[half:]):
            delta = {
                "type": f"{kind}_delta",
                ("partial_json" if kind == "input_json" else "text"): part,
            }
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": k, "delta": delta})
            )
            if fault is not None and fault.kind == "cut":
                return events
            if fault is not None and fault.kind == "error_event":
                error = {"type": fault.error_type, "message": "Overloaded"}
                return [*events, ("error", {"type": "error", "error": error})]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": k}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 7}})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
