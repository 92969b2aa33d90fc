"""Gemini's ``generateContent`` as a wire form of ``serve``: ``POST
/v1beta/models/{model}:generateContent`` (and ``/v1/...``, as google-genai 3.6 sends it),
``:streamGenerateContent?alt=sse`` for a stream of server-sent events, as the SDKs ask it
(without ``alt=sse``, the JSON array form, refused with a 400).

A request's ``contents`` become LangChain messages: a ``model`` content one AI message (its
text parts joined, its ``functionCall`` parts its tool calls; ``thought`` parts, the
model's reasoning, left out as the canonical form leaves reasoning out), a ``user`` content
a human message per run of text parts and a tool message per ``functionResponse`` part;
``systemInstruction`` the system message. Gemini's calls carry no ids: a response answers
the call of its id where the client sent one, else the first call of its name in the model
content before it that no response answered yet, which is how the API pairs them. A
response of ``{"output": value}`` alone (how LangChain sends a tool's text) is that value
(its JSON, unless text); any other is the JSON of the object. Tools and tool outputs are
compared with the recording's in what a Gemini request can say of them
(:mod:`tcbreplay._replay.gemini_terms`). Part kinds other than text,
``functionCall`` and ``functionResponse`` (inline data, files, code execution), alone or
beside one of these, are refused with a 400 naming the part, not left out; so are fields the
server cannot read (``functionResponse.parts``, a ``systemInstruction`` part other than
text, ``cachedContent``, a field given by both its names), and ``responseMimeType:
application/json`` unless the recording was made asking for JSON (its answers are text
otherwise: :meth:`ReplayService.handle` checks). A schema the answer must follow
(``generationConfig.responseJsonSchema``, or ``responseSchema`` read as the JSON schema it
stands for) is the request's ``response_format``, compared with the one each recorded
request asked for where the recording says it (refused otherwise: the service checks). The
settings are read by :mod:`tcbreplay._replay.gemini_settings`.

A function declaration's ``parameters`` (Gemini's schema: upper-case types) are read as the
JSON schema they stand for (lower-case types, ``propertyOrdering`` left out: it orders, it
does not constrain); ``parametersJsonSchema`` as given. ``generationConfig``'s sampling
settings are the canonical ones (``maxOutputTokens`` is ``max_tokens``), and ``toolConfig``'s
``functionCallingConfig`` what the answer may do (``NONE``, ``ANY``, one allowed name).

The answer: ``candidates[0].content.parts`` (its text, then a ``functionCall`` per call, no
ids), ``finishReason: STOP`` and ``usageMetadata``; errors as Google's
``{"error": {"code", "message", "status"}}``. The API key (``?key=`` or
``x-goog-api-key``) is never read, nor said back.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tcbreplay._replay import gemini_terms
from tcbreplay._replay.gemini_settings import (
    answer_format,
    camel,
    choice,
    config,
    field,
    json_asked,
    snake,
    tools,
)
from tcbreplay._replay.wire import (
    Answer,
    MessageCache,
    Wire,
    WireError,
    WireRequest,
    dumps_json,
    read_units,
)

# /{version}/models/{model}:{method}, the version as the SDKs send it (or none, under a base
# URL that holds it)
PATH = re.compile(r"^(?:/v1[a-z0-9]*)?/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
METHODS = ("generateContent", "streamGenerateContent")
# Google's status names of the HTTP statuses serve answers
_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "INVALID_ARGUMENT",
           408: "DEADLINE_EXCEEDED", 409: "ABORTED", 411: "INVALID_ARGUMENT",
           413: "INVALID_ARGUMENT", 431: "INVALID_ARGUMENT", 500: "INTERNAL",
           501: "UNAVAILABLE",
           502: "UNAVAILABLE", 503: "UNAVAILABLE", 505: "INVALID_ARGUMENT"}  # fmt: skip
_PART_KINDS = ("text", "functionCall", "functionResponse")
# what a part may hold beside its kind: the model's reasoning marks, and metadata
_PART_MARKS = ("thought", "thoughtSignature", "videoMetadata")
# the fields of a call and of a response read (any other is refused, not left out)
_FIELDS = {"functionCall": ("id", "name", "args"),
           "functionResponse": ("id", "name", "response")}  # fmt: skip
# a request's fields whose answer a recording cannot give (state kept by Google, an answer
# of a schema): refused, not left out
_REFUSED = {"cachedContent": "a cached content is state kept by Google, which a recording "
                             "has not: send its contents"}  # fmt: skip


def matches(path: str) -> bool:
    """Whether ``path`` (no query string) is a Gemini method this wire answers."""
    found = PATH.match(path)
    return found is not None and found["method"] in METHODS


class _Content(dict[str, Any]):
    """A content of the request as a unit of its messages: the content, its place in
    ``contents`` and the call id of each of its parts (a call's own, or the one a response
    answers; None for other parts)."""

    def __init__(self, content: Any, k: int, ids: list[str | None]) -> None:
        super().__init__({"content": content, "k": k, "ids": ids})


class _System(dict[str, Any]):
    """The request's ``systemInstruction`` as a unit of its messages."""

    def __init__(self, value: Any) -> None:
        super().__init__({"\x00systemInstruction": value})
        self.value = value


