"""`tcbreplay report`: parse, build the page, print its path; typed errors as one line."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from report_helpers import import_hand_run, payload

from tcbreplay._cli import main
from tcbreplay._store.runs import Store


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def hand_store(tmp_path) -> Store:
    store = Store(tmp_path / "traces")
    import_hand_run(store, "hand-a", "traces_a.jsonl")
    import_hand_run(store, "hand-b", "traces_b.jsonl")
    return store


@pytest.mark.slow  # (about 3 s)
def test_report_prints_the_path_it_wrote(tmp_path):
    store = hand_store(tmp_path)
    out = tmp_path / "report.html"
    result = cli("report", "hand-a", "hand-b", "-o", out, "--store", store.root)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)
    data = payload(out.read_text(encoding="utf-8"), "report-data")
    assert [r["id"] for r in data["runs"]] == ["hand-a", "hand-b"]


def test_unknown_run_is_one_error_line(tmp_path):
    store = hand_store(tmp_path)
    result = cli("report", "hand-a", "nope", "-o", tmp_path / "r.html", "--store", store.root)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"Error: run 'nope' not found in store {store.root}"
    assert "Traceback" not in result.output
    assert not (tmp_path / "r.html").exists()


def test_unwritable_output_is_one_error_line(tmp_path):
    store = hand_store(tmp_path)
    result = cli("report", "hand-a", "-o", tmp_path / "no" / "r.html", "--store", store.root)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {tmp_path / 'no' / 'r.html'}: directory")
    assert "Hint:" in result.stderr


def test_no_run_id_is_a_usage_error(tmp_path):
    result = cli("report", "--store", tmp_path)
    assert result.exit_code == 2
    assert "Missing argument" in result.output


def test_a_stored_number_json_has_no_form_for_is_reported(tmp_path):
    """A gold value of Infinity in a stored run (`record` refuses 1e999 in a dataset since,
    but a run recorded before, or written by another tool, may hold one): `score` scores it
    and `report` shows it."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from helpers import as_the_run_wrote

    dataset = tmp_path / "ds.jsonl"
    dataset.write_text(
        '{"id": "huge", "input": "add 1.5 and 2", '
        '"target": [{"name": "add_numbers", "args": {"a": 1.5, "b": 2}}]}\n'
        '{"id": "hi", "input": "Hi there!", "target": []}\n'
    )
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=7", "--dataset", dataset, "--run-id", "r",
                 "--quiet", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    samples = root / "r" / "samples.parquet"
    table = pq.read_table(samples)
    infinite = json.dumps([{"name": "add_numbers", "args": {"a": float("inf"), "b": 2}}])
    gold = [infinite if i == "huge" else g for i, g in zip(
        table["sample_id"].to_pylist(), table["gold"].to_pylist(), strict=True)]  # fmt: skip
    at = table.schema.get_field_index("gold")
    pq.write_table(table.set_column(at, table.schema.field(at), pa.array(gold, pa.string())),
                   samples)  # fmt: skip
    as_the_run_wrote(samples)
    result = cli("score", "r", "--dashboard", "none", "--store", root)
    assert result.exit_code == 0, result.output
    out = tmp_path / "r.html"
    result = cli("report", "r", "-o", out, "--store", root)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    details = payload(out.read_text(encoding="utf-8"), "report-details")
    assert details["gold"][0] == [["add_numbers", {"a": "Infinity", "b": 2}]]


def test_a_report_of_100_samples_is_at_most_1_5_mb(tmp_path):
    """The charting library is a fixed 1.2 MB partial bundle, not the whole of plotly.js (4.8 MB
    of a 5 MB page for 94 samples before); the rest grows with the samples."""
    from bench.generate import generate_run

    root = tmp_path / "traces"
    generate_run(root, "gen-100", 100, seed=0, workers=1)  # Gemini-shaped, ~7 messages each
    out = tmp_path / "r.html"
    result = cli("report", "gen-100", "-o", out, "--store", root)
    assert result.exit_code == 0, result.output
    assert len(payload(out.read_text(encoding="utf-8"), "report-data")["samples"]["id"]) == 100
    assert out.stat().st_size <= 1_500_000


@pytest.mark.slow  # (about 3 s: three reports)
def test_samples_sets_how_many_the_page_shows(tmp_path):
    store = Store(tmp_path / "traces")
    import_hand_run(store, "hand-a", "traces_a.jsonl")
    out = tmp_path / "report.html"
    common = ("hand-a", "--samples", 2, "-o", out, "--store", store.root)
    result = cli("report", *common, "--seed", 5)
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert len(payload(page, "report-data")["samples"]["id"]) == 2
    assert "Showing 2 of 6 samples with their transcripts: all 1 in error, 1 of the 3" in page
    assert "(seed 5)" in page
    result = cli("report", *common, "--all-samples")
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert len(payload(page, "report-data")["samples"]["id"]) == 6 and 'id="shown"' not in page


def test_samples_is_a_count(tmp_path):
    from tcbreplay._report.shown import SAMPLES

    result = cli("report", "r", "--samples", -1, "-o", tmp_path / "r.html")
    assert result.exit_code == 2 and "-1 is not in the range x>=0" in result.output
    command = main.get_command(click.Context(main), "report")
    option = next(p for p in command.params if p.name == "limit")
    assert option.default == SAMPLES  # the command line's default is the library's
