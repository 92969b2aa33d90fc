"""Spans as every span dialect reads them: OTLP export requests (OTLP/JSON, JSON Lines of
them, protobuf) decoded into :class:`Span`, with the log records of an OTLP logs request as
events of the span they name.

Ids are lower-case hex, as OTLP/JSON writes them (protobuf's 16 and 8 bytes turned into 32
and 16 hex digits; OTLP/JSON written by protobuf's own JSON printer, base64, is read too).
Attribute values are plain Python values (an OTLP ``kvlistValue`` a dict, an ``arrayValue``
a list, ``bytesValue`` its base64 text).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tcbreplay import _json
from tcbreplay._secrets import REDACTED, redact, scrub, scrub_content
from tcbreplay.errors import InputError, TcbReplayWarning, TraceError

# what the two requests hold at their top
SPANS_KEY = "resourceSpans"
LOGS_KEY = "resourceLogs"
# the status code of a span that failed (OTLP's STATUS_CODE_ERROR)
STATUS_ERROR = 2
OTEL_HINT = "pip install 'tcbreplay[otel]'"
# The attributes that hold a conversation (its messages, the tool calls' arguments and
# results, the tools offered), in each convention read (GenAI's, OpenLLMetry's indexed
# gen_ai.prompt.N.*, OpenInference's, the Vercel AI SDK's), and the events whose attributes
# and body are a message (GenAI's per-message events): a credential in them is redacted by
# :func:`tcbreplay._secrets.scrub_content`, whose names are narrower than an attribute's (a
# tool's ``page_token`` argument is data, an ``api_key`` one is not), and counted apart, to
# be said (:func:`warn_content_redacted`): such a value no longer reads as it was written.
CONTENT = frozenset(
    {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
     "gen_ai.tool.definitions", "gen_ai.tool.description", "gen_ai.tool.call.arguments",
     "gen_ai.tool.call.result", "gen_ai.prompt", "gen_ai.completion", "gen_ai.event.content",
     "input.value", "output.value", "tool_call.function.arguments", "tool.parameters",
     "tool.description", "ai.prompt", "ai.prompt.messages", "ai.prompt.tools",
     "ai.response.text", "ai.response.toolCalls", "ai.response.object", "ai.toolCall.args",
     "ai.toolCall.input", "ai.toolCall.result", "ai.toolCall.output"}
)  # fmt: skip
_CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.",
                     "llm.output_messages.", "llm.tools.")  # fmt: skip
_CONTENT_EVENTS = "gen_ai."


def is_content(name: str) -> bool:
    """Whether attribute ``name`` holds a conversation (see :data:`CONTENT`)."""
    return name in CONTENT or name.startswith(_CONTENT_PREFIXES)


def event_content(name: str) -> str | None:
    """Where an event's attributes and body are a message (GenAI's per-message events),
    what to call them in a warning; else None."""
    return f"event {name}" if name.startswith(_CONTENT_EVENTS) else None


@dataclass(slots=True)
class Event:
    """A span event, or a log record about the span (``body`` set)."""

    name: str
    time: int
    attributes: dict[str, Any]
    body: Any = None


@dataclass(slots=True)
class Span:
    """One span: its ids (hex; ``parent_id`` empty for a root), name, times (ns since the
    epoch), attributes, events, status and where it came from (its resource's attributes
    and its instrumentation scope)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    status: int = 0
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""

    def failure(self) -> tuple[str, str | None] | None:
        """Why the span failed and the error's type, or None when it did not: failed spans
        have status ERROR or (GenAI's convention) an ``error.type``; the reason is the
        status message, else the ``exception`` event's message, else the type."""
        error_type = self.attributes.get("error.type")
        if self.status != STATUS_ERROR and error_type is None:
            return None
        exception = next((e for e in self.events if e.name == "exception"), None)
        detail = exception.attributes if exception is not None else {}
        error_type = error_type if error_type is not None else detail.get("exception.type")
        kind = None if error_type is None else str(error_type)
        why = self.status_message or detail.get("exception.message") or kind
        return (str(why) if why else "the span failed"), kind

    @property
    def duration_s(self) -> float | None:
        return (self.end - self.start) / 1e9 if self.end >= self.start > 0 else None


@dataclass(slots=True)
class LogRecord:
    """A log record (an OTLP event) and the span it belongs to."""

    trace_id: str
    span_id: str
    event: Event


