"""The report's transcripts: every sample's stored messages as the page shows them.

A message is read as JSON, as scoring reads it: what is no JSON object with a ``data``
object is shown as it was stored, ``tool_calls`` that is no list holds no calls (and is
shown apart as an unparseable call), a call that is no object is named '' without arguments.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, cast

import polars as pl

from tcbreplay import _json
from tcbreplay._report.data import Call, RunData, keyed, read_columns
from tcbreplay._store.export import Slices
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import MESSAGES_SCHEMA, with_optional_columns


def message_text(content: Any) -> str:
    """A message's content as text: strings as they are, content blocks by their text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(json.dumps(block, ensure_ascii=False))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def transcripts(run: RunData) -> dict[str, list[dict[str, Any]]]:
    """Every shown sample's stored messages, read as JSON: type, text, calls, tokens,
    latency."""
    return transcripts_of(run.run, run.shown_indices)


def transcripts_of(
    run: Run, indices: Sequence[int] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """:func:`transcripts` of a run of the store (by its row names, :func:`row_key`): of the
    rows whose sample_index is in ``indices`` (every row when None), only the row groups
    that hold them read."""
    columns = ["sample_id", "trial", "position", "type", "message", "input_tokens",
               "output_tokens", "latency_s"]  # fmt: skip
    if indices is None:
        frame = keyed(read_columns(run.messages_path, MESSAGES_SCHEMA, columns))
    else:
        read = Slices(run.messages_path, [*columns, "sample_index"]).read_indices(indices)
        table = with_optional_columns(read, MESSAGES_SCHEMA).select(columns)
        frame = keyed(cast(pl.DataFrame, pl.from_arrow(table)))
    frame = frame.sort("sample_id", "position").select(
        "sample_id", "position", "type", "message", "input_tokens", "output_tokens", "latency_s"
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for sid, _, kind, text, tin, tout, latency in frame.iter_rows():
        data = _message_data(text)
        message: dict[str, Any] = {
            "type": kind,
            # a message that is no JSON object with a data object is shown as it was stored
            "text": (text or "") if data is None else message_text(data.get("content")),
            "input_tokens": tin,
            "output_tokens": tout,
            "latency_s": None if latency is None or math.isnan(latency) else latency,
        }
        data = data or {}
        if kind == "ai":
            calls, odd = _listed(data, "tool_calls")
            message["tool_calls"] = [_transcript_call(c) for c in calls]
            invalid, odd_invalid = _listed(data, "invalid_tool_calls")
            message["invalid_tool_calls"] = (
                [
                    (_name_text(c.get("name")), c.get("args"), c.get("error"))
                    if isinstance(c, dict)
                    else (None, _json_text(c), None)
                    for c in invalid
                ]
                + odd
                + odd_invalid
            )
        elif kind == "tool":
            message["name"] = _name_text(data.get("name"))
            message["status"] = data.get("status")
        out.setdefault(sid, []).append(message)
    return out


def _message_data(text: str | None) -> dict[str, Any] | None:
    """The ``data`` object of a stored message; None when the text is no such JSON."""
    try:
        data = _json.loads(text) if text else None
    except ValueError:  # LimitError too
        return None
    data = data.get("data") if isinstance(data, dict) else None
    return data if isinstance(data, dict) else None


def _listed(data: dict[str, Any], key: str) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """The list ``data[key]``; a value that is no list holds no calls (as scoring reads it)
    and is returned apart as an unparseable call showing its JSON text."""
    value = data.get(key)
    if value is None or isinstance(value, list):
        return value or [], []
    return [], [(None, _json_text(value), f"{key} is not a list: no calls")]


def _transcript_call(call: Any) -> Call:
    """One element of ``tool_calls`` as scoring reads it: an element that is no object is a
    call named '' without arguments; a name that is no string is its JSON text."""
    if not isinstance(call, dict):
        return "", {}
    args = call.get("args")
    return _name_text(call.get("name")) or "", {} if args is None else args


def _name_text(name: Any) -> str | None:
    return name if name is None or isinstance(name, str) else _json_text(name)


def _json_text(value: Any) -> str:
    # minified, as DuckDB writes the text scoring reads
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
