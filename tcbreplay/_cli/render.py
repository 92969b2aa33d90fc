"""Print what a command found in the format asked for, the same way for every command:
``table`` (for people), ``json``, ``jsonl``, ``csv`` and ``markdown`` (the live progress of a
recording is :mod:`tcbreplay._cli.progress`'s).

A command hands :func:`emit` an :class:`Output`: one or more :class:`Grid` of plain values
(what ``table`` and ``markdown`` print, and ``csv`` the first of, or ``Output.rows``), and the
object ``json`` and ``jsonl`` print. A table fits the terminal's width: long cells are cut
with an ellipsis (numbers never are), a header folds after an underscore or not at all, and
columns that still do not fit are left out and named below it; every other format gets the
full text (CSV and JSON as :mod:`tcbreplay._cli.serialize` writes them). Table and markdown
show control characters escaped (``\\x1b``): trace data may hold terminal escapes, which would
otherwise reach the terminal.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from tcbreplay.errors import QueryLimitError

if TYPE_CHECKING:  # rich is imported where a table is drawn by it: json and csv need none
    from rich.console import Console
    from rich.table import Table

    from tcbreplay._cli.table_rows import PlainConsole

# the width of a table printed to a file or a pipe, unless COLUMNS says otherwise
PIPE_WIDTH = 120
_TEXT_MIN = 8  # a text column is not cut below this many characters (or its own width)
# the first column (what names a row) is cut after the others, and below this only to
# show more columns
_FIRST_SOFT = 32
_FIRST_HARD = 12
_HEADER_MIN = 6  # a header folds onto more lines (after an underscore) rather than go below this
# rows drawn at a time: between them, the time limit of the query is checked
_DRAW_ROWS = 500
# rows laid out between two looks at a deadline
_FIT_ROWS = 20_000
# control characters (C0, DEL, C1), the marks that reorder text on the screen, and a zero-width
# joiner that joins nothing before it (first in a text, or after another): rich's measure of
# a cell starting with two fails (IndexError) when it cuts it
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|(?<![^\u200d])\u200d"
)


@dataclass
class Grid:
    """Rows of plain values under named columns, with an optional title and caption."""

    columns: list[str]
    rows: list[Sequence[Any]]
    title: str | None = None
    caption: str | None = None
    digits: str = ".6g"  # how a table and markdown show a float
    null: str = "NULL"  # how a table and markdown show a missing value
    time_format: str = "%Y-%m-%d %H:%M:%S"  # how a table and markdown show a time

    def records(self) -> list[dict[str, Any]]:
        """The rows as objects, keyed by column; a name a column before took is given a
        number (``status``, ``status_1``): two columns of one name (a join of two views)
        were one key, the first's value lost."""
        keys = unique_names(self.columns)
        return [dict(zip(keys, row, strict=True)) for row in self.rows]


def unique_names(columns: Sequence[str]) -> list[str]:
    """``columns`` with each name that an earlier column took numbered (a number no other
    column's name holds)."""
    taken, seen, out = set(columns), set(), []
    for name in columns:
        key, n = name, 0
        while key in seen or (key != name and key in taken):
            n += 1
            key = f"{name}_{n}"
        seen.add(key)
        out.append(key)
    return out


class Whole(str):
    """Text a table shows whole or not at all, as it does numbers (a signed delta, an
    interval); every other format takes it as the string it is."""


_FIRST_GRID = object()


@dataclass
class Output:
    """What a command prints, in every format."""

    grids: list[Grid] = field(default_factory=list)
    data: Any = _FIRST_GRID  # json and jsonl; by default the rows of ``rows`` as objects
    rows: Grid | None = None  # csv (and the default data); by default the first grid
    text: list[str] | None = None  # the table format prints these lines instead of the grids
    notes: list[str] = field(default_factory=list)  # table and markdown: lines after the grids
    # json and jsonl of an object too large to make first (every sample of a run): its text
    # in pieces, as to_json writes it, for an indent (2, or None: one line); ``data`` unused
    json_text: Callable[[int | None], Iterable[str]] | None = None

    def main_grid(self) -> Grid:
        return self.rows or (self.grids[0] if self.grids else Grid([], []))


