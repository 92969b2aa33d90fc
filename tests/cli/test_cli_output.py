"""One way to read every command's output: the same --format choices on every command
(after it or before it), tables that keep their numbers at 80 columns, and hints for
mistyped names."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from clocks import FakeClock
from helpers import ROOT, TEST_DATA, cli
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay._cli import main

DATA = TEST_DATA
FORMATS = ("json", "jsonl", "csv", "markdown")


@pytest.fixture(scope="module")
def template(sim_runs_pair, tmp_path_factory) -> tuple[Path, list[str]]:
    """A store with two sim runs of the built-in benchmark, both scored."""
    store, run_ids = sim_runs_pair
    root = tmp_path_factory.mktemp("output") / "traces"
    shutil.copytree(store.root, root)
    for run_id in run_ids:
        result = cli("score", run_id, "--store", root, "--dashboard", "none")
        assert result.exit_code == 0, result.output
    return root, run_ids


@pytest.fixture
def pair(template, tmp_path) -> tuple[Path, list[str]]:
    """A private copy of the template store, for commands that write to it."""
    root, run_ids = template
    shutil.copytree(root, tmp_path / "traces")
    return tmp_path / "traces", run_ids


def _import_args(root: Path, run_id: str = "imported") -> list[object]:
    return [
        "import", "--dataset", DATA / "ds_shapes.json", "--tools", DATA / "tools_shop.json",
        "--traces", DATA / "import" / "traces_shapes.jsonl", "--run-id", run_id,
        "--store", root,
    ]  # fmt: skip


# a recording of the benchmark's first entries: its output is what is tested
RECORD = ["record", "--model", "sim:seed=3", "--limit", "8", "--quiet"]
# each command with the arguments it needs; `before`: its --format goes before the command
# (import and export name the files they read or write with their own --format)
COMMANDS = {
    "runs": lambda root, a, b, tmp: ["runs"],
    "sql": lambda root, a, b, tmp: ["sql", "select run_id, count(*) as n from samples group by 1"],
    "query": lambda root, a, b, tmp: ["query", "worst_samples", "-p", "limit=3"],
    "query --list": lambda root, a, b, tmp: ["query", "--list"],
    "score": lambda root, a, b, tmp: ["score", a, "--dashboard", "none"],
    "diff": lambda root, a, b, tmp: ["diff", a, b, "--bootstrap", "50"],
    "audit verify": lambda root, a, b, tmp: ["audit", "verify", a],
    "record": lambda root, a, b, tmp: RECORD,
    "catalog": lambda root, a, b, tmp: ["catalog", "-o", tmp / "c.duckdb"],
    "report": lambda root, a, b, tmp: ["report", a, "-o", tmp / "r.html"],
    "before import": lambda root, a, b, tmp: _import_args(root),
    "before export": lambda root, a, b, tmp: ["export", a, "-o", tmp / "out"],
}


def run_command(name: str, fmt: str, root: Path, run_ids: list[str], tmp: Path):
    args = COMMANDS[name](root, *run_ids, tmp)
    if name.startswith("before"):
        return cli("--format", fmt, *args, "--store", root)
    return cli(*args, "--format", fmt, "--store", root)


def parse(fmt: str, text: str) -> object:
    """The output read back as what it says it is."""
    if fmt == "json":
        return json.loads(text)
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert rows and all(len(row) == len(rows[0]) for row in rows), text
        return rows
    # markdown: tables whose rows have as many cells as their header
    tables = re.findall(r"(?m)((?:^\|.*\|\n)+)", text)
    assert tables, text
    for table in tables:
        rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in table.splitlines()]
        assert set(rows[1]) <= {"---", "---:"}, table
        assert all(len(row) == len(rows[0]) for row in rows), table
    return tables


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_prints_json_and_csv_that_parse(pair, tmp_path, name, fmt):
    root, run_ids = pair
    result = run_command(name, fmt, root, run_ids, tmp_path)
    assert result.exit_code == 0, (name, result.output)
    parsed = parse(fmt, result.stdout)
    assert parsed, result.stdout
    assert "next:" not in result.stdout  # hints are for people: the table only


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
@pytest.mark.parametrize("name", ["runs", "sql", "score", "diff", "audit verify", "record"])
def test_jsonl_and_markdown_parse_too(pair, tmp_path, name, fmt):
    root, run_ids = pair
    result = run_command(name, fmt, root, run_ids, tmp_path)
    assert result.exit_code == 0, (name, result.output)
    assert parse(fmt, result.stdout)


def test_the_formats_agree(template):
    root, _ = template
    # ordered: a join's rows come in no fixed order, and each format runs the query anew
    query = (
        "select sample_id, tp, input from scores join samples using (run_id, sample_id, trial) "
        "order by run_id, sample_id, trial"
    )
    got = {fmt: cli("sql", query, "--store", root, "--format", fmt).stdout for fmt in FORMATS}
    rows = json.loads(got["json"])
    assert len(rows) == 188
    assert [json.loads(line) for line in got["jsonl"].splitlines()] == rows
    table = list(csv.DictReader(io.StringIO(got["csv"])))
    assert [(r["sample_id"], float(r["tp"]), r["input"]) for r in table] == [
        (r["sample_id"], r["tp"], r["input"]) for r in rows
    ]
    assert len(got["markdown"].splitlines()) == 2 + 188 + 2  # header, rule, rows, caption


def test_runs_lists_the_latest_numbers_and_a_readable_date(pair):
    """`runs` gives each run's latest tsa/tp/ahr, the scoring they come from, and when the
    run was made; json has the full values."""
    root, (a, b) = pair
    assert cli("score", b, "--store", root, "--scorer", "abet").exit_code == 0
    rows = {r["run_id"]: r for r in json.loads(cli("runs", "--store", root, "--format",
                                                   "json").stdout)}  # fmt: skip
    spec = json.loads((root / a / "scores" / "spec" / "summary.json").read_text())
    abet = json.loads((root / b / "scores" / "abet" / "summary.json").read_text())
    assert {k: rows[a][k] for k in ("tsa", "tp", "ahr", "scoring")} == {
        "tsa": spec["tsa"], "tp": spec["tp"], "ahr": spec["ahr"], "scoring": "spec"
    }  # fmt: skip
    assert (rows[b]["tsa"], rows[b]["scoring"]) == (abet["tsa"], "abet")
    manifest = json.loads((root / a / "manifest.json").read_text())
    assert rows[a]["created_at"][:19] == manifest["created_at"][:19]  # ISO 8601 in json
    table = cli("runs", "--store", root).stdout
    line = next(line for line in table.splitlines() if line.startswith(a))
    assert f"{spec['tsa']:.4f}" in line and f"{spec['tp']:.4f}" in line
    date = manifest["created_at"][:10]
    assert date in line and "T" not in line.split(date)[1][:3]  # 2026-01-02 13:45


# ---------------------------------------------------------------- options before the command


def test_store_and_format_before_the_command(template, tmp_path):
    root, _ = template
    after = cli("runs", "--store", root, "--format", "json")
    before = cli("--store", root, "--format", "json", "runs")
    assert before.exit_code == 0, before.output
    assert before.stdout == after.stdout
    assert cli("--store", root, "sql", "select 1 as x", "--format", "csv").stdout == "x\n1\n"
    # after the command wins over before it
    assert cli("--format", "csv", "runs", "--format", "json", "--store", root).stdout == (
        after.stdout
    )


def test_two_stores_in_one_command_line_are_a_usage_error(template, tmp_path):
    # `tcbreplay --store A runs --store B` read B and said nothing of A
    root, _ = template
    other = tmp_path / "other"
    for args in (["--store", root, "runs", "--store", other],
                 ["--store", other, "score", "x", "--store", root],
                 ["--store", other, "audit", "verify", "x", "--store", root],
                 ["--store", "s3://bucket/traces", "runs", "--store", root]):  # fmt: skip
        result = cli(*args)
        assert result.exit_code == 2, (args, result.output)
        first, second = args[1], args[-1]
        assert result.stderr.splitlines()[0] == (
            f"Error: --store given twice: {str(first)!r} before the command and "
            f"{str(second)!r} after it; give one store"
        )
        assert result.stdout == ""
    assert not other.exists()


@pytest.mark.parametrize(
    "same",
    [
        lambda root: root,
        lambda root: f"{root}/",
        lambda root: os.path.relpath(root),
        lambda root: f"file://{root}",
    ],
)
def test_the_same_store_given_twice_is_that_store(template, same):
    root, _ = template
    expected = cli("runs", "--store", root, "--format", "json")
    result = cli("--store", same(root), "runs", "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert result.stdout == expected.stdout


def test_the_command_line_beats_the_environment_and_the_environment_still_works(template):
    root, _ = template
    expected = cli("runs", "--store", root, "--format", "json").stdout
    runner = CliRunner()
    for args in (["runs"], ["--store", str(root), "runs"], ["runs", "--store", str(root)]):
        env = {"TCBREPLAY_STORE": str(root if args == ["runs"] else root / "elsewhere")}
        result = runner.invoke(main, [*args, "--format", "json"], env=env)
        assert result.exit_code == 0, (args, result.output)
        assert result.stdout == expected, args


def test_a_bad_store_variable_does_not_stop_a_store_given_before_the_command(template, tmp_path):
    root, _ = template
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    env = {"TCBREPLAY_STORE": str(not_a_dir / "sub")}
    result = CliRunner().invoke(main, ["--store", str(root), "runs"], env=env)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["--store", str(not_a_dir / "sub"), "runs"])
    assert result.exit_code == 2
    assert "is a file, not a folder" in result.stderr


def test_text_is_taken_as_table_by_audit_verify(template):
    root, (a, _) = template
    table = cli("audit", "verify", a, "--store", root)
    text = cli("audit", "verify", a, "--store", root, "--format", "text")
    assert text.exit_code == table.exit_code == 0
    assert text.stdout == table.stdout
    assert text.stdout.startswith(f"verified: spec of {a}: 94 samples identical")


def test_a_format_no_command_knows_is_refused_with_the_choices(template):
    root, _ = template
    result = cli("runs", "--store", root, "--format", "xml")
    assert result.exit_code == 2
    assert "'xml' is not one of 'table', 'json', 'jsonl', 'csv', 'markdown'" in result.stderr


def test_record_exports_jsonl_with_its_own_option(store):
    result = cli("record", "--model", "sim:seed=1", "--run-id", "r", "--quiet", "--export-jsonl",
                 "--limit", 10, "--store", store.root, "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["run_id"], summary["total"], summary["ok"]) == ("r", 94, 10)
    assert sorted(p.name for p in (store.root / "r" / "jsonl").iterdir()) == [
        "manifest.json", "messages.jsonl", "samples.jsonl"
    ]  # fmt: skip


def test_import_prints_its_summary_in_the_format_before_the_command(store):
    result = cli("--format", "json", *_import_args(store.root))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "run_id": "imported",
        "run_dir": str(store.root / "imported"),
        "samples": 4,
        "imported": 3,
        "missing": 1,
        "format": "langchain",
        "sniffed": "its messages are LangChain dicts (type, data)",
        "trials": 1,
    }


# ---------------------------------------------------------------- 80 columns


def at_80(*args: object):
    result = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(map(len, result.stdout.splitlines())) <= 80, result.stdout
    return result.stdout


def test_sql_at_80_columns_cuts_cells_instead_of_wrapping_them(template):
    """Reported: `sql "select * from samples"` wrapped every cell to 4 characters."""
    root, (a, _) = template
    query = f"select * from samples where run_id = '{a}' order by sample_index limit 3"
    out = at_80("sql", query, "--store", root)
    rows = [line for line in out.splitlines() if line.startswith(a)]
    assert len(rows) == 3  # one line each
    full = json.loads(cli("sql", query, "--store", root, "--format", "json").stdout)
    for line, row in zip(rows, full, strict=True):
        cells = [c.strip() for c in line.split("│")]
        assert cells[0] == a
        # sample_id, trial, sample_index, input
        expected = (row["sample_id"], None, None, row["input"])
        assert len(cells) > len(expected)  # the input is shown, cut
        for got, whole in zip(cells[1:], expected, strict=False):
            if whole is not None:
                assert got == whole or (got.endswith("…") and whole.startswith(got[:-1]))
    assert "…" in out
    assert "not shown:" in out and "output_tokens" in out  # the columns left out are named
    # the other formats give every column in full
    wide = cli("sql", "select * from samples limit 1", "--store", root, "--format", "csv")
    header, first = list(csv.reader(io.StringIO(wide.stdout)))
    assert "output_tokens" in header and len(first) == len(header)


def test_score_at_80_columns_keeps_every_number(template):
    root, (a, _) = template
    summary = json.loads((root / a / "scores" / "spec" / "summary.json").read_text())
    out = at_80("score", a, "--store", root, "--dashboard", "none")
    for metric in ("tsa", "tp", "ahr"):
        line = next(line for line in out.splitlines() if line.startswith(metric + " "))
        assert f"{summary[metric]:.4f}" in line and repr(summary[metric]) in line
    for row in summary["by_tool"]:
        line = next(line for line in out.splitlines() if line.startswith(row["tool"]))
        numbers = [str(row[c]) for c in ("gold_calls", "agent_calls", "paired", "args_invalid",
                                         "args_total")]  # fmt: skip
        assert line.split()[2::2] == [*numbers[:3], f"{row['recall']:.4f}", *numbers[3:],
                                      f"{row['ahr']:.4f}"]  # fmt: skip


def test_runs_at_80_columns_keeps_the_metrics(template):
    root, _ = template
    out = at_80("runs", "--store", root)
    rows = json.loads(cli("runs", "--store", root, "--format", "json").stdout)
    for row in rows:
        line = next(line for line in out.splitlines() if line.startswith(row["run_id"]))
        for metric in ("tsa", "tp", "ahr"):
            assert f"{row[metric]:.4f}" in line


def test_diff_at_80_columns_keeps_the_intervals(template):
    root, (a, b) = template
    out = at_80("diff", a, b, "--store", root, "--bootstrap", "50")
    data = json.loads(cli("diff", a, b, "--store", root, "--bootstrap", "50", "--format",
                          "json").stdout)  # fmt: skip
    for tool in data["tools"]:
        line = next(line for line in out.splitlines() if line.startswith(tool["tool"][:6]))
        assert f"[{tool['ahr_ci_low']:+.4f}, {tool['ahr_ci_high']:+.4f}]" in line


def _headers(out: str, title: str | None = None) -> list[str]:
    """The column names of a table as printed (a header folded onto several lines joined
    again), and each name's printed pieces, from the table below ``title`` (or the first)."""
    lines = out.splitlines()
    start = [line.rstrip() for line in lines].index(title) + 1 if title else 0
    rule = next(i for i in range(start, len(lines)) if "━" in lines[i])
    rows = [line.split("│") for line in lines[start:rule]]
    pieces = [[row[j].strip() for row in rows if row[j].strip()] for j in range(len(rows[0]))]
    for parts in pieces:  # a name is split after an underscore, or not at all
        assert all(part.endswith("_") for part in parts[:-1]), (parts, out)
    return ["".join(parts) for parts in pieces]


