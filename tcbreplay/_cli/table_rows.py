"""The body rows of a table as plain lines: what rich draws for rows of one-line cells in
columns of fixed width, at a small part of its cost (rich takes about 450 µs a row, which
made a table of a million rows miss any time limit). And, for a file that is not a terminal,
the title, header and caption of the table too, when they are plain ASCII lines no wider
than the table: rich is then not imported at all (it takes about 45 ms to import, most of
a small ``tcbreplay score``'s drawing).

rich stays the reference: what is not drawn here is drawn by it, and
``tests/cli/test_cli_table_rows.py`` compares whole tables drawn both ways. Cells are cut
and padded by the steps rich's ``Text`` takes (``wrap``, ``justify``, ``truncate``, then the
line set to its column's width), with rich's own measure of a character's cells, so wide
East Asian characters and emoji are cut where rich cuts them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

# the characters besides ASCII that tables show of their own, one cell wide each as rich
# measures them: the ellipsis of a cut and the dash of a missing value
_ONE_CELL = frozenset("…—")
# the characters of rich's box MINIMAL_HEAVY_HEAD (no outer edge) in Unicode: between two
# cells, and the rule under the header
BAR = "│"
_RULE, _CROSS = "━", "┿"


class PlainConsole:
    """A file rich would draw tables on without styles, in its Unicode box characters, at a
    width it is given: tables are written to it plainly where :func:`frame_text` and
    :func:`rows_text` can, and by :meth:`rich` (a console on the same file) elsewhere."""

    def __init__(self, file: TextIO, width: int) -> None:
        self.file = file
        self.width = width
        self._rich: Console | None = None

    def rich(self) -> Console:
        if self._rich is None:
            self._rich = rich_console(self.file, self.width)
        return self._rich


def rich_console(file: TextIO, width: int | None) -> Console:
    """rich's console drawing on ``file``, ``width`` columns wide, whose reader gone (``|
    head``) raises BrokenPipeError, as a write of Python's own does: the command's edge then
    exits 0 (rich's own handling of it exits 1, or 0, by the timing of the reader's exit)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _Console(file=file, soft_wrap=False, width=width)


def plain_console(file: TextIO, width: int | None) -> PlainConsole | None:
    """A :class:`PlainConsole` on ``file`` when rich would draw on it as one (``width``: the
    width asked for, None for a terminal's own), else None."""
    if width is None or file.isatty():  # a terminal: styles, and its own width
        return None
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ or "IPython" in sys.modules:
        return None  # rich may take the file for a terminal (or a notebook)
    encoding = (getattr(file, "encoding", "utf-8") or "utf-8").lower()
    if not encoding.startswith("utf") or sys.platform == "win32":
        return None  # an ASCII box, or the box of Windows' legacy console
    return PlainConsole(file, width)


def divider(console: Console | PlainConsole, widths: Sequence[int]) -> str | None:
    """The character between two cells of a body row, or None when the rows are not drawn
    plainly: no columns, or columns wider than the console (rich would shrink them)."""
    if not widths or sum(widths) + 3 * (len(widths) - 1) > console.width:
        return None
    if isinstance(console, PlainConsole):
        return BAR
    from rich import box

    headed = box.MINIMAL_HEAVY_HEAD.substitute(console.options, safe=console.safe_box)
    # the chunk with the header draws its rows with the headed box, the others with the plain
    bars = {
        bar
        for kind in (headed, headed.get_plain_headed_box())
        for bar in (kind.head_vertical, kind.mid_vertical, kind.foot_vertical)
    }
    return bars.pop() if len(bars) == 1 else None


