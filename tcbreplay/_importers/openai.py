"""Traces in OpenAI's Chat Completions form, in and out.

In: a JSONL line per sample (and trial) whose ``messages`` are Chat Completions messages
(``system``/``developer``, ``user``, ``assistant`` with ``tool_calls`` whose ``arguments``
are JSON text, ``tool`` with ``tool_call_id``; content a string, null or a list of parts),
such as the SDK's ``ChatCompletionMessage.model_dump()`` writes them. Out
(:func:`to_openai`): the stored LangChain messages in that form, for ``export``.

Arguments that are not a JSON object are the agent's behaviour, not bad input: the call is
stored with its text under :data:`INVALID_ARGUMENTS`, a parameter no tool has, so scoring
counts it as an invalid argument (and ``export`` writes the text back as it was). ``NaN``,
``Infinity`` and ``-Infinity`` (no JSON, but what Python's reader and writer take) are
values, as every dialect that gives arguments as an object stores them (and ``export``
writes them back so): the arguments are still an object.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import first_messages, kept_keys, message_problem, read_jsonl
from tcbreplay._store.schema import INVALID_ARGUMENTS
from tcbreplay.errors import TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

# an assistant message's fields kept in LangChain's additional_kwargs when they hold a value,
# so that export writes them back
_ASSISTANT_EXTRAS = ("refusal", "audio", "function_call", "annotations", "reasoning_content")
# the keys of a message this dialect reads (any other is kept beside it: see kept_keys)
_KNOWN = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", *_ASSISTANT_EXTRAS})
_CALLS_IN = "an assistant message's calls are its tool_calls, a tool message's its tool_call_id"
# the system role LangChain marks a developer message with
_DEVELOPER = "__openai_role__"


def sniff(file: TraceFile) -> Sniff:
    """OpenAI's roles (tool, system, developer) and ``tool_calls`` are its own; plain user and
    assistant turns read the same in Anthropic's form."""
    found = first_messages(file)
    if isinstance(found, Sniff):
        return found
    _, messages = found
    if any(m.get("role") in ("tool", "system", "developer") or "tool_calls" in m for m in messages):
        return Sniff(0.8, "its messages have OpenAI's roles and tool_calls")
    if messages and all(m.get("role") in ("user", "assistant") for m in messages):
        return Sniff(0.5, "its messages are user and assistant turns (read as OpenAI's)")
    return Sniff.no("its messages have none of OpenAI's roles (tool, system, developer, user, "
                    "assistant) nor tool_calls")  # fmt: skip


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    return SourceTraces(read_lines(file.data, file.name))


def read_lines(data: bytes, label: str) -> list[TraceLine]:
    """Every line of an OpenAI traces file, checked."""
    return read_jsonl(data, label, convert)


def convert(
    raw: list[Any], line: dict[str, Any], place: str, repeats: _json.Repeats | None = None
) -> list[Any]:
    """Chat Completions messages as LangChain messages (arguments are JSON text, read here:
    ``repeats`` is not needed)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for k, m in enumerate(raw):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise message_problem(place, k, "not an OpenAI message (an object with a role)")
        role = m["role"]
        content = m.get("content")
        if content is None:
            content = ""
        if not isinstance(content, (str, list)):
            raise message_problem(place, k, "content must be a string, a list of parts or null")
        name = m.get("name")
        kept = kept_keys(m, _KNOWN, place, k, _CALLS_IN)
        try:
            if role in ("system", "developer"):
                extra = {_DEVELOPER: "developer"} if role == "developer" else {}
                out.append(
                    SystemMessage(content=content, name=name, additional_kwargs={**kept, **extra})
                )
            elif role == "user":
                out.append(HumanMessage(content=content, name=name, additional_kwargs=kept))
            elif role == "assistant":
                calls = m.get("tool_calls") or []
                if not isinstance(calls, list):
                    raise message_problem(place, k, "tool_calls must be a list")
                made = [_tool_call(c, place, k, j) for j, c in enumerate(calls)]
                legacy = m.get("function_call")
                if legacy is not None:  # the API's call before tool_calls: a call all the same
                    if not isinstance(legacy, dict):
                        raise message_problem(place, k, "function_call must be an object")
                    made.append(_tool_call({"function": legacy}, place, k, len(made)))
                extras = {**kept, **{key: m[key] for key in _ASSISTANT_EXTRAS
                                     if m.get(key) and key != "function_call"}}  # fmt: skip
                out.append(
                    AIMessage(content=content, name=name, tool_calls=made, additional_kwargs=extras)
                )
            elif role == "tool":
                call_id = m.get("tool_call_id")
                if not isinstance(call_id, str):
                    raise message_problem(place, k, "a tool message needs a tool_call_id")
                out.append(
                    ToolMessage(
                        content=content, tool_call_id=call_id, name=name, additional_kwargs=kept
                    )
                )
            else:
                raise message_problem(
                    place, k, f"role {role!r}: not system, developer, user, assistant or tool"
                )
        except ValueError as exc:  # pydantic's: a field of the wrong type
            raise message_problem(place, k, "not an OpenAI message", exc) from exc
    return out


def _tool_call(call: Any, place: str, k: int, j: int) -> dict[str, Any]:
    """One ``tool_calls`` entry as a LangChain tool call."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise message_problem(place, k, f"tool_calls[{j}] needs function.name")
    text = fn.get("arguments")
    if text is None or text == "":  # no arguments at all
        args: dict[str, Any] = {}
    elif not isinstance(text, str):
        raise message_problem(place, k, f"tool_calls[{j}].function.arguments must be JSON text")
    else:
        args = parse_arguments(text, f"{place}: message {k}: tool_calls[{j}].function.arguments")
    call_id = call.get("id")
    return {"name": fn["name"], "args": args, "id": call_id if isinstance(call_id, str) else None}


