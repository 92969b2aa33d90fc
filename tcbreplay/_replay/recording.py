"""A recorded run as answers: each AI turn of each sample and trial under its request's
fingerprint, and what its tools answered.

The request of a recorded AI turn is rebuilt from the store: the run's system prompt (or the
system messages the sample's messages start with, as imported runs keep them), every
message before the turn in the sample, the run's tools (or the sample's own) and the model's
sampling settings (:mod:`tcbreplay._replay.fingerprint`). That is the request an agent sends
that gives the model its whole conversation, as LangChain's agents do; an agent that sends
less (a summary of the history) asks something else, and diverges.

Memory stays flat however long the run: loading reads the run's message texts once, in
record batches, into a temporary file (unlinked at once: it goes with the process, and
forked workers read it too), and keeps only where each one lies. A sample's messages, and
its turns' fingerprints, are read back when it is asked for (a replay asks when it starts
the sample), and the last :data:`CACHED` samples read are kept. A lookup without a sample
(``serve``, the recorded model outside a replay) needs every turn's fingerprint: those are
indexed once, on the first such lookup (:meth:`RecordedRun.index`). Canonical requests are
rebuilt when a request finds no turn, to say where it differs.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tcbreplay._replay.divergence import Divergence, describe, distance
from tcbreplay._replay.fingerprint import (
    Request,
    assistant_turns,
    canonical_json,
    canonical_messages,
    canonical_params,
    canonical_tools,
    normalized,
    request_text,
    sha256_text,
)
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import MESSAGES_SCHEMA, SAMPLES_SCHEMA, with_optional_columns
from tcbreplay.errors import StoreError, read_error

# (sample id, trial)
Key = tuple[str, int]
# providers whose runs record no sampling settings a request carried
_NO_PARAMS = ("import",)
# how many samples a request without its sample is compared with, to say where it differs
_NEAREST_SAMPLES = 200
# samples kept read (more than a replay runs at once)
CACHED = 1024
# message texts read per batch while loading
_BATCH_ROWS = 8192


@dataclass(frozen=True)
class Turn:
    """A recorded AI turn: its number in the sample (the assistant messages before it), its
    message's position among the sample's stored messages, and its request's fingerprint."""

    turn: int
    position: int
    fingerprint: str


@dataclass
class SampleRecording:
    """One recorded sample (and trial): its stored messages and AI turns."""

    texts: list[str]  # the stored message JSON, by position
    turns: list[Turn]
    tools: dict[str, Any] | None = None  # the sample's own tools (canonical), or the run's
    status: str = "ok"

    def message(self, position: int) -> dict[str, Any]:
        return json.loads(self.texts[position])

    def first_human(self) -> str | None:
        """The text of the sample's first user message (None if it has none, or parts)."""
        for text in self.texts:
            data = json.loads(text)
            if data.get("type") == "human":
                found = (data.get("data") or {}).get("content")
                return found if isinstance(found, str) else None
        return None


@dataclass
class ToolOutput:
    """What a recorded tool call answered."""

    name: str
    arguments: Any
    content: Any
    status: str | None
    position: int


@dataclass
class _Row:
    """What is kept of a sample until it is read: its own tools (JSON text), its status, and
    where its messages lie (``first``: its first entry in the sorted message order)."""

    tools: str | None
    status: str
    first: int = 0
    count: int = 0


class _Samples(Mapping[Key, SampleRecording]):
    """A run's samples by (sample id, trial), each read when it is looked up."""

    def __init__(self, run: RecordedRun) -> None:
        self._run = run

    def __getitem__(self, key: Key) -> SampleRecording:
        return self._run.sample(key)

    def __contains__(self, key: object) -> bool:
        return key in self._run._rows

    def __iter__(self) -> Iterator[Key]:
        return iter(self._run._rows)

    def __len__(self) -> int:
        return len(self._run._rows)


