"""The otlp dialect (``tcbreplay._importers.otlp``): OTLP trace files, JSON and protobuf, with
GenAI, OpenInference or Vercel AI SDK spans, read from files the real instrumentors and
exporters wrote (tests/data/otel/make_*.py)."""

from __future__ import annotations

import base64
import json
import re
import shlex
import struct
from pathlib import Path

import pytest
from helpers import ROOT, TEST_DATA, cli

from tcbreplay._importers import otlp
from tcbreplay._importers.dialect import TraceFile
from tcbreplay._importers.sniff import sniff
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay.errors import TcbReplayWarning, TraceError

OTEL = TEST_DATA / "otel"
SHOP = ROOT / "tcbreplay" / "_inputs" / "benchmarks" / "tool_call"
SHOP_TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
# what make_openai_v2.py scripted the model to call, by question (7 x 9: its mistake)
OPENAI_V2_CALLS = {
    "Multiply 7 by 8 for me.": [("multiply_numbers", {"a": 7, "b": 9})],
    "pen price?": [("list_items", {})],
    "One backpack, one bottle and one pen: how much is that altogether?": [
        ("list_items", {}),
        ("add_numbers", {"a": 25.0, "b": 8.0}),
        ("add_numbers", {"a": 33.0, "b": 1.2}),
    ],
}
# the same run in every shape the instrumentation and exporters write
OPENAI_V2_FILES = [
    "openai_v2_latest.otlp.jsonl",  # current conventions, JSON file exporter
    "openai_v2_latest.otlp.pb",  # the same spans as the OTLP/HTTP exporter posted them
    "openai_v2_details.otlp.jsonl",  # content on inference.operation.details log records
    "openai_v2_events.otlp.pb",  # openai-v2 2.1b0's per-message events, collector-framed
]


def messages(line) -> list[dict]:
    return [json.loads(m["message"]) for m in line.messages]


def calls_of(line) -> list[tuple[str, dict]]:
    return [
        (c["name"], c["args"])
        for m in messages(line)
        if m["type"] == "ai"
        for c in m["data"]["tool_calls"]
    ]


def results_of(line) -> dict[str, str]:
    return {
        m["data"]["tool_call_id"]: m["data"]["content"]
        for m in messages(line)
        if m["type"] == "tool"
    }


def read(name: str, **options):
    return otlp.read(TraceFile.at(OTEL / name), None, **options)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("openai_v2_latest.otlp.jsonl", "JSON Lines of OTLP/JSON export requests (resourceSpans)"),
        ("openai_v2_latest.otlp.pb", "OTLP protobuf (an export request's first bytes)"),
        ("openai_v2_events.otlp.pb",
         "OTLP protobuf framed as the collector's file exporter writes them"),
    ],
)  # fmt: skip
def test_it_is_told_from_the_file(name, reason):
    chosen = sniff(TraceFile.at(OTEL / name))
    assert (chosen.dialect, chosen.reason) == ("otlp", reason)


def test_one_request_as_a_whole_document_is_told_too(tmp_path):
    first = (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[0]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(json.loads(first), indent=2))
    verdict = otlp.sniff(TraceFile.at(path))
    assert (verdict.confidence, verdict.reason) == (
        1.0,
        "an OTLP/JSON export request (resourceSpans)",
    )
    assert otlp.read(TraceFile.at(path), None).lines


def test_other_json_is_not_otlp():
    verdict = otlp.sniff(TraceFile("t.jsonl", data=b'{"sample_id": 0, "messages": []}\n'))
    assert not verdict.fits


@pytest.mark.parametrize("name", OPENAI_V2_FILES)
def test_openai_v2_spans_read_as_the_calls_the_model_made(name):
    source = read(name)
    assert len(source.lines) == 3
    for line in source.lines:
        human = next(m for m in messages(line) if m["type"] == "human")
        assert calls_of(line) == OPENAI_V2_CALLS[human["data"]["content"]], name
        assert line.sample_id == line.metadata["trace_id"]  # a sample per trace, by default
        assert len(line.sample_id) == 32 and int(line.sample_id, 16) >= 0
    mul = next(li for li in source.lines if calls_of(li)[0][0] == "multiply_numbers")
    assert list(results_of(mul).values()) == ['{"result": 63}']
    assert source.model == "gpt-4o-mini-2024-07-18"
    # no tool was declared: the tools take the arguments they were called with
    assert {t["name"]: sorted(t["parameters"]["properties"]) for t in source.tools} == {
        "multiply_numbers": ["a", "b"], "list_items": [], "add_numbers": ["a", "b"],
    }  # fmt: skip


