"""``tcbreplay collect``: an OTLP/HTTP receiver that writes what it receives into a run as it
arrives, so that any instrumented agent records into tcbreplay by pointing
``OTEL_EXPORTER_OTLP_ENDPOINT`` at it.

``POST /v1/traces`` (and ``/v1/logs``, where the older GenAI conventions put the messages)
takes an export request in protobuf (``application/x-protobuf``) or JSON
(``application/json``), gzip-compressed or not. Each request is appended to the run's
received files (``received.otlp.jsonl``, a JSON request a line; ``received.otlp.pb``,
protobuf requests each after its size, as the collector's file exporter writes them) and
flushed before it is acknowledged, so a kill -9 loses nothing acknowledged; either file
imports as it is (``import --format otlp``). A trace becomes a sample as soon as its root
span has arrived (read as the otlp dialect reads it), appended to the run's journal like a
recorded sample, and again whenever more of it arrives (the journal's last record of a
sample wins; every trial of a sample holds the dataset entry of the sample's trace that came
first, as ``import`` stores them); a trace that still makes none when the run finishes is
counted in the summary (``unstored``: the collection failed), and one whose later spans make
none keeps the samples it made before, counted too (``stale``). A trace of no model call, tool
run or agent span (an HTTP request's) makes no sample, as ``import`` makes none of it: counted
(``no_agent``) and said in a warning. A payload that cannot be read gets HTTP 400 and a line
in the log; nothing else changes.

Stopping (Ctrl-C, SIGTERM) finishes the run: every trace not yet a sample becomes one (its
earliest span as its root), the journal is folded, the run's dataset (each sample's input,
no gold calls unless the spans hold them) and tools are written, and its status is
``complete``. ``collect`` with the id of a collected run (finished, or killed) goes on with
it: the received files are read again first, in the order their requests came
(:data:`ORDER_FILE`). Memory stays flat: a sample's spans are let go once it has been quiet
for :data:`LINGER` seconds, or is beyond the :data:`KEEP` latest (read again from the
received files if more of its trace comes); what stays per sample is its place in the run
and in the received files.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tcbreplay._importers.otel import samples as otel_samples
from tcbreplay._importers.otel import spans as otlp
from tcbreplay._importers.otel.calls import ToolRun
from tcbreplay._importers.otel.conversation import warn_resultless
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries
from tcbreplay._secrets import redact, scrub, shown_path
from tcbreplay._store.files import (
    DATASET_SHA256,
    file_record,
    replace_with,
    write_jsonl_atomic,
)
from tcbreplay._store.objects import is_remote
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DATASET, SAMPLES, new_manifest, sample_record, utcnow
from tcbreplay._store.writer import RunWriter, journal_line
from tcbreplay.errors import (
    DatasetError,
    InputError,
    StoreError,
    TcbReplayError,
    TraceError,
)

JSON_FILE = "received.otlp.jsonl"
PROTO_FILE = "received.otlp.pb"
# the order the requests came in across the two files: a letter a request kept, in the order
# they came (j: the next of JSON_FILE, p: of PROTO_FILE), written after the request itself
ORDER_FILE = "received.order"
_TAGS = {JSON_FILE: b"j", PROTO_FILE: b"p"}
SOURCE = "collect"
# seconds a sample's spans stay in memory after the last of them arrived (log records of
# the same flush may follow the spans), and at most how many samples' spans stay
LINGER = 2.0
KEEP = 2000
# at most this many bytes in one request (a batch of 512 large spans fits many times over)
MAX_BODY = 64 * 2**20
PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}

Log = Callable[[str], None]


@dataclass
class CollectSummary:
    """What a collection stored."""

    run_id: str
    run_dir: str
    samples: int
    spans: int
    requests: int
    refused: int
    status: str = "complete"
    earlier_requests: int = 0  # of the requests, those a collection before this one received
    unstored: int = 0  # traces received whose spans make no sample (each said in the log)
    # traces whose samples stay as made before spans of them came that make none (each said)
    stale: int = 0
    # traces of no agent's (no model call, tool run or agent span: an HTTP request's), left
    # out as import leaves them out, and the first of them (trace id, its root span's name)
    no_agent: int = 0
    first_no_agent: tuple[str, str] | None = None


@dataclass
class _Trace:
    """A trace while it arrives: its spans and log records (let go when idle), where its
    requests are in the received files, and the samples it has made."""

    spans: list[otlp.Span] = field(default_factory=list)
    logs: list[otlp.LogRecord] = field(default_factory=list)
    chunks: list[tuple[str, int, int]] = field(default_factory=list)  # (file, offset, size)
    built: bool = False
    loaded: bool = True
    seen: float = 0.0
    rank: int = 0  # how many traces came before it (its place in the received files)


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


class Collector:
    """The run a collection writes: what arrives goes to the received files, then into
    samples (see the module docstring). Thread-safe: one request at a time is written."""

    def __init__(
        self, store: Store, run_id: str, *, sample_by: str = "trace", log: Log | None = None
    ) -> None:
        if sample_by not in otel_samples.SAMPLE_BY:
            raise InputError(f"--sample-by {sample_by!r}: choose trace or agent")
        self.run_id = run_id
        self.sample_by = sample_by
        self.log: Log = log or (lambda line: None)
        # requests and spans of the run (earlier_requests: those received before this start)
        self.requests = self.refused = self.span_count = self.earlier_requests = 0
        self._lock = threading.Lock()
        self._finishing = False  # set (under the lock) once the run is being finished
        self._traces: dict[str, _Trace] = {}
        # the traces whose spans are in memory, the least recently added to first
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self._rows: dict[tuple[str, int], int] = {}  # (sample id, trial) -> its row
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
        self._per_sample: dict[str, set[int]] = {}  # the trials of each sample id
        # what made each row: its trace (or agent run); "" for a row the run held before
        self._made_by: dict[tuple[str, int], str] = {}
        self._unstored: dict[str, str] = {}  # traces whose spans made no sample: why
        # traces of no agent's so far (see otel_samples.holds_agent): their root span's name
        self._no_agent: dict[str, str] = {}
        # the tool runs without a result of each trace's samples as last built (said at the end)
        self._resultless: dict[str, list[ToolRun]] = {}
        # the values inside messages and tool calls redacted as credentials in the requests
        # this collection received (said when it finishes; see otlp.warn_content_redacted)
        self._content = otlp.Batch()
        self._stale: dict[str, str] = {}  # traces whose samples stay as they were made: why
        # each row's model calls' models (the run's model: the most common, as import's)
        self._models: dict[tuple[str, int], list[str]] = {}
        # the rows of the run before this start (a collection taken up again): their places,
        # kept; the places of new rows follow theirs
        self._held: dict[tuple[str, int], int] = {}
        self._twice: set[int] = set()  # held places of two rows (an earlier version's doing)
        self._next_index = 0
        self._writer = self._open(store)
        self.dir = self._writer.dir
        try:
            self._files = {name: (self.dir / name).open("ab") for name in (JSON_FILE, PROTO_FILE)}
            self._replay()
            self._files[ORDER_FILE] = (self.dir / ORDER_FILE).open("ab")
        except BaseException:
            self._writer.close()
            raise

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

    def _replay(self) -> None:
        """Read the received files of a run collected before (cut after their last whole
        request: a kill mid-write), rebuilding its samples."""
        from tcbreplay._store.journal import drop_torn_tail

        drop_torn_tail(self.dir / JSON_FILE)
        _drop_torn_frame(self.dir / PROTO_FILE)
        self._held = {key: r["sample_index"] for key, r in _held_rows(self.dir, ["sample_index"])}
        self._next_index = 1 + max(self._held.values(), default=-1)
        self._twice = {i for i, n in Counter(self._held.values()).items() if n > 1}
        chunks = self._arrived()
        for name, start, size in chunks:
            batch = self._decode_chunk(name, start, size)
            if batch is not None:
                self._take(batch, (name, start, size), time.monotonic())
                self._let_go(time.monotonic())
                self.requests += 1
                self.span_count += len(batch.spans)
        self.earlier_requests = self.requests
        if chunks:
            self.log(f"collect: {self.run_id}: {len(self._rows)} samples from the received files")
        # rows whose requests were not read again (skipped above) stay in the run as they are
        kept = {key for key in self._held if key not in self._rows}
        if kept:
            columns = ["input", "gold", "category"]
            latest = {k: r for k, r in _held_rows(self.dir, columns) if k in kept}
            for (sid, trial), r in latest.items():
                self._rows[(sid, trial)] = self._held[(sid, trial)]
                self._per_sample.setdefault(sid, set()).add(trial)
                self._made_by[(sid, trial)] = ""
                entry = {"id": sid, "input": r["input"], "target": r["gold"]}
                if r.get("category") is not None:
                    entry["category"] = r["category"]
                self._entries.setdefault(sid, entry)
            self.log(
                f"collect: {self.run_id}: {len(kept)} samples kept as the run holds them, their "
                "requests in the received files not read again (said above)"
            )

    def _arrived(self) -> list[tuple[str, int, int]]:
        """The requests of the received files (file, offset, size) in the order they came, as
        the order file tells it, which is then written whole: a request it does not name (the
        last, when a kill came between it and its letter; every one of a run collected before
        the file was kept) comes after those it names, JSON's first, and is said where both
        files hold such requests."""
        queues: dict[bytes, list[tuple[str, int, int]]] = {b"j": [], b"p": []}
        offset = 0
        with (self.dir / JSON_FILE).open("rb") as f:
            for line in f:
                queues[b"j"].append((JSON_FILE, offset, len(line)))
                offset += len(line)
        data = (self.dir / PROTO_FILE).read_bytes()
        at = 0
        while at + 4 <= len(data):
            size = int.from_bytes(data[at : at + 4], "big")
            queues[b"p"].append((PROTO_FILE, at + 4, size))
            at += 4 + size
        path = self.dir / ORDER_FILE
        said = path.read_bytes() if path.exists() else b""
        out = []
        taken = {b"j": 0, b"p": 0}
        for tag in (said[k : k + 1] for k in range(len(said))):
            if tag in taken and taken[tag] < len(queues[tag]):
                out.append(queues[tag][taken[tag]])
                taken[tag] += 1
        left = {tag: queues[tag][n:] for tag, n in taken.items()}
        if left[b"j"] and left[b"p"]:
            self.log(
                f"collect: {self.run_id}: {len(left[b'j']) + len(left[b'p'])} requests of the "
                f"received files are not in {ORDER_FILE} (a run collected before it was kept): "
                "read JSON's first, then protobuf's"
            )
        out += left[b"j"] + left[b"p"]
        tags = b"".join(_TAGS[name] for name, _, _ in out)
        if tags != said:
            replace_with(path, lambda tmp: tmp.write_bytes(tags))
        return out

    def _decode_chunk(self, name: str, start: int, size: int) -> otlp.Batch | None:
        with (self.dir / name).open("rb") as f:
            f.seek(start)
            body = f.read(size)
        try:
            if name == JSON_FILE:
                return otlp.decode_json(json.loads(body), f"{name} at byte {start}")
            return otlp.decode_proto(body, f"{name} at byte {start}")
        except (ValueError, TraceError) as exc:
            self.log(f"collect: {name} at byte {start}: skipped ({exc})")
            return None

    def receive(self, body: bytes, content_type: str, encoding: str = "") -> int:
        """One request's body: decoded, kept, made into samples; its number of spans. A
        :class:`TraceError` for a body that cannot be read (nothing is kept of it)."""
        coding = encoding.strip().lower()  # (content codings are case-insensitive: RFC 9110)
        if coding == "gzip":
            body = gunzip(body, MAX_BODY)
        elif coding not in ("", "identity"):
            raise TraceError(f"Content-Encoding {encoding!r}: send gzip or none")
        kind = content_type.split(";")[0].strip().lower()
        if kind == "application/json":
            body = body.removeprefix(b"\xef\xbb\xbf")  # (a BOM mid-file: a line import refuses)
            try:
                # OTLP/JSON is UTF-8; json.loads(bytes) takes UTF-16 and UTF-32 too, kept and
                # acknowledged, then unreadable from the received file
                doc = json.loads(body.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise TraceError(f"not UTF-8 JSON (OTLP/JSON is UTF-8; {exc})") from exc
            except (ValueError, RecursionError) as exc:
                raise TraceError(f"not JSON ({exc})") from exc
            batch = otlp.decode_json(doc, "request", whole=True)
            if batch.redacted:  # the request as kept: its secrets redacted (see decode_json)
                body = json.dumps(doc, ensure_ascii=False).encode()
            name, raw = JSON_FILE, body.replace(b"\r", b"").replace(b"\n", b"") + b"\n"
        elif kind in ("application/x-protobuf", "application/protobuf"):
            batch = otlp.decode_proto(body, "request", whole=True)
            body = batch.kept or body
            name, raw = PROTO_FILE, len(body).to_bytes(4, "big") + body
        else:
            raise TraceError(
                f"Content-Type {content_type!r}: send application/x-protobuf or application/json"
            )
        with self._lock:
            if self._finishing:  # a request on a connection still open as the collector stops
                raise BodyError(503, "the collector is stopping: send it again to the next one")
            if batch.content_redacted:
                number = self.requests - self.earlier_requests + 1
                self._content.content_redacted += batch.content_redacted
                self._content.first_content = self._content.first_content or (
                    batch.first_content.replace("request", f"request {number}", 1)
                )
            if not batch.spans and not batch.logs:  # ({}: nothing to keep, and a received
                self.requests += 1  # file's first line must be a request holding spans)
                return 0
            f = self._files[name]
            start = f.tell()
            f.write(raw)
            f.flush()  # kept: from here on a kill -9 loses nothing of it
            self._files[ORDER_FILE].write(_TAGS[name])  # (after it: a tag names a whole one)
            self._files[ORDER_FILE].flush()
            at = start + 4 if name == PROTO_FILE else start
            self._take(batch, (name, at, len(raw) - (4 if name == PROTO_FILE else 0)),
                       time.monotonic())  # fmt: skip
            self.requests += 1
            self.span_count += len(batch.spans)
            self._let_go(time.monotonic())
        return len(batch.spans)

    def _take(self, batch: otlp.Batch, chunk: tuple[str, int, int], now: float) -> None:
        touched: dict[str, _Trace] = {}
        for span in batch.spans:
            touched[span.trace_id] = self._trace(span.trace_id, chunk, now)
            touched[span.trace_id].spans.append(span)
        for log in batch.logs:
            touched[log.trace_id] = self._trace(log.trace_id, chunk, now)
            touched[log.trace_id].logs.append(log)
        for trace_id, trace in touched.items():
            if trace.built or any(not s.parent_id for s in trace.spans):
                self._build(trace_id, trace)

    def _trace(self, trace_id: str, chunk: tuple[str, int, int], now: float) -> _Trace:
        trace = self._traces.get(trace_id)
        if trace is None:
            trace = self._traces[trace_id] = _Trace(rank=len(self._traces))
        if not trace.loaded:  # let go earlier: read back what came before
            trace.loaded = True
            for name, start, size in trace.chunks:
                batch = self._decode_chunk(name, start, size)
                if batch is not None:
                    trace.spans += [s for s in batch.spans if s.trace_id == trace_id]
                    trace.logs += [g for g in batch.logs if g.trace_id == trace_id]
        if not trace.chunks or trace.chunks[-1] != chunk:
            trace.chunks.append(chunk)
        trace.seen = now
        self._loaded[trace_id] = None
        self._loaded.move_to_end(trace_id)
        return trace

    def _build(self, trace_id: str, trace: _Trace) -> None:
        """The trace's samples (again), appended to the journal."""
        spans = trace.spans
        if trace.logs:  # their records added to copies: the spans stay as they came
            spans = [replace(s, events=list(s.events)) for s in spans]
            otlp.attach_logs(spans, trace.logs)
        try:
            groups = otel_samples.groups(spans, self.sample_by)
            # (an HTTP request's trace, in a service whose every request is exported)
            agents = [g for g in groups if otel_samples.holds_agent(g)]
            if len(agents) < len(groups):
                self._no_agent.setdefault(trace_id, groups[0].root.name)
            else:
                self._no_agent.pop(trace_id, None)
            if not agents:
                return
            built = [otel_samples.build(g, self.sample_by, "received") for g in agents]
            claimed: dict[tuple[str, int], str] = {}
            for b in built:  # all of them or none (a sample of another trace is not replaced)
                self._claim(b, claimed)
        except TcbReplayError as exc:
            self._refuse(trace_id, trace.built, str(exc))
            return
        for b in built:
            self._store(b, trace_id)
        self._resultless[trace_id] = [r for b in built for r in b.resultless]
        self._unstored.pop(trace_id, None)
        self._stale.pop(trace_id, None)
        trace.built = True

    def _refuse(self, trace_id: str, stored: bool, why: str) -> None:
        """Say (once) why a trace's spans make no sample: one ``stored`` before keeps the
        samples it made then, without the spans that came since."""
        said = self._stale if stored else self._unstored
        if said.get(trace_id) != why:  # (not again as more of it comes, nor at the end)
            what = "kept as stored before: the spans of it that came since are not in the run"
            self.log(f"collect: trace {trace_id}: {what if stored else 'not stored'} ({why})")
        said[trace_id] = why

    def _claim(self, built: otel_samples.Built, claimed: dict[tuple[str, int], str]) -> None:
        """Number the trial of a sample built (its own, or the next its sample id has not):
        a :class:`TraceError` if another trace (or agent run) made that trial already."""
        line, group = built.line, built.group
        made_by = _made_by(group, self.sample_by)
        if otel_samples.TRIAL not in group.root.attributes:
            line.trial = self._trials.setdefault(
                f"{line.sample_id}\x00{made_by}", self._next_trial(line.sample_id, claimed)
            )
        key = (line.sample_id, line.trial)
        other = claimed.get(key, self._made_by.get(key, made_by))
        if other != made_by:
            held = f"{other} made it first" if other else "the run held it before this start"
            raise TraceError(
                f"sample {key} appears twice: {held}, and is kept; give each trace of a "
                f"sample a {otel_samples.TRIAL} of its own"
            )
        claimed[key] = made_by

    def _store(self, built: otel_samples.Built, trace_id: str) -> None:
        line = built.line
        root = built.group.root
        sid = line.sample_id
        made_by = _made_by(built.group, self.sample_by)
        key = (sid, line.trial)
        if key not in self._rows:
            self._rows[key] = self._index(key)
            self._per_sample.setdefault(sid, set()).add(line.trial)
            self._made_by[key] = made_by
        index = self._rows[key]
        self._models[key] = built.models
        entry = built.entry or {"id": sid, "input": built.input, "target": []}
        # the dataset entry: that of the sample's trace (agent run) that came first, as it is
        # now; every trial's row holds it (its input and gold), as import's rows do
        came = (self._traces[trace_id].rank, 0, "")
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

    def _let_go(self, now: float) -> None:
        """Let go of the spans of samples quiet for LINGER seconds, or beyond the KEEP most
        recent ones (oldest first)."""
        keep = len(self._loaded)
        for trace_id in list(self._loaded):
            trace = self._traces[trace_id]
            if now - trace.seen < LINGER and keep <= KEEP:
                break
            keep -= 1
            del self._loaded[trace_id]
            if trace.built:
                trace.spans, trace.logs, trace.loaded = [], [], False

    def finish(self) -> CollectSummary:
        """Every trace still without a sample made one, the journal folded, the dataset and
        tools written, the run complete and released."""
        with self._lock:
            self._finishing = True
            try:
                for trace_id, trace in list(self._traces.items()):
                    if not trace.built:
                        self._trace(trace_id, trace.chunks[-1], time.monotonic())
                        self._build(trace_id, trace)
                # rows written before their sample's entry changed (its first trace grew)
                stale = dict.fromkeys(
                    t for (sid, _), (t, e) in self._written.items() if e != self._entries[sid]
                )
                for trace_id in stale:
                    trace = self._trace(
                        trace_id, self._traces[trace_id].chunks[-1], time.monotonic()
                    )
                    self._build(trace_id, trace)
                for f in self._files.values():
                    f.close()
                self._writer.fold()
                entries = [self._entries[sid] for sid in dict.fromkeys(k[0] for k in self._rows)]
                write_jsonl_atomic(self.dir / DATASET, _normalised(entries, self.dir / DATASET))
                tools = otel_samples.tools_of(self._tools, self._called)
                manifest = self._writer.manifest
                manifest["dataset"] = {
                    **manifest["dataset"], "n_entries": len(entries),
                    DATASET_SHA256: file_record(self.dir / DATASET)["sha256"],
                }  # fmt: skip
                manifest["tools"] = {**manifest["tools"], "specs": tools}
                errors = 0
                from tcbreplay._store.runs import Run

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
            finally:
                self._writer.close()
        otlp.warn_content_redacted(self._content, "collect")
        if self._no_agent:
            (trace_id, root), n = next(iter(self._no_agent.items())), len(self._no_agent)
            otel_samples.warn_no_agent("collect", n, trace_id, root)
        if resultless := [(t, r) for t, runs in self._resultless.items() for r in runs]:
            warn_resultless("collect", len(resultless), *resultless[0])
        return CollectSummary(
            self.run_id,
            str(self.dir),
            len(self._rows),
            self.span_count,
            self.requests,
            self.refused,
            earlier_requests=self.earlier_requests,
            unstored=len(self._unstored),
            stale=len(self._stale),
            no_agent=len(self._no_agent),
            first_no_agent=next(iter(self._no_agent.items()), None),
        )

    def _model(self, model: dict[str, Any]) -> dict[str, Any]:
        """The manifest's model, named (as ``import`` names it) by the model most model
        calls answered with, when the spans name one; nothing to change otherwise."""
        counted = Counter(m for models in self._models.values() for m in models)
        if not counted:
            return {}
        name = scrub("model", counted.most_common(1)[0][0])
        return {"model": {**model, "id": name, "name": name}}

    def close(self) -> None:
        """Release the run unfinished (its samples stay in the journal)."""
        with self._lock:
            self._finishing = True
            for f in self._files.values():
                f.close()
            self._writer.close()


