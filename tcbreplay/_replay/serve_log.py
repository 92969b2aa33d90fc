"""``serve --log-run NEW``: what a server answered, kept as a run of the store.

The log is a replay of the served run (``source: replay``, its ``replay`` block naming the
parent and ``served_by: serve``): one sample per conversation, under the sample and trial
of the recording it was answered from, holding the conversation as its last request had it
and the answer given (each answer the parent's stored message, as ``audit verify`` checks),
with ``metadata.replay.served`` and, for a conversation whose last request matched nothing,
status ``diverged`` and its row in ``divergences`` (for one answered with the error its
recording ended in, status ``error`` with that error). The conversations of a sample are its
trials in the order they began (the first trial 0, and so on): a client that replays each
trial once, in order, gets the parent's trial numbers, and one that replays a sample again
gets trials of its own; ``metadata.replay.parent_trial`` names the recorded trial each was
answered from.

Each request answered appends the conversation to the run's journal at once, as a recording
appends each finished sample: a server killed keeps everything it answered, and the same
command again takes the run up where it was. Stopping the server (Ctrl-C) folds the journal
into the run's files.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcbreplay._inputs.dataset import Sample
from tcbreplay._inputs.stored import StoredDataset
from tcbreplay._record.messages import serialize_messages
from tcbreplay._record.options import RecordOptions
from tcbreplay._replay.inputs import dataset_file, stored_dataset
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._replay.wire import Answer
from tcbreplay._store.manifest import new_manifest
from tcbreplay._store.records import sample_record
from tcbreplay._store.run_dir import Run, validate_run_id
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import row_index, utcnow
from tcbreplay._store.store_urls import DEFAULT_STORE
from tcbreplay._store.writer import RunWriter
from tcbreplay.errors import InputError

SERVED_BY = "serve"
# the manifest's source of a replay, and its block's name (tcbreplay._replay.run's, which
# loads the agent: a server does without)
SOURCE = "replay"
# the manifest fields that describe the inputs, the parent's
_INPUTS = ("benchmark", "dataset", "tools", "system_prompt")


@dataclass
class Logged:
    """A conversation a log run holds: its status, when it began, its metadata (its
    ``replay`` block says what was served from where) and its stored messages' texts."""

    status: str
    started_at: str
    metadata: dict[str, Any]
    texts: list[str]


