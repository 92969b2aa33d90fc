"""Spans as every span dialect reads them: :class:`Span` (with the log records of an OTLP
logs request as events of the span they name), the :class:`Batch` a request decodes into, and
how a value read is kept (a secret's redacted and counted, a lone surrogate refused). The
requests are decoded by :mod:`.otlp_json` (OTLP/JSON, JSON Lines of it) and
:mod:`.otlp_proto` (protobuf).

Ids are lower-case hex, as OTLP/JSON writes them (protobuf's 16 and 8 bytes turned into 32
and 16 hex digits; OTLP/JSON written by protobuf's own JSON printer, base64, is read too).
Attribute values are plain Python values (an OTLP ``kvlistValue`` a dict, an ``arrayValue``
a list, ``bytesValue`` its base64 text).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tcbreplay import _json
from tcbreplay._scrub import scrub, scrub_content
from tcbreplay._secrets import REDACTED
from tcbreplay.errors import TcbReplayWarning, TraceError

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
# :func:`tcbreplay._scrub.scrub_content`, whose names are narrower than an attribute's (a
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


def scrubbed_text(value: str, batch: Batch) -> str:
    """A name or message a span is read with (its sample's metadata, its error), scrubbed as
    an attribute's value is; counted in ``batch``."""
    return scrubbed("", value, batch)


def scrubbed(name: str, value: Any, batch: Batch, content: str | None = None) -> Any:
    """A plain value of attribute ``name`` (a span's name or message: ``""``) as tcbreplay
    keeps it: by :func:`scrub`, or inside a conversation (``name`` one of :data:`CONTENT`,
    or a field of ``content``, the attribute or event holding it) by
    :func:`tcbreplay._scrub.scrub_content`; a redaction counted in ``batch``. Jaeger's
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


def iter_spans(batches: Iterable[Batch]) -> Iterator[Span]:
    for batch in batches:
        yield from batch.spans
