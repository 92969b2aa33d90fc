"""Make the openai-v2 fixtures: spans of OpenTelemetry's own OpenAI instrumentation
(``opentelemetry-instrumentation-openai-v2``) around the real ``openai`` client, calling the
scripted server of ``tests/openai_server.py`` on 127.0.0.1, in a small agent loop whose tool
runs and agent are spans of ``opentelemetry-util-genai`` (``execute_tool``, ``invoke_agent``).

Three questions of the built-in tool-call benchmark (one answered with a mistake: 7 x 9 for
7 x 8) are run three times, each run in a process of its own:

- ``latest``: the current conventions (``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``,
  content on the spans): ``openai_v2_latest.otlp.jsonl``, written by OpenTelemetry's JSON file
  exporter (``opentelemetry-exporter-otlp-json-file``), and ``openai_v2_latest.otlp.pb``, the
  body the OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-http``) posted;
- ``details``: the current conventions with the content on events
  (``gen_ai.client.inference.operation.details`` log records): ``openai_v2_details.otlp.jsonl``,
  spans and log records by the JSON file exporters;
- ``events``: the older conventions (content as ``gen_ai.*.message`` and ``gen_ai.choice``
  events), as ``opentelemetry-instrumentation-openai-v2==2.1b0`` wrote them on the SDK of its
  time (1.29, installed into a temporary virtual environment: the current SDK has no Events
  API), encoded by that SDK's OTLP encoders and framed as the collector's file exporter frames
  protobuf (each request after its size, 4 bytes big-endian), traces then logs:
  ``openai_v2_events.otlp.pb``.

Run from the repository's root: ``.venv/bin/python tests/data/otel/make_openai_v2.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))  # tests/, for openai_server

QUESTIONS = {
    "Multiply 7 by 8 for me.": [[("multiply_numbers", {"a": 7, "b": 9})]],
    "pen price?": [[("list_items", {})]],
    "One backpack, one bottle and one pen: how much is that altogether?": [
        [("list_items", {})],
        [("add_numbers", {"a": 25.0, "b": 8.0})],
        [("add_numbers", {"a": 33.0, "b": 1.2})],
    ],
}
ANSWERS = {
    "Multiply 7 by 8 for me.": "7 times 8 is 63.00.",
    "pen price?": "A pen costs 1.20.",
    "One backpack, one bottle and one pen: how much is that altogether?": "That is 34.20.",
}


def _shop() -> Any:
    """The built-in benchmark's tools module, read from its file (without tcbreplay's
    package, which the older SDK's environment lacks the dependencies of)."""
    path = HERE.parent.parent.parent / "tcbreplay/_inputs/benchmarks/tool_call/tools.py"
    spec = importlib.util.spec_from_file_location("shop_tools", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHOP = _shop()
SCHEMAS = [
    {"type": "function", "function": {"name": "list_items", "description": SHOP.list_items.__doc__,
                                      "parameters": {"type": "object", "properties": {}}}},
    *[
        {"type": "function", "function": {
            "name": f.__name__, "description": f.__doc__,
            "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                           "b": {"type": "number"}},
                           "required": ["a", "b"]}}}
        for f in (SHOP.add_numbers, SHOP.multiply_numbers)
    ],
]  # fmt: skip


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[2] == "--to":  # for the tests: latest, to an endpoint
        send(sys.argv[3])
        return
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    for mode in ("latest", "details", "events"):
        for path in HERE.glob(f"openai_v2_{mode}.otlp.*"):
            path.unlink()
        env = {
            **os.environ,
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": (
                "span_only" if mode == "latest" else "event_only"
            ),
        }
        python = sys.executable
        if mode == "events":
            env = {**os.environ, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
            env["PYTHONPATH"] = str(HERE.parent.parent.parent)  # tcbreplay's sources
            python = _old_sdk_python()
        subprocess.run([python, __file__, mode], env=env, check=True)
        print("wrote", *sorted(p.name for p in HERE.glob(f"openai_v2_{mode}.otlp.*")))


OLD = [
    "openai>=1.60,<2",
    "opentelemetry-api==1.29.0",
    "opentelemetry-sdk==1.29.0",
    "opentelemetry-proto==1.29.0",
    "opentelemetry-exporter-otlp-proto-common==1.29.0",
    "opentelemetry-instrumentation==0.50b0",
    "opentelemetry-semantic-conventions==0.50b0",
    "opentelemetry-instrumentation-openai-v2==2.1b0",
]


def _old_sdk_python() -> str:
    """The Python of a temporary virtual environment with openai-v2 2.1b0 and its SDK."""
    venv = Path(tempfile.gettempdir()) / "tcbreplay-openai-v2-2.1b0"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *OLD], check=True)
    return str(python)


def send(endpoint: str) -> None:
    """The questions of the ``latest`` run, their spans sent by the OTLP/HTTP exporter to
    ``endpoint`` (``tcbreplay collect`` in the tests) and nowhere else."""
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
    run("latest", endpoint=endpoint)


