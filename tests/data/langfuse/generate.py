"""Write the Langfuse fixtures beside this file from a real agent traced by the real SDK.

A LangGraph agent (LangChain's ``create_agent``) on tcbreplay's ``sim`` model with the built-in
benchmark's tools answers five of its questions (one twice, one failing), traced by the
``langfuse`` SDK's own LangChain handler (``langfuse.langchain.CallbackHandler``), whose
exporter sends OTLP spans to a loopback stand-in for Langfuse's ``/api/public/otel/v1/traces``
under made-up keys (the secret one is sent in no span; the public one, which names the project,
is in every span's scope, and so in each observation's metadata).

What the SDK sends is real; the observations exports are not, as no Langfuse server runs here:
each span becomes the observation Langfuse's server makes of it, by the mapping in its source
(``packages/shared/src/server/otel/OtelIngestionProcessor.ts``: id and parent from the span ids
in hex, ``type`` from ``langfuse.observation.type`` in capitals, ``input``, ``output``,
``metadata.*``, ``level``, ``status_message``, model, usage from their ``langfuse.observation.*``
attributes), written as its exports write the observations table:

- ``observations.jsonl``: the blob storage export (``JSONL``): the columns of
  ``LEGACY_OBSERVATION_EXPORT_FIELDS`` (``packages/shared/src/domain/observation-field-groups.ts``)
  in snake case, ``input``/``output`` as the JSON text ClickHouse keeps, times as ClickHouse
  writes them;
- ``observations.parquet``: the same rows as the blob storage export's Parquet (the default
  since 2026): maps as Parquet maps, times as timestamps;
- ``observations.json``: the UI's batch export (``JSON``): a list of the observations in the
  domain's camel case (``traceId``, ``parentObservationId``, ``startTime``, ...), ``input`` and
  ``output`` parsed.

Beside them, ``expected.jsonl`` holds what the agent returned for each question, in the order
asked, and ``dataset.json`` the samples' gold calls.

    .venv/bin/python tests/data/langfuse/generate.py

``--agent URL OUT`` runs only the agent, traced into URL, writing what it returned to OUT.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PUBLIC_KEY = "pk-lf-00000000-0000-0000-0000-000000000000"
SECRET_KEY = "sk-lf-00000000-0000-0000-0000-000000000000"
PROJECT_ID = "cm0tcbreplayfixture00000"
SAMPLES = ("price-3-notebooks", "paren-3.5-plus-2-times-4", "sum-three-numbers", "hi-there")
FAILING = "mul-7-by-8"
TWICE = "sum-three-numbers"
SIM = {"seed": 11, "error_rate": 0.4, "parallel": 0.5}
# the columns of Langfuse's blob storage export of observations, in its order
EXPORT_COLUMNS = (
    "id", "trace_id", "project_id", "environment", "type", "parent_observation_id",
    "start_time", "end_time", "name", "metadata", "level", "status_message", "version", "input",
    "output", "provided_model_name", "model_parameters", "usage_details", "cost_details",
    "completion_start_time", "prompt_name", "prompt_version", "total_cost", "latency",
    "time_to_first_token", "model_id", "created_at", "updated_at", "prompt_id", "tool_calls",
    "tool_call_names", "tool_definitions", "usage_pricing_tier_name",
)  # fmt: skip
_PREFIX = "langfuse.observation."


class OtlpCapture:
    """A loopback Langfuse that keeps the OTLP bodies its exporter posts."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                capture.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[tuple[Any, Any, Any]]:
        """Every span received, with its resource and instrumentation scope."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out += [(resource.resource, scope.scope, span) for span in scope.spans]
        return out


def run_agent(url: str, out: Path, *, timeout: float = 120) -> None:
    """Run the agent in a fresh process, traced into ``url``; what it returned to ``out``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANGFUSE_")}
    env.update(
        LANGFUSE_PUBLIC_KEY=PUBLIC_KEY, LANGFUSE_SECRET_KEY=SECRET_KEY, LANGFUSE_BASE_URL=url
    )
    subprocess.run(
        [sys.executable, __file__, "--agent", url, str(out)], env=env, check=True, timeout=timeout
    )


