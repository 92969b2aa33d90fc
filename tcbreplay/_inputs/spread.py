"""Where a JSON Lines file that does not read goes wrong, when its line is not the place: an
entry spread over several lines (a pretty-printed object, a whole ``.json`` file holding one),
which each of its lines alone reads as broken JSON at its first line.
"""

from __future__ import annotations

import json


def spread_over_lines(text: str, lineno: int) -> str | None:
    """What is wrong at line ``lineno`` of the JSON Lines ``text``, which does not read alone,
    read as JSON from the start of that line on: ``lines 3-7: one JSON object spread over
    lines ...`` when an object begins there and ends lines later; ``line 9: not valid JSON:
    ...`` when reading it fails on a later line. None when it fails on that line itself (its
    own error says it)."""
    start = sum(len(line) + 1 for line in text.split("\n")[: lineno - 1])
    start += len(text[start:]) - len(text[start:].lstrip())
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        return f"line {exc.lineno}: not valid JSON: {exc.msg}" if exc.lineno > lineno else None
    except (RecursionError, ValueError):  # (too deep, too many digits: said as it was)
        return None
    last = text.count("\n", 0, end) + 1
    if last == lineno or not isinstance(value, dict):
        return None
    return (
        f"lines {lineno}-{last}: one JSON object spread over lines, not JSON Lines (one entry a "
        "line): put the entries in a JSON array, or each on a line of its own"
    )
