"""A run whose data files are not those it wrote (one removed, rows removed or changed by
hand) is refused in one line by what would score it or fold into it, the store left as it
was: scored, it gave confident wrong numbers; resumed, it recorded the missing samples' rows
nowhere and called the run complete."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, cli


@pytest.fixture
def partial(tmp_path):
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=3", "--limit", "20", "--run-id", "p", "--quiet",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    return root, root / "p"


def manifest(run):
    return json.loads((run / "manifest.json").read_text())


@pytest.mark.parametrize("command", [["score", "p"], ["record", "--resume", "p"]])
def test_a_run_missing_its_messages_file_is_refused(partial, command):
    root, run = partial
    (run / "messages.parquet").unlink()
    before = manifest(run)
    result = cli(*command, "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: {run / 'messages.parquet'}: missing, where the run's other data file is there: "
        "the run's files are damaged (restore the file, or record the run again with --overwrite)"
    )
    assert manifest(run) == before


def test_an_imported_run_missing_a_data_file_says_to_import_it_again(tmp_path):
    """(It said to record the run again with --overwrite: an import is not recorded.)"""
    root = tmp_path / "traces"
    spans = TEST_DATA / "otel" / "openai_v2_latest.otlp.pb"
    made = cli("import", "--traces", spans, "--run-id", "imp", "--store", root)
    assert made.exit_code == 0, made.output
    (root / "imp" / "messages.parquet").unlink()
    result = cli("score", "imp", "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0].endswith(
        "the run's files are damaged (restore the file, or import its traces again under "
        "another --run-id)"
    )


@pytest.mark.parametrize("command", [["score", "p"], ["record", "--resume", "p"]])
def test_a_data_file_with_rows_removed_by_hand_is_refused(partial, command):
    root, run = partial
    path = run / "messages.parquet"
    table = pq.read_table(path)
    gone = table.column("sample_id").unique()[:3]
    pq.write_table(table.filter(pc.invert(pc.is_in(table.column("sample_id"), gone))), path)
    before = manifest(run)
    result = cli(*command, "--store", root)
    assert result.exit_code == 1, result.output
    assert f"Error: {path}: not the file the run wrote" in result.stderr
    assert manifest(run) == before and not (run / "scores" / "spec").exists()


@pytest.mark.parametrize("flag", ["--resume", "--retry-errors"])
def test_a_dataset_file_edited_by_hand_is_refused_by_a_resume(partial, flag):
    """A gold call edited in the run's dataset.jsonl was refused as "exists with other inputs
    (dataset, tools, prompt or model ...)" (exit 2), a hint to --overwrite the run."""
    root, run = partial
    path = run / "dataset.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    entries[0]["target"] = [{"name": "list_items", "args": {}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    before = manifest(run)
    result = cli("record", flag, "p", "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: {path}: not the file the run wrote (its sha256 is not the one manifest.json "
        "recorded): it was changed or replaced since; restore it, or record the run again "
        "with --overwrite"
    )
    assert manifest(run) == before


def test_a_copied_store_is_no_changed_one(partial, tmp_path):
    """A copy (cp without -p: other modification times) holds the same bytes: scored."""
    _root, run = partial
    copy = tmp_path / "copy" / "p"
    copy.mkdir(parents=True)
    for path in run.iterdir():
        if path.is_file() and path.name != "writer.lock":
            copy.joinpath(path.name).write_bytes(path.read_bytes())
    result = cli("score", "p", "--store", copy.parent, "--allow-incomplete")
    assert result.exit_code == 0, result.output
