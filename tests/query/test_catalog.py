"""`tcbreplay catalog`: a DuckDB file with the store's views that any DuckDB client can open."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from helpers import TEST_DATA, cli, fifo_read

from tcbreplay._query.catalog import write_catalog
from tcbreplay._query.sql import run_sql
from tcbreplay._store.runs import Store
from tcbreplay.errors import QueryError

DATA = TEST_DATA
VIEWS = ["runs", "tools", "samples", "messages", "tool_calls", "gold_calls", "scores",
         "scores_all", "scorings", "divergences"]  # fmt: skip
TABLES = {"runs", "tools", "scorings"}  # stored in the file; the rest are views over run files
# the views of the store of two runs below that hold rows (it holds no replay: no divergences)
FILLED = [view for view in VIEWS if view != "divergences"]


def columns(con: duckdb.DuckDBPyConnection, view: str) -> list[tuple[str, str]]:
    return [(row[0], row[1]) for row in con.execute(f"describe {view}").fetchall()]


@pytest.fixture(scope="module")
def two_runs(sim_run, tmp_path_factory) -> Path:
    """A store with the sim run and an imported run, both scored."""
    sim_store, sim_id = sim_run
    root = tmp_path_factory.mktemp("catalog") / "traces"
    shutil.copytree(sim_store.run_dir(sim_id), root / sim_id)
    for name in ("scores", "evaluations"):
        shutil.rmtree(root / sim_id / name, ignore_errors=True)
    imported = cli(
        "import", "--dataset", DATA / "ds_shapes.json", "--tools", DATA / "tools_shop.json",
        "--traces", DATA / "import" / "traces_shapes.jsonl", "--run-id", "shapes", "--store", root,
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    for run_id in (sim_id, "shapes"):
        result = cli("score", run_id, "--store", root, "--dashboard", "none")
        assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def catalog(two_runs, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("catalog-file") / "x.duckdb"
    result = cli("catalog", "-o", path, "--store", two_runs)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.strip() == (
        f"{path}: views runs, tools, samples, messages, tool_calls, gold_calls, scores, "
        "scores_all, scorings, divergences over 2 runs"
    )
    return path


def test_every_view_exists(catalog):
    assert not catalog.with_name(catalog.name + ".tmp").exists()
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        kinds = dict(
            con.execute("select table_name, table_type from information_schema.tables").fetchall()
        )
    finally:
        con.close()
    assert set(kinds) == set(VIEWS)
    for name in VIEWS:
        assert kinds[name] == ("BASE TABLE" if name in TABLES else "VIEW"), name


@pytest.mark.parametrize("view", FILLED)
def test_row_counts_match_sql_on_the_store(two_runs, catalog, view):
    result = cli(
        "sql", f"select count(*) as n from {view}", "--store", two_runs, "--format", "json"
    )
    assert result.exit_code == 0, result.output
    expected = json.loads(result.stdout)[0]["n"]
    assert expected > 0
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        assert con.execute(f"select count(*) from {view}").fetchone()[0] == expected
    finally:
        con.close()


@pytest.mark.parametrize("view", VIEWS)
def test_rows_match_the_store(two_runs, catalog, view):
    query = f"select * from {view} order by all"
    expected = run_sql(Store(two_runs), query)
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        cursor = con.execute(query)
        assert [d[0] for d in cursor.description] == expected.columns
        assert cursor.fetchall() == expected.rows
    finally:
        con.close()


def test_scores_are_the_spec_scoring_of_each_run(two_runs, catalog):
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        per_run = dict(
            con.execute("select run_id, count(*) from scores group by run_id").fetchall()
        )
        scorings = {r[0] for r in con.execute("select distinct scoring from scores").fetchall()}
        sim = con.execute(
            "select n_samples, simulated from runs where run_id = 'sim-seed7'"
        ).fetchone()
    finally:
        con.close()
    assert per_run == {"sim-seed7": 94, "shapes": 4}
    assert scorings == {"spec"}
    assert sim == (94, True)


JSON_EQUAL_CASES = [
    ("1", "1.0", 1e-9, 1e-9, True),
    ("1", "2", 1e-9, 1e-9, False),
    ("3.5999999999999996", "3.6", 1e-9, 1e-9, True),
    ("1.0", "1.001", 1e-9, 1e-9, False),
    ("1.0", "1.001", 1e-2, 0, True),
    ('"a"', '"a"', 0, 0, True),
    ('"1"', "1", 1e-9, 1e-9, False),
    ("true", "1", 1e-9, 1e-9, False),
    ("true", "true", 0, 0, True),
    ("null", "null", 0, 0, True),
    ("null", "0", 0, 0, False),
    ("[1, 2]", "[1, 2]", 0, 0, None),  # lists and objects are decided in Python
]


def test_json_equal_macro(catalog):
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        for a, b, rel, abs_, expected in JSON_EQUAL_CASES:
            got = con.execute(
                "select json_equal($a::json, $b::json, $rel, $abs)",
                {"a": a, "b": b, "rel": rel, "abs": abs_},
            ).fetchone()[0]
            assert got is expected, (a, b, rel, abs_)
        tool_args = con.execute(
            "select count(*) from tool_calls as c join gold_calls as g using (run_id, sample_id,"
            " call_index) where json_equal(c.args -> '$.a', g.args -> '$.a', 1e-9, 1e-9)"
        ).fetchone()[0]
    finally:
        con.close()
    assert tool_args > 0


def test_a_separate_duckdb_process_can_read_it(two_runs, catalog, tmp_path):
    code = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
        "print(con.execute('select count(*) from messages').fetchone()[0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(catalog)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = run_sql(Store(two_runs), "select count(*) from messages").rows[0][0]
    assert int(done.stdout) == expected


def test_empty_store_gives_empty_views_with_the_same_columns(catalog, tmp_path):
    empty = tmp_path / "empty.duckdb"
    result = cli("catalog", "-o", empty, "--store", tmp_path / "no-traces")
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.strip().endswith("over 0 runs")
    full_con = duckdb.connect(str(catalog), read_only=True)
    con = duckdb.connect(str(empty), read_only=True)
    try:
        for view in VIEWS:
            assert con.execute(f"select count(*) from {view}").fetchone()[0] == 0, view
            assert columns(con, view) == columns(full_con, view), view
        assert con.execute("select json_equal('2'::json, '2.0'::json, 0, 0)").fetchone()[0] is True
    finally:
        con.close()
        full_con.close()


def test_catalog_again_includes_new_runs_and_scorings(two_runs, tmp_path):
    root = tmp_path / "traces"
    shutil.copytree(two_runs / "shapes", root / "shapes")
    path = tmp_path / "c.duckdb"
    assert write_catalog(Store(root), path) == ["shapes"]
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("select distinct scoring from scores").fetchall() == [("spec",)]
    con.close()

    shutil.copytree(two_runs / "sim-seed7", root / "sim-seed7")
    assert cli("score", "shapes", "--store", root, "--scorer", "abet").exit_code == 0
    assert write_catalog(Store(root), path) == ["shapes", "sim-seed7"]
    con = duckdb.connect(str(path), read_only=True)
    try:
        runs = [r[0] for r in con.execute("select run_id from runs order by run_id").fetchall()]
        scorings = dict(con.execute("select distinct run_id, scoring from scores").fetchall())
        every = con.execute(
            "select run_id, scoring, count(*) from scores_all group by all order by all"
        ).fetchall()
        listed = con.execute("select run_id, scoring from scorings order by all").fetchall()
    finally:
        con.close()
    assert runs == ["shapes", "sim-seed7"]
    # the abet scoring, the latest of shapes, is in scores_all and scorings, not in scores
    assert scorings == {"shapes": "spec", "sim-seed7": "spec"}
    assert every == [("shapes", "abet", 4), ("shapes", "spec", 4), ("sim-seed7", "spec", 94)]
    assert listed == [("shapes", "abet"), ("shapes", "spec"), ("sim-seed7", "spec")]


def test_output_in_a_missing_directory_is_one_error_line(two_runs, tmp_path):
    result = cli("catalog", "-o", tmp_path / "no" / "such" / "x.duckdb", "--store", two_runs)
    assert result.exit_code in (1, 2)
    assert not isinstance(result.exception, duckdb.Error)
    assert result.stderr.startswith("Error: ")


def test_a_failed_write_leaves_no_partial_file(two_runs, tmp_path, monkeypatch):
    import tcbreplay._query.catalog as catalog_module

    def broken(con, *args, **kwargs):
        con.execute("create view x as select 1")
        raise duckdb.BinderException("the views could not be made")

    monkeypatch.setattr(catalog_module, "create_views", broken)
    path = tmp_path / "c.duckdb"
    with pytest.raises(QueryError, match="cannot write the catalog"):
        write_catalog(Store(two_runs), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_catalog_through_a_symlink_replaces_its_target(two_runs, tmp_path):
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "c.duckdb"
    target.write_text("old")
    link = tmp_path / "link.duckdb"
    link.symlink_to(target)
    result = cli("catalog", "-o", link, "--store", two_runs)
    assert result.exit_code == 0, (result.output, result.exception)
    assert link.is_symlink() and link.readlink() == target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.duckdb", "out"]
    assert [p.name for p in target.parent.iterdir()] == ["c.duckdb"]  # no temporary file
    con = duckdb.connect(str(target), read_only=True)
    try:
        assert con.execute("select count(*) from runs").fetchone()[0] == 2
    finally:
        con.close()


def test_catalog_is_written_into_a_fifo(two_runs, tmp_path):
    fifo = tmp_path / "c.duckdb"
    with fifo_read(fifo) as chunks:
        result = cli("catalog", "-o", fifo, "--store", two_runs)
    assert result.exit_code == 0, (result.output, result.exception)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # not replaced by a file
    assert [p.name for p in tmp_path.iterdir()] == ["c.duckdb"]
    (tmp_path / "read").mkdir()
    copy = tmp_path / "read" / "c.duckdb"
    copy.write_bytes(b"".join(chunks))
    con = duckdb.connect(str(copy), read_only=True)
    try:
        assert con.execute("select count(*) from runs").fetchone()[0] == 2
    finally:
        con.close()


def test_a_replays_divergences_are_in_the_catalog(sim_run, tmp_path):
    store, run_id = sim_run
    root = tmp_path / "traces"
    shutil.copytree(store.run_dir(run_id), root / run_id)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Other.")
    replayed = cli("replay", run_id, "--run-id", "again", "--system-prompt", prompt, "--limit", 4,
                   "--quiet", "--store", root)  # fmt: skip
    assert replayed.exit_code == 1, replayed.output  # every sample diverged
    path = tmp_path / "c.duckdb"
    assert write_catalog(Store(root), path) == ["again", run_id]
    query = "select * from divergences order by all"
    expected = run_sql(Store(root), query)
    assert len(expected.rows) == 4
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute(query).fetchall() == expected.rows
    finally:
        con.close()
