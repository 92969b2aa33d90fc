"""Traces in LangChain's form: a JSONL line per sample, messages as ``messages_to_dict`` writes
them."""

from __future__ import annotations

import json
from typing import Any

from tcbreplay._inputs import limits
from tcbreplay._inputs.dataset import lone_surrogate
from tcbreplay._record.secrets import redact
from tcbreplay.errors import TraceError


def read_lines(data: bytes, label: str, by_id: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from langchain_core.messages import message_to_dict, messages_from_dict

    from tcbreplay._record.messages import serialize_messages

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    out: dict[str, dict[str, Any]] = {}
    # JSON Lines end at "\n" only: str.splitlines would also split inside strings holding
    # U+2028, U+2029 or U+0085 (a "\r" before the "\n" is JSON whitespace)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        place = f"{label}: line {lineno}"
        try:
            obj = limits.loads(line, first_line=lineno)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{place}: not valid JSON: {exc.msg}") from exc
        except limits.LimitError as exc:
            raise TraceError(f"{label}: {exc}", hint=limits.HINT) from None
        if not isinstance(obj, dict):
            raise TraceError(f"{place}: expected an object with sample_id and messages")
        surrogate = lone_surrogate(obj, line)
        if surrogate:
            raise TraceError(
                f"{place}: holds a lone surrogate {surrogate}, which is not valid Unicode"
            )
        if "sample_id" not in obj:
            raise TraceError(f"{place}: missing sample_id")
        sid = obj["sample_id"]
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            raise TraceError(f"{place}: sample_id must be a string or an integer")
        sid = str(sid)
        if sid not in by_id:
            raise TraceError(f"{place}: sample_id {obj['sample_id']!r} is not in the dataset")
        if sid in out:
            raise TraceError(f"{place}: sample_id {obj['sample_id']!r} appears twice")
        raw = obj.get("messages")
        if not isinstance(raw, list):
            raise TraceError(f"{place}: messages must be a list")
        messages = []
        for k, item in enumerate(raw):
            try:
                (message,) = messages_from_dict([item])
                message_to_dict(message)
            except Exception as exc:  # any shape LangChain cannot load is bad input
                detail = " ".join(str(exc).split())[:200]
                raise TraceError(
                    f"{place}: message {k}: not a LangChain message dict "
                    f"({type(exc).__name__}: {detail})",
                    hint="write messages with langchain_core.messages.messages_to_dict",
                ) from exc
            messages.append(message)
        status = obj.get("status", "ok")
        if status not in ("ok", "error"):
            raise TraceError(f"{place}: status must be 'ok' or 'error'")
        for key in ("error", "error_type"):
            if not isinstance(obj.get(key), (str, type(None))):
                raise TraceError(f"{place}: {key} must be a string")
        out[sid] = {
            "status": status,
            # traces recorded elsewhere may quote a key the provider was sent
            "error": None if obj.get("error") is None else redact(obj["error"]),
            "error_type": obj.get("error_type"),
            "messages": serialize_messages(messages, {}),
        }
    if not out:
        raise TraceError(f"{label}: no traces in the file")
    return out