@dataclass(eq=False)
class RecordedRun:
    """A stored run, indexed for replay (see the module)."""

    run_id: str
    system: str
    tools: dict[str, Any]
    params: dict[str, Any]
    params_known: bool
    _rows: dict[Key, _Row] = field(default_factory=dict, repr=False)
    _texts: _Texts | None = field(default=None, repr=False)
    _cache: OrderedDict[Key, SampleRecording] = field(default_factory=OrderedDict, repr=False)
    _index: dict[str, list[tuple[Key, Turn]]] | None = field(default=None, repr=False)
    # each sample's first canonical message (JSON text), read with the index
    _firsts: dict[Key, str] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, run: Run) -> RecordedRun:
        """Index a run of the store (its Parquet files: a recording still under way is read
        as far as it was folded)."""
        manifest = run.manifest
        model = manifest.get("model") or {}
        known = model.get("provider") not in _NO_PARAMS
        settings = model.get("effective_settings") or model.get("settings") or {}
        params = canonical_params(settings) if known and model.get("provider") != "sim" else {}
        schemas = (manifest.get("tools") or {}).get("specs") or []
        out = cls(
            run_id=run.run_id,
            system=str((manifest.get("system_prompt") or {}).get("text") or ""),
            tools=canonical_tools(schemas),
            params=params,
            params_known=known,
        )
        if not run.has_data():
            raise StoreError(f"run {run.run_id!r} has no stored samples to replay")
        out._rows, out._texts = _read(run)
        return out

    @property
    def samples(self) -> Mapping[Key, SampleRecording]:
        """Every sample and trial, each read when looked up (see the module)."""
        return _Samples(self)

    def sample(self, key: Key) -> SampleRecording:
        """A sample and trial as recorded (KeyError if the run has none such)."""
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        found = self._read_sample(key)
        self._cache[key] = found
        if len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return found

    def texts(self, key: Key, limit: int | None = None) -> list[str]:
        """A sample's stored message texts (its first ``limit`` only, when given)."""
        row = self._rows[key]
        assert self._texts is not None
        count = row.count if limit is None else min(limit, row.count)
        return self._texts.read(row.first, count)

    def _read_sample(self, key: Key) -> SampleRecording:
        row = self._rows[key]
        own = _own_tools(row.tools)
        texts = self.texts(key)
        tools_json = canonical_json(self.tools if own is None else own)
        system, items, _ = canonical_messages((json.loads(t) for t in texts), self.system)
        lead = len(texts) - len(items)
        system_json = canonical_json(system)
        params_json = canonical_json(self.params)
        parts = [canonical_json(item) for item in items]
        turns: list[Turn] = []
        for k, item in enumerate(items):
            if item["role"] != "assistant":
                continue
            text = request_text(parts[:k], params_json, system_json, tools_json)
            turns.append(Turn(len(turns), k + lead, sha256_text(text)))
        return SampleRecording(texts, turns, own, row.status)

    def index(self) -> dict[str, list[tuple[Key, Turn]]]:
        """Every recorded turn by its request's fingerprint (built on the first call, by
        reading each sample once; a replay, which looks up within a sample, never needs
        it)."""
        if self._index is None:
            index: dict[str, list[tuple[Key, Turn]]] = {}
            for key in self._rows:
                sample = self._cache.get(key) or self._read_sample(key)
                for turn in sample.turns:
                    index.setdefault(turn.fingerprint, []).append((key, turn))
                self._firsts[key] = self._first(sample.texts)
            self._index = index
        return self._index

    def _first(self, texts: list[str]) -> str:
        """The canonical JSON of the first message (after the system prompt) of ``texts``."""
        _, items, _ = canonical_messages((json.loads(t) for t in texts[:3]), self.system)
        return canonical_json(items[0]) if items else ""

    def tools_of(self, key: Key | None) -> dict[str, Any]:
        sample = self.samples.get(key) if key else None
        return sample.tools if sample is not None and sample.tools is not None else self.tools

    def lookup(self, fingerprint: str, key: Key | None = None) -> tuple[Key, Turn] | None:
        """The recorded turn asked for by a request of this fingerprint: of the sample and
        trial ``key`` only when given, else the first of any sample's."""
        if key is not None:
            sample = self.samples.get(key)
            if sample is None:
                return None
            return next(((key, t) for t in sample.turns if t.fingerprint == fingerprint), None)
        found = self.matches(fingerprint)
        return found[0] if found else None

    def matches(self, fingerprint: str) -> list[tuple[Key, Turn]]:
        """Every recorded turn (of any sample and trial) asked for by a request of this
        fingerprint, in the run's order."""
        return self.index().get(fingerprint) or []

    def requests(self, key: Key) -> Iterator[Request]:
        """The canonical requests of a sample's recorded turns, in order."""
        sample = self.samples.get(key)
        if sample is None:
            return
        system, items, _ = canonical_messages((json.loads(t) for t in sample.texts), self.system)
        tools = self.tools_of(key)
        for k, item in enumerate(items):
            if item["role"] == "assistant":
                yield {"system": system, "messages": items[:k], "tools": tools,
                       "params": self.params}  # fmt: skip

    def divergence(self, request: Request, key: Key | None, component: Any = None) -> Divergence:
        """Where ``request``, which no recorded turn answers, first differs from the nearest
        recorded request (of its sample when ``key`` is given, else of samples that start
        as it does). ``component(path)`` may name the component of a path (tool_output)."""
        return self.nearest(request, key, component)[1]

    def nearest(
        self, request: Request, key: Key | None, component: Any = None
    ) -> tuple[tuple[Key, int] | None, Divergence]:
        """The nearest recorded request to ``request`` (its sample and trial, and turn; None
        when there is none to compare with) and where ``request`` first differs from it
        (see :meth:`divergence`)."""
        turn = assistant_turns(request["messages"])
        keys = [key] if key is not None else self._similar(request)
        best: tuple[Key, int] | None = None
        found: Request | None = None
        best_distance = None
        for k in keys:
            for number, recorded in enumerate(self.requests(k)):
                here = distance(recorded, request)
                if best_distance is None or here < best_distance:
                    best, found, best_distance = (k, number), recorded, here
        divergence = describe(turn, found, request)
        if component is not None and divergence.component == "messages":
            named = component(divergence.path)
            if named:
                divergence = Divergence(turn, named, divergence.path, divergence.recorded,
                                        divergence.replayed)  # fmt: skip
        return best, divergence

    def _similar(self, request: Request) -> list[Key]:
        """The samples a request without its sample is compared with: those whose first
        message is the request's, else those whose first message's text is the closest
        to it (edit distance), at most :data:`_NEAREST_SAMPLES`."""
        from rapidfuzz import fuzz, process

        if not self._firsts:
            for key in self._rows:
                self._firsts[key] = self._first(self.texts(key, 3))
        messages = request["messages"]
        first = canonical_json(messages[0]) if messages else ""
        same = [key for key, text in self._firsts.items() if text == first]
        if same:
            return same[:_NEAREST_SAMPLES]
        keys = list(self._firsts)
        found = process.extract(first, list(self._firsts.values()), scorer=fuzz.ratio,
                                limit=_NEAREST_SAMPLES // 10)  # fmt: skip
        return [keys[i] for _, _, i in sorted(found, key=lambda hit: (-hit[1], hit[2]))]

    def first_messages(self) -> Iterator[tuple[Key, dict[str, Any] | None]]:
        """Each sample's first stored message (None where it has none), without reading
        the rest."""
        for key in self._rows:
            texts = self.texts(key, 1)
            yield key, json.loads(texts[0]) if texts else None

    def tool_outputs(self, key: Key) -> tuple[dict[str, ToolOutput], dict[int, ToolOutput]]:
        """A sample's recorded tool outputs by call id, and by position."""
        by_id: dict[str, ToolOutput] = {}
        by_position: dict[int, ToolOutput] = {}
        sample = self.samples.get(key)
        if sample is None:
            return by_id, by_position
        calls: dict[str, tuple[str, Any]] = {}
        for position, text in enumerate(sample.texts):
            message = json.loads(text)
            data = message.get("data") or {}
            if message.get("type") == "ai":
                for call in data.get("tool_calls") or []:
                    if call.get("id"):
                        calls[str(call["id"])] = (str(call.get("name") or ""), call.get("args"))
            elif message.get("type") == "tool":
                call_id = data.get("tool_call_id")
                name, args = calls.get(str(call_id), (str(data.get("name") or ""), None))
                output = ToolOutput(name, args, data.get("content"), data.get("status"), position)
                by_position[position] = output
                if call_id:
                    by_id[str(call_id)] = output
        return by_id, by_position


class ToolPool:
    """A sample's recorded tool outputs, served by tool name and arguments: as a multiset,
    each output once, the outputs of equal calls in their recorded order."""

    def __init__(self, outputs: list[ToolOutput]) -> None:
        self._free: dict[tuple[str, str], deque[ToolOutput]] = {}
        for output in sorted(outputs, key=lambda o: o.position):
            self._free.setdefault(call_key(output.name, output.arguments), deque()).append(output)

    def take(self, name: str, arguments: Any) -> ToolOutput | None:
        queue = self._free.get(call_key(name, arguments))
        return queue.popleft() if queue else None


def call_key(name: str, arguments: Any) -> tuple[str, str]:
    """A tool call as the pool knows it: its name and canonical arguments."""
    return name, canonical_json(normalized(arguments if arguments is not None else {}))


def _own_tools(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    schemas = json.loads(text)
    return canonical_tools(schemas) if isinstance(schemas, list) else None


class _Texts:
    """Message texts in a temporary file (unlinked: see the module), read back by their
    place in an order of (sample, position)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="tcbreplay-recording-")  # noqa: SIM115 (kept open)
        self._size = 0
        # per entry of the sorted order: the text's offset and length in the file
        self.offsets: Any = None
        self.lengths: Any = None

    def append(self, array: Any) -> tuple[Any, Any]:
        """Write an Arrow string array's texts (nulls as ``null``); their offsets and
        lengths in the file."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if array.null_count:
            array = pc.fill_null(array, "null")
        if not pa.types.is_large_string(array.type):
            array = array.cast(pa.large_string())
        _, offsets_buffer, data = array.buffers()
        ends = np.frombuffer(offsets_buffer, dtype=np.int64)[
            array.offset : array.offset + len(array) + 1
        ]
        start, stop = int(ends[0]), int(ends[-1])
        self._file.write(memoryview(data)[start:stop])
        offsets = ends[:-1] - start + self._size
        self._size += stop - start
        return offsets, np.diff(ends)

    def read(self, first: int, count: int) -> list[str]:
        fd = self._file.fileno()
        out = []
        for i in range(first, first + count):
            length = int(self.lengths[i])
            out.append(os.pread(fd, length, int(self.offsets[i])).decode("utf-8") if length else "")
        return out

    def finish(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _read(run: Run) -> tuple[dict[Key, _Row], _Texts]:
    """The run's samples (own tools, status, where their messages lie) and its message
    texts, written to a temporary file batch by batch."""
    import numpy as np
    import pyarrow as pa

    from tcbreplay._store.parquet import parquet_file, read_table

    texts = _Texts()
    try:
        samples = with_optional_columns(
            read_table(run.samples_path, columns=_present(run.samples_path,
                          ["sample_id", "trial", "tools", "status"])),
            SAMPLES_SCHEMA,
        )  # fmt: skip
        keys = with_optional_columns(
            read_table(run.messages_path,
                          columns=_present(run.messages_path, ["sample_id", "trial", "position"])),
            MESSAGES_SCHEMA,
        )  # fmt: skip
        offsets, lengths = [], []
        messages = parquet_file(run.messages_path)
        for batch in messages.iter_batches(batch_size=_BATCH_ROWS, columns=["message"]):
            where, length = texts.append(batch.column(0))
            offsets.append(where)
            lengths.append(length)
        texts.finish()
    except (OSError, ValueError, pa.ArrowException) as exc:
        texts.close()
        raise read_error(run.dir, exc, "its samples") from exc
    rows: dict[Key, _Row] = {}
    for row in samples.to_pylist():
        rows[(row["sample_id"], row["trial"])] = _Row(row.get("tools"), row.get("status") or "ok")
    # each message's sample as a number (by sample id, then trial), then the sorted order
    ids = keys["sample_id"].combine_chunks().dictionary_encode()
    codes = np.asarray(ids.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    trials = np.asarray(keys["trial"].to_numpy(), dtype=np.int64)
    positions = np.asarray(keys["position"].to_numpy(), dtype=np.int64)
    order = np.lexsort((positions, trials, codes))
    texts.offsets = np.concatenate(offsets)[order] if offsets else np.zeros(0, np.int64)
    texts.lengths = np.concatenate(lengths)[order] if lengths else np.zeros(0, np.int64)
    names = ids.dictionary.to_pylist()
    sorted_codes, sorted_trials = codes[order], trials[order]
    if len(order):
        starts = np.flatnonzero(
            np.r_[True, (np.diff(sorted_codes) != 0) | (np.diff(sorted_trials) != 0)]
        )
        counts = np.diff(np.r_[starts, len(order)])
        for start, count in zip(starts.tolist(), counts.tolist(), strict=True):
            found = rows.get((names[int(sorted_codes[start])], int(sorted_trials[start])))
            if found is not None:
                found.first, found.count = start, count
    return rows, texts


def _present(path: Any, columns: list[str]) -> list[str]:
    from tcbreplay._store.parquet import read_schema

    names = read_schema(path).names
    return [c for c in columns if c in names]
