"""Jaeger's JSON trace export, as its UI downloads a trace and its query API answers
(``/api/traces``): ``{"data": [{"traceID", "spans": [...], "processes": {...}}]}``, or one
such trace.

Each span: ``traceID``, ``spanID``, ``operationName``, its parent in ``references``
(``CHILD_OF``; else ``parentSpanID``), ``startTime`` and ``duration`` in microseconds,
``tags`` (``{key, type, value}``: the span's attributes), ``logs`` (its events: the field
``event`` names one, the others are its attributes) and the ``processID`` of its process
(``serviceName``). A failed span has the tag ``otel.status_code`` ``ERROR`` (or ``error``
true). The spans are read as :mod:`tcbreplay._importers.otel.samples` says, as the ``otlp``
dialect reads them, a secret's value redacted as that dialect redacts it (each tag, log field
and process tag by its key, names as texts: :func:`tcbreplay._scrub.scrub`); Jaeger v2's
OTLP answer (``/api/v3/traces``) is that dialect's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile
from tcbreplay._importers.otel.otlp_json import number
from tcbreplay._importers.otel.samples import read_samples
from tcbreplay._importers.otel.spans import (
    STATUS_ERROR,
    Batch,
    Event,
    Span,
    event_content,
    scrubbed,
    warn_content_redacted,
)
from tcbreplay._secrets import redact
from tcbreplay.errors import TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs


def sniff(file: TraceFile) -> Sniff:
    """A JSON object whose ``data`` is a list of traces with ``traceID`` and ``spans`` (or
    one such trace)."""
    top = file.top
    if isinstance(top, dict) and {"traceID", "spans"} <= top.keys():
        return Sniff(1.0, "a Jaeger trace (traceID and spans)")
    if not isinstance(top, dict) or "data" not in top:
        return Sniff.no("not a JSON object with data (Jaeger's traces)")
    data = top["data"]
    first = data[0] if isinstance(data, list) and data else None
    if isinstance(first, dict) and {"traceID", "spans"} <= first.keys():
        return Sniff(1.0, "a Jaeger trace export (data: traces with traceID and spans)")
    return Sniff.no("a JSON object with data, but not Jaeger's traces", close=True)


def read(
    file: TraceFile, inputs: BenchmarkInputs | None, *, sample_by: str = "trace"
) -> SourceTraces:
    """The export's spans as samples."""
    batch = Batch()
    spans = read_spans(file.data, file.name, batch)
    try:
        return read_samples(spans, file.name, inputs, sample_by)
    finally:
        warn_content_redacted(batch, file.name)


def read_spans(data: bytes, label: str, batch: Batch | None = None) -> list[Span]:
    """Every span of a Jaeger trace export, its secrets redacted (counted in ``batch``)."""
    batch = Batch() if batch is None else batch
    try:
        doc = _json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"{label}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    except _json.LimitError as exc:
        raise TraceError(f"{label}: {exc}", hint=_json.HINT) from None
    if isinstance(doc, dict) and "spans" in doc and "data" not in doc:
        doc = {"data": [doc]}  # one trace, as Jaeger's converters write it
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise TraceError(f'{label}: expected Jaeger\'s {{"data": [traces]}}')
    out: list[Span] = []
    for i, trace in enumerate(doc["data"]):
        place = f"{label}: data[{i}]"
        if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
            raise TraceError(f"{place}: a trace needs its spans")
        processes = trace.get("processes") or {}
        for j, raw in enumerate(trace["spans"]):
            batch.where = f"{place}: spans[{j}]"
            try:
                out.append(_span(raw, processes, batch))
            except (AttributeError, TypeError, ValueError, KeyError) as exc:
                # (redacted: an exception's text may quote a value, which may be a secret)
                detail = f"{type(exc).__name__}: {' '.join(redact(str(exc)).split())[:200]}"
                raise TraceError(f"{place}: spans[{j}]: not a Jaeger span ({detail})") from exc
    return out


def _span(raw: dict[str, Any], processes: dict[str, Any], batch: Batch) -> Span:
    parent = raw.get("parentSpanID") or ""
    trace_id = _hex(raw["traceID"], 32)
    for ref in raw.get("references") or []:
        # the parent: a CHILD_OF reference within the span's own trace
        same = not ref.get("traceID") or _hex(ref["traceID"], 32) == trace_id
        if ref.get("refType") == "CHILD_OF" and same:
            parent = ref.get("spanID") or ""
            break
    tags = _tags(raw.get("tags"), batch)
    status = 0
    if tags.get("otel.status_code") == "ERROR" or tags.get("error") is True:
        status = STATUS_ERROR
    start = int(raw.get("startTime") or 0) * 1000
    process = processes.get(str(raw.get("processID"))) or raw.get("process") or {}
    resource = _tags(process.get("tags"), batch)
    if process.get("serviceName"):
        resource["service.name"] = scrubbed("service.name", process["serviceName"], batch)
    events = []
    for log in raw.get("logs") or []:
        raw_fields = log.get("fields") or []
        named = next((f.get("value") for f in raw_fields if f.get("key") == "event"), None)
        fields = _tags(raw_fields, batch, event_content(str(named or "")))
        name = fields.pop("event", "")
        events.append(Event(str(name), int(log.get("timestamp") or 0) * 1000, fields))
    return Span(
        trace_id=trace_id,
        span_id=_hex(raw["spanID"], 16),
        parent_id=_hex(parent, 16) if parent else "",
        name=scrubbed("", str(raw.get("operationName") or ""), batch),
        start=start,
        end=start + int(raw.get("duration") or 0) * 1000,
        attributes=tags,
        events=events,
        status=status,
        status_message=str(tags.get("otel.status_description") or ""),
        resource=resource,
        scope=str(tags.get("otel.scope.name") or tags.get("otel.library.name") or ""),
    )


def _tags(items: Any, batch: Batch, content: str | None = None) -> dict[str, Any]:
    """Typed tags (``{key, type, value}``) as attributes, each value scrubbed by its key
    (``content``: inside a conversation, see :func:`scrubbed`)."""
    out: dict[str, Any] = {}
    for tag in items or []:
        value = tag.get("value")
        key = str(tag["key"])
        if tag.get("type") == "int64" and isinstance(value, str):
            value = number(value, int, key, batch, "int64 value")
        out[key] = scrubbed(key, value, batch, content)
    return out


def _hex(value: Any, width: int) -> str:
    """Jaeger writes ids in hex without leading zeros (a 64-bit trace id in 16 digits)."""
    text = str(value).lower()
    int(text, 16)  # a ValueError for an id that is not hex
    return text.rjust(width, "0")