@dataclass
class Batch:
    """What one request (or a whole file) holds: spans, and log records about spans."""

    spans: list[Span] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)
    # how many attribute values were secrets, redacted in the batch and in the request read
    # (an OTLP/JSON document is changed in place; a protobuf one is ``kept``, encoded again)
    redacted: int = 0
    kept: bytes | None = None
    # of those, the values inside messages and tool calls (is_content), and where the first
    # was; ``where``: the place of the span (log record) being read
    content_redacted: int = 0
    first_content: str = ""
    where: str = ""

    def extend(self, other: Batch) -> None:
        self.spans.extend(other.spans)
        self.logs.extend(other.logs)
        self.redacted += other.redacted
        self.content_redacted += other.content_redacted
        self.first_content = self.first_content or other.first_content


def warn_content_redacted(batch: Batch, label: str) -> None:
    """Say in one warning how many values inside the messages and tool calls of ``label``
    were redacted as credentials, and where the first was (a tool call's argument so
    redacted no longer matches its gold value)."""
    if not batch.content_redacted:
        return
    first = batch.first_content.removeprefix(f"{label}: ")
    warnings.warn(
        TcbReplayWarning(
            f"{label}: {batch.content_redacted} value(s) inside messages or tool calls held a "
            f"credential and are stored as {REDACTED}, the first at {first} (an argument so "
            "redacted no longer matches its gold value)"
        ),
        stacklevel=2,
    )


def attach_logs(spans: Iterable[Span], logs: Iterable[LogRecord]) -> None:
    """Add each log record to the events of the span it names (records of no span given
    are left out: no sample holds them)."""
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    for log in logs:
        span = by_id.get((log.trace_id, log.span_id))
        if span is not None:
            span.events.append(log.event)
    for span in by_id.values():
        if len(span.events) > 1:
            span.events.sort(key=lambda e: e.time)


# ---- OTLP/JSON


