"""Failures of the place read from: a manifest, a scores summary or a journal that is not
UTF-8. Each is one `Error:` line naming the file, or a run left out with a `Warning:`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import cli

from tcbreplay.store import JOURNAL, MANIFEST


@pytest.fixture
def scored(sim_copy) -> tuple[Path, str]:
    """A private copy of the session's run, scored."""
    root, run_id = sim_copy
    assert cli("score", run_id, "--store", root).exit_code == 0
    return root, run_id


# ---------------------------------------------------------------- files that are not UTF-8


def test_a_manifest_that_is_not_utf8_is_left_out_or_named(scored, tmp_path):
    """It was a traceback (UnicodeDecodeError) from runs, sql and catalog."""
    root, run_id = scored
    shutil.copytree(root / run_id, root / "latin")
    (root / "latin" / MANIFEST).write_bytes(b'{"comment": "caf\xe9"}')
    warning = (
        f"Warning: left out run 'latin': {root / 'latin' / MANIFEST}: unreadable manifest: "
        "not UTF-8 text (byte 16: invalid continuation byte)"
    )
    for command in (["runs"], ["sql", "select distinct run_id from samples"],
                    ["catalog", "-o", tmp_path / "c.duckdb"]):  # fmt: skip
        result = cli(*command, "--store", root)
        assert result.exit_code == 0, (command, result.output)
        assert result.stderr == warning + "\n"
        assert "latin" not in result.stdout
    result = cli("score", "latin", "--store", root)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {warning.split(': ', 2)[2]}\n"


def test_a_scores_summary_that_is_not_utf8_is_not_read(scored, tmp_path):
    root, run_id = scored
    (root / run_id / "scores" / "spec" / "summary.json").write_bytes(b'{"scored_at": "\xe9"}')
    result = cli("sql", "select count(*) as n from scores", "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 0}]
    result = cli("report", run_id, "-o", tmp_path / "r.html", "--store", root)
    assert result.exit_code == 0, result.output  # scored in memory instead


def test_a_journal_line_that_is_not_utf8_is_named(sim_copy):
    root, run_id = sim_copy
    (root / run_id / JOURNAL).write_bytes(b'{"sample_id": "\xe9"}\n')
    result = cli("record", "--resume", run_id, "--store", root, "--quiet")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {root / run_id / JOURNAL}: line 1: not UTF-8 text\n"
