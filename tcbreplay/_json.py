"""The project's JSON reader: how deep and how large JSON values may be, one limit for every
input, checked on the way in (every stage reads JSON through it).

Python's JSON reader and writer recurse once per level of nesting and stop near 1,000
levels (fewer when called deep in a program); the spec's value comparison recurses twice
per level; and Python refuses to turn an integer of more than 4,300 digits (by default;
at least 640 under any setting) into text or back. So a dataset, traces or tools file, a
``--model-option`` value and a stored message may nest at most :data:`MAX_DEPTH` levels of
arrays and objects, counted from the top of the document (the file, or a JSONL line), and
hold integers of at most :data:`MAX_INT_DIGITS` digits. DuckDB, the compiled kernels and
the report's script read far deeper and longer values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import orjson

MAX_DEPTH = 100
# the lowest value Python's int_max_str_digits can be set to: values within it are readable
# and writable under any setting
MAX_INT_DIGITS = 640
_INT_LIMIT = 10**MAX_INT_DIGITS  # an integer of more than MAX_INT_DIGITS digits is >= this

HINT = (
    f"tcbreplay reads JSON nested at most {MAX_DEPTH} levels deep, with integers of at most "
    f"{MAX_INT_DIGITS} digits"
)


class LimitError(ValueError):
    """JSON beyond the limits (or beyond what Python can read), with the line where it is."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(problem if line is None else f"line {line}: {problem}")
        self.problem = problem
        self.line = line


# the objects of a JSON value that repeat a key: id(object) -> (the object, the first key it
# repeats); the object is kept so that its id is not reused by another
Repeats = dict[int, tuple[dict[str, Any], str]]


def loads(text: str | bytes, *, first_line: int = 1, repeats: Repeats | None = None) -> Any:
    """``json.loads`` that refuses values beyond the limits with a :class:`LimitError`.

    Text that is not JSON raises ``json.JSONDecodeError`` as ``json.loads`` does. The
    error's line counts from ``first_line`` (the line of a JSONL file the text is). An
    object that repeats a key has its last value, as ``json.loads`` reads it; ``repeats``,
    when given, is filled with such objects (see :func:`repeated_key`).
    """
    try:
        if repeats is None:
            value = parse(text)
        else:
            value = json.loads(text, object_pairs_hook=_noting_repeats(repeats))
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as exc:  # too deep for Python, or Python's digit limit
        raise _located(text, first_line) or LimitError(one_line(exc)) from None
    if may_exceed(text) and value_problem(value) is not None:
        raise _located(text, first_line) or LimitError(value_problem(value) or "")
    return value


def parse(text: str | bytes) -> Any:
    """``json.loads(text)``, the same value or the same error, read by orjson where orjson
    reads the same value (about 1.4 times as fast on OTLP requests, more on plain JSON).

    orjson reads an integer of 19 digits or more beyond 64 bits as a float, and refuses
    what Python's reader takes (``NaN``, ``Infinity``, a lone surrogate, a number beyond a
    float's range): a text with such an integer, or one orjson refuses, is read by Python's
    reader. Floats read the same (``tests/ground/test_json.py`` holds them to it).
    """
    return parse_plain(text)[0]


def parse_plain(text: str | bytes) -> tuple[Any, bool]:
    """:func:`parse`'s value, and whether orjson read it: then the value holds nothing
    orjson cannot write back as the same value (no ``NaN`` or infinity, which it would write
    as null; no integer beyond 64 bits or lone surrogate, which it refuses), and
    :func:`dumps_plain` may write it."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if not _long_number(data):
        try:
            return orjson.loads(data), True
        except orjson.JSONDecodeError:
            pass
    return json.loads(text), False


def dumps_plain(value: Any, plain: bool) -> str:
    """``json.dumps(value, ensure_ascii=False)``'s JSON value, as compact text: written by
    orjson (several times as fast) when ``plain``, that is, when every JSON value in
    ``value`` was read by orjson (:func:`parse_plain`) and the rest are strings, whole
    numbers, booleans and None; else by Python's writer."""
    if plain:
        try:
            return orjson.dumps(value).decode("utf-8")
        except TypeError:  # (an integer beyond 64 bits, a lone surrogate: not plain after all)
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# digits as "0", quotes as themselves, anything else as a space. A number never follows a
# quote, so 19 digits or more not just after a quote may be a long integer (or sit inside a
# string, which Python's reader then reads: slower, the same value)
_NUMBER_SHAPE = bytes(48 if 48 <= b <= 57 else b if b == 34 else 32 for b in range(256))
_LONG_INTEGER = b"0" * 19


def _long_number(data: bytes) -> bool:
    shape = data.translate(_NUMBER_SHAPE)
    return b" " + _LONG_INTEGER in shape or shape.startswith(_LONG_INTEGER)


def _noting_repeats(repeats: Repeats) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    repeats[id(obj)] = (obj, key)
                    break
                seen.add(key)
        return obj

    return build


def repeated_key(value: Any, repeats: Repeats) -> str | None:
    """The first key the object ``value`` repeats in the text :func:`loads` read it from
    (``repeats``: what it noted), or None."""
    noted = repeats.get(id(value))
    return noted[1] if noted is not None and noted[0] is value else None


