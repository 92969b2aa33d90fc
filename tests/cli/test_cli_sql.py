"""`tcbreplay sql`: read-only queries over every run in the store, as a table, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from helpers import TEST_DATA, cli, cli_process, snapshot

DATA = TEST_DATA
IMPORTED = "imported-shapes"


def sql(root: Path, query: str, fmt: str = "json"):
    return cli("sql", query, "--store", str(root), "--format", fmt)


def sql_rows(root: Path, query: str) -> list[dict]:
    result = sql(root, query)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def template(sim_run, tmp_path_factory) -> tuple[Path, str]:
    """A store with the session's sim run (scored) and an imported run (not scored)."""
    sim_store, run_id = sim_run
    root = tmp_path_factory.mktemp("sqlstore") / "traces"
    shutil.copytree(sim_store.run_dir(run_id), root / run_id)
    assert cli("score", run_id, "--store", str(root), "--format", "json").exit_code == 0
    result = cli(
        "import", "--dataset", str(DATA / "ds_shapes.json"),
        "--tools", str(DATA / "tools_shop.json"),
        "--traces", str(DATA / "import" / "traces_shapes.jsonl"),
        "--run-id", IMPORTED, "--store", str(root),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return root, run_id


@pytest.fixture
def populated(template, tmp_path) -> tuple[Path, str]:
    """A private copy of the template store, for tests that try to change it."""
    root, run_id = template
    copy = tmp_path / "traces"
    shutil.copytree(root, copy)
    return copy, run_id


def assert_refused(result, *fragments: str) -> None:
    """Exit 2, one `Error:` line (maybe a `Hint:`), nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: ")
    assert len([line for line in lines if line.startswith("Error: ")]) == 1
    assert all(line.startswith(("Error: ", "Hint: ")) for line in lines), lines
    for fragment in fragments:
        assert fragment in result.stderr


# ---------------------------------------------------------------- formats


def test_json_format_is_an_array_of_row_objects(template):
    root, run_id = template
    rows = sql_rows(
        root,
        "select run_id, source, simulated, n_samples from runs order by run_id",
    )
    assert rows == [
        {"run_id": IMPORTED, "source": "import", "simulated": False, "n_samples": 4},
        {"run_id": run_id, "source": "record", "simulated": True, "n_samples": 94},
    ]


def test_columns_of_one_name_are_each_an_object_key(template):
    """A join of two views holds two status columns: the JSON object kept the second only."""
    root, run_id = template
    query = ("select s.sample_id, s.status, t.status, 1 as status_1 from samples s join scores "
             f"t using (run_id, sample_id, trial) where s.run_id = '{run_id}' limit 1")  # fmt: skip
    [row] = sql_rows(root, query)
    assert list(row) == ["sample_id", "status", "status_2", "status_1"]
    lines = sql(root, query, "jsonl").stdout.splitlines()
    assert list(json.loads(lines[0])) == list(row)


def test_intervals_and_blobs_are_json_values_not_pythons_text(template):
    """An interval was "1 day, 0:00:00" and a blob "b'ab'" (Python's str and repr)."""
    root, _ = template
    query = ("select interval 90 minute a, interval 1 day b, interval '1.5 seconds' c, "
             "-interval 2 second d, interval 0 second e, '\\x61\\x62'::blob f")  # fmt: skip
    assert sql_rows(root, query) == [
        {"a": "PT1H30M", "b": "P1D", "c": "PT1.5S", "d": "-PT2S", "e": "PT0S", "f": "YWI="}
    ]


def test_csv_format(template):
    root, _ = template
    result = sql(
        root,
        "select run_id, count(*) as n from samples group by run_id order by run_id",
        "csv",
    )
    assert result.exit_code == 0, result.output
    assert list(csv.reader(io.StringIO(result.stdout))) == [
        ["run_id", "n"],
        [IMPORTED, "4"],
        ["sim-seed7", "94"],
    ]


def test_table_format(template):
    root, _ = template
    result = sql(root, "select name, count(*) as n from tool_calls group by name order by name",
                 "table")  # fmt: skip
    assert result.exit_code == 0, result.output
    for word in ("name", "add_numbers", "list_items", "multiply_numbers", "subtract_numbers"):
        assert word in result.stdout
    assert "4 rows" in result.stdout


def test_views_span_every_run(template):
    root, run_id = template
    counts = {
        r["run_id"]: r["n"]
        for r in sql_rows(root, "select run_id, count(*) as n from tool_calls group by run_id")
    }
    assert counts[IMPORTED] == 5
    n_agent = sql_rows(root, "select sum(n_agent) as n from scores")
    assert n_agent == [{"n": counts[run_id]}]  # only the recorded run was scored
    gold = sql_rows(root, "select run_id, count(*) as n from gold_calls group by 1 order by 1")
    assert gold[0] == {"run_id": IMPORTED, "n": 4}
    messages = sql_rows(root, "select count(*) as n from messages where run_id = 'imported-shapes'")
    assert messages == [{"n": 5 + 7 + 2}]


def test_tool_calls_columns_and_json_args(template):
    root, _ = template
    rows = sql_rows(
        root,
        "select run_id, sample_id, call_index, name, args, position from tool_calls "
        f"where run_id = '{IMPORTED}' order by sample_id, call_index",
    )
    assert [(r["sample_id"], r["call_index"], r["name"], json.loads(r["args"]), r["position"])
            for r in rows] == [
        ("0", 0, "add_numbers", {"a": 3, "b": 2, "c": 1}, 2),
        ("7", 0, "add_numbers", {"a": 1.5, "b": 2}, 1),
        ("catalog-then-multiply", 0, "list_items", {}, 1),
        ("catalog-then-multiply", 1, "subtract_numbers", {"a": 3, "b": 1}, 3),
        ("catalog-then-multiply", 2, "multiply_numbers", {"a": 3, "b": 2.5}, 3),
    ]  # fmt: skip


def test_scores_view_columns(template):
    root, run_id = template
    rows = sql_rows(
        root,
        "select run_id, sample_id, tsa, tp, ahr, args_invalid, args_total, args_missing, status "
        "from scores order by sample_id limit 3",
    )
    assert len(rows) == 3
    assert {r["run_id"] for r in rows} == {run_id}
    assert all(r["status"] == "ok" for r in rows)


def test_empty_store(tmp_path):
    root = tmp_path / "traces"
    for view in ("runs", "samples", "messages", "tool_calls", "gold_calls", "scores"):
        result = sql(root, f"select * from {view}")
        assert result.exit_code == 0, (view, result.output)
        assert json.loads(result.stdout) == []
        csv_out = sql(root, f"select * from {view}", "csv")
        assert csv_out.exit_code == 0
        assert len(csv_out.stdout.splitlines()) == 1  # the header only
        assert csv_out.stderr == f"Warning: {root}: no such store folder, so there are no runs\n"
    assert not root.exists()
    assert "0 rows" in sql(root, "select * from scores", "table").stdout


def test_runs_on_an_empty_or_missing_store_says_so_on_stderr(tmp_path):
    """Reported: `runs` printed 0 rows and nothing more where a newcomer looked for a run."""
    root = tmp_path / "traces"
    missing = cli("runs", "--store", root, "--format", "csv")
    assert missing.exit_code == 0
    assert missing.stdout.splitlines() == [missing.stdout.splitlines()[0]]  # the header only
    assert missing.stderr == f"Warning: {root}: no such store folder, so there are no runs\n"
    root.mkdir()
    empty = cli("runs", "--store", root, "--format", "csv")
    assert empty.exit_code == 0
    assert len(empty.stdout.splitlines()) == 1
    assert empty.stderr == f"Warning: no runs to list in the store {root}: is --store right?\n"
    assert cli("runs", "--store", root).stdout.strip().endswith("0 rows")


def _edit_manifest(run, edit):
    manifest = json.loads((run / "manifest.json").read_text())
    edit(manifest)
    (run / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "complaint"),
    [
        (lambda run: (run / "manifest.json").write_text("{not json"), "unreadable manifest"),
        (lambda run: (run / "manifest.json").write_text('{"schema_version": 99}'),
         "schema_version 99"),
        (lambda run: (run / "messages.parquet").write_bytes(b"PAR1 cut short"),
         "messages.parquet: not a readable Parquet file"),
        (lambda run: _edit_manifest(run, lambda m: m["tools"]["specs"][0].update(parameters=7)),
         "manifest.json: tools.specs: tool "),
    ],
)  # fmt: skip
def test_a_broken_run_is_left_out_with_a_warning(populated, damage, complaint):
    root, run_id = populated
    damage(root / IMPORTED)
    before = snapshot(root)
    for command in (["runs"], ["sql", "select distinct run_id from messages", "--format", "csv"],
                    ["query", "cost_latency", "--format", "csv"]):  # fmt: skip
        result = cli(*command, "--store", root)
        assert result.exit_code == 0, (command, result.output)
        assert run_id in result.stdout
        assert IMPORTED not in result.stdout
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"Warning: left out run {IMPORTED!r}: {root / IMPORTED}/")
        assert complaint in line
    assert snapshot(root) == before
    catalog = root.parent / "catalog.duckdb"
    result = cli("catalog", "-o", catalog, "--store", root)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("over 1 run\n")
    assert result.stderr.startswith(f"Warning: left out run {IMPORTED!r}: ")
    # the broken run itself is still an error when named
    result = cli("score", IMPORTED, "--store", root)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")


