"""Values beyond the JSON limits in files the store holds, and in `query -p`: one line, never
a RecursionError traceback."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import cli

DEEP = "[" * 1200 + "]" * 1200


def test_a_manifest_nested_too_deep_is_named_and_left_out(sim_copy):
    root, run_id = sim_copy
    shutil.copytree(root / run_id, root / "deep")
    manifest = json.loads((root / "deep" / "manifest.json").read_text())
    text = json.dumps({**manifest, "run_id": "deep"})
    (root / "deep" / "manifest.json").write_text(text[:-1] + ', "extra": ' + DEEP + "}")
    named = cli("score", "deep", "--store", str(root))
    assert named.exit_code == 1
    assert "manifest.json: unreadable manifest" in named.output
    assert "Traceback" not in named.output
    listed = cli("runs", "--store", str(root))
    assert listed.exit_code == 0
    assert run_id in listed.output


def test_a_journal_line_nested_too_deep_is_named(sim_copy):
    root, run_id = sim_copy
    (root / run_id / "journal.jsonl").write_text('{"sample_id": ' + DEEP + "}\n")
    result = cli("record", "--resume", run_id, "--store", root, "--quiet")
    assert result.exit_code == 1
    journal = root / run_id / "journal.jsonl"
    assert result.stderr.startswith(f"Error: {journal}: line 1: a value nested deeper")
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", [DEEP, "1" * 5000])
def test_a_query_parameter_beyond_the_limits_is_refused(sim_copy, value):
    root, _ = sim_copy
    result = cli("query", "worst_samples", "-p", f"limit={value}", "--store", str(root))
    assert result.exit_code == 2
    assert "-p value:" in result.output
    assert "Traceback" not in result.output
