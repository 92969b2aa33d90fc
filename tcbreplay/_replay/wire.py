"""The wire forms ``serve`` speaks: what they share, and OpenAI's Chat Completions here;
Anthropic's Messages, Gemini's and OpenAI's Responses in modules of their own
(:mod:`tcbreplay._replay.routes` says which path is which).

Each :class:`Wire` reads a request body into LangChain messages (by the importers' readers,
so a conversation has one fingerprint whichever form it comes in), its tools' schemas and
its sampling settings; and writes a recorded AI message back as the answer its SDK expects:
a JSON body, or with ``"stream": true`` a stream of server-sent events as that API sends
them (OpenAI: ``data:`` chunks of deltas, tool calls by index, then ``data: [DONE]``;
Anthropic: ``message_start``, a start, delta and stop per content block, ``message_delta``
and ``message_stop``), and errors in each one's shape.

A recorded message answers as its text (the text parts of its content, joined) and its tool
calls (their ids as recorded, else ``call_<turn>_<i>``), which is what the client sends back
in its next request: so that request has the fingerprint of the recording's next one.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tcbreplay._replay.calls import AnsweredCalls
from tcbreplay._replay.fingerprint import (
    Entry,
    canonical_json,
    canonical_params,
    content,
    message_entry,
)
from tcbreplay._replay.settings import refused
from tcbreplay._store.schema import INVALID_ARGUMENTS
from tcbreplay.errors import TcbReplayError


class WireError(TcbReplayError):
    """A request ``serve`` cannot read: answered with a 4xx status and one line saying why."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.kind = kind


# the settings of a request that say which answers it allows
CHOICE = ("tool_choice", "parallel_tool_calls")


@dataclass
class WireRequest:
    """A request as read from the wire: its messages (LangChain's, and each one's part of the
    canonical form with its canonical JSON), its tools' schemas (bare ``{"name",
    "description", "parameters"}``), its sampling settings (canonical names), and how it
    wants its answer."""

    messages: list[Any]
    entries: list[Entry]
    parts: list[str]
    tools: list[dict[str, Any]]
    params: dict[str, Any]
    model: str
    stream: bool
    usage_in_stream: bool = False
    # what the request allows an answer (``tool_choice``, ``parallel_tool_calls``; see
    # :mod:`tcbreplay._replay.choice`)
    choice: dict[str, Any] = field(default_factory=dict)
    # where each message is in the body as sent (``messages[3]``; ``system``; on Anthropic's
    # form a tool_result block, a message of its own, ``messages[2].content[1]``), worked out
    # when asked (a 409's), and how many messages the body's list holds
    places: Callable[[], list[str]] = list
    sent: int = 0
    # a path into a message (its place, the rest of the canonical path: ``.content.result``)
    # as the body has it, where the form names its fields otherwise (Gemini's); None: as is
    inside: Callable[[str, str], str] | None = None
    # what the answer says as the request gave it or the server made it (the Responses
    # API's ``background``, and the ``id`` a client may ask for the answer again by)
    said_back: dict[str, Any] = field(default_factory=dict)
    # the field that asks for a JSON answer without a schema (Gemini's
    # ``generationConfig.responseMimeType``), or "": only a recording made asking for JSON
    # answers it
    json_asked: str = ""
    # the field that gives a schema the answer must follow (Gemini's
    # ``generationConfig.responseJsonSchema``, Anthropic's ``output_config.format.schema``),
    # or "": compared as ``response_format`` only where the recording says which each
    # request asked for (``formats_known``)
    schema_asked: str = ""
    # settings served only where the recording's model settings have them, each by its
    # place in the body, with its name there and its value (Anthropic's
    # ``output_config.effort``: ``("effort", "high")``; OpenAI's ``reasoning.effort`` too,
    # and Chat Completions' ``reasoning_effort``: ``("effort", "high")``)
    as_recorded: dict[str, tuple[str, Any]] = field(default_factory=dict)