def _agent(out: Path) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import messages_to_dict
    from langfuse import get_client
    from langfuse.langchain import CallbackHandler

    from tcbreplay._inputs.benchmarks.tool_call.tools import TOOLS
    from tcbreplay._record.models.sim import SAMPLE_ID_KEY, SimChatModel, parse_sim_options

    entries = _entries()
    plans = {
        sid: [(c["name"], c["args"]) for c in entries[sid].get("target") or []]
        for sid in (*SAMPLES, FAILING)
    }
    settings = {**parse_sim_options(""), **SIM}
    prompt = "You are a shop's assistant. Use the tools for prices and arithmetic."
    agent = create_agent(
        SimChatModel.from_settings(settings, plans), tools=TOOLS, system_prompt=prompt
    )
    broken = create_agent(
        SimChatModel.from_settings({**settings, "fault_rate": 1.0}, plans),
        tools=TOOLS,
        system_prompt=prompt,
    )
    returned = []
    for sid in (*SAMPLES, TWICE, FAILING):
        config = {"metadata": {SAMPLE_ID_KEY: sid}, "callbacks": [CallbackHandler()]}
        question = {"messages": [{"role": "user", "content": entries[sid]["input"]}]}
        try:
            result = (broken if sid == FAILING else agent).invoke(question, config)
        except Exception as exc:  # the trace keeps the error
            returned.append({"sample_id": sid, "error": repr(exc)})
        else:
            returned.append({"sample_id": sid, "messages": messages_to_dict(result["messages"])})
    get_client().flush()
    out.write_text("".join(json.dumps(r) + "\n" for r in returned))


def _entries() -> dict[str, dict]:
    import tcbreplay._inputs.benchmarks.tool_call as tool_call

    dataset = Path(tool_call.__file__).parent / "dataset.json"
    return {e["id"]: e for e in json.loads(dataset.read_text())}


def _attributes(holder: Any) -> dict[str, Any]:
    def value(v: Any) -> Any:
        kind = v.WhichOneof("value")
        if kind == "array_value":
            return [value(x) for x in v.array_value.values]
        return getattr(v, kind) if kind else None

    return {a.key: value(a.value) for a in holder.attributes}


