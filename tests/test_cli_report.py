"""`tcbreplay report`: parse, build the page, print its path; typed errors as one line."""

from __future__ import annotations

from click.testing import CliRunner
from report_helpers import import_hand_run, payload

from tcbreplay.cli import main
from tcbreplay.store import Store


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def hand_store(tmp_path) -> Store:
    store = Store(tmp_path / "traces")
    import_hand_run(store, "hand-a", "traces_a.jsonl")
    import_hand_run(store, "hand-b", "traces_b.jsonl")
    return store


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