def decode_json(doc: Any, place: str, whole: bool = False) -> Batch:
    """An OTLP/JSON export request (traces or logs) as spans and log records. A secret's
    value is redacted (:func:`tcbreplay._secrets.scrub`) in the batch and in ``doc`` too."""
    if doc == {}:  # an export request of nothing (protobuf's empty request, written as JSON)
        return Batch()
    if not isinstance(doc, dict) or not (SPANS_KEY in doc or LOGS_KEY in doc):
        raise TraceError(f"{place}: not an OTLP export request (no {SPANS_KEY} nor {LOGS_KEY})")
    batch = Batch(where=place)
    try:
        if whole:  # the document is kept (collect's received file): every text of it
            _scrub_unread_json(doc, batch)
        for rs in _list(doc.get(SPANS_KEY)):
            batch.where = f"{place}: a resource"
            resource = _attributes((rs.get("resource") or {}).get("attributes"), batch)
            for ss in _list(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")):
                scope = str(
                    (ss.get("scope") or ss.get("instrumentationLibrary") or {}).get("name") or ""
                )
                for raw in _list(ss.get("spans")):
                    batch.spans.append(_json_span(raw, resource, scope, batch, place))
        for rl in _list(doc.get(LOGS_KEY)):
            for sl in _list(rl.get("scopeLogs") or rl.get("instrumentationLibraryLogs")):
                for raw in _list(sl.get("logRecords")):
                    log = _json_log(raw, batch, place)
                    if log is not None:
                        batch.logs.append(log)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # (redacted: an exception's text may quote a value, and the value may be a secret)
        detail = f"{type(exc).__name__}: {' '.join(redact(str(exc)).split())[:200]}"
        raise TraceError(f"{place}: not a readable OTLP export request ({detail})") from exc
    refuse_surrogates(batch, place)
    return batch


# What a request holds beside the attributes its spans and log records are read with: names,
# status messages, scopes and their attributes, links, a log request's resource, fields
# unknown here. Each text in it is scrubbed as an attribute's value is (:func:`scrub`, by its
# field's name), each attribute in it by its key, so that a received file keeps no secret (the
# attributes read are scrubbed as they are read, once). The fields read apart, by level:
_READ_JSON = {"spans": ("attributes", "events"), "events": ("attributes",),
              "logRecords": ("attributes", "body")}  # fmt: skip
_NESTED_JSON = ("scopeSpans", "instrumentationLibrarySpans", "spans", "events", "scopeLogs",
                "instrumentationLibraryLogs", "logRecords")  # fmt: skip
# fields whose value is an id or a number (one of any other form is refused as it is read):
# no secret fits them, and they are most of a span's fields
_PLAIN_JSON = frozenset(
    {"traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano",
     "timeUnixNano", "observedTimeUnixNano", "kind", "flags", "droppedAttributesCount",
     "droppedEventsCount", "droppedLinksCount", "severityNumber"}
)  # fmt: skip


def _scrub_unread_json(doc: dict[str, Any], batch: Batch) -> None:
    """Scrub what of an OTLP/JSON request is not read as an attribute (see above)."""
    levels = [(kind, item) for kind in (SPANS_KEY, LOGS_KEY) for item in _items(doc.get(kind))]
    while levels:
        kind, node = levels.pop()
        read = _READ_JSON.get(kind, ())
        for key, value in node.items():
            if key in _NESTED_JSON:  # a level below, whose own fields are seen to there
                level = key.replace("instrumentationLibrary", "scope")
                levels += [(level, item) for item in _items(value)]
                continue
            if key in read or key in _PLAIN_JSON:
                continue
            if kind == SPANS_KEY and key == "resource" and isinstance(value, dict):
                rest = {k: v for k, v in value.items() if k != "attributes"}
                value.update(_scrub_tree(rest, batch))  # (its attributes are read)
            else:
                node[key] = _scrub_tree(value, batch, key)


def _text(value: str, batch: Batch) -> str:
    """A name or message a span is read with (its sample's metadata, its error), scrubbed as
    an attribute's value is; counted in ``batch``."""
    return scrubbed("", value, batch)


def scrubbed(name: str, value: Any, batch: Batch, content: str | None = None) -> Any:
    """A plain value of attribute ``name`` (a span's name or message: ``""``) as tcbreplay
    keeps it: by :func:`scrub`, or inside a conversation (``name`` one of :data:`CONTENT`,
    or a field of ``content``, the attribute or event holding it) by
    :func:`tcbreplay._secrets.scrub_content`; a redaction counted in ``batch``. Jaeger's
    tags are read with it too."""
    if content is None and is_content(name):
        content = name
    if content is None:
        kept = scrub(name, value)
    else:
        kept = scrub_content(name, value)
        if kept is not value:
            batch.content_redacted += 1
            if not batch.first_content:
                batch.first_content = f"{batch.where}: {content}" if batch.where else content
    batch.redacted += int(kept is not value)
    return kept


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _scrub_tree(value: Any, batch: Batch, name: str = "") -> Any:
    """``value`` (JSON) with each text scrubbed by the name of its field, and each OTLP
    attribute (``{"key": K, "value": {...}}``) by its key, in place (a text: the text kept);
    counted in ``batch``. (A loop: a request may nest as deep as JSON lets it.)"""
    if isinstance(value, str):
        kept = scrub(name, value)
        batch.redacted += int(kept is not value)
        return kept
    stack: list[tuple[Any, str]] = [(value, name)]
    while stack:
        node, field_name = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("key"), str) and isinstance(node.get("value"), dict):
                any_value(node["value"], node["key"], batch)
                continue
            places: Iterable[tuple[Any, str]] = ((k, k) for k in node)
        elif isinstance(node, list):
            places = ((k, field_name) for k in range(len(node)))
        else:
            continue
        for place, named in places:
            item = node[place]
            if isinstance(item, str):
                kept = scrub(named, item)
                if kept is not item:
                    node[place] = kept
                    batch.redacted += 1
            elif isinstance(item, dict | list):
                stack.append((item, named))
    return value


# an escape of a UTF-16 surrogate in JSON text a value holds (at any depth of escaping)
_SURROGATE_TEXT = re.compile(r"\\+u[dD][89a-fA-F]")


def refuse_surrogates(batch: Batch, place: str) -> None:
    """Refuse a batch holding a lone surrogate, which UTF-8 (and so the store) cannot hold:
    in a span's or log record's values, or in JSON text a value holds (the messages of GenAI
    spans); named by its span."""
    held: list[tuple[str, Any]] = [
        (f"span {span.span_id}", (span.name, span.status_message, span.attributes,
                                  [(e.name, e.attributes, e.body) for e in span.events]))
        for span in batch.spans
    ]  # fmt: skip
    for log in batch.logs:
        event = log.event
        held.append((f"a log record of span {log.span_id}", (event.name, event.attributes,
                                                              event.body)))  # fmt: skip
    for where, value in held:
        surrogate = _surrogate(value)
        if surrogate:
            raise TraceError(
                f"{place}: {where}: holds a lone surrogate {surrogate}, which is not valid Unicode"
            )


