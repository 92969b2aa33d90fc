"""Build trace tables in the store's schemas by hand, without LangChain, for metric tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tcbreplay._store.schema import SAMPLES_SCHEMA, WRITTEN_MESSAGES_SCHEMA

Call = tuple[str, dict[str, Any]]


def ai_message(calls: Sequence[Call], content: str = "", msg_id: str = "ai") -> str:
    """An AI message as ``message_to_dict`` serializes it, with these tool calls."""
    return json.dumps(
        {
            "type": "ai",
            "data": {
                "content": content,
                "additional_kwargs": {},
                "response_metadata": {},
                "type": "ai",
                "name": None,
                "id": msg_id,
                "tool_calls": [
                    {"name": n, "args": a, "id": f"{msg_id}-{k}", "type": "tool_call"}
                    for k, (n, a) in enumerate(calls)
                ],
                "invalid_tool_calls": [],
                "usage_metadata": None,
            },
        }
    )


def human_message(text: str) -> str:
    return json.dumps(
        {
            "type": "human",
            "data": {
                "content": text,
                "additional_kwargs": {},
                "response_metadata": {},
                "type": "human",
                "name": None,
                "id": None,
            },
        }
    )


def gold_call(name: str, args: dict[str, Any], rules: dict[str, Any] | None = None) -> dict:
    """A gold call as the store holds it: name, args and its rules."""
    return {"name": name, "args": args, **(rules or {})}


def build_tables(
    cases: Sequence[dict[str, Any]], run_id: str = "test"
) -> tuple[pa.Table, pa.Table]:
    """``cases``: dicts with ``gold`` (list of calls, each ``(name, args)`` or ``(name, args,
    rules)`` with rules a dict of accept, optional and group) and ``turns`` (list of AI turns,
    each a list of calls); optional ``sample_id``, ``status`` and ``sample_tools`` (the
    sample's own tool schemas). Returns (samples, messages) tables."""
    samples, messages = [], []
    for index, case in enumerate(cases):
        sid = str(case.get("sample_id", index))
        samples.append(
            {
                "run_id": run_id,
                "sample_id": sid,
                "sample_index": index,
                "input": f"question {index}",
                "gold": json.dumps([gold_call(*call) for call in case["gold"]]),
                "tools": None
                if case.get("sample_tools") is None
                else json.dumps(case["sample_tools"]),
                "category": None,
                "status": case.get("status", "ok"),
                "attempts": 1,
                "n_messages": len(case["turns"]) + 1,
            }
        )
        messages.append(
            {
                "run_id": run_id,
                "sample_id": sid,
                "sample_index": index,
                "position": 0,
                "type": "human",
                "message": human_message(f"question {index}"),
            }
        )
        for k, turn in enumerate(case["turns"], start=1):
            messages.append(
                {
                    "run_id": run_id,
                    "sample_id": sid,
                    "sample_index": index,
                    "position": k,
                    "type": "ai",
                    "message": ai_message(turn, msg_id=f"{sid}-{k}"),
                }
            )
    return (
        pa.Table.from_pylist(samples, schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist(messages, schema=WRITTEN_MESSAGES_SCHEMA),
    )