def test_the_json_and_protobuf_of_one_export_read_the_same():
    assert read("openai_v2_latest.otlp.jsonl").lines == read("openai_v2_latest.otlp.pb").lines


def test_token_counts_and_latencies_come_from_the_model_calls():
    line = read("openai_v2_latest.otlp.jsonl").lines[0]
    ai = [m for m in line.messages if m["type"] == "ai"]
    assert [(m["input_tokens"], m["output_tokens"]) for m in ai] == [(40, 7), (60, 7)]
    assert all(m["latency_s"] > 0 for m in line.messages if m["type"] in ("ai", "tool"))


def test_openinference_spans_of_tcbreplays_own_agent_read_as_it_recorded_them():
    """tcbreplay's agent on the sim model, recorded under OpenInference's LangChain
    instrumentation: the spans, matched to the benchmark's dataset by input, read as the
    messages tcbreplay itself stored (roles, text, calls with their ids, results)."""
    inputs = load_inputs(None, SHOP / "dataset.json", SHOP_TOOLS, None, need_prompt=False)
    source = otlp.read(TraceFile.at(OTEL / "openinference_sim.otlp.jsonl"), inputs)
    reference = {
        line["sample_id"]: line["messages"]
        for line in map(json.loads, (OTEL / "openinference_sim.reference.jsonl").open())
    }
    from tcbreplay._importers.openai import to_openai

    read_back = {}
    for line in source.lines:
        shown = to_openai(messages(line))
        for m in shown:
            m.pop("name", None)
        read_back[line.sample_id] = [m for m in shown if m["role"] != "system"]
    for lines in reference.values():
        for m in lines:
            m.pop("name", None)
    assert read_back == reference


def test_openinference_spans_declare_the_tools_offered():
    source = read("openinference_openai.otlp.jsonl")
    assert [t["name"] for t in source.tools] == ["list_items", "add_numbers", "multiply_numbers"]
    assert source.tools[1]["parameters"]["required"] == ["a", "b"]
    assert [calls_of(line) for line in source.lines] == [
        [("multiply_numbers", {"a": 8, "b": 7})],
        [("list_items", {}), ("add_numbers", {"a": 25.0, "b": 8.0}),
         ("add_numbers", {"a": 33.0, "b": 1.2})],
    ]  # fmt: skip


def test_the_vercel_ai_sdks_spans():
    """generateText with tools, its steps and ai.toolCall spans under it, as the AI SDK's
    telemetry and OpenTelemetry's JavaScript exporter wrote them (make_vercel.py)."""
    source = read("vercel_ai.otlp.jsonl")
    assert [line.metadata["span"] for line in source.lines] == ["ai.generateText"] * 2
    assert [calls_of(line) for line in source.lines] == [
        [("multiply_numbers", {"a": 8, "b": 7})],
        [("list_items", {}), ("add_numbers", {"a": 25, "b": 8}),
         ("add_numbers", {"a": 33, "b": 1.2})],
    ]  # fmt: skip
    assert results_of(source.lines[0]) == {"call_0_0_0": '{"result": 56}'}
    assert [t["name"] for t in source.tools] == ["list_items", "add_numbers", "multiply_numbers"]
    assert source.tools[2]["parameters"]["required"] == ["a", "b"]
    # each generateText an agent: by agent span, the same samples, named by their spans
    by_agent = read("vercel_ai.otlp.jsonl", sample_by="agent")
    assert [calls_of(line) for line in by_agent.lines] == [calls_of(li) for li in source.lines]


def test_the_semantic_conventions_published_examples():
    """examples-llm-calls.md: the simple chat, and the tool call round trip."""
    source = read("semconv_examples.otlp.jsonl")
    simple, weather = source.lines
    assert [(m["type"], m["data"]["content"][:20]) for m in messages(simple)] == [
        ("system", "You are a helpful bo"), ("human", "Tell me a joke about"),
        ("ai", " Why did the develop"),
    ]  # fmt: skip
    assert calls_of(weather) == [("get_weather", {"location": "Paris"})]
    assert results_of(weather) == {"call_VSPygqKTWdrhaFErNvMV18Yl": "rainy, 57°F"}
    assert messages(weather)[-1]["data"]["content"].startswith("The weather in Paris is")
    assert source.tools[0]["name"] == "get_current_weather"  # as published
    assert [d.input for d in source.dataset.samples] == [
        "Tell me a joke about OpenTelemetry", "Weather in Paris?",
    ]  # fmt: skip


