"""How a live tool output compares with the recorded one, in a replay.

A live tool's output is compared with the recorded output of the same call (the call of a
served turn, found by its id) and is one of :data:`OUTCOMES`: ``same`` (the same text),
``cosmetic`` (equal as JSON once keys are sorted and numbers in one form: ``25`` and
``25.0``), ``drift`` (another output), ``error`` (the tool failed where it had not), or
``unknown_tool`` (the replay has no tool of that name). A drift, error or unknown tool
changes the next request, which then diverges on ``tool_output``; a cosmetic change does
not (the request's fingerprint is the same).
"""

from __future__ import annotations

from typing import Any

from tcbreplay._replay.fingerprint import canonical_json, content, tool_content
from tcbreplay._replay.tool_pool import ToolOutput

OUTCOMES = ("same", "cosmetic", "drift", "error", "unknown_tool")
# the outcomes that change what the next request asks
CHANGED = frozenset({"drift", "error", "unknown_tool"})


def compare_output(
    recorded: ToolOutput, replayed: Any, status: str | None, known_tool: bool
) -> str:
    """How a live tool output compares with the recorded one (one of :data:`OUTCOMES`)."""
    # compared as JSON text: in Python true == 1, and {"a": true} == {"a": 1}
    if canonical_json(content(replayed)) == canonical_json(content(recorded.content)):
        return "same"
    if canonical_json(tool_content(replayed)) == canonical_json(tool_content(recorded.content)):
        return "cosmetic"
    if not known_tool:
        return "unknown_tool"
    if status == "error" and recorded.status != "error":
        return "error"
    return "drift"
