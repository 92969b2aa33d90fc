"""What the conventions read out of spans, in one shape: model calls (:class:`Turn`, the
messages sent and answered), tool runs (:class:`ToolRun`) and the agent's messages
(:class:`Message`, with its tool calls as :class:`Call`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tcbreplay import _json
from tcbreplay._store.schema import INVALID_ARGUMENTS
from tcbreplay.errors import TraceError


@dataclass(slots=True)
class Call:
    """A tool call an assistant message asks for: its id (None when the convention has
    none), the tool's name and the arguments (``{INVALID_ARGUMENTS: text}`` for arguments
    that were not a JSON object)."""

    id: str | None
    name: str
    args: dict[str, Any]


@dataclass(slots=True)
class Message:
    """A chat message: ``system``, ``user``, ``assistant`` (with its ``calls``) or ``tool``
    (the result of the call ``call_id``)."""

    role: str
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    error: bool = False

    def key(self) -> tuple[Any, ...]:
        """What makes two messages the same one, seen in two model calls' inputs (a call's
        arguments are left out where it has an id: conventions write them differently)."""
        calls = tuple(
            (c.id, c.name) if c.id else (c.name, json.dumps(c.args, sort_keys=True, default=str))
            for c in self.calls
        )
        return (self.role, self.text.strip(), calls, self.call_id)


@dataclass(slots=True)
class Turn:
    """One model call: what it was sent and what it answered, when, by which model, with
    what token counts and tools offered (tool schemas, OpenAI's function shape)."""

    span_id: str
    start: int
    inputs: list[Message]
    outputs: list[Message]
    model: str | None = None
    response_id: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class ToolRun:
    """One tool run: the call it answers (by id, else by name and arguments), its result
    text and whether it failed."""

    span_id: str
    start: int
    name: str
    call_id: str | None
    args: dict[str, Any] | None
    result: str | None
    error: bool = False
    # why it failed (its span's status message, exception or error type), for a failed run
    # without a result: the tool message that answers its call says it
    error_text: str | None = None
    duration_s: float | None = None
    description: str | None = None


def json_value(value: Any, where: str) -> Any:
    """An attribute that holds JSON: text is parsed (within the JSON limits), anything else
    (a structured attribute) is the value itself."""
    if not isinstance(value, str):
        return value
    try:
        return _json.loads(value)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{where}: not valid JSON: {exc.msg}") from exc
    except _json.LimitError as exc:
        raise TraceError(f"{where}: {exc}", hint=_json.HINT) from None


def arguments(value: Any, where: str) -> dict[str, Any]:
    """A call's arguments: an object as it is, JSON text read (text that is no JSON object
    is the agent's, kept under INVALID_ARGUMENTS, as the openai dialect keeps it); none:
    no arguments."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        from tcbreplay._importers.openai import parse_arguments

        return parse_arguments(value, where)
    return {INVALID_ARGUMENTS: json.dumps(value, ensure_ascii=False, default=str)}


def text_of(value: Any) -> str:
    """Content as text: a string as it is, a result that is not a string as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def as_int(value: Any) -> int | None:
    """A token count a span holds (an integer, or its digits as text), None when it holds
    none; another value is refused (it was read as none, and its call's counts as 0)."""
    if value is None:
        return None
    if not isinstance(value, bool):
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            pass
    raise TraceError(f"a token count of {str(value)[:40]!r}: not an integer")


def function_schema(tool: Any) -> dict[str, Any] | None:
    """A tool definition (OpenAI's ``{"type": "function", "function": {...}}``, its bare
    function, the GenAI conventions' ``{"type", "name", "description", "parameters"}``) as
    ``{"name", "description", "parameters"}``; None for one without a name."""
    if not isinstance(tool, dict):
        return None
    fn: dict[str, Any] = tool["function"] if isinstance(tool.get("function"), dict) else tool
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    out: dict[str, Any] = {"name": name}
    if isinstance(fn.get("description"), str):
        out["description"] = fn["description"]
    params = fn.get("parameters", fn.get("input_schema", fn.get("inputSchema")))
    if isinstance(params, dict):
        out["parameters"] = params
    role = tool.get("role", fn.get("role"))  # tcbreplay's (export --format otlp writes it)
    if role is not None:
        out["role"] = role
    return out