def one_trace_of_three_runs() -> list[dict]:
    """openai-v2's real spans of three agent runs, given one trace id and a common parent
    (00f067aa0ba902b7, which no span is): its OTLP/JSON requests."""
    docs = []
    for raw in (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines():
        doc = json.loads(raw)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["traceId"] = "0af7651916cd43dd8448eb211c80319c"
                    span.setdefault("parentSpanId", "00f067aa0ba902b7")
        docs.append(doc)
    return docs


def test_a_sample_per_agent_span_on_request(tmp_path):
    """Three agent runs put under one trace (the real spans, given one trace id and a common
    parent): one sample by trace, three by agent span, each its agent span's id."""
    path = tmp_path / "one-trace.jsonl"
    path.write_text("\n".join(json.dumps(doc) for doc in one_trace_of_three_runs()) + "\n")
    # (one sample of three agent runs' calls: said, with the option that parts them)
    with pytest.warns(
        TcbReplayWarning, match="1 traces hold several agent runs .*--sample-by agent"
    ):
        by_trace = otlp.read(TraceFile.at(path), None)
    by_agent = otlp.read(TraceFile.at(path), None, sample_by="agent")
    assert [line.sample_id for line in by_trace.lines] == ["0af7651916cd43dd8448eb211c80319c"]
    assert len(by_agent.lines) == 3
    assert all(len(line.sample_id) == 16 for line in by_agent.lines)
    assert sorted(map(len, map(calls_of, by_agent.lines))) == [1, 1, 3]


def test_spans_outside_every_agent_run_are_kept_or_said(tmp_path):
    """By agent span, the spans of a trace outside its agent runs were dropped: a failed
    workflow span around them (its error in no sample, no word of it), and a model call made
    outside any agent with its messages."""
    docs = one_trace_of_three_runs()
    first = docs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    failed = {"code": 2, "message": "the workflow crashed"}
    workflow = {**first[-1], "spanId": "00f067aa0ba902b7", "name": "workflow",
                "attributes": [], "status": failed}  # fmt: skip
    del workflow["parentSpanId"]
    first.append(workflow)
    path = tmp_path / "one-trace.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    said = r"span 'workflow' .* failed outside its agent runs \(the workflow crashed\): with"
    with pytest.warns(TcbReplayWarning, match=said + " --sample-by agent no sample"):
        by_agent = otlp.read(TraceFile.at(path), None, sample_by="agent")
    assert len(by_agent.lines) == 3
    assert {line.status for line in by_agent.lines} == {"ok"}
    # the first agent's spans moved out of it: a sample of their own, failed as their root did
    for span in first:
        if span.get("parentSpanId") == "f5f346cccc53988c":
            span["parentSpanId"] = "00f067aa0ba902b7"
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    by_agent = otlp.read(TraceFile.at(path), None, sample_by="agent")
    outside = [line for line in by_agent.lines if line.sample_id == "00f067aa0ba902b7"]
    assert len(by_agent.lines) == 4 and len(outside) == 1
    assert (outside[0].status, outside[0].error) == ("error", "the workflow crashed")
    assert calls_of(outside[0]) == [("multiply_numbers", {"a": 7, "b": 9})]


def test_ids_in_base64_as_protobufs_json_printer_writes_them_are_read_as_hex(tmp_path):
    doc = json.loads((OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[0])
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    hex_doc = json.loads((OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[0])
    as_base64 = otlp.read(TraceFile("b.json", data=json.dumps(doc).encode()), None)
    as_hex = otlp.read(TraceFile("h.json", data=json.dumps(hex_doc).encode()), None)
    assert as_base64.lines == as_hex.lines


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b'{"resourceSpans": []}\n{"resourceSpans": [\n', "t.jsonl: line 2: not valid JSON"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz", '
         b'"spanId": "00f067aa0ba902b7"}]}]}]}\n',
         "t.jsonl: line 1: not a readable OTLP export request (ValueError: id 'xyz'"),
        (b'{"resourceSpans": []}\n', "t.jsonl: no spans in the file"),
        (b"\x0a\xff\xff\xff\xff\x0f\x00", "t.jsonl: not an OTLP protobuf export request"),
        # read as protobuf: "not an OTLP protobuf export request (... Wire format was corrupt)"
        (b' [{"resourceSpans": []}]\n', "t.jsonl: a JSON array, not an OTLP export request: "
         'OTLP/JSON is one request ({"resourceSpans": [...]}) a file, or one a line'),
    ],
)  # fmt: skip
def test_what_cannot_be_read_is_refused_with_its_place(data, error):
    with pytest.raises(TraceError) as caught:
        otlp.read(TraceFile("t.jsonl", data=data), None)
    assert str(caught.value).startswith(error)