def test_headers_at_80_columns_are_split_at_underscores_or_not_at_all(template):
    """Reported: `gold_c|alls` and `args_i|nvalid` in score's per-tool table."""
    root, (a, _) = template
    out = at_80("score", a, "--store", root, "--dashboard", "none")
    assert _headers(out, "per tool") == [
        "tool", "gold_calls", "agent_calls", "paired", "recall", "args_invalid", "args_total",
        "ahr",
    ]  # fmt: skip
    out = at_80("sql", "select * from samples limit 2", "--store", root)
    names = _headers(out)
    columns = cli("sql", "select * from samples limit 1", "--store", root, "--format", "csv")
    assert names == next(csv.reader(io.StringIO(columns.stdout)))[: len(names)]


def test_a_header_without_underscores_is_not_split():
    from rich.console import Console

    from tcbreplay._cli.render import Grid, fitted_table

    grid = Grid(["n", "measurements", "counted_in_total"], [(1, 2, 3)])
    console = Console(width=24, record=True, file=io.StringIO())
    console.print(fitted_table(grid, 24))
    text = console.export_text()
    assert "measurements" in text and "counted_" in text and "in_total" in text, text


def test_a_long_cell_is_cut_before_it_is_drawn():
    """Reported: a 100 MB cell took 1.4 s a MB to draw, past any --timeout (issue #27)."""
    from tcbreplay._cli.render import Grid, fitted_table

    grid = Grid(["id", "text"], [("a" * 10**6, "b" * 10**6 + "c")])
    table = fitted_table(grid, 80)
    cells = [column._cells[0].plain for column in table.columns]
    assert all(len(cell) <= 2 * 80 + 1 for cell in cells), [len(c) for c in cells]
    assert cells[0].startswith("aaa") and cells[0].endswith("a") and "…" in cells[0]