class ServeLog:
    """The run a server logs to (see the module)."""

    def __init__(self, writer: RunWriter, dataset: StoredDataset, recording: RecordedRun) -> None:
        self.writer = writer
        self.run_id = writer.run_id
        self.recording = recording
        self._dataset = dataset
        self._samples: dict[str, Sample | None] = {}  # those logged, parsed once
        self._entries = len(self._dataset)
        self._trials = max((trial for _, trial in recording.samples), default=0) + 1
        self._started = time.perf_counter()
        # each sample's next trial, after those a former server logged
        self._next: dict[str, int] = {}
        for sample_id, trial in Run(writer.dir).recorded_ids():
            self._next[sample_id] = max(self._next.get(sample_id, 0), trial + 1)

    @classmethod
    def open(cls, store: Store, parent: Run, recording: RecordedRun, run_id: str) -> ServeLog:
        """The log run ``run_id`` of a server of ``parent``: made, or taken up again when a
        server of the same run logged to it before."""
        run_id = validate_run_id(run_id)
        if run_id == parent.run_id:
            raise InputError(f"--log-run {run_id}: the log needs a run id of its own")
        command = _command(parent.run_id, run_id, store)
        # the parent's dataset read before the log run is made or taken up: a file that
        # cannot be read leaves the store as it was
        dataset = stored_dataset(parent)
        if store.exists(run_id):
            block = store.open_run(run_id, writing=True).manifest.get(SOURCE) or {}
            if block.get("served_by") != SERVED_BY or block.get("parent_run_id") != parent.run_id:
                raise InputError(
                    f"--log-run {run_id}: the store holds a run of that id that is no log of "
                    f"a server of {parent.run_id}",
                    hint="choose another --log-run",
                )
            writer = store.resume_run(run_id)
            writer.update_manifest(status="recording")
            return cls(writer, dataset, recording)
        simulated = bool((parent.manifest.get("model") or {}).get("simulated"))
        model = {"id": f"replay:{parent.run_id}", "provider": SOURCE, "name": parent.run_id,
                 "settings": {}, "simulated": simulated, "then": None}  # fmt: skip
        block = {"parent_run_id": parent.run_id, "served_by": SERVED_BY, "fork": None,
                 "recorded_tools": False, "offline": True, "changes": {},
                 "command": command}  # fmt: skip
        manifest = new_manifest(
            run_id,
            utcnow().isoformat(),
            {k: parent.manifest[k] for k in _INPUTS if k in parent.manifest},
            model,
            fingerprint=hashlib.sha256(f"serve:{parent.run_id}".encode()).hexdigest(),
            source=SOURCE,
            runner=RecordOptions(trials=max(t for _, t in recording.samples) + 1).to_dict(),
            **{SOURCE: block},
        )
        return cls(store.create_run(manifest, dataset_file(parent)), dataset, recording)

    def logged(self) -> dict[tuple[str, int], Logged]:
        """What a former server logged to this run, by sample and trial (the latest record
        of each, from the Parquet files and then the journal a killed server left): the
        conversations a restarted server goes on with, each in the trial it has."""
        from tcbreplay._store.journal import journal_records
        from tcbreplay._store.parquet import read_table

        found: dict[tuple[str, int], Logged] = {}
        run = Run(self.writer.dir)
        if run.has_data():
            columns = ["sample_id", "trial", "sample_index", "status", "started_at", "metadata"]
            rows = read_table(run.samples_path, columns=columns).to_pylist()
            texts: dict[int, list[tuple[int, str]]] = {}
            table = read_table(run.messages_path, columns=["sample_index", "position", "message"])
            for index, position, text in zip(*(table[c].to_pylist() for c in table.column_names),
                                             strict=True):  # fmt: skip
                texts.setdefault(index, []).append((position, text))
            for row in rows:
                these = [text for _, text in sorted(texts.get(row["sample_index"], []))]
                started = row["started_at"]
                found[(row["sample_id"], row["trial"])] = Logged(
                    row["status"],
                    started.isoformat() if started is not None else utcnow().isoformat(),
                    json.loads(row["metadata"]) if row["metadata"] else {},
                    these,
                )
        for record in journal_records(self.writer.dir):
            found[(record["sample_id"], record.get("trial", 0))] = Logged(
                record["status"],
                str(record.get("started_at") or utcnow().isoformat()),
                record.get("metadata") or {},
                [m["message"] for m in record.get("messages") or []],
            )
        return found

    def served(self, conversation: Any, messages: list[Any], answer: dict[str, Any]) -> None:
        """A request of ``conversation`` (its ``messages``) answered with ``answer``."""
        self._append(conversation, messages, answer)

    def diverged(self, conversation: Any, messages: list[Any]) -> None:
        """A request of ``conversation`` that no recorded turn answers."""
        self._append(conversation, messages, None)

    def failed(self, conversation: Any, messages: list[Any], error: tuple[str, str]) -> None:
        """A request of ``conversation`` answered with the error (its type and text) its
        recording ended in there: the conversation ends in that error, as a replay's does."""
        self._append(conversation, messages, None, error)

    def _append(
        self, conversation: Any, messages: list[Any], answer: dict[str, Any] | None,
        error: tuple[str, str] | None = None,
    ) -> None:  # fmt: skip
        if conversation.key is None:
            return
        sample_id, parent_trial = conversation.key
        if sample_id not in self._samples:
            self._samples[sample_id] = self._dataset.sample(sample_id)
        sample = self._samples[sample_id]
        if sample is None:
            return
        slot = conversation.log_slot
        if slot is None or slot[0] != sample_id:  # its first request, or another sample's
            slot = conversation.log_slot = (sample_id, self._next.get(sample_id, 0))
            self._next[sample_id] = slot[1] + 1
        trial = slot[1]
        # the turns served that the conversation as stored holds: a request sent again from
        # an earlier turn (a tool output changed, then a 409) holds fewer than were served
        held = sum(m.type == "ai" for m in messages) + (answer is not None)
        served = [list(pair) for pair in conversation.served if pair[0] < held]
        divergence = conversation.divergence
        status, error_type, said = "ok", None, None
        if divergence is not None:
            status, said = "diverged", f"diverged at {divergence.line()}"
        elif error is not None:
            status, (error_type, said) = "error", error
        record = sample_record(
            self.run_id,
            sample,
            status=status,
            messages=self._messages(conversation, messages, answer),
            attempts=1,
            started_at=conversation.started_at,
            finished_at=utcnow().isoformat(),
            error_type=error_type,
            error=said,
            trial=trial,
            sample_index=row_index(sample.index, trial, self._entries),
            metadata={SOURCE: {
                "served": served,
                "parent_trial": parent_trial,
                "live_calls": 0,
                "forked_at": None,
                "diverged_at": None if divergence is None else divergence.turn,
                "continued": False,
                "tool_outputs": {},
                "tool_outputs_served": 0,
                **({"recorded_error": True} if error is not None else {}),
            }},
        )  # fmt: skip
        record["divergences"] = [] if divergence is None else [divergence.to_dict()]
        self.writer.append(record)

    def _messages(
        self, conversation: Any, messages: list[Any], answer: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """The conversation as stored: the request's messages (without the system prompt
        where the recording's samples start without it), each answer served the parent's
        stored message, then ``answer``."""
        recorded = self.recording.sample(conversation.key)
        starts_with_system = bool(recorded.texts) and json.loads(recorded.texts[0]).get(
            "type") == "system"  # fmt: skip
        if not starts_with_system:
            while messages and messages[0].type == "system":
                messages = messages[1:]
        served = dict(conversation.served)
        out: list[dict[str, Any]] = []
        turn = 0
        ids: dict[str, str] = {}  # a served call's id as the request has it -> as recorded
        for message in messages:
            if message.type == "ai":
                position = served.get(turn)
                turn += 1
                if position is not None:
                    ids.update(_call_ids(message, recorded.texts[position], turn - 1))
                    out.append(_stored(recorded.texts[position]))
                    continue
            elif message.type == "tool" and message.tool_call_id in ids:
                message = message.model_copy(update={"tool_call_id": ids[message.tool_call_id]})
            out.extend(serialize_messages([message], {}))
        if answer is not None:  # the turn served last
            out.append(_stored(recorded.texts[conversation.served[-1][1]]))
        return out

    def close(self) -> Any:
        """Fold the journal into the run's files and write its totals (a RecordSummary)."""
        from tcbreplay._record.finish import finish_run
        from tcbreplay._replay.run import replay_totals

        total = self._entries * self._trials
        return finish_run(self.writer, "partial", time.perf_counter() - self._started, total,
                          None, replay_totals)  # fmt: skip


def _call_ids(sent: Any, text: str, turn: int) -> dict[str, str]:
    """The ids of a served answer's calls as the request holding it has them (a wire whose
    calls carry no ids, Gemini's, makes its own) -> the recorded message's (``text``), call by
    call in the order served: the log's tool messages answer the calls it stores."""
    served = Answer.of(json.loads(text), turn).calls
    made = [*(sent.tool_calls or []), *(getattr(sent, "invalid_tool_calls", None) or [])]
    return {str(c.get("id")): i for c, (i, name, _) in zip(made, served, strict=False)
            if c.get("id") and c.get("name") == name}  # fmt: skip


def _stored(text: str) -> dict[str, Any]:
    """A stored message's text as a journal record's message."""
    message = json.loads(text)
    usage = (message.get("data") or {}).get("usage_metadata") or {}
    return {"type": message.get("type"), "message": text,
            "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
            "total_tokens": usage.get("total_tokens"), "latency_s": None}  # fmt: skip


def _command(parent: str, run_id: str, store: Store) -> str:
    words = ["tcbreplay", "serve", parent, "--log-run", run_id]
    if store.root != Path(DEFAULT_STORE):
        words += ["--store", str(store.root)]
    return " ".join(shlex.quote(w) for w in words)
