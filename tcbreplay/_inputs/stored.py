"""A run's stored dataset (its ``dataset.jsonl``), read as it is asked for.

One pass over the file finds each entry's id and place, and the file's sha256; an entry is
parsed into a :class:`Sample` only when asked for. So a replay of a few samples of a run of
a million costs the pass (about a second) and those samples, not a million samples in
memory. ``samples`` (every entry, parsed once) serves the callers that want them all.

The file is the normalised shape tcbreplay writes (``{"id": ..., "input": ...}``, one entry a
line): the ids are read from the lines' starts, a block of lines at once (by one regular
expression, the lines' places by numpy), and a line that does not start so is parsed whole.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._inputs.benchmarks import read_dataset_file
from tcbreplay._inputs.dataset import Dataset, Sample, dataset_from_entries, entry_sample
from tcbreplay.errors import DatasetError, StoreError

# how a normalised entry starts: with its id, here a string (a block whose every line
# starts so, with no escape in its id, is read by one search)
_ID_KEY = b'{"id": '
_STRING_ID = _ID_KEY + b'"'
_STRING_IDS = re.compile(rb'\n\{"id": "([^"\\\n]*)"')
# the bytes of the file read at once (a block of whole lines)
BLOCK = 1 << 23
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
        self._ids, self._offsets, self._stored_sha256, self._maybe_tools = _scan(path, label)
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
                    f.seek(int(self._offsets[k]))
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


def _scan(path: Path, label: str) -> tuple[list[str], Any, str, list[int]]:
    """The file's ids and the places of their lines, in order; its sha256; the positions of
    the entries that may have tools of their own. Ids repeated are refused, as a dataset
    refuses them."""
    import numpy as np

    ids: list[str] = []
    offsets: list[Any] = []
    maybe_tools: list[int] = []
    digest = hashlib.sha256()
    place = 0
    try:
        with path.open("rb") as f:
            for block in _blocks(f):
                digest.update(block)
                offsets.append(place + _block_lines(block, ids, maybe_tools))
                place += len(block)
    except OSError as exc:
        raise StoreError(f"{path}: unreadable dataset file: {exc}") from exc
    except ValueError as exc:  # (UnicodeDecodeError and JSONDecodeError among them)
        raise StoreError(f"{path}: unreadable dataset file: entry {len(ids)}: {exc}") from exc
    if len(set(ids)) < len(ids):
        seen: dict[str, int] = {}
        for k, sample_id in enumerate(ids):
            if sample_id in seen:
                raise DatasetError(
                    f"{label}: entry {k}: duplicate id {sample_id!r} (also entry {seen[sample_id]})"
                )
            seen[sample_id] = k
    places = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    return ids, places, digest.hexdigest(), maybe_tools


def _blocks(f: Any) -> Iterator[bytes]:
    """The file in blocks of whole lines (of about BLOCK bytes; the last may not end in a
    newline)."""
    rest = b""
    while chunk := f.read(BLOCK):
        block = rest + chunk
        cut = block.rfind(b"\n") + 1
        if cut:
            yield block[:cut]
        rest = block[cut:]
    if rest:
        yield rest


def _block_lines(block: bytes, ids: list[str], maybe_tools: list[int]) -> Any:
    """Add the ids of the entries in ``block`` (whole lines) to ``ids`` (and to
    ``maybe_tools`` those that may have tools of their own); the places of their lines in the
    block. Read as one when every line starts with a string id without escapes, and none
    holds a key named tools (a million lines in a second); else line by line."""
    import numpy as np

    newlines = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    starts = np.concatenate(([0], newlines + 1))
    starts = starts[starts < len(block)]
    found = _STRING_IDS.findall(b"\n" + block)
    if len(found) == len(starts) and _TOOLS not in block:
        try:
            ids.extend(b"\n".join(found).decode("utf-8").split("\n"))
            return starts
        except UnicodeDecodeError:  # read line by line below, which names the entry
            pass
    places = []
    place = 0
    for line in io.BytesIO(block):
        if line.strip():
            if _TOOLS in line:
                maybe_tools.append(len(ids))
            places.append(place)
            ids.append(_line_id(line, len(ids)))
        place += len(line)
    return np.array(places, np.int64)


def _line_id(line: bytes, index: int) -> str:
    """The sample id of entry ``index`` (its line): read from the line's start, else the
    line parsed whole (an entry without an id is its position)."""
    if line.startswith(_STRING_ID):
        raw = line[len(_STRING_ID) : line.find(b'"', len(_STRING_ID))]
        if b"\\" not in raw:
            return raw.decode("utf-8")
    elif line.startswith(_ID_KEY):
        raw = line[len(_ID_KEY) : line.find(b",", len(_ID_KEY))]
        if raw.isdigit() and (raw[:1] != b"0" or raw == b"0"):
            return raw.decode("ascii")
    entry: Any = _json.loads(line)
    sample_id = entry.get("id", index) if isinstance(entry, dict) else index
    return str(sample_id)
