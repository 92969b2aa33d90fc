"""A scripted OpenAI Chat Completions server on 127.0.0.1, for the real ``openai`` client (and
anything that speaks its API: LangChain's ChatOpenAI, the Vercel AI SDK's OpenAI provider).

It plays an agent from a script, as ``gemini_server.py`` does: for each user input (the
first user message's text), a list of turns, each a list of tool calls ``(name, args)``;
after the last turn it answers with ``answer`` (or "Done."). The turn is the number of
assistant messages already in the request, so real tool execution happens between requests
(several calls in one turn are parallel calls). Call ids are ``call_<input#>_<turn>_<k>``.

    with OpenAIServer({"What is 2 + 3?": [[("add_numbers", {"a": 3, "b": 2})]]}) as server:
        client = openai.OpenAI(base_url=server.url, api_key="sk-test")
        ...  # server.requests: the JSON bodies received
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Call = tuple[str, Mapping[str, Any]]
MODEL = "gpt-4o-mini-2024-07-18"


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
                payload = json.dumps(server.answer(body, number)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
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

    def answer(self, body: dict[str, Any], number: int) -> dict[str, Any]:
        """The completion for a request: the script's next turn of calls, or the answer."""
        messages = body.get("messages") or []
        user = next((m for m in messages if m.get("role") == "user"), {})
        text = user.get("content")
        if isinstance(text, list):
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        turns = self.script.get(text or "", [])
        turn = sum(1 for m in messages if m.get("role") == "assistant")
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
