"""Numbers JSON has no words for: ``NaN``, ``Infinity``, ``-Infinity`` (and a number such as
``1e999``, beyond a float's range, which Python's reader takes for infinity).

Python's JSON reader accepts them; a dataset holding one is refused with its line and field:
a gold value NaN equals nothing (not even itself), so its call could never be matched, and a
run's ``dataset.jsonl`` written with it would be no JSON that other readers take.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from tcbreplay.errors import DatasetError

# strings are skipped: "NaN" in a text is text
_TOKENS = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"'
    r"|(?P<constant>-?Infinity|NaN)"
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
)
# what a text holding such a number holds: a float is infinite from 1e309 or 309 digits on
_MAY_HOLD = re.compile(r"NaN|Infinity|[eE]\+?\d{3}|\d{309}")


def refuse_non_finite(raw: list[Any], where: list[str], text: str, label: str) -> None:
    """Raise a one-line :class:`DatasetError` for the first entry of ``raw`` (read from
    ``text``; ``where``: each entry's place in ``label``) holding a number that is not finite,
    naming its line and its field."""
    if not _MAY_HOLD.search(text):
        return
    for entry, place in zip(raw, where, strict=True):
        found = next(_non_finite(entry, ""), None)
        if found is None:
            continue
        path, value = found
        token, line = _first_token(text)
        if place.startswith("entry ") and line:  # (an entry of an array: its line first)
            place = f"line {line}: {place}"
        elif not place.startswith("line "):  # (an eval set's case: its text is another)
            token = None
        if token is None:
            token = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        raise DatasetError(
            f"{label}: {place}: {path.lstrip('.')} is {token}, which is no finite number "
            "(JSON has none): give a number, or a string"
        )


def _non_finite(value: Any, path: str) -> Iterator[tuple[str, float]]:
    """The numbers in ``value`` that are not finite, with their paths, in the order of the
    text."""
    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            yield at, item
        elif isinstance(item, dict):
            stack.extend((v, f"{at}{_key(k)}") for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{k}]") for k, v in reversed(list(enumerate(item))))


def _key(key: str) -> str:
    return f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"[{key!r}]"


def _first_token(text: str) -> tuple[str | None, int | None]:
    """The first number of ``text`` that is not finite, as written, and its line."""
    for match in _TOKENS.finditer(text):
        token = match.group("constant") or match.group("number")
        if match.group("constant") or (
            token and not token.lstrip("-").isdigit() and math.isinf(float(token))
        ):
            return token, text.count("\n", 0, match.start()) + 1
    return None, None
