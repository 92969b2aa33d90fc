"""A run's stored dataset (its ``dataset.jsonl``), read as it is asked for.

One pass over the file finds each entry's id and place, and the file's sha256; an entry is
parsed into a :class:`Sample` only when asked for. So a replay of a few samples of a run of
a million costs the pass (about a second) and those samples, not a million samples in
memory. ``samples`` (every entry, parsed once) serves the callers that want them all.

The file is the normalised shape tcbreplay writes (``{"id": ..., "input": ...}``, one entry a
line): an entry's id is read from the start of its line, and a line that does not start so
is parsed whole.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._inputs.benchmarks import read_dataset_file
from tcbreplay._inputs.dataset import Dataset, Sample, dataset_from_entries, entry_sample
from tcbreplay.errors import DatasetError, StoreError

# how a normalised entry starts: with its id, here a string
_ID = b'{"id": '
_STRING_ID = _ID + b'"'
# a line that may give the entry tools of its own (parsed to tell: the key may be nested)
_TOOLS = b'"tools":'


class StoredDataset(Dataset):
    """The dataset of a run's ``dataset.jsonl`` (see the module); ``source`` and ``sha256``
    are the run's (its manifest's), ``label`` names the file in errors."""

    def __init__(self, path: Path, label: str, source: str | None = None,
                 sha256: str | None = None) -> None:  # fmt: skip
        # (Dataset's fields are properties here: no call to its __init__)
        self.path = path
        self.label = label
        self.source = source or label
        self.sha256 = sha256
        self._ids, self._offsets, self._stored_sha256, self._maybe_tools = _scan(path)
        if not self._ids:
            raise DatasetError(f"{label}: the dataset has no entries")
        self._all: list[Sample] | None = None
        self._positions: dict[str, int] | None = None

    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]
        """Every sample, parsed once (as :func:`dataset_from_entries` parses them)."""
        if self._all is None:
            entries = read_dataset_file(self.path)
            self._all = dataset_from_entries(entries, self.label).samples
        return self._all

    @property
    def by_id(self) -> dict[str, Sample]:  # type: ignore[override]
        return {s.sample_id: s for s in self.samples}

    def __repr__(self) -> str:
        return f"StoredDataset({str(self.path)!r}, {len(self)} entries)"

    def __len__(self) -> int:
        return len(self._ids)

    def for_run(self) -> Path:
        return self.path

    def ids(self) -> list[str]:
        return self._ids

    def take(self, positions: Iterable[int]) -> list[Sample]:
        if self._all is not None:
            return [self._all[k] for k in positions]
        out = []
        try:
            with self.path.open("rb") as f:
                for k in positions:
                    f.seek(self._offsets[k])
                    out.append(self._parse(k, f.readline()))
        except OSError as exc:
            raise StoreError(f"{self.path}: unreadable dataset file: {exc}") from exc
        return out

    def sample(self, sample_id: str) -> Sample | None:
        if self._positions is None:
            self._positions = {sample_id: k for k, sample_id in enumerate(self._ids)}
        k = self._positions.get(sample_id)
        return None if k is None else self.take([k])[0]

    def own_tools(self) -> Sample | None:
        return next((s for s in self.take(self._maybe_tools) if s.tools is not None), None)

    def sha256_stored(self) -> str:
        """sha256 of the file's bytes (the dataset as a run stores it)."""
        return self._stored_sha256

    def _parse(self, k: int, line: bytes) -> Sample:
        try:
            entry = _json.loads(line)
        except ValueError as exc:
            raise StoreError(f"{self.path}: unreadable dataset file: entry {k}: {exc}") from exc
        return entry_sample(entry, k, self.label, f"entry {k}")


def _scan(path: Path) -> tuple[list[str], array[int], str, list[int]]:
    """The file's ids and the places of their lines, in order; its sha256; the positions of
    the entries that may have tools of their own. Ids repeated are refused, as a dataset
    refuses them."""
    ids: list[str] = []
    offsets: array[int] = array("q")
    maybe_tools: list[int] = []
    digest = hashlib.sha256()
    place = 0
    try:
        with path.open("rb") as f:
            for line in f:
                digest.update(line)
                if line.startswith(_STRING_ID):  # (the line is kept bytes: a third as dear)
                    end = line.find(b'"', len(_STRING_ID))
                    raw = line[len(_STRING_ID) : end]
                    sample_id = None if b"\\" in raw else raw.decode("utf-8")
                elif line.startswith(_ID) and line[len(_ID) : len(_ID) + 1].isdigit():
                    raw = line[len(_ID) : line.find(b",", len(_ID))]
                    sample_id = str(int(raw)) if raw.isdigit() and raw[:1] != b"0" else None
                elif not line.strip():
                    place += len(line)
                    continue
                else:
                    sample_id = None
                if _TOOLS in line:
                    maybe_tools.append(len(ids))
                offsets.append(place)
                ids.append(sample_id if sample_id is not None else _line_id(line, len(ids)))
                place += len(line)
    except OSError as exc:
        raise StoreError(f"{path}: unreadable dataset file: {exc}") from exc
    except ValueError as exc:  # (UnicodeDecodeError and JSONDecodeError among them)
        raise StoreError(f"{path}: unreadable dataset file: entry {len(ids)}: {exc}") from exc
    if len(set(ids)) < len(ids):
        seen: dict[str, int] = {}
        for k, sample_id in enumerate(ids):
            if sample_id in seen:
                raise DatasetError(
                    f"{path}: entry {k}: duplicate id {sample_id!r} (also entry {seen[sample_id]})"
                )
            seen[sample_id] = k
    return ids, offsets, digest.hexdigest(), maybe_tools


def _line_id(line: bytes, index: int) -> str:
    """The sample id of entry ``index`` (its line) parsed whole (an entry without an id is
    its position)."""
    entry: Any = _json.loads(line)
    sample_id = entry.get("id", index) if isinstance(entry, dict) else index
    return str(sample_id)
