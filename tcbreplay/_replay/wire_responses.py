"""OpenAI's Responses API as a wire form of ``serve``: ``POST /v1/responses``, which
ChatOpenAI switches to by itself (``use_responses_api``, ``reasoning=...``).

A request's ``input`` (a text, or a list of items) becomes LangChain messages: ``instructions``
the system message; a ``message`` item of role ``system`` or ``developer`` a system message,
``user`` a human message, ``assistant`` (its ``output_text`` parts) an AI message together
with the ``function_call`` items that follow it (one model turn, which a client sends back as
those items); a ``function_call`` item a call (its ``arguments`` JSON text, read as Chat
Completions' are: text that is no JSON object is an invalid call); a ``function_call_output``
item the tool message of its ``call_id`` (a call after the outputs of a model turn's calls is
one more of them where the server answered them together: see :func:`_answered`).
``reasoning`` items are left out, as the canonical form leaves reasoning out; a field of
``reasoning`` (``effort``, ``summary``) is served only as the recording's model settings have
it (a 400 names it otherwise). ``text.format`` is the sampling setting Chat Completions calls
``response_format`` (in that API's form). What a recording cannot answer is refused with a
400 naming it: state kept by OpenAI (``previous_response_id``, ``conversation``, an
``item_reference``, a ``prompt`` template), another kind of item or tool (built-in tools
such as ``web_search``), ``n`` other than 1, and ``text.verbosity`` (a recording keeps no
verbosity to compare it with). ``background: true`` is answered finished at once, and the
answer kept for ``GET /v1/responses/{id}`` (and its cancel and ``DELETE``:
:mod:`tcbreplay._replay.kept`).

The answer: a ``response`` object whose ``output`` is a ``message`` item (its text as
``output_text``), then a ``function_call`` item per call (``call_id`` the recorded id), with
``usage``; streamed as the API's events (``response.created``, per item
``response.output_item.added``, its text's or arguments' deltas and ``.done``,
``response.output_item.done``, then ``response.completed``); errors in OpenAI's shape.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from tcbreplay._replay.fingerprint import canonical_params
from tcbreplay._replay.settings import allowed_refused, verbosity_refused
from tcbreplay._replay.wire import (
    Answer,
    MessageCache,
    OpenAIWire,
    WireError,
    WireRequest,
    checked_schema,
    dumps_json,
    read_units,
    refuse_unanswered,
)

_RANGES = {"temperature": (0, 2), "top_p": (0, 1)}
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text", "text")
# what a request leaves to a conversation OpenAI keeps: no recording holds it
_STATEFUL = ("previous_response_id", "conversation")


class _Turn(dict[str, Any]):
    """Items of ``input`` that are one message (an assistant message and the calls after it
    are one model turn), and where each of them is (a reasoning item between them is none
    of its items, but counts in the places of those after it)."""

    def __init__(self, items: list[Any], k: int) -> None:
        self.at = [k]  # (the dict's lists: an item added is in its JSON too)
        super().__init__({"k": k, "items": items, "at": self.at})
        self.k = k
        self.members = items

    def add(self, item: Any, k: int) -> None:
        self.members.append(item)
        self.at.append(k)


def _text(content: Any, place: str) -> Any:
    """A message item's content: a text, or its parts (text parts joined by the canonical
    form; others, such as ``input_image``, kept as parts)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        raise WireError(f"{place}.content: a text or a list of content parts is required")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            if not isinstance(part.get("text"), str):
                raise WireError(f"{place}.content[{j}].text: a string is required")
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal") or "")})
        elif isinstance(kind, str) and kind:
            parts.append(part)
        else:
            raise WireError(f"{place}.content[{j}]: a content part with a type is required")
    return parts


def _turns(items: list[Any], together: Callable[[str, str], bool] | None = None) -> list[_Turn]:
    """The input's items as messages (see the module); ``together``: whether two calls (by
    their ids) were served in one answer (see :func:`_answered`)."""
    out: list[_Turn] = []
    for k, item in enumerate(items):
        place = f"input[{k}]"
        if not isinstance(item, dict):
            raise WireError(f"{place}: an input item (an object) is required")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "reasoning":
            continue
        if kind == "message":
            if item.get("role") not in _ROLES:
                raise WireError(f"{place}.role {item.get('role')!r}: user, assistant, system or "
                                "developer")  # fmt: skip
            out.append(_Turn([item], k))
        elif kind == "function_call":
            for key in ("call_id", "name"):
                if not isinstance(item.get(key), str):
                    raise WireError(f"{place}.{key}: a string is required")
            # (the items before it, reasoning left out, are a model turn's: it is one more call)
            last = out[-1].members[0] if out else {}
            if last.get("role") == "assistant" or last.get("type") == kind:
                out[-1].add(item, k)
            elif together is not None and (model := _answered(out, item, together)):
                model.add(item, k)
            else:
                out.append(_Turn([item], k))
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise WireError(f"{place}.call_id: a string is required")
            out.append(_Turn([item], k))
        elif kind == "item_reference":
            raise WireError(f"{place}: an item_reference names an item OpenAI keeps; send the "
                            "item itself")  # fmt: skip
        else:
            raise WireError(f"{place}.type {kind!r}: message, function_call or "
                            "function_call_output (reasoning left out)")  # fmt: skip
    return out