def _made_by(group: otel_samples.Group, sample_by: str) -> str:
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


def _drop_torn_frame(path: Path) -> None:
    """Cut a framed protobuf file after its last whole request."""
    if not path.exists():
        return
    data = path.read_bytes()
    at = 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        if at + 4 + size > len(data):
            break
        at += 4 + size
    if at != len(data):
        with path.open("rb+") as f:
            f.truncate(at)


class BodyError(Exception):
    """A request body that cannot be read: too large, or badly chunked."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def gunzip(body: bytes, limit: int) -> bytes:
    """A gzip body (of one member or more) decompressed, at most ``limit`` bytes of it: a
    :class:`BodyError` (413) past that, before more is made (a few MB of gzip can hold
    gigabytes), a :class:`TraceError` for what is not gzip."""
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data:
            member = zlib.decompressobj(wbits=31)
            while data and not member.eof:
                chunk = member.decompress(data, limit + 1 - size)
                size += len(chunk)
                if size > limit:
                    raise BodyError(413, f"a request of more than {limit} bytes once decompressed")
                out.append(chunk)
                data = member.unconsumed_tail
            if not member.eof:
                raise TraceError("not gzip data (cut short)")
            data = member.unused_data.lstrip(b"\x00")  # (padding after the last member)
    except zlib.error as exc:
        raise TraceError(f"not gzip data ({exc})") from exc
    return b"".join(out)


def read_body(rfile: Any, headers: Any, limit: int = MAX_BODY) -> bytes:
    """A request's body, by its ``Content-Length`` or in chunks (``Transfer-Encoding:
    chunked``, as OpenTelemetry's JavaScript exporters send it), at most ``limit`` bytes."""
    if "chunked" in (headers.get("Transfer-Encoding") or "").lower():
        parts: list[bytes] = []
        size = 0
        while True:
            line = rfile.readline(1024)
            size_text = line.split(b";")[0].strip()
            try:
                chunk = int(size_text, 16)
                if not size_text.isalnum():  # (int() takes a sign, and "_" between digits)
                    raise ValueError
            except ValueError:
                raise BodyError(400, f"a badly chunked body (chunk size {line[:20]!r})") from None
            if chunk == 0:
                while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            size += chunk
            if size > limit:
                raise BodyError(413, f"a request of more than {limit} bytes")
            parts.append(_whole(rfile, chunk))
            rfile.readline(1024)  # the chunk's CRLF
    given = (headers.get("Content-Length") or "0").strip()
    if not (given.isascii() and given.isdigit()):
        raise BodyError(400, f"Content-Length {given[:40]!r}: not a length")
    length = int(given)
    if length > limit:
        raise BodyError(413, f"a request of {length} bytes, more than {limit}")
    return _whole(rfile, length)


