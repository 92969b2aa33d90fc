"""A run imported with --format bfcl goes out with export and back in with import: its
samples carry their own functions (two questions of BFCL's declare `calculate_distance`
differently) and BFCL's answer on each gold call, which `score --scorer bfcl` reads."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from bfcl_data import ANSWERS, QUESTIONS, joined_files
from helpers import cli
from run_contents import message_hashes, samples, scores

from bench.bfcl_variants import VARIANTS, form_of, render
from tcbreplay._inputs.dataset import dataset_from_entries
from tcbreplay.errors import DatasetError


@pytest.fixture
def bfcl_run(tmp_path) -> Path:
    """BFCL's vendored questions, every other one answered (the rest stored missing)."""
    questions, answers = joined_files(tmp_path)
    results = tmp_path / "results.jsonl"
    lines = []
    for k, question in enumerate(QUESTIONS[1::2]):
        calls = VARIANTS["exact"](question, ANSWERS[question["id"]])
        result = render(calls, form_of(k), question)
        lines.append(json.dumps({"id": question["id"], "result": result}) + "\n")
    results.write_text("".join(lines))
    root = tmp_path / "traces"
    imported = cli("import", "--format", "bfcl", "--dataset", questions, "--answers", answers,
                   "--traces", results, "--run-id", "b", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    return root


def bfcl_verdicts(root: Path) -> pl.DataFrame:
    result = cli("score", "b", "--scorer", "bfcl", "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    scored = pl.read_parquet(json.loads(result.stdout)["scores_file"])
    return scored.select("sample_id", "status", "valid", "error_type").sort("sample_id")


@pytest.mark.parametrize("fmt", ["langchain", "openai", "otlp"])
def test_a_bfcl_run_comes_back_with_its_answers_and_scores(bfcl_run, tmp_path, fmt):
    """The export's tools.json named calculate_distance twice (import refused it: `two tools
    are named`), and its dataset's gold calls kept BFCL's answers under `bfcl` (refused: `unknown
    key 'bfcl' in target[0]`)."""
    out = tmp_path / "out"
    exported = cli("export", "b", "-o", out, "--format", fmt, "--store", bfcl_run)
    assert exported.exit_code == 0, exported.output
    tools = json.loads((out / "tools.json").read_text())
    manifest = json.loads((bfcl_run / "b" / "manifest.json").read_text())
    names = [t["name"] for t in manifest["tools"]["specs"]]
    assert names.count("calculate_distance") == 2  # declared differently by two questions
    assert sorted(t["name"] for t in tools) == sorted(set(names))  # each once
    command = exported.stdout.splitlines()[-1].split(": tcbreplay ")[1].split()
    other = tmp_path / "other"
    imported = cli(*command, "--store", other)
    assert imported.exit_code == 0, imported.output
    assert samples(other, "b") == samples(bfcl_run, "b")  # the gold with BFCL's answers
    assert scores(other, "b").equals(scores(bfcl_run, "b"))
    assert bfcl_verdicts(other).equals(bfcl_verdicts(bfcl_run))
    assert bfcl_verdicts(other)["valid"].sum() > 0
    if fmt == "langchain":
        assert message_hashes(other, "b") == message_hashes(bfcl_run, "b")


def test_a_gold_call_keeps_bfcls_answer_and_a_malformed_one_is_refused():
    call = {"name": "f", "args": {"a": 1, "z": 2}, "bfcl": {"answer": {"a": [1], "z": [2]},
                                                            "function": {"name": "f"}}}  # fmt: skip
    entry = {"input": "x", "target": [call], "tools": [{"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}]}  # fmt: skip
    # z: BFCL's answers name parameters their functions lack (parallel_multiple_12), kept
    [sample] = dataset_from_entries([entry]).samples
    assert sample.to_dict()["target"] == [call]
    with pytest.raises(DatasetError, match=r"entry 0: target\[0\]\.bfcl must be BFCL's answer"):
        dataset_from_entries([{**entry, "target": [{**call, "bfcl": {"answer": {}}}]}])