def _answered(
    turns: list[_Turn], call: dict[str, Any], together: Callable[[str, str], bool]
) -> _Turn | None:
    """The model turn ``call`` is one more call of, coming after the outputs of its calls,
    or None. OpenAI's guide sends parallel calls back each followed by its output
    (``[call0, out0, call1, out1]``), which reads as the calls of one turn or as turns one
    after the other (``[call0, out0]`` answered with ``call1``): the server tells them by
    the calls it answered together."""
    k = len(turns)
    while k > 0 and turns[k - 1].members[0].get("type") == "function_call_output":
        k -= 1
    if k == 0 or k == len(turns):
        return None
    model = turns[k - 1]
    if model.members[0].get("role", "assistant") != "assistant":
        return None
    ids = {item["call_id"] for item in model.members if item.get("type") == "function_call"}
    answered = all(t.members[0].get("call_id") in ids for t in turns[k:])
    return model if answered and any(together(i, call["call_id"]) for i in ids) else None


def _convert(units: list[Any]) -> list[Any]:
    """The LangChain messages of the input's turns (and ``instructions``)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from tcbreplay._importers.openai import parse_arguments

    out: list[Any] = []
    for unit in units:
        if isinstance(unit, _Instructions):
            out.append(SystemMessage(content=unit.value))
            continue
        first, place = unit.members[0], f"input[{unit.k}]"
        if first.get("type") == "function_call_output":
            output = first.get("output")
            if not isinstance(output, str | list):
                raise WireError(f"{place}.output: a text or a list of content parts is required")
            result = output if isinstance(output, str) else _text(output, place + ".output")
            out.append(ToolMessage(content=result, tool_call_id=first["call_id"]))
            continue
        role = first.get("role", "assistant")
        if role != "assistant":
            text = _text(first.get("content"), place)
            system = role in ("system", "developer")
            out.append(SystemMessage(content=text) if system else HumanMessage(content=text))
            continue
        said = "" if first.get("type") == "function_call" else _text(first.get("content"), place)
        calls = []
        for j, item in enumerate(unit.members):
            if item.get("type") != "function_call":
                continue
            where = f"input[{unit.at[j]}].arguments"
            text = item.get("arguments")
            if not isinstance(text, str):
                raise WireError(f"{where}: JSON text is required")
            # (a TraceError of arguments beyond what is stored: a 400, its line naming them)
            args = parse_arguments(text, where) if text else {}
            calls.append({"name": item["name"], "args": args, "id": item["call_id"]})
        out.append(AIMessage(content=said, tool_calls=calls))
    return out


class _Instructions(dict[str, Any]):
    """The request's ``instructions`` as a unit of its messages."""

    def __init__(self, value: Any) -> None:
        super().__init__({"\x00instructions": value})
        self.value = value


def _places(k: int, unit: Any, n: int) -> list[str]:
    if isinstance(unit, _Instructions):
        return ["instructions"] * n
    return [f"input[{unit.k}]"] * n


def _inside(turns: list[_Turn]) -> Callable[[str, str], str]:
    """A path into a message as the body has it: a model turn's ``tool_calls[i]`` its i-th
    function_call item (``.arguments``, ``.name``), a tool message's content its
    ``output``, the call it answers its ``call_id``."""
    by_place = {f"input[{t.k}]": t for t in turns}

    def inside(place: str, rest: str) -> str:
        turn = by_place.get(place)
        if turn is None:
            return place + rest
        called = re.match(r"\.tool_calls\[(\d+)\]", rest)
        calls = [j for j, item in enumerate(turn.members) if item.get("type") == "function_call"]
        if called is not None and int(called[1]) < len(calls):
            return f"input[{turn.at[calls[int(called[1])]]}]" + rest[called.end() :]
        if turn.members[0].get("type") == "function_call_output":
            for field, sent in ((".content", ".output"), (".call", ".call_id")):
                if rest == field or rest[len(field) : len(field) + 1] in (".", "["):
                    return place + sent + rest[len(field) :]
        return place + rest

    return inside


