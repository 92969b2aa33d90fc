"""A run's stored messages as comparable turns (role, text, tool calls), for the dialect tests."""

from __future__ import annotations


def turns(messages: list[dict]) -> list[tuple]:
    """Messages (``messages_to_dict``'s form) as what scoring reads of them: each one's kind,
    text, tool calls and the call a tool message answers; the system prompt left out (the
    agent's state does not hold it)."""
    out = []
    for m in messages:
        data = m["data"]
        calls = [(c["name"], c["args"], c["id"]) for c in data.get("tool_calls") or []]
        if m["type"] != "system":
            out.append((m["type"], data["content"], calls, data.get("tool_call_id")))
    return out
