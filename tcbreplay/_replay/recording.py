"""A recorded run as answers: each AI turn of each sample and trial under its request's
fingerprint, and what its tools answered.

The request of a recorded AI turn is rebuilt from the store: the run's system prompt (or the
system messages the sample's messages start with, as imported runs keep them), every
message before the turn in the sample, the run's tools (or the sample's own) and the model's
sampling settings (:mod:`tcbreplay._replay.fingerprint`). That is the request an agent sends
that gives the model its whole conversation, as LangChain's agents do; an agent that sends
less (a summary of the history) asks something else, and diverges.

Only what a lookup needs is kept in memory: each sample's stored message texts and its
turns' fingerprints. Canonical requests are rebuilt when a request finds no turn, to say
where it differs.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tcbreplay._replay.divergence import Divergence, describe, nearest
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
from tcbreplay.errors import StoreError, first_line

# (sample id, trial)
Key = tuple[str, int]
# providers whose runs record no sampling settings a request carried
_NO_PARAMS = ("import",)
# how many samples a request without its sample is compared with, to say where it differs
_NEAREST_SAMPLES = 200


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
class RecordedRun:
    """A stored run, indexed for replay (see the module)."""

    run_id: str
    system: str
    tools: dict[str, Any]
    params: dict[str, Any]
    params_known: bool
    samples: dict[Key, SampleRecording] = field(default_factory=dict)
    by_fingerprint: dict[str, list[tuple[Key, Turn]]] = field(default_factory=dict)

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
        out._index(*_read(run))
        return out

    def _index(self, samples: list[dict[str, Any]], messages: dict[Key, list[str]]) -> None:
        params_json = canonical_json(self.params)
        run_tools_json = canonical_json(self.tools)
        for row in samples:
            key = (row["sample_id"], row["trial"])
            own = _own_tools(row.get("tools"))
            tools_json = run_tools_json if own is None else canonical_json(own)
            texts = messages.get(key, [])
            system, items, _ = canonical_messages((json.loads(t) for t in texts), self.system)
            lead = len(texts) - len(items)
            system_json = canonical_json(system)
            parts = [canonical_json(item) for item in items]
            turns: list[Turn] = []
            for k, item in enumerate(items):
                if item["role"] != "assistant":
                    continue
                text = request_text(parts[:k], params_json, system_json, tools_json)
                turns.append(Turn(len(turns), k + lead, sha256_text(text)))
            recording = SampleRecording(texts, turns, own, row.get("status") or "ok")
            self.samples[key] = recording
            for turn in turns:
                self.by_fingerprint.setdefault(turn.fingerprint, []).append((key, turn))

    def tools_of(self, key: Key | None) -> dict[str, Any]:
        sample = self.samples.get(key) if key else None
        return sample.tools if sample is not None and sample.tools is not None else self.tools

    def lookup(self, fingerprint: str, key: Key | None = None) -> tuple[Key, Turn] | None:
        """The recorded turn asked for by a request of this fingerprint: of the sample and
        trial ``key`` only when given, else the first of any sample's."""
        found = self.by_fingerprint.get(fingerprint) or []
        if key is not None:
            return next(((k, t) for k, t in found if k == key), None)
        return found[0] if found else None

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
        turn = assistant_turns(request["messages"])
        if key is not None:
            candidates = list(self.requests(key))
        else:
            candidates = [r for k in self._similar(request) for r in self.requests(k)]
        found = nearest(candidates, request)
        divergence = describe(turn, found, request)
        if component is not None and divergence.component == "messages":
            named = component(divergence.path)
            if named:
                divergence = Divergence(turn, named, divergence.path, divergence.recorded,
                                        divergence.replayed)  # fmt: skip
        return divergence

    def _similar(self, request: Request) -> list[Key]:
        first = request["messages"][:1]
        same: list[Key] = []
        for key, sample in self.samples.items():
            if len(same) >= _NEAREST_SAMPLES:
                break
            _, items, _ = canonical_messages((json.loads(t) for t in sample.texts[:3]), self.system)
            if items[:1] == first:
                same.append(key)
        return same or list(self.samples)[:_NEAREST_SAMPLES]

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


def _read(run: Run) -> tuple[list[dict[str, Any]], dict[Key, list[str]]]:
    """The run's samples (id, trial, own tools, status) and each one's message texts."""
    import pyarrow as pa

    from tcbreplay._store.parquet import read_table

    try:
        samples = with_optional_columns(read_table(run.samples_path), SAMPLES_SCHEMA)
        messages = with_optional_columns(
            read_table(
                run.messages_path,
                columns=_present(run, ["sample_id", "trial", "position", "message"]),
            ),
            MESSAGES_SCHEMA,
        )
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise StoreError(f"{run.dir}: cannot read its samples ({first_line(exc)})") from exc
    rows = samples.select(["sample_id", "trial", "tools", "status"]).to_pylist()
    order = messages.sort_by([("sample_id", "ascending"), ("trial", "ascending"),
                              ("position", "ascending")])  # fmt: skip
    grouped: dict[Key, list[str]] = {}
    ids, trials = order["sample_id"].to_pylist(), order["trial"].to_pylist()
    for sid, trial, text in zip(ids, trials, order["message"].to_pylist(), strict=True):
        grouped.setdefault((sid, trial), []).append(text)
    return rows, grouped


def _present(run: Run, columns: list[str]) -> list[str]:
    from tcbreplay._store.parquet import read_schema

    names = read_schema(run.messages_path).names
    return [c for c in columns if c in names]