def test_a_run_folder_renamed_to_an_invalid_run_id_is_left_out(populated):
    """No command could name such a run, so the views leave it out and say how to fix it."""
    root, run_id = populated
    shutil.copytree(root / run_id, root / "copy of run")
    result = sql(root, "select distinct run_id from samples order by 1")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"run_id": IMPORTED}, {"run_id": run_id}]
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Warning: left out run 'copy of run': {root / 'copy of run'}: run id")
    assert line.endswith("; rename the folder")


def test_an_unreadable_scores_file_leaves_out_the_scores_only(populated):
    root, run_id = populated
    (root / run_id / "scores" / "spec" / "scores.parquet").write_bytes(b"PAR1 cut short")
    result = sql(root, "select (select count(*) from scores) as s, "
                       "(select count(distinct run_id) from samples) as r")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"s": 0, "r": 2}]
    assert result.stderr.startswith(f"Warning: left out the scores of run {run_id!r}: ")
    assert "scores.parquet: not a readable Parquet file" in result.stderr


def test_select_star_from_samples(template):
    root, _ = template
    result = sql(root, "select * from samples")
    assert result.exit_code == 0, result.exception
    assert len(json.loads(result.stdout)) == 98


def test_json_format_is_strict_json_for_non_finite_numbers(tmp_path):
    result = sql(tmp_path / "traces", "select 0.0 / 0.0 as z, 'inf'::double as i")
    assert result.exit_code == 0

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    json.loads(result.stdout, parse_constant=refuse)