def _parts(content: Any, place: str) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        raise WireError(f"{place}.parts: a non-empty list of parts is required")
    return parts


def _kind(part: dict[str, Any], place: str) -> str:
    """Which of text, functionCall, functionResponse a part is (refused otherwise)."""
    found = [kind for kind in _PART_KINDS if kind in part or snake(kind) in part]
    other = [camel(k) for k in part]
    other = [k for k in other if k not in _PART_MARKS and k not in _PART_KINDS]
    if len(found) != 1 or other:
        said = f" ({', '.join(other[:3])} is not served)" if other else ""
        raise WireError(f"{place}: a part of text, functionCall or functionResponse is "
                        f"required{said}")  # fmt: skip
    if found[0] != "text":
        value = field(part, found[0])
        unread = [camel(k) for k in value if camel(k) not in _FIELDS[found[0]]] if isinstance(
            value, dict) else []  # fmt: skip
        if unread:
            raise WireError(f"{place}.{found[0]}.{unread[0]}: not served (a {found[0]} of "
                            f"{', '.join(_FIELDS[found[0]])} is read)")  # fmt: skip
    return found[0]


class _OpenCalls:
    """The calls of the last model content no response answered yet, found by id or by name
    in the order made, each in constant time (a content of n calls and n responses is read
    in linear time)."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._taken: list[bool] = []
        self._by_id: dict[str, deque[int]] = {}
        self._by_name: dict[str, deque[int]] = {}

    def add(self, call_id: str, name: str) -> None:
        self._by_id.setdefault(call_id, deque()).append(len(self._ids))
        self._by_name.setdefault(name, deque()).append(len(self._ids))
        self._ids.append(call_id)
        self._taken.append(False)

    def _first(self, found: deque[int] | None) -> int | None:
        while found and self._taken[found[0]]:
            found.popleft()
        return found[0] if found else None

    def take(self, call_id: str | None, name: str) -> str | None:
        """The call a response answers (of its id, else the first of its name), now taken."""
        at = self._first(self._by_id.get(call_id)) if call_id is not None else None
        if at is None:
            at = self._first(self._by_name.get(name))
        if at is None:
            return None
        self._taken[at] = True
        return self._ids[at]


def _units_of(contents: list[Any]) -> list[_Content]:
    """The contents as units, each part's call id found (see the module)."""
    units: list[_Content] = []
    open_calls = _OpenCalls()
    for k, content in enumerate(contents):
        place = f"contents[{k}]"
        if not isinstance(content, dict):
            raise WireError(f"{place}: a content object ({{role, parts}}) is required")
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise WireError(f"{place}.role {role!r}: user or model")
        parts = _parts(content, place)
        ids: list[str | None] = []
        if role == "model":
            open_calls = _OpenCalls()
        for j, part in enumerate(parts):
            kind = _kind(part, f"{place}.parts[{j}]")
            if kind == "text":
                ids.append(None)
                continue
            value = field(part, kind)
            if not isinstance(value, dict) or not isinstance(value.get("name"), str):
                raise WireError(f"{place}.parts[{j}].{kind}: an object with a name is required")
            given = value.get("id") if isinstance(value.get("id"), str) else None
            if kind == "functionCall":
                if role != "model":
                    raise WireError(f"{place}.parts[{j}]: a functionCall in a user content")
                call_id = given or f"call_{k}_{j}"
                open_calls.add(call_id, value["name"])
                ids.append(call_id)
                continue
            if role != "user":
                raise WireError(f"{place}.parts[{j}]: a functionResponse in a model content")
            taken = open_calls.take(given, value["name"])
            ids.append(taken if taken is not None else given or "")
        units.append(_Content(content, k, ids))
    return units


def _text(part: dict[str, Any], place: str) -> str:
    if not isinstance(part["text"], str):
        raise WireError(f"{place}.text: a string is required")
    return part["text"]


