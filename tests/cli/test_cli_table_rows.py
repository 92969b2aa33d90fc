"""Table rows written as plain lines are the rows rich draws: rich stays the reference, and
every table here is drawn both ways (rich alone is the way tables were drawn before)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from unittest import mock

import pytest
from helpers import cli
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tcbreplay._cli import render, table_rows
from tcbreplay._cli.render import Grid, Whole, draw_grids

# wide East Asian characters, emoji (a joined one, one with a variation selector), a
# combining accent, a zero-width joiner alone, controls and line breaks (shown escaped)
ALPHABET = [*"ab Z_09.-é—…漢字かなｱ😀🎉\u0301\u200d\ufe0f\t\n\x1b\u2028", "👩\u200d💻", "☺\ufe0f"]
TEXT = st.lists(st.sampled_from(ALPHABET), max_size=30).map("".join)
LONG = st.lists(st.sampled_from(ALPHABET), min_size=40, max_size=300).map("".join)
KINDS = {
    "int": st.integers(-(10**15), 10**15),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "text": st.one_of(st.just(""), TEXT, LONG),
    "whole": st.one_of(TEXT, LONG).map(Whole),  # set flush right, like numbers
}


class AsciiFile(io.StringIO):
    """A file whose encoding is ASCII: rich draws the table with an ASCII box."""

    encoding = "ascii"


def console(kind: str, width: int):
    from rich.console import Console

    if kind == "plain":  # a file that is not a terminal, drawn on without rich where it can be
        return table_rows.PlainConsole(io.StringIO(), width)
    if kind == "terminal":  # the header is bold; rows carry no style
        return Console(file=io.StringIO(), width=width, soft_wrap=False, force_terminal=True,
                       color_system="truecolor")  # fmt: skip
    file = AsciiFile() if kind == "ascii" else io.StringIO()
    return Console(file=file, width=width, soft_wrap=False)


def both_ways(grids: list[Grid], kind: str, width: int, chunk: int = 500) -> tuple[str, str]:
    """The grids drawn with plain rows, and drawn by rich alone, ``chunk`` rows at a time."""
    drawn = []
    for plain in (True, False):
        target = console(kind if plain or kind != "plain" else "file", width)
        with mock.patch.object(render, "_DRAW_ROWS", chunk):
            if plain:
                draw_grids(target, grids)
            else:
                with mock.patch.object(table_rows, "divider", lambda *args: None):
                    draw_grids(target, grids)
        drawn.append(target.file.getvalue())
    return drawn[0], drawn[1]


@st.composite
def grids(draw) -> Grid:
    kinds = draw(st.lists(st.sampled_from([*KINDS, "mixed"]), min_size=1, max_size=6))
    values = [
        st.one_of(st.none(), *KINDS.values()) if k == "mixed" else st.none() | KINDS[k]
        for k in kinds
    ]
    names = st.text(st.sampled_from(list("abc_ 漢😀")), min_size=1, max_size=20)
    return Grid(
        draw(st.lists(names, min_size=len(kinds), max_size=len(kinds))),
        draw(st.lists(st.tuples(*values), max_size=8)),
        title=draw(st.none() | TEXT),
        caption=draw(st.none() | TEXT),
    )


def check(grid: Grid, kind: str, width: int, chunk: int) -> None:
    fitted = render._fit(grid, width)
    event("rows plain" if table_rows.divider(console(kind, width), fitted.widths) else "rich")
    plain, reference = both_ways([grid], kind, width, chunk)
    assert plain == reference, f"\n{plain}\n{reference}"


@settings(max_examples=15)
@given(grids(), st.sampled_from(["file", "terminal", "ascii", "plain"]), st.integers(1, 140),
       st.integers(1, 4))  # fmt: skip
def test_plain_rows_are_the_rows_rich_draws(grid, kind, width, chunk):
    check(grid, kind, width, chunk)


@pytest.mark.slow
@settings(max_examples=1000)
@given(grids(), st.sampled_from(["file", "terminal", "ascii", "plain"]), st.integers(1, 140),
       st.integers(1, 4))  # fmt: skip
def test_plain_rows_are_the_rows_rich_draws_many_times(grid, kind, width, chunk):
    check(grid, kind, width, chunk)


# titles, headers and captions as plain as a file's table draws them without rich: spaces
# (leading, trailing, doubled), underscores where headers fold, lengths about a table's width
ASCII = st.text(st.sampled_from(list("ab Z_09.-")), max_size=90)


@st.composite
def ascii_grids(draw) -> Grid:
    columns = draw(st.lists(ASCII, min_size=1, max_size=5))
    cell = st.none() | st.integers(-(10**6), 10**6) | ASCII
    rows = draw(st.lists(st.tuples(*[cell] * len(columns)), max_size=4))
    return Grid(columns, rows, title=draw(st.none() | ASCII), caption=draw(st.none() | ASCII))


@settings(max_examples=40)
@given(ascii_grids(), st.integers(1, 140), st.integers(1, 4))
def test_plain_titles_headers_and_captions_are_the_ones_rich_draws(grid, width, chunk):
    fitted = render._fit(grid, width)
    shown = zip(grid.columns, fitted.widths, strict=False)  # (columns left out: fewer widths)
    head = [render._fold_header(c, w) for c, w in shown]
    right = fitted.numeric[: len(fitted.widths)]
    drawn = fitted.widths and table_rows.frame_text(grid.title, head, fitted.widths, right, None)
    event("frame plain" if drawn else "frame by rich")
    check(grid, "plain", width, chunk)


@pytest.mark.parametrize("kind", ["file", "terminal", "plain"])
def test_a_title_or_caption_wider_than_the_table_is_a_line_of_its_own(kind):
    """``sql "select 1 as x"`` printed its caption a letter a line (rich wraps it to the
    table's width)."""
    grid = Grid(["x"], [(1,)], title="a title of words", caption="1 row")
    plain, reference = both_ways([grid], kind, 80)
    assert plain == reference
    lines = [line.strip() for line in plain.replace("\x1b[1m", "").replace("\x1b[0m", "")
             .splitlines()]  # fmt: skip
    assert lines == ["a title of words", "x", "━", "1", "1 row"]
    assert [
        line.strip()
        for line in both_ways([Grid(["x"], [], caption="0 rows")], kind, 80)[0]
        .replace("\x1b[1m", "")
        .replace("\x1b[0m", "")
        .splitlines()
    ] == ["x", "━", "0 rows"]


def test_a_file_that_is_not_a_terminal_gets_its_table_without_rich():
    """rich takes about 45 ms to import: most of what a small run's score spends drawing."""
    grid = Grid(["tool", "gold_calls", "ahr"], [("add", 3, 0.5), ("list", 1, None)],
                title="run  (model)", caption="2 tools")  # fmt: skip
    code = (
        "import io, sys\n"
        "from tcbreplay._cli.render import Grid, print_grids\n"
        "out = io.StringIO()\n"
        f"print_grids([Grid({grid.columns!r}, {grid.rows!r}, title={grid.title!r}, "
        f"caption={grid.caption!r})], out)\n"
        "print([m for m in sys.modules if m.startswith('rich')])\n"
        "print(out.getvalue(), end='')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={
        k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")
    }, check=True)  # fmt: skip
    loaded, drawn = done.stdout.split("\n", 1)
    assert loaded == "[]"
    assert drawn == both_ways([grid], "file", 120)[1]


