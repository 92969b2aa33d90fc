"""OpenTelemetry's GenAI semantic conventions (``gen_ai.*``), in both shapes found in the
wild.

Current: a model call is a span whose ``gen_ai.operation.name`` is ``chat``,
``text_completion`` or ``generate_content``, its ``gen_ai.input.messages`` and
``gen_ai.output.messages`` messages of typed parts (``text``, ``tool_call`` with ``id``,
``name`` and ``arguments``, ``tool_call_response`` with ``id`` and ``response``), its system
prompt ``gen_ai.system_instructions`` and its tools ``gen_ai.tool.definitions`` (on the span,
or on its ``gen_ai.client.inference.operation.details`` event); a tool run is an
``execute_tool`` span (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``); an agent is an
``invoke_agent`` span.

Older (semantic conventions 1.27 to 1.36, and ``openai-v2`` without
``OTEL_SEMCONV_STABILITY_OPT_IN``): the messages are events, one a message, as span events
or as log records naming the span: ``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.assistant.message`` (``tool_calls`` in OpenAI's shape), ``gen_ai.tool.message``
(``id``: the call it answers) sent, and ``gen_ai.choice`` (its ``message``) answered; older
still, ``gen_ai.content.prompt`` and ``gen_ai.content.completion`` events holding the
messages in OpenAI's shape as JSON text (``gen_ai.prompt``, ``gen_ai.completion``).
"""

from __future__ import annotations

from typing import Any

from tcbreplay._importers.otel.calls import (
    Call,
    Message,
    ToolRun,
    Turn,
    arguments,
    as_int,
    function_schema,
    json_value,
    text_of,
)
from tcbreplay._importers.otel.spans import Event, Span
from tcbreplay.errors import TraceError

OPERATION = "gen_ai.operation.name"
MODEL_CALLS = ("chat", "text_completion", "generate_content")
INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"
TOOLS = "gen_ai.tool.definitions"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_SENT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"


def is_agent(span: Span) -> bool:
    return span.attributes.get(OPERATION) == "invoke_agent"


def is_tool_run(span: Span) -> bool:
    return span.attributes.get(OPERATION) == "execute_tool"


def is_model_call(span: Span) -> bool:
    a = span.attributes
    if a.get(OPERATION) in MODEL_CALLS or INPUT in a or OUTPUT in a:
        return a.get(OPERATION) not in ("invoke_agent", "execute_tool")
    return any(e.name in _SENT_EVENTS or e.name == CHOICE_EVENT for e in span.events)


def turn(span: Span, place: str) -> Turn:
    """A model call's span as a turn."""
    a = span.attributes
    details = next((e for e in span.events if e.name == DETAILS_EVENT), None)
    source = a if INPUT in a or OUTPUT in a or details is None else {**details.attributes}
    inputs: list[Message] = []
    outputs: list[Message] = []
    if INPUT in source or OUTPUT in source:
        where = f"{place}: span {span.span_id}"
        if SYSTEM in source:
            system = _parts_text(json_value(source[SYSTEM], f"{where}: {SYSTEM}"))
            if system:
                inputs.append(Message("system", system))
        for m in _messages(json_value(source.get(INPUT), f"{where}: {INPUT}"), f"{where}: {INPUT}"):
            inputs.extend(message_of(m, f"{where}: {INPUT}"))
        answered = _messages(json_value(source.get(OUTPUT), f"{where}: {OUTPUT}"),
                             f"{where}: {OUTPUT}")  # fmt: skip
        for m in answered[:1]:  # several choices: the agent goes on with the first
            outputs.extend(message_of(m, f"{where}: {OUTPUT}"))
    else:
        inputs, outputs = _from_events(span.events, f"{place}: span {span.span_id}")
    tools = [
        schema
        for tool in _list(json_value(a.get(TOOLS, source.get(TOOLS)), f"{place}: {TOOLS}"))
        if (schema := function_schema(tool)) is not None
    ]
    return Turn(
        span_id=span.span_id,
        start=span.start,
        inputs=inputs,
        outputs=outputs,
        model=a.get("gen_ai.response.model") or a.get("gen_ai.request.model"),
        response_id=a.get("gen_ai.response.id"),
        input_tokens=as_int(
            a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens"))
        ),
        output_tokens=as_int(
            a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens"))
        ),
        duration_s=span.duration_s,
        tools=tools,
    )


def tool_run(span: Span, place: str) -> ToolRun:
    """An ``execute_tool`` span as a tool run."""
    a = span.attributes
    name = a.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool").strip()
    where = f"{place}: span {span.span_id}: gen_ai.tool.call.arguments"
    raw = a.get("gen_ai.tool.call.arguments")
    result = a.get("gen_ai.tool.call.result")
    failed = span.failure()
    return ToolRun(
        span_id=span.span_id,
        start=span.start,
        name=str(name),
        call_id=a.get("gen_ai.tool.call.id"),
        args=None if raw is None else arguments(raw, where),
        result=None if result is None else text_of(result),
        error=failed is not None,
        error_text=None if failed is None else failed[0],
        duration_s=span.duration_s,
        description=a.get("gen_ai.tool.description"),
    )


