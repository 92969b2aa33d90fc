"""`tcbreplay score`: reads only the run directory, is repeatable, and writes the dashboard file."""

from __future__ import annotations

import datetime as dt
import fcntl
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, as_the_run_wrote, cli, snapshot

from tcbreplay._score.options import ScoreOptions
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError

DATA = TEST_DATA
SUMMARY_KEYS = {
    "tsa", "ahr", "tp", "n_samples", "n_tsa", "n_tp", "args_invalid", "args_total",
    "args_missing", "n_errors",
}  # fmt: skip
TOOLS_SOURCE = '''
CATALOG = [{"item_id": 1, "name": "Notebook", "price": 2.5}]


def list_items() -> dict:
    """List the catalog."""
    return {"items": CATALOG}


def add_numbers(a: float, b: float) -> dict:
    """Add two numbers."""
    return {"result": a + b}


def multiply_numbers(a: float, b: float) -> dict:
    """Multiply two numbers."""
    return {"result": a * b}


TOOLS = [list_items, add_numbers, multiply_numbers]
'''


def score(store_root: Path, run_id: str, *extra: str):
    result = cli("score", run_id, "--store", str(store_root), *extra)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def score_json(store_root: Path, run_id: str, *extra: str) -> dict:
    return json.loads(score(store_root, run_id, "--format", "json", *extra).stdout)


def scores_frame(store_root: Path, run_id: str, scoring: str = "spec") -> pl.DataFrame:
    return pl.read_parquet(store_root / run_id / "scores" / scoring / "scores.parquet")


def without_time(summary: dict) -> dict:
    """``summary`` without the time of its scoring and its own sha256, which is of it too."""
    return {k: v for k, v in summary.items() if k not in ("scored_at", "summary_sha256")}


