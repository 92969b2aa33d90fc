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
first, as ``import`` stores them; the traces of a sample are its trials in the order they
began, as ``import`` numbers them, once the run finishes); a trace that still makes none when
the run finishes is counted in the summary (``unstored``: the collection failed), and one
whose later spans make none keeps the samples it made before, counted too (``stale``). A trace
of no model call, tool run or agent span (an HTTP request's) makes no sample, as ``import``
makes none of it: counted (``no_agent``) and said in a warning. A payload that cannot be read
gets HTTP 400 and a line in the log; nothing else changes.

Stopping (Ctrl-C, SIGTERM) finishes the run: every trace not yet a sample becomes one (its
earliest span as its root), the journal is folded, the run's dataset (each sample's input,
no gold calls unless the spans hold them) and tools are written, and its status is
``complete``. ``collect`` with the id of a collected run (finished, or killed) goes on with
it: the received files are read again first, in the order their requests came
(:data:`.collect_files.ORDER_FILE`). Memory stays flat: a sample's spans are let go once it
has been quiet for :data:`LINGER` seconds, or is beyond the :data:`KEEP` latest (read again
from the received files if more of its trace comes); what stays per sample is its place in
the run and in the received files.

The parts, one module each: :mod:`.collect_http` receives and checks the requests,
:mod:`.collect_files` keeps them (and reads them back), :mod:`.collect_traces` makes the
traces into samples, :mod:`.collect_run` writes them into the run; this module joins them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tcbreplay._importers.otel import grouping
from tcbreplay._importers.otel import spans as otlp
from tcbreplay._importers.otel.collect_files import Log, ReceivedFiles
from tcbreplay._importers.otel.collect_http import MAX_BODY, BodyError, Receiver, decode_request
from tcbreplay._importers.otel.collect_run import CollectedRun
from tcbreplay._importers.otel.collect_traces import TraceSamples
from tcbreplay._importers.otel.conversation import warn_resultless
from tcbreplay._store.objects import is_remote
from tcbreplay._store.runs import Store
from tcbreplay._words import count
from tcbreplay.errors import InputError

# seconds a sample's spans stay in memory after the last of them arrived (log records of
# the same flush may follow the spans), and at most how many samples' spans stay
LINGER = 2.0
KEEP = 2000


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


class Collector(TraceSamples):
    """The run a collection writes: what arrives goes to the received files, then into
    samples (see the module docstring). Thread-safe: one request at a time is written."""

    def __init__(
        self, store: Store, run_id: str, *, sample_by: str = "trace", log: Log | None = None
    ) -> None:
        if sample_by not in grouping.SAMPLE_BY:
            raise InputError(f"--sample-by {sample_by!r}: choose trace or agent")
        self.run_id = run_id
        self.log: Log = log or (lambda line: None)
        # requests and spans of the run (earlier_requests: those received before this start)
        self.requests = self.refused = self.span_count = self.earlier_requests = 0
        self._lock = threading.Lock()
        self._finishing = False  # set (under the lock) once the run is being finished
        # the values inside messages and tool calls redacted as credentials in the requests
        # this collection received (said when it finishes; see otlp.warn_content_redacted)
        self._content = otlp.Batch()
        run = CollectedRun(store, run_id, sample_by)
        self.dir = run.dir
        try:
            received = ReceivedFiles(self.dir, run_id, self.log)
            super().__init__(run, received, sample_by, self.log)
            self._replay()
            received.open_order()
        except BaseException:
            run.close()
            raise

    def _replay(self) -> None:
        """Read the received files of a run collected before (cut after their last whole
        request: a kill mid-write), rebuilding its samples."""
        self._received.drop_torn_tails()
        self._run.take_up()
        chunks = self._received.arrived()
        for name, start, size in chunks:
            batch = self._received.read(name, start, size)
            if batch is not None:
                self._take(batch, (name, start, size), time.monotonic())
                self._let_go(time.monotonic(), LINGER, KEEP)
                self.requests += 1
                self.span_count += len(batch.spans)
        self.earlier_requests = self.requests
        if chunks:
            self.log(
                f"collect: {self.run_id}: {count(len(self._run.rows), 'sample')} from the "
                "received files"
            )
        # rows whose requests were not read again (skipped above) stay in the run as they are
        if kept := self._run.keep_held():
            self.log(
                f"collect: {self.run_id}: {count(kept, 'sample')} kept as stored in the run, "
                "requests in the received files not read again (said above)"
            )

    def receive(self, body: bytes, content_type: str, encoding: str = "") -> int:
        """One request's body: decoded, kept, made into samples; its number of spans. A
        :class:`TraceError` for a body that cannot be read (nothing is kept of it)."""
        batch, name, body = decode_request(body, content_type, encoding, MAX_BODY)
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
            chunk = self._received.append(name, body)
            self._take(batch, chunk, time.monotonic())
            self.requests += 1
            self.span_count += len(batch.spans)
            self._let_go(time.monotonic(), LINGER, KEEP)
        return len(batch.spans)

    def finish(self) -> CollectSummary:
        """Every trace still without a sample made one, the journal folded, the dataset and
        tools written, the run complete and released."""
        with self._lock:
            self._finishing = True
            try:
                self._build_rest()
                self._received.close()
                self._run.complete()
            finally:
                self._run.close()
        otlp.warn_content_redacted(self._content, "collect")
        if self._no_agent:
            (trace_id, root), n = next(iter(self._no_agent.items())), len(self._no_agent)
            grouping.warn_no_agent("collect", n, trace_id, root)
        if resultless := [(t, r) for t, runs in self._resultless.items() for r in runs]:
            warn_resultless("collect", len(resultless), *resultless[0])
        return CollectSummary(
            self.run_id,
            str(self.dir),
            len(self._run.rows),
            self.span_count,
            self.requests,
            self.refused,
            earlier_requests=self.earlier_requests,
            unstored=len(self._unstored),
            stale=len(self._stale),
            no_agent=len(self._no_agent),
            first_no_agent=next(iter(self._no_agent.items()), None),
        )

    def close(self) -> None:
        """Release the run unfinished (its samples stay in the journal)."""
        with self._lock:
            self._finishing = True
            self._received.close()
            self._run.close()


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
