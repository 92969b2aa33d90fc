"""Traces as they arrive at ``collect``, made into samples: a trace's spans and log records
held until its root has come, its samples built (again, as more of it comes) and handed to
the run; what makes none is said once and counted; quiet traces are let go of and read back
from the received files when more of them comes."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from tcbreplay._importers.otel import grouping
from tcbreplay._importers.otel import samples as otel_samples
from tcbreplay._importers.otel import spans as otlp
from tcbreplay._importers.otel.calls import ToolRun
from tcbreplay._importers.otel.collect_files import Log, ReceivedFiles
from tcbreplay._importers.otel.collect_run import CollectedRun
from tcbreplay.errors import TcbReplayError


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


class TraceSamples:
    """The traces received, made into the samples of ``run`` as they complete (their
    requests read back from ``received`` when let go of)."""

    def __init__(
        self, run: CollectedRun, received: ReceivedFiles, sample_by: str, log: Log
    ) -> None:
        self._run = run
        self._received = received
        self.sample_by = sample_by
        self.log = log
        self._traces: dict[str, _Trace] = {}
        # the traces whose spans are in memory, the least recently added to first
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self._unstored: dict[str, str] = {}  # traces whose spans made no sample: why
        # traces of no agent's so far (see grouping.holds_agent): their root span's name
        self._no_agent: dict[str, str] = {}
        # the tool runs without a result of each trace's samples as last built (said at the end)
        self._resultless: dict[str, list[ToolRun]] = {}
        self._stale: dict[str, str] = {}  # traces whose samples stay as they were made: why
        # the tool runs answering no call said of each trace (each said once, however often
        # its samples are made again)
        self._unmatched: dict[str, set[str]] = {}

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
                batch = self._received.read(name, start, size)
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
            groups = grouping.groups(spans, self.sample_by)
            # (an HTTP request's trace, in a service whose every request is exported)
            agents = [g for g in groups if grouping.holds_agent(g)]
            if len(agents) < len(groups):
                self._no_agent.setdefault(trace_id, groups[0].root.name)
            else:
                self._no_agent.pop(trace_id, None)
            if not agents:
                return
            built = [otel_samples.build(g, self.sample_by, "received") for g in agents]
            claimed: dict[tuple[str, int], str] = {}
            taken: dict[tuple[str, int], str] = {}  # trials named here that others held
            # all of them or none (a sample of another trace is not replaced); the runs naming
            # their trial first, so that those of this trace naming none take the trials they
            # leave, as import numbers them
            for b in sorted(built, key=lambda b: otel_samples.TRIAL not in b.group.root.attributes):
                self._run.claim(b, claimed, taken)
            moved = self._run.give_up(taken, set(self._stale))
        except TcbReplayError as exc:
            self._refuse(trace_id, trace.built, str(exc))
            return
        said = self._unmatched.setdefault(trace_id, set())
        for b in built:
            self._run.store(b, trace_id, trace.rank)
            otel_samples.warn_unmatched(
                b.line.place, [r for r in b.unmatched if r.span_id not in said]
            )
            said.update(r.span_id for r in b.unmatched)
        self._resultless[trace_id] = [r for b in built for r in b.resultless]
        self._unstored.pop(trace_id, None)
        self._stale.pop(trace_id, None)
        trace.built = True
        for other in moved:  # (under the first trial their sample has not now)
            self._build(other, self._trace(other, self._traces[other].chunks[-1], time.monotonic()))

    def _refuse(self, trace_id: str, stored: bool, why: str) -> None:
        """Say (once) why a trace's spans make no sample: one ``stored`` before keeps the
        samples it made then, without the spans that came since."""
        said = self._stale if stored else self._unstored
        if said.get(trace_id) != why:  # (not again as more of it comes, nor at the end)
            what = "kept as stored before: the spans of it that came since are not in the run"
            self.log(f"collect: trace {trace_id}: {what if stored else 'not stored'} ({why})")
        said[trace_id] = why

    def _build_rest(self) -> None:
        """Make a sample of every trace still without one (its earliest span as its root),
        and make again those whose trial was numbered in the order they came rather than the
        order they began, and those whose rows were written before their sample's entry
        changed."""
        for trace_id, trace in list(self._traces.items()):
            if not trace.built:
                self._trace(trace_id, trace.chunks[-1], time.monotonic())
                self._build(trace_id, trace)
        for trace_id in self._run.renumber(set(self._stale)):
            trace = self._trace(trace_id, self._traces[trace_id].chunks[-1], time.monotonic())
            self._build(trace_id, trace)
        for trace_id in self._run.outdated():
            trace = self._trace(trace_id, self._traces[trace_id].chunks[-1], time.monotonic())
            self._build(trace_id, trace)

    def _let_go(self, now: float, linger: float, keep_at_most: int) -> None:
        """Let go of the spans of samples quiet for ``linger`` seconds, or beyond the
        ``keep_at_most`` most recent ones (oldest first)."""
        keep = len(self._loaded)
        for trace_id in list(self._loaded):
            trace = self._traces[trace_id]
            if now - trace.seen < linger and keep <= keep_at_most:
                break
            keep -= 1
            del self._loaded[trace_id]
            if trace.built:
                trace.spans, trace.logs, trace.loaded = [], [], False
