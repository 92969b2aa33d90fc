"""What a request's ``tool_choice`` (and ``parallel_tool_calls``) allows of an answer.

These settings are not in a recording's fingerprints (a run records how its model was made,
not how each call bound its tools), so a request that forbids what the recorded turn did
still finds that turn. A model asked with them could not have answered so: a recorded answer
that calls a tool where ``tool_choice`` is ``none``, calls none where it is required (``any``,
``required``, ``True``), calls another than the one named, or calls several where
``parallel_tool_calls`` is false (Anthropic's ``disable_parallel_tool_use``), or calls one
an ``allowed_tools`` choice leaves out (or none where its mode is ``required``), is a
divergence at ``params.tool_choice`` (``params.parallel_tool_calls``). The forms read are
LangChain's ``bind_tools(tool_choice=...)`` (a tool's name, ``"any"``, ``True``, ...),
OpenAI's (Chat Completions' and the Responses API's) and Anthropic's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tcbreplay._record.tool_choice import asked, parallel_allowed
from tcbreplay._replay.divergence import Divergence
from tcbreplay._replay.fingerprint import canonical_json


def conflict(turn: int, settings: Mapping[str, Any], calls: Sequence[str]) -> Divergence | None:
    """The divergence of a recorded answer making ``calls`` (tool names) at ``turn`` from a
    request of these ``settings`` (its ``tool_choice`` and ``parallel_tool_calls``), or None
    when a model asked so could have answered it."""
    choice = settings.get("tool_choice")
    wanted = asked(choice)
    made = canonical_json(list(calls))
    if wanted is not None:
        kind, name = wanted
        wrong = (
            (kind == "none" and calls)
            or (kind == "required" and not calls)
            or (kind == "named" and (not calls or any(c != name for c in calls)))
        )
        if wrong:
            return Divergence(turn, "params", "params.tool_choice", made, canonical_json(choice))
    allowed = allowed_tools(choice)
    if allowed is not None:
        mode, names = allowed
        if (mode == "required" and not calls) or any(c not in names for c in calls):
            return Divergence(turn, "params", "params.tool_choice", made, canonical_json(choice))
    if len(calls) > 1 and not parallel_allowed(settings):
        return Divergence(turn, "params", "params.parallel_tool_calls", made, "false")
    return None


def allowed_tools(choice: Any) -> tuple[str, set[str]] | None:
    """An ``allowed_tools`` choice's mode (``auto``, ``required``) and the names of the tools
    it allows, or None for another choice. Chat Completions nests them
    (``{"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}``, each tool
    ``{"type": "function", "function": {"name"}}``); the Responses API has them beside the
    type, each tool ``{"type": "function", "name"}``."""
    if not isinstance(choice, Mapping) or choice.get("type") != "allowed_tools":
        return None
    inner = choice.get("allowed_tools")
    inner = inner if isinstance(inner, Mapping) else choice
    names: set[str] = set()
    tools = inner.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, Mapping):
            continue
        nested = tool.get(tool.get("type") or "function")
        name = nested.get("name") if isinstance(nested, Mapping) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return str(inner.get("mode") or "auto"), names