def record_custom(workdir: Path, monkeypatch, run_id: str = "custom") -> dict:
    """Record ds_shapes.json with a tools module and a prompt that live in ``workdir`` only."""
    workdir.mkdir(parents=True, exist_ok=True)
    module = f"tools_{uuid.uuid4().hex[:12]}"
    files = {
        "dataset": workdir / "dataset.json",
        "tools": workdir / f"{module}.py",
        "prompt": workdir / "prompt.txt",
    }
    shutil.copy(DATA / "ds_shapes.json", files["dataset"])
    files["tools"].write_text(textwrap.dedent(TOOLS_SOURCE))
    files["prompt"].write_text("Use the tools.")
    monkeypatch.syspath_prepend(str(workdir))
    store_root = workdir / "traces"
    result = cli(
        "record", "--dataset", str(files["dataset"]), "--tools", f"{module}:TOOLS",
        "--system-prompt", str(files["prompt"]), "--model", "sim:seed=3,error_rate=0.6",
        "--run-id", run_id, "--store", str(store_root), "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, (result.output, result.exception)
    return {"store": store_root, "run_id": run_id, "module": module, **files}


def _message_json(table: pa.Table, row: int, text: str) -> pa.Table:
    """``table`` with the message text of ``row`` replaced."""
    messages = table["message"].to_pylist()
    messages[row] = text
    return table.set_column(table.schema.get_field_index("message"), "message", [messages])


@pytest.mark.parametrize(
    "damage", ["drop sample_index", "not parquet", "sample_index as text", "malformed message"]
)
def test_a_run_file_not_in_the_store_format_is_one_line(sim_copy, damage):
    root, run_id = sim_copy
    assert cli("score", run_id, "--store", str(root)).exit_code == 0  # for audit verify
    path = root / run_id / "messages.parquet"
    table = pq.read_table(path)
    if damage == "drop sample_index":
        pq.write_table(table.drop_columns(["sample_index"]), path)
        expected = f"{path}: no column sample_index"
    elif damage == "not parquet":
        path.write_text("not parquet")
        expected = f"{path}: not a readable Parquet file"
    elif damage == "sample_index as text":
        column = table.schema.get_field_index("sample_index")
        pq.write_table(
            table.set_column(column, "sample_index", table[column].cast(pa.string())), path
        )
        expected = f"{path}: column sample_index holds string, where the store format has integers"
    else:  # in a file without the calls column (an older version's, or another tool's),
        # whose calls are read from its messages (a file with it is scored by its calls)
        row = table["type"].to_pylist().index("ai", 5)
        damaged = _message_json(table, row, '{"type": "ai", "data": {')
        pq.write_table(damaged.drop_columns(["calls"]), path)
        sample_id, position = table["sample_id"][row].as_py(), table["position"][row].as_py()
        expected = (
            f"cannot read the run's traces: messages.parquet: sample {sample_id!r}: its AI "
            f"message at position {position} is not valid JSON"
        )
    before = snapshot(root)
    for command in (["score", run_id], ["audit", "verify", run_id]):
        result = cli(*command, "--store", str(root))
        assert result.exit_code == 1, (command, result.output)
        lines = result.stderr.splitlines()
        assert lines[0].startswith(f"Error: {expected}"), (command, lines)
        assert len(lines) <= 2 and "Traceback" not in result.output
    assert snapshot(root) == before


@pytest.mark.parametrize("column", ["sample_id", "sample_index"])
@pytest.mark.parametrize("scorer", ["spec", "abet"])
def test_a_sample_id_or_index_held_twice_is_one_line(sim_copy, column, scorer):
    """Stored scores, audits and comparisons key on both: a samples.parquet edited so that
    two samples share one is refused, not scored."""
    root, run_id = sim_copy
    path = root / run_id / "samples.parquet"
    table = pq.read_table(path)
    values = table[column].to_pylist()
    values[3] = values[0]
    at = table.schema.get_field_index(column)
    pq.write_table(
        table.set_column(at, table.field(at), pa.array(values, table[column].type)), path
    )
    expected = {
        "sample_id": f"samples.parquet: sample_id {values[0]!r}, trial 0 names more than one "
        "sample",
        "sample_index": "samples.parquet: sample_index values are not unique",
    }[column]
    before = snapshot(root)
    result = cli("score", run_id, "--store", str(root), "--scorer", scorer)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == f"Error: {expected}"
    assert "Traceback" not in result.output
    assert snapshot(root) == before


# ---------------------------------------------------------------- offline and repeatable


def test_score_needs_no_dataset_tools_module_or_api_key(tmp_path, monkeypatch):
    rec = record_custom(tmp_path / "work", monkeypatch)
    store_root, run_id = rec["store"], rec["run_id"]
    first_json = score_json(store_root, run_id)
    first_table = score(store_root, run_id).stdout
    first_scores = scores_frame(store_root, run_id)

    # Take every input away: dataset, tools module (file and import cache), prompt, API key.
    for key in ("dataset", "tools", "prompt"):
        rec[key].unlink()
    shutil.rmtree(tmp_path / "work" / "__pycache__", ignore_errors=True)
    sys.modules.pop(rec["module"], None)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "work")])
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    renamed = tmp_path / "elsewhere"
    (tmp_path / "work").rename(renamed)  # the store itself moves too
    store_root = renamed / "traces"

    assert without_time(score_json(store_root, run_id)) == without_time(first_json) | {
        "scores_file": str(store_root / run_id / "scores/spec/scores.parquet"),
        "dashboard_file": str(
            store_root / run_id / "evaluations" / f"Tool Call Benchmark_{run_id}.json"
        ),
    }
    assert score(store_root, run_id).stdout == first_table.replace(
        str(tmp_path / "work"), str(renamed)
    )
    assert scores_frame(store_root, run_id).equals(first_scores)
    assert rec["module"] not in sys.modules


def test_scoring_twice_gives_identical_scores(sim_copy):
    root, run_id = sim_copy
    first = score_json(root, run_id)
    frame = scores_frame(root, run_id)
    dashboard = (root / run_id / "evaluations" / f"Tool Call Benchmark_{run_id}.json").read_bytes()
    second = score_json(root, run_id)
    assert scores_frame(root, run_id).equals(frame)
    assert frame.height == 94
    assert without_time(second) == without_time(first)
    # scored again, not read back: a stored scoring stands in only where the store refuses
    # writes (the toolkit's version is not a version of its code)
    assert second["scored_at"] > first["scored_at"]
    assert (root / run_id / "evaluations" / f"Tool Call Benchmark_{run_id}.json").read_bytes() == (
        dashboard
    )


