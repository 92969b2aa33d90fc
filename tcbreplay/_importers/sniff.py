"""Which dialect a traces file is written in, told from its first bytes and first sample."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay.errors import TraceError

# bfcl (BFCL's results file) is never told from the file: it is read with BFCL's answers
FORMATS = ("langchain", "openai", "anthropic", "tau-bench", "inspect", "abet-evaluation", "bfcl")
# the names of earlier versions
ALIASES = {"jsonl": "langchain"}


def sniff(path: Path, data: bytes) -> tuple[str, str]:
    """The format of a traces file and why: ``(format, reason)``."""
    if data[:4] == b"PK\x03\x04" or path.suffix == ".eval":
        return "inspect", "an inspect_ai .eval log (a zip file)"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _unknown(path, "it is not UTF-8 text") from None
    stripped = text.lstrip()
    whole = _whole(stripped) if stripped[:1] in ("[", "{") else None
    if isinstance(whole, list):
        first = whole[0] if whole else None
        if isinstance(first, dict) and {"task_id", "traj"} <= first.keys():
            return "tau-bench", "a JSON list of τ-bench results (task_id, trial, traj)"
        raise _unknown(path, "it is a JSON list, but not of τ-bench results")
    if isinstance(whole, dict) and "messages" not in whole:
        if "eval" in whole and "version" in whole:
            return "inspect", "an inspect_ai .json log (eval, samples)"
        if "samples" in whole and ("results" in whole or "benchmark_name" in whole):
            return "abet-evaluation", "a dashboard file of the original benchmark"
    line = _value(stripped.split("\n", 1)[0])
    if isinstance(line, dict) and {"id", "result"} <= line.keys() and "messages" not in line:
        raise TraceError(
            f"{path.name}: cannot tell its format: it looks like a BFCL results file (id, result)",
            hint="give --format bfcl, with BFCL's questions as --dataset and --answers",
        )
    if not isinstance(line, dict) or not isinstance(line.get("messages"), list):
        # reading it as the default dialect says what is wrong with which line
        return "langchain", _DEFAULT
    return _messages_dialect(path, line)


def _messages_dialect(path: Path, line: dict[str, Any]) -> tuple[str, str]:
    if "system" in line:
        return "anthropic", "its first line has a system prompt beside messages (Anthropic's)"
    messages = [m for m in line["messages"] if isinstance(m, dict)]
    if any("type" in m and "data" in m for m in messages):
        return "langchain", "its messages are LangChain dicts (type, data)"
    blocks = [
        b.get("type")
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict)
    ]
    if {"tool_use", "tool_result"} & set(blocks):
        return "anthropic", "its messages hold tool_use or tool_result blocks (Anthropic's)"
    if any(m.get("role") in ("tool", "system", "developer") or "tool_calls" in m for m in messages):
        return "openai", "its messages have OpenAI's roles and tool_calls"
    if messages and all(m.get("role") in ("user", "assistant") for m in messages):
        # plain text turns read the same in both
        return "openai", "its messages are user and assistant turns (read as OpenAI's)"
    return "langchain", _DEFAULT


_DEFAULT = "the default: its first line matched no dialect"


def _value(text: str) -> Any:
    """The JSON value the text is, or None if it is none (or beyond the limits)."""
    try:
        return _json.loads(text)
    except (json.JSONDecodeError, _json.LimitError, ValueError):
        return None


def _whole(text: str) -> Any:
    """The JSON value the whole text is (None if it is not JSON); for an object beyond the
    limits, its keys (as a dict of None), so that reading it in its format says what is
    beyond them."""
    try:
        return _json.loads(text)
    except json.JSONDecodeError:
        return None
    except _json.LimitError:
        return _top_keys(text) if text[:1] == "{" else None


# a JSON string (a key when a colon follows) or a bracket; brackets inside strings are skipped
_TOKENS = re.compile(
    r'(?P<string>"[^"\\]*(?:\\.[^"\\]*)*")(?P<colon>\s*:)?|(?P<open>[\[{])|(?P<close>[\]}])'
)


def _top_keys(text: str) -> dict[str, None] | None:
    """The keys of the JSON object ``text``, found without reading its values (they may be
    too deep or too long for Python's reader)."""
    keys: dict[str, None] = {}
    depth = 0
    for match in _TOKENS.finditer(text):
        if match.group("open"):
            depth += 1
        elif match.group("close"):
            depth -= 1
            if depth == 0:
                return keys
        elif match.group("colon") and depth == 1:
            try:
                keys[json.loads(match.group("string"))] = None
            except json.JSONDecodeError:
                return None
    return None


def _unknown(path: Path, why: str) -> TraceError:
    return TraceError(
        f"{path.name}: cannot tell its format: {why}",
        hint=f"give --format ({', '.join(FORMATS)})",
    )
