"""A run as OTLP/JSON with the current GenAI conventions (``export --format otlp``), which the
``otlp`` dialect reads back as the same run.

Each stored trial is a trace (its id drawn from the run id, sample id and trial): an
``invoke_agent`` span holding what the conventions have no place for (``tcbreplay.sample_id``,
``tcbreplay.trial``, the dataset entry as ``tcbreplay.entry``, the trial's own metadata as
``tcbreplay.metadata``), the run's tools (``gen_ai.tool.definitions``), the agent's input and
messages (``gen_ai.input.messages``, ``gen_ai.output.messages``) and how it ended (an error:
the span's status, ``error.type``); under it a ``chat`` span per model answer (the messages
before it, sent; the answer, with its id, model and token counts) and an ``execute_tool``
span per tool result, each as long as its latency. The file is JSON Lines, a request of up
to :data:`BATCH` traces a line, as the collector's file exporter writes them.

A message after a trial's last model answer that is no tool result (a user's last word, such
as τ²-bench's ``###TRANSFER###``) was sent to no model call, and no span holds it: such
messages are counted (:class:`Unsent`), for the export to say.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tcbreplay._importers.otel.grouping import SAMPLE_ID
from tcbreplay._importers.otel.samples import ENTRY, METADATA, TRIAL
from tcbreplay._importers.otel.spans import STATUS_ERROR

BATCH = 100
SCOPE = "tcbreplay"
_OK, _ERROR = 0, STATUS_ERROR
_KIND_INTERNAL, _KIND_CLIENT = 1, 3


@dataclass
class Unsent:
    """The messages no span holds (after their trial's last model answer, no tool result):
    how many, and the trial of the first (``sample S, trial T``)."""

    count: int = 0
    first: str = ""


def requests(
    run_id: str,
    traces: Iterable[dict[str, Any]],
    entries: Mapping[str, dict[str, Any]],
    tools: list[dict[str, Any]],
    model: str | None,
    unsent: Unsent | None = None,
) -> Iterator[dict[str, Any]]:
    """The run's trials as OTLP/JSON export requests of up to :data:`BATCH` traces.

    ``traces``: :func:`tcbreplay._store.export.run_traces`' rows (taken one by one, so a
    run's are read as they are written), each with its ``started_at`` (ISO text or None) and
    ``latencies`` (a message's latency or None, by position); ``entries``: the dataset
    entries by sample id; ``tools``: the run's tools; ``unsent`` is given the messages no
    span holds."""
    unsent = Unsent() if unsent is None else unsent
    resource = {"attributes": [_kv("service.name", "tcbreplay"), _kv("tcbreplay.run_id", run_id)]}
    definitions = json.dumps(
        [{"type": "function", **tool} for tool in tools], ensure_ascii=False, separators=(",", ":")
    )
    spans: list[dict[str, Any]] = []
    for k, trace in enumerate(traces, 1):
        spans.extend(
            _trace_spans(run_id, trace, entries[trace["sample_id"]], definitions, model, unsent)
        )
        if k % BATCH == 0:
            yield _request(resource, spans)
            spans = []
    if spans:
        yield _request(resource, spans)


def _request(resource: dict[str, Any], spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": {"name": SCOPE}, "spans": spans}]}
        ]
    }


def _trace_spans(
    run_id: str,
    trace: dict[str, Any],
    entry: dict[str, Any],
    definitions: str,
    model: str | None,
    unsent: Unsent,
) -> list[dict[str, Any]]:
    sample_id, trial = trace["sample_id"], trace["trial"]
    seed = hashlib.sha256(f"{run_id}\x00{sample_id}\x00{trial}".encode()).hexdigest()
    trace_id = seed[:32]
    ids = (hashlib.sha256(f"{seed}{n}".encode()).hexdigest()[:16] for n in range(1 << 30))
    root_id = next(ids)
    start = _nanos(trace.get("started_at"))
    clock = start
    messages = trace["messages"]
    latencies = trace.get("latencies") or [None] * len(messages)
    children: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []
    first_ai = next((k for k, m in enumerate(messages) if m.get("type") == "ai"), len(messages))
    given = [_genai_message(m) for m in messages[:first_ai]]
    for m, latency in zip(messages, latencies, strict=True):
        kind, data = m.get("type"), m.get("data") or {}
        took = round(latency * 1e9) if latency is not None else 0
        if kind == "ai":
            out = _genai_message(m)
            attributes = [
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.input.messages", _dumps(sent)),
                _kv("gen_ai.output.messages", _dumps([out])),
            ]
            if data.get("id"):
                attributes.append(_kv("gen_ai.response.id", data["id"]))
            name = (data.get("response_metadata") or {}).get("model_name") or model
            if name:
                attributes.append(_kv("gen_ai.response.model", name))
            usage = data.get("usage_metadata") or {}
            for key in ("input_tokens", "output_tokens"):
                if usage.get(key) is not None:
                    attributes.append(_kv(f"gen_ai.usage.{key}", usage[key]))
            children.append(
                _span(trace_id, next(ids), root_id, f"chat {name or ''}".strip(), clock, took,
                      attributes, kind=_KIND_CLIENT)
            )  # fmt: skip
            sent.append(out)
        elif kind == "tool":
            attributes = [
                _kv("gen_ai.operation.name", "execute_tool"),
                _kv("gen_ai.tool.name", data.get("name") or ""),
                _kv("gen_ai.tool.call.id", data.get("tool_call_id") or ""),
                _kv("gen_ai.tool.call.result", _text(data.get("content"))),
            ]
            error = data.get("status") == "error"
            name = f"execute_tool {data.get('name') or ''}".strip()
            children.append(
                _span(trace_id, next(ids), root_id, name, clock, took, attributes, error=error)
            )
            sent.append(_genai_message(m))
        else:
            sent.append(_genai_message(m))
        # at least a nanosecond on: spans of a run without latencies (an import's) would all
        # start at once, and a reader orders them by their start (then by their random ids)
        clock += max(took, 1)
    last_ai = max((k for k, m in enumerate(messages) if m.get("type") == "ai"), default=None)
    if last_ai is not None:  # (without an answer, the root span holds them all: ``given``)
        left = sum(m.get("type") != "tool" for m in messages[last_ai + 1 :])
        if left:
            unsent.count += left
            unsent.first = unsent.first or f"sample {sample_id}, trial {trial}"
    own = {k: v for k, v in (trace.get("metadata") or {}).items()
           if (entry.get("metadata") or {}).get(k, ...) != v}  # fmt: skip
    attributes = [
        _kv("gen_ai.operation.name", "invoke_agent"),
        _kv(SAMPLE_ID, sample_id),
        _kv(TRIAL, trial),
        _kv(ENTRY, _dumps(entry)),
        _kv("gen_ai.input.messages", _dumps(given)),
        _kv("gen_ai.tool.definitions", definitions),
    ]
    if own:
        attributes.append(_kv(METADATA, _dumps(own)))
    error = trace["status"] == "error"
    if error and trace.get("error_type"):
        attributes.append(_kv("error.type", trace["error_type"]))
    end = max(clock, _nanos(trace.get("finished_at")) or clock)
    root = _span(trace_id, root_id, "", "invoke_agent", start, end - start, attributes,
                 error=error, message=trace.get("error") or "")  # fmt: skip
    return [root, *children]


def _span(
    trace_id: str,
    span_id: str,
    parent_id: str,
    name: str,
    start: int,
    duration: int,
    attributes: list[dict[str, Any]],
    *,
    kind: int = _KIND_INTERNAL,
    error: bool = False,
    message: str = "",
) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if parent_id:
        span["parentSpanId"] = parent_id
    status: dict[str, Any] = {}
    if error:
        status = {"code": _ERROR, **({"message": message} if message else {})}
    span.update(
        name=name,
        kind=kind,
        startTimeUnixNano=str(start),
        endTimeUnixNano=str(start + duration),
        attributes=attributes,
        status=status,
    )
    return span


def _genai_message(m: dict[str, Any]) -> dict[str, Any]:
    """A stored message as a GenAI message of typed parts."""
    kind, data = m.get("type"), m.get("data") or {}
    text = _text(data.get("content"))
    if kind == "tool":
        part = {"type": "tool_call_response", "id": data.get("tool_call_id"), "response": text}
        return {"role": "tool", "parts": [part]}
    role = {"system": "system", "human": "user", "ai": "assistant"}.get(str(kind), "user")
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    for c in data.get("tool_calls") or []:
        parts.append({"type": "tool_call", "id": c.get("id"), "name": c.get("name"),
                      "arguments": c.get("args")})  # fmt: skip
    return {"role": role, "parts": parts}


def _text(content: Any) -> str:
    """Content as text: LangChain's list of parts joined by their text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _nanos(iso: Any) -> int:
    if not iso:
        return 0
    if isinstance(iso, datetime):
        return int(iso.timestamp() * 1e9)
    return int(datetime.fromisoformat(str(iso)).timestamp() * 1e9)