def _one_trace(change) -> bytes:
    """The first trace of openai_v2_latest (its four requests) with ``change(spans)`` made to
    its spans, in the order they were exported (chat, execute_tool, chat, invoke_agent)."""
    lines = (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[:4]
    docs = [json.loads(line) for line in lines]
    change([d["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for d in docs])
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


def _set(k: int, **fields):
    return lambda spans: spans[k].update(fields)


def _cycle(spans):  # the root the child of its first chat span, which is its own child
    spans[3]["parentSpanId"] = spans[0]["spanId"]


def _counted(value):  # the first chat span's input tokens as ``value`` (an OTLP AnyValue)
    def change(spans):
        kept = [a for a in spans[0]["attributes"] if a["key"] != "gen_ai.usage.input_tokens"]
        spans[0]["attributes"] = [*kept, {"key": "gen_ai.usage.input_tokens", "value": value}]

    return change


def _twice(spans):  # the tool span sent with the id of the first chat span: one was dropped
    spans[1]["spanId"] = spans[0]["spanId"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        # a crash (min() of no root), and no sample when collected
        (lambda spans: spans[3].update(parentSpanId=spans[3]["spanId"]),
         "its spans' parents go round in a cycle"),
        (_cycle, "its spans' parents go round in a cycle"),
        (_twice, "comes twice, holding other values each time"),
        # stored as 0 input tokens
        (_counted({"stringValue": "lots"}), "a token count of 'lots': not an integer"),
        (_counted({"boolValue": True}), "a token count of 'True': not an integer"),
        # the trace's other messages were left out of its sample, in silence
        (_set(2, spanId=""), "t.jsonl: line 3: not a readable OTLP export request (ValueError: "
         'span "chat gpt-4o-mini" has no spanId)'),
        (_set(1, traceId=""), "t.jsonl: line 2: not a readable OTLP export request (ValueError: "
         "span "),
        # the store could not write it: a traceback
        (_set(0, attributes=[{"key": "gen_ai.output.messages", "value": {"stringValue":
          '[{"role": "assistant", "parts": [{"type": "text", "content": "\\ud800"}]}]'}}]),
         "holds a lone surrogate \\ud800, which is not valid Unicode"),
    ],
)  # fmt: skip
def test_spans_that_cannot_make_a_sample_are_refused_with_their_place(change, error):
    with pytest.raises(TraceError) as caught:
        otlp.read(TraceFile("t.jsonl", data=_one_trace(change)), None)
    assert error in str(caught.value) and str(caught.value).startswith("t.jsonl: ")


def _proto_with_span(trace_id: bytes, span_id: bytes) -> bytes:
    """openai_v2_latest's protobuf request (3 traces) with one more span, of these ids, in a
    scope of its own after the others' (the spans before it were dropped, those after kept)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest.FromString((OTEL / "openai_v2_latest.otlp.pb").read_bytes())
    spans = request.resource_spans[0].scope_spans[0].spans
    odd = request.resource_spans[0].scope_spans.add().spans.add()
    odd.CopyFrom(spans[0])
    odd.trace_id, odd.span_id = trace_id, span_id
    return request.SerializeToString()


@pytest.mark.parametrize(
    ("trace_id", "span_id", "error"),
    [
        # the valid spans before it were dropped, those after kept: 1 sample of 3, exit 0
        (b"\x01" * 16, b"\x07" * 7, "has a trace id of 16 bytes and a span id of 7 (OTLP's "
         "are 16 and 8)"),
        # UnboundLocalError: a traceback
        (b"\x01" * 9, b"\x02" * 8, "has a trace id of 9 bytes and a span id of 8"),
        (b"", b"", "1 span(s) of the request have no trace id and no span id"),
    ],
)  # fmt: skip
def test_a_protobuf_span_with_ids_of_other_lengths_refuses_its_request(
    tmp_path, trace_id, span_id, error
):
    path = tmp_path / "odd.pb"
    path.write_bytes(_proto_with_span(trace_id, span_id))
    store = tmp_path / "store"
    result = cli("import", "--traces", path, "--run-id", "odd", "--store", store)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: odd.pb: ") and error in result.output
    assert "Traceback" not in result.output and "\n" not in result.output.split("Hint:")[0][:-1]
    assert not (store / "odd").exists()


def test_an_empty_json_request_holds_nothing_but_is_a_request():
    """``{}``: OTLP/JSON's request of no spans (protobuf's empty body), not a foreign file."""
    from tcbreplay._importers.otel.otlp_json import decode_json

    assert not decode_json({}, "r").spans
    with pytest.raises(TraceError, match="not an OTLP export request"):
        decode_json({"data": []}, "r")


def test_a_framed_file_of_several_requests(tmp_path):
    body = (OTEL / "openai_v2_latest.otlp.pb").read_bytes()
    framed = struct.pack(">I", len(body)) + body
    source = otlp.read(TraceFile("f.pb", data=framed), None)
    assert source.lines == read("openai_v2_latest.otlp.pb").lines


def test_import_takes_the_file_alone_and_scores_it(tmp_path):
    store = tmp_path / "store"
    result = cli("import", "--traces", OTEL / "openai_v2_latest.otlp.jsonl", "--run-id", "ot",
                 "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "format: otlp (JSON Lines of OTLP/JSON export requests" in result.output
    assert "3/3 samples imported" in result.output
    assert "samples: one per trace (--sample-by chooses)" in result.output
    scored = cli("--format", "json", "score", "ot", "--store", store)
    assert scored.exit_code == 0, scored.output


def test_traces_that_offered_and_called_no_tool_import_with_no_tools(tmp_path):
    """An agent's trace that happened to use no tool: the tools are those offered or called,
    here none (it was refused: --tools is required)."""

    def toolless(doc):
        for rs in doc.get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                spans = []
                for span in ss["spans"]:
                    said = {a["key"]: a["value"].get("stringValue", "") for a in span["attributes"]}
                    if not span["traceId"].startswith("16ec9d") or "execute_tool" in span["name"]:
                        continue
                    if "tool_call" in said.get("gen_ai.output.messages", ""):
                        continue  # the model call that called the tool
                    span["attributes"] = [a for a in span["attributes"] if "tool" not in a["key"]]
                    for a in span["attributes"]:
                        if a["key"] == "gen_ai.input.messages":
                            sent = json.loads(a["value"]["stringValue"])
                            kept = [m for m in sent if m["role"] in ("system", "user")]
                            a["value"]["stringValue"] = json.dumps(kept)
                    spans.append(span)
                ss["spans"] = spans
        return doc

    lines = (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()
    path = tmp_path / "no-tools.jsonl"
    path.write_text("".join(json.dumps(toolless(json.loads(line))) + "\n" for line in lines))
    store = tmp_path / "store"
    result = cli("import", "--traces", path, "--run-id", "nt", "--store", store)
    assert result.exit_code == 0, result.output
    manifest = json.loads((store / "nt" / "manifest.json").read_text())
    assert manifest["tools"]["specs"] == []
    scored = cli("--format", "json", "score", "nt", "--store", store)
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["exact"] == 1.0


def test_the_import_says_what_a_sample_is(tmp_path):
    """A sample per trace or per agent span: the import says which, for the span dialects
    only."""
    agents = cli("import", "--traces", OTEL / "vercel_ai.otlp.jsonl", "--sample-by", "agent",
                 "--run-id", "ag", "--store", tmp_path / "store")  # fmt: skip
    assert agents.exit_code == 0, agents.output
    assert "samples: one per outermost agent span (--sample-by chooses)" in agents.output
    tau = TEST_DATA / "tau-bench"
    other = cli("import", "--traces", tau / "gpt-4o-airline-sample.json", "--tools",
                tau / "airline-tools.json", "--run-id", "tau",
                "--store", tmp_path / "store")  # fmt: skip
    assert other.exit_code == 0, other.output
    assert "samples: one per" not in other.output


def test_with_the_dataset_the_traces_are_its_samples_by_input(tmp_path):
    """Matched by input text to the benchmark they were asked from, the traces score
    against its gold: the 7 x 9 is the one wrong sample."""
    store = tmp_path / "store"
    result = cli("import", "--traces", OTEL / "openai_v2_latest.otlp.pb", "--dataset",
                 SHOP / "dataset.json", "--tools", SHOP_TOOLS, "--run-id", "ot",
                 "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "3/94 samples imported, 91 without a trace" in result.output
    scored = cli("--format", "json", "score", "ot", "--store", store)
    assert scored.exit_code == 0, scored.output
    rows = cli("--format", "json", "sql", "select sample_id, exact from scores where run_id = 'ot' "
               "and status = 'ok' order by sample_id", "--store", store)  # fmt: skip
    assert json.loads(rows.output) == [
        {"sample_id": "backpack-bottle-pen", "exact": True},
        {"sample_id": "mul-7-by-8", "exact": False},
        {"sample_id": "price-pen", "exact": True},
    ]


def test_sample_by_is_refused_for_a_dialect_without_it(tmp_path):
    traces = tmp_path / "t.jsonl"
    traces.write_text('{"sample_id": 0, "messages": [{"role": "user", "content": "hi"}]}\n')
    result = cli("import", "--format", "openai", "--traces", traces, "--dataset",
                 SHOP / "dataset.json", "--tools", SHOP_TOOLS, "--run-id", "x", "--sample-by",
                 "agent", "--store", tmp_path / "store")  # fmt: skip
    assert result.exit_code == 2
    assert "--sample-by: the openai dialect has no choice of sample" in result.output


# the pages whose examples run on the committed fixtures (jaeger.md's first needs a Jaeger)
EXAMPLE_PAGES = ["docs/otlp.md", "docs/inputs.md", "docs/jaeger.md"]


def _examples(page: str) -> list[list[list[str]]]:
    """The code blocks of a page that run on tests/data/otel, each a list of commands."""
    # every other piece between fences is a block (its opening fence's language dropped)
    pieces = re.split(r"^```.*\n", (ROOT / page).read_text(), flags=re.M)[1::2]
    out = []
    for block in pieces:
        if "tests/data/otel/" not in block:
            continue
        lines = block.replace("\\\n", " ").splitlines()
        out.append([shlex.split(line)[1:] for line in lines if line.startswith("tcbreplay ")])
    return out


@pytest.mark.parametrize(
    "commands",
    [pytest.param(c, id=f"{page}-{i}") for page in EXAMPLE_PAGES
     for i, c in enumerate(_examples(page))],
)  # fmt: skip
def test_the_examples_on_the_pages_run_as_written(commands, tmp_path, monkeypatch):
    """Each dialect's page shows a command on a committed fixture: it imports every trace
    (and scores), as the page says, from the repository's root."""
    monkeypatch.chdir(ROOT)
    assert commands and commands[0][0] == "import"
    for args in commands:
        result = cli(*args, "--store", tmp_path / "store")
        assert result.exit_code == 0, (args, result.output)
        if args[0] == "import":
            imported = re.search(r"(\d+)/(\d+) samples imported", result.output)
            assert imported and int(imported[1]) > 0, (args, result.output)


def test_every_fixture_has_an_example_on_a_page():
    """The files each page names exist, and every convention's fixture is shown."""
    paths = {
        arg
        for page in EXAMPLE_PAGES
        for commands in _examples(page)
        for args in commands
        for arg in args
        if arg.startswith("tests/data/otel/")
    }
    assert {p for p in paths if not (ROOT / p).exists()} == set()
    named = {Path(p).name for p in paths}
    assert {
        "semconv_examples.otlp.jsonl",  # GenAI, current
        "openai_v2_events.otlp.pb",  # GenAI, older events
        "openinference_openai.otlp.jsonl",  # OpenInference
        "vercel_ai.otlp.jsonl",  # the Vercel AI SDK
        "shop.evalset.json",  # ADK eval sets as gold
    } <= named


def _first_answer_changed(change) -> str:
    """openai-v2's spans with the first model answer holding a call (its
    gen_ai.output.messages) changed by ``change(messages)``: the file's text."""
    lines = (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for kv in span["attributes"]:
                    if kv["key"] == "gen_ai.output.messages" and "tool_call" in str(kv["value"]):
                        messages = json.loads(kv["value"]["stringValue"])
                        kv["value"]["stringValue"] = json.dumps(change(messages))
                        return "\n".join([json.dumps(doc), *lines[1:]]) + "\n"
    raise AssertionError("no answer with a call in the fixture")


def _args_not_arguments(messages):
    part = messages[0]["parts"][0]
    part["args"] = part.pop("arguments")
    return messages


def _named_by_an_object(messages):
    messages[0]["parts"][0]["name"] = {"x": 1}
    return messages


def _openais_shape(messages):
    return [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda messages: messages[0], "an object, not a list of messages"),
        (_args_not_arguments, "tool_call 'multiply_numbers' holds no 'arguments' but 'args'"),
        (lambda m: [{**m[0], "parts": {"type": "text"}}], "parts are an object, not a list"),
        (_named_by_an_object, "a tool_call part's name is an object, not text"),
        (_openais_shape, "holds OpenAI's tool_calls, not GenAI's parts"),
    ],
)
def test_a_genai_message_whose_calls_would_be_lost_is_refused(change, said, tmp_path):
    """Each of these was read as an answer without its call (or a call without arguments,
    or named by Python's repr), exit 0: a run scored as if the agent called nothing."""
    traces = tmp_path / "spans.otlp.jsonl"
    traces.write_text(_first_answer_changed(change))
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "bad", "--store", store)
    assert result.exit_code == 2, result.output
    assert "gen_ai.output.messages" in result.stderr and said in result.stderr, result.stderr
    assert not (store / "bad").exists()


