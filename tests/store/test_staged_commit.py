"""A set of files renamed into place together (an export, a scoring) is never left mixed with
an older set's files when its renames are cut short (a kill -9 between two of them: here an
interruption at the second rename, which leaves the same files)."""

from __future__ import annotations

import os

import pytest
from helpers import cli

from tcbreplay._store import files as files_module
from tcbreplay._store.files import staged


def cut_after_first_rename(monkeypatch):
    renames = []
    real = os.replace

    def replace(src, dst):
        if renames:
            raise KeyboardInterrupt  # killed here
        renames.append(dst)
        real(src, dst)

    monkeypatch.setattr(files_module.os, "replace", replace)


def write_set(folder, text):
    with staged() as files:
        for name in ("samples.jsonl", "messages.jsonl", "manifest.json"):
            files.write(folder / name, lambda tmp, name=name: tmp.write_text(f"{text} {name}"))


def test_a_commit_cut_short_leaves_no_file_of_the_set_before(tmp_path, monkeypatch):
    write_set(tmp_path, "old")
    (tmp_path / "notes.txt").write_text("the user's own file")
    cut_after_first_rename(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_set(tmp_path, "new")
    left = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert left == {"samples.jsonl": "new samples.jsonl", "notes.txt": "the user's own file"}


def test_an_export_cut_short_is_not_taken_for_the_one_before(sim_run, tmp_path, monkeypatch):
    store, run_id = sim_run
    out = tmp_path / "out"
    for name in ("traces.jsonl", "dataset.jsonl", "tools.json", "manifest.json"):
        out.mkdir(exist_ok=True)
        (out / name).write_text("an earlier export's")
    cut_after_first_rename(monkeypatch)
    assert cli("export", run_id, "-o", out, "--store", store.root).exit_code != 0
    assert sorted(p.name for p in out.iterdir()) == ["traces.jsonl"]  # no dataset, no manifest
    assert (out / "traces.jsonl").read_text() != "an earlier export's"


def test_what_a_killed_scoring_left_is_removed_by_the_next(sim_copy):
    root, run_id = sim_copy
    assert cli("score", run_id, "--store", root).exit_code == 0
    scores = root / run_id / "scores"
    left = [scores / "spec" / "scores.parquet.tmp", scores / "spec_only-x" / "pairs.parquet.tmp"]
    for path in left:  # as a kill -9 before the renames leaves them
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"PAR1 cut short")
    assert cli("score", run_id, "--store", root).exit_code == 0
    assert not any(path.exists() for path in left)
    assert (scores / "spec" / "summary.json").exists()