def emit(
    output: Output, fmt: str, file: TextIO | None = None, deadline: float | None = None
) -> None:
    """Print ``output`` in format ``fmt``: table, json, jsonl, csv or markdown.

    ``deadline`` (``time.monotonic()`` seconds): a table still being drawn then is stopped
    with a :class:`QueryLimitError` (the other formats take no time to speak of)."""
    file = file or sys.stdout
    if fmt == "table":
        if output.text is not None:
            file.write("".join(f"{printable(line)}\n" for line in output.text))
        else:
            print_grids(output.grids, file, deadline)
            file.write("".join(f"{printable(line)}\n" for line in output.notes))
    elif fmt == "markdown":
        notes = [f"{printable(n)}\n" for n in output.notes]
        parts = [grid_markdown(g) for g in output.grids] + notes
        file.write("\n".join(parts))
    elif fmt == "csv":
        from tcbreplay._cli.serialize import rows_csv  # (a table needs none of it)

        grid = output.main_grid()
        file.write(rows_csv(grid.columns, grid.rows))
    elif output.json_text is not None:
        for piece in output.json_text(2 if fmt == "json" else None):
            file.write(piece)
        file.write("\n")
    else:
        from tcbreplay._cli.serialize import to_json

        data = output.main_grid().records() if output.data is _FIRST_GRID else output.data
        if fmt == "json":
            file.write(to_json(data) + "\n")
        else:  # jsonl: a list one item a line, anything else on one line
            items = data if isinstance(data, list) else [data]
            file.write("".join(to_json(item, indent=None) + "\n" for item in items))
    file.flush()


# ---------------------------------------------------------------- table


def printable(text: str) -> str:
    """``text`` with control characters and bidirectional marks escaped (``\\x1b``,
    ``\\u202e``), so that terminal escapes in trace data are shown, not obeyed; and a joiner
    that joins nothing before it (``\\u200d``)."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def print_grids(
    grids: Sequence[Grid], file: TextIO | None = None, deadline: float | None = None
) -> None:
    """Print grids as tables that fit the terminal (or :data:`PIPE_WIDTH` columns), some
    rows at a time; past ``deadline`` (``time.monotonic()``), stop with a
    :class:`QueryLimitError`."""
    from tcbreplay._cli.table_rows import plain_console, rich_console

    file = file or sys.stdout
    width = _width(file)
    console: Console | PlainConsole | None = plain_console(file, width)
    if console is None:
        console = rich_console(file, width)
    draw_grids(console, grids, deadline)


def draw_grids(
    console: Console | PlainConsole, grids: Sequence[Grid], deadline: float | None = None
) -> None:
    """Draw grids as tables on ``console``: rich draws the title, header and caption (on a
    :class:`~tcbreplay._cli.table_rows.PlainConsole`, those it would draw as plain lines
    are written as such), and the rows are written as the plain lines rich would draw (when
    it would not shrink the columns: see :mod:`tcbreplay._cli.table_rows`)."""
    from tcbreplay._cli.table_rows import divider, rows_text

    for grid in grids:
        fit = _fit(grid, console.width, deadline)
        # a title or caption wider than a table narrower than the console is a line of its
        # own, wrapped to the console (rich wraps it to the table's width: "1 row" under a
        # column of one character, a letter a line)
        width = _table_width(fit.widths)
        roomier = width < console.width
        above = printable(grid.title) if grid.title else None
        if above is not None and len(above) > width and roomier:
            fit = replace(fit, grid=replace(fit.grid, title=None))
        else:
            above = None
        below = fit.caption if fit.caption and len(fit.caption) > width and roomier else None
        if below is not None:
            fit = replace(fit, caption="")
        if above is not None:
            console.file.write(_wrapped(above, console.width))
        n = len(fit.cells)
        bar = divider(console, fit.widths)
        if bar is not None:
            _frame(console, fit, 0, 0)  # title and header (and caption, with no rows)
        for start in range(0, max(n, 1), _DRAW_ROWS):
            if start and deadline is not None and time.monotonic() > deadline:
                raise _past_deadline("drawing", start, n)
            if bar is None:
                _rich(console).print(_table(fit, start, start + _DRAW_ROWS))
            else:
                rows = fit.cells[start : start + _DRAW_ROWS]
                right = fit.numeric[: len(fit.widths)]
                by_rich = partial(_rich_row, console, fit, start)
                console.file.write(rows_text(rows, fit.widths, right, bar, by_rich))
        if bar is not None and n and fit.caption:
            _frame(console, fit, n, n)  # the caption alone
        if below is not None:
            console.file.write(_wrapped(below, console.width))


def _wrapped(text: str, width: int) -> str:
    """``text`` as lines of at most ``width`` characters (a longer word on a line of its own,
    whole), each ending in a newline."""
    import textwrap

    lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    return "".join(f"{line}\n" for line in lines or [""])


def _frame(console: Console | PlainConsole, fit: _Fit, start: int, end: int) -> None:
    """Print what a table of the rows ``start:end`` of a fitted grid has besides its rows
    (no rows are given): the title and header with the first rows, the caption with the
    last."""
    from tcbreplay._cli.table_rows import PlainConsole, frame_text

    if isinstance(console, PlainConsole):
        grid = fit.grid
        first, last = not start, end >= len(fit.cells)
        text = frame_text(
            printable(grid.title) if grid.title and first else None,
            [_fold_header(c, w) for c, w in zip(grid.columns, fit.widths, strict=False)]
            if first
            else None,
            fit.widths,
            fit.numeric[: len(fit.widths)],
            fit.caption if fit.caption and last else None,
        )
        if text is not None:
            console.file.write(text)
            return
    _rich(console).print(_table(fit, start, end))


def _rich(console: Console | PlainConsole) -> Console:
    """The rich console that draws on ``console``'s file."""
    from tcbreplay._cli.table_rows import PlainConsole

    return console.rich() if isinstance(console, PlainConsole) else console