def frame_text(
    title: str | None,
    headers: Sequence[str] | None,
    widths: Sequence[int],
    right: Sequence[bool],
    caption: str | None,
) -> str | None:
    """The lines rich draws for a table's title (set left), header (its cells' lines, folded
    by ``"\\n"``, set right where ``right``; the rule under it) and caption (centred), those
    given, above or below rows in columns of ``widths``; or None when rich would wrap or
    measure one of them: wider than its place, or not ASCII (but for :data:`_ONE_CELL`)."""
    width = sum(widths) + 3 * (len(widths) - 1)
    lines = []
    if title is not None:
        if len(title) > width or not _one_cell_each(title):
            return None
        lines.append(title.ljust(width))  # Lines.justify("left"): truncate, padded
    if headers is not None:
        cells = [header.split("\n") for header in headers]
        if any(
            len(t) > w or not _one_cell_each(t)
            for c, w in zip(cells, widths, strict=True)
            for t in c
        ):
            return None
        height = max(map(len, cells))
        cells = [[""] * (height - len(c)) + c for c in cells]  # set at the bottom, as rich does
        for k in range(height):
            lines.append(
                f" {BAR} ".join(
                    c[k].rstrip().rjust(w) if flush else c[k].ljust(w)
                    for c, w, flush in zip(cells, widths, right, strict=True)
                )
            )
        lines.append(f"{_RULE}{_CROSS}{_RULE}".join(_RULE * w for w in widths))
    if caption is not None:
        if len(caption) > width or not _one_cell_each(caption):
            return None
        text = caption.rstrip()  # Lines.justify("center")
        left = (width - len(text)) // 2
        lines.append(" " * left + text + " " * (width - left - len(text)))
    return "".join(f"{line}\n" for line in lines)


def rows_text(
    cells: Sequence[Sequence[str]],
    widths: Sequence[int],
    right: Sequence[bool],
    bar: str,
    by_rich: Callable[[int], str],
) -> str:
    """The lines of these rows (each ending in a newline), their first ``len(widths)``
    cells drawn in columns of ``widths`` (set flush right where ``right``); a row with a
    cell that rich's cut leaves wider than its column is ``by_rich(its index)``."""
    # a column at a time: a call per cell, and the lines joined in one go
    columns = [
        [_cell(row[j], width, flush_right) for row in cells]
        for j, (width, flush_right) in enumerate(zip(widths, right, strict=True))
    ]
    glue = f" {bar} "
    by_rows: list[tuple[str, ...]] = list(zip(*columns, strict=True))
    odd = {i for column in columns if None in column for i, c in enumerate(column) if c is None}
    if not odd:
        return "".join(f"{line}\n" for line in map(glue.join, by_rows))
    return "".join(
        by_rich(i) if i in odd else glue.join(drawn) + "\n" for i, drawn in enumerate(by_rows)
    )


def _cell(text: str, width: int, right: bool) -> str | None:
    """``Text(text, no_wrap=True, overflow="ellipsis")`` in a column ``width`` wide, or None
    when rich's cut of it is still wider than the column (after a zero-width joiner: rich
    then cuts again, into the row's padding, which is left to rich)."""
    if right:  # Lines.justify drops the spaces at the end of a cell set flush right
        text = text.rstrip()
    if _one_cell_each(text):  # a character a cell: the common case, fast
        if len(text) > width:
            return text[: width - 1] + "…"
        return text.rjust(width) if right else text.ljust(width)
    from rich.cells import cell_len, set_cell_size

    length = cell_len(text)
    if length > width:  # Text.truncate, which pads only a text it did not cut
        text = set_cell_size(text, width - 1) + "…"
        # flush right: padded on the left after the cut (a joiner's cut may be narrower)
        length = cell_len(text) if right else width
    pad = " " * (width - length)
    text = pad + text if right else text + pad
    # Segment.adjust_line_length: a joiner before a space swallows it, so pad once more
    size = cell_len(text)
    return None if size > width else text + " " * (width - size)


def _one_cell_each(text: str) -> bool:
    """Whether each character of ``text`` takes one cell (controls are shown escaped)."""
    return text.isascii() or all(c.isascii() or c in _ONE_CELL for c in text)
