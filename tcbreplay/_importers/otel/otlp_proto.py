"""OTLP protobuf export requests (one request, or the collector's file exporter's requests
each after its size) decoded into the spans and log records of
:mod:`tcbreplay._importers.otel.spans`, each secret's value redacted as it is read (and, for a
request kept whole, in the rest of the request too)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping
from typing import Any

from tcbreplay._importers.otel.spans import (
    OTEL_HINT,
    Batch,
    Event,
    LogRecord,
    Span,
    event_content,
    is_content,
    refuse_surrogates,
    scrubbed,
    scrubbed_text,
)
from tcbreplay._scrub import scrub
from tcbreplay.errors import InputError, TraceError


def proto_modules() -> tuple[Any, Any]:
    """OpenTelemetry's classes of the two export requests (the ``otel`` extra)."""
    try:
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError:
        raise InputError(
            "reading OTLP protobuf needs opentelemetry-proto", hint=OTEL_HINT
        ) from None
    return trace_service_pb2, logs_service_pb2


def framed(data: bytes) -> list[bytes] | None:
    """The requests of a file the collector's file exporter wrote in its proto format (each
    request after its size, 4 bytes big-endian), or None when ``data`` is not such a file."""
    out = []
    at = 0
    while at < len(data):
        if at + 4 > len(data):
            return None
        (size,) = struct.unpack_from(">I", data, at)
        at += 4
        if at + size > len(data) or (size and data[at] != 0x0A):
            return None
        out.append(data[at : at + size])
        at += size
    return out


def decode_proto(body: bytes, place: str, whole: bool = False) -> Batch:
    """One protobuf export request: of traces, or else of logs (the two share their first
    field's number, so a request is taken for a logs one when it holds no readable span)."""
    from google.protobuf.message import DecodeError

    traces_pb2, logs_pb2 = proto_modules()
    problem = None  # why the body is no traces request, when it is none
    try:
        request = traces_pb2.ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        request = None
        problem = str(exc)
    batch = Batch(where=place)
    if request is not None:
        # A logs request reads as a traces request whose "spans" (its log records) have no
        # ids (the fields that hold them in a span have other types in a log record): such
        # a request is read as logs below. A span with ids of other lengths is refused,
        # and so is the request that holds it: none of its spans is taken without it.
        idless = spans = 0
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    if len(s.trace_id) == 16 and len(s.span_id) == 8:
                        spans += 1
                    elif s.trace_id or s.span_id:
                        raise TraceError(
                            f"{place}: span {s.name!r} has a trace id of {len(s.trace_id)} "
                            f"bytes and a span id of {len(s.span_id)} (OTLP's are 16 and 8)"
                        )
                    else:
                        idless += 1
        if spans and idless:
            raise TraceError(f"{place}: {idless} span(s) of the request have no trace id "
                             "and no span id")  # fmt: skip
        if spans:
            if whole:  # the request is kept (collect's received file): every text of it
                _scrub_unread_proto(request, _READ_PROTO_TRACES, batch)
            for rs in request.resource_spans:
                batch.where = f"{place}: a resource"
                resource = _proto_attributes(rs.resource.attributes, batch)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        batch.where = f"{place}: span {s.span_id.hex()}"
                        batch.spans.append(_proto_span(s, resource, ss.scope.name, batch))
            refuse_surrogates(batch, place)
            if batch.redacted:
                batch.kept = request.SerializeToString()
            return batch
        batch = Batch(where=place)
    try:
        logs = logs_pb2.ExportLogsServiceRequest.FromString(body)
    except DecodeError as exc:
        raise TraceError(
            f"{place}: not an OTLP protobuf export request ({problem or exc})"
        ) from exc
    if whole:
        _scrub_unread_proto(logs, _READ_PROTO_LOGS, batch)
    for rl in logs.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                if len(r.trace_id) != 16 or len(r.span_id) != 8:
                    continue
                batch.where = f"{place}: a log record of span {r.span_id.hex()}"
                attributes = _proto_attributes(r.attributes, batch)
                name = getattr(r, "event_name", "") or attributes.get("event.name") or ""
                name = scrubbed_text(str(name), batch)
                content = event_content(name)
                body_value = (
                    _proto_value(r.body, "", batch, content) if r.HasField("body") else None
                )
                time = r.time_unix_nano or r.observed_time_unix_nano
                event = Event(str(name), time, attributes, body_value)
                batch.logs.append(LogRecord(r.trace_id.hex(), r.span_id.hex(), event))
    refuse_surrogates(batch, place)
    if batch.redacted:
        batch.kept = logs.SerializeToString()
    return batch


