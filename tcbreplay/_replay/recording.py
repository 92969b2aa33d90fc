"""A recorded run as answers: each AI turn of each sample and trial under its request's
fingerprint, and what its tools answered.

The request of a recorded AI turn is rebuilt from the store: the run's system prompt (or the
system messages the sample's messages start with, as imported runs keep them; or those an
agent of one's own sent instead, as its samples' metadata keeps them), every
message before the turn in the sample, the run's tools (or the sample's own, or those the call
was sent where an agent of one's own kept others) and the model's sampling settings, with the
answer format the call asked for where an agent of one's own kept it
(:mod:`tcbreplay._replay.fingerprint`). That is the request an agent sends that gives the model
its whole conversation, as LangChain's agents do; an agent that sends less (a summary of the
history) asks something else, and diverges.

The messages held stay bounded however large the run (what grows with it is an entry per
sample: its key, tools, status and, once ``serve`` starts, its first message and first
answer), and a replay of a few samples reads only theirs: loading reads the samples' keys,
tools and status (not their messages). A sample's messages are read when it is asked for (a
replay asks when it starts the sample), with those of the slice of samples around it
(:mod:`tcbreplay._replay.messages`: only the row groups of ``messages.parquet`` that hold some
of the slice are read, and the texts last read are kept up to a size). A lookup without a
sample (``serve``, the recorded model outside a replay) first reads each sample's first
message (after its system prompt), which the request's must be: the samples that start as the
request does are the only ones whose turns it can match, and their fingerprints are computed
when asked for. Canonical requests are rebuilt when a request finds no turn, to say where it
differs (:mod:`tcbreplay._replay.nearest`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tcbreplay._record.formats import format_as_sent
from tcbreplay._replay.fingerprint import (
    Request,
    canonical_json,
    canonical_messages,
    canonical_tools,
    normalized,
    request_text,
    sha256_text,
)
from tcbreplay._replay.messages import Layout, MessageTexts
from tcbreplay._replay.run_settings import run_settings
from tcbreplay._replay.sample_rows import Key, SampleRow, read_rows
from tcbreplay._replay.tool_pool import ToolOutput, tool_outputs
from tcbreplay._store.run_dir import Run
from tcbreplay._words import count
from tcbreplay.errors import StoreError

# samples kept read (more than a replay runs at once)
CACHED = 1024


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
    error: tuple[str | None, str | None] = (None, None)  # of a sample in error: type, text

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
    # whether the recording says which system messages its requests began with: False for
    # a run recorded by an agent of one's own before runs kept them (SYSTEM_KEPT), whose
    # requests are taken to have begun with its prompt
    system_known: bool = True
    # whether its model takes sampling settings (sim's takes none)
    sampled: bool = True
    # whether its answers were asked for JSON (``response_mime_type``), or its settings are
    # unknown (imports)
    json_asked: bool = False
    # whether it says which answer format (a schema) each request asked for: its model
    # settings and, for an agent of one's own, what its calls bound (FORMAT_KEPT); not for
    # an older such run, an import, or sim (which takes no settings)
    formats_known: bool = False
    # whether any of its requests asked for one (then a request's is compared with it)
    formats_asked: bool = False
    # the fields of Anthropic's output_config its model settings give, but its format
    output_config: dict[str, Any] = field(default_factory=dict)
    # the fields of OpenAI's reasoning its model settings give (its reasoning_effort as effort)
    reasoning: dict[str, Any] = field(default_factory=dict)
    # its model's provider: a request's answer format is compared as that model sent one
    # (:meth:`format_as_sent`)
    provider: str = ""
    # its manifest's model (provider, name, settings): the class whose answer formats a
    # replaying agent's with_structured_output binds (tcbreplay._replay.structured)
    model: dict[str, Any] = field(default_factory=dict)
    _rows: dict[Key, SampleRow] = field(default_factory=dict, repr=False)
    _messages: MessageTexts | None = field(default=None, repr=False)
    _cache: OrderedDict[Key, SampleRecording] = field(default_factory=OrderedDict, repr=False)
    _index: dict[str, list[tuple[Key, Turn]]] | None = field(default=None, repr=False)
    # each sample's first canonical message (JSON text; "" when it has none), and the samples
    # whose requests may begin with a message (its JSON text; "": none), read once
    _firsts: dict[Key, str] = field(default_factory=dict, repr=False)
    _starting: dict[str, list[Key]] | None = field(default=None, repr=False)
    _layout: Layout | None = field(default=None, repr=False)
    # each sample's first turn by its fingerprint, read with ``_starting``
    _openings: dict[str, list[tuple[Key, Turn]]] | None = field(default=None, repr=False)
    # each sample's first answer (its position, its stored JSON), read with ``_starting``
    _first_answers: dict[Key, tuple[int, str]] = field(default_factory=dict, repr=False)
    # the turns of the samples :meth:`matches` looked in (the index, built as it is needed)
    _turns: dict[Key, tuple[Turn, ...]] = field(default_factory=dict, repr=False)
    # the canonical JSON of the run's tools and sampling settings
    _jsons: tuple[str, str] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, run: Run) -> RecordedRun:
        """Index a run of the store (its Parquet files: a recording still under way is read
        as far as it was folded)."""
        manifest = run.manifest
        settings = run_settings(manifest)
        schemas = (manifest.get("tools") or {}).get("specs") or []
        out = cls(
            run_id=run.run_id,
            system=str((manifest.get("system_prompt") or {}).get("text") or ""),
            tools=canonical_tools(schemas),
            params=settings.params,
            params_known=settings.params_known,
            system_known=settings.system_known,
            sampled=settings.sampled,
            json_asked=settings.json_asked,
            formats_known=settings.formats_known,
            output_config=settings.output_config,
            reasoning=settings.reasoning,
            provider=settings.provider,
            model=dict(manifest.get("model") or {}),
        )
        if not run.has_data():
            from tcbreplay._store.shards import finish_hint

            waiting = run.unfolded_records()
            raise StoreError(
                f"run {run.run_id!r} has no stored samples to replay (status {run.status})"
                + (f": {count(waiting, 'finished sample')} in its journal, not yet folded "
                   "into its Parquet files" if waiting else ""),
                hint=finish_hint(run),
            )  # fmt: skip
        out._rows = read_rows(run, sent_system=settings.system_kept, provider=settings.provider)
        out.formats_asked = out.formats_known and (
            "response_format" in out.params or any(r.formats for r in out._rows.values())
        )
        out._messages = MessageTexts(run.messages_path)
        return out

    def format_as_sent(self, asked: Any) -> Any:
        """An answer format a request asks for (``response_format``, canonical) as the
        recording's model would have sent it: the form its own are compared in."""
        return normalized(format_as_sent(asked, self.provider))

    def recorded_ids(self) -> set[str]:
        """The ids of the samples it holds a recording of (a row not ``missing``: an import
        stores as missing a sample its traces lack)."""
        return {sid for (sid, _), row in self._rows.items() if row.status != "missing"}

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

    def message(self, key: Key, position: int) -> dict[str, Any]:
        """A sample's stored message at ``position``: its first answer as :meth:`starting`
        read it (no slice read: a conversation's first request is answered so), any other
        from the sample's messages."""
        first = self._first_answers.get(key)
        if first is not None and first[0] == position:
            return json.loads(first[1])
        return self.sample(key).message(position)

    def texts(self, key: Key, limit: int | None = None) -> list[str]:
        """A sample's stored message texts (its first ``limit`` only, when given)."""
        row = self._rows[key]
        assert self._messages is not None
        texts = [] if row.index is None else self._messages.texts(row.index)
        return texts if limit is None else texts[:limit]

    def _read_sample(self, key: Key, texts: list[str] | None = None) -> SampleRecording:
        return self._build(key, self.texts(key) if texts is None else texts)[0]

    def _build(self, key: Key, texts: list[str]) -> tuple[SampleRecording, list[dict[str, Any]]]:
        """A sample read from its stored texts (all of them, or its first ones: then the
        turns those hold), and its canonical messages."""
        row = self._rows[key]
        own = _own_tools(row.tools)
        if self._jsons is None:
            self._jsons = (canonical_json(self.tools), canonical_json(self.params))
        tools_json = self._jsons[0] if own is None else canonical_json(own)
        base = self.tools if own is None else own
        params_json = self._jsons[1]
        system, items, _ = canonical_messages((json.loads(t) for t in texts), self.system)
        lead = len(texts) - len(items)
        systems = [canonical_json(text) for text in row.systems or (system,)]
        parts = [canonical_json(item) for item in items]
        turns: list[Turn] = []
        for k, item in enumerate(items):
            if item["role"] != "assistant":
                continue
            system_json = systems[min(len(turns), len(systems) - 1)]
            asked = self.params_of(key, len(turns))
            sent = row.tools_at(base, len(turns))  # (another than the sample's: its call's)
            text = request_text(parts[:k], params_json if asked is self.params
                                else canonical_json(asked), system_json,
                                tools_json if sent is base else canonical_json(sent))  # fmt: skip
            turns.append(Turn(len(turns), k + lead, sha256_text(text)))
        return SampleRecording(texts, turns, own, row.status, row.error), items

    def index(self) -> dict[str, list[tuple[Key, Turn]]]:
        """Every recorded turn by its request's fingerprint (built on the first call, by
        reading every sample once, a slice at a time; lookups that give the request's first
        message need none of it: :meth:`matches`)."""
        if self._index is None:
            assert self._messages is not None
            by_index = {row.index: key for key, row in self._rows.items() if row.index is not None}
            found: dict[Key, list[Turn]] = {}
            for texts in self._messages.every_slice(max(by_index, default=-1)):
                for number, these in texts.items():
                    key = by_index.get(number)
                    if key is not None:
                        found[key] = self._read_sample(key, these).turns
            index: dict[str, list[tuple[Key, Turn]]] = {}
            for key in self._rows:  # in the run's order
                for turn in found.get(key, ()):
                    index.setdefault(turn.fingerprint, []).append((key, turn))
            self._index = index
        return self._index

    def turn_count(self) -> int:
        """How many AI turns the run recorded (its messages' types, not their texts)."""
        return self._read_layout().turns

    def starting(self) -> dict[str, list[Key]]:
        """The samples, in the run's order, by the canonical JSON of the first message a
        request to them holds (after the system prompt; "" for a sample whose first message
        is an answer, whose first request holds none). Read once, with each sample's first
        turn (:meth:`matches` of a first request): only the messages up to each sample's
        first answer are read."""
        if self._starting is None:
            import numpy as np

            layout = self._read_layout()
            assert self._messages is not None
            heads = self._messages.heads(np.where(layout.first_ai >= 0, layout.first_ai,
                                                  layout.lead))  # fmt: skip
            starting: dict[str, list[Key]] = {}
            openings: dict[str, list[tuple[Key, Turn]]] = {}
            for key, row in self._rows.items():
                texts = heads.get(row.index, []) if row.index is not None else []
                sample, items = self._build(key, texts)
                first = canonical_json(items[0]) if items else ""
                self._firsts[key] = first
                if items:
                    starting.setdefault(first, []).append(key)
                    if items[0]["role"] == "assistant":
                        starting.setdefault("", []).append(key)
                if sample.turns:
                    opening = sample.turns[0]
                    openings.setdefault(opening.fingerprint, []).append((key, opening))
                    self._first_answers[key] = (opening.position, texts[opening.position])
            self._starting, self._openings = starting, openings
        return self._starting

    def firsts(self) -> dict[Key, str]:
        """Each sample's first canonical message (JSON text; "" when it has none), read
        with :meth:`starting`."""
        self.starting()
        return self._firsts

    def _read_layout(self) -> Layout:
        if self._layout is None:
            assert self._messages is not None
            self._layout = self._messages.layout(
                max((r.index for r in self._rows.values() if r.index is not None), default=-1)
            )
        return self._layout

    def own_tools_text(self, key: Key) -> str | None:
        """A sample's own tools as stored (JSON text; None: the run's), its messages unread."""
        return self._rows[key].tools or None

    def tools_of(self, key: Key | None, turn: int | None = None) -> dict[str, Any]:
        """A sample's tools (its own, or the run's); those its request of ``turn`` was sent."""
        sample = self.samples.get(key) if key else None
        tools = sample.tools if sample is not None and sample.tools is not None else self.tools
        row = self._rows.get(key) if key and turn is not None else None
        return tools if row is None or turn is None else row.tools_at(tools, turn)

    def lookup(
        self, fingerprint: str, key: Key | None = None, first: str | None = None,
        turn: int | None = None,
    ) -> tuple[Key, Turn] | None:  # fmt: skip
        """The recorded turn asked for by a request of this fingerprint: of the sample and
        trial ``key`` only when given, else the first of any sample's (``first``, ``turn``:
        as for :meth:`matches`)."""
        if key is not None:
            sample = self.samples.get(key)
            if sample is None:
                return None
            return next(((key, t) for t in sample.turns if t.fingerprint == fingerprint), None)
        found = self.matches(fingerprint, first, turn)
        return found[0] if found else None

    def matches(
        self, fingerprint: str, first: str | None = None, turn: int | None = None
    ) -> list[tuple[Key, Turn]]:
        """Every recorded turn (of any sample and trial) asked for by a request of this
        fingerprint, in the run's order. ``first``: the canonical JSON of the request's first
        message ("" when it has none), which a matching turn's request has too, and ``turn``
        its assistant messages. A first request (turn 0) is looked up among the samples'
        first turns (:meth:`starting`); a later one among the samples that start as it
        does, each read when first looked in; without ``first``, in :meth:`index`."""
        if first is None:
            return self.index().get(fingerprint) or []
        if self._index is not None:
            return self._index.get(fingerprint) or []
        if turn == 0:
            self.starting()
            assert self._openings is not None
            return list(self._openings.get(fingerprint) or [])
        keys = self.starting().get(first) or []
        # each sample's turns computed once (a first message may start thousands of samples),
        # in sample_index order: each slice is read once, and a client that goes through the
        # run in order finds the next samples read with this one's slice
        unknown = [k for k in keys if k not in self._turns]
        for key in sorted(unknown, key=lambda k: self._rows[k].index or 0):
            self._turns[key] = tuple(self.sample(key).turns)
        return [(k, t) for k in keys for t in self._turns[k] if t.fingerprint == fingerprint]

    def prefetch(self, keys: list[Key]) -> None:
        """Read the messages of the samples of ``keys`` not read yet, at once: only the row
        groups that hold one are read, and only their rows kept (up to
        :data:`~tcbreplay._replay.messages.CACHE_BYTES`)."""
        missing = [k for k in keys if k not in self._cache and k in self._rows]
        if missing:
            assert self._messages is not None
            indexes = [self._rows[k].index for k in missing]
            self._messages.prefetch([i for i in indexes if i is not None])

    def params_of(self, key: Key, turn: int) -> dict[str, Any]:
        """The sampling settings of a sample's request of ``turn``: the run's, with the
        answer format it asked for where its agent kept one (the run's ``params`` itself
        where not)."""
        return self._rows[key].params(self.params, turn) if self.formats_known else self.params

    def requests(self, key: Key) -> Iterator[Request]:
        """The canonical requests of a sample's recorded turns, in order."""
        sample = self.samples.get(key)
        if sample is None:
            return
        system, items, _ = canonical_messages((json.loads(t) for t in sample.texts), self.system)
        systems = self._rows[key].systems or [system]
        turn = 0
        for k, item in enumerate(items):
            if item["role"] == "assistant":
                yield {"system": systems[min(turn, len(systems) - 1)], "messages": items[:k],
                       "tools": self.tools_of(key, turn),
                       "params": self.params_of(key, turn)}  # fmt: skip
                turn += 1

    def failed_request(self, key: Key) -> Request | None:
        """The canonical request a sample's recording failed at (every turn before it
        answered; a provider's 5xx, a timeout), None when it did not end in error."""
        sample = self.samples.get(key)
        if sample is None or sample.status != "error":
            return None
        system, items, _ = canonical_messages((json.loads(t) for t in sample.texts), self.system)
        systems = self._rows[key].systems or [system]
        turn = len(sample.turns)
        return {"system": systems[min(turn, len(systems) - 1)], "messages": items,
                "tools": self.tools_of(key, turn), "params": self.params_of(key, turn)}  # fmt: skip

    def starts_with_system(self) -> bool:
        """Whether every sample's first stored message (of those that have one) is a system
        message (their types only are read)."""
        import numpy as np

        layout = self._read_layout()
        ours = np.array([r.index for r in self._rows.values() if r.index is not None], np.int64)
        return not bool(np.any((layout.first[ours] >= 0) & ~layout.first_is_system[ours]))

    def first_messages(self) -> Iterator[tuple[Key, dict[str, Any] | None]]:
        """Each sample's first stored message (None where it has none), without reading
        the rest: only the row groups that hold a first message are read."""
        layout = self._read_layout()
        assert self._messages is not None
        heads = self._messages.heads(layout.first)
        for key, row in self._rows.items():
            texts = heads.get(row.index, []) if row.index is not None else []
            yield key, json.loads(texts[0]) if texts else None

    def tool_outputs(self, key: Key) -> tuple[dict[str, ToolOutput], dict[int, ToolOutput]]:
        """A sample's recorded tool outputs by call id, and by position."""
        sample = self.samples.get(key)
        return ({}, {}) if sample is None else tool_outputs(sample.texts)


def _own_tools(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    schemas = json.loads(text)
    return canonical_tools(schemas) if isinstance(schemas, list) else None