def test_a_markdown_cell_keeps_its_line_breaks():
    """The docs say cells in full: a line break became a space."""
    from tcbreplay._cli.render import Grid, grid_markdown

    text = grid_markdown(Grid(["x", "y"], [("a\nb|c", "p\\q")]))
    assert text.splitlines()[2] == "| a<br>b\\|c | p\\\\q |"


def test_markdown_shows_trace_text_as_it_is_not_as_markup():
    """Tool names and titles from traces went into Markdown as they were: rendered (HTML
    allowed, as GitHub's and most renderers do), a name made a link, a <script> element, or
    hid the rest of the table (<!--)."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    from tcbreplay._cli.render import Grid, grid_markdown

    texts = ['<a href="https://evil.example/x">add</a>', "<img src=x onerror=alert(1)>",
             "[link](https://evil.example)", "![i](https://evil.example/i.png)", "&amp; &lt;",
             "*em* _em_ `code` add_numbers a\\b|c", "<!-- the rest"]  # fmt: skip
    title = "run (model<script>alert(3)</script>)"
    page = (
        MarkdownIt("commonmark", {"html": True})
        .enable("table")
        .render(
            grid_markdown(Grid(["tool", "n"], [(t, k) for k, t in enumerate(texts)], title=title))
        )
    )

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.text: dict[str, list[str]] = {"td": [], "strong": []}
            self.open: str | None = None

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            if tag in self.text:
                self.open = tag
                self.text[tag].append("")

        def handle_endtag(self, tag):
            self.open = None if tag == self.open else self.open

        def handle_data(self, data):
            if self.open:
                self.text[self.open][-1] += data

    cells = Cells()
    cells.feed(page)
    assert set(cells.tags) <= {"p", "strong", "table", "thead", "tbody", "tr", "th", "td"}
    assert cells.text["td"][::2] == texts
    assert cells.text["strong"] == [title]


def _drawn(grid, **kwargs) -> str:
    from tcbreplay._cli.render import print_grids

    out = io.StringIO()
    print_grids([grid], out, **kwargs)
    return out.getvalue()


def test_a_table_drawn_some_rows_at_a_time_is_the_same_table():
    from rich.console import Console

    from tcbreplay._cli.render import _DRAW_ROWS, Grid, fitted_table

    grid = Grid(["n", "label_of_row"], [(i, f"row {i}") for i in range(_DRAW_ROWS * 5 // 2)],
                title="title", caption="caption")  # fmt: skip
    whole = io.StringIO()
    Console(file=whole, width=120, soft_wrap=False).print(fitted_table(grid, 120))
    assert _drawn(grid) == whole.getvalue()


def test_drawing_a_table_stops_at_the_deadline():
    from tcbreplay._cli.render import _DRAW_ROWS, Grid
    from tcbreplay.errors import QueryLimitError

    grid = Grid(["n"], [(i,) for i in range(3 * _DRAW_ROWS)])
    with pytest.raises(QueryLimitError, match=f"stopped after {_DRAW_ROWS} of {3 * _DRAW_ROWS}"):
        _drawn(grid, deadline=time.monotonic() - 1)
    # the first rows are always drawn, and a table of them only is never stopped
    small = Grid(["n"], [(i,) for i in range(_DRAW_ROWS)])
    assert len(_drawn(small, deadline=time.monotonic() - 1).splitlines()) == 2 + _DRAW_ROWS


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m"  # a window title, clear screen, a C1 escape


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """A store with a run whose sample id, category, tool name, model label and error text
    hold terminal escapes, imported and scored."""
    tmp = tmp_path_factory.mktemp("hostile")
    tool, sid = f"evil{HOSTILE}tool", f"s1{HOSTILE}"
    (tmp / "ds.json").write_text(json.dumps([
        {"id": sid, "category": f"cat{HOSTILE}", "input": "hi",
         "target": [{"name": tool, "args": {"a": 1}}]},
    ]))  # fmt: skip
    (tmp / "tools.json").write_text(json.dumps([
        {"name": tool, "description": "d",
         "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}},
    ]))  # fmt: skip
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": '{"a": 1}'}}
    line = {"sample_id": sid, "status": "error", "error": f"boom{HOSTILE}", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]}  # fmt: skip
    (tmp / "traces.jsonl").write_text(json.dumps(line) + "\n")
    root = tmp / "traces"
    result = cli("import", "--format", "openai", "--dataset", tmp / "ds.json", "--tools",
                 tmp / "tools.json", "--traces", tmp / "traces.jsonl", "--run-id", "h",
                 "--model", f"m{HOSTILE}", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert cli("score", "h", "--store", root, "--dashboard", "none").exit_code == 0
    return root


@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize(
    "args",
    [["score", "h", "--dashboard", "none"], ["runs"],
     ["sql", "select * from samples"], ["sql", "select * from tool_calls"],
     ["sql", f"select 1 as \"col{HOSTILE}\""], ["query", "error_breakdown"],
     ["query", "worst_samples"]],
    ids=["score", "runs", "sql samples", "sql tool_calls", "sql header", "error_breakdown",
         "worst_samples"],
)  # fmt: skip
def test_terminal_escapes_in_trace_data_are_shown_escaped(hostile, args, fmt):
    result = cli(*args, "--format", fmt, "--store", hostile)
    assert result.exit_code == 0, result.output
    for char in "\x1b\x07\x9b":
        assert char not in result.output, repr(result.output)
    # shown escaped (markdown escapes the backslash and brackets themselves), cut in a table
    shown = re.sub(r"\\([\\\[\]])", r"\1", result.output) if fmt == "markdown" else result.output
    expected = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"
    assert expected in shown if fmt == "markdown" else "\\x1b" in shown, result.output


def test_terminal_escapes_in_error_and_warning_lines_are_shown_escaped():
    import warnings

    import click

    from tcbreplay.errors import InputError, TcbReplayWarning

    @click.command("escapes-for-test")
    def escapes() -> None:
        warnings.warn(TcbReplayWarning(f"sample s1{HOSTILE} left out"), stacklevel=1)
        raise InputError(f"tool evil{HOSTILE}: unknown\nsecond line", hint=f"see {HOSTILE}")

    main.add_command(escapes)
    try:
        result = cli("escapes-for-test")
    finally:
        main.commands.pop("escapes-for-test")

    assert result.exit_code == 2
    shown = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"
    assert result.stderr.splitlines() == [
        f"Warning: sample s1{shown} left out",
        f"Error: tool evil{shown}: unknown",
        "Error: second line",
        f"Hint: see {shown}",
    ]


def test_the_progress_line_keeps_its_numbers_at_80_columns():
    """Reported: at 80 columns done/total, rate and ETA were cut first."""
    from rich.console import Console

    from tcbreplay._cli.progress import Progress

    for width in (80, 60):
        console = Console(width=width, record=True, file=io.StringIO())
        label = "recording google_genai:gemini-2.5-flash-lite (simulated) and more words"
        clock = FakeClock()
        progress = Progress(label, console=console, clock=clock)
        progress.start(10000)
        clock.advance(100)  # 100 s later: 45.2 samples a second
        for i in range(4521):
            progress({"status": "error" if i % 50 == 0 else "ok"})
        progress.close()
        (line,) = console.export_text().splitlines()
        assert len(line) <= width
        assert "4521/10000  45.2/s  eta 0:02:01  errors 91  retries 0" in line
        assert line.startswith("r") and "…" in line  # the label gave way
        assert width == 60 or line.startswith("recording go")


def test_plain_progress_lines_say_the_same():
    from tcbreplay._cli.progress import Progress

    out = io.StringIO()
    progress = Progress("recording sim", file=out)
    progress.start(4)
    for _ in range(4):
        progress({"status": "ok"})
    assert out.getvalue().splitlines()[-1].startswith("recorded 4/4  ")
    assert "eta 0:00:00  errors 0  retries 0" in out.getvalue()


def test_a_replays_progress_counts_divergences_apart_from_errors():
    """A replay's progress said "recorded 12/12 ... errors 12" of 12 samples that diverged
    and none in error, above a summary saying 12 diverged, 0 errors."""
    from tcbreplay._cli.progress import Progress

    out = io.StringIO()
    progress = Progress("replaying base", file=out, verb="replayed")
    progress.start(3)
    for status in ("diverged", "diverged", "error"):
        progress({"status": status})
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("replayed 3/3  ") and "diverged 2  errors 1  retries 0" in last


# ---------------------------------------------------------------- hints


def test_a_mistyped_run_id_gets_did_you_mean(template):
    root, (a, _) = template
    result = cli("score", a[:-1] + "x", "--store", root)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1] == (
        f"Hint: did you mean {a!r} or 'sim-seed11'? (tcbreplay runs lists them)"
    )
    result = cli("score", "sim-sed11", "--store", root)
    assert result.stderr.splitlines()[1].startswith("Hint: did you mean 'sim-seed11'")


def test_audit_of_a_scoring_never_made_says_how_to_make_it(template):
    root, (a, _) = template
    result = cli("audit", "verify", a, "--scoring", "abet", "--store", root)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: run {a!r} has no scoring named 'abet' to verify",
        f"Hint: score it so first: tcbreplay score {a} --scorer abet (scorings of {a}: spec)",
    ]
    result = cli("audit", "verify", a, "--scoring", "spce", "--store", root)
    assert result.stderr.splitlines()[1] == f"Hint: did you mean 'spec'? (scorings of {a}: spec)"


def test_diff_of_an_unknown_scoring_lists_the_scorings(template):
    root, (a, b) = template
    result = cli("diff", a, b, "--scoring", "foo", "--store", root)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"Error: run {a!r} has no scoring 'foo'"
    assert result.stderr.splitlines()[1].endswith(f"(scorings of {a}: spec)")


def test_a_provider_langchain_does_not_know_gets_the_one_meant(store):
    result = cli("record", "--model", "google:gemini-2.5-flash", "--store", store.root)
    assert result.exit_code == 2
    hint = "Hint: did you mean --model google_genai:gemini-2.5-flash?"
    assert result.stderr.splitlines()[1] == hint
    assert not store.root.exists() or not list(store.root.iterdir())


# ---------------------------------------------------------------- shell completion


def complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completion offers for the last word of ``words``."""
    parts = words.split(" ")
    environ = {
        "_TCBREPLAY_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(parts) - 1),
        **(env or {}),
    }
    result = CliRunner().invoke(main, [], env=environ, prog_name="tcbreplay")
    assert result.exit_code == 0, result.output
    return [line.partition(",")[2] for line in result.stdout.splitlines() if line]


