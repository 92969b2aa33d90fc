"""OTLP/JSON export requests (one a document, or JSON Lines of them) decoded into the spans
and log records of :mod:`tcbreplay._importers.otel.spans`, each secret's value redacted as it
is read (and, for a request kept whole, in the rest of the request too)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from typing import Any

from tcbreplay import _json
from tcbreplay._importers.otel.spans import (
    LOGS_KEY,
    SPANS_KEY,
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
from tcbreplay._secrets import redact
from tcbreplay.errors import TraceError


def decode_json(doc: Any, place: str, whole: bool = False) -> Batch:
    """An OTLP/JSON export request (traces or logs) as spans and log records. A secret's
    value is redacted (:func:`tcbreplay._scrub.scrub`) in the batch and in ``doc`` too."""
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
        name=scrubbed_text(str(raw.get("name") or ""), batch),
        start=_nanos(raw, "startTimeUnixNano"),
        end=_nanos(raw, "endTimeUnixNano"),
        attributes=_attributes(raw.get("attributes"), batch),
        events=[_json_event(e, batch) for e in _list(raw.get("events"))],
        status=int(code),
        status_message=scrubbed_text(str(status.get("message") or ""), batch),
        resource=resource,
        scope=scope,
    )


def _json_event(raw: dict[str, Any], batch: Batch) -> Event:
    name = str(raw.get("name") or "")
    attributes = _attributes(raw.get("attributes"), batch, event_content(name))
    return Event(scrubbed_text(name, batch), _nanos(raw, "timeUnixNano"), attributes)


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
    name = scrubbed_text(str(raw.get("eventName") or attributes.get("event.name") or ""), batch)
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
