"""Traces in LangChain's form: a JSONL line per sample (and trial), messages as
``messages_to_dict`` writes them. A tool call without an ``id`` is read with none; one whose
``args`` repeat a key is refused."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers.dialect import GUESS, Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import (
    first_messages,
    message_problem,
    read_jsonl,
    repeated_key_problem,
)

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs


def sniff(file: TraceFile) -> Sniff:
    """LangChain's messages are dicts of ``type`` and ``data``; a first line whose messages
    tell no dialect (none, or none with a role) is read as LangChain's, as a fallback."""
    found = first_messages(file)
    if isinstance(found, Sniff):
        return found
    _, messages = found
    if any("type" in m and "data" in m for m in messages):
        return Sniff(0.9, "its messages are LangChain dicts (type, data)")
    if any("role" in m for m in messages):
        return Sniff.no("its messages have roles, not LangChain's type and data")
    return Sniff(GUESS / 2, "its first line's messages tell no dialect: read as LangChain's")


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    return SourceTraces(read_lines(file.data, file.name))


def read_lines(data: bytes, label: str) -> list[TraceLine]:
    """Every line of a LangChain traces file, checked."""
    return read_jsonl(data, label, convert)


def convert(raw: list[Any], line: dict[str, Any], place: str, repeats: _json.Repeats) -> list[Any]:
    from langchain_core.messages import message_to_dict, messages_from_dict

    messages = []
    for k, item in enumerate(raw):
        data = item.get("data") if isinstance(item, dict) else None
        usage = data.get("usage_metadata") if isinstance(data, dict) else None
        for name, n in usage.items() if isinstance(usage, dict) else ():
            if name.endswith("_tokens") and (isinstance(n, bool) or not isinstance(n, int)):
                # (LangChain would read true as 1 and "5" as 5)
                raise message_problem(place, k, f"usage_metadata.{name} {n!r}: not a count of "
                                      "tokens (a whole number)")  # fmt: skip
        for j, call in enumerate(_tool_calls(item)):
            args = call.get("args") if isinstance(call, dict) else None
            repeated_key_problem(place, k, f"tool_calls[{j}].args", args, repeats)
        try:
            (message,) = messages_from_dict([_with_call_ids(item)])
            message_to_dict(message)
        except Exception as exc:  # any shape LangChain cannot load is bad input
            error = message_problem(place, k, "not a LangChain message dict", exc)
            error.hint = "write messages with langchain_core.messages.messages_to_dict"
            raise error from exc
        messages.append(message)
    return messages


def _tool_calls(item: Any) -> list[Any]:
    """The tool calls of a message dict, as written (none where it has no list of them)."""
    data = item.get("data") if isinstance(item, dict) else None
    calls = data.get("tool_calls") if isinstance(data, dict) else None
    return calls if isinstance(calls, list) else []


def _with_call_ids(item: Any) -> Any:
    """An AI message dict whose tool calls all have an ``id`` key (LangChain needs the key;
    a call written without one gets none, as a provider that sends no ids)."""
    data = item.get("data") if isinstance(item, dict) else None
    if not isinstance(data, dict):
        return item
    calls = data.get("tool_calls")
    if not isinstance(calls, list) or all(not isinstance(c, dict) or "id" in c for c in calls):
        return item
    calls = [{"id": None, **c} if isinstance(c, dict) else c for c in calls]
    return {**item, "data": {**data, "tool_calls": calls}}
