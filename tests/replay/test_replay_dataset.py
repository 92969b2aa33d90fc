"""A replay's dataset: the parent's dataset file copied as it is, and the samples replayed
parsed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tcbreplay._inputs import stored as stored_module
from tcbreplay._replay.run import replay_run
from tcbreplay._store.runs import Store

PARENT = "sim-seed7"


@pytest.fixture(scope="module")
def root(sim_run, tmp_path_factory) -> Path:
    store, run_id = sim_run
    path = tmp_path_factory.mktemp("replay-dataset") / "traces"
    shutil.copytree(store.run_dir(run_id), path / run_id)
    shutil.rmtree(path / run_id / "scores", ignore_errors=True)
    return path


def test_a_selection_parses_only_its_samples_and_copies_the_parents_file(root, monkeypatch):
    parsed: list[int] = []
    real = stored_module.entry_sample

    def counting(entry, index, label, where):
        parsed.append(index)
        return real(entry, index, label, where)

    monkeypatch.setattr(stored_module, "entry_sample", counting)
    chosen = ["capital-of-france", "triple-bottle"]  # entries 5 and 40
    summary = replay_run(Store(root), PARENT, new_run_id="two", sample_ids=chosen,
                         recorded_tools=True)  # fmt: skip
    assert (summary.recorded, summary.total, summary.status) == (2, 94, "partial")
    assert {5, 40} <= set(parsed)
    dataset = (root / "two" / "dataset.jsonl").read_bytes()
    assert dataset == (root / PARENT / "dataset.jsonl").read_bytes()
    parent = json.loads((root / PARENT / "manifest.json").read_text())["dataset"]
    assert json.loads((root / "two" / "manifest.json").read_text())["dataset"] == parent
