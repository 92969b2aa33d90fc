"""The jaeger dialect (``tcbreplay._importers.jaeger``): Jaeger's JSON trace export, checked
against Jaeger's own fixtures (tests/data/otel/jaeger/README.md says what they are)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from helpers import TEST_DATA, cli, load_script

from tcbreplay._importers import jaeger, otlp
from tcbreplay._importers.dialect import TraceFile
from tcbreplay._importers.otel import spans as otlp_spans
from tcbreplay._importers.otel.otlp_json import decode_json
from tcbreplay._importers.sniff import sniff
from tcbreplay.errors import TraceError

OTEL = TEST_DATA / "otel"
JAEGER = OTEL / "jaeger"


def test_jaegers_answer_reads_as_the_otlp_request_it_was_converted_from():
    """Jaeger's golden pair: the span of its query answer is the span of the OTLP request,
    ids, parent, name, times and service alike, its attributes among Jaeger's tags."""
    (span,) = jaeger.read_spans((JAEGER / "otlp2jaeger-out.json").read_bytes(), "out.json")
    request = json.loads((JAEGER / "otlp2jaeger-in.json").read_text())
    original = decode_json(request, "in.json").spans[0]
    fields = ("trace_id", "span_id", "parent_id", "name", "start", "end")
    assert [getattr(span, f) for f in fields] == [getattr(original, f) for f in fields]
    assert span.resource["service.name"] == original.resource["service.name"] == "telemetrygen"
    assert original.attributes.items() <= span.attributes.items()
    assert span.scope == original.scope == "telemetrygen"


def test_a_trace_of_jaegers_ui_model():
    spans = jaeger.read_spans((JAEGER / "ui_01.json").read_bytes(), "ui_01.json")
    by_name = {s.name: s for s in spans}
    # its parent is the CHILD_OF reference within its own trace, not the one to trace ff
    assert by_name["reference-test"].parent_id == "0000000000000002"
    assert by_name["preserveParentID-test"].parent_id == "0000000000000004"
    tagged = next(s for s in spans if s.attributes)
    assert tagged.attributes["javascript_limit"] == 9223372036854775222
    assert tagged.status == otlp_spans.STATUS_ERROR  # the error tag
    assert by_name["test-general-conversion"].events[0].name == "some-event"
    assert by_name["test-general-conversion"].resource == {"service.name": "service-x"}
    assert by_name["test-general-conversion"].start == 1485467191639875000


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("otlp2jaeger-out.json", "a Jaeger trace export (data: traces with traceID and spans)"),
        ("ui_01.json", "a Jaeger trace (traceID and spans)"),
    ],
)
def test_it_is_told_from_the_file(name, reason):
    chosen = sniff(TraceFile.at(JAEGER / name))
    assert (chosen.dialect, chosen.reason) == ("jaeger", reason)


def _made_by() -> ModuleType:
    """``tests/data/otel/jaeger/make_genai.py``: OTLP spans mapped into Jaeger's JSON as
    Jaeger's golden pair shows (see its docstring)."""
    return load_script("jaeger_make_genai", JAEGER / "make_genai.py")


def test_the_committed_genai_file_is_the_mapping_of_the_otlp_fixture():
    """The docs' runnable example imports it: it is what make_genai.py writes."""
    assert (JAEGER / "openai_v2.jaeger.json").read_text() == _made_by().text()


def test_genai_spans_through_jaeger_read_as_through_otlp(tmp_path):
    data = (OTEL / "openai_v2_latest.otlp.jsonl").read_bytes()
    batch = otlp.read_batch(data, "t.jsonl")
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps(_made_by().as_jaeger(batch)))
    through_jaeger = jaeger.read(TraceFile.at(path), None)
    through_otlp = otlp.read(TraceFile("t.jsonl", data=data), None)
    strip = lambda lines: [(li.sample_id, [m["message"] for m in li.messages]) for li in lines]  # noqa: E731
    # Jaeger keeps microseconds: latencies differ in their last digits, messages do not
    assert strip(through_jaeger.lines) == strip(through_otlp.lines)
    by_agent = jaeger.read(TraceFile.at(path), None, sample_by="agent")
    assert len(by_agent.lines) == 3


