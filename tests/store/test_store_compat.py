"""Stores written by earlier versions stay readable: ``tests/data/store_v1`` was written by
tcbreplay 0.1.0 before the package was reorganised (a recorded sim run scored both ways, and
an imported run), and is read here as today's code reads a store."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, as_the_run_wrote, cli

V1 = TEST_DATA / "store_v1"
# the numbers that version printed for the recorded run (score --format json)
V1_SPEC = {"tsa": 0.9848484848484848, "tp": 0.9543777440054035, "ahr": 0.05394990366088632}
V1_ABET = {"tsa": 0.9024390243902439, "tp": 0.9543777440054035, "ahr": 0.10944206008583691}


@pytest.fixture
def v1_store(tmp_path):
    root = tmp_path / "store"
    shutil.copytree(V1, root)
    return root


def test_the_fixture_is_a_version_1_store():
    for run in ("rec-v1", "imp-v1"):
        assert json.loads((V1 / run / "manifest.json").read_text())["schema_version"] == 1


def test_its_stored_scores_verify_and_read_in_sql(v1_store):
    """The stored scorings and their audit records, made by the old code, still hold."""
    verified = cli("audit", "verify", "rec-v1", "--store", v1_store)
    assert verified.exit_code == 0, verified.output
    # (the SQL has changed since that version: said, and the numbers are the same)
    *notes, last = verified.stdout.splitlines()
    assert last.startswith("verified") and all(n.startswith("note: ") for n in notes)
    rows = cli("sql", "select count(*) as n from scores where run_id = 'rec-v1'",
               "--format", "json", "--store", v1_store)  # fmt: skip
    assert rows.exit_code == 0, rows.output
    assert json.loads(rows.stdout) == [{"n": 94}]
    # written before samples had a tools column: every sample reads as having none of its own
    tools = cli("sql", "select count(*) as n, count(tools) as own from samples",
                "--format", "json", "--store", v1_store)  # fmt: skip
    assert json.loads(tools.stdout) == [{"n": 94 + 6, "own": 0}]  # rec-v1, imp-v1


def test_its_scores_read_with_the_columns_added_since_null(v1_store, tmp_path):
    """Its scores files have no valid or error_type (the bfcl scorer's verdict): the scores
    view and the catalog give them as null, alone or beside a run scored since."""
    query = ("select run_id, count(*) as n, count(valid) as valid, count(error_type) as typed"
             " from scores group by run_id order by run_id")  # fmt: skip
    rows = cli("sql", query, "--format", "json", "--store", v1_store)
    assert rows.exit_code == 0, rows.output
    assert json.loads(rows.stdout) == [
        {"run_id": "imp-v1", "n": 6, "valid": 0, "typed": 0},
        {"run_id": "rec-v1", "n": 94, "valid": 0, "typed": 0},
    ]
    shutil.copytree(v1_store / "rec-v1", v1_store / "rec-new")
    assert cli("score", "rec-new", "--store", v1_store).exit_code == 0
    rows = cli("sql", query, "--format", "json", "--store", v1_store)
    assert [r["run_id"] for r in json.loads(rows.stdout)] == ["imp-v1", "rec-new", "rec-v1"]
    catalog = cli("catalog", "-o", tmp_path / "c.duckdb", "--store", v1_store)
    assert catalog.exit_code == 0, catalog.output


@pytest.mark.parametrize(("scorer", "expected"), [("spec", V1_SPEC), ("abet", V1_ABET)])
def test_scoring_it_again_gives_the_numbers_it_gave(v1_store, scorer, expected):
    result = cli("score", "rec-v1", "--scorer", scorer, "--format", "json", "--store", v1_store)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert {k: summary[k] for k in expected} == expected


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_every_command_that_reads_reads_it(v1_store, tmp_path):
    assert cli("runs", "--store", v1_store).exit_code == 0
    assert cli("score", "imp-v1", "--store", v1_store).exit_code == 0
    report = cli("report", "rec-v1", "imp-v1", "-o", tmp_path / "r.html", "--store", v1_store)
    assert report.exit_code == 0, report.output
    exported = cli("export", "imp-v1", "-o", tmp_path / "out", "--store", v1_store)
    assert exported.exit_code == 0, exported.output
    diffed = cli("diff", "rec-v1", "rec-v1", "--store", v1_store)
    assert diffed.exit_code == 0, diffed.output


@pytest.mark.slow  # (about 2.5 s: a recording)
def test_a_version_1_recording_resumes_and_takes_more_trials(v1_store):
    """Its manifest names the built-in tools by the module path of version 1
    (tcbreplay.benchmarks...), which today's package has under _inputs: resuming it failed
    with "No module named 'tcbreplay.benchmarks'"."""
    manifest = json.loads((v1_store / "rec-v1" / "manifest.json").read_text())
    assert manifest["tools"]["source"] == "tcbreplay.benchmarks.tool_call.tools:TOOLS"
    resumed = cli("record", "--resume", "rec-v1", "--trials", "2", "--store", v1_store, "--quiet")
    assert resumed.exit_code == 0, resumed.output
    assert "188/188 ok" in resumed.output
    scored = cli("score", "rec-v1", "--store", v1_store, "--format", "json")
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["n_samples"] == 188


@pytest.mark.slow  # (3 s: a replay)
def test_it_has_no_divergences_and_replays_as_recorded(v1_store):
    """Version 4 added replays and their divergences: a version 1 run has none, and replays
    to the same calls through today's agent and tools."""
    rows = cli("sql", "select count(*) as n from divergences", "--format", "json",
               "--store", v1_store)  # fmt: skip
    assert rows.exit_code == 0, rows.output
    assert json.loads(rows.stdout) == [{"n": 0}]
    replayed = cli("replay", "rec-v1", "--run-id", "again", "--workers", 8, "--quiet",
                   "--format", "json", "--store", v1_store)  # fmt: skip
    assert replayed.exit_code == 0, replayed.output
    summary = json.loads(replayed.stdout)
    assert (summary["diverged_samples"], summary["live_calls"]) == (0, 0)
    assert summary["turns_served"] > 94
    assert cli("audit", "verify", "again", "--store", v1_store).exit_code == 0


# ---------------------------------------------------------------- schema 5: each message's calls


def test_a_messages_file_holds_each_messages_calls_as_read_from_it(sim_copy):
    """The calls column is what DuckDB reads from each AI (and human) message, null for the
    others and for a message with none."""
    import duckdb

    root, run_id = sim_copy
    path = root / run_id / "messages.parquet"
    table = pq.read_table(path)
    assert table.schema.field("calls").type == pa.string()
    con = duckdb.connect()
    con.register("m", table)
    ((wrong, with_calls, other),) = con.sql(
        "select count(*) filter (where calls is distinct from (case when type in ('ai', 'human')"
        " then json_extract(message, '$.data.tool_calls')::varchar end)),"
        " count(*) filter (where calls is not null),"
        " count(*) filter (where type not in ('ai', 'human') and calls is not null) from m"
    ).fetchall()
    assert (wrong, other) == (0, 0)
    assert with_calls > 0


def test_a_file_without_the_calls_column_scores_the_same(sim_copy):
    """A messages file as a tcbreplay before schema 5 (or another tool) wrote it: the views
    read each message's calls from its text, and every score is the same."""
    root, run_id = sim_copy
    assert cli("score", run_id, "--store", root, "--format", "json").exit_code == 0
    scores = root / run_id / "scores" / "spec" / "scores.parquet"
    before = pq.read_table(scores)
    path = root / run_id / "messages.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["calls"]), path)
    as_the_run_wrote(path)
    assert cli("score", run_id, "--store", root, "--format", "json").exit_code == 0
    assert pq.read_table(scores).equals(before)