def test_score_does_not_import_langchain_or_langgraph(sim_copy):
    # nor rich (its tables are drawn plainly on a file that is not a terminal) or asyncio
    # (it waits), nor the other commands' modules: their imports take about 0.2 s of a small
    # run's start; nor pyarrow.compute (about 30 ms: see tcbreplay._score.texts)
    from tcbreplay._cli.common import COMMAND_MODULES

    others = tuple(f"tcbreplay._cli.{m}" for m in COMMAND_MODULES.values() if m != "score")
    root, run_id = sim_copy
    code = textwrap.dedent(
        f"""
        import sys
        from tcbreplay._cli import main
        for fmt in ("table", "json"):
            main(["score", {run_id!r}, "--store", {str(root)!r}, "--format", fmt],
                 standalone_mode=False)
        loaded = [m for m in sys.modules
                  if m.startswith(("langchain", "langgraph", "rich", "asyncio"))
                  or m in {others!r} or m == "pyarrow.compute"]
        assert not loaded, loaded
        print("clean")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("clean")
    assert "tool selection accuracy" in done.stdout and '"tsa"' in done.stdout


# ---------------------------------------------------------------- what score prints and writes


def test_json_format_has_the_metrics_and_their_counts(sim_copy):
    root, run_id = sim_copy
    summary = score_json(root, run_id)
    assert set(summary) >= SUMMARY_KEYS
    for key in ("tsa", "ahr", "tp"):
        assert isinstance(summary[key], float)
        assert 0.0 <= summary[key] <= 1.0
    assert summary["n_samples"] == summary["n_tp"] == 94
    assert summary["n_tsa"] == 88  # six greetings have no gold calls
    assert 0 < summary["args_invalid"] < summary["args_total"]
    assert summary["ahr"] == pytest.approx(summary["args_invalid"] / summary["args_total"])
    assert summary["n_errors"] == 0
    assert summary["run_id"] == run_id
    stored = json.loads((root / run_id / "scores/spec/summary.json").read_text())
    assert {k: stored[k] for k in SUMMARY_KEYS} == {k: summary[k] for k in SUMMARY_KEYS}
    frame = scores_frame(root, run_id)
    assert summary["tp"] == pytest.approx(frame["tp"].mean())
    assert summary["tsa"] == pytest.approx(frame["tsa"].drop_nulls().mean())
    assert summary["args_total"] == frame["args_total"].sum()
    assert summary["args_missing"] == frame["args_missing"].sum()


def test_table_format(sim_copy):
    root, run_id = sim_copy
    summary = score_json(root, run_id)
    out = score(root, run_id).stdout
    assert f"{summary['tsa']:.4f}" in out
    assert f"{summary['tp']:.4f}" in out
    assert f"{summary['ahr']:.4f}" in out
    assert f"{summary['args_invalid']}/{summary['args_total']} args" in out
    assert f"dashboard: {root / run_id / 'evaluations'}" in out


def test_table_marks_a_simulated_run(sim_copy):
    root, run_id = sim_copy
    assert score_json(root, run_id)["simulated"] is True
    out = score(root, run_id).stdout.replace(str(root), "<store>")  # tmp path names the test
    assert "simulated" in out


@pytest.mark.parametrize("mode", ["mismatches", "all"])
def test_dashboard_file(sim_copy, mode):
    root, run_id = sim_copy
    summary = score_json(root, run_id, "--dashboard", mode)
    path = root / run_id / "evaluations" / f"Tool Call Benchmark_{run_id}.json"
    assert summary["dashboard_file"] == str(path)
    doc = json.loads(path.read_text())
    assert set(doc) == {"benchmark_name", "run_id", "results", "samples"}
    assert doc["benchmark_name"] == "Tool Call Benchmark"
    assert doc["run_id"] == run_id
    assert doc["results"] == {k: summary[k] for k in ("tsa", "ahr", "tp")}
    lines = (root / run_id / "dataset.jsonl").read_text().splitlines()
    entries = {e["input"]: e for e in map(json.loads, lines)}
    frame = scores_frame(root, run_id)
    mismatched = frame.filter(
        (pl.col("tp") < 1) | (pl.col("args_invalid") > 0) | (pl.col("args_missing") > 0)
    ).height
    assert len(doc["samples"]) == (94 if mode == "all" else mismatched)
    assert 0 < mismatched < 94
    for sample in doc["samples"]:
        assert set(sample) == {"input", "output", "target"}
        assert set(sample["output"]) == {"tool_call_names", "tool_call_args"}
        assert set(sample["target"]) == {"tool_call_names", "tool_call_args"}
        gold = entries[sample["input"]]["target"]
        assert sample["target"]["tool_call_names"] == [c["name"] for c in gold]
        assert sample["target"]["tool_call_args"] == [c["args"] for c in gold]
        assert len(sample["output"]["tool_call_names"]) == len(sample["output"]["tool_call_args"])
        assert all(isinstance(a, dict) for a in sample["output"]["tool_call_args"])


@pytest.mark.parametrize("scorer", ["spec", "abet"])
def test_dashboard_pairs_each_input_with_its_calls_in_any_file_order(sim_copy, scorer):
    root, run_id = sim_copy
    path = root / run_id / "samples.parquet"
    table = pq.read_table(path)
    pq.write_table(table.take(pa.array(range(table.num_rows - 1, -1, -1))), path)
    as_the_run_wrote(path)
    summary = score_json(root, run_id, "--dashboard", "all", "--scorer", scorer)
    samples = json.loads(Path(summary["dashboard_file"]).read_text())["samples"]
    by_index = table.sort_by("sample_index")["input"].to_pylist()
    assert [sample["input"] for sample in samples] == by_index
    lines = (root / run_id / "dataset.jsonl").read_text().splitlines()
    entries = {e["input"]: e for e in map(json.loads, lines)}
    for sample in samples:
        gold = entries[sample["input"]]["target"]
        assert sample["target"]["tool_call_names"] == [c["name"] for c in gold]
        assert sample["target"]["tool_call_args"] == [c["args"] for c in gold]


def test_dashboard_file_lists_what_the_reference_loop_lists(sim_copy, tmp_path):
    """The same samples, inputs and calls as the benchmark's reference loop (bench/), which
    json.dumps Python objects and shares no code with tcbreplay."""
    from bench.reference import main as reference

    root, run_id = sim_copy
    mine = json.loads(Path(score_json(root, run_id)["dashboard_file"]).read_text())
    dashboard = tmp_path / "reference.json"
    assert reference([run_id, "--store", str(root), "--dashboard-out", str(dashboard)]) == 0
    theirs = json.loads(dashboard.read_text())
    assert 0 < len(theirs["samples"]) < 94
    assert mine["samples"] == theirs["samples"]
    assert mine["results"] == pytest.approx(theirs["results"], rel=1e-12)


def test_dashboard_none_writes_no_file(sim_copy):
    root, run_id = sim_copy
    summary = score_json(root, run_id, "--dashboard", "none")
    assert summary["dashboard_file"] is None  # null, not the text "None"
    assert not (root / run_id / "evaluations").exists()


def test_a_dashboard_asked_of_a_scoring_that_writes_none_is_refused(sim_copy):
    """--dashboard all with --only was left out in silence (dashboard_file null, no
    warning); without --dashboard, --only scores as before."""
    root, run_id = sim_copy
    refused = cli("score", run_id, "--only", "add_numbers", "--dashboard", "all",
                  "--store", str(root))  # fmt: skip
    assert refused.exit_code == 2
    assert refused.stderr.startswith(
        "Error: --dashboard all: a scoring with --only/--without writes no dashboard file"
    )
    assert score_json(root, run_id, "--only", "add_numbers")["dashboard_file"] is None


def test_other_tolerances_get_their_own_folder(sim_copy):
    root, run_id = sim_copy
    default = score_json(root, run_id)
    loose = score_json(root, run_id, "--rel-tol", "0.5")
    assert loose["scoring"] != default["scoring"] == "spec"
    assert (root / run_id / "scores" / loose["scoring"] / "scores.parquet").exists()
    assert loose["args_invalid"] <= default["args_invalid"]
    assert scores_frame(root, run_id).equals(scores_frame(root, run_id))


def test_score_output_agrees_with_the_sql_scores_view(sim_copy):
    root, run_id = sim_copy
    summary = score_json(root, run_id)
    result = cli(
        "sql",
        "select avg(tp) as tp, avg(tsa) as tsa, sum(args_invalid) as inv, sum(args_total) as tot "
        "from scores",
        "--store", str(root), "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["tp"] == pytest.approx(summary["tp"])
    assert row["tsa"] == pytest.approx(summary["tsa"])
    assert (row["inv"], row["tot"]) == (summary["args_invalid"], summary["args_total"])


# ---------------------------------------------------------------- errors


def test_unknown_run_id_exits_2_with_a_hint(sim_copy):
    root, run_id = sim_copy
    before = snapshot(root)
    result = cli("score", "no-such-run", "--store", str(root))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert lines[0] == f"Error: run 'no-such-run' not found in store {root}"
    assert lines[1].startswith("Hint: ")
    assert run_id in lines[1]
    assert snapshot(root) == before


def test_unknown_run_id_in_an_empty_store_has_a_hint(tmp_path):
    result = cli("score", "no-such-run", "--store", str(tmp_path / "traces"))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith("Error: run 'no-such-run' not found")
    assert any(line.startswith("Hint: ") for line in result.stderr.splitlines())


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "a b"])
def test_invalid_run_id(tmp_path, run_id):
    result = cli("score", run_id, "--store", str(tmp_path / "traces"))
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: run id")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("option", "value"),
    [("--rel-tol", "-1"), ("--abs-tol", "-1e-9"), ("--abs-tol", "nan"), ("--rel-tol", "inf")],
)
def test_a_negative_or_non_finite_tolerance_is_refused(sim_copy, option, value):
    """(a NaN or infinite tolerance would also write a summary.json that is not JSON)"""
    root, run_id = sim_copy
    before = snapshot(root)
    result = cli("score", run_id, "--store", str(root), option, value)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {option} {float(value)}: must be a finite number")
    assert snapshot(root) == before


def test_incomplete_run_is_refused_unless_allowed(sim_copy):
    root, run_id = sim_copy
    manifest_path = root / run_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["status"] = "interrupted"
    manifest_path.write_text(json.dumps(manifest))
    before = snapshot(root)
    result = cli("score", run_id, "--store", str(root))
    assert result.exit_code != 0
    assert result.stderr.startswith(f"Error: run {run_id!r} is interrupted")
    assert "--allow-incomplete" in result.stderr
    assert snapshot(root) == before
    summary = score_json(root, run_id, "--allow-incomplete")
    assert summary["run_status"] == "interrupted"
    assert summary["n_samples"] == 94
    assert summary["warnings"] == ["run interrupted: 94 of 94 samples recorded, scored as they are"]


def test_an_unfinished_run_without_totals_says_what_it_holds(sim_copy):
    # a recording killed before its manifest had totals said "94 of None samples recorded"
    root, run_id = sim_copy
    manifest_path = root / run_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["status"] = "interrupted"
    del manifest["totals"]
    manifest_path.write_text(json.dumps(manifest))
    summary = score_json(root, run_id, "--allow-incomplete")
    assert summary["warnings"] == ["run interrupted: 94 samples recorded, scored as they are"]


def _samples_waiting(run_dir: Path, journal: str, count: int) -> None:
    """The run marked recording, its first ``count`` samples recorded again into ``journal``
    as a killed recording leaves them (finished later than their rows: not folded yet)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["status"] = "recording"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    rows = pq.read_table(run_dir / "samples.parquet").slice(0, count).to_pylist()
    again = [{**r, "finished_at": r["finished_at"] + dt.timedelta(minutes=5)} for r in rows]
    (run_dir / journal).write_text("".join(json.dumps(r, default=str) + "\n" for r in again))


def test_samples_waiting_in_the_journal_are_named(sim_copy):
    """A killed recording leaves finished samples in the journal, which scoring does not
    read: --allow-incomplete scores the Parquet files and warns of the rest."""
    root, run_id = sim_copy
    _samples_waiting(root / run_id, "journal.jsonl", 3)
    result = cli("score", run_id, "--store", str(root), "--allow-incomplete", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n_samples"] == 94
    # (under warnings, as the docs say of JSON; it was on stderr only)
    assert data["warnings"] == [
        "run interrupted: 94 of 94 samples recorded, scored as they are",
        "3 finished samples wait in journal.jsonl, which `record --resume` folds into "
        f"the Parquet files that scoring reads; run {run_id!r} is scored without them",
    ]
    assert result.stderr == ""


def test_csv_says_the_warnings_on_stderr(sim_copy):
    """The rows of csv have no room for them: they were said nowhere, and a failed run
    scored with --allow-incomplete looked passed."""
    root, run_id = sim_copy
    manifest_path = root / run_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "status": "interrupted"}))
    result = cli("score", run_id, "--store", str(root), "--allow-incomplete", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("run_id,scoring,metric,value,count,n,unit\n")
    assert "Warning" not in result.stdout
    assert result.stderr.splitlines() == [
        "Warning: run interrupted: 94 of 94 samples recorded, scored as they are"]  # fmt: skip


def test_samples_waiting_in_shard_journals_are_named(sim_copy):
    # they were said to wait in journal.jsonl, for `record --resume` (refused while shards
    # record)
    root, run_id = sim_copy
    _samples_waiting(root / run_id, "journal-2-of-2.jsonl", 2)
    result = cli("score", run_id, "--store", str(root), "--allow-incomplete", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"][-1].startswith(
        "2 finished samples wait in the shards' journals (journal-I-of-N.jsonl), which "
        "the last shard to finish folds into the Parquet files that scoring reads"
    )


def test_score_from_another_store_location_via_env(sim_copy, monkeypatch):
    root, run_id = sim_copy
    monkeypatch.setenv("TCBREPLAY_STORE", str(root))
    result = cli("score", run_id, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_samples"] == 94
    assert Store(root).open_run(run_id).run_id == run_id


def test_a_run_scored_in_parts_writes_what_one_part_writes(sim_copy, monkeypatch):
    """Large runs are scored in parts (two per core), side by side: forced on the small sim
    run (three parts), every file holds what one part writes."""
    from tcbreplay._score import run as score
    from tcbreplay._score import translate

    root, run_id = sim_copy
    cut = []
    split = translate.split_samples
    monkeypatch.setattr(translate, "split_samples", lambda *a: cut.append(split(*a)) or cut[-1])
    outputs = []
    for parts in (1, 3):
        monkeypatch.setattr(score, "_parts_for", lambda samples, parts=parts: parts)
        result = score.score_run(Store(root), run_id, dashboard="all")
        summary = json.loads((result.scores_path.parent / "summary.json").read_text())
        del summary["scored_at"], summary["summary_sha256"]
        outputs.append(
            (
                pl.read_parquet(result.scores_path),
                pl.read_parquet(result.scores_path.parent / "pairs.parquet"),
                summary,
                json.loads(result.dashboard_path.read_text()),
            )
        )
    assert [len(ranges) for ranges in cut] == [1, 3]
    (scores1, pairs1, summary1, board1), (scores3, pairs3, summary3, board3) = outputs
    assert scores1.equals(scores3)
    assert pairs1.equals(pairs3)
    assert summary1 == summary3
    assert board1 == board3


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_spinner_shows_on_a_terminal_only():
    from tcbreplay._cli.progress import working

    terminal, log = _Terminal(), io.StringIO()
    with working("scoring run-1 …", file=terminal):
        pass
    with working("scoring run-1 …", file=log):
        pass
    assert "scoring run-1 …" in terminal.getvalue()
    assert log.getvalue() == ""


def test_a_spinner_says_how_far_its_step_has_come():
    from tcbreplay._cli.progress import working

    terminal, log = _Terminal(), io.StringIO()
    with working("comparing b with a …", file=terminal) as say:
        say("comparing b with a: 500 of 2,000 resamples …")
        time.sleep(0.3)  # (the spinner redraws a few times a second)
    with working("comparing b with a …", file=log) as say:
        say("comparing b with a: 500 of 2,000 resamples …")
    assert "500 of 2,000 resamples" in terminal.getvalue()
    assert log.getvalue() == ""


def test_score_writes_nothing_but_results_off_a_terminal(sim_copy):
    root, run_id = sim_copy
    result = cli("score", run_id, "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert json.loads(result.stdout)["run_id"] == run_id


def test_an_unreadable_samples_file_is_a_one_line_error(sim_copy):
    root, run_id = sim_copy
    (root / run_id / "samples.parquet").write_bytes(b"not parquet")
    before = snapshot(root)
    result = cli("score", run_id, "--store", root)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith("Error: ")
    assert "samples.parquet: not a readable Parquet file" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(root) == before


def test_files_rewritten_by_polars_score_the_same(sim_copy):
    """Parquet files rewritten by another tool (Polars writes large strings) are still in the
    store format: the same kinds of columns, the same scores."""
    root, run_id = sim_copy
    before = score_json(root, run_id, "--dashboard", "none")
    for name in ("samples.parquet", "messages.parquet"):
        path = root / run_id / name
        pl.read_parquet(path).write_parquet(path)
        as_the_run_wrote(path)
        assert pa.types.is_large_string(pq.read_schema(path).field("sample_id").type)
    after = score_json(root, run_id, "--dashboard", "none")
    keep = ("tsa", "tp", "ahr", "n_samples", "args_invalid", "args_total", "by_tool")
    assert {k: after[k] for k in keep} == {k: before[k] for k in keep}


@pytest.mark.parametrize(
    ("scoring", "options"),
    [
        ("spec", ScoreOptions()),
        ("abet", ScoreOptions(scorer="abet")),
        ("spec_rel-0.001_abs-0", ScoreOptions(rel_tol=0.001)),
        ("spec_rel-0_abs-0", ScoreOptions(rel_tol=0, abs_tol=0)),
        ("spec_rel-1e-09_abs-1e-09", ScoreOptions(abs_tol=1e-9)),  # the former defaults
        ("spec_rel-1e-09_abs-0", None),  # the defaults are named spec
        ("spec_rel-1e-3_abs-0", None),  # not how the options write their name
        ("spec_strings-bfcl", ScoreOptions(strings="bfcl")),
        ("spec_types-strict", ScoreOptions(types="strict")),
        (
            "spec_rel-0.001_abs-0_strings-bfcl_types-strict",
            ScoreOptions(rel_tol=0.001, strings="bfcl", types="strict"),
        ),
        ("spec_types-strict_strings-bfcl", None),  # not in the order the name writes them
        ("spec_strings-exact", None),  # the default is not named
        ("spec_strings-other", None),
        ("spec_rel--1_abs-0", None),
        ("spec_rel-nan_abs-0", None),
        ("spec_rel-x_abs-0", None),
        ("spec_side-user", ScoreOptions(side="user")),
        ("spec_types-strict_side-both", ScoreOptions(types="strict", side="both")),
        ("spec_side-agent", None),  # the default is not named
        ("other", None),
    ],
)
def test_options_from_a_results_folder_name(scoring, options):
    assert ScoreOptions.from_scoring(scoring) == options
    if options is not None:
        assert options.scoring == scoring


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"side": "nobody"}, "--side 'nobody': choose one of agent, user, both"),
        ({"side": "user", "scorer": "abet"}, "--side user applies to --scorer spec"),
        ({"side": "both", "gold_run": "other"}, "--side both goes with the dataset's gold"),
    ],
)
def test_side_is_the_spec_scorers_against_the_datasets_gold(options, message):
    with pytest.raises(InputError, match=re.escape(message)):
        ScoreOptions(**options)


