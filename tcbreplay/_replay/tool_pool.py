"""A sample's recorded tool outputs, and the pool a replay serves them from by tool name and
arguments."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from tcbreplay._replay.fingerprint import canonical_json, normalized


@dataclass
class ToolOutput:
    """What a recorded tool call answered."""

    name: str
    arguments: Any
    content: Any
    status: str | None
    position: int


class ToolPool:
    """A sample's recorded tool outputs, served by tool name and arguments: as a multiset,
    each output once, the outputs of equal calls in their recorded order."""

    def __init__(self, outputs: list[ToolOutput]) -> None:
        self._free: dict[tuple[str, str], deque[ToolOutput]] = {}
        for output in sorted(outputs, key=lambda o: o.position):
            self._free.setdefault(call_key(output.name, output.arguments), deque()).append(output)

    def take(self, name: str, arguments: Any) -> ToolOutput | None:
        queue = self._free.get(call_key(name, arguments))
        return queue.popleft() if queue else None


def call_key(name: str, arguments: Any) -> tuple[str, str]:
    """A tool call as the pool knows it: its name and canonical arguments."""
    return name, canonical_json(normalized(arguments if arguments is not None else {}))


def tool_outputs(texts: list[str]) -> tuple[dict[str, ToolOutput], dict[int, ToolOutput]]:
    """A sample's recorded tool outputs (from its stored message ``texts``) by call id, and
    by position."""
    by_id: dict[str, ToolOutput] = {}
    by_position: dict[int, ToolOutput] = {}
    calls: dict[str, tuple[str, Any]] = {}
    for position, text in enumerate(texts):
        message = json.loads(text)
        data = message.get("data") or {}
        if message.get("type") == "ai":
            for call in data.get("tool_calls") or []:
                if call.get("id"):
                    calls[str(call["id"])] = (str(call.get("name") or ""), call.get("args"))
        elif message.get("type") == "tool":
            call_id = data.get("tool_call_id")
            name, args = calls.get(str(call_id), (str(data.get("name") or ""), None))
            output = ToolOutput(name, args, data.get("content"), data.get("status"), position)
            by_position[position] = output
            if call_id:
                by_id[str(call_id)] = output
    return by_id, by_position
