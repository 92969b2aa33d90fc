"""A replay's dataset and run id: the parent's dataset file copied as it is, only the
samples replayed parsed, and a default run id that follows every input of the replay."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import cli

from tcbreplay._inputs import stored as stored_module
from tcbreplay._inputs.dataset import dataset_from_entries
from tcbreplay._record.models import parse_model
from tcbreplay._replay.fingerprint import canonical_json
from tcbreplay._replay.inputs import replay_inputs
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._replay.run import replay_basis, replay_run
from tcbreplay._store.run_dir import Run
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
    monkeypatch.setattr(stored_module, "dataset_from_entries", None)  # never parsed whole
    chosen = ["capital-of-france", "triple-bottle"]  # entries 5 and 40
    summary = replay_run(Store(root), PARENT, new_run_id="two", sample_ids=chosen,
                         recorded_tools=True)  # fmt: skip
    assert (summary.recorded, summary.total, summary.status) == (2, 94, "partial")
    assert sorted(set(parsed)) == [5, 40]
    dataset = (root / "two" / "dataset.jsonl").read_bytes()
    assert dataset == (root / PARENT / "dataset.jsonl").read_bytes()
    parent = json.loads((root / PARENT / "manifest.json").read_text())["dataset"]
    assert json.loads((root / "two" / "manifest.json").read_text())["dataset"] == parent


def basis_print(**changes) -> str:
    return hashlib.sha256(canonical_json(replay_basis(**changes)).encode()).hexdigest()


def test_the_default_run_id_follows_every_input(root, tmp_path):
    parent = Store(root).open_run(PARENT)
    inputs = replay_inputs(parent, RecordedRun.load(parent))
    base = {"parent": parent, "inputs": inputs, "agent": None, "then": None, "fork_at": None,
            "recorded_tools": False, "offline": False}  # fmt: skip
    entries = inputs.dataset.entries()
    entries[3]["input"] += "!"
    other_parent = Run(parent.dir)  # the same parent recorded anew
    other_parent._manifest = {**parent.manifest, "fingerprint": "0" * 64}
    changes = {
        "dataset": {"inputs": dataclasses.replace(inputs, dataset=dataset_from_entries(entries))},
        "tools": {"inputs": dataclasses.replace(
            inputs, toolset=dataclasses.replace(inputs.toolset, schemas=inputs.toolset.schemas[1:])
        )},
        "system prompt": {"inputs": dataclasses.replace(inputs, system_prompt="Be brief.")},
        "agent": {"agent": "my_agent:build"},
        "then": {"then": parse_model("sim:seed=1")},
        "then's settings": {"then": parse_model("sim:seed=2")},
        "fork at": {"fork_at": 0},
        "recorded tools": {"recorded_tools": True},
        "offline": {"offline": True},
        "parent": {"parent": other_parent},
    }  # fmt: skip
    prints = {"unchanged": basis_print(**base)}
    for name, change in changes.items():
        prints[name] = basis_print(**{**base, **change})
    assert len(set(prints.values())) == len(prints), prints
    # deterministic; the parent's own dataset and the same entries in memory hash alike
    assert basis_print(**base) == prints["unchanged"]
    same = dataclasses.replace(inputs, dataset=dataset_from_entries(inputs.dataset.entries()))
    assert basis_print(**{**base, "inputs": same}) == prints["unchanged"]


def former_fingerprint(root: Path) -> str:
    """The fingerprint tcbreplay 0.1 gave an unchanged replay of the parent with recorded
    tools: its basis spelled out as 0.1 built it (the dataset's entries), not derived from
    today's."""
    parent = Store(root).open_run(PARENT)
    inputs = replay_inputs(parent, RecordedRun.load(parent))
    basis = {
        "parent": PARENT,
        "parent_fingerprint": parent.manifest.get("fingerprint")
        or (parent.manifest.get("files") or {}).get("messages.parquet"),
        "dataset": inputs.dataset.entries(),
        "tools": inputs.toolset.to_list(),
        "system_prompt": inputs.system_prompt,
        "agent": None,
        "then": None,
        "fork_at": None,
        "recorded_tools": True,
        "offline": False,
    }
    return hashlib.sha256(canonical_json(basis).encode()).hexdigest()


def test_a_replay_cut_short_by_an_older_version_finishes_under_its_run_id(root):
    first = replay_run(Store(root), PARENT, new_run_id="old", limit=2, recorded_tools=True)
    assert first.recorded == 2
    manifest_path = root / "old" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["fingerprint"] = former_fingerprint(root)
    manifest_path.write_text(json.dumps(manifest))
    more = replay_run(Store(root), PARENT, new_run_id="old", limit=4, recorded_tools=True)
    assert (more.recorded, more.attempted) == (4, 2)
    assert json.loads(manifest_path.read_text())["fingerprint"] == former_fingerprint(root)
    # one of other inputs is still refused
    manifest["fingerprint"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    other = cli("replay", PARENT, "--run-id", "old", "--recorded-tools", "--store", root)
    assert other.exit_code == 2
    assert "exists with other inputs" in other.output


def test_the_same_command_again_finishes_a_replay_under_its_default_run_id(root):
    first = replay_run(Store(root), PARENT, limit=1, recorded_tools=True)
    again = replay_run(Store(root), PARENT, limit=3, recorded_tools=True)
    assert first.run_id == again.run_id
    assert first.run_id.startswith(f"{PARENT}-replay-")
    assert (again.recorded, again.attempted) == (3, 2)


def test_a_dataset_without_a_sample_the_partial_parent_recorded_names_it(tmp_path):
    """A partial run replays the samples it recorded; a --dataset without one of them is
    refused naming --dataset (it was said to be a --sample-id no one gave)."""
    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=3,latency=0", "--run-id", "few", "--limit", 3,
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    lines = (store / "few" / "dataset.jsonl").read_text().splitlines(keepends=True)
    smaller = tmp_path / "two.jsonl"
    smaller.write_text("".join(lines[:2]))
    result = cli("replay", "few", "--dataset", smaller, "--store", store)
    assert result.exit_code == 2, result.output
    third = json.loads(lines[2])["id"]
    assert result.output.splitlines()[0] == (
        f"Error: --dataset {smaller}: no sample {third!r} (of 1 missing), which run 'few' "
        "recorded; a replay's dataset holds the samples the run recorded"
    )
    assert sorted(p.name for p in store.iterdir()) == ["few"]
