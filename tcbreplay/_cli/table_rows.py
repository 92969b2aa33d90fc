"""The body rows of a table as plain lines: what rich draws for rows of one-line cells in
columns of fixed width, at a small part of its cost (rich takes about 450 µs a row, which
made a table of a million rows miss any time limit).

rich stays the reference: the title, header and caption are still drawn by it, and
``tests/cli/test_cli_table_rows.py`` compares whole tables drawn both ways. Cells are cut
and padded by the steps rich's ``Text`` takes (``wrap``, ``justify``, ``truncate``, then the
line set to its column's width), with rich's own measure of a character's cells, so wide
East Asian characters and emoji are cut where rich cuts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len, set_cell_size

if TYPE_CHECKING:
    from rich.console import Console


def divider(console: Console, widths: Sequence[int]) -> str | None:
    """The character between two cells of a body row, or None when the rows are not drawn
    plainly: no columns, or columns wider than the console (rich would shrink them)."""
    from rich import box

    if not widths or sum(widths) + 3 * (len(widths) - 1) > console.width:
        return None
    headed = box.MINIMAL_HEAVY_HEAD.substitute(console.options, safe=console.safe_box)
    # the chunk with the header draws its rows with the headed box, the others with the plain
    bars = {
        bar
        for kind in (headed, headed.get_plain_headed_box())
        for bar in (kind.head_vertical, kind.mid_vertical, kind.foot_vertical)
    }
    return bars.pop() if len(bars) == 1 else None


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
    if text.isascii():  # a character a cell (controls are escaped): the common case, fast
        if len(text) > width:
            return text[: width - 1] + "…"
        return text.rjust(width) if right else text.ljust(width)
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
