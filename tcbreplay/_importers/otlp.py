"""OTLP trace files: an OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``),
JSON Lines of such requests (as the collector's file exporter and OpenTelemetry's JSON file
exporters write them; lines of logs requests, ``resourceLogs``, add their records to the spans
they name), or protobuf: one request as the OTLP/HTTP exporters post it, or the collector's
file exporter's proto format (each request after its size), read with ``opentelemetry-proto``
(the ``otel`` extra).

The spans' conventions (GenAI, OpenInference, the Vercel AI SDK) are read as
:mod:`tcbreplay._importers.otel.samples` says; a sample is a trace, or with
``--sample-by agent`` an outermost agent span. The files hold their samples: each one's input
(its first user message), no gold calls unless the file says (``export --format otlp``
writes them), and the tools its model calls were offered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile
from tcbreplay._importers.otel import otlp_proto
from tcbreplay._importers.otel import spans as otlp
from tcbreplay._importers.otel.otlp_json import read_json_lines
from tcbreplay._importers.otel.samples import read_samples
from tcbreplay.errors import TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

_PROTO_SUFFIXES = (".pb", ".binpb", ".protobuf", ".otlp", ".proto")


def sniff(file: TraceFile) -> Sniff:
    """OTLP/JSON's ``resourceSpans`` (or ``resourceLogs``) at the top of the file or of its
    first line; else protobuf's first bytes, surer with a protobuf file name."""
    top = file.top
    if isinstance(top, dict) and (otlp.SPANS_KEY in top or otlp.LOGS_KEY in top):
        return Sniff(1.0, "an OTLP/JSON export request (resourceSpans)")
    first = file.first_line
    if isinstance(first.value, dict) and (
        otlp.SPANS_KEY in first.value or otlp.LOGS_KEY in first.value
    ):
        return Sniff(1.0, "JSON Lines of OTLP/JSON export requests (resourceSpans)")
    shape = otlp_proto.looks_like_proto(file.head)
    if shape is not None and not _text(file.head):
        framed = "framed as the collector's file exporter writes them" if shape == "framed" else ""
        named = file.suffix.lower() in _PROTO_SUFFIXES
        reason = "OTLP protobuf " + (framed or "(an export request's first bytes)")
        return Sniff(0.9 if named or shape == "framed" else 0.5, reason)
    return Sniff.no("neither OTLP/JSON (resourceSpans) nor OTLP protobuf")


def _text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head


def read(
    file: TraceFile, inputs: BenchmarkInputs | None, *, sample_by: str = "trace"
) -> SourceTraces:
    """The file's spans as samples (see the module docstring)."""
    batch = read_batch(file.data, file.name)
    otlp.attach_logs(batch.spans, batch.logs)
    try:
        return read_samples(batch.spans, file.name, inputs, sample_by)
    finally:
        otlp.warn_content_redacted(batch, file.name)


def read_batch(data: bytes, label: str) -> otlp.Batch:
    """Every span and log record of an OTLP file, JSON or protobuf."""
    body = data.removeprefix(b"\xef\xbb\xbf")
    if body.lstrip()[:1] == b"{":
        return read_json_lines(body, label)
    if body.lstrip()[:1] == b"[":  # (else read as protobuf: "corrupt", which says nothing)
        raise TraceError(
            f"{label}: a JSON array, not an OTLP export request: OTLP/JSON is one request "
            '({"resourceSpans": [...]}) a file, or one a line (JSON Lines)',
            hint="write each request of the array on a line of its own",
        )
    if not body.strip():
        raise TraceError(f"{label}: the file is empty")
    _check_frames(data, label)
    return otlp_proto.read_proto(data, label)


def _check_frames(data: bytes, label: str) -> None:
    """Refuse, naming the request, a file framed as the collector's file exporter frames its
    requests (each after its size) whose framing breaks: read as one request, it was refused
    as protobuf's "Wire format was corrupt", naming none."""
    if otlp_proto.looks_like_proto(data[:5]) != "framed" or otlp_proto.framed(data) is not None:
        return
    at = k = 0
    while at + 4 <= len(data):
        size, k = int.from_bytes(data[at : at + 4], "big"), k + 1
        where = f"{label}: request {k} at byte {at}"
        if at + 4 + size > len(data):
            raise TraceError(
                f"{where} is cut short: {len(data) - at - 4} of its {size} bytes are there",
                hint="a file cut as it was written (collect taking the run up again drops such "
                f"a request: it was never acknowledged); the requests before it end at byte {at}",
            )
        if size and data[at + 4] != 0x0A:
            raise TraceError(f"{where}: not an OTLP protobuf export request")
        at += 4 + size
    raise TraceError(f"{label}: {len(data) - at} bytes after request {k}, too few for a size")