def _whole(rfile: Any, size: int) -> bytes:
    """The next ``size`` bytes of ``rfile``: a body that ends before (the client closed the
    connection, or sent less than it announced) is refused, never read as a request."""
    data = bytes(rfile.read(size))
    if len(data) < size:
        raise BodyError(400, f"the body ended after {len(data)} of its {size} bytes")
    return data


class _Handler(BaseHTTPRequestHandler):
    collector: Collector
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        kind = PATHS.get(self.path.split("?")[0])
        try:
            body = read_body(self.rfile, self.headers)
        except BodyError as exc:
            self.close_connection = True  # the rest of the body is not read
            self._refuse(exc.code, str(exc))
            return
        if kind is None:
            path = shown_path(self.path)  # (a query string may hold a key)
            self._refuse(404, f"no such path {path!r}: post to /v1/traces or /v1/logs")
            return
        try:
            spans = self.collector.receive(
                body,
                self.headers.get("Content-Type") or "",
                self.headers.get("Content-Encoding") or "",
            )
        except TraceError as exc:
            self._refuse(400, str(exc))
            return
        except BodyError as exc:
            self.close_connection = exc.code == 503  # (the collector stops: it takes no more)
            self._refuse(exc.code, str(exc))
            return
        except Exception as exc:  # a crash of ours must not end the receiver: say it, refuse
            self._refuse(500, f"{type(exc).__name__}: {exc}")
            raise
        self._answer(200, "", spans)

    def _not_posted(self) -> None:
        self.close_connection = True  # (a body it may have sent is not read)
        self._refuse(405, f"{self.command}: post OTLP export requests (POST /v1/traces)")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _not_posted

    def _refuse(self, code: int, why: str) -> None:
        why = redact(why)  # (it may quote a header or a value the client sent)
        self.collector.refused += 1
        self.collector.log(
            f"collect: {self.client_address[0]} {shown_path(self.path)}: refused ({code}): {why}"
        )
        self._answer(code, why)

    def _answer(self, code: int, message: str, spans: int = 0) -> None:
        proto = "protobuf" in (self.headers.get("Content-Type") or "")
        if code == 200:
            payload = b"" if proto else b"{}"
        else:
            payload = json.dumps({"code": 3, "message": message}).encode()
        self.send_response(code)
        ctype = "application/x-protobuf" if proto and code == 200 else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the collector logs what matters


