"""Make ``openai_v2.jaeger.json``: the spans of ``../openai_v2_latest.otlp.jsonl`` (three
agent runs, openai-v2's GenAI spans) in Jaeger's JSON, mapped the way Jaeger's own golden
pair (``otlp2jaeger-in.json`` -> ``otlp2jaeger-out.json``) shows Jaeger mapping OTLP: the
attributes as typed tags, the parent as a ``CHILD_OF`` reference, the events as logs named
by their ``event`` field, the resource as the process, times in microseconds.

No Jaeger ran to write it (none can be installed here: see README.md); it is what the docs'
example imports, and ``tests/importers/test_dialect_jaeger.py`` holds it equal to this
mapping. Run from the repository's root: ``.venv/bin/python tests/data/otel/jaeger/make_genai.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tcbreplay._importers import otlp

HERE = Path(__file__).parent
SOURCE = HERE.parent / "openai_v2_latest.otlp.jsonl"
TARGET = HERE / "openai_v2.jaeger.json"


def as_jaeger(batch: Any) -> dict[str, Any]:
    """OTLP spans (an ``otlp`` batch) in Jaeger's JSON."""

    def tag(key: str, value: Any) -> dict[str, Any]:
        kind = {bool: "bool", int: "int64", float: "float64"}.get(type(value), "string")
        return {"key": key, "type": kind, "value": value if kind != "string" else str(value)}

    traces: dict[str, dict[str, Any]] = {}
    for s in batch.spans:
        trace = traces.setdefault(s.trace_id, {"traceID": s.trace_id, "spans": [],
                                               "processes": {}})  # fmt: skip
        process = f"p{len(trace['processes']) + 1}"
        trace["processes"][process] = {
            "serviceName": s.resource["service.name"],
            "tags": [tag(k, v) for k, v in s.resource.items() if k != "service.name"],
        }
        refs = [{"refType": "CHILD_OF", "traceID": s.trace_id, "spanID": s.parent_id}]
        trace["spans"].append({
            "traceID": s.trace_id, "spanID": s.span_id, "operationName": s.name,
            "references": refs if s.parent_id else [], "startTime": s.start // 1000,
            "duration": (s.end - s.start) // 1000,
            "tags": [tag("otel.library.name", s.scope)]
            + [tag(k, v) for k, v in s.attributes.items()],
            "logs": [{"timestamp": e.time // 1000, "fields": [tag("event", e.name)]
                      + [tag(k, v) for k, v in e.attributes.items()]} for e in s.events],
            "processID": process, "warnings": None,
        })  # fmt: skip
    return {"data": list(traces.values()), "total": 0, "limit": 0, "offset": 0, "errors": None}


def text() -> str:
    return json.dumps(as_jaeger(otlp.read_batch(SOURCE.read_bytes(), SOURCE.name)), indent=1) + "\n"


if __name__ == "__main__":
    TARGET.write_text(text())
    print(f"wrote {TARGET}")