def test_a_tool_run_that_answers_no_call_is_warned_of(recwarn):
    """An execute_tool span whose call id no model answer names was left out in silence."""

    def mistyped(spans):
        for a in spans[1]["attributes"]:
            if a["key"] == "gen_ai.tool.call.id":
                a["value"] = {"stringValue": "zz"}

    with pytest.warns(TcbReplayWarning) as caught:
        otlp.read(TraceFile("t.jsonl", data=_one_trace(mistyped)), None)
    [said] = [str(w.message) for w in caught]
    assert said.startswith("t.jsonl: trace ")
    assert "1 tool runs answer no call its model made, left out of the sample's messages: " in said
    assert said.endswith("(zz)")
    otlp.read(TraceFile("t.jsonl", data=_one_trace(lambda spans: None)), None)
    assert not [w for w in recwarn if isinstance(w.message, TcbReplayWarning)]


@pytest.mark.parametrize("dataset", [True, False])
def test_the_traces_of_one_sample_are_its_trials_in_the_order_they_began(dataset):
    """The first trace, and after it in the file a copy of it that began a second earlier:
    the trials were numbered in file order, the later run trial 0."""
    earlier = "0af7651916cd43dd8448eb211c80319c"

    def named(spans):  # (without a dataset, the traces say their sample)
        if not dataset:
            spans[3]["attributes"].append(
                {"key": "tcbreplay.sample_id", "value": {"stringValue": "mul"}}
            )

    first = _one_trace(named)
    copy = json.loads("[" + ",".join(first.decode().splitlines()) + "]")
    for doc in copy:
        for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            span["traceId"] = earlier
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                span[key] = str(int(span[key]) - 10**9)
    data = first + "".join(json.dumps(d) + "\n" for d in copy).encode()
    inputs = load_inputs(None, SHOP / "dataset.json", SHOP_TOOLS, None, need_prompt=False)
    source = otlp.read(TraceFile("t.jsonl", data=data), inputs if dataset else None)
    trials = {line.metadata["trace_id"]: (line.sample_id, line.trial) for line in source.lines}
    sample = "mul-7-by-8" if dataset else "mul"
    assert trials[earlier] == (sample, 0)
    assert sorted(trials.values()) == [(sample, 0), (sample, 1)]


def test_arguments_as_text_holding_nan_read_as_the_same_object_holds_them():
    """A convention gives a call's arguments as JSON text or as an object: NaN and Infinity
    were values in an object, and made the text invalid arguments whole."""
    from tcbreplay._importers.otel.calls import arguments

    given = arguments('{"a": NaN, "b": [Infinity], "c": 1e400}', "span s: arguments")
    held = arguments({"a": float("nan"), "b": [float("inf")], "c": float("inf")}, "span s")
    assert json.dumps(given) == json.dumps(held) == '{"a": NaN, "b": [Infinity], "c": Infinity}'
