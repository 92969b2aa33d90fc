"""A recorded run's message texts by ``sample_index``, read a slice of samples at a time from
the row groups of ``messages.parquet`` that hold them (:class:`~tcbreplay._store.export.Slices`),
the texts last read kept up to a size; and where each sample's first messages lie, from the
messages' types and positions alone (:class:`Layout`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tcbreplay._store.export import Slices

# samples whose messages are read together (a range of sample_index): a replay asks for its
# samples about in order, and the row groups that hold a slice are read once for all of it
SLICE_SAMPLES = 4096
# message text kept read (characters), the most recently read kept
CACHE_BYTES = 64 * 2**20
# rows of row groups that reach past a slice, kept for the next slices (Slices.read)
KEEP_BYTES = 256 * 2**20


@dataclass
class Layout:
    """Where a run's samples' first messages lie, per ``sample_index``, from the types and
    positions of its messages (not their texts)."""

    turns: int  # the AI messages of the run's samples
    first: Any  # the position of the sample's first stored message (-1: it has none)
    first_is_system: Any  # whether that message is a system message
    lead: Any  # the position of its first message that is not a system one (-1: none)
    first_ai: Any  # the position of its first AI message (-1: none)


class MessageTexts:
    """A run's message texts by ``sample_index``, read a slice of :data:`SLICE_SAMPLES`
    samples at a time (only the row groups whose statistics hold some of the slice); those
    last read are kept, up to :data:`CACHE_BYTES` characters."""

    def __init__(self, path: Any) -> None:
        self.path = path
        self._reader = self._open()  # here: a file that cannot be read fails the load
        self._pid = os.getpid()
        self._cache: OrderedDict[int, list[str]] = OrderedDict()
        self._size = 0

    def _open(self) -> Slices:
        return Slices(self.path, ["sample_index", "position", "message"], keep_bytes=KEEP_BYTES)

    def reader(self) -> Slices:
        """The file, opened again in a forked process (which shares no reader's state)."""
        if self._pid != os.getpid():
            self._reader, self._pid = self._open(), os.getpid()
        return self._reader

    def texts(self, index: int) -> list[str]:
        """The texts of the messages of ``sample_index`` (by position)."""
        found = self._cache.get(index)
        if found is not None:
            self._cache.move_to_end(index)
            return found
        lo = index - index % SLICE_SAMPLES
        read = _grouped(self.reader().read((lo, lo + SLICE_SAMPLES)))
        # a sample without messages is not read again for as long as its slice is kept
        self._keep({i: read.get(i, []) for i in range(lo, lo + SLICE_SAMPLES)})
        return read.get(index, [])

    def prefetch(self, indexes: list[int]) -> None:
        """Read the texts of these samples not kept yet at once."""
        missing = [i for i in indexes if i not in self._cache]
        if missing:
            read = _grouped(self.reader().read_indices(missing))
            self._keep({i: read.get(i, []) for i in missing})

    def _keep(self, read: dict[int, list[str]]) -> None:
        """Keep what was just read, whole, and of what was read before as much as
        :data:`CACHE_BYTES` leaves room for (a slice larger than that is not read again for
        each of its samples)."""
        for index, texts in read.items():
            old = self._cache.pop(index, None)
            if old is not None:
                self._size -= _size(old)
            self._cache[index] = texts
            self._size += _size(texts)
        while self._size > CACHE_BYTES and len(self._cache) > len(read):
            _, texts = self._cache.popitem(last=False)
            self._size -= _size(texts)

    def every_slice(self, last: int) -> Iterator[dict[int, list[str]]]:
        """The texts of every sample_index up to ``last``, a slice at a time (not kept)."""
        for lo in range(0, last + 1, SLICE_SAMPLES):
            yield _grouped(self.reader().read((lo, lo + SLICE_SAMPLES)))

    def layout(self, last: int) -> Layout:
        """The :class:`Layout` of sample_index 0 to ``last``, from each row group's
        sample_index, position and type."""
        import numpy as np
        import pyarrow.compute as pc

        size = last + 1
        none = np.iinfo(np.int64).max
        first = np.full(size, none, np.int64)  # position * 2, + 1 unless a system message
        lead = np.full(size, none, np.int64)
        first_ai = np.full(size, none, np.int64)
        ai = np.zeros(size, np.int64)
        for table in self.reader().batches(["sample_index", "position", "type"]):
            index, position = _numbers(table)
            kinds = pc.fill_null(table["type"], "")
            system = pc.equal(kinds, "system").to_numpy(zero_copy_only=False)
            ours = (index >= 0) & (index < size) & (position >= 0)
            np.minimum.at(first, index[ours], position[ours] * 2 + ~system[ours])
            other = ours & ~system
            np.minimum.at(lead, index[other], position[other])
            answers = ours & pc.equal(kinds, "ai").to_numpy(zero_copy_only=False)
            ai += np.bincount(index[answers], minlength=size)
            np.minimum.at(first_ai, index[answers], position[answers])
        has = first != none
        return Layout(
            turns=int(ai.sum()),
            first=np.where(has, first // 2, -1),
            first_is_system=has & (first % 2 == 0),
            lead=np.where(lead != none, lead, -1),
            first_ai=np.where(first_ai != none, first_ai, -1),
        )

    def heads(self, upto: Any) -> dict[int, list[str]]:
        """The texts of each sample_index's messages at positions up to ``upto[index]``
        (by position): only the row groups that hold one are read, and of those only the
        texts' column is read beside sample_index and position."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        found: dict[int, list[tuple[int, str]]] = {}
        reader = self.reader()
        for k in range(reader.row_groups):
            index, position = _numbers(reader.read_group(k, ["sample_index", "position"]))
            ours = np.flatnonzero((index >= 0) & (index < len(upto)))
            ours = ours[position[ours] <= upto[index[ours]]]
            if not len(ours):
                continue
            texts = pc.fill_null(reader.read_group(k, ["message"])["message"], "null")
            taken = texts.take(pa.array(ours)).to_pylist()
            for i, p, text in zip(index[ours].tolist(), position[ours].tolist(), taken,
                                  strict=True):  # fmt: skip
                found.setdefault(i, []).append((p, text))
        return {i: [t for _, t in sorted(rows, key=lambda r: r[0])] for i, rows in found.items()}


def _numbers(table: Any) -> tuple[Any, Any]:
    """A table's sample_index and position as numpy arrays (-1 where null)."""
    import numpy as np
    import pyarrow.compute as pc

    return tuple(  # type: ignore[return-value]
        np.asarray(pc.fill_null(table[c], -1).to_numpy(), dtype=np.int64)
        for c in ("sample_index", "position")
    )


def _grouped(table: Any) -> dict[int, list[str]]:
    """Message rows (sample_index, position, message) as each sample_index's texts, by
    position (a null message as ``null``)."""
    import numpy as np
    import pyarrow.compute as pc

    table = table.sort_by([("sample_index", "ascending"), ("position", "ascending")])
    if not table.num_rows:
        return {}
    index = np.asarray(table["sample_index"].to_numpy(), dtype=np.int64)
    texts = pc.fill_null(table["message"], "null").to_pylist()
    starts = np.flatnonzero(np.r_[True, np.diff(index) != 0]).tolist()
    ends = [*starts[1:], len(index)]
    return {int(index[a]): texts[a:b] for a, b in zip(starts, ends, strict=True)}


def _size(texts: list[str]) -> int:
    return 64 + sum(len(t) for t in texts)
