"""A dataset file's text read as raw entries, each with its place: a JSON array (``entry 3``),
JSON Lines (``line 4``), or a Google ADK eval set (its cases:
:mod:`tcbreplay._inputs.adk_evalset`). What JSON reading would let pass unsaid is refused
here, naming the place: an object that repeats a key (its earlier value would be dropped), a
lone surrogate (no valid Unicode). What the entries hold is checked by
:mod:`tcbreplay._inputs.dataset`.
"""

from __future__ import annotations

import json
from typing import Any

from tcbreplay import _json
from tcbreplay._inputs.spread import spread_over_lines
from tcbreplay._json import _SURROGATE_ESCAPE, lone_surrogate
from tcbreplay.errors import DatasetError


def read_entries(text: str, label: str) -> tuple[list[Any], list[str]]:
    """The raw entries of a dataset file's ``text`` (named ``label`` in errors), each with its
    place (``entry 3``, ``line 4``)."""
    stripped = text.lstrip()
    if not stripped:
        raise DatasetError(f"{label}: the file is empty")
    repeats: _json.Repeats = {}  # objects that repeat a key (see _refuse_repeated_keys)
    if stripped.startswith("["):
        try:
            raw = _json.loads(text, repeats=repeats)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{label}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
        except _json.LimitError as exc:
            raise DatasetError(f"{label}: {exc}", hint=_json.HINT) from None
        where = [f"entry {i}" for i in range(len(raw))] if isinstance(raw, list) else []
        _refuse_repeated_keys(raw if isinstance(raw, list) else [], where, repeats, label)
        _refuse_lone_surrogates(raw, where, text, label)
        return raw, where
    if stripped.startswith("{") and ('"eval_cases"' in text or '"evalCases"' in text):
        evalset = _evalset(text, label)
        if evalset is not None:
            return evalset
    raw, where = [], []
    # JSON Lines end at "\n" only: str.splitlines would also split inside strings holding
    # U+2028, U+2029 or U+0085 (a "\r" before the "\n" is JSON whitespace)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            raw.append(_json.loads(line, first_line=lineno, repeats=repeats))
        except json.JSONDecodeError as exc:
            said = spread_over_lines(text, lineno) or f"line {lineno}: not valid JSON: {exc.msg}"
            raise DatasetError(
                f"{label}: {said}",
                hint="a dataset is a JSON array or one JSON object per line",
            ) from exc
        except _json.LimitError as exc:
            raise DatasetError(f"{label}: {exc}", hint=_json.HINT) from None
        where.append(f"line {lineno}")
    _refuse_repeated_keys(raw, where, repeats, label)
    _refuse_lone_surrogates(raw, where, text, label)
    return raw, where


def _refuse_repeated_keys(
    raw: list[Any], where: list[str], repeats: _json.Repeats, label: str
) -> None:
    """Refuse entries with an object that repeats a key (``repeats``: those the reading
    noted): JSON keeps the key's last value, and the earlier one given would be dropped
    unsaid (an input, a gold call's argument)."""
    if not repeats:
        return
    problems = []
    for entry, place in zip(raw, where, strict=True):
        stack = [entry]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                key = _json.repeated_key(item, repeats)
                if key is not None:
                    problems.append(f"{label}: {place}: an object repeats the key {key!r}")
                    break
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
    if problems:
        raise DatasetError("\n".join(problems), hint="give each key once in each object")


def _evalset(text: str, label: str) -> tuple[list[Any], list[str]] | None:
    """The entries of a Google ADK eval set (see :mod:`tcbreplay._inputs.adk_evalset`), or
    None when the text is no eval set (one JSON document holding eval cases)."""
    from tcbreplay._inputs import adk_evalset

    try:
        doc = _json.loads(text)
    except (json.JSONDecodeError, _json.LimitError):
        return None
    if not adk_evalset.is_evalset(doc):
        return None
    raw, where = adk_evalset.entries(doc, label)
    _refuse_lone_surrogates(raw, where, text, label)
    return raw, where


def _refuse_lone_surrogates(raw: list[Any], where: list[str], text: str, label: str) -> None:
    if not _SURROGATE_ESCAPE.search(text):
        return
    for entry, place in zip(raw, where, strict=True):
        surrogate = lone_surrogate(entry)
        if surrogate:
            raise DatasetError(
                f"{label}: {place}: holds a lone surrogate {surrogate}, which is not valid Unicode"
            )