# ---------------------------------------------------------------- refused statements

REFUSED = {
    "COPY": "copy (select * from tool_calls) to 'out.csv'",
    "COPY into the store": "copy (select 1) to '{root}/sim-seed7/samples.parquet' (format parquet)",
    "ATTACH": "attach '{root}/new.duckdb' as db",
    "INSTALL": "install httpfs",
    "LOAD": "load httpfs",
    "CREATE": "create table t as select * from samples",
    "INSERT": "insert into samples select * from samples",
    "UPDATE": "update samples set status = 'ok'",
    "DELETE": "delete from scores",
    "DROP": "drop view scores",
    "SET": "set allowed_directories = ['/']",
    "PRAGMA": "pragma disable_checkpoint_on_shutdown",
    "after a query": "select 1; delete from samples",
    "UPDATE EXTENSIONS": "UPDATE EXTENSIONS",
    "EXPLAIN (ANALYZE) COPY": "explain (analyze) copy (select 1) to '{root}/sim-seed7/x.csv'",
    "COPY of a PIVOT": "copy (pivot samples on status) to '{root}/sim-seed7/x.csv'",
}


@pytest.mark.parametrize("query", REFUSED.values(), ids=REFUSED.keys())
def test_statements_other_than_queries_leave_the_store_unchanged(populated, query):
    root, _ = populated
    before = snapshot(root)
    result = sql(root, query.format(root=root), "table")
    assert_refused(result, "statements are not allowed", "read-only")
    assert snapshot(root) == before


def test_explain_analyze_copy_is_refused(populated):
    root, _ = populated
    before = snapshot(root)
    result = sql(root, f"explain analyze copy (select 1 as a) to '{root}/leak.csv'", "csv")
    after = snapshot(root)
    (root / "leak.csv").unlink(missing_ok=True)
    assert result.exit_code == 2
    assert after == before