def _surrogate(value: Any) -> str | None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list | tuple):
            stack += item
        elif isinstance(item, str) and not item.isascii():
            found = _json.lone_surrogate(item)
            if found:
                return found
        if isinstance(item, str) and "\\u" in item and _SURROGATE_TEXT.search(item):
            try:
                inner = json.loads(item)
            except ValueError:
                continue
            found = _json.lone_surrogate(inner)
            if found:
                return found
            stack.append(inner)
    return None


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    return value


def _json_span(
    raw: dict[str, Any], resource: dict[str, Any], scope: str, batch: Batch, place: str
) -> Span:
    status = raw.get("status") or {}
    code = status.get("code", 0)
    if isinstance(code, str):  # the enum's name, as protobuf's JSON printer writes it
        code = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
    trace_id, span_id = _hex_id(raw.get("traceId"), 16), _hex_id(raw.get("spanId"), 8)
    if not trace_id or not span_id:  # (its messages would be left out of its trace's sample)
        name = json.dumps(str(raw.get("name") or ""))
        raise ValueError(f"span {name} has no {'traceId' if not trace_id else 'spanId'}")
    batch.where = f"{place}: span {span_id}"
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_hex_id(raw.get("parentSpanId"), 8),
        name=_text(str(raw.get("name") or ""), batch),
        start=_nanos(raw, "startTimeUnixNano"),
        end=_nanos(raw, "endTimeUnixNano"),
        attributes=_attributes(raw.get("attributes"), batch),
        events=[_json_event(e, batch) for e in _list(raw.get("events"))],
        status=int(code),
        status_message=_text(str(status.get("message") or ""), batch),
        resource=resource,
        scope=scope,
    )


def _json_event(raw: dict[str, Any], batch: Batch) -> Event:
    name = str(raw.get("name") or "")
    attributes = _attributes(raw.get("attributes"), batch, event_content(name))
    return Event(_text(name, batch), _nanos(raw, "timeUnixNano"), attributes)


def _nanos(raw: dict[str, Any], key: str) -> int:
    """A time in nanoseconds since 1970 (OTLP's fixed64): 0 when absent, a ValueError (the
    request is not readable) beyond the field's range."""
    value = int(raw.get(key) or 0)
    if not 0 <= value < 2**64:
        raise ValueError(f"{key} {value} is no time (nanoseconds since 1970, below 2**64)")
    return value


def _json_log(raw: dict[str, Any], batch: Batch, place: str) -> LogRecord | None:
    trace_id = _hex_id(raw.get("traceId"), 16)
    span_id = _hex_id(raw.get("spanId"), 8)
    if not trace_id or not span_id:
        return None
    batch.where = f"{place}: a log record of span {span_id}"
    attributes = _attributes(raw.get("attributes"), batch)
    name = _text(str(raw.get("eventName") or attributes.get("event.name") or ""), batch)
    time = _nanos(raw, "timeUnixNano") or _nanos(raw, "observedTimeUnixNano")
    content = event_content(name)
    body = any_value(raw["body"], "", batch, content) if raw.get("body") else None
    return LogRecord(trace_id, span_id, Event(str(name), time, attributes, body))


def _attributes(items: Any, batch: Batch, content: str | None = None) -> dict[str, Any]:
    """OTLP key-value pairs as a dict (``content``: inside a conversation, see
    :func:`scrubbed`)."""
    out: dict[str, Any] = {}
    for item in _list(items):
        key = str(item["key"])
        out[key] = any_value(item.setdefault("value", {}) or {}, key, batch, content)
    return out


def any_value(value: dict[str, Any], name: str, batch: Batch, content: str | None = None) -> Any:
    """An OTLP/JSON ``AnyValue`` (of an attribute ``name``) as a Python value; a secret's
    value redacted (:func:`scrubbed`), in ``value`` too, and counted in ``batch``."""
    if content is None and is_content(name):
        content = name
    if "stringValue" in value:
        decoded = value["stringValue"]
    elif "intValue" in value:
        decoded = number(value["intValue"], int, name, batch)
    elif "doubleValue" in value:
        decoded = number(value["doubleValue"], float, name, batch)
    elif "boolValue" in value:
        decoded = bool(value["boolValue"])
    elif "arrayValue" in value:
        items = _list((value["arrayValue"] or {}).get("values"))
        decoded = [any_value(v, "", batch, content) for v in items]
    elif "kvlistValue" in value:
        decoded = _attributes((value["kvlistValue"] or {}).get("values"), batch, content)
    elif "bytesValue" in value:
        decoded = value["bytesValue"]
    else:
        decoded = None
    kept = scrubbed(name, decoded, batch, content)
    if kept is not decoded:
        value.clear()
        value["stringValue"] = kept
    return kept


