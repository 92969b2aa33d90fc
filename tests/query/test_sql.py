"""The SQL layer: views over every run in the store, read-only and confined to the store."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from helpers import snapshot
from sql_runs import ALPHA, BETA, make_run

from tcbreplay._query.sql import run_sql
from tcbreplay._query.statements import check_read_only
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay.errors import QueryError

VIEW_COLUMNS = {
    "runs": {"run_id", "status", "model", "simulated", "n_samples", "source"},
    "samples": {
        "run_id", "sample_id", "sample_index", "input", "gold", "tools", "category", "status",
    },
    "messages": {"run_id", "sample_id", "position", "type", "message"},
    "tool_calls": {"run_id", "sample_id", "call_index", "name", "args", "position"},
    "gold_calls": {
        "run_id", "sample_id", "call_index", "name", "args", "accept", "optional", "group",
    },
    "scores": {
        "run_id", "sample_id", "tsa", "tp", "ahr", "args_invalid", "args_total",
        "args_missing", "status",
    },
    "scores_all": {"run_id", "scoring", "sample_id", "tsa", "tp", "ahr", "status"},
    "scorings": {"run_id", "scoring", "scorer", "scored_at", "tsa", "tp", "ahr", "n_samples"},
}  # fmt: skip


@pytest.fixture
def two_runs(store) -> Store:
    make_run(store, "alpha", ALPHA)
    make_run(store, "beta", BETA)
    return store


def rows(store: Store, sql: str) -> list[dict]:
    return run_sql(store, sql).records()


# ---------------------------------------------------------------- the views


def test_views_cover_every_run(two_runs):
    assert rows(two_runs, "select run_id, status, n_samples, simulated from runs order by 1") == [
        {"run_id": "alpha", "status": "complete", "n_samples": 2, "simulated": False},
        {"run_id": "beta", "status": "complete", "n_samples": 1, "simulated": False},
    ]
    assert rows(
        two_runs, "select run_id, count(*) as n from samples group by run_id order by run_id"
    ) == [{"run_id": "alpha", "n": 2}, {"run_id": "beta", "n": 1}]
    assert rows(two_runs, "select count(*) as n from messages") == [{"n": 3 + 1 + 2}]


def test_tool_calls_view(two_runs):
    got = rows(
        two_runs,
        "select run_id, sample_id, call_index, name, args::varchar as args, position, "
        "typeof(args) as t from tool_calls order by run_id, sample_id, call_index",
    )
    assert [
        (r["run_id"], r["sample_id"], r["call_index"], r["name"], json.loads(r["args"]),
         r["position"])
        for r in got
    ] == [
        ("alpha", "s0", 0, "list_items", {}, 1),
        ("alpha", "s0", 1, "add_numbers", {"a": 2, "b": 1}, 2),
        ("alpha", "s0", 2, "multiply_numbers", {"a": 1, "b": 1}, 2),
        ("beta", "s0", 0, "add_numbers", {"a": 1, "b": 3}, 1),
    ]  # fmt: skip
    assert {r["t"] for r in got} == {"JSON"}


def test_tool_calls_view_reads_a_call_without_name_or_arguments_as_scoring_does(store):
    """(as the metric spec says: the name ``""`` and the arguments ``{}``)"""
    make_run(store, "gamma", [{"sample_id": "s0", "gold": [], "turns": [[(None, None)]]}])
    got = rows(store, "select name, args::varchar as args from tool_calls")
    assert got == [{"name": "", "args": "{}"}]


def test_gold_calls_view(two_runs):
    got = rows(
        two_runs,
        "select run_id, sample_id, call_index, name, args::varchar as args "
        "from gold_calls order by run_id, sample_id, call_index",
    )
    assert [(r["run_id"], r["sample_id"], r["call_index"], r["name"], json.loads(r["args"]))
            for r in got] == [
        ("alpha", "s0", 0, "list_items", {}),
        ("alpha", "s0", 1, "add_numbers", {"a": 2, "b": 1}),
        ("beta", "s0", 0, "add_numbers", {"a": 1, "b": 2}),
    ]  # fmt: skip


def test_gold_calls_view_has_each_calls_rules(store):
    """accept, optional and group as JSON, null where a call has none; a sample's own tools
    in the samples view."""
    own = [{"name": "add_numbers", "parameters": {"properties": {"a": {}, "b": {}}}}]
    make_run(store, "rules", [{
        "sample_id": "s0",
        "gold": [("add_numbers", {"a": 2}, {"accept": {"a": [2, "two"]}, "optional": ["b"],
                                            "group": "p"}),
                 ("add_numbers", {"a": 3}, {"group": "p"}),
                 ("list_items", {})],
        "turns": [],
        "tools": own,
    }])  # fmt: skip
    got = rows(
        store,
        'select call_index, accept::varchar as accept, optional::varchar as optional, "group"::'
        "varchar as g from gold_calls order by call_index",
    )
    assert got == [
        {"call_index": 0, "accept": '{"a":[2,"two"]}', "optional": '["b"]', "g": '"p"'},
        {"call_index": 1, "accept": None, "optional": None, "g": '"p"'},
        {"call_index": 2, "accept": None, "optional": None, "g": None},
    ]
    (sample,) = rows(store, "select tools from samples")
    assert json.loads(sample["tools"]) == own


def test_scores_view_holds_each_runs_spec_scoring(two_runs):
    assert rows(two_runs, "select count(*) as n from scores") == [{"n": 0}]
    score_run(two_runs, "alpha")
    got = rows(
        two_runs,
        "select run_id, sample_id, status, tsa, tp, ahr, args_invalid, args_total, args_missing "
        "from scores order by run_id, sample_id",
    )
    counts = {"args_invalid": 0, "args_missing": 0}
    assert got == [
        {"run_id": "alpha", "sample_id": "s0", "status": "ok", "tsa": 1.0,
         "tp": pytest.approx(2 / 3), "ahr": 0.0, "args_total": 2, **counts},
        {"run_id": "alpha", "sample_id": "s1", "status": "ok", "tsa": None, "tp": 1.0,
         "ahr": None, "args_total": 0, **counts},
    ]  # fmt: skip
    score_run(two_runs, "beta")
    score_run(two_runs, "beta", options=_loose())
    got = rows(two_runs, "select run_id, scoring, ahr from scores order by run_id, sample_id")
    assert [(r["run_id"], r["scoring"]) for r in got] == [("alpha", "spec")] * 2 + [
        ("beta", "spec")
    ]  # not the later scoring of beta
    got = rows(
        two_runs,
        "select run_id, scoring, ahr from scores_all where run_id = 'beta' order by scoring",
    )
    assert [r["scoring"] for r in got] == ["spec", "spec_rel-0.2_abs-0"]
    assert got[1]["ahr"] == 0.5  # b=3 against gold b=2 is still wrong at rel_tol 0.2


def test_scores_is_the_spec_scoring_whichever_scored_last(two_runs):
    """Reported: after `score --scorer abet`, `select * from scores` gave the abet numbers
    and the spec rows were out of reach of SQL."""
    from tcbreplay._score.options import ScoreOptions

    spec = score_run(two_runs, "alpha").scores
    score_run(two_runs, "alpha", options=ScoreOptions(scorer="abet"))
    got = rows(two_runs, "select sample_id, scoring, tsa, tp from scores order by sample_id")
    assert [r["scoring"] for r in got] == ["spec", "spec"]
    assert [r["tp"] for r in got] == spec["tp"].to_list()
    every = rows(two_runs, "select scoring, count(*) as n from scores_all group by 1 order by 1")
    assert every == [{"scoring": "abet", "n": 2}, {"scoring": "spec", "n": 2}]
    score_run(two_runs, "alpha", options=ScoreOptions(strings="bfcl", types="strict"))
    listed = rows(
        two_runs, "select run_id, scoring, scorer, strings, types from scorings order by scoring"
    )
    assert listed == [
        {"run_id": "alpha", "scoring": "abet", "scorer": "abet", "strings": None, "types": None},
        {"run_id": "alpha", "scoring": "spec", "scorer": "spec", "strings": "exact",
         "types": "lenient"},
        {"run_id": "alpha", "scoring": "spec_strings-bfcl_types-strict", "scorer": "spec",
         "strings": "bfcl", "types": "strict"},
    ]  # fmt: skip


def _loose():
    from tcbreplay._score.options import ScoreOptions

    return ScoreOptions(rel_tol=0.2)


@pytest.mark.parametrize("make_root", [False, True])
def test_empty_store_has_every_view_with_zero_rows(store, make_root):
    if make_root:
        store.root.mkdir(parents=True)
    for view, columns in VIEW_COLUMNS.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_sql(store, f"select * from {view}")
        # a store folder that does not exist is named (a mistyped --store), an empty one not
        assert [str(w.message) for w in caught] == (
            [] if make_root else [f"{store.root}: no such store folder, so there are no runs"]
        )
        assert result.rows == []
        assert columns <= set(result.columns), (view, result.columns)
    assert not store.root.exists() or list(store.root.iterdir()) == []


def test_view_columns_in_a_populated_store(two_runs):
    score_run(two_runs, "alpha")
    for view, columns in VIEW_COLUMNS.items():
        result = run_sql(two_runs, f"select * from {view} limit 0")
        assert columns <= set(result.columns), (view, result.columns)


def test_query_parameters_and_several_statements(two_runs):
    assert run_sql(two_runs, "select $x::int + 1 as y", {"x": 41}).records() == [{"y": 42}]
    result = run_sql(two_runs, "select 1 as a; select count(*) as n from samples;")
    assert result.records() == [{"n": 3}]


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [("1", "1.0", True), ("1", "2", False), ('"x"', '"x"', True), ("true", "1", False),
     ("null", "null", True), ("0.1", "0.1000000000001", True), ("3", '"3"', False)],
)  # fmt: skip
def test_json_equal_macro(store, a, b, equal):
    store.root.mkdir()
    sql = f"select json_equal('{a}'::json, '{b}'::json, 1e-9, 1e-9) as eq"
    assert run_sql(store, sql).records() == [{"eq": equal}]


def test_select_star_from_samples(two_runs):
    got = rows(two_runs, "select * from samples order by run_id, sample_index")
    assert len(got) == 3
    assert got[0]["started_at"] is not None


def test_timestamps_can_be_read_as_text(two_runs):
    got = rows(two_runs, "select started_at::varchar as t from samples order by run_id limit 1")
    assert got[0]["t"].startswith("2024-01-01 00:00:00")


# ---------------------------------------------------------------- read-only


REFUSED = {
    "COPY": "copy (select 1) to 'out.csv'",
    "ATTACH": "attach 'x.duckdb' as x",
    "INSTALL": "install httpfs",
    "LOAD": "load httpfs",
    "CREATE": "create table t as select 1",
    "CREATE VIEW": "create or replace view samples as select 1",
    "INSERT": "insert into t values (1)",
    "UPDATE": "update samples set status = 'ok'",
    "DELETE": "delete from samples",
    "DROP": "drop view samples",
    "SET": "set enable_external_access = true",
    "RESET": "reset allowed_directories",
    "PRAGMA": "pragma enable_profiling",
    "CALL": "call pragma_version()",
    "EXPORT": "export database 'dump'",
    "DETACH": "detach memory",
    "USE": "use memory",
    "BEGIN": "begin transaction",
    "CHECKPOINT": "checkpoint",
    "VACUUM": "vacuum",
    "second statement": "select 1; drop view samples",
    "hidden after comment": "select 1 -- comment\n; copy (select 1) to 'out.csv'",
    "UPDATE EXTENSIONS": "UPDATE EXTENSIONS",
    "UPDATE EXTENSIONS of one": "update extensions (json)",
    "EXPLAIN (ANALYZE) COPY": "explain (analyze) copy (select 1) to 'out.csv'",
    "EXPLAIN (options) COPY": "explain (format json, analyze) copy (select 1) to 'out.csv'",
    "EXPLAIN (option with a parenthesis) COPY": (
        "explain (analyze, format 'a)') copy (select 1) to 'out.csv'"
    ),
    "EXPLAIN ANALYZE WITH ... INSERT": (
        "explain analyze with t as (select 1) insert into t select 1"
    ),
    "COPY of a PIVOT": "copy (pivot samples on status using count(*)) to 'out.csv'",
    "CREATE of a PIVOT": "create table t as pivot samples on status using count(*)",
    "INSERT of a PIVOT": "insert into t pivot samples on status using count(*)",
    "WITH ... INSERT of a PIVOT": (
        "with s as (select * from samples) insert into t pivot s on status using count(*)"
    ),
    "EXPLAIN (ANALYZE) COPY of a PIVOT": (
        "explain (analyze) copy (pivot samples on status using count(*)) to 'out.csv'"
    ),
}


@pytest.mark.parametrize("sql", REFUSED.values(), ids=REFUSED.keys())
def test_statements_other_than_queries_are_refused(two_runs, sql):
    before = snapshot(two_runs.root)
    with pytest.raises(QueryError, match="statements are not allowed") as info:
        run_sql(two_runs, sql)
    assert info.value.exit_code == 2
    assert info.value.hint
    with pytest.raises(QueryError):
        check_read_only(sql)
    assert snapshot(two_runs.root) == before


@pytest.mark.parametrize(
    ("sql", "name"),
    [("install httpfs", "INSTALL or LOAD"), ("UPDATE EXTENSIONS", "UPDATE EXTENSIONS"),
     ("copy (pivot samples on status) to 'x.csv'", "COPY"),
     ("explain analyze copy (select 1) to 'x.csv'", "EXPLAIN COPY")],
)  # fmt: skip
def test_a_refused_statement_is_named_as_such(sql, name):
    with pytest.raises(QueryError, match=rf"^{name} statements are not allowed"):
        check_read_only(sql)


def test_a_pivot_and_an_explain_with_options_give_their_rows(two_runs):
    got = rows(two_runs, "pivot (select run_id from samples) on run_id using count(*)")
    assert got == [{"alpha": 2, "beta": 1}]
    got = rows(two_runs, "unpivot (select 1 as a, 2 as b) on a, b into name k value v")
    assert got == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
    (plan,) = run_sql(two_runs, "explain (format json) select * from tool_calls").rows
    json.loads(plan[1])
    (plan,) = run_sql(two_runs, "explain (analyze, format json) select 1").rows
    assert "operator_timing" in json.loads(plan[1]) or "timing" in plan[1]


ALLOWED = [
    "select 1",
    "with x as (select 1 as a) select a from x",
    "from samples",
    "describe tool_calls",
    "summarize scores",
    "explain select * from tool_calls",
    "EXPLAIN ANALYZE select count(*) from tool_calls",
    "SELECT name FROM tool_calls; SELECT 2",
    "EXPLAIN (FORMAT JSON) select * from tool_calls",
    "EXPLAIN (ANALYZE) select count(*) from tool_calls",
    "explain (analyze, format json) select count(*) from tool_calls",
    "-- why\nexplain /* how */ (format html) with x as (select 1 as a) select a from x",
    "explain (select 1) union select 2",
    "pivot samples on status using count(*) group by run_id",
    "PIVOT_WIDER samples on status using count(*)",
    "with s as (select * from samples) pivot s on status using count(*)",
    "with recursive r(x) using key (x) as (select 1 union select x + 1 from r where x < 3) "
    "pivot r on x",
    "from samples pivot (count(*) for status in ('ok', 'error'))",
    "select * from (pivot samples on status using count(*))",
    "unpivot (select 1 as a, 2 as b) on a, b into name k value v",
    "explain (analyze) pivot samples on status using count(*)",
    "describe pivot samples on status using count(*)",
    "summarize (pivot samples on status using count(*))",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_queries_are_allowed(two_runs, sql):
    assert check_read_only(sql)
    if sql != "from samples":  # see test_select_star_from_samples
        run_sql(two_runs, sql)


def test_empty_sql_is_refused(store):
    for sql in ("", "   ", ";", "-- only a comment"):
        with pytest.raises(QueryError, match="no SQL statement"):
            run_sql(store, sql)


@pytest.mark.parametrize(
    "sql",
    ["selec 1", "select * from", "select (1", "select 'unterminated"],
)
def test_syntax_errors(store, sql):
    with pytest.raises(QueryError) as info:
        run_sql(store, sql)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_unknown_table_and_bad_column(two_runs):
    with pytest.raises(QueryError, match="query failed"):
        run_sql(two_runs, "select * from no_such_view")
    with pytest.raises(QueryError, match="query failed"):
        run_sql(two_runs, "select no_such_column from samples")


def test_explain_analyze_cannot_write_into_the_store(two_runs):
    before = snapshot(two_runs.root)
    target = two_runs.root.resolve() / "written.csv"
    try:
        with pytest.raises(QueryError):
            run_sql(two_runs, f"explain analyze copy (select 1 as a) to '{target}'")
    finally:
        after = snapshot(two_runs.root)
        target.unlink(missing_ok=True)
    assert after == before


# ---------------------------------------------------------------- confined to the store


def outside_queries(root: Path) -> dict[str, str]:
    parent = root.resolve().parent
    return {
        "read_csv /etc/passwd": "select * from read_csv('/etc/passwd')",
        "read_text /etc/hostname": "select * from read_text('/etc/hostname')",
        "glob /etc": "select * from glob('/etc/*')",
        "read_blob /etc/hostname": "select * from read_blob('/etc/hostname')",
        "dot-dot out of the store": f"select * from read_text('{root.resolve()}/../outside.txt')",
        "sibling with the same prefix": (
            f"select * from read_text('{parent}/{root.name}-other/secret.txt')"
        ),
        "symlink out of the store": f"select * from read_text('{root.resolve()}/link/outside.txt')",
        "parent glob": f"select * from glob('{parent}/*')",
        "http": "select * from read_csv('http://127.0.0.1:9/x.csv')",
    }


def test_reading_files_outside_the_store_fails(two_runs):
    root = two_runs.root
    parent = root.resolve().parent
    (parent / "outside.txt").write_text("TOPSECRET-CONTENT")
    (parent / f"{root.name}-other").mkdir()
    (parent / f"{root.name}-other" / "secret.txt").write_text("TOPSECRET-CONTENT")
    os.symlink(parent, root / "link")
    for name, sql in outside_queries(root).items():
        with pytest.raises(QueryError, match="query failed") as info:
            run_sql(two_runs, sql)
        assert "TOPSECRET" not in str(info.value), name
    # files inside the store stay readable
    manifest = root.resolve() / "alpha" / "manifest.json"
    assert run_sql(two_runs, f"select count(*) as n from read_text('{manifest}')").records() == [
        {"n": 1}
    ]