@pytest.mark.parametrize(
    ("query", "rows"),
    [
        ("explain (format json) select * from tool_calls", 1),
        ("explain (analyze, format json) select count(*) from tool_calls", 1),
        ("pivot (select run_id from samples) on run_id using count(*)", 1),
        ("unpivot (select 1 as a, 2 as b) on a, b into name k value v", 2),
    ],
)
def test_explain_with_options_and_pivots_run(populated, query, rows):
    root, _ = populated
    before = snapshot(root)
    result = sql(root, query)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == rows
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "query",
    [
        "select * from read_csv('/etc/passwd')",
        "select * from read_text('/etc/hostname')",
        "select * from glob('/etc/*')",
        "select * from read_text('{root}/../outside.txt')",
        "select * from glob('{root}/../*')",
        "select * from read_parquet('{outside}/samples.parquet')",
    ],
)
def test_reading_outside_the_store_fails(populated, tmp_path, query):
    root, run_id = populated
    (tmp_path / "outside.txt").write_text("TOPSECRET-CONTENT")
    outside = tmp_path / "elsewhere"
    shutil.copytree(root / run_id, outside)
    before = snapshot(root)
    result = sql(root, query.format(root=root, outside=outside))
    assert_refused(result, "query failed")
    assert "TOPSECRET" not in result.output
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "query",
    ["selec * from samples", "select * from", "select count(* from samples", "select 'x"],
)
def test_syntax_errors_are_one_line(populated, query):
    root, _ = populated
    before = snapshot(root)
    result = sql(root, query)
    assert_refused(result)
    assert len(result.stderr.splitlines()) == 1
    assert snapshot(root) == before


def test_unknown_view_is_one_line(template):
    root, _ = template
    result = sql(root, "select * from no_such_view")
    assert_refused(result, "query failed", "no_such_view")
    assert len(result.stderr.splitlines()) == 1