def number(
    raw: Any, kind: type[int] | type[float], name: str, batch: Batch, field_: str = ""
) -> Any:
    """An attribute's ``intValue`` (``doubleValue``; ``field_``: what the format calls it) as
    ``kind``; a :class:`TraceError` naming the span and the attribute, not the value (an
    attribute may hold a secret, as a ``db.password`` whose value is no number does), for
    one that is none."""
    try:
        return kind(raw)
    except (TypeError, ValueError, OverflowError):
        what = f"attribute {name!r}" if name else "an attribute's array item"
        field_ = field_ or ("intValue" if kind is int else "doubleValue")
        expected = "an integer" if kind is int else "a number"
        raise TraceError(
            f"{batch.where}: {what}: its {field_} is not {expected} (the value is not shown)"
        ) from None


def _hex_id(value: Any, size: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex: OTLP/JSON writes hex;
    protobuf's JSON printer, base64. Empty for none."""
    if not value:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"an id must be a string, not {type(value).__name__}")
    if len(value) == 2 * size:
        try:
            int(value, 16)
        except ValueError:
            pass
        else:
            return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise ValueError(
            f"id {value!r} is neither {2 * size} hex digits nor {size} bytes in base64"
        )
    return raw.hex()


def read_json_lines(data: bytes, label: str) -> Batch:
    """A file of OTLP/JSON export requests, one a line (as the collector's file exporter and
    OpenTelemetry's JSON file exporters write them), or one request (a whole document).
    Lines are read one at a time from the bytes (a large file is not copied as text)."""
    batch = Batch()
    body = data.removeprefix(b"\xef\xbb\xbf")
    stripped = body.strip()
    if stripped.startswith(b"{") and b"\n" in stripped:
        try:  # a request written over several lines (pretty-printed)
            doc = _json.parse(stripped)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict):
            return decode_json(doc, label)
    for lineno, line in _lines(body):
        place = f"{label}: line {lineno}"
        # json's own reader: a request holds thousands of brackets, so the limits' walk over
        # it would cost more than the reading; what the spans hold as JSON text (messages,
        # arguments) is read within the limits, and stored messages are bounded
        try:
            doc = _json.parse(line)
        except UnicodeDecodeError as exc:
            raise TraceError(f"{place}: not UTF-8 text") from exc
        except json.JSONDecodeError as exc:
            raise TraceError(f"{place}: not valid JSON: {exc.msg}") from exc
        except (ValueError, RecursionError) as exc:
            raise TraceError(f"{place}: {_json.HINT} ({type(exc).__name__})") from None
        batch.extend(decode_json(doc, place))
    return batch


def _lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The lines of ``data`` that are not blank, with their numbers."""
    at, lineno = 0, 0
    while at < len(data):
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        lineno += 1
        line = data[at:end]
        at = end + 1
        if line.strip():
            yield lineno, line


# ---- protobuf


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
                name = _text(str(name), batch)
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


# the fields of a protobuf request's messages read apart (see _READ_JSON), by message
_READ_PROTO_LOGS = {"LogRecord": ("attributes", "body")}
_READ_PROTO_TRACES = {
    "Span": ("attributes",),
    "Event": ("attributes",),
    "Resource": ("attributes",),
}


def _scrub_unread_proto(request: Any, read: Mapping[str, tuple[str, ...]], batch: Batch) -> None:
    """Scrub what of a protobuf request is not read as an attribute, in place (as
    :func:`_scrub_unread_json` does): each text field by its name, each ``KeyValue`` by its
    key; ``read``: the fields read apart, by message."""
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
        name=_text(s.name, batch),
        start=s.start_time_unix_nano,
        end=s.end_time_unix_nano,
        attributes=_proto_attributes(s.attributes, batch),
        events=[
            Event(
                _text(e.name, batch),
                e.time_unix_nano,
                _proto_attributes(e.attributes, batch, event_content(e.name)),
            )
            for e in s.events
        ],
        status=s.status.code,
        status_message=_text(s.status.message, batch),
        resource=resource,
        scope=scope,
    )


def _proto_attributes(items: Any, batch: Batch, content: str | None = None) -> dict[str, Any]:
    return {kv.key: _proto_value(kv.value, kv.key, batch, content) for kv in items}


def _proto_value(v: Any, name: str, batch: Batch, content: str | None = None) -> Any:
    """A protobuf ``AnyValue`` as :func:`any_value` reads it, a secret's value redacted in
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


def iter_spans(batches: Iterable[Batch]) -> Iterator[Span]:
    for batch in batches:
        yield from batch.spans
