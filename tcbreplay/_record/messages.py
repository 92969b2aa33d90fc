"""LangChain messages as the store keeps them: JSON text with usage and latency beside each.

Recording and the importers both store messages through :func:`serialize_messages`.
"""

from __future__ import annotations

import json
from typing import Any

from tcbreplay import _json


def serialize_messages(messages: list[Any], timings: dict[str, float]) -> list[dict[str, Any]]:
    """Messages as LangChain serializes them, with usage and latency beside each."""
    from langchain_core.messages import message_to_dict

    out = []
    for m in messages:
        usage = getattr(m, "usage_metadata", None) or {}
        key = m.id if m.type == "ai" else getattr(m, "tool_call_id", None)
        out.append(
            {
                "type": m.type,
                "message": message_json(message_to_dict(m)),
                "input_tokens": usage.get("input_tokens"),
                "output_tokens": usage.get("output_tokens"),
                "total_tokens": usage.get("total_tokens"),
                "latency_s": timings.get(key) if key else None,
            }
        )
    return out


def message_json(data: dict[str, Any]) -> str:
    """A serialized message as JSON text, within :mod:`tcbreplay._json`.

    A model may answer with tool-call arguments nested deeper, or integers longer, than
    the store holds: that is the agent's behaviour, so the message is stored with those
    parts replaced by a string saying so (which scores as an invalid argument).
    """
    try:
        text = json.dumps(data, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        text = None  # too deep for Python's writer, or an integer it will not write
    if text is None or _json.may_exceed(text):
        text = json.dumps(_json.bounded(data), ensure_ascii=False, default=str)
    return text