class Receiver(ThreadingHTTPServer):
    """The OTLP/HTTP receiver of a collector, on ``host:port`` (port 0: any free one)."""

    daemon_threads = True
    # connections the kernel holds until they are accepted (socketserver's default, 5,
    # reset the connections of a burst of exporters, and lost their spans)
    request_queue_size = 1024

    def __init__(self, host: str, port: int) -> None:
        """Bound, but answering nothing until :meth:`serve` is given the collector: a port that
        cannot be had leaves the store as it was."""
        handler = type("Handler", (_Handler,), {})
        try:
            super().__init__((host, port), handler)
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self.collector: Collector | None = None

    def serve(self, collector: Collector) -> threading.Thread:
        """Answer requests into ``collector``, in a thread of its own (returned, started)."""
        self.collector = self.RequestHandlerClass.collector = collector  # type: ignore[attr-defined]
        serving = threading.Thread(target=self.serve_forever, args=(0.1,), daemon=True)
        serving.start()
        return serving

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone before its answer is a line of the log; anything else, a traceback."""
        exc = sys.exc_info()[1]
        if self.collector is not None and isinstance(
            exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
        ):
            self.collector.log(f"collect: {client_address[0]}: the client left ({exc})")
            return
        super().handle_error(request, client_address)

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"


def collect(
    store: Store,
    run_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 4318,
    sample_by: str = "trace",
    log: Log | None = None,
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> CollectSummary:
    """Receive OTLP/HTTP on ``host:port`` into the run ``run_id`` until ``stop`` is set or
    the process is interrupted (Ctrl-C, SIGTERM), then finish the run (see the module
    docstring). ``ready`` is told the endpoint once the receiver listens."""
    if is_remote(store.root):  # refused before anything is written
        raise InputError(
            "collect: a store on object storage cannot take what arrives as it arrives (the "
            "received payloads are appended to a file, which object storage has no way to do)",
            hint="collect into a local store (--store FOLDER), then copy the finished run's "
            "folder to object storage with its own tools",
        )
    receiver = Receiver(host, port)  # bound before the run is made or opened
    try:
        collector = Collector(store, run_id, sample_by=sample_by, log=log)
    except BaseException:
        receiver.server_close()
        raise
    serving = receiver.serve(collector)
    try:
        if ready is not None:
            ready(receiver.endpoint)
        stop = stop or threading.Event()
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass  # the way a collection ends
    finally:
        receiver.shutdown()
        receiver.server_close()
        serving.join()
    return collector.finish()
