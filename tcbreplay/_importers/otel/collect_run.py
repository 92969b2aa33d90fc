"""The run a collection writes into: made, or taken up again with the rows it holds; each
sample built from received spans numbered (its trial, its place) and appended to its journal;
finished with its dataset, tools and model once the collection stops."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcbreplay._importers.otel import samples as otel_samples
from tcbreplay._importers.otel.grouping import Group
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries
from tcbreplay._scrub import scrub
from tcbreplay._store.files import DATASET_SHA256, file_record, write_jsonl_atomic
from tcbreplay._store.manifest import new_manifest
from tcbreplay._store.records import sample_record
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DATASET, SAMPLES, utcnow
from tcbreplay._store.writer import RunWriter, journal_line
from tcbreplay.errors import DatasetError, InputError, StoreError, TraceError

SOURCE = "collect"


@dataclass
class _Sample:
    """A collected sample as a dataset entry (what a journal record needs of one)."""

    sample_id: str
    index: int
    input: str
    gold: list[dict[str, Any]]
    category: str | None = None
    metadata: dict[str, Any] | None = None

    def gold_calls(self) -> list[dict[str, Any]]:
        return self.gold

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        return None


class CollectedRun:
    """The run ``run_id`` of ``store`` a collection writes: a new one, or the collected run of
    this id to go on with (its rows kept in their places: :meth:`take_up`)."""

    def __init__(self, store: Store, run_id: str, sample_by: str) -> None:
        self.run_id = run_id
        self.sample_by = sample_by
        self.rows: dict[tuple[str, int], int] = {}  # (sample id, trial) -> its row
        self._entries: dict[str, dict[str, Any]] = {}
        # sample id -> where the trace (or agent run) of its entry came: the first to come
        # (as import takes the first in the file), not the first to make a sample
        self._entry_by: dict[str, tuple[int, int, str]] = {}
        # each row's trace and the entry its record was written with (rows written before
        # their sample's entry changed are written again when the run finishes)
        self._written: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
        self._tools: dict[str, dict[str, Any]] = {}
        self._called: dict[str, set[str]] = {}
        self._trials: dict[str, int] = {}
        # of each sample, the traces (agent runs) that numbered their trial here, by what
        # made them: their place in import's order (see otel_samples.trial_order), their trace
        self._numbered: dict[str, dict[str, tuple[tuple[int, int, str], str]]] = {}
        self._per_sample: dict[str, set[int]] = {}  # the trials of each sample id
        # what made each row: its trace (or agent run); "" for a row the run held before
        self._made_by: dict[tuple[str, int], str] = {}
        # each row's model calls' models (the run's model: the most common, as import's)
        self._models: dict[tuple[str, int], list[str]] = {}
        # the rows of the run before this start (a collection taken up again): their places,
        # kept; the places of new rows follow theirs
        self._held: dict[tuple[str, int], int] = {}
        self._twice: set[int] = set()  # held places of two rows (an earlier version's doing)
        self._next_index = 0
        self._writer = self._open(store)
        self.dir = self._writer.dir

    def _open(self, store: Store) -> RunWriter:
        """A new run, or the collected run of this id to go on with."""
        if not store.exists(self.run_id):
            inputs = {
                "benchmark": {"name": SOURCE, "title": "Collected traces"},
                "dataset": {"source": SOURCE, "sha256": None, "file": DATASET, "n_entries": 0},
                "tools": {"source": SOURCE, "sha256": None, "specs": []},
                "system_prompt": {"source": None, "sha256": None, "text": ""},
            }
            model = {"id": "unknown", "provider": SOURCE, "name": "unknown", "settings": {},
                     "simulated": False}  # fmt: skip
            manifest = new_manifest(
                self.run_id, utcnow().isoformat(), inputs, model, source=SOURCE,
                collect={"sample_by": self.sample_by},
            )  # fmt: skip
            return store.create_run(manifest, [])
        run = store.open_run(self.run_id, writing=True)
        if run.manifest.get("source") != SOURCE:
            raise InputError(
                f"run {self.run_id!r} exists and was not collected: collect cannot add to it",
                hint="choose another --run-id",
            )
        writer = store.resume_run(self.run_id)
        writer.update_manifest(status="recording")
        return writer

    def take_up(self) -> None:
        """Read the places of the rows the run holds (a collection taken up again)."""
        self._held = {key: r["sample_index"] for key, r in _held_rows(self.dir, ["sample_index"])}
        self._next_index = 1 + max(self._held.values(), default=-1)
        self._twice = {i for i, n in Counter(self._held.values()).items() if n > 1}

    def keep_held(self) -> int:
        """Keep the rows the run held that no received request made again (their requests
        were skipped), as the run holds them; how many."""
        kept = {key for key in self._held if key not in self.rows}
        if kept:
            columns = ["input", "gold", "category"]
            latest = {k: r for k, r in _held_rows(self.dir, columns) if k in kept}
            for (sid, trial), r in latest.items():
                self.rows[(sid, trial)] = self._held[(sid, trial)]
                self._per_sample.setdefault(sid, set()).add(trial)
                self._made_by[(sid, trial)] = ""
                entry = {"id": sid, "input": r["input"], "target": r["gold"]}
                if r.get("category") is not None:
                    entry["category"] = r["category"]
                self._entries.setdefault(sid, entry)
        return len(kept)

    def claim(
        self, built: otel_samples.Built, claimed: dict[tuple[str, int], str],
        taken: dict[tuple[str, int], str],
    ) -> None:  # fmt: skip
        """Number the trial of a sample built (its own, or the first its sample id has not):
        a :class:`TraceError` if another trace (or agent run) made that trial already, but
        for one that named no trial, whose trial the sample's named trial is then ``taken``
        from (:meth:`give_up`: as ``import`` numbers only the traces naming none)."""
        line, group = built.line, built.group
        made_by = _made_by(group, self.sample_by)
        named = otel_samples.TRIAL in group.root.attributes
        if not named:
            line.trial = self._trials.setdefault(
                f"{line.sample_id}\x00{made_by}", self._next_trial(line.sample_id, claimed)
            )
        key = (line.sample_id, line.trial)
        other = claimed.get(key, self._made_by.get(key, made_by))
        if other != made_by and named and key not in claimed and self._numbered_here(key, other):
            taken[key] = made_by
            claimed[key] = made_by
            return
        if other != made_by:
            held = f"{other} made it first" if other else "the run held it before this start"
            raise TraceError(
                f"sample {key} appears twice: {held}, and is kept; give each trace of a "
                f"sample a {otel_samples.TRIAL} of its own"
            )
        claimed[key] = made_by

    def _numbered_here(self, key: tuple[str, int], made_by: str) -> bool:
        """Whether the trace (or agent run) ``made_by`` holds the trial ``key`` by a number
        given here (it named none)."""
        sid, trial = key
        return made_by in self._numbered.get(sid, {}) and (
            self._trials.get(f"{sid}\x00{made_by}") == trial
        )

    def give_up(self, taken: dict[tuple[str, int], str], keep: set[str]) -> list[str]:
        """Give each trial of ``taken`` (see :meth:`claim`) to the trace (or agent run) that
        named it; the traces that held them, each once, to be made again (under the first
        trial their sample then has not). A :class:`TraceError`, nothing given, where such a
        trace is one of ``keep`` (whose samples stay as stored)."""
        for key in taken:
            held_by = self._made_by[key]
            if self._numbered[key[0]][held_by][1] in keep:
                raise TraceError(
                    f"sample {key} appears twice: {held_by} made it first, and is kept; give "
                    f"each trace of a sample a {otel_samples.TRIAL} of its own"
                )
        again: dict[str, None] = {}
        for key, made_by in taken.items():
            sid = key[0]
            held_by = self._made_by[key]
            _, trace_id = self._numbered[sid].pop(held_by)
            del self._trials[f"{sid}\x00{held_by}"]
            self._made_by[key] = made_by
            again[trace_id] = None
        return list(again)

    def store(self, built: otel_samples.Built, trace_id: str, rank: int) -> None:
        """Append the journal record of a sample built from the trace ``trace_id`` (``rank``:
        how many traces came before it)."""
        line = built.line
        root = built.group.root
        sid = line.sample_id
        made_by = _made_by(built.group, self.sample_by)
        key = (sid, line.trial)
        if key not in self.rows:
            self.rows[key] = self._index(key)
            self._per_sample.setdefault(sid, set()).add(line.trial)
            self._made_by[key] = made_by
        index = self.rows[key]
        self._models[key] = built.models
        if otel_samples.TRIAL not in root.attributes:
            order = otel_samples.trial_order(built.group, rank)
            self._numbered.setdefault(sid, {})[made_by] = (order, trace_id)
        entry = built.entry or {"id": sid, "input": built.input, "target": []}
        # the dataset entry: that of the sample's trace (agent run) that came first, as it is
        # now; every trial's row holds it (its input and gold), as import's rows do
        came = (rank, 0, "")
        if self.sample_by == "agent":  # (import's order of a trace's runs)
            came = (came[0], root.start, root.span_id)
        if came <= self._entry_by.setdefault(sid, came):
            self._entry_by[sid] = came
            self._entries[sid] = entry
        entry = self._entries[sid]
        self._written[key] = (trace_id, entry)
        for tool in built.tools:
            self._tools.setdefault(tool["name"], tool)
        for name, args in built.called.items():
            self._called.setdefault(name, set()).update(args)
        sample = _Sample(sid, index, str(entry.get("input", "")), _gold(entry))
        now = utcnow().isoformat()
        started = _iso(root.start) or now
        record = sample_record(
            self.run_id, sample, status=line.status, messages=line.messages, attempts=1,
            started_at=started, finished_at=_iso(root.end) or now,
            duration_s=root.duration_s, error_type=line.error_type, error=line.error,
            trial=line.trial, sample_index=index, metadata=line.metadata,
        )  # fmt: skip
        self._writer.append_line(journal_line(record))

    def _index(self, key: tuple[str, int]) -> int:
        """A new row's sample_index: the one the run gave the sample before this start (a
        collection taken up again), or one no row of the run has (also where the run gave
        its place to two rows: the other keeps it)."""
        if key in self._held and self._held[key] not in self._twice:
            return self._held[key]
        self._next_index += 1
        return self._next_index - 1

    def _next_trial(self, sample_id: str, claimed: dict[tuple[str, int], str]) -> int:
        """The first trial of the sample no row has (one a trace numbered itself may be), nor
        another sample of the same trace (``claimed``)."""
        trials = self._per_sample.get(sample_id, set()) | {t for s, t in claimed if s == sample_id}
        return next(n for n in range(len(trials) + 1) if n not in trials)

    def renumber(self, skip: set[str]) -> list[str]:
        """Give the trials numbered here (those of traces in ``skip`` aside: their rows stay
        as stored) to their samples' traces in the order they began, as ``import`` numbers
        them (they were given in the order the traces made samples); the traces whose trial
        changed, each once, to be made again."""
        again: dict[str, None] = {}
        for sid, numbered in self._numbered.items():
            runs = {by: v for by, v in numbered.items() if v[1] not in skip}
            slots = sorted(self._trials[f"{sid}\x00{by}"] for by in runs)
            for by, slot in zip(sorted(runs, key=lambda by: runs[by][0]), slots, strict=True):
                if self._trials[f"{sid}\x00{by}"] != slot:
                    self._trials[f"{sid}\x00{by}"] = slot
                    self._made_by[(sid, slot)] = by
                    again[runs[by][1]] = None
        return list(again)

    def outdated(self) -> list[str]:
        """The traces of rows written before their sample's entry changed (its first trace
        grew), each once."""
        return list(
            dict.fromkeys(
                t for (sid, _), (t, e) in self._written.items() if e != self._entries[sid]
            )
        )

    def complete(self) -> None:
        """Fold the journal, write the dataset and tools, and mark the run complete (the
        writer stays open: :meth:`close`)."""
        self._writer.fold()
        entries = [self._entries[sid] for sid in dict.fromkeys(k[0] for k in self.rows)]
        write_jsonl_atomic(self.dir / DATASET, _normalised(entries, self.dir / DATASET))
        tools = otel_samples.tools_of(self._tools, self._called)
        manifest = self._writer.manifest
        manifest["dataset"] = {
            **manifest["dataset"], "n_entries": len(entries),
            DATASET_SHA256: file_record(self.dir / DATASET)["sha256"],
        }  # fmt: skip
        manifest["tools"] = {**manifest["tools"], "specs": tools}
        errors = 0
        from tcbreplay._store.run_dir import Run

        status_of = Run(self.dir).recorded_ids()
        errors = sum(1 for s in status_of.values() if s != "ok")
        self._writer.update_manifest(
            **self._model(manifest["model"]),
            status="complete",
            finished_at=utcnow().isoformat(),
            dataset=manifest["dataset"],
            tools=manifest["tools"],
            totals={"samples": len(status_of), "recorded": len(status_of),
                    "ok": len(status_of) - errors, "errors": errors, "missing": 0,
                    "trials": 1 + max((k[1] for k in status_of), default=0)},
        )  # fmt: skip

    def _model(self, model: dict[str, Any]) -> dict[str, Any]:
        """The manifest's model, named (as ``import`` names it) by the model most model
        calls answered with, when the spans name one; nothing to change otherwise."""
        counted = Counter(m for models in self._models.values() for m in models)
        if not counted:
            return {}
        name = scrub("model", counted.most_common(1)[0][0])
        return {"model": {**model, "id": name, "name": name}}

    def close(self) -> None:
        """Release the run (finished or not: its samples stay in the journal)."""
        self._writer.close()


def _made_by(group: Group, sample_by: str) -> str:
    """What makes one trial of a sample: its trace (however its root changes as more of it
    comes: a later-starting parentless span can come before the trace's root), or its agent
    run."""
    if sample_by == "agent":
        return f"trace {group.trace_id} (agent span {group.root.span_id})"
    return f"trace {group.trace_id}"


def _gold(entry: dict[str, Any]) -> list[dict[str, Any]]:
    target = entry.get("target")
    return target if isinstance(target, list) else []


def _normalised(entries: list[dict[str, Any]], where: Path) -> list[dict[str, Any]]:
    if not entries:  # nothing came
        return []
    try:
        dataset: Dataset = dataset_from_entries(entries, str(where))
    except DatasetError as exc:
        raise StoreError(str(exc)) from None
    return dataset.entries()


def _held_rows(
    run_dir: Path, columns: list[str]
) -> Iterator[tuple[tuple[str, int], dict[str, Any]]]:
    """The rows a run holds, folded then in its journal (a sample's last one is its own),
    each with its (sample id, trial) and ``columns`` of it (``gold`` read as JSON)."""
    import pyarrow as pa

    from tcbreplay._store.journal import journal_records
    from tcbreplay._store.parquet import read_table

    if (run_dir / SAMPLES).exists():
        try:
            table = read_table(run_dir / SAMPLES, columns=["sample_id", "trial", *columns])
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise StoreError(f"{run_dir / SAMPLES}: not a readable Parquet file ({exc})") from exc
        for row in table.to_pylist():
            if "gold" in row:
                row["gold"] = json.loads(row["gold"])
            yield (row["sample_id"], row["trial"]), row
    for record in journal_records(run_dir):
        yield (record["sample_id"], record.get("trial", 0)), record


def _iso(nanos: int) -> str | None:
    if nanos <= 0:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(nanos / 1e9, UTC).isoformat()
