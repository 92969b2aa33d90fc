"""Divergences: the first difference between a replayed request and the nearest recorded one.

A divergence is one row of the store's ``divergences`` table: where (run, sample, trial, the
turn of the request: how many assistant messages it holds), what (the ``component``:
``system``, ``messages``, ``tools``, ``params``, or ``tool_output`` when the first differing
message is a tool's output that the replay ran live and that changed), the ``path`` of the
smallest part that differs in the canonical request (``system``, ``messages[3].content``,
``tools.add_numbers.parameters.b``, ``params.temperature``), and the two values there as JSON
text (null where one side has nothing; a long text is cut to the neighbourhood of its
first difference).

The nearest recorded request is the one that differs in the fewest of system, tools and
params, then shares the longest run of first messages, then has the closest number of
messages. Its first difference is looked for in that order: system, tools, params,
messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

COMPONENTS = ("system", "messages", "tools", "params", "tool_output")
# a text longer than this is cut around its first difference
_LONG = 240
_BEFORE, _AFTER = 60, 160
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Divergence:
    """The first difference of a replayed request (see the module); ``recorded`` and
    ``replayed`` are JSON text, None where that side has nothing at ``path``."""

    turn: int
    component: str
    path: str
    recorded: str | None
    replayed: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for a person: ``turn 0: system: "You are ..." -> "You were ..."``, each
        side cut to where the two first differ."""
        start = _common_prefix(self.recorded or "", self.replayed or "")
        return (
            f"turn {self.turn}: {self.component} at {self.path}: "
            f"{_short(self.recorded, start)} -> {_short(self.replayed, start)}"
        )


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _short(text: str | None, differs_at: int = 0, width: int = 80) -> str:
    """``text`` in ``width`` characters or so: from a little before ``differs_at`` (where
    it differs from the other side), "…" where it is cut."""
    if text is None:
        return "(nothing)"
    if len(text) <= width:
        return text
    if len(text) > 2 and text[0] == text[-1] == '"':  # a JSON string: cut inside its quotes
        return '"' + _short(text[1:-1], max(0, differs_at - 1), width - 2) + '"'
    begin = max(0, min(differs_at - width // 4, len(text) - width + 1))
    head = "…" if begin else ""
    end = begin + width - len(head)
    return head + text[begin:end] + ("…" if end < len(text) else "")


def first_difference(recorded: dict[str, Any], replayed: dict[str, Any]) -> tuple[str, Any, Any]:
    """The path of the first difference between two canonical requests and the two values
    there (:data:`MISSING` where a side has nothing); ``("", None, None)`` when equal."""
    for part in ("system", "tools", "params", "messages"):
        found = _diff(recorded.get(part), replayed.get(part), part)
        if found is not None:
            return found
    return "", None, None


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    # (containers are compared item by item: [true] == [1] in Python, not in JSON)
    if type(a) is type(b) and not isinstance(a, (dict, list)) and a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            here = _key_path(path, key)
            if key not in a:
                return here, MISSING, b[key]
            if key not in b:
                return here, a[key], MISSING
            found = _diff(a[key], b[key], here)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _diff(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        n = min(len(a), len(b))
        if len(a) == len(b):
            return None
        return f"{path}[{n}]", a[n] if n < len(a) else MISSING, b[n] if n < len(b) else MISSING
    return path, a, b


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{json.dumps(key)}]"


def message_index(path: str) -> int | None:
    """The message a ``messages[i]...`` path is in."""
    match = re.match(r"messages\[(\d+)\]", path)
    return int(match.group(1)) if match else None


def distance(recorded: dict[str, Any], replayed: dict[str, Any]) -> tuple[int, int, int]:
    """How far apart two canonical requests are (smaller is nearer; see the module)."""
    differ = sum(recorded.get(k) != replayed.get(k) for k in ("system", "tools", "params"))
    a, b = recorded.get("messages") or [], replayed.get("messages") or []
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return differ, -shared, abs(len(a) - len(b))


def nearest(recorded: Sequence[dict[str, Any]], replayed: dict[str, Any]) -> dict[str, Any] | None:
    """The recorded request nearest to ``replayed`` (the first of equals), None if none."""
    best, best_key = None, None
    for request in recorded:
        key = distance(request, replayed)
        if best_key is None or key < best_key:
            best, best_key = request, key
    return best


def describe(
    turn: int,
    recorded: dict[str, Any] | None,
    replayed: dict[str, Any],
    component: str | None = None,
) -> Divergence:
    """The divergence of a replayed request (at ``turn``) from the recorded one nearest to it
    (None: the recording has no request to compare with). ``component`` overrides the one
    the path names (``tool_output``)."""
    if recorded is None:
        return Divergence(turn, "messages", "messages", None, _json(replayed.get("messages")))
    path, old, new = first_difference(recorded, replayed)
    if not path:  # equal canonical forms: the request was asked for in another order
        path, old, new = "messages", recorded.get("messages"), replayed.get("messages")
    part = component or path.split(".")[0].split("[")[0]
    old, new = _excerpts(old, new)
    return Divergence(turn, part, path, _json(old), _json(new))


def _json(value: Any) -> str | None:
    if value is MISSING:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _excerpts(a: Any, b: Any) -> tuple[Any, Any]:
    """Two long texts cut to the neighbourhood of their first difference."""
    if not (isinstance(a, str) and isinstance(b, str)) or max(len(a), len(b)) <= _LONG:
        return a, b
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return _cut(a, i), _cut(b, i)


def _cut(text: str, at: int) -> str:
    start, end = max(0, at - _BEFORE), at + _AFTER
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