def message_of(m: Any, where: str) -> list[Message]:
    """One GenAI message (``{"role", "parts"}``) as messages: a message of tool results is
    one tool message per result."""
    if not isinstance(m, dict):
        raise TraceError(f"{where}: a message is {_kind(m)}, not an object with role and parts")
    role = str(m.get("role") or "user")
    if "parts" not in m and "tool_calls" in m:  # (its calls were read as none)
        raise TraceError(f"{where}: a {role} message holds OpenAI's tool_calls, not GenAI's parts")
    texts: list[str] = []
    calls: list[Call] = []
    results: list[Message] = []
    parts = m.get("parts")
    if parts is not None and not isinstance(parts, list):
        raise TraceError(f"{where}: a {role} message's parts are {_kind(parts)}, not a list")
    for part in parts or []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(text_of(part.get("content")))
        elif kind in ("tool_call", "function_call"):
            calls.append(_part_call(part, where))
        elif kind == "tool_call_response":
            results.append(
                Message("tool", text_of(part.get("response")), call_id=_str(part.get("id")))
            )
    if role == "tool" or results:
        return results
    if role not in ("system", "user", "assistant"):
        role = "assistant" if calls else "user"
    return [Message(role, "\n".join(t for t in texts if t), calls)]


def _from_events(events: list[Event], where: str) -> tuple[list[Message], list[Message]]:
    """The messages of the older per-message events (or of the oldest prompt and
    completion events)."""
    inputs: list[Message] = []
    outputs: list[Message] = []
    for e in events:
        role = _SENT_EVENTS.get(e.name)
        if role is not None:
            inputs.extend(_openai_message(role, _body(e), f"{where}: event {e.name}"))
        elif e.name == CHOICE_EVENT and not outputs:
            body = _body(e)
            message: dict[str, Any] = (
                body["message"] if isinstance(body.get("message"), dict) else body
            )
            outputs.extend(_openai_message("assistant", message, f"{where}: event {e.name}"))
        elif e.name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            key = "gen_ai.prompt" if e.name.endswith("prompt") else "gen_ai.completion"
            target = inputs if key == "gen_ai.prompt" else outputs
            for m in _list(json_value(e.attributes.get(key), f"{where}: {key}")):
                if isinstance(m, dict):
                    target.extend(_openai_message(str(m.get("role") or "user"), m, where))
    return inputs, outputs


def _body(event: Event) -> dict[str, Any]:
    body = event.body
    if body is None:
        body = event.attributes.get("gen_ai.event.content", event.attributes)
    body = json_value(body, f"event {event.name}")
    return body if isinstance(body, dict) else {"content": body}


def _openai_message(role: str, body: dict[str, Any], where: str) -> list[Message]:
    """A message in OpenAI's shape (``content``, ``tool_calls``, a tool message's ``id``)."""
    role = str(body.get("role") or role)
    content = body.get("content")
    text = _parts_text(content) if isinstance(content, list) else text_of(content)
    if role == "tool":
        call_id = body.get("id", body.get("tool_call_id"))
        return [Message("tool", text, call_id=_str(call_id))]
    calls = []
    for j, c in enumerate(_list(body.get("tool_calls"))):
        if not isinstance(c, dict):
            continue
        fn: dict[str, Any] = c["function"] if isinstance(c.get("function"), dict) else c
        name = str(fn.get("name") or "")
        calls.append(
            Call(
                _str(c.get("id")), name, arguments(fn.get("arguments"), f"{where}: tool_calls[{j}]")
            )
        )
    if role not in ("system", "user", "assistant"):
        role = "assistant" if calls else "user"
    return [Message(role, text, calls)]


def _parts_text(parts: Any) -> str:
    """The text of a list of parts (GenAI's ``content``, OpenAI's ``text``), or of text."""
    if isinstance(parts, str):
        return parts
    texts = []
    for part in _list(parts):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type", "text") == "text":
            texts.append(text_of(part.get("content", part.get("text"))))
    return "\n".join(t for t in texts if t)


def _part_call(part: dict[str, Any], where: str) -> Call:
    """A ``tool_call`` part as a call; refused where its name is no text, or where it holds
    no ``arguments`` but other fields (``args``: read as none, it scored as every argument
    missing)."""
    name = part.get("name")
    if name is not None and not isinstance(name, str):
        raise TraceError(f"{where}: a tool_call part's name is {_kind(name)}, not text")
    if "arguments" not in part:
        other = sorted(set(part) - {"type", "id", "name"})
        if other:
            held = ", ".join(map(repr, other))
            raise TraceError(f"{where}: tool_call {name!r} holds no 'arguments' but {held}")
    args = arguments(part.get("arguments"), f"{where}: {name!r} arguments")
    return Call(_str(part.get("id")), name or "", args)


def _messages(value: Any, where: str) -> list[Any]:
    """A messages attribute's list (absent: none); one message alone, or anything else, is
    refused: its calls would be lost without a word."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TraceError(f"{where}: {_kind(value)}, not a list of messages")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", str: "a text", list: "a list", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