def test_a_span_jaeger_did_not_write_is_refused_with_its_place():
    doc = {"data": [{"traceID": "1", "spans": [{"spanID": "2"}]}]}
    with pytest.raises(TraceError) as caught:
        jaeger.read_spans(json.dumps(doc).encode(), "j.json")
    assert str(caught.value).startswith("j.json: data[0]: spans[0]: not a Jaeger span (KeyError")


# none of these is a real key: each has the form of one (as tests/importers/test_otel_secrets.py)
PROVIDER_KEY = "sk-proj-Tq4bXr9LmN2pQ7vW1yZ3aB5cD8eF0gH"
INVOKE_KEY = "f3a9c1e7b5d2a8c4e6f0"
SERVICE_TOKEN = "Zq9xTT7pLmW3vR8sSERVICE"
LOG_KEY = "Zq9xTT7pLmW3vR8sLOGFIELD"


def _with_secrets(folder: Path) -> Path:
    """The committed GenAI file, every span given secrets where a Jaeger export keeps them:
    typed tags (a header, a URL's key, a model name and invocation parameters quoting one),
    its name, its messages, a log's fields, its process's tags and service name."""
    doc = json.loads((JAEGER / "openai_v2.jaeger.json").read_text())
    for trace in doc["data"]:
        for process in trace["processes"].values():
            process["serviceName"] += f" token={SERVICE_TOKEN}"
            process["tags"].append({"key": "api_key", "type": "string", "value": SERVICE_TOKEN})
        for span in trace["spans"]:
            span["operationName"] += f" Bearer {PROVIDER_KEY}"
            for tag in span["tags"]:
                if tag["key"] in ("gen_ai.request.model", "gen_ai.response.model"):
                    tag["value"] += f"?api_key={PROVIDER_KEY}"
                if tag["key"] == "gen_ai.input.messages":
                    tag["value"] = tag["value"].replace(
                        "You are the shop's assistant.", f"Use the key {PROVIDER_KEY}."
                    )
            span["tags"] += [
                {"key": "http.request.header.authorization", "type": "string",
                 "value": f"Bearer {PROVIDER_KEY}"},
                {"key": "url.full", "type": "string",
                 "value": f"https://example.com/v1/chat?key={INVOKE_KEY}"},
                {"key": "llm.invocation_parameters", "type": "string",
                 "value": json.dumps({"temperature": 0, "api_key": INVOKE_KEY})},
            ]  # fmt: skip
            span["logs"] = [
                {"timestamp": span["startTime"], "fields": [
                    {"key": "event", "type": "string", "value": f"retry api_key={LOG_KEY}"},
                    {"key": "x-goog-api-key", "type": "string", "value": LOG_KEY}]}
            ]  # fmt: skip
    path = folder / "secrets.jaeger.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_import_of_a_jaeger_export_stores_no_secret(tmp_path):
    """Jaeger's tags were taken as they came: a key in a span's messages, model name or
    headers was stored in the messages, the manifest and the journal, and shown by sql."""
    traces = _with_secrets(tmp_path)
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "j", "--store", store)
    assert result.exit_code == 0, result.output
    stored = b"".join(p.read_bytes() for p in sorted((store / "j").rglob("*")) if p.is_file())
    secrets = (PROVIDER_KEY, INVOKE_KEY, SERVICE_TOKEN, LOG_KEY)
    assert not [s for s in secrets if s.encode() in stored]
    assert not [s for s in secrets if s in result.output]
    assert (
        "Warning: secrets.jaeger.json: 8 value(s) inside messages or tool calls held a "
        "credential and are stored as [redacted], the first at data[0]: spans[0]: "
        "gen_ai.input.messages" in result.output
    )
    found = cli("sql", "--store", store, "--format", "json",
                "select message->>'$.data.response_metadata.model_name' as model "
                "from messages where type = 'ai' limit 1")  # fmt: skip
    assert json.loads(found.stdout) == [{"model": "gpt-4o-mini-2024-07-18?api_key=[redacted]"}]
    # the same spans read as their OTLP request are: the messages, the secrets kept alike
    spans = jaeger.read_spans(traces.read_bytes(), "j.json")
    assert spans[0].attributes["http.request.header.authorization"] == "[redacted]"
    assert spans[0].name.endswith("Bearer [redacted]")
