"""A run's stored dataset read as it is asked for (:class:`StoredDataset`): the same samples,
ids and stored sha256 as the dataset parsed whole, with only the entries asked for parsed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tcbreplay._inputs import stored as stored_module
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._inputs.dataset import dataset_from_entries
from tcbreplay._inputs.stored import StoredDataset
from tcbreplay._store.files import write_jsonl_atomic
from tcbreplay.errors import DatasetError, StoreError

TOOL = {"name": "add", "parameters": {"type": "object", "properties": {"a": {}}}}
ENTRIES = [
    {"id": 70, "input": "seventy", "target": [{"name": "add", "args": {"a": 1}}]},
    {"id": 'say "hi" \\ there', "input": "escaped", "target": []},
    {"id": "é-ü", "input": "not ASCII", "target": [], "category": "c"},
    # a key named tools that is not the entry's: no tools of its own
    {"id": "nested", "input": "x", "target": [], "metadata": {"tools": ["add"]}},
    {"id": "own", "input": "y", "target": [{"name": "add", "args": {}}], "tools": [TOOL]},
    {"id": -3, "input": "negative", "target": []},
    {"id": 0, "input": "zero", "target": []},
    {"input": "no id: its position", "target": []},
]
STRING_IDS = [{"id": f"case-{k}", "input": f"é {k}", "target": []} for k in range(9)]


def stored(folder: Path, entries: list[dict], blank: bool = False) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "dataset.jsonl"
    normalised = dataset_from_entries(entries).entries()
    write_jsonl_atomic(path, normalised)
    if blank:  # a blank line, which a dataset file may hold
        path.write_bytes(path.read_bytes() + b"\n")
    return path


@pytest.fixture(params=[stored_module.BLOCK, 7, 150])
def block(request, monkeypatch) -> int:
    """The bytes read at once: blocks of whole lines, or of a line's part (7 bytes)."""
    monkeypatch.setattr(stored_module, "BLOCK", request.param)
    return request.param


@pytest.mark.parametrize("entries", [ENTRIES, STRING_IDS], ids=["line by line", "at once"])
def test_it_reads_as_the_dataset_parsed_whole(tmp_path, block, entries):
    path = stored(tmp_path, entries, blank=entries is ENTRIES)
    whole = dataset_from_entries(json.loads(line) for line in path.read_text().splitlines()
                                 if line.strip())  # fmt: skip
    lazy = StoredDataset(path, "run/dataset.jsonl")
    assert len(lazy) == len(whole) == len(entries)
    assert lazy.ids() == whole.ids() == [str(e.get("id", k)) for k, e in enumerate(entries)]
    assert lazy.take(range(len(entries))) == whole.samples
    assert [s.index for s in lazy.take([5, 0])] == [5, 0]
    assert lazy.sample(whole.samples[2].sample_id) == whole.samples[2]
    assert lazy.sample("none") is None
    assert lazy.own_tools() == whole.own_tools()
    assert lazy.samples == whole.samples
    # the stored form's sha256: the file's bytes, as the entries would be written
    assert lazy.sha256_stored() == hashlib.sha256(path.read_bytes()).hexdigest()
    plain = stored(tmp_path / "plain", entries)
    assert whole.sha256_stored() == StoredDataset(plain, "plain").sha256_stored()
    assert (whole.own_tools() is None) == (entries is STRING_IDS)
    assert whole.sha256_stored() == hashlib.sha256(plain.read_bytes()).hexdigest()


def test_the_built_in_dataset_reads_the_same(tmp_path):
    whole = load_inputs("tool-call").dataset
    path = tmp_path / "dataset.jsonl"
    write_jsonl_atomic(path, whole.entries())
    lazy = StoredDataset(path, "run/dataset.jsonl")
    assert lazy.ids() == whole.ids()
    assert lazy.take(range(len(whole))) == whole.samples
    assert lazy.sha256_stored() == whole.sha256_stored()
    assert lazy.own_tools() is None


def test_only_the_entries_asked_for_are_parsed(tmp_path, monkeypatch):
    path = stored(tmp_path, ENTRIES)
    parsed: list[int] = []
    real = stored_module.entry_sample

    def counting(entry, index, label, where):
        parsed.append(index)
        return real(entry, index, label, where)

    monkeypatch.setattr(stored_module, "entry_sample", counting)
    monkeypatch.setattr(stored_module, "dataset_from_entries", None)  # never parsed whole
    lazy = StoredDataset(path, "run/dataset.jsonl")
    assert parsed == []
    lazy.take([2])
    lazy.sample("70")
    assert parsed == [2, 0]


def test_repeated_ids_and_broken_lines_are_refused(tmp_path):
    path = tmp_path / "dataset.jsonl"
    line = json.dumps({"id": "a", "input": "x", "target": []})
    path.write_text(f"{line}\n{line}\n")
    with pytest.raises(
        DatasetError, match=r"^run/dataset.jsonl: entry 1: duplicate id 'a' \(also entry 0\)"
    ):
        StoredDataset(path, "run/dataset.jsonl")
    # bytes that are no UTF-8 in an id: the entry that holds them is named
    path.write_bytes(f"{line}\n".encode() + b'{"id": "b\xff", "input": "x", "target": []}\n')
    with pytest.raises(StoreError, match="unreadable dataset file: entry 1: 'utf-8'"):
        StoredDataset(path, "run/dataset.jsonl")
    path.write_text(f"{line}\n{{not json\n")
    with pytest.raises(StoreError, match="unreadable dataset file: entry 1"):
        StoredDataset(path, "run/dataset.jsonl")
    path.write_text("\n")
    with pytest.raises(DatasetError, match="no entries"):
        StoredDataset(path, "run/dataset.jsonl")
    with pytest.raises(StoreError, match="unreadable dataset file"):
        StoredDataset(tmp_path / "missing.jsonl", "run/dataset.jsonl")