@dataclass
class Answer:
    """A recorded AI message as an answer: its text, tool calls (id, name, arguments),
    token counts and an id."""

    id: str
    text: str
    calls: list[tuple[str, str, Any]]
    input_tokens: int
    output_tokens: int

    @classmethod
    def of(cls, message: Mapping[str, Any], turn: int) -> Answer:
        """The answer a stored message (``message_to_dict``'s form) gives at ``turn``."""
        data = message.get("data") or {}
        found = content(data.get("content"))
        if not isinstance(found, str):  # parts other than text: their text parts
            found = "".join(
                str(p.get("text") or "") for p in found if isinstance(p, dict) and "text" in p
            )
        calls: list[tuple[str, str, Any]] = []
        for call in data.get("tool_calls") or []:
            calls.append((str(call.get("id") or ""), str(call.get("name") or ""), call.get("args")))
        for call in data.get("invalid_tool_calls") or []:
            calls.append((str(call.get("id") or ""), str(call.get("name") or ""),
                          {INVALID_ARGUMENTS: call.get("args")}))  # fmt: skip
        # LangChain keeps invalid calls apart, after the others: in the order made, where the
        # provider's own form says it (a client answers the calls in the order it is given)
        made = {call_id: k for k, call_id in enumerate(_order_made(data))}
        if calls and all(i in made for i, _, _ in calls):
            calls.sort(key=lambda call: made[call[0]])
        calls = [(i or f"call_{turn}_{k}", name, args) for k, (i, name, args) in enumerate(calls)]
        usage = data.get("usage_metadata") or {}
        return cls(
            id=str(data.get("id") or f"turn-{turn}"),
            text=found,
            calls=calls,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
        )


def _order_made(data: Mapping[str, Any]) -> list[str]:
    """The ids of a stored message's calls in the order its model made them, where the
    provider's own form is kept beside LangChain's: OpenAI's ``additional_kwargs.tool_calls``,
    Anthropic's ``tool_use`` content blocks."""
    extra = data.get("additional_kwargs")
    raw = extra.get("tool_calls") if isinstance(extra, Mapping) else None
    if isinstance(raw, list):
        return [str(c["id"]) for c in raw if isinstance(c, Mapping) and c.get("id")]
    found = data.get("content")
    if not isinstance(found, list):
        return []
    return [str(p["id"]) for p in found if isinstance(p, Mapping) and p.get("id")
            and p.get("type") in ("tool_use", "tool_call")]  # fmt: skip


def dumps_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def checked_schema(spec: dict[str, Any], place: str, key: str) -> dict[str, Any]:
    """``spec``, a tool whose ``key`` (its JSON schema) is an object, if given, with
    ``properties`` an object and ``required`` a list of names, and whose description is text;
    else refused, naming ``place``."""
    schema = spec.get(key)
    if schema is not None and not (
        isinstance(schema, dict)
        and isinstance(schema.get("properties", {}), dict | None)
        and isinstance(schema.get("required", []), list | None)
    ):
        raise WireError(f"{place}.{key}: a JSON schema object is required (properties an "
                        "object, required a list)")  # fmt: skip
    if not isinstance(spec.get("description", ""), str | None):
        raise WireError(f"{place}.description: a string is required")
    return spec


def refuse_settings(body: Mapping[str, Any], api: str) -> None:
    """Refuse settings the API would refuse, or whose answer a recording cannot give
    (:mod:`tcbreplay._replay.settings`)."""
    said = refused(body, api)
    if said is not None:
        raise WireError(said)