# the fields of a protobuf request's messages read apart (see otlp_json._READ_JSON), by message
_READ_PROTO_LOGS = {"LogRecord": ("attributes", "body")}
_READ_PROTO_TRACES = {
    "Span": ("attributes",),
    "Event": ("attributes",),
    "Resource": ("attributes",),
}


def _scrub_unread_proto(request: Any, read: Mapping[str, tuple[str, ...]], batch: Batch) -> None:
    """Scrub what of a protobuf request is not read as an attribute, in place (as
    ``otlp_json._scrub_unread_json`` does): each text field by its name, each ``KeyValue`` by
    its key; ``read``: the fields read apart, by message."""
    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message import Message

    stack = [request]
    while stack:
        message = stack.pop()
        kind = message.DESCRIPTOR.name
        if kind == "KeyValue":
            _proto_value(message.value, message.key, batch)
            continue
        skip = read.get(kind, ())
        for field_, value in message.ListFields():
            if field_.name in skip:
                continue
            if field_.type == FieldDescriptor.TYPE_MESSAGE:
                stack += [value] if isinstance(value, Message) else list(value)
            elif field_.type == FieldDescriptor.TYPE_STRING:
                texts = [value] if isinstance(value, str) else list(value)
                kept = [scrub(field_.name, text) for text in texts]
                changed = sum(a is not b for a, b in zip(kept, texts, strict=True))
                if not changed:
                    continue
                batch.redacted += changed
                if isinstance(value, str):
                    setattr(message, field_.name, kept[0])
                else:
                    value[:] = kept


def _proto_span(s: Any, resource: dict[str, Any], scope: str, batch: Batch) -> Span:
    return Span(
        trace_id=s.trace_id.hex(),
        span_id=s.span_id.hex(),
        parent_id=s.parent_span_id.hex(),
        name=scrubbed_text(s.name, batch),
        start=s.start_time_unix_nano,
        end=s.end_time_unix_nano,
        attributes=_proto_attributes(s.attributes, batch),
        events=[
            Event(
                scrubbed_text(e.name, batch),
                e.time_unix_nano,
                _proto_attributes(e.attributes, batch, event_content(e.name)),
            )
            for e in s.events
        ],
        status=s.status.code,
        status_message=scrubbed_text(s.status.message, batch),
        resource=resource,
        scope=scope,
    )


def _proto_attributes(items: Any, batch: Batch, content: str | None = None) -> dict[str, Any]:
    return {kv.key: _proto_value(kv.value, kv.key, batch, content) for kv in items}


def _proto_value(v: Any, name: str, batch: Batch, content: str | None = None) -> Any:
    """A protobuf ``AnyValue`` as ``otlp_json.any_value`` reads it, a secret's value redacted in
    ``v`` too."""
    if content is None and is_content(name):
        content = name
    kind = v.WhichOneof("value")
    if kind == "array_value":
        decoded: Any = [_proto_value(x, "", batch, content) for x in v.array_value.values]
    elif kind == "kvlist_value":
        decoded = _proto_attributes(v.kvlist_value.values, batch, content)
    elif kind == "bytes_value":
        decoded = base64.b64encode(v.bytes_value).decode("ascii")
    else:
        decoded = None if kind is None else getattr(v, kind)
    kept = scrubbed(name, decoded, batch, content)
    if kept is not decoded:
        v.string_value = kept
    return kept


def read_proto(data: bytes, label: str) -> Batch:
    """A protobuf file: one export request (as the OTLP/HTTP exporters post it), or the
    collector's file exporter's requests, each after its size."""
    parts = framed(data) if data[:1] == b"\x00" else None
    if parts is None:
        return decode_proto(data, label)
    batch = Batch()
    for k, part in enumerate(parts):
        batch.extend(decode_proto(part, f"{label}: request {k + 1}"))
    return batch


def looks_like_proto(head: bytes) -> str | None:
    """How ``head`` looks like protobuf export requests, or None: a request starts with its
    first field (``0x0A``, a length-delimited field 1) and that field's length."""
    if head[:1] == b"\x0a" and _varint_ok(head, 1):
        return "request"
    if len(head) >= 5 and head[:1] == b"\x00" and head[4:5] == b"\x0a":
        return "framed"
    return None


def _varint_ok(data: bytes, at: int) -> bool:
    return any(data[k] < 128 for k in range(at, min(at + 10, len(data))))