def _rich_row(console: Console | PlainConsole, fit: _Fit, start: int, i: int) -> str:
    """The row ``start + i`` of a fitted grid as rich draws it."""
    drawing = _rich(console)
    with drawing.capture() as drawn:
        drawing.print(_table(fit, start + i, start + i + 1, frame=False))
    return drawn.get()


def _width(file: TextIO | None) -> int | None:
    target = file or sys.stdout
    if target.isatty():
        return None  # rich asks the terminal
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


def fitted_table(grid: Grid, width: int) -> Table:
    """A rich table of ``grid`` no wider than ``width``: text cells cut with an ellipsis,
    number columns whole, headers folded after an underscore or not at all, and the columns
    that still do not fit left out (and named)."""
    fit = _fit(grid, width)
    return _table(fit, 0, len(fit.cells))


@dataclass
class _Fit:
    """How a grid is drawn at a width: its cells as shown, and its columns' widths."""

    grid: Grid
    cells: list[list[str]]
    widths: list[int]  # of the columns shown (the first ones)
    numeric: list[bool]
    caption: str


def _past_deadline(doing: str, done: int, n: int) -> QueryLimitError:
    return QueryLimitError(
        f"{doing} the table ran past the time limit and was stopped after {done} of {n} rows",
        hint="--format csv or json prints the rows at once; or raise the limit with --timeout "
        "SECONDS (0: no limit)",
    )


def _fit(grid: Grid, width: int, deadline: float | None = None) -> _Fit:
    # no cell is shown wider than the table: longer ones are cut before they are measured
    # (all of them, to measure the columns: a long table's time goes here, so the deadline
    # is looked at as they are made)
    cells: list[list[str]] = []
    for start in range(0, len(grid.rows), _FIT_ROWS):
        if start and deadline is not None and time.monotonic() > deadline:
            raise _past_deadline("laying out", start, len(grid.rows))
        rows = grid.rows[start : start + _FIT_ROWS]
        cells += [[table_cell(v, grid, width) for v in row] for row in rows]
    numeric = [_is_numeric(grid.rows, i) for i in range(len(grid.columns))]
    # natural: all of it; tight: headers folded; soft: other text cut; hard: the first too
    natural, tight, soft, hard = [], [], [], []
    for i, name in enumerate(grid.columns):
        widest = max((len(row[i]) for row in cells), default=0)
        pieces = _header_pieces(name)
        header = min(max([min(len(printable(name)), _HEADER_MIN), *map(len, pieces)]), width)
        natural.append(max(widest, len(printable(name)), 1))
        tight.append(max(widest, header, 1))
        if _is_atomic(grid.rows, i):  # numbers, times, true/false: whole or not at all
            soft.append(tight[-1])
            hard.append(tight[-1])
        elif i == 0:  # what names the row: cut last, and in the middle (ids differ at the end)
            soft.append(max(min(tight[-1], _FIRST_SOFT), header))
            hard.append(max(min(tight[-1], _FIRST_HARD), header))
        else:
            soft.append(max(min(tight[-1], _TEXT_MIN), header))
            hard.append(soft[-1])
    shown = len(grid.columns)
    while shown > 1 and _table_width(hard[:shown]) > width:
        shown -= 1
    widths = natural[:shown]
    for floor in (tight, soft, hard):  # fold headers before cutting any cell
        while _table_width(widths) > width:
            i = max(range(shown), key=lambda j: (widths[j] - floor[j], widths[j]))
            if widths[i] <= floor[i]:
                break
            widths[i] -= 1
    for row in cells:
        if row:
            row[0] = _cut_middle(row[0], widths[0])
    caption = grid.caption or ""
    if shown < len(grid.columns):
        hidden = ", ".join(grid.columns[shown:])
        caption += f"{'; ' if caption else ''}not shown: {hidden} (--format csv or json has them)"
    return _Fit(grid, cells, widths, numeric, printable(caption))