def test_score_holds_the_run_against_deletion(sim_copy):
    """While record --overwrite deletes the run (holding it exclusively) score does not read
    it; while score reads it, the deletion is refused (see test_store)."""
    root, run_id = sim_copy
    before = snapshot(root)
    fd = os.open(root / run_id, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        result = cli("score", run_id, "--store", str(root))
    finally:
        os.close(fd)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: run {run_id!r} is being deleted to be recorded anew")
    assert snapshot(root) == before
    assert cli("score", run_id, "--store", str(root)).exit_code == 0


@pytest.mark.parametrize("title", ["../../../escaped", "/tmp/abs", ".hidden"])
def test_a_benchmark_title_that_is_a_path_cannot_place_the_dashboard_file(sim_copy, title):
    root, run_id = sim_copy
    manifest_path = root / run_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["benchmark"]["title"] = title
    manifest_path.write_text(json.dumps(manifest))
    result = cli("score", run_id, "--store", str(root))
    assert result.exit_code == 1
    assert "cannot name the dashboard file" in result.output
    assert not list(root.parent.rglob("*escaped*"))
    assert not (root / run_id / "scores" / "spec" / "summary.json").exists()


def test_engine_ray_without_ray_says_how_to_install_it(sim_copy, monkeypatch):
    root, run_id = sim_copy
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    result = cli("score", run_id, "--store", root, "--engine", "ray")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --engine ray needs Ray, which is not installed")
    assert "Hint: pip install 'tcbreplay[ray]'" in result.stderr
    assert not (root / run_id / "scores").exists()


def test_a_ray_address_needs_engine_ray(sim_copy):
    root, run_id = sim_copy
    result = cli("score", run_id, "--store", root, "--ray-address", "auto")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --ray-address applies to --engine ray")
    result = cli("score", run_id, "--store", root, "--engine", "ray", "--scorer", "abet")
    assert result.exit_code == 2, result.output
    assert "--engine ray scores with --scorer spec" in result.stderr


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["--ray-keep", "0"], "Error: --ray-keep applies to --engine ray"),
        (["--engine", "ray", "--ray-keep", "-1"], "Error: --ray-keep -1: give the seconds as 0"),
        (["--engine", "ray", "--ray-keep", "nan"], "Error: --ray-keep nan: give the seconds"),
        (["--engine", "ray", "--ray-keep", "soon"], "Error: Invalid value for '--ray-keep'"),
    ],
)
def test_a_time_to_keep_scorers_needs_ray_and_seconds(sim_copy, args, start):
    root, run_id = sim_copy
    result = cli("score", run_id, "--store", root, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(start), result.stderr
    assert not (root / run_id / "scores").exists()


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connection to it is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("address", "code", "start"),
    [
        (None, 1, "Error: cannot join the Ray cluster at 127.0.0.1:{port}: Connection refused"),
        ("", 2, "Error: --ray-address is empty"),
        ("garbage!!@@", 2, "Error: --ray-address garbage!!@@: write it HOST:PORT"),
    ],
)
def test_a_ray_address_nobody_answers_at_is_refused_at_once(sim_copy, address, code, start):
    # Ray itself retries a silent address for minutes, deaf to Ctrl-C
    root, run_id = sim_copy
    port = _closed_port()
    given = f"127.0.0.1:{port}" if address is None else address
    started = time.monotonic()
    result = cli("score", run_id, "--store", root, "--engine", "ray", "--ray-address", given)
    assert result.exit_code == code, result.output
    assert result.stderr.startswith(start.format(port=port)), result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # the error, and its hint
    assert time.monotonic() - started < 60
    assert not (root / run_id / "scores").exists()


