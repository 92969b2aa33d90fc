"""Values as text for other programs: CSV, JSON (``csv``, ``json`` and ``jsonl``: numbers in
full, NaN and the infinities as null, times in ISO 8601, intervals as ISO 8601 durations), and
a text escaped for Markdown. Apart from :mod:`tcbreplay._cli.render`, which imports it where a
format needs it: a command printing a table does not load it.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

# what Markdown would read as markup in a text from the traces: HTML and entities, links and
# images, code, emphasis, a table's cell end (an underscore only where it can emphasise: not
# inside a word, as in add_numbers)
_MARKDOWN = re.compile(r"[\\|<>&\[\]`*]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def markdown_text(text: str) -> str:
    """``text`` as Markdown shows it as it is (GitHub's flavour, HTML allowed): each
    character it would read as markup escaped by a backslash."""
    return _MARKDOWN.sub(lambda m: "\\" + m[0], text)


def rows_csv(columns: list[str], rows: Sequence[Sequence[Any]]) -> str:
    """CSV with a header line: numbers in full, missing values empty, lists and objects
    as JSON, times in ISO 8601."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_csv_value(v) for v in row] for row in rows)
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(_finite(value), ensure_ascii=False, default=_json_default)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return value


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON: NaN and infinities become null, times ISO 8601."""
    return json.dumps(
        _finite(obj),
        indent=indent,
        default=_json_default,
        ensure_ascii=False,
        allow_nan=False,
        separators=None if indent else (",", ":"),
    )


# rows of a frame written to JSON at a time (:func:`rows_json_parts`)
JSON_ROWS = 50_000


def rows_json(frame: pl.DataFrame, indent: int | None = 2, level: int = 0) -> str:
    """``to_json(frame.to_dicts(), indent)``, the same text, as it stands ``level`` objects
    deep in a larger one (see :func:`rows_json_parts`)."""
    return "".join(rows_json_parts(frame, indent, level))


def rows_json_parts(frame: pl.DataFrame, indent: int | None = 2, level: int = 0) -> Iterator[str]:
    """:func:`rows_json`'s text in pieces of ``JSON_ROWS`` rows, made as they are asked for:
    what is held does not grow with the frame. Written by orjson where the frame holds only
    texts, numbers and booleans (a sixth of the time: Python's writer indents in Python)."""
    import polars as pl

    pad = "\n" + " " * (indent * level) if indent else "\n"
    if indent not in (None, 2) or not all(
        dtype.is_numeric() or dtype in (pl.String, pl.Boolean, pl.Null) for dtype in frame.dtypes
    ):
        yield to_json(frame.to_dicts(), indent).replace("\n", pad)
        return
    if not frame.height:
        yield "[]"
        return
    for start in range(0, frame.height, JSON_ROWS):
        text = _rows_text(frame.slice(start, JSON_ROWS), indent)
        inner = text[1:-2] if indent else text[1:-1]  # the rows, without "[" and "\n]"
        yield ("," if start else "[") + inner.replace("\n", pad)
    yield pad + "]" if indent else "]"


def _rows_text(frame: pl.DataFrame, indent: int | None) -> str:
    """``to_json(frame.to_dicts(), indent)`` of a frame of texts, numbers and booleans, by
    orjson. It writes every float as Python does but those Python writes with an exponent
    (``1e-05``, ``3e+17``: below 1e-4 or from 1e16 on), which it writes in full: these are
    handed to it as Python's text."""
    import orjson
    import polars as pl

    floats = [name for name, dtype in frame.schema.items() if dtype.is_float()]
    # NaN and the infinities as null, as to_json writes them; each float as Python holds it
    # (a 32-bit one widened, exactly)
    frame = frame.with_columns(
        pl.when(pl.col(c).is_finite()).then(pl.col(c).cast(pl.Float64)).alias(c) for c in floats
    )
    rows = frame.to_dicts()
    if floats:
        size = pl.col(floats).abs()
        python_s = (size < 1e-4) & (size != 0) | (size >= 1e16)
        marked = frame.select(pl.any_horizontal(python_s.fill_null(False)).arg_true())
        for at in marked.to_series():
            row = rows[at]
            for name in floats:
                value = row[name]
                if value is not None and (0 < abs(value) < 1e-4 or abs(value) >= 1e16):
                    row[name] = orjson.Fragment(float.__repr__(value))
    return orjson.dumps(rows, option=orjson.OPT_INDENT_2 if indent else 0).decode()


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):  # (Python's text, "1 day, 0:00:00", before)
        return iso_duration(value)
    if isinstance(value, bytes | bytearray | memoryview):  # (Python's repr, "b'ab'", before)
        return base64.b64encode(bytes(value)).decode()
    return str(value)


def iso_duration(value: dt.timedelta) -> str:
    """An interval as ISO 8601 writes a duration (``P1DT1H30M``, ``PT0.5S``, ``-PT2S``)."""
    sign = "-" if value < dt.timedelta(0) else ""
    micros = abs(value) // dt.timedelta(microseconds=1)
    days, rest = divmod(micros, 86_400 * 10**6)
    hours, rest = divmod(rest, 3_600 * 10**6)
    minutes, rest = divmod(rest, 60 * 10**6)
    seconds = f"{rest // 10**6}.{rest % 10**6:06d}".rstrip("0").rstrip(".") if rest else ""
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
    time += f"{seconds}S" if seconds else ""
    text = (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return f"{sign}P{text or 'T0S'}"


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