def _table(fit: _Fit, start: int, end: int, frame: bool = True) -> Table:
    """The rows ``start:end`` of a fitted grid as a rich table: the first rows with the
    title and the header, the last with the caption (unless not ``frame``)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    grid = fit.grid
    first, last = frame and not start, frame and end >= len(fit.cells)
    table = Table(
        title=Text(printable(grid.title)) if grid.title and first else None,
        title_justify="left",
        caption=Text(fit.caption) if fit.caption and last else None,
        box=box.MINIMAL_HEAVY_HEAD,
        show_edge=False,
        show_header=first,
        pad_edge=False,
    )
    for i, width in enumerate(fit.widths):
        # a header folds onto more lines; cells stay on one, cut with an ellipsis
        table.add_column(
            Text(_fold_header(grid.columns[i], width), overflow="fold"),
            justify="right" if fit.numeric[i] else "left",
            width=width,
        )
    for row in fit.cells[start:end]:
        table.add_row(*(Text(c, no_wrap=True, overflow="ellipsis") for c in row[: len(fit.widths)]))
    return table


def _header_pieces(name: str) -> list[str]:
    """A column name's words, each split after its underscores (``gold_``, ``calls``):
    where a header may fold."""
    return [p for word in printable(name).split() for p in re.findall(r"[^_]*_+|[^_]+", word)]


def _fold_header(name: str, width: int) -> str:
    """``name`` on lines of at most ``width`` characters, broken between words and after
    underscores only (a piece wider than ``width`` is left to fold)."""
    lines: list[str] = []
    for word in printable(name).split() or [""]:
        for n, piece in enumerate(re.findall(r"[^_]*_+|[^_]+", word) or [""]):
            glue = " " if n == 0 else ""
            if lines and len(lines[-1]) + len(glue) + len(piece) <= width:
                lines[-1] += glue + piece
            else:
                lines.append(piece)
    return "\n".join(lines)


def _cut_middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    head = width // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _table_width(widths: Sequence[int]) -> int:
    """Characters a table (no outer edge, one space either side of each separator) takes
    for columns of these widths."""
    return sum(widths) + 3 * (len(widths) - 1)


def _is_numeric(rows: Sequence[Sequence[Any]], i: int) -> bool:
    """A column of numbers (or of :class:`Whole` texts), set flush right."""
    values = [row[i] for row in rows if row[i] is not None]
    return bool(values) and all(
        isinstance(v, (int, float, Whole)) and not isinstance(v, bool) for v in values
    )


def _is_atomic(rows: Sequence[Sequence[Any]], i: int) -> bool:
    values = [row[i] for row in rows if row[i] is not None]
    return bool(values) and all(
        isinstance(v, (int, float, dt.date, dt.time, Whole)) for v in values
    )


def table_cell(value: Any, grid: Grid, limit: int | None = None, lines: str = " ") -> str:
    """A value as a table or markdown cell shows it (on one line, its lines joined by
    ``lines``, control characters escaped); text longer than twice ``limit`` keeps its
    first and last ``limit`` characters around an ellipsis (enough for any cut of a cell
    ``limit`` wide)."""
    if value is None:
        return grid.null
    if isinstance(value, float):
        return format(value, grid.digits)
    if isinstance(value, dt.datetime):
        return value.strftime(grid.time_format)
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, default=str)
    text = str(value)
    if limit is not None and len(text) > 2 * limit + 1 and not isinstance(value, (int, Whole)):
        text = text[:limit] + "…" + text[-limit:]
    return printable(lines.join(text.splitlines()))


# ---------------------------------------------------------------- markdown


def grid_markdown(grid: Grid) -> str:
    """A GitHub-flavoured Markdown table, title above and caption below, cells in full."""
    from tcbreplay._cli.serialize import markdown_text

    def cell(value: Any) -> str:  # (a line break as GitHub's tables take one: <br>)
        # (joined by U+2028 first: splitlines has split the text's own at it, so it is ours)
        parts = table_cell(value, grid, lines="\u2028").split("\u2028")
        return "<br>".join(markdown_text(part) for part in parts)

    numeric = [_is_numeric(grid.rows, i) for i in range(len(grid.columns))]
    lines = [f"**{markdown_text(printable(grid.title))}**", ""] if grid.title else []
    lines.append("| " + " | ".join(cell(c) for c in grid.columns) + " |")
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in grid.rows]
    if grid.caption:
        lines += ["", markdown_text(printable(grid.caption))]
    return "\n".join(lines) + "\n"