def _effort(body: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """Chat Completions' ``reasoning_effort``, served only as the recording's model settings
    have it (:func:`~tcbreplay._replay.settings.unrecorded`)."""
    effort = body.get("reasoning_effort")
    if effort is None:
        return {}
    if not (isinstance(effort, str) and effort):
        raise WireError(f"reasoning_effort {effort!r}: a text such as low, medium or high")
    return {"reasoning_effort": ("effort", effort)}


def listed_messages(body: Mapping[str, Any]) -> list[Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WireError("messages: a non-empty list of messages is required")
    return messages


class MessageCache:
    """Each message a client sends, read once: its LangChain messages, their entries
    (:func:`~tcbreplay._replay.fingerprint.message_entry`) and canonical JSON, by the
    message's JSON. A conversation sends its history again with every request: only its new
    messages are read. The oldest are forgotten first."""

    def __init__(self, size: int = 20_000) -> None:
        self._size = size
        self._found: OrderedDict[str, tuple[list[Any], list[Entry], list[str]]] = OrderedDict()
        self.calls = AnsweredCalls(size)  # (which calls were answered together)

    def read(
        self, wire: str, units: list[Any], convert: Callable[[list[Any]], list[Any]]
    ) -> tuple[list[Any], list[Entry], list[str], list[int]]:
        """The messages of ``units`` (what ``convert`` reads, one at a time), their entries,
        entries' JSON, and how many messages each unit is. A unit ``convert`` refuses is read
        again with those before it, so that the error names its place."""
        messages: list[Any] = []
        entries: list[Entry] = []
        parts: list[str] = []
        counts: list[int] = []
        for k, unit in enumerate(units):
            key = wire + json.dumps(unit)
            found = self._found.get(key)
            if found is None:
                try:
                    converted = list(convert([unit]))
                except TcbReplayError:
                    _convert(convert, units[: k + 1])
                    raise
                made = [message_entry(m) for m in converted]
                found = (converted, made, [canonical_json(e[1]) for e in made])
                self._found[key] = found
                if len(self._found) > self._size:
                    self._found.popitem(last=False)
            else:
                self._found.move_to_end(key)
            messages += found[0]
            entries += found[1]
            parts += found[2]
            counts.append(len(found[0]))
        return messages, entries, parts, counts


def _convert(convert: Callable[[list[Any]], list[Any]], units: list[Any]) -> list[Any]:
    try:
        return list(convert(units))
    except TcbReplayError as exc:
        raise WireError(str(exc)) from None


def read_units(
    wire: str, units: list[Any], convert: Callable[[list[Any]], list[Any]],
    cache: MessageCache | None, place: Callable[[int, Any, int], list[str]],
) -> tuple[list[Any], list[Entry], list[str], Callable[[], list[str]]]:  # fmt: skip
    """The messages of ``units``, their entries and entries' JSON, and what gives each
    one's place in the body (``place(k, unit, n)``: those of the ``n`` messages unit ``k``
    is)."""
    messages, entries, parts, counts = (cache or MessageCache(0)).read(wire, units, convert)

    def places() -> list[str]:
        return [p for k, unit in enumerate(units) for p in place(k, unit, counts[k])]

    return messages, entries, parts, places


def refuse_unanswered(
    entries: list[Entry], places: Callable[[], list[str]], key: str, call: str
) -> None:
    """Refuse a tool result that answers no call of the conversation (its id, at ``key`` of
    the result, that of no ``call`` before it), as the API refuses it: a malformed request,
    not one that differs from a recording."""
    made: set[str] = set()
    for k, (role, _, call_id, calls) in enumerate(entries):
        made.update(calls)
        if role == "tool" and call_id is not None and call_id not in made:
            raise WireError(f"{places()[k]}.{key} {call_id!r}: answers no {call} of the "
                            f"conversation; a result follows the {call} it answers")  # fmt: skip


def refuse_calls_left(
    entries: list[Entry], places: Callable[[], list[str]], call: str, result: str
) -> None:
    """Refuse a conversation that goes on (a message other than a ``result`` comes) before
    each ``call`` of an assistant message is answered, as the APIs refuse it: a malformed
    request, not one that differs from a recording. Calls the request ends without answering
    are the recording's to say (its next turn answers them, or the request differs from it)."""
    left: dict[str, None] = {}  # the calls of the last assistant message not yet answered
    made = 0  # the message that made them
    for k, (role, _, call_id, calls) in enumerate(entries):
        if role == "tool":
            left.pop(str(call_id), None)
            continue
        if left:
            at = places()
            ids = ", ".join(map(repr, left))
            raise WireError(f"{at[made]}: {call} ids {ids} have no {result} before {at[k]}; "
                            f"each {call} of a message is answered by a {result} before the "
                            "conversation goes on")  # fmt: skip
        left, made = dict.fromkeys(calls), k


def _refuse_older_answers(entries: list[Entry], places: Callable[[], list[str]]) -> None:
    """Refuse a tool message that answers a call of an assistant message before the last one
    before it, as Chat Completions refuses it (a tool message follows the assistant message
    whose call it answers, or another tool message): a malformed request, not one that
    differs from a recording. One that answers no call is :func:`refuse_unanswered`'s."""
    made: dict[str, int] = {}  # each call's id -> the message that made it
    last: int | None = None  # the last assistant message so far
    for k, (role, _, call_id, calls) in enumerate(entries):
        if role == "assistant":
            last = k
            made.update(dict.fromkeys(calls, k))
        elif role == "tool" and call_id in made and last is not None and made[call_id] != last:
            at = places()
            raise WireError(
                f"{at[k]}.tool_call_id {call_id!r}: answers a tool call of {at[made[call_id]]}, "
                f"not of the assistant message before it ({at[last]}); a tool message answers "
                "a call of the assistant message before it"
            )


def _refuse_missing_content(sent: list[Any]) -> None:
    """A message without content (or null) but an assistant's is a bad request, as the API
    answers it: read as an empty text, it would diverge (a 409) from any recording."""
    for k, m in enumerate(sent):
        role = m.get("role") if isinstance(m, dict) else None
        if isinstance(role, str) and role != "assistant" and m.get("content") is None:
            raise WireError(f"messages[{k}].content: a {role} message's content is required")


def _openai_places(k: int, unit: Any, n: int) -> list[str]:
    return [f"messages[{k}]"] * n


class Wire:
    """One API's form (see the module)."""

    name = ""
    # whether its clients send less than a recording holds: then tools and tool outputs are
    # compared in its terms (tool_terms, output_terms; see tcbreplay._replay.alike)
    has_terms = False
    # the status a request is answered with where its recording ended in an error: one its
    # clients do not retry (each retry would be answered alike, and logged as a trial)
    recorded_error_status = 502

    def tool_terms(
        self, tool: dict[str, Any], like: dict[str, Any] | None = None, recorded: bool = False
    ) -> Any:
        """A canonical tool as this API's clients can say it (``like``: compared with it;
        ``recorded``: the recording's, compared with a request's)."""
        return tool

    def output_terms(self, content: Any) -> Any:
        """A tool message's canonical content as this API's clients send it."""
        return content

    def read(
        self, body: Mapping[str, Any], cache: MessageCache | None = None, target: str = ""
    ) -> WireRequest:
        """A request body (a JSON object) as a request (``cache``: the messages read before;
        ``target``: the path it was sent to, with its query string)."""
        raise NotImplementedError

    def answer(self, answer: Answer, request: WireRequest) -> bytes:
        raise NotImplementedError

    def stream(self, answer: Answer, request: WireRequest) -> bytes:
        raise NotImplementedError

    def error(self, status: int, message: str, kind: str | None = None, **extra: Any) -> bytes:
        raise NotImplementedError


class OpenAIWire(Wire):
    """Chat Completions: ``POST /v1/chat/completions``."""

    name = "openai"

    def read(
        self, body: Mapping[str, Any], cache: MessageCache | None = None, target: str = ""
    ) -> WireRequest:
        from tcbreplay._importers import openai

        refuse_settings(body, self.name)
        sent = listed_messages(body)
        _refuse_missing_content(sent)
        messages, entries, parts, places = read_units(
            self.name, sent, lambda ms: openai.convert(ms, {}, "messages"), cache, _openai_places
        )
        tools = body.get("tools") or []
        functions = body.get("functions") or []  # the form before tools
        if not isinstance(tools, list) or not isinstance(functions, list):
            raise WireError("tools: a list of {type: function, function: {...}} is required")
        specs: list[dict[str, Any]] = []
        for k, tool in enumerate(tools):
            spec = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise WireError(f"tools[{k}]: a function tool with a name is required")
            specs.append(checked_schema(spec, f"tools[{k}].function", "parameters"))
        for k, spec in enumerate(functions):
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise WireError(f"functions[{k}]: a function with a name is required")
            specs.append(checked_schema(spec, f"functions[{k}]", "parameters"))
        refuse_unanswered(entries, places, "tool_call_id", "tool call")
        _refuse_older_answers(entries, places)
        refuse_calls_left(entries, places, "tool call", "tool message")
        options = body.get("stream_options")
        return WireRequest(
            messages=messages,
            entries=entries,
            parts=parts,
            tools=specs,
            params=canonical_params(body),
            model=str(body.get("model") or ""),
            stream=bool(body.get("stream")),
            choice={k: body[k] for k in CHOICE if k in body},
            usage_in_stream=isinstance(options, dict) and bool(options.get("include_usage")),
            places=places,
            sent=len(sent),
            as_recorded=_effort(body),
        )

    def _calls(self, answer: Answer) -> list[dict[str, Any]]:
        from tcbreplay._importers.openai import arguments_text

        return [
            {"id": i, "type": "function", "function": {"name": n, "arguments": arguments_text(a)}}
            for i, n, a in answer.calls
        ]

    def _usage(self, answer: Answer) -> dict[str, int]:
        return {"prompt_tokens": answer.input_tokens, "completion_tokens": answer.output_tokens,
                "total_tokens": answer.input_tokens + answer.output_tokens}  # fmt: skip

    def answer(self, answer: Answer, request: WireRequest) -> bytes:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text if answer.text or not answer.calls else None,
            "refusal": None,
        }
        if answer.calls:
            message["tool_calls"] = self._calls(answer)
        return dumps_json({
            "id": f"chatcmpl-{answer.id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if answer.calls else "stop"}],
            "usage": self._usage(answer),
        })  # fmt: skip

    def stream(self, answer: Answer, request: WireRequest) -> bytes:
        head = {"id": f"chatcmpl-{answer.id}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": request.model}  # fmt: skip

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return b"data: " + dumps_json({**head, "choices": [choice]}) + b"\n\n"

        out = [chunk({"role": "assistant", "content": ""})]
        if answer.text:
            out.append(chunk({"content": answer.text}))
        for k, call in enumerate(self._calls(answer)):
            name = {"name": call["function"]["name"], "arguments": ""}
            out.append(chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                              "function": name}]}))  # fmt: skip
            arguments = {"arguments": call["function"]["arguments"]}
            out.append(chunk({"tool_calls": [{"index": k, "function": arguments}]}))
        out.append(chunk({}, "tool_calls" if answer.calls else "stop"))
        if request.usage_in_stream:
            usage = {**head, "choices": [], "usage": self._usage(answer)}
            out.append(b"data: " + dumps_json(usage) + b"\n\n")
        out.append(b"data: [DONE]\n\n")
        return b"".join(out)

    def error(self, status: int, message: str, kind: str | None = None, **extra: Any) -> bytes:
        kind = kind or ERROR_TYPES.get(status, "invalid_request_error")
        return dumps_json({"error": {"message": message, "type": kind, "param": None, "code": kind,
                                 **extra}})  # fmt: skip


# the error type each status is given (OpenAI's and Anthropic's APIs name these alike)
ERROR_TYPES = {
    400: "invalid_request_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "divergence",
    411: "invalid_request_error",
    413: "request_too_large",
    500: "api_error",
}