def test_sql_does_not_import_langchain(template):
    root, _ = template
    code = textwrap.dedent(
        f"""
        import sys
        from tcbreplay._cli import main
        main(["sql", "select count(*) as n from tool_calls", "--store", {str(root)!r},
              "--format", "json"], standalone_mode=False)
        loaded = [m for m in sys.modules if m.startswith(("langchain", "langgraph"))]
        assert not loaded, loaded
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["n"] > 0


def test_a_temporary_directory_linked_to_root_reads_nothing(populated, tmp_path, monkeypatch):
    """DuckDB allowed its temporary directory, .tmp in the working folder, to SQL."""
    root, _ = populated
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-sk-test-FAKE1234567890")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".tmp").symlink_to("/")
    monkeypatch.chdir(work)
    for query in (
        f"select content from read_text('.tmp{secret}')",
        "select content from read_blob('.tmp/proc/self/environ')",
    ):
        result = sql(root, query)
        assert_refused(result, "query failed", "Permission Error")
        assert "TOPSECRET" not in result.output
    assert not (work / ".tmp").is_dir() or (work / ".tmp").is_symlink()


def test_a_run_folder_linked_from_outside_is_left_out_with_a_warning(populated, tmp_path):
    root, _ = populated
    elsewhere = tmp_path / "elsewhere" / "linked"
    shutil.copytree(root / IMPORTED, elsewhere)
    (root / "linked").symlink_to(elsewhere)
    warning = (
        f"Warning: left out run 'linked': {root / 'linked'}: a symbolic link to {elsewhere}; "
        "tcbreplay reads only run folders that are in the store folder itself (copy the run "
        "into it)"
    )
    for command in (["runs"], ["sql", "select distinct run_id from samples", "--format", "csv"],
                    ["query", "error_breakdown", "--format", "csv"]):  # fmt: skip
        result = cli(*command, "--store", root)
        assert result.exit_code == 0, (command, result.output)
        assert IMPORTED in result.stdout or command[0] == "query"
        assert "linked" not in result.stdout
        assert result.stderr.splitlines() == [warning], command
    result = cli("catalog", "-o", tmp_path / "c.duckdb", "--store", root)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("over 2 runs\n")
    assert result.stderr.splitlines() == [warning]


# ---------------------------------------------------------------- limits and Ctrl-C

SLOW = "select sum(i) as s from range(60_000_000_000) t(i)"


@pytest.mark.parametrize("command", ["sql", "query"])
def test_a_query_past_its_timeout_is_one_error_line(template, command):
    root, _ = template
    args = ["sql", SLOW, "--timeout", "0.5"] if command == "sql" else [
        "query", "cost_latency", "--timeout", "0.000001"]  # fmt: skip
    result = cli(*args, "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    limit = "0.5" if command == "sql" else "1e-06"
    assert result.stderr.splitlines() == [
        f"Error: the query ran past its time limit of {limit} s and was stopped",
        "Hint: raise it with --timeout SECONDS, or --timeout 0 for no limit",
    ]


@pytest.mark.slow  # waits for its timeout (about 2 s)
def test_drawing_the_table_counts_against_the_timeout(template, monkeypatch):
    """Reported: the query's rows came at once, and drawing them took minutes past
    --timeout; csv gives every row at once. (Rows are drawn at some 70,000 a second now:
    here they are drawn slowly, as on a slow terminal, so that the drawing is what is late.)"""
    from tcbreplay._cli import table_rows

    draw = table_rows.rows_text

    def slowly(*args, **kwargs):
        time.sleep(0.2)  # a chunk of rows
        return draw(*args, **kwargs)

    monkeypatch.setattr(table_rows, "rows_text", slowly)
    root, _ = template
    query = "select range as n, 'row ' || range as label from range(20000)"
    result = cli("sql", query, "--timeout", "2", "--store", root)
    assert result.exit_code == 1, result.output
    (error, hint) = result.stderr.splitlines()
    assert error.startswith("Error: drawing the table ran past the time limit"), error
    assert hint.startswith("Hint: ") and "--timeout" in hint
    assert len(result.stdout.splitlines()) < 20000
    assert len(sql(root, query, "csv").stdout.splitlines()) == 1 + 20000


@pytest.mark.slow  # waits for its timeout (about 2 s)
def test_laying_out_the_table_counts_against_the_timeout(template, monkeypatch):
    """Reported: 10M rows drawn as a table with --timeout 3 took 51 s and 2.8 GB, every
    cell laid out before the deadline was looked at (here each is laid out slowly, so that
    the laying out is what is late)."""
    from tcbreplay._cli import render

    cell = render.table_cell

    def slowly(*args, **kwargs):
        time.sleep(0.00005)
        return cell(*args, **kwargs)

    monkeypatch.setattr(render, "table_cell", slowly)
    root, _ = template
    started = time.monotonic()
    result = cli("sql", "select range as n from range(200000)", "--timeout", "2", "--store", root)
    assert result.exit_code == 1, result.output
    assert time.monotonic() - started < 8  # (all of them: 10 s and more)
    (error, hint) = result.stderr.splitlines()
    assert error.startswith("Error: laying out the table ran past the time limit and was "
                            "stopped after "), error  # fmt: skip
    assert hint.startswith("Hint: ") and "--timeout" in hint
    assert result.stdout == ""


def test_a_long_cell_is_cut_in_the_table_and_whole_in_json_and_csv(template):
    root, _ = template
    query = "select repeat('ab', 2000000) as text"
    table = sql(root, query, "table")
    assert table.exit_code == 0
    assert max(map(len, table.stdout.splitlines())) <= 120 and "abab…" in table.stdout
    assert json.loads(sql(root, query).stdout) == [{"text": "ab" * 2000000}]
    assert sql(root, query, "csv").stdout == "text\n" + "ab" * 2000000 + "\n"


@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [("--timeout", "nan", "Invalid value for '--timeout': nan is not a number of seconds"),
     ("--memory-limit", "-5GB", "memory limit '-5GB': a size cannot be negative"),
     ("--memory-limit", " -1 GiB", "memory limit ' -1 GiB': a size cannot be negative")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["sql", "query"])
def test_a_limit_that_is_no_limit_is_refused(template, command, option, value, fragment):
    root, _ = template
    args = ["sql", "select 1"] if command == "sql" else ["query", "cost_latency"]
    assert_refused(cli(*args, option, value, "--store", root), fragment)


@pytest.mark.parametrize(
    ("query", "error"),
    [("select list(range) from range(20000000)",
      "Error: the query needs more memory than its limit of 61.0 MiB ("),
     ("select * from range(100000) a cross join range(100000) b",
      "Error: the query's rows take more memory than its limit of 61.0 MiB and it was stopped")],
)  # fmt: skip
def test_a_query_past_its_memory_limit_is_one_error_line(template, query, error):
    root, _ = template
    result = cli("sql", query, "--memory-limit", "64MB", "--store", root)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(error)
    assert "raise it with --memory-limit SIZE" in lines[1]


@pytest.mark.parametrize("command", ["sql", "query"])
def test_a_memory_limit_that_is_no_size_is_refused(template, command):
    root, _ = template
    args = ["sql", "select 1"] if command == "sql" else ["query", "cost_latency"]
    result = cli(*args, "--memory-limit", "lots", "--store", root)
    assert_refused(result, "memory limit 'lots': ", "--memory-limit")


def test_the_limits_default_to_300_s_and_half_the_memory(template):
    root, _ = template
    result = sql(root, "select current_setting('memory_limit') as m")
    assert result.exit_code == 0, result.output
    half = duckdb.connect(config={"memory_limit": "50%"})
    assert json.loads(result.stdout) == [
        {"m": half.execute("select current_setting('memory_limit')").fetchone()[0]}
    ]
    for command in ("sql", "query"):
        assert "[default: 300; x>=0]" in cli(command, "--help").stdout


@pytest.mark.slow  # a process, stopped mid-query (about 2 s)
def test_ctrl_c_stops_a_long_query_with_exit_130(tmp_path):
    proc = cli_process("sql", SLOW, "--store", str(tmp_path / "none"))
    # the warning of the missing store comes just before the query starts
    assert proc.stderr.readline().startswith("Warning: ")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert time.monotonic() - started < 10
    assert proc.returncode == 130, err
    assert err == "Interrupted.\n"
    assert out == ""


def test_a_path_in_a_run_is_read_from_the_store_folder(template, tmp_path, monkeypatch):
    """Reported: read_parquet('RUN/scores/spec/scores.parquet') failed with DuckDB's "file
    system operations are disabled by configuration"."""
    root, run_id = template
    monkeypatch.chdir(tmp_path)  # not the store's folder, nor its parent
    got = sql_rows(
        root,
        f"select scoring, count(*) as n from read_parquet('{run_id}/scores/spec/scores.parquet') "
        "group by 1",
    )
    assert got == [{"scoring": "spec", "n": 94}]
    summaries = sql_rows(root, f"select tsa from read_json('{run_id}/scores/*/summary.json')")
    expected = json.loads((root / run_id / "scores" / "spec" / "summary.json").read_text())
    assert summaries == [{"tsa": expected["tsa"]}]
    refused = sql(root, f"select * from read_text('{run_id}/../{run_id}/../x')")
    assert refused.exit_code == 2
    assert "Hint: SQL reads the files of the store's runs only" in refused.stderr


@pytest.mark.parametrize(
    "path",
    ["{a}/../{b}/samples.parquet", "{a}/../../traces/{b}/samples.parquet",
     "{a}/scores/../../{b}/samples.parquet", "{a}/../{b}/*.parquet"],
)  # fmt: skip
def test_a_path_that_leaves_its_run_is_refused_as_the_readme_says(template, path, monkeypatch):
    """Reported: 'RUN/../OTHER_RUN/file' read the other run, though the README says a path
    'RUN/../x' is refused: a path is read from the store only inside the run it names."""
    root, run_id = template
    monkeypatch.chdir(root.parent)  # where the paths would lead if read from here
    query = f"select count(*) as n from '{path.format(a=IMPORTED, b=run_id)}'"
    assert_refused(sql(root, query), "Permission Error", "SQL reads the files of the store's runs")
    # the same file named from its own run is read
    assert sql_rows(root, f"select count(*) as n from '{run_id}/samples.parquet'") == [{"n": 94}]


def test_scores_keeps_the_spec_rows_after_an_abet_scoring(populated):
    """Reported: after `score --scorer abet`, `select * from scores` silently returned the
    abet numbers (tsa 0.52 instead of 0.74 on the same run)."""
    root, run_id = populated
    query = f"select avg(tsa) as tsa from scores where run_id = '{run_id}'"
    before = sql_rows(root, query)
    assert cli("score", run_id, "--store", root, "--scorer", "abet").exit_code == 0
    assert sql_rows(root, query) == before
    every = sql_rows(root, "select scoring, count(*) as n from scores_all "
                           f"where run_id = '{run_id}' group by 1 order by 1")  # fmt: skip
    assert every == [{"scoring": "abet", "n": 94}, {"scoring": "spec", "n": 94}]
