"""How a model call binds its tools: what a ``tool_choice`` asks of the answer (no call, a
call, a call of one named tool) and whether ``parallel_tool_calls`` lets it make several.

The forms read are LangChain's ``bind_tools(tool_choice=...)`` (a tool's name, ``"any"``,
``True``, ...), OpenAI's and Anthropic's (``disable_parallel_tool_use``). The sim model
answers as they ask; a replay finds a recorded answer they forbid
(:mod:`tcbreplay._replay.choice`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_FREE = ("auto", "")
_REQUIRED = ("any", "required")


def asked(choice: Any) -> tuple[str, str | None] | None:
    """What ``choice`` asks: ("none", None), ("required", None), ("named", NAME), or None
    for an answer's free choice."""
    if choice is None or choice is False or choice in _FREE:
        return None
    if choice is True or choice in _REQUIRED:
        return "required", None
    if choice == "none":
        return "none", None
    if isinstance(choice, str):
        return "named", choice
    if isinstance(choice, Mapping):
        kind = choice.get("type")
        if kind in ("function", "tool"):
            function = choice.get("function")
            name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
            return ("named", str(name)) if name else ("required", None)
        if kind in _REQUIRED:
            return "required", None
        if kind == "none":
            return "none", None
    return None


def parallel_allowed(settings: Mapping[str, Any]) -> bool:
    """Whether a request's settings let an answer make several calls."""
    if settings.get("parallel_tool_calls") is False:
        return False
    choice = settings.get("tool_choice")
    return not (isinstance(choice, Mapping) and choice.get("disable_parallel_tool_use") is True)