@pytest.mark.parametrize("kind", ["file", "terminal", "ascii", "plain"])
@pytest.mark.parametrize("width", [12, 13, 40])
def test_wide_characters_and_emoji_are_cut_where_rich_cuts_them(kind, width):
    # ASCII cut by rich, and cut by the table before (its "…" is not ASCII); a wide
    # character across the column's edge, an emoji joined of three, a lone joiner, two
    # joiners (rich's cut of them is wider than the column: that row is left to rich)
    cells = ["plain text " * 3, "plain text " * 9, "漢字" * 20, "a漢字" * 20, "👩\u200d💻" * 9,
             "x\u200d" * 20, "☺\ufe0f" * 15, "", "\u200d\u200d—字か🎉な" * 3]  # fmt: skip
    # set flush right: trailing spaces dropped, a joiner last
    whole = [Whole(w) for w in ("ab  ", "字  ", "☺\ufe0f ", "x\u200d", "é\u0301 ")]
    rows = [(c, c[::-1], i, whole[i % len(whole)]) for i, c in enumerate(cells)]
    grid = Grid(["id", "text", "n", "whole"], [*rows, (None, None, None, None)],
                title="漢字 title", caption="a caption")  # fmt: skip
    # as wide as the console, cut by rich narrower than that (the joiner hides an "a")
    narrower = Grid(["n"], [(Whole("\u200d" + "a" * (width - 4) + "漢漢漢"),)])
    plain, reference = both_ways([grid, narrower], kind, width)
    assert plain == reference, f"\n{plain}\n{reference}"
    assert "…" in plain