def test_run_ids_complete_from_the_store(template):
    root, (a, b) = template
    assert complete("tcbreplay score sim-", {"TCBREPLAY_STORE": str(root)}) == sorted([a, b])
    assert complete(f"tcbreplay --store {root} diff {a} {b[:5]}") == sorted([a, b])
    assert complete(f"tcbreplay audit verify --store {root} {b[:-1]}") == [b]
    assert complete("tcbreplay report x", {"TCBREPLAY_STORE": str(root)}) == []
    assert complete(f"tcbreplay audit verify {a} --store {root} --scoring s") == ["spec"]


def test_the_completion_script_is_what_the_manual_says():
    manual = (ROOT / "docs" / "commands" / "index.md").read_text()
    assert 'eval "$(_TCBREPLAY_COMPLETE=bash_source tcbreplay)"' in manual
    script = CliRunner().invoke(
        main, [], env={"_TCBREPLAY_COMPLETE": "bash_source"}, prog_name="tcbreplay"
    )
    assert "complete -o nosort -F _tcbreplay_completion tcbreplay" in script.stdout


def test_the_manual_shows_the_formats_once():
    root = ROOT
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    manual = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    assert manual.count("--format table|json|jsonl|csv|markdown") == 1
    assert "`--format table|json`" not in manual and "`--format table|csv|json`" not in manual