def test_a_ray_address_that_answers_but_is_no_ray_cluster_is_refused_at_once(sim_copy):
    # any port that took a TCP connection passed: ray.init then retried it for minutes
    import http.server
    import threading

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # (into the command's stderr)
            pass

    root, run_id = sim_copy
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    started = time.monotonic()
    try:
        result = cli("score", run_id, "--store", root, "--engine", "ray", "--ray-address", address)
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(
        f"Error: cannot join the Ray cluster at {address}: it answers, but not as a Ray GCS"
    )
    assert len(result.stderr.strip().splitlines()) == 2  # the error, and its hint
    assert time.monotonic() - started < 10
    assert not (root / run_id / "scores").exists()


def test_a_run_against_itself_is_refused_and_against_its_copy_keeps_invented_keys(
    sim_run, tmp_path
):
    """The refusal said a run scored against itself "is all correct"; against an exact copy
    it is not: an argument its tool does not take is invalid whatever the gold."""
    store, run_id = sim_run
    root = tmp_path / "traces"
    for name in (run_id, "copy"):
        shutil.copytree(store.run_dir(run_id), root / name, ignore=shutil.ignore_patterns("scores"))
    itself = cli("score", run_id, "--gold-run", run_id, "--store", root)
    assert itself.exit_code == 2
    assert itself.stderr.splitlines() == [
        f"Error: --gold-run {run_id}: the run itself: give another run to score its calls against",
        "Hint: a run scored against its own calls is all correct but for the arguments its tools "
        "do not take, which are invalid whatever the gold",
    ]
    result = cli("score", run_id, "--gold-run", "copy", "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    invented = cli("query", "invented_keys", "-p", f"run_id={run_id}", "-p", "limit=1000",
                   "--format", "json", "--store", root)  # fmt: skip
    assert (summary["tsa"], summary["tp"]) == (1.0, 1.0)
    assert summary["args_invalid"] == sum(r["times"] for r in json.loads(invented.stdout)) > 0