def run(mode: str, endpoint: str | None = None) -> None:
    """One run of the questions, its telemetry written as the module docstring says (or,
    given an ``endpoint``, only sent there)."""
    if mode == "events":
        run_events()
        return
    import openai
    from openai_server import OpenAIServer
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace import set_tracer_provider
    from opentelemetry.util.genai.handler import get_telemetry_handler

    resource = Resource.create({"service.name": "shop-agent"})
    jsonl = HERE / f"openai_v2_{mode}.otlp.jsonl"
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    if endpoint is None:
        tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(jsonl)))
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(jsonl)))
    capture = _Capture() if mode == "latest" and endpoint is None else None
    if capture is not None or endpoint is not None:
        url = f"{endpoint or capture.url}/v1/traces"  # type: ignore[union-attr]
        exporter = OTLPSpanExporter(endpoint=url)
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
    set_tracer_provider(tracer_provider)
    set_logger_provider(logger_provider)
    OpenAIInstrumentor().instrument(
        tracer_provider=tracer_provider, logger_provider=logger_provider
    )
    handler = get_telemetry_handler(
        tracer_provider=tracer_provider, logger_provider=logger_provider
    )
    functions = {f.__name__: f for f in SHOP.TOOLS}
    with OpenAIServer(QUESTIONS, ANSWERS) as server:
        client = openai.OpenAI(base_url=server.url, api_key="sk-test-not-a-key")
        for question in QUESTIONS:
            with handler.invoke_local_agent(agent_name="shop", request_model="gpt-4o-mini"):
                messages: list[dict] = [
                    {"role": "system", "content": "You are the shop's assistant."},
                    {"role": "user", "content": question},
                ]
                while True:
                    reply = client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, tools=SCHEMAS
                    )
                    message = reply.choices[0].message
                    messages.append(message.model_dump(exclude_none=True))
                    if not message.tool_calls:
                        break
                    for call in message.tool_calls:
                        args = json.loads(call.function.arguments)
                        with handler.tool(
                            call.function.name, tool_call_id=call.id, tool_type="function"
                        ) as run_:
                            run_.arguments = args
                            result = json.dumps(functions[call.function.name](**args))
                            run_.tool_result = result
                        messages.append(
                            {"role": "tool", "tool_call_id": call.id, "content": result}
                        )
    tracer_provider.shutdown()
    logger_provider.shutdown()
    if capture is not None:
        capture.close()
        (body,) = capture.bodies  # one batch: every span of the run
        (HERE / f"openai_v2_{mode}.otlp.pb").write_bytes(body)


def run_events() -> None:
    """The older conventions, with openai-v2 2.1b0 on the SDK 1.29 (see the module docstring)."""
    import openai
    from openai_server import OpenAIServer
    from opentelemetry._events import set_event_logger_provider
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._events import EventLoggerProvider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import set_tracer_provider

    resource = Resource.create({"service.name": "shop-agent"})
    spans, logs = InMemorySpanExporter(), InMemoryLogExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    set_tracer_provider(tracer_provider)
    set_logger_provider(logger_provider)
    set_event_logger_provider(EventLoggerProvider(logger_provider))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    tracer = tracer_provider.get_tracer("shop-agent")
    functions = {f.__name__: f for f in SHOP.TOOLS}
    with OpenAIServer(QUESTIONS, ANSWERS) as server:
        client = openai.OpenAI(base_url=server.url, api_key="sk-test-not-a-key")
        for question in QUESTIONS:
            # the agent and its tool runs: spans of the application, as the conventions of
            # that time had no helper for them
            with tracer.start_as_current_span("invoke_agent shop") as agent:
                agent.set_attribute("gen_ai.operation.name", "invoke_agent")
                agent.set_attribute("gen_ai.agent.name", "shop")
                messages: list[dict] = [
                    {"role": "system", "content": "You are the shop's assistant."},
                    {"role": "user", "content": question},
                ]
                while True:
                    reply = client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, tools=SCHEMAS
                    )
                    message = reply.choices[0].message
                    messages.append(message.model_dump(exclude_none=True))
                    if not message.tool_calls:
                        break
                    for call in message.tool_calls:
                        args = json.loads(call.function.arguments)
                        name = call.function.name
                        with tracer.start_as_current_span(f"execute_tool {name}") as tool:
                            tool.set_attribute("gen_ai.operation.name", "execute_tool")
                            tool.set_attribute("gen_ai.tool.name", name)
                            tool.set_attribute("gen_ai.tool.call.id", call.id)
                            result = json.dumps(functions[name](**args))
                        messages.append(
                            {"role": "tool", "tool_call_id": call.id, "content": result}
                        )
    tracer_provider.shutdown()
    logger_provider.shutdown()
    frames = [
        encode_spans(spans.get_finished_spans()).SerializeToString(),
        encode_logs(logs.get_finished_logs()).SerializeToString(),
    ]
    (HERE / "openai_v2_events.otlp.pb").write_bytes(
        b"".join(struct.pack(">I", len(f)) + f for f in frames)
    )


class _Capture:
    """A loopback OTLP/HTTP endpoint that keeps the bodies posted to it."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                capture.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


if __name__ == "__main__":
    main()
