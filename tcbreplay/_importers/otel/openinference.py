"""OpenInference's conventions (Arize Phoenix and its instrumentors: LangChain, LlamaIndex,
DSPy, OpenAI Agents ...): every span says its kind in ``openinference.span.kind``.

A model call is an ``LLM`` span, its messages flattened into attributes:
``llm.input_messages.{i}.message.role``, ``.content`` (or ``.contents.{j}.message_content.text``),
an assistant's ``.tool_calls.{j}.tool_call.id``, ``.tool_call.function.name`` and
``.tool_call.function.arguments`` (JSON text), a tool message's ``.tool_call_id``; the same
under ``llm.output_messages``; its tools are ``llm.tools.{i}.tool.json_schema``, its model
``llm.model_name``, its token counts ``llm.token_count.prompt`` and ``.completion``. A tool
run is a ``TOOL`` span (``tool.name``, the arguments as ``input.value``, the result as
``output.value``: for LangChain, the ToolMessage itself); an agent is an ``AGENT`` span.
"""

from __future__ import annotations

from typing import Any

from tcbreplay import _json
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
from tcbreplay._importers.otel.spans import Span

KIND = "openinference.span.kind"
_ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user",
          "assistant": "assistant", "ai": "assistant", "model": "assistant", "tool": "tool",
          "function": "tool"}  # fmt: skip


def is_openinference(span: Span) -> bool:
    return KIND in span.attributes


def is_agent(span: Span) -> bool:
    return span.attributes.get(KIND) == "AGENT"


def is_tool_run(span: Span) -> bool:
    return span.attributes.get(KIND) == "TOOL"


def is_model_call(span: Span) -> bool:
    return span.attributes.get(KIND) == "LLM"


def turn(span: Span, place: str) -> Turn:
    """An ``LLM`` span as a turn."""
    a = span.attributes
    where = f"{place}: span {span.span_id}"
    tools = []
    for i, tool in sorted(_indexed(a, "llm.tools.").items()):
        schema = tool.get("tool.json_schema")
        if schema is not None:
            found = function_schema(json_value(schema, f"{where}: llm.tools.{i}"))
            if found is not None:
                tools.append(found)
    outputs = _messages(a, "llm.output_messages.", where)
    return Turn(
        span_id=span.span_id,
        start=span.start,
        inputs=_messages(a, "llm.input_messages.", where),
        outputs=outputs[:1],
        model=a.get("llm.model_name"),
        input_tokens=as_int(a.get("llm.token_count.prompt")),
        output_tokens=as_int(a.get("llm.token_count.completion")),
        duration_s=span.duration_s,
        tools=tools,
    )


def tool_run(span: Span, place: str) -> ToolRun:
    """A ``TOOL`` span as a tool run."""
    a = span.attributes
    where = f"{place}: span {span.span_id}"
    raw_args = a.get("tool_call.function.arguments", a.get("input.value"))
    args = None
    if raw_args is not None:
        args = arguments(raw_args, f"{where}: the tool's arguments")
    call_id = a.get("tool_call.id")
    result = a.get("output.value")
    failed = span.failure()
    error = failed is not None
    message = _tool_message(result)
    if message is not None:  # LangChain's ToolMessage, as OpenInference's LangChain writes it
        result = text_of(message.get("content"))
        call_id = call_id or message.get("tool_call_id")
        error = error or message.get("status") == "error"
    return ToolRun(
        span_id=span.span_id,
        start=span.start,
        name=str(a.get("tool.name") or a.get("tool_call.function.name") or span.name),
        call_id=call_id if isinstance(call_id, str) and call_id else None,
        args=args,
        result=None if result is None else text_of(result),
        error=error,
        error_text=None if failed is None else failed[0],
        duration_s=span.duration_s,
        description=a.get("tool.description"),
    )


def input_text(span: Span) -> str | None:
    """What a span says it was given (``input.value``), as text."""
    value = span.attributes.get("input.value")
    return value if isinstance(value, str) else None


def _tool_message(result: Any) -> dict[str, Any] | None:
    if not isinstance(result, str) or not result.startswith('{"type": "tool"'):
        return None
    try:
        value = _json.loads(result)
    except (ValueError, _json.LimitError):
        return None
    data = value.get("data") if isinstance(value, dict) else None
    return data if isinstance(data, dict) else None


def _indexed(a: dict[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """The attributes ``<prefix><i>.<rest>`` as ``{i: {rest: value}}``."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in a.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix) :].partition(".")
        if index.isdigit():
            out.setdefault(int(index), {})[rest] = value
    return out


def _messages(a: dict[str, Any], prefix: str, where: str) -> list[Message]:
    out = []
    for i, fields in sorted(_indexed(a, prefix).items()):
        out.append(_message(fields, f"{where}: {prefix}{i}"))
    return out


def _message(fields: dict[str, Any], where: str) -> Message:
    role = _ROLES.get(str(fields.get("message.role") or "").lower(), "user")
    text = fields.get("message.content")
    if text is None:
        parts = _indexed(fields, "message.contents.")
        text = "\n".join(
            str(p.get("message_content.text"))
            for _, p in sorted(parts.items())
            if p.get("message_content.text") is not None
        )
    calls = []
    for j, c in sorted(_indexed(fields, "message.tool_calls.").items()):
        name = c.get("tool_call.function.name")
        calls.append(
            Call(
                c.get("tool_call.id") or None,
                str(name or ""),
                arguments(c.get("tool_call.function.arguments"), f"{where}: tool_calls.{j}"),
            )
        )
    if calls:
        role = "assistant"
    return Message(
        role,
        text_of(text),
        calls,
        call_id=fields.get("message.tool_call_id") if role == "tool" else None,
        name=fields.get("message.name") if role == "tool" else None,
    )