def parse_arguments(text: str, where: str) -> dict[str, Any]:
    """A model's arguments text as a call's arguments: the object it holds, or, for text that
    is not a JSON object, the text under INVALID_ARGUMENTS (JSON beyond the limits of
    :mod:`tcbreplay._json` is refused, ``where`` naming it, as in any file read). An
    object that repeats a key is refused (``where`` names the arguments), as the metric spec
    makes it an error; inside its values, a repeated key keeps its last value. ``NaN`` and
    ``Infinity`` are read as values (and ``1e400`` as infinity), as Python's reader reads
    them in any dialect whose arguments are an object: the same calls score the same."""
    repeats: _json.Repeats = {}
    try:
        value = _json.loads(text, repeats=repeats)
    except _json.LimitError as exc:  # beyond what tcbreplay stores: refused, as in any JSON
        raise TraceError(f"{where}: {exc.problem}", hint=_json.HINT) from None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return {INVALID_ARGUMENTS: text}
    key = _json.repeated_key(value, repeats)
    if key is not None:
        raise TraceError(f"{where} repeats the key {key!r}")
    surrogate = _json.lone_surrogate(value, text)
    if surrogate:
        raise TraceError(f"{where}: holds a lone surrogate {surrogate}, which is not valid Unicode")
    return value


def arguments_text(args: Any) -> str:
    """A call's arguments as OpenAI's JSON text (the original text of invalid arguments)."""
    if isinstance(args, dict) and set(args) == {INVALID_ARGUMENTS}:
        text = args[INVALID_ARGUMENTS]
        if isinstance(text, str):
            return text
    return json.dumps(args, ensure_ascii=False)


def to_openai(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages (``message_to_dict`` form) as Chat Completions messages; what OpenAI's
    form has no place for (ids, usage, response metadata) is left out."""
    out = []
    for item in messages:
        kind, data = item.get("type"), item.get("data") or {}
        content = data.get("content", "")
        extra = data.get("additional_kwargs") or {}
        m: dict[str, Any]
        if kind == "system":
            m = {"role": extra.get(_DEVELOPER, "system"), "content": content}
        elif kind == "human":
            m = {"role": "user", "content": content}
        elif kind == "ai":
            calls = data.get("tool_calls") or []
            m = {"role": "assistant", "content": content if content or not calls else None}
            m.update({key: extra[key] for key in _ASSISTANT_EXTRAS if extra.get(key)})
            if calls:
                m["tool_calls"] = [
                    {
                        "id": c.get("id"),
                        "type": "function",
                        "function": {
                            "name": c.get("name"),
                            "arguments": arguments_text(c.get("args")),
                        },
                    }
                    for c in calls
                ]
        elif kind == "tool":
            m = {"role": "tool", "tool_call_id": data.get("tool_call_id"), "content": content}
        else:
            raise TraceError(f"a {kind!r} message: OpenAI's form has no role for it")
        if data.get("name") is not None:
            m["name"] = data["name"]
        out.append(m)
    return out
