"""The Vercel AI SDK's spans (``experimental_telemetry``), named by ``ai.operationId``.

An agent is a ``generateText`` or ``streamText`` call (``ai.generateText``,
``ai.streamText``), each of its model calls a ``.doGenerate`` or ``.doStream`` span: sent
``ai.prompt.messages`` (JSON text of ``{role, content}`` messages, content a string or
parts: ``text``, ``tool-call`` with ``toolCallId``, ``toolName`` and ``args`` or
``input``, ``tool-result`` with ``result`` or ``output``), offered ``ai.prompt.tools``,
answered ``ai.response.text`` and ``ai.response.toolCalls``; token counts
``ai.usage.promptTokens``/``completionTokens`` (or ``inputTokens``/``outputTokens``). A tool
run is an ``ai.toolCall`` span: ``ai.toolCall.name``, ``.id``, ``.args`` (or ``.input``),
``.result`` (or ``.output``).
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
from tcbreplay._importers.otel.spans import Span

OPERATION = "ai.operationId"
_AGENTS = ("ai.generateText", "ai.streamText")
_MODEL_CALLS = ("ai.generateText.doGenerate", "ai.streamText.doStream")


def _operation(span: Span) -> Any:
    return span.attributes.get(OPERATION) or span.name


def is_vercel(span: Span) -> bool:
    return OPERATION in span.attributes or span.name.startswith("ai.")


def is_agent(span: Span) -> bool:
    return _operation(span) in _AGENTS


def is_model_call(span: Span) -> bool:
    return _operation(span) in _MODEL_CALLS


def is_tool_run(span: Span) -> bool:
    return _operation(span) == "ai.toolCall"


def turn(span: Span, place: str) -> Turn:
    """A ``doGenerate``/``doStream`` span as a turn."""
    a = span.attributes
    where = f"{place}: span {span.span_id}"
    inputs = []
    for m in _list(json_value(a.get("ai.prompt.messages"), f"{where}: ai.prompt.messages")):
        inputs.extend(_message(m, f"{where}: ai.prompt.messages"))
    calls = [
        Call(
            c.get("toolCallId") or None,
            str(c.get("toolName") or ""),
            arguments(c.get("args", c.get("input")), f"{where}: ai.response.toolCalls"),
        )
        for c in _list(
            json_value(a.get("ai.response.toolCalls"), f"{where}: ai.response.toolCalls")
        )
        if isinstance(c, dict)
    ]
    text = a.get("ai.response.text")
    outputs = [Message("assistant", text_of(text), calls)] if text is not None or calls else []
    tools = []
    for tool in _list(a.get("ai.prompt.tools")):
        schema = function_schema(json_value(tool, f"{where}: ai.prompt.tools"))
        if schema is not None:
            tools.append(schema)
    return Turn(
        span_id=span.span_id,
        start=span.start,
        inputs=inputs,
        outputs=outputs,
        model=a.get("ai.response.model") or a.get("ai.model.id"),
        response_id=a.get("ai.response.id"),
        input_tokens=as_int(a.get("ai.usage.promptTokens", a.get("ai.usage.inputTokens"))),
        output_tokens=as_int(a.get("ai.usage.completionTokens", a.get("ai.usage.outputTokens"))),
        duration_s=span.duration_s,
        tools=tools,
    )


def tool_run(span: Span, place: str) -> ToolRun:
    """An ``ai.toolCall`` span as a tool run."""
    a = span.attributes
    raw = a.get("ai.toolCall.args", a.get("ai.toolCall.input"))
    result = a.get("ai.toolCall.result", a.get("ai.toolCall.output"))
    failed = span.failure()
    return ToolRun(
        span_id=span.span_id,
        start=span.start,
        name=str(a.get("ai.toolCall.name") or ""),
        call_id=a.get("ai.toolCall.id") or None,
        args=None if raw is None else arguments(raw, f"{place}: span {span.span_id}: args"),
        result=None if result is None else text_of(result),
        error=failed is not None,
        error_text=None if failed is None else failed[0],
        duration_s=span.duration_s,
    )


def _message(m: Any, where: str) -> list[Message]:
    if not isinstance(m, dict):
        return []
    role = str(m.get("role") or "user")
    content = m.get("content")
    if isinstance(content, str):
        return [Message(role if role in ("system", "user", "assistant") else "user", content)]
    texts, calls, results = [], [], []
    for part in _list(content):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(text_of(part.get("text")))
        elif kind == "tool-call":
            calls.append(
                Call(
                    part.get("toolCallId") or None,
                    str(part.get("toolName") or ""),
                    arguments(part.get("args", part.get("input")), f"{where}: tool-call"),
                )
            )
        elif kind == "tool-result":
            output = part.get("result", part.get("output"))
            if isinstance(output, dict) and "value" in output and "type" in output:
                output = output["value"]  # v5's {type: "json" | "text", value}
            results.append(
                Message(
                    "tool", text_of(output), call_id=part.get("toolCallId") or None,
                    name=part.get("toolName"),
                )
            )  # fmt: skip
    if role == "tool" or results:
        return results
    return [Message(role if role in ("system", "user", "assistant") else "user",
                    "\n".join(t for t in texts if t), calls)]  # fmt: skip


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
