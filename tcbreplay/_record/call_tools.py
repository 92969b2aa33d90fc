"""The tools a model call was sent, where they are not the sample's: an agent of one's own may
bind other tools to a call than those it was given (``with_structured_output`` on the bare
model binds none, or a tool of its own; a router binds some), and its stored messages do not
say which (replay compares each request's tools with its call's:
:data:`tcbreplay._store.schema.SENT_TOOLS_KEY`).

A call's tools are kept by name where the sample has a tool of that name (its schema is the
sample's, as for a call sent the sample's tools: how a call binds a tool, ``strict``, is not
kept), else as its schema (``{"name", "description", "parameters"}``, as a run's manifest
keeps tools), since its name does not say what it was.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def sent_tools(params: Mapping[str, Any], names: Collection[str]) -> list[Any] | None:
    """The tools a call of these LangChain invocation parameters was sent (its ``tools``, as
    ``bind_tools`` binds them in the provider's form), each by name where ``names`` (the
    sample's tools) holds it, else as its schema; None when they are the sample's."""
    specs = [_spec(tool) for tool in params.get("tools") or ()]
    sent: list[Any] = [
        s["name"] if s["name"] in names and "unreadable" not in s else s for s in specs
    ]
    if all(isinstance(t, str) for t in sent) and sorted(map(str, sent)) == sorted(names):
        return None
    return sent


def tool_names(tools: list[Any]) -> list[str]:
    """The names of LangChain tools (the run's, an agent is given)."""
    return [str(_spec(tool).get("name")) for tool in tools]


def _spec(tool: Any) -> dict[str, Any]:
    """A tool as ``{"name", "description", "parameters"}``, from any form a provider's
    ``bind_tools`` binds (OpenAI's ``{"type": "function", "function": ...}``, Anthropic's
    ``input_schema``) or a LangChain tool; one it cannot read (a provider's built-in tool) as
    ``{"name": ..., "unreadable": its type}``, which no request's tool equals."""
    from langchain_core.utils.function_calling import convert_to_openai_function

    if isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
        tool = tool["function"]
    if isinstance(tool, Mapping) and "name" in tool:
        schema = tool.get("parameters", tool.get("input_schema"))
        if isinstance(schema, Mapping) or schema is None:
            return {"name": str(tool["name"]), "description": str(tool.get("description") or ""),
                    "parameters": dict(schema or {})}  # fmt: skip
    try:
        return dict(convert_to_openai_function(tool))
    except Exception:  # (anything LangChain cannot read as a function)
        kind = tool.get("type") if isinstance(tool, Mapping) else type(tool).__name__
        name = getattr(tool, "name", None) or kind
        return {"name": str(name), "unreadable": str(kind)}