def _clickhouse_time(nanos: int) -> str:
    """A time as ClickHouse's JSONEachRow writes a DateTime64(3)."""
    return datetime.fromtimestamp(nanos / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def observation(resource: Any, scope: Any, span: Any) -> dict[str, Any]:
    """The observation Langfuse's server makes of a span of its SDK, as the blob export row
    (its metadata: the span's ``metadata.*``, then the resource's attributes and the scope, as
    JSON texts, as the ClickHouse map keeps them)."""
    attrs = _attributes(span)
    metadata = {
        k[len(_PREFIX + "metadata.") :]: v
        for k, v in attrs.items()
        if k.startswith(_PREFIX + "metadata.")
    }
    metadata["resourceAttributes"] = json.dumps(_attributes(resource))
    metadata["scope"] = json.dumps(
        {"name": scope.name, "version": scope.version, "attributes": _attributes(scope)}
    )
    usage = json.loads(attrs.get(_PREFIX + "usage_details") or "{}")
    level = attrs.get(_PREFIX + "level") or ("ERROR" if span.status.code == 2 else "DEFAULT")
    start, end = (
        _clickhouse_time(span.start_time_unix_nano),
        _clickhouse_time(span.end_time_unix_nano),
    )
    row: dict[str, Any] = dict.fromkeys(EXPORT_COLUMNS)
    row.update(
        id=span.span_id.hex(),
        trace_id=span.trace_id.hex(),
        project_id=PROJECT_ID,
        environment=attrs.get("langfuse.environment") or "default",
        type=str(attrs.get(_PREFIX + "type") or "span").upper(),
        parent_observation_id=span.parent_span_id.hex() or None,
        start_time=start,
        end_time=end,
        name=span.name,
        metadata=metadata,
        level=level,
        status_message=attrs.get(_PREFIX + "status_message") or span.status.message or None,
        input=attrs.get(_PREFIX + "input"),
        output=attrs.get(_PREFIX + "output"),
        provided_model_name=attrs.get(_PREFIX + "model.name"),
        model_parameters=attrs.get(_PREFIX + "model.parameters"),
        usage_details={k: int(v) for k, v in usage.items()},
        cost_details={},
        latency=(span.end_time_unix_nano - span.start_time_unix_nano) / 1e9,
        created_at=end,
        updated_at=end,
        tool_calls=[],
        tool_call_names=[],
        tool_definitions={},
    )
    return row


_CAMEL = {
    "trace_id": "traceId", "project_id": "projectId", "parent_observation_id":
    "parentObservationId", "start_time": "startTime", "end_time": "endTime", "status_message":
    "statusMessage", "provided_model_name": "providedModelName", "model_parameters":
    "modelParameters", "usage_details": "usageDetails", "cost_details": "costDetails",
    "completion_start_time": "completionStartTime", "prompt_name": "promptName",
    "prompt_version": "promptVersion", "total_cost": "totalCost", "time_to_first_token":
    "timeToFirstToken", "model_id": "internalModelId", "created_at": "createdAt", "updated_at":
    "updatedAt", "prompt_id": "promptId", "usage_pricing_tier_name": "usagePricingTierName",
}  # fmt: skip


def ui_export(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the UI's JSON export writes the observation: camel case, input parsed."""
    out = {}
    for key, value in row.items():
        if key in ("tool_calls", "tool_call_names", "tool_definitions"):
            continue
        if key in ("input", "output", "model_parameters") and isinstance(value, str):
            value = json.loads(value)
        if key.endswith("_time") or key.endswith("_at"):
            value = None if value is None else value.replace(" ", "T") + "Z"
        out[_CAMEL.get(key, key)] = value
    return out


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """The rows as the blob export's Parquet: maps as maps, times as timestamps."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {c: pa.string() for c in EXPORT_COLUMNS}
    for column in ("start_time", "end_time", "completion_start_time", "created_at", "updated_at"):
        types[column] = pa.timestamp("ms", tz="UTC")
    for column in ("metadata", "tool_definitions"):
        types[column] = pa.map_(pa.string(), pa.string())
    types["usage_details"] = pa.map_(pa.string(), pa.uint64())
    types["cost_details"] = pa.map_(pa.string(), pa.float64())
    types.update(tool_calls=pa.list_(pa.string()), tool_call_names=pa.list_(pa.string()))
    types.update(total_cost=pa.float64(), latency=pa.float64(), time_to_first_token=pa.float64())
    types["prompt_version"] = pa.uint16()

    def cell(row: dict[str, Any], column: str) -> Any:
        value = row[column]
        if value is not None and types[column] == pa.timestamp("ms", tz="UTC"):
            return datetime.strptime(value, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
        if isinstance(value, dict):
            return list(value.items())
        return value

    schema = pa.schema([(c, types[c]) for c in EXPORT_COLUMNS])
    table = pa.table({c: [cell(r, c) for r in rows] for c in EXPORT_COLUMNS}, schema=schema)
    pq.write_table(table, path)


def dataset() -> list[dict]:
    entries = _entries()
    return [{k: entries[sid][k] for k in ("id", "input", "target")} for sid in (*SAMPLES, FAILING)]


def main() -> None:
    with OtlpCapture() as capture:
        run_agent(capture.url, HERE / "expected.jsonl")
        spans = capture.spans()
    spans.sort(key=lambda found: found[2].start_time_unix_nano)
    rows = [observation(*found) for found in spans]
    files = {
        "observations.jsonl": "".join(json.dumps(r) + "\n" for r in rows),
        "observations.json": json.dumps([ui_export(r) for r in rows], indent=1) + "\n",
        "dataset.json": json.dumps(dataset(), indent=1) + "\n",
    }
    for name, text in files.items():
        # the public key names the project: the SDK sends it in its spans' scope, and the
        # server keeps it in each observation's metadata; the secret key is sent nowhere
        assert SECRET_KEY not in text, name
        (HERE / name).write_text(text)
    write_parquet(rows, HERE / "observations.parquet")
    print(f"{len(rows)} observations of {len({r['trace_id'] for r in rows})} traces")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agent"]:
        _agent(Path(sys.argv[3]))
    else:
        with tempfile.TemporaryDirectory():
            main()
