"""Anthropic's Messages as a wire form of ``serve``: ``POST /v1/messages``.

A request's ``messages`` (and ``system`` beside them) are read by the Anthropic importer's
reader, each ``tool_result`` block of a user turn a tool message of its own (and the blocks
between them messages of their own); its tools' ``input_schema`` are their parameters. The
answer is a ``message`` (a text block, then a ``tool_use`` block per call); streamed, the
API's events: ``message_start``, a start, delta and stop per content block, ``message_delta``
and ``message_stop``; errors as ``{"type": "error", "error": {...}}``.

``output_config.format`` (a JSON schema the answer must follow: ChatAnthropic's
``with_structured_output(method="json_schema")``) is the request's ``response_format``, as a
recording keeps a call's (``{"schema": ...}``); another field of ``output_config``
(``effort``) is served only as the recording's model settings have it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tcbreplay._replay.fingerprint import canonical_params, normalized
from tcbreplay._replay.wire import (
    CHOICE,
    ERROR_TYPES,
    Answer,
    MessageCache,
    Wire,
    WireError,
    WireRequest,
    checked_schema,
    dumps_json,
    listed_messages,
    read_units,
    refuse_calls_left,
    refuse_settings,
    refuse_unanswered,
)


def _anthropic_places(k: int, unit: Any, n: int) -> list[str]:
    """Where the ``n`` messages of the body's message ``k`` are: each tool_result block of a
    user turn is a message of its own, named by its block (alone too: a result left out
    after it is the next block), and so are the blocks between them (a turn of text blocks
    alone is named as a whole)."""
    blocks = unit.get("content") if isinstance(unit, dict) else None
    if n < 1 or not isinstance(blocks, list):
        return [f"messages[{k}]"] * n
    starts: list[int] = []
    pending = None  # the first of the blocks since the last tool_result
    for j, block in enumerate(blocks):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            starts += ([] if pending is None else [pending]) + [j]
            pending = None
        elif pending is None:
            pending = j
    starts += [] if pending is None else [pending]
    if len(starts) != n or (n == 1 and pending is not None):  # (see above)
        return [f"messages[{k}]"] * n
    return [f"messages[{k}].content[{j}]" for j in starts]


def _refuse_older_answers(messages: list[Any]) -> None:
    """Refuse a tool_result that answers a tool_use of an assistant message before the last
    one before it, as the API refuses it (each tool_result answers a tool_use of the message
    before its own; user messages in a row are one turn there): a malformed request, not one
    that differs from a recording. A result that answers no tool_use at all is said by
    :func:`~tcbreplay._replay.wire.refuse_unanswered`."""
    made: dict[str, int] = {}  # each tool_use's id -> the message that made it
    last: int | None = None  # the last assistant message so far
    for k, message in enumerate(messages):
        said: dict[str, Any] = message if isinstance(message, dict) else {}
        content = said.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        if said.get("role") == "assistant":
            last = k
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    made[str(block.get("id"))] = k  # (an id made again: its last)
            continue
        for j, block in enumerate(blocks):
            if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                continue
            call_id = block.get("tool_use_id")
            at = made.get(str(call_id))
            if at is not None and at != last:
                raise WireError(
                    f"messages[{k}].content[{j}].tool_use_id {call_id!r}: answers a tool_use "
                    f"of messages[{at}], not of the assistant message just before it "
                    f"(messages[{last}]); a tool_result answers a tool_use of the message "
                    "before its own"
                )


# the field of a request's output_config that gives the schema its answer must follow
_SCHEMA = "output_config.format.schema"


def _output_config(config: Any) -> tuple[Any, dict[str, tuple[str, Any]]]:
    """The ``response_format`` an ``output_config`` asks (its ``format``'s schema as a
    recording keeps a call's, or None), and its other fields, each by its place with its name
    and value: served only where the recording's model settings have them."""
    if config is None:
        return None, {}
    if not isinstance(config, dict):
        raise WireError("output_config: an object ({effort, format}) is required")
    others = {f"output_config.{k}": (k, v) for k, v in config.items()
              if k != "format" and v is not None}  # fmt: skip
    given = config.get("format")
    if given is None:
        return None, others
    if not isinstance(given, dict) or given.get("type") != "json_schema":
        kind = given.get("type") if isinstance(given, dict) else given
        raise WireError(f"output_config.format.type {kind!r}: json_schema (a format object "
                        "{type, schema})")  # fmt: skip
    schema = given.get("schema")
    if not isinstance(schema, dict):
        raise WireError(f"{_SCHEMA}: a JSON schema object is required")
    extra = [k for k in given if k not in ("type", "schema")]
    if extra:
        raise WireError(f"output_config.format.{extra[0]}: not served (a format is its type "
                        "and schema)")  # fmt: skip
    return normalized({"schema": schema}), others


class AnthropicWire(Wire):
    """Messages: ``POST /v1/messages``."""

    name = "anthropic"

    def read(
        self, body: Mapping[str, Any], cache: MessageCache | None = None, target: str = ""
    ) -> WireRequest:
        from tcbreplay._importers import anthropic

        refuse_settings(body, self.name)

        def convert(units: list[Any]) -> list[Any]:
            # the system prompt beside the messages is the first unit (a line's "system")
            system = [u for u in units if isinstance(u, _System)]
            line = {"system": system[0].value} if system else {}
            rest = [u for u in units if not isinstance(u, _System)]
            return anthropic.convert(rest, line, "messages", {})

        units: list[Any] = list(listed_messages(body))
        sent = len(units)
        if body.get("system") is not None:
            units.insert(0, _System(body["system"]))

        def place(k: int, unit: Any, n: int) -> list[str]:
            if isinstance(unit, _System):
                return ["system"] * n
            return _anthropic_places(k - len(units) + sent, unit, n)

        messages, entries, parts, places = read_units(self.name, units, convert, cache, place)
        tools = body.get("tools") or []
        if not isinstance(tools, list):
            raise WireError("tools: a list of {name, description, input_schema} is required")
        specs: list[dict[str, Any]] = []
        for k, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                raise WireError(f"tools[{k}]: a tool with a name is required")
            checked_schema(tool, f"tools[{k}]", "input_schema")
            specs.append({"name": tool["name"], "description": tool.get("description") or "",
                          "parameters": tool.get("input_schema") or {}})  # fmt: skip
        refuse_unanswered(entries, places, "tool_use_id", "tool_use")
        _refuse_older_answers(body["messages"])
        refuse_calls_left(entries, places, "tool_use", "tool_result")
        params = canonical_params(body)
        asked, as_recorded = _output_config(body.get("output_config"))
        if asked is not None:
            params["response_format"] = asked
        return WireRequest(
            messages=messages,
            entries=entries,
            parts=parts,
            tools=specs,
            params=params,
            model=str(body.get("model") or ""),
            stream=bool(body.get("stream")),
            choice={k: body[k] for k in CHOICE if k in body},
            places=places,
            sent=sent,
            schema_asked=_SCHEMA if asked is not None else "",
            as_recorded=as_recorded,
        )

    def _blocks(self, answer: Answer) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if answer.text:
            blocks.append({"type": "text", "text": answer.text})
        for call_id, name, args in answer.calls:
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args or {}})
        return blocks

    def _message(self, answer: Answer, request: WireRequest) -> dict[str, Any]:
        return {
            "id": f"msg_{answer.id}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
        }

    def _stop(self, answer: Answer) -> str:
        return "tool_use" if answer.calls else "end_turn"

    def answer(self, answer: Answer, request: WireRequest) -> bytes:
        message = self._message(answer, request)
        message.update(content=self._blocks(answer), stop_reason=self._stop(answer))
        return dumps_json(message)

    def stream(self, answer: Answer, request: WireRequest) -> bytes:
        def event(kind: str, data: dict[str, Any]) -> bytes:
            body = dumps_json({"type": kind, **data})
            return b"event: " + kind.encode() + b"\ndata: " + body + b"\n\n"

        out = [event("message_start", {"message": self._message(answer, request)})]
        for k, block in enumerate(self._blocks(answer)):
            start: dict[str, Any]
            if block["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                arguments = json.dumps(block["input"], ensure_ascii=False)
                delta = {"type": "input_json_delta", "partial_json": arguments}
            out.append(event("content_block_start", {"index": k, "content_block": start}))
            out.append(event("content_block_delta", {"index": k, "delta": delta}))
            out.append(event("content_block_stop", {"index": k}))
        out.append(event("message_delta", {
            "delta": {"stop_reason": self._stop(answer), "stop_sequence": None},
            # (the whole call's, as the API's message_delta holds them: langchain-anthropic
            # reads the usage of a stream from this event alone)
            "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
        }))  # fmt: skip
        out.append(event("message_stop", {}))
        return b"".join(out)

    def error(self, status: int, message: str, kind: str | None = None, **extra: Any) -> bytes:
        kind = kind or ERROR_TYPES.get(status, "invalid_request_error")
        return dumps_json({"type": "error", "error": {"type": kind, "message": message, **extra}})


class _System(dict[str, Any]):
    """An Anthropic request's system prompt as a unit of its messages (JSON: a dict)."""

    def __init__(self, value: Any) -> None:
        super().__init__({"\x00system": value})  # no message's JSON
        self.value = value