def value_problem(value: Any, depth: int = 0) -> str | None:
    """What in a JSON value (Python objects) is beyond the limits, or None.

    ``depth`` is the nesting the value already sits at. The walk does not recurse, so
    any depth is safe to check.
    """
    stack = [(value, depth + 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, level = pop()
        if type(item) is dict:
            children: Any = item.values()
        elif type(item) is list:
            children = item
        else:
            if type(item) is int and not -_INT_LIMIT < item < _INT_LIMIT:
                return _int_problem(None)
            continue
        if level > MAX_DEPTH:
            return _depth_problem()
        for child in children:
            if type(child) is dict or type(child) is list:
                push((child, level + 1))
            elif type(child) is int and not -_INT_LIMIT < child < _INT_LIMIT:
                return _int_problem(None)
    return None


def bounded(value: Any) -> Any:
    """``value`` with every part beyond the limits replaced by a string saying so.

    For what a model returns: it is the agent's behaviour, stored (and scored: the
    string equals no expected value) rather than refused. Returns ``value`` itself
    when nothing is beyond the limits.
    """
    if value_problem(value) is None:
        return value
    return _bounded(value)


# what stands in for a part of a model's output beyond the limits
OVER_DEPTH = f"[tcbreplay: nested deeper than {MAX_DEPTH} levels, not stored]"
OVER_DIGITS = f"[tcbreplay: an integer of more than {MAX_INT_DIGITS} digits, not stored]"


def _bounded(value: Any) -> Any:
    # iterative, as the value may be nested deeper than Python's recursion allows
    root: list[Any] = [None]
    stack: list[tuple[Any, int, Any, Any]] = [(value, 1, root, 0)]
    while stack:
        item, level, parent, key = stack.pop()
        if type(item) is int and not -_INT_LIMIT < item < _INT_LIMIT:
            parent[key] = OVER_DIGITS
        elif type(item) is dict or type(item) is list:
            if level > MAX_DEPTH:
                parent[key] = OVER_DEPTH
                continue
            copy = dict.fromkeys(item) if type(item) is dict else [None] * len(item)
            parent[key] = copy
            for k, child in item.items() if type(item) is dict else enumerate(item):
                stack.append((child, level + 1, copy, k))
        else:
            parent[key] = item
    return root[0]


def may_exceed(text: str | bytes) -> bool:
    """False when the text cannot hold a value beyond the limits (cheap: most texts)."""
    if isinstance(text, bytes):
        opens = text.count(b"[") + text.count(b"{")
    else:
        opens = text.count("[") + text.count("{")
    if opens > MAX_DEPTH:
        return True
    if len(text) <= MAX_INT_DIGITS:
        return False
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return _LONG_DIGITS in data.translate(_DIGITS_AS_ZERO)


_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_DIGITS = b"0" * (MAX_INT_DIGITS + 1)
_TOKENS = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a string (skipped)
    r"|(?P<open>[\[{])|(?P<close>[\]}])"
    r"|(?P<number>-?(?P<digits>\d+)(?P<fraction>\.\d+)?(?P<exp>[eE][-+]?\d+)?)"
)


def _located(text: str | bytes, first_line: int) -> LimitError | None:
    """The first value of the text beyond the limits, with its line; None if there is none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig", "replace")
    depth = 0
    for match in _TOKENS.finditer(text):
        if match.group("open"):
            depth += 1
            if depth > MAX_DEPTH:
                line = first_line + text.count("\n", 0, match.start())
                return LimitError(_depth_problem(), line)
        elif match.group("close"):
            depth -= 1
        elif match.group("number") and not (match.group("fraction") or match.group("exp")):
            digits = len(match.group("digits"))
            if digits > MAX_INT_DIGITS:
                line = first_line + text.count("\n", 0, match.start())
                return LimitError(_int_problem(digits), line)
    return None


def _depth_problem() -> str:
    return f"a value nested deeper than {MAX_DEPTH} levels of arrays and objects"


def _int_problem(digits: int | None) -> str:
    if digits is None:
        return f"an integer of more than {MAX_INT_DIGITS} digits"
    return f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS})"


def one_line(exc: BaseException) -> str:
    """An exception's message in one line of at most 200 characters."""
    return " ".join(str(exc).split())[:200] or type(exc).__name__


# a lone surrogate gets into parsed JSON only through a \uXXXX escape (UTF-8 text cannot hold one)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def lone_surrogate(value: Any, text: str | None = None) -> str | None:
    """Return the first lone surrogate in a JSON value as a ``\\uXXXX`` escape, or None;
    ``text``, the JSON the value was read from, spares the check when it escapes none.

    JSON may escape one (``"\\ud800"``) but UTF-8 cannot store it, so writing it would fail.
    """
    if text is not None and not _SURROGATE_ESCAPE.search(text):
        return None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"\\u{ord(exc.object[exc.start]):04x}"
    return None


def object_lines(
    text: str,
    label: str,
    error: Callable[..., Exception],
    *,
    expected: str = "expected an object",
    hint: str | None = None,
    repeats: Repeats | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of JSON Lines ``text`` (``label``: the file's name), each with its line
    number; blank lines are skipped. A line that is not JSON (``hint`` then says what the
    file holds), goes beyond the limits, is no object (``expected``) or holds a lone
    surrogate raises ``error`` naming the line. ``repeats``, when given, holds the objects of
    the line just yielded that repeat a key (see :func:`loads`). Lines end at ``"\n"``
    only: splitting also at U+2028, U+2029 or U+0085 would cut strings that hold them (a
    ``"\r"`` before the ``"\n"`` is JSON whitespace)."""
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        place = f"{label}: line {lineno}"
        if repeats is not None:
            repeats.clear()
        try:
            obj = loads(line, first_line=lineno, repeats=repeats)
        except json.JSONDecodeError as exc:
            raise error(f"{place}: not valid JSON: {exc.msg}", hint=hint) from exc
        except LimitError as exc:
            raise error(f"{label}: {exc}", hint=HINT) from None
        if not isinstance(obj, dict):
            raise error(f"{place}: {expected}")
        surrogate = lone_surrogate(obj, line)
        if surrogate:
            raise error(f"{place}: holds a lone surrogate {surrogate}, which is not valid Unicode")
        yield lineno, obj
