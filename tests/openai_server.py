"""A scripted OpenAI Chat Completions server on 127.0.0.1, for the real ``openai`` client (and
anything that speaks its API: LangChain's ChatOpenAI, the Vercel AI SDK's OpenAI provider).

It plays an agent from a script, as ``gemini_server.py`` does: for each user input (the
first user message's text), a list of turns, each a list of tool calls ``(name, args)``;
after the last turn it answers with ``answer`` (or "Done."). The turn is the number of
assistant messages already in the request, so real tool execution happens between requests
(several calls in one turn are parallel calls). Call ids are ``call_<input#>_<turn>_<k>``.
A request with ``"stream": true`` is answered as the API streams: server-sent events, each a
``chat.completion.chunk``, the last with the finish reason and usage, then ``[DONE]``.

    with OpenAIServer({"What is 2 + 3?": [[("add_numbers", {"a": 3, "b": 2})]]}) as server:
        server.inject(Fault.cut(), input="What is 2 + 3?", turn=0, times=1)
        client = openai.OpenAI(base_url=server.url, api_key="sk-test")
        ...  # server.requests: the JSON bodies received

Fault kinds (each answers with a 200): ``Fault.cut`` (a stream that stops half-way through
the turn's tool-call arguments or text, before its finish reason, and closes),
``Fault.error_event`` (a stream that breaks off half-way with an error, as the API sends one),
``Fault.not_json`` (a proxy's HTML page, which may quote the request's key),
``Fault.no_choices`` (``"choices": []``, streamed or not), ``Fault.error_body`` (an
``{"error": {...}}`` body instead of the completion, as some compatible gateways answer when
overloaded; streamed: one event holding it), ``Fault.at_token_limit`` (the turn's text or
calls' arguments cut half-way, finish reason ``length``), ``Fault.with_arguments`` (the
turn's calls with these arguments, as the model wrote them), ``Fault.json_body`` (a body of
JSON, not events, whether streamed or not, as a gateway may answer a request for a stream),
``Fault.empty`` (no content and no tool call, finish reason ``stop``, streamed or not).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Call = tuple[str, Mapping[str, Any]]
MODEL = "gpt-4o-mini-2024-07-18"


@dataclass(frozen=True)
class Fault:
    """One way to answer a request badly; build with the class methods."""

    # "cut" | "error_event" | "not_json" | "no_choices" | "error_body" | "length" | "arguments"
    # | "json_body" | "empty"
    kind: str
    text: str = ""  # the page (not_json), the arguments (arguments), the error (error_body)

    @classmethod
    def cut(cls) -> Fault:
        """A streamed answer cut off half-way, before its finish reason."""
        return cls("cut")

    @classmethod
    def error_event(cls) -> Fault:
        """A stream that breaks off half-way with an error (a server error) instead of its end."""
        return cls("error_event")

    @classmethod
    def not_json(cls, page: str = "<html>502 Bad Gateway</html>") -> Fault:
        """A 200 whose body is an HTML page (a proxy's), not JSON; ``{api_key}`` in it is
        replaced by the request's key."""
        return cls("not_json", page)

    @classmethod
    def no_choices(cls) -> Fault:
        """A 200 completion with ``"choices": []``."""
        return cls("no_choices")

    @classmethod
    def error_body(cls, error: Mapping[str, Any]) -> Fault:
        """A 200 whose body is ``{"error": error}`` (streamed: one event holding it)."""
        return cls("error_body", json.dumps({"error": dict(error)}))

    @classmethod
    def at_token_limit(cls) -> Fault:
        """The turn's text or calls' arguments cut half-way, ``"finish_reason": "length"``:
        the model stopped at its token limit (``max_tokens``)."""
        return cls("length")

    @classmethod
    def json_body(cls, body: Mapping[str, Any]) -> Fault:
        """A 200 whose body is ``body`` as JSON (``Content-Type: application/json``), to a
        request for a stream too: no events."""
        return cls("json_body", json.dumps(dict(body)))

    @classmethod
    def empty(cls) -> Fault:
        """A reply with no content and no tool call, ``"finish_reason": "stop"`` (streamed:
        its chunks carry empty text)."""
        return cls("empty")

    @classmethod
    def with_arguments(cls, text: str) -> Fault:
        """The turn's calls with ``text`` as their arguments (any text, JSON or not)."""
        return cls("arguments", text)


@dataclass
class _Rule:
    fault: Fault
    input: str | None
    turn: int | None
    times: int | None
    hits: int = 0

    def matches(self, text: str | None, turn: int) -> bool:
        if self.input is not None and text != self.input:
            return False
        if self.turn is not None and turn != self.turn:
            return False
        return self.times is None or self.hits < self.times


class OpenAIServer:
    """``POST {url}/chat/completions`` answered from a script (see the module docstring)."""

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
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> OpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with server._lock:
                    server.requests.append(body)
                    number = len(server.requests)
                    fault = server._fault(body)
                completion = server.answer(body, number)
                if fault is not None and fault.kind == "not_json":
                    key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    self._send(fault.text.replace("{api_key}", key).encode(), "text/html")
                    return
                if fault is not None and fault.kind == "json_body":
                    self._send(fault.text.encode(), "application/json")
                    return
                if fault is not None and fault.kind == "error_body":
                    if not body.get("stream"):
                        self._send(fault.text.encode(), "application/json")
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(b"data: " + fault.text.encode() + b"\n\n")
                    return
                if fault is not None and fault.kind == "no_choices":
                    completion["choices"] = []
                if fault is not None and fault.kind == "empty":
                    choice = completion["choices"][0]
                    choice["message"] = {"role": "assistant", "content": "", "refusal": None}
                    choice["finish_reason"] = "stop"
                if fault is not None and fault.kind == "length":
                    choice = completion["choices"][0]
                    choice["finish_reason"] = "length"
                    message = choice["message"]
                    for call in message.get("tool_calls") or []:
                        text = call["function"]["arguments"]
                        call["function"]["arguments"] = text[: len(text) // 2]
                    if message["content"]:
                        message["content"] = message["content"][: len(message["content"]) // 2]
                if fault is not None and fault.kind == "arguments":
                    for call in completion["choices"][0]["message"].get("tool_calls") or []:
                        call["function"]["arguments"] = fault.text
                if not body.get("stream"):
                    self._send(json.dumps(completion).encode(), "application/json")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # (HTTP/1.0: the stream ends when the connection closes)
                broken = fault is not None and fault.kind in ("cut", "error_event")
                for chunk in _chunks(completion, cut=broken):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                if broken and fault.kind == "error_event":
                    error = {"message": "The server had an error while processing your request.",
                             "type": "server_error", "param": None, "code": None}  # fmt: skip
                    self.wfile.write(b"data: " + json.dumps({"error": error}).encode() + b"\n\n")
                if not broken:
                    self.wfile.write(b"data: [DONE]\n\n")

            def _send(self, payload: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    def inject(
        self,
        fault: Fault,
        *,
        input: str | None = None,
        turn: int | None = None,
        times: int | None = None,
    ) -> None:
        """Answer with ``fault`` the requests of this input (first user text) at this turn
        (``times``: only so many of them). Rules are tried in the order they were added."""
        self._rules.append(_Rule(fault, input, turn, times))

    def _fault(self, body: dict[str, Any]) -> Fault | None:
        text, turn = _input_and_turn(body)
        rule = next((r for r in self._rules if r.matches(text, turn)), None)
        if rule is None:
            return None
        rule.hits += 1
        return rule.fault

    def answer(self, body: dict[str, Any], number: int) -> dict[str, Any]:
        """The completion for a request: the script's next turn of calls, or the answer."""
        messages = body.get("messages") or []
        text, turn = _input_and_turn(body)
        turns = self.script.get(text or "", [])
        index = list(self.script).index(text) if text in self.script else 0
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if turn < len(turns):
            message["tool_calls"] = [
                {
                    "id": f"call_{index}_{turn}_{k}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(dict(args))},
                }
                for k, (name, args) in enumerate(turns[turn])
            ]
            finish = "tool_calls"
        else:
            message["content"] = self.answers.get(text or "", "Done.")
            finish = "stop"
        prompt = 20 + 10 * len(messages)
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 1_750_000_000 + number,
            "model": MODEL,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7},
            "system_fingerprint": "fp_test",
        }


def _input_and_turn(body: dict[str, Any]) -> tuple[str | None, int]:
    """The first user message's text, and the number of assistant messages."""
    messages = body.get("messages") or []
    user = next((m for m in messages if m.get("role") == "user"), {})
    text = user.get("content")
    if isinstance(text, list):
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    return text, sum(1 for m in messages if m.get("role") == "assistant")


def _chunks(completion: dict[str, Any], cut: bool = False) -> list[dict[str, Any]]:
    """A completion as the API streams it: a chunk with the message (each call's arguments,
    or the text, in two halves), then one with the finish reason and usage; ``cut``: up to
    the first half only. No choice: no chunk."""
    if not completion["choices"]:
        return []
    choice = completion["choices"][0]
    message = choice["message"]
    head = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if message.get("tool_calls"):
        first, second = [], []
        for k, call in enumerate(message["tool_calls"]):
            text = call["function"]["arguments"]
            n = len(text) // 2
            first.append(
                {"index": k, **call, "function": {**call["function"], "arguments": text[:n]}}
            )
            second.append({"index": k, "function": {"arguments": text[n:]}})
        deltas = [{"role": "assistant", "tool_calls": first}, {"tool_calls": second}]
    else:
        n = len(message["content"]) // 2
        deltas = [
            {"role": "assistant", "content": message["content"][:n]},
            {"content": message["content"][n:]},
        ]
    parts = [chunk(delta) for delta in deltas]
    if cut:
        return parts[:1]
    last = chunk({}, choice["finish_reason"])
    last["usage"] = completion["usage"]
    return [*parts, last]