def test_the_rows_are_not_drawn_by_rich():
    """Drawing the rows with rich cost about 450 µs a row: 50,000 rows took 22.7 s."""
    target = console("file", 80)
    grid = Grid(["n", "text"], [(i, f"row {i}") for i in range(1200)], caption="1200 rows")
    with mock.patch.object(target, "print", wraps=target.print) as printed:
        draw_grids(target, [grid])
    assert printed.call_count == 2  # the title and header, then the caption
    lines = target.file.getvalue().splitlines()
    assert len(lines) == 2 + 1200 + 1 and lines[-2] == "1199 │ row 1199"


def test_a_table_wider_than_the_console_is_left_to_rich():
    """A column of numbers is shown whole, even when wider than the console: rich shrinks it
    (and cuts the numbers), which the plain rows would not."""
    grid = Grid(["n"], [(10**30,)])
    assert table_rows.divider(console("file", 10), [31]) is None
    plain, reference = both_ways([grid], "file", 10)
    assert plain == reference and "…" in plain


def test_sql_draws_the_rows_rich_draws(store, monkeypatch):
    query = (
        "select i, repeat('漢字😀', (i % 9)::int) || 'end' as wide, "
        "case when i % 3 = 0 then null else 'x' || i end as maybe, i / 7 as ratio "
        "from range(60) t(i)"
    )
    args = ["sql", query, "--store", store]
    monkeypatch.setenv("COLUMNS", "70")
    plain = cli(*args)
    monkeypatch.setattr(table_rows, "divider", lambda *args: None)
    reference = cli(*args)
    assert plain.exit_code == reference.exit_code == 0, plain.output
    assert plain.stdout == reference.stdout
    assert "…" in plain.stdout and "60 rows" in plain.stdout


@pytest.mark.parametrize("width", [8, 12, 20, 40])
def test_joiners_that_join_nothing_are_shown_escaped_not_a_traceback(store, monkeypatch, width):
    """rich fails (IndexError) cutting a cell that starts with two zero-width joiners: such a
    joiner, first or after another, is shown as \\u200d, as controls are."""
    query = (
        "select chr(8205) || chr(8205) || 'か' || repeat('漢', 30) as x, "
        "'a' || chr(8205) || 'b' as y"
    )
    monkeypatch.setenv("COLUMNS", str(width))
    result = cli("sql", query, "--store", store)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and result.stdout.startswith("x")
    assert "\\u200d" in result.stdout  # the first joiner, escaped, whatever the cut
    if width == 40:  # the whole of x shown, and y beside it
        assert "\\u200d\\u200dか" in result.stdout
        assert "a\u200db" in result.stdout  # a joiner between two characters is left as it is