def test_missing_samples_are_said_missing_not_in_error(tmp_path):
    """An import's sample without a trace is stored missing and counted among n_errors: the
    table said "with recording errors" and the report "ended in error while recording"."""
    dataset = tmp_path / "ds.jsonl"
    dataset.write_text("".join(json.dumps({"id": i, "input": f"q {i}", "target": [
        {"name": "list_items", "args": {}}]}) + "\n" for i in ("a", "b", "c")))  # fmt: skip
    messages = [{"type": "human", "data": {"content": "q a"}},
                {"type": "ai", "data": {"content": "", "tool_calls": [
                    {"name": "list_items", "args": {}, "id": "1"}]}}]  # fmt: skip
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps({"sample_id": "a", "messages": messages}) + "\n"
                      + json.dumps({"sample_id": "b", "status": "error", "error": "boom",
                                    "messages": messages[:1]}) + "\n")  # fmt: skip
    root = tmp_path / "traces"
    tools = TEST_DATA / "tools_shop.json"
    imported = cli("import", "--format", "langchain", "--traces", traces, "--dataset", dataset,
                   "--tools", tools, "--run-id", "m", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    result = cli("score", "m", "--store", root)
    assert result.exit_code == 0, result.output
    assert "3 samples, 1 with recording errors, 1 missing (no trace)" in result.stdout
    summary = json.loads(cli("score", "m", "--format", "json", "--store", root).stdout)
    assert (summary["n_errors"], summary["n_missing"]) == (2, 1)
    # the other scorers said all of them "with recording errors", and kept no n_missing
    # abet's said all of them "with recording errors", and kept no n_missing (bfcl's too:
    # test_cli_bfcl)
    other = cli("score", "m", "--scorer", "abet", "--store", root)
    assert other.exit_code == 0, other.output
    assert "3 samples, 1 with recording errors, 1 missing (no trace)" in other.stdout
    data = json.loads(cli("score", "m", "--scorer", "abet", "--format", "json",
                          "--store", root).stdout)  # fmt: skip
    assert (data["n_errors"], data["n_missing"]) == (2, 1)
    page = tmp_path / "r.html"
    assert cli("report", "m", "-o", page, "--store", root).exit_code == 0
    assert ("1 of 3 samples ended in error and score with the calls made before the error; "
            "1 are missing (no trace) and score with no calls") in page.read_text()  # fmt: skip
