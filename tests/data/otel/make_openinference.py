"""Make the OpenInference fixtures: spans of OpenInference's LangChain instrumentation
(``openinference-instrumentation-langchain``) around real LangGraph agents, written by
OpenTelemetry's JSON file exporter (``opentelemetry-exporter-otlp-json-file``).

- ``openinference_sim.otlp.jsonl``: tcbreplay's own agent (``tcbreplay.record_run``) on the
  ``sim`` model, six samples of the built-in tool-call benchmark, with the sim's seeded
  mistakes; beside it ``openinference_sim.reference.jsonl``, the same run as tcbreplay stored
  it (``export --format openai``), which the spans must read back as.
- ``openinference_openai.otlp.jsonl``: LangChain's ``create_agent`` with ``ChatOpenAI``
  calling the scripted server of ``tests/openai_server.py`` on 127.0.0.1 (so the spans hold
  the tools offered, ``llm.tools``), two questions.

Run from the repository's root: ``.venv/bin/python tests/data/otel/make_openinference.py``.
With ``--to ENDPOINT`` (for the tests) the same sim run's spans go to an OTLP/HTTP endpoint
instead, by OpenTelemetry's protobuf exporter, and no file is written.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))  # tests/, for openai_server

SAMPLES = [
    "price-pen",
    "mul-7-by-8",
    "backpack-bottle-pen",
    "product-of-two-sums",
    "one-of-everything",
    "hi-there",
]
QUESTIONS = {
    "Multiply 7 by 8 for me.": [[("multiply_numbers", {"a": 8, "b": 7})]],
    "One backpack, one bottle and one pen: how much is that altogether?": [
        [("list_items", {})],
        [("add_numbers", {"a": 25.0, "b": 8.0}), ("add_numbers", {"a": 33.0, "b": 1.2})],
    ],
}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--to":
        send(sys.argv[2])
        return
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    for name in ("openinference_sim", "openinference_openai"):
        (HERE / f"{name}.otlp.jsonl").unlink(missing_ok=True)
    exporter = FileSpanExporter(HERE / "openinference_sim.otlp.jsonl")
    provider = TracerProvider(resource=Resource.create({"service.name": "tcbreplay-sim"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    record_sim()
    provider.shutdown()
    instrumentor.uninstrument()

    exporter = FileSpanExporter(HERE / "openinference_openai.otlp.jsonl")
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor.instrument(tracer_provider=provider)
    run_chat_openai()
    provider.shutdown()
    print("wrote", *sorted(p.name for p in HERE.glob("openinference_*")))


def send(endpoint: str) -> None:
    """The sim run's spans, posted to ``endpoint`` as an instrumented agent posts them."""
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "tcbreplay-sim"}))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    record_sim(reference=False)
    provider.shutdown()  # sends what is left
    instrumentor.uninstrument()


def record_sim(reference: bool = True) -> None:
    """Six samples recorded by tcbreplay's own agent on the sim model, one at a time (the
    run exported beside the spans as their ``reference``)."""
    import tcbreplay

    with tempfile.TemporaryDirectory() as tmp:
        store = tcbreplay.Store(tmp)
        inputs = tcbreplay.load_inputs("tool-call")
        tcbreplay.record_run(
            inputs,
            tcbreplay.parse_model("sim:seed=3,error_rate=0.3"),
            store,
            run_id="sim",
            options={"workers": 1, "processes": 1},
            sample_ids=SAMPLES,
        )
        if not reference:
            return
        out = Path(tmp) / "export"
        tcbreplay.export_traces(store.open_run("sim"), out, "openai")
        shutil.copy(out / "traces.jsonl", HERE / "openinference_sim.reference.jsonl")


def run_chat_openai() -> None:
    """Two questions to a LangGraph agent on ChatOpenAI, against the scripted server."""
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI
    from openai_server import OpenAIServer

    from tcbreplay._inputs.benchmarks.tool_call import tools as shop

    with OpenAIServer(QUESTIONS) as server:
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.url, api_key="sk-test-not-a-key")
        agent = create_agent(model, tools=shop.TOOLS, system_prompt="You are the shop's assistant.")
        for question in QUESTIONS:
            agent.invoke({"messages": [{"role": "user", "content": question}]})


if __name__ == "__main__":
    main()