# ---------------------------------------------------------------- json of many rows


TRICKY_FLOATS = [
    0.0, -0.0, 1.0, 0.1, 1 / 3, 1e-4, 9.999999999999999e-05, 1e-05, -3e-06, 5e-324,
    9999999999999998.0, 1e16, -3e17, 1.7976931348623157e308, float("nan"), float("inf"),
    float("-inf"), None, 0.00012, 123456.789,
]  # fmt: skip


@pytest.mark.parametrize("rows", [50_000, 3, 1])
def test_rows_json_is_the_text_of_the_python_writer(rows, monkeypatch):
    """Every float as Python writes it (an exponent below 1e-4 and from 1e16 on), NaN and
    the infinities as null, texts escaped alike; indented at any depth, or on one line;
    written in pieces of any number of rows."""
    import polars as pl

    from tcbreplay._cli import serialize
    from tcbreplay._cli.serialize import rows_json, to_json

    monkeypatch.setattr(serialize, "JSON_ROWS", rows)

    n = len(TRICKY_FLOATS)
    texts = ["a", "é ü", "\x00\x1f\x7f", '"\\/', "\n\t\r\b\f", "\u2028😀", "", None] * 3
    frame = pl.DataFrame(
        {
            "sample_id": texts[:n],
            "x": pl.Series(TRICKY_FLOATS, dtype=pl.Float64),
            "y": pl.Series(TRICKY_FLOATS[::-1], dtype=pl.Float32),
            "k": pl.Series(range(-n // 2, n - n // 2), dtype=pl.Int64),
            "big": pl.Series([2**64 - 1] * n, dtype=pl.UInt64),
            "ok": [True, False, None, True] * (n // 4),
            "none": [None] * n,
        }
    )
    for indent in (2, None):
        for level in (0, 1, 3):
            expected = to_json(frame.to_dicts(), indent)
            if indent and level:
                expected = expected.replace("\n", "\n" + " " * indent * level)
            assert rows_json(frame, indent, level) == expected, (indent, level)
    assert rows_json(frame.clear()) == "[]"
    # a frame of other values (times, lists) is written by Python's writer
    other = frame.with_columns(when=pl.lit("2026-01-02").str.to_date(), xs=pl.lit([1.0, 1e-9]))
    assert rows_json(other) == to_json(other.to_dicts())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.none(), max_size=8))
def test_rows_json_writes_any_float_as_python_does(values):
    import polars as pl

    from tcbreplay._cli.serialize import rows_json, to_json

    frame = pl.DataFrame({"x": pl.Series(values, dtype=pl.Float64)})
    assert rows_json(frame) == to_json(frame.to_dicts())
    assert rows_json(frame, None) == to_json(frame.to_dicts(), None)


@pytest.mark.slow  # (a recording and its replay: about 7 s)
def test_the_commands_suggested_name_a_store_with_a_space_as_one_argument(tmp_path):
    import shlex

    store = tmp_path / "sp ace"
    recorded = cli("record", "--model", "sim:seed=1", "--limit", "1", "--run-id", "q",
                   "--store", store)  # fmt: skip
    assert recorded.exit_code == 0, recorded.output
    replayed = cli("replay", "q", "--store", store)
    assert replayed.exit_code == 0, replayed.output
    for output in (recorded.output, replayed.output):
        (line,) = [x for x in output.splitlines() if x.startswith("next: ")]
        words = shlex.split(line.removeprefix("next: "))
        assert words[-2:] == ["--store", str(store)]


def test_closed_and_ascii_streams_are_written_without_a_traceback(monkeypatch):
    """>&- left sys.stdout None (AttributeError traceback, exit 1); PYTHONIOENCODING=ascii
    failed on the first '—' (UnicodeEncodeError). The console script makes both usable."""
    from tcbreplay._cli import usable_streams

    raw = io.BytesIO()
    ascii_out = io.TextIOWrapper(raw, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", ascii_out)
    usable_streams()
    assert sys.stdout is not None and sys.stdout.write("dropped") == 7
    sys.stderr.write(json.dumps({"x": "é—😀"}, ensure_ascii=False))
    sys.stderr.flush()
    assert raw.getvalue() == b'{"x": "\\u00e9\\u2014\\ud83d\\ude00"}'
    assert json.loads(raw.getvalue()) == {"x": "é—😀"}
    sys.stdout.close()
