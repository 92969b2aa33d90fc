"""Traces in Anthropic's Messages form: a JSONL line per sample (and trial) whose ``messages``
are Messages API turns (a ``user``, ``assistant`` or ``system`` role, content a string or a
list of blocks), such as the SDK's ``Message.model_dump()`` writes an answer; an optional
``system`` beside them (a string or text blocks) is the system prompt.

An assistant turn becomes one AI message holding its blocks, with a tool call per
``tool_use`` block (its ``input`` the arguments; an ``input`` that is not an object is the
agent's behaviour and scores as an invalid argument) and the answer's ``usage`` as token
counts. A user turn's ``tool_result`` blocks become tool messages, its other blocks a human
message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import (
    first_messages,
    kept_keys,
    message_problem,
    read_jsonl,
    repeated_key_problem,
)
from tcbreplay._store.schema import INVALID_ARGUMENTS

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs


def sniff(file: TraceFile) -> Sniff:
    """A ``system`` beside the messages, and ``tool_use`` and ``tool_result`` blocks, are
    Anthropic's own; plain user and assistant turns it reads as well as OpenAI's form."""
    found = first_messages(file)
    if isinstance(found, Sniff):
        return found
    line, messages = found
    if "system" in line:
        return Sniff(0.95, "its first line has a system prompt beside messages (Anthropic's)")
    blocks = {
        b.get("type")
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict)
    }
    if {"tool_use", "tool_result"} & blocks:
        return Sniff(0.85, "its messages hold tool_use or tool_result blocks (Anthropic's)")
    if messages and all(m.get("role") in ("user", "assistant") for m in messages):
        return Sniff(0.4, "its messages are plain user and assistant turns")
    return Sniff.no("no system prompt beside its messages, nor tool_use or tool_result blocks")


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    return SourceTraces(read_lines(file.data, file.name))


def read_lines(data: bytes, label: str) -> list[TraceLine]:
    """Every line of an Anthropic traces file, checked."""
    return read_jsonl(data, label, convert, extra_keys=("system",))


# the keys of a turn this dialect reads (with those of the Messages API's answer; any other is
# kept beside it: see kept_keys)
_KNOWN = frozenset(
    {"role", "content", "id", "type", "model", "stop_reason", "stop_sequence", "usage", "container"}
)
_CALLS_IN = "a turn's calls are its content's tool_use blocks, their results tool_result blocks"


def convert(raw: list[Any], line: dict[str, Any], place: str, repeats: _json.Repeats) -> list[Any]:
    """Messages API turns (and the line's ``system``) as LangChain messages."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    system = line.get("system")
    if system is not None:
        if not isinstance(system, (str, list)) or (
            isinstance(system, list) and not all(_text_block(b) for b in system)
        ):
            raise message_problem(place, 0, "system must be a string or a list of text blocks")
        out.append(SystemMessage(content=system))
    for k, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            raise message_problem(
                place, k, "not an Anthropic message (role user, assistant or system)"
            )
        kept = kept_keys(m, _KNOWN, place, k, _CALLS_IN)
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if m["role"] == "assistant" else content
        elif not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
            raise message_problem(place, k, "content must be a string or a list of blocks")
        try:
            start = len(out)
            if m["role"] == "system":
                out.append(SystemMessage(content=content))
            elif m["role"] == "assistant":
                calls = [
                    _tool_call(b, place, k, repeats)
                    for b in content
                    if isinstance(b, dict) and b.get("type") == "tool_use"
                ]
                usage = m.get("usage")
                if usage is not None and not isinstance(usage, dict):
                    raise message_problem(place, k, "usage must be an object")
                usage = usage or {}
                for name in ("input_tokens", "output_tokens"):
                    n = usage.get(name)
                    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
                        raise message_problem(place, k, f"usage.{name} {n!r}: not a count of "
                                              "tokens (a whole number)")  # fmt: skip
                message = AIMessage(
                    content=content,
                    tool_calls=calls,
                    id=m.get("id") if isinstance(m.get("id"), str) else None,
                    response_metadata={
                        key: m[key] for key in ("model", "stop_reason") if m.get(key) is not None
                    },
                )
                if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
                    tokens_in = usage.get("input_tokens") or 0
                    tokens_out = usage.get("output_tokens") or 0
                    message.usage_metadata = {
                        "input_tokens": tokens_in,
                        "output_tokens": tokens_out,
                        "total_tokens": tokens_in + tokens_out,
                    }
                out.append(message)
            elif isinstance(content, str):
                out.append(HumanMessage(content=content))
            else:
                out += _user_turn(content, place, k, HumanMessage, ToolMessage)
            if kept and len(out) > start:  # with the turn's first message
                out[start].additional_kwargs.update(kept)
        except ValueError as exc:  # pydantic's: a field of the wrong type
            raise message_problem(place, k, "not an Anthropic message", exc) from exc
    return out


def _tool_call(block: dict[str, Any], place: str, k: int, repeats: _json.Repeats) -> dict[str, Any]:
    """A ``tool_use`` block as a LangChain tool call."""
    if not isinstance(block.get("name"), str):
        raise message_problem(place, k, "a tool_use block needs a name")
    args = block.get("input")
    repeated_key_problem(place, k, "a tool_use block's input", args, repeats)
    return {
        "name": block["name"],
        "args": args if isinstance(args, dict) else {INVALID_ARGUMENTS: args},
        "id": block.get("id") if isinstance(block.get("id"), str) else None,
    }


def _user_turn(
    blocks: list[dict[str, Any]], place: str, k: int, human: type, tool: type
) -> list[Any]:
    """A user turn's blocks: a tool message per tool_result, the rest as human messages."""
    out: list[Any] = []
    pending: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") != "tool_result":
            pending.append(block)
            continue
        if pending:
            out.append(human(content=pending))
            pending = []
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            raise message_problem(place, k, "a tool_result block needs a tool_use_id")
        result = block.get("content")
        out.append(
            tool(
                content="" if result is None else result,
                tool_call_id=call_id,
                status="error" if block.get("is_error") else "success",
            )
        )
    if pending:
        out.append(human(content=pending))
    return out


def _text_block(block: Any) -> bool:
    """A block a system prompt's list may hold: text, as a string or a ``text`` block."""
    if isinstance(block, dict):
        return block.get("type") == "text" and isinstance(block.get("text"), str)
    return isinstance(block, str)