def _response_content(response: Any, place: str) -> str:
    """A functionResponse's ``response`` as a tool message's content (see the module)."""
    if not isinstance(response, dict):
        raise WireError(f"{place}.functionResponse.response: an object is required")
    value = response["output"] if set(response) == {"output"} else response
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _convert(units: list[Any]) -> list[Any]:
    """The LangChain messages of units (see the module)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for unit in units:
        if isinstance(unit, _System):
            parts = _parts(unit.value, "systemInstruction")
            texts = []
            for j, part in enumerate(parts):
                other = [camel(k) for k in part if camel(k) not in ("text", *_PART_MARKS)]
                if "text" not in part or other:
                    said = f" ({', '.join(other[:3])} is not served)" if other else ""
                    raise WireError(f"systemInstruction.parts[{j}]: a text part is "
                                    f"required{said}")  # fmt: skip
                texts.append(_text(part, f"systemInstruction.parts[{j}]"))
            out.append(SystemMessage(content="".join(texts)))
            continue
        content, k, ids = unit["content"], unit["k"], unit["ids"]
        place = f"contents[{k}]"
        parts = content["parts"]
        if content.get("role", "user") == "model":
            text, calls = [], []
            for j, part in enumerate(parts):
                if "text" in part:
                    if not part.get("thought"):  # (reasoning: see the module)
                        text.append(_text(part, f"{place}.parts[{j}]"))
                    continue
                call = field(part, "functionCall")
                args = call.get("args")
                if args is not None and not isinstance(args, dict):
                    raise WireError(f"{place}.parts[{j}].functionCall.args: an object is required")
                calls.append({"name": call["name"], "args": args or {}, "id": ids[j]})
            out.append(AIMessage(content="".join(text), tool_calls=calls))
            continue
        pending: list[str] = []
        for j, part in enumerate(parts):
            if "text" in part:
                pending.append(_text(part, f"{place}.parts[{j}]"))
                continue
            if pending:
                out.append(HumanMessage(content="".join(pending)))
                pending = []
            response = field(part, "functionResponse")
            out.append(ToolMessage(
                content=_response_content(response.get("response"), f"{place}.parts[{j}]"),
                tool_call_id=ids[j] or "", name=response["name"],
            ))  # fmt: skip
        if pending:
            out.append(HumanMessage(content="".join(pending)))
    return out


def _places(k: int, unit: Any, n: int) -> list[str]:
    """Where the ``n`` messages of a unit are: a user content's functionResponse parts are
    each a message of its own, named by its part, and so are the runs of text parts between
    them (a content of text alone is named as a whole)."""
    if isinstance(unit, _System):
        return ["systemInstruction"] * n
    place = f"contents[{unit['k']}]"
    parts = unit["content"]["parts"]
    if unit["content"].get("role", "user") == "model":
        return [place] * n
    starts: list[int] = []
    pending = None  # the first of the text parts since the last functionResponse
    for j, part in enumerate(parts):
        if field(part, "functionResponse") is not None:
            starts += ([] if pending is None else [pending]) + [j]
            pending = None
        elif pending is None:
            pending = j
    starts += [] if pending is None else [pending]
    if len(starts) != n or (n == 1 and pending is not None):
        return [place] * n
    return [f"{place}.parts[{j}]" for j in starts]


def _inside(contents: list[Any]) -> Callable[[str, str], str]:
    """A path into a message as the body has it (see WireRequest.inside): a tool message's
    content is its part's ``functionResponse.response`` (``.output`` where it was
    unwrapped), its name the response's ``name``, and the call it answers its ``id`` where
    that is a call's, else its ``name``; a model content's calls its functionCall parts."""

    def inside(place: str, rest: str) -> str:
        found = re.fullmatch(r"contents\[(\d+)\](?:\.parts\[(\d+)\])?", place)
        if found is None or not isinstance(content := contents[int(found[1])], dict):
            return place + rest
        parts = content["parts"]
        calls = [j for j, p in enumerate(parts) if field(p, "functionCall") is not None]
        called = re.match(r"\.tool_calls\[(\d+)\](\.arguments|\.name)?", rest)
        if found[2] is None and called is not None and int(called[1]) < len(calls):
            named = {".arguments": ".args", ".name": ".name", None: ""}[called[2]]
            at = f".parts[{calls[int(called[1])]}].functionCall{named}"
            return place + at + rest[called.end() :]
        response = field(parts[int(found[2])], "functionResponse") if found[2] else None
        if not isinstance(response, dict):
            return place + rest
        if rest == ".call" and response.get("id") in _call_ids(contents[: int(found[1])]):
            return place + ".functionResponse.id"  # (it answers a call by its id)
        for key in (".content", ".name", ".call"):
            if rest == key or rest[len(key) : len(key) + 1] in (".", "["):
                given = response.get("response")
                unwrapped = isinstance(given, dict) and set(given) == {"output"}
                sent = ".functionResponse." + (
                    "name" if key != ".content" else "response.output" if unwrapped else "response"
                )
                return place + sent + rest[len(key) :]
        return place + rest

    return inside


def _call_ids(contents: list[Any]) -> set[str]:
    """The ids given to the functionCall parts of the last model content of ``contents``."""
    for content in reversed(contents):
        if isinstance(content, dict) and content.get("role", "user") == "model":
            calls = [field(p, "functionCall") for p in content["parts"]]
            return {c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)}
    return set()


class GeminiWire(Wire):
    """``generateContent`` and ``streamGenerateContent`` (see the module)."""

    name = "gemini"
    has_terms = True
    # (google-genai, and ChatGoogleGenerativeAI through it, retry 408, 429, 500, 502, 503
    # and 504 whatever the answer says: 501 is the server error they do not)
    recorded_error_status = 501

    def tool_terms(
        self, tool: dict[str, Any], like: dict[str, Any] | None = None, recorded: bool = False
    ) -> Any:
        return gemini_terms.tool_terms(tool, like, recorded)

    def output_terms(self, content: Any) -> Any:
        return gemini_terms.output_terms(content)

    def read(
        self, body: Mapping[str, Any], cache: MessageCache | None = None, target: str = ""
    ) -> WireRequest:
        path, _, query = target.partition("?")
        found = PATH.match(path.rstrip("/"))
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise WireError("contents: a non-empty list of contents is required")
        for name, why in _REFUSED.items():
            if field(body, name) is not None:
                raise WireError(f"{name}: not served ({why})")
        units: list[Any] = list(_units_of(contents))
        if field(body, "systemInstruction") is not None:
            units.insert(0, _System(field(body, "systemInstruction")))
        messages, entries, parts, places = read_units(self.name, units, _convert, cache, _places)
        stream = found is not None and found["method"] == "streamGenerateContent"
        if stream and "alt=sse" not in query.split("&"):
            raise WireError("streamGenerateContent: ?alt=sse is required (server-sent events, as "
                            "the SDKs ask; the JSON array form is not served)")  # fmt: skip
        params = config(body)
        schema_asked, asked = answer_format(body)
        if asked is not None:
            params["response_format"] = asked
        return WireRequest(
            messages=messages,
            entries=entries,
            parts=parts,
            tools=tools(body),
            params=params,
            model=found["model"] if found is not None else "",
            stream=stream,
            choice=choice(body),
            places=places,
            sent=len(contents),
            inside=_inside(contents),
            json_asked="generationConfig.responseMimeType" if json_asked(body) else "",
            schema_asked=schema_asked,
        )

    def _response(self, answer: Answer, request: WireRequest, parts: list[Any],
                  last: bool = True) -> dict[str, Any]:  # fmt: skip
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        out: dict[str, Any] = {"candidates": [candidate]}
        if last:
            candidate["finishReason"] = "STOP"
            out["usageMetadata"] = {
                "promptTokenCount": answer.input_tokens,
                "candidatesTokenCount": answer.output_tokens,
                "totalTokenCount": answer.input_tokens + answer.output_tokens,
            }
        out.update(modelVersion=request.model, responseId=answer.id)
        return out

    def _parts(self, answer: Answer) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = [{"text": answer.text}] if answer.text else []
        parts += [{"functionCall": {"name": name, "args": args or {}}}
                  for _, name, args in answer.calls]  # fmt: skip
        return parts or [{"text": ""}]

    def answer(self, answer: Answer, request: WireRequest) -> bytes:
        return dumps_json(self._response(answer, request, self._parts(answer)))

    def stream(self, answer: Answer, request: WireRequest) -> bytes:
        parts = self._parts(answer)
        # the text first, then the calls with the finish and usage, as the API streams them
        chunks = [parts] if len(parts) == 1 or not answer.text else [parts[:1], parts[1:]]
        last = len(chunks) - 1
        return b"".join(b"data: " + dumps_json(self._response(answer, request, p, k == last))
                        + b"\r\n\r\n" for k, p in enumerate(chunks))  # fmt: skip

    def error(self, status: int, message: str, kind: str | None = None, **extra: Any) -> bytes:
        state = _STATUS.get(status, "INVALID_ARGUMENT" if status < 500 else "INTERNAL")
        return dumps_json({"error": {"code": status, "message": message, "status": state, **extra}})