def _settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's sampling settings (canonical names), refusing what the API would refuse
    or a recording cannot give."""
    for key in _STATEFUL:
        if body.get(key) is not None:
            raise WireError(f"{key}: a conversation kept by OpenAI is not served; send the whole "
                            "input")  # fmt: skip
    for key in ("stream", "parallel_tool_calls", "background"):
        if key in body and not isinstance(body[key], bool):
            raise WireError(f"{key} {body[key]!r}: true or false")
    for name, (low, high) in _RANGES.items():
        value = body.get(name)
        if value is not None and not (
            isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and low <= value <= high
        ):  # fmt: skip
            raise WireError(f"{name} {value!r}: a number from {low} to {high}")
    tokens = body.get("max_output_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                               or tokens < 1):  # fmt: skip
        raise WireError(f"max_output_tokens {tokens!r}: a whole number of 1 or more")
    if body.get("prompt") is not None:
        raise WireError("prompt: a prompt template kept by OpenAI is not served; send its "
                        "instructions and input")  # fmt: skip
    if body.get("n") not in (None, 1):  # (no field of the API's: Chat Completions' n)
        raise WireError(f"n {body['n']!r}: a recording holds one answer a turn; ask for one")
    params = canonical_params(body)
    reasoning = body.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, dict):
        raise WireError("reasoning: an object ({effort, summary}) is required")
    effort = (reasoning or {}).get("effort")
    if effort is not None and not (isinstance(effort, str) and effort):
        raise WireError(f"reasoning.effort {effort!r}: a text such as low, medium or high")
    if effort is not None:
        params["reasoning_effort"] = effort
    found = _format(body.get("text"))
    if found is not None:
        params["response_format"] = found
    return params


def _reasoning(body: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """The fields of ``reasoning`` (read by :func:`_settings`), each by its place with its
    name and value: served only as the recording's model settings have them."""
    reasoning = body.get("reasoning") or {}
    return {f"reasoning.{k}": (k, v) for k, v in reasoning.items() if v is not None}


def _format(text: Any) -> dict[str, Any] | None:
    """``text.format`` as Chat Completions' ``response_format``, the setting a recording has
    (its ``json_schema`` form nests what the Responses API has beside the type), or None."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise WireError("text: an object ({format, verbosity}) is required")
    if text.get("verbosity") is not None:
        raise WireError(verbosity_refused(text["verbosity"], "text.verbosity"))
    given = text.get("format")
    if given is None:
        return None
    kind = given.get("type") if isinstance(given, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        raise WireError(f"text.format.type {kind!r}: text, json_object or json_schema")
    if kind == "json_schema":
        if not isinstance(given.get("schema"), dict) or not isinstance(given.get("name"), str):
            raise WireError("text.format: a json_schema format needs a name and a schema object")
        return {"type": kind, "json_schema": {k: v for k, v in given.items() if k != "type"}}
    return {"type": kind}


def _choice(body: Mapping[str, Any]) -> dict[str, Any]:
    choice = body.get("tool_choice")
    if choice is None or choice in ("none", "auto", "required"):
        pass
    elif not isinstance(choice, dict):
        raise WireError(f"tool_choice {choice!r}: none, auto, required or an object naming a "
                        "function")  # fmt: skip
    elif choice.get("type") == "function":
        if not (isinstance(choice.get("name"), str) and choice["name"]):
            raise WireError("tool_choice.name: the name of the function to call is required")
    elif choice.get("type") != "allowed_tools":
        raise WireError(f"tool_choice.type {choice.get('type')!r}: function or allowed_tools")
    else:
        said = allowed_refused(choice, "tool_choice")
        if said is not None:
            raise WireError(said)
    # (max_tool_calls counts calls of built-in tools, which are not served: no function call)
    calls = body.get("max_tool_calls")
    if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int)
                              or calls < 1):  # fmt: skip
        raise WireError(f"max_tool_calls {calls!r}: a whole number of 1 or more")
    return {k: body[k] for k in ("tool_choice", "parallel_tool_calls") if k in body}


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise WireError("tools: a list of {type: function, name, parameters} is required")
    specs: list[dict[str, Any]] = []
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise WireError(f"tools[{k}]: function tools only ({kind!r} is not served)")
        if not isinstance(tool.get("name"), str):
            raise WireError(f"tools[{k}]: a function tool with a name is required")
        checked_schema(tool, f"tools[{k}]", "parameters")
        specs.append({"name": tool["name"], "description": tool.get("description") or "",
                      "parameters": tool.get("parameters") or {}})  # fmt: skip
    return specs


class ResponsesWire(OpenAIWire):
    """``POST /v1/responses`` (see the module); its errors are Chat Completions'."""

    name = "responses"

    def read(
        self, body: Mapping[str, Any], cache: MessageCache | None = None, target: str = ""
    ) -> WireRequest:
        params = _settings(body)
        given = body.get("input")
        if isinstance(given, str):
            given = [{"type": "message", "role": "user", "content": given}]
        if not isinstance(given, list) or not given:
            raise WireError("input: a text or a non-empty list of input items is required")
        if body.get("instructions") is not None and not isinstance(body["instructions"], str):
            raise WireError("instructions: a string is required")
        turns = _turns(given, None if cache is None else cache.calls.together)
        units: list[Any] = list(turns)
        if body.get("instructions") is not None:
            units.insert(0, _Instructions(body["instructions"]))
        messages, entries, parts, places = read_units(self.name, units, _convert, cache, _places)
        refuse_unanswered(entries, places, "call_id", "function_call")
        return WireRequest(
            messages=messages,
            entries=entries,
            parts=parts,
            tools=_tools(body),
            params=params,
            model=str(body.get("model") or ""),
            stream=bool(body.get("stream")),
            choice=_choice(body),
            places=places,
            sent=len(given),
            inside=_inside(turns),
            said_back={"background": body.get("background") is True},
            as_recorded=_reasoning(body),
        )

    def _items(self, answer: Answer) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if answer.text or not answer.calls:
            text = {"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}
            items.append({"id": f"msg_{answer.id}", "type": "message", "status": "completed",
                          "role": "assistant", "content": [text]})  # fmt: skip
        for call in self._calls(answer):
            items.append({"id": f"fc_{call['id']}", "type": "function_call",
                          "status": "completed", "call_id": call["id"],
                          "name": call["function"]["name"],
                          "arguments": call["function"]["arguments"]})  # fmt: skip
        return items

    def _response(self, answer: Answer, request: WireRequest, done: bool) -> dict[str, Any]:
        said = request.said_back
        return {
            "id": said.get("id") or f"resp_{answer.id}", "object": "response",
            "created_at": int(time.time()), "background": bool(said.get("background")),
            "status": "completed" if done else "in_progress", "model": request.model,
            "output": self._items(answer) if done else [], "error": None,
            "incomplete_details": None, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": {
                "input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens,
                "total_tokens": answer.input_tokens + answer.output_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0}} if done else None,
        }  # fmt: skip

    def answer(self, answer: Answer, request: WireRequest) -> bytes:
        return dumps_json(self._response(answer, request, True))

    def stream(self, answer: Answer, request: WireRequest, after: int = -1) -> bytes:
        """The answer's events (``after``: those after this sequence number only, as a
        client resuming a background response's stream asks)."""
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": self._response(answer, request, False)}
        ]
        for k, item in enumerate(self._items(answer)):
            at = {"output_index": k, "item_id": item["id"]}
            if item["type"] == "message":
                part = item["content"][0]
                events += [
                    {"type": "response.output_item.added", "output_index": k,
                     "item": {**item, "status": "in_progress", "content": []}},
                    {"type": "response.content_part.added", **at, "content_index": 0,
                     "part": {**part, "text": ""}},
                    {"type": "response.output_text.delta", **at, "content_index": 0,
                     "delta": part["text"], "logprobs": []},
                    {"type": "response.output_text.done", **at, "content_index": 0,
                     "text": part["text"], "logprobs": []},
                    {"type": "response.content_part.done", **at, "content_index": 0,
                     "part": part},
                ]  # fmt: skip
            else:
                events += [
                    {"type": "response.output_item.added", "output_index": k,
                     "item": {**item, "status": "in_progress", "arguments": ""}},
                    {"type": "response.function_call_arguments.delta", **at,
                     "delta": item["arguments"]},
                    {"type": "response.function_call_arguments.done", **at,
                     "name": item["name"], "arguments": item["arguments"]},
                ]  # fmt: skip
            events.append({"type": "response.output_item.done", "output_index": k, "item": item})
        events.append({"type": "response.completed",
                       "response": self._response(answer, request, True)})  # fmt: skip
        return b"".join(
            b"event: " + e["type"].encode() + b"\ndata: "
            + dumps_json({**e, "sequence_number": n}) + b"\n\n"
            for n, e in enumerate(events) if n > after
        )  # fmt: skip
