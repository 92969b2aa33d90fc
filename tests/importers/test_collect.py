"""``tcbreplay collect``: an OTLP/HTTP receiver writing what it receives into a run, crash-safe
(kill -9 loses nothing acknowledged), refusing bad payloads without falling over, finished by
Ctrl-C. The spans come from the real exporters (live) and the real fixtures."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from collecting import collecting, post
from helpers import TEST_DATA, cli, cli_process

from tcbreplay._compare.audit import verify_run
from tcbreplay._importers.otel import collect as collect_module
from tcbreplay._importers.otel.collect import Collector
from tcbreplay._store.runs import Store

OTEL = TEST_DATA / "otel"
PB = (OTEL / "openai_v2_latest.otlp.pb").read_bytes()
JSON_LINES = (OTEL / "openai_v2_details.otlp.jsonl").read_bytes().splitlines()
CALLS = {  # what make_openai_v2.py scripted the model to call (7 x 9: its mistake)
    "Multiply 7 by 8 for me.": [["multiply_numbers", {"a": 7, "b": 9}]],
    "pen price?": [["list_items", {}]],
    "One backpack, one bottle and one pen: how much is that altogether?": [
        ["list_items", {}], ["add_numbers", {"a": 25.0, "b": 8.0}],
        ["add_numbers", {"a": 33.0, "b": 1.2}],
    ],
}  # fmt: skip


def calls_by_input(store: Path, run_id: str) -> dict[str, list]:
    rows = cli("--format", "json", "sql", "select s.input, c.name, c.args from tool_calls c join "
               f"samples s using (run_id, sample_id, trial) where run_id = '{run_id}' order by "
               "s.input, c.position", "--store", store)  # fmt: skip
    assert rows.exit_code == 0, rows.output
    out: dict[str, list] = {}
    for row in json.loads(rows.output):
        out.setdefault(row["input"], []).append([row["name"], json.loads(row["args"])])
    return out


@pytest.mark.slow  # a process of its own
def test_the_real_otlp_exporter_records_an_agent_into_a_run(tmp_path):
    """openai-v2's spans around the real openai client, sent by the OTLP/HTTP exporter
    (protobuf) as an instrumented agent sends them: each trace a sample, scored."""
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, summary):
        app = subprocess.run(
            [sys.executable, OTEL / "make_openai_v2.py", "latest", "--to", endpoint],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert app.returncode == 0, app.stderr
    (done,) = summary
    assert (done.samples, done.refused) == (3, 0)
    assert calls_by_input(store, "live") == CALLS
    manifest = json.loads((store / "live" / "manifest.json").read_text())
    assert (manifest["status"], manifest["source"]) == ("complete", "collect")
    assert cli("score", "live", "--store", store).exit_code == 0


@pytest.mark.slow  # a process of its own
def test_openinference_spans_of_a_langgraph_agent_collected_live_read_as_their_file(tmp_path):
    """OpenInference's LangChain instrumentation around tcbreplay's own agent on the sim
    model, posted by the OTLP/HTTP exporter as it runs: the run collected holds the calls of
    the same run written to a file by the JSON file exporter (openinference_sim)."""
    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        app = subprocess.run(
            [sys.executable, OTEL / "make_openinference.py", "--to", endpoint],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert app.returncode == 0, app.stderr
    (done,) = summary
    assert (done.samples, done.refused) == (6, 0), log
    traces = OTEL / "openinference_sim.otlp.jsonl"
    assert cli("import", "--traces", traces, "--run-id", "file", "--store", store).exit_code == 0
    live = calls_by_input(store, "live")
    assert len(live) == 5  # the six questions but "Hi there!", which calls nothing
    assert live == calls_by_input(store, "file")


def sdk_tracer(endpoint: str, trace_id: int | None = None):
    """A tracer of the OpenTelemetry SDK exporting each span as it ends (the OTLP/HTTP
    exporter, protobuf) to ``endpoint``, and its provider; ``trace_id``: every trace's id."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class Ids(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            return trace_id or super().generate_trace_id()

    provider = TracerProvider(id_generator=Ids())
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("tcbreplay-tests"), provider


def chat_span(tracer, question: str, answer: str) -> None:
    """A model call as the GenAI conventions write it, asked ``question``."""
    said = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    answered = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
    with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": json.dumps(said), "gen_ai.output.messages": json.dumps(answered),
    }):  # fmt: skip
        pass


def samples_of(store: Path, run_id: str) -> list[tuple]:
    query = (
        "select sample_id, trial, input, n_messages from samples "
        f"where run_id = '{run_id}' order by sample_index"
    )
    rows = cli("--format", "json", "sql", query, "--store", store)
    assert rows.exit_code == 0, rows.output
    return [tuple(row.values()) for row in json.loads(rows.output)]


def test_a_later_parentless_span_that_comes_before_the_root_makes_no_trial_of_its_own(tmp_path):
    """A parentless span of the trace begun after its root (a guard's check) and ended before
    the rest: it came first, made the trace a sample, and the root made another trial of it
    (trial 0: no messages, its dataset entry's input empty; import: one sample)."""
    from opentelemetry.context import Context

    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        tracer, provider = sdk_tracer(endpoint, trace_id=0x7777 << 64)
        with tracer.start_as_current_span(
            "invoke_agent shop", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            with tracer.start_as_current_span("guard", context=Context()):  # (no parent)
                pass
            chat_span(tracer, "What is 2 plus 3?", "It is 5.")
        provider.shutdown()
    assert summary[0].samples == 1, log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 0, imported.output
    assert samples_of(store, "live") == samples_of(store, "file")
    assert samples_of(store, "live")[0][2:] == ("What is 2 plus 3?", 2)
    # the dataset entry too: made of the trace as it is, not of its first span to come
    dataset = (store / "live" / "dataset.jsonl").read_text()
    assert json.loads(dataset)["input"] == "What is 2 plus 3?"


def agent_runs(endpoint: str, runs: list[tuple[str, dict]]) -> list[str]:
    """Agent runs (a question, the ``tcbreplay.*`` attributes of its root span) as traces the
    OpenTelemetry SDK exports, each a model call under an agent span; their trace ids."""
    tracer, provider = sdk_tracer(endpoint)
    traces = []
    for question, attributes in runs:
        with tracer.start_as_current_span("invoke_agent shop", attributes={
            "gen_ai.operation.name": "invoke_agent", **attributes,
        }) as root:  # fmt: skip
            chat_span(tracer, question, "Done.")
        traces.append(format(root.get_span_context().trace_id, "032x"))
    provider.shutdown()
    return traces


def test_a_second_trace_of_a_sample_and_trial_does_not_replace_the_first(tmp_path):
    """Two traces whose roots say the same tcbreplay.sample_id and tcbreplay.trial: the second
    replaced the first in silence (exit 0), the dataset keeping the first's input; import
    refuses them. The second is not stored, said naming both traces, and collect exits 1."""
    store = tmp_path / "store"
    tagged = {"tcbreplay.sample_id": "s1", "tcbreplay.trial": 0}
    with collecting(store) as (endpoint, log, summary):
        first, second = agent_runs(endpoint, [("first", tagged), ("second", tagged)])
    assert (summary[0].samples, summary[0].unstored) == (1, 1)
    assert samples_of(store, "live") == [("s1", 0, "first", 2)]
    assert json.loads((store / "live" / "dataset.jsonl").read_text())["input"] == "first"
    said = [line for line in log if "appears twice" in line]
    assert said == [
        f"collect: trace {second}: not stored (sample ('s1', 0) appears twice: trace {first} "
        "made it first, and is kept; give each trace of a sample a tcbreplay.trial of its own)"
    ], log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 2 and "sample ('s1', 0) appears twice" in imported.output


def test_a_trace_without_a_trial_takes_the_first_its_sample_has_not(tmp_path):
    """(It took the number of the sample's trials: 1, that of the trace before, which it
    replaced; import numbers it 0.)"""
    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        agent_runs(endpoint, [("Hi", {"tcbreplay.sample_id": "s1", "tcbreplay.trial": 1}),
                              ("Hi", {"tcbreplay.sample_id": "s1"})])  # fmt: skip
    assert (summary[0].samples, summary[0].unstored) == (2, 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 0, imported.output
    assert sorted(samples_of(store, "live")) == sorted(samples_of(store, "file")) == [
        ("s1", 0, "Hi", 2), ("s1", 1, "Hi", 2)
    ]  # fmt: skip


HUMAN_BY_TRIAL = (
    "select trial, json_extract_string(message, '$.data.content') as said from messages "
    "where run_id = '{run}' and type = 'human' order by trial"
)


def said_by_trial(store: Path, run_id: str) -> list[tuple[int, str]]:
    """Each trial of the run and what its user said (which trace made it)."""
    rows = cli("--format", "json", "sql", HUMAN_BY_TRIAL.format(run=run_id), "--store", store)
    assert rows.exit_code == 0, rows.output
    return [(r["trial"], r["said"]) for r in json.loads(rows.output)]


@pytest.mark.parametrize(
    "order", [("named", "a"), ("a", "named"), ("a", "b", "named")],
    ids=["named first", "named second", "named third"],
)  # fmt: skip
def test_traces_without_a_trial_beside_one_naming_trial_0_take_the_next(tmp_path, order):
    """A trace naming tcbreplay.trial 0 and one of its sample naming none: collect made the
    second trial 1 where the named one came first, and refused the named one where it came
    later; import numbered the unnamed one 0 too and refused the file ('appears twice').
    Both keep the trial named and give the others, in the order they began, the first trials
    their sample has not."""
    store = tmp_path / "store"
    named = {"tcbreplay.sample_id": "s1", "tcbreplay.trial": 0}
    runs = [(said, named if said == "named" else {"tcbreplay.sample_id": "s1"}) for said in order]
    with collecting(store) as (endpoint, log, summary):
        agent_runs(endpoint, runs)
    assert (summary[0].samples, summary[0].unstored) == (len(order), 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 0, imported.output
    unnamed = [said for said in order if said != "named"]
    expected = [(0, "named"), *((n + 1, said) for n, said in enumerate(unnamed))]
    assert said_by_trial(store, "live") == said_by_trial(store, "file") == expected
    assert sorted(samples_of(store, "live")) == sorted(samples_of(store, "file"))
    assert not [line for line in log if "not stored" in line], log


def test_trials_of_a_sample_are_numbered_by_start_time_as_import_numbers_them(tmp_path):
    """Two traces of one sample, the first begun ending after the whole second came: collect
    numbered the second trial 0 (the first it could build), import numbers the first 0 (it
    began first). Both number by start time now."""
    from opentelemetry import trace as trace_api

    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        tracer, provider = sdk_tracer(endpoint)
        root = tracer.start_span("invoke_agent shop", attributes={
            "gen_ai.operation.name": "invoke_agent", "tcbreplay.sample_id": "s1",
        })  # fmt: skip
        with trace_api.use_span(root, end_on_exit=False):
            chat_span(tracer, "begun first", "Done.")
        time.sleep(0.01)  # (the second trace's root begins later)
        agent_runs(endpoint, [("begun second", {"tcbreplay.sample_id": "s1"})])
        root.end()
        provider.shutdown()
    assert (summary[0].samples, summary[0].unstored) == (2, 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 0, imported.output
    said = {}
    for run in ("live", "file"):
        rows = cli("--format", "json", "sql", HUMAN_BY_TRIAL.format(run=run), "--store", store)
        assert rows.exit_code == 0, rows.output
        said[run] = [(r["trial"], r["said"]) for r in json.loads(rows.output)]
    assert said["live"] == said["file"] == [(0, "begun first"), (1, "begun second")]
    assert sorted(samples_of(store, "live")) == sorted(samples_of(store, "file"))


def test_every_trial_of_a_sample_holds_its_dataset_entrys_input_as_import_stores_it(tmp_path):
    """Two traces of one sample asked in other words: collect stored each trial's own first
    user message as the sample's input (the dataset the first's), import the entry's."""
    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        agent_runs(endpoint, [("Hi", {"tcbreplay.sample_id": "s1"}),
                              ("Hello there", {"tcbreplay.sample_id": "s1"})])  # fmt: skip
    assert (summary[0].samples, summary[0].unstored) == (2, 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 0, imported.output
    assert samples_of(store, "live") == samples_of(store, "file") == [
        ("s1", 0, "Hi", 2), ("s1", 1, "Hi", 2)
    ]  # fmt: skip
    assert json.loads((store / "live" / "dataset.jsonl").read_text())["input"] == "Hi"


def test_the_entry_of_a_sample_is_its_first_traces_to_come_as_imports(tmp_path):
    """The first trace's model call came, then a whole second trace of the sample, then the
    first's root: the second made a sample first and its question was the dataset's and every
    row's; import takes the first trace in the received file, which came first."""
    from opentelemetry import trace as trace_api

    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        tracer, provider = sdk_tracer(endpoint)
        root = tracer.start_span("invoke_agent shop", attributes={
            "gen_ai.operation.name": "invoke_agent", "tcbreplay.sample_id": "s1",
        })  # fmt: skip
        with trace_api.use_span(root, end_on_exit=False):
            chat_span(tracer, "Hi", "Done.")
        agent_runs(endpoint, [("Hello there", {"tcbreplay.sample_id": "s1"})])
        root.end()
        provider.shutdown()
    assert (summary[0].samples, summary[0].unstored) == (2, 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--store", store)
    assert imported.exit_code == 0, imported.output
    assert sorted(samples_of(store, "live")) == sorted(samples_of(store, "file"))
    assert {row[2] for row in samples_of(store, "live")} == {"Hi"}
    assert json.loads((store / "live" / "dataset.jsonl").read_text())["input"] == "Hi"


def test_agent_runs_of_one_trace_naming_one_sample_are_its_trials(tmp_path):
    """(--sample-by agent: the runs of a trace are numbered together, none refused.)"""
    store = tmp_path / "store"
    with collecting(store, sample_by="agent") as (endpoint, log, summary):
        tracer, provider = sdk_tracer(endpoint)
        with tracer.start_as_current_span("workflow"):
            for _ in range(2):
                with tracer.start_as_current_span("invoke_agent shop", attributes={
                    "gen_ai.operation.name": "invoke_agent", "tcbreplay.sample_id": "s1",
                }):  # fmt: skip
                    chat_span(tracer, "Hi", "Done.")
        provider.shutdown()
    assert (summary[0].samples, summary[0].unstored) == (2, 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--sample-by", "agent",
                   "--store", store)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    assert samples_of(store, "live") == samples_of(store, "file")
    assert [row[:2] for row in samples_of(store, "live")] == [("s1", 0), ("s1", 1)]


@pytest.mark.parametrize(
    "order", [("a", "named"), ("named", "a")], ids=["named second", "named first"]
)
def test_agent_runs_of_one_trace_naming_trial_0_or_none_are_numbered_as_import_does(
    tmp_path, order
):
    """Reported: --sample-by agent, one trace holding a run of sample s1 naming no trial and
    then one naming tcbreplay.trial 0: collect refused the trace ('appears twice'), the
    unnamed run having taken trial 0 first, where import keeps the named run's 0 and numbers
    the other 1. Collect numbers them so now, whichever comes first."""
    store = tmp_path / "store"
    with collecting(store, sample_by="agent") as (endpoint, log, summary):
        tracer, provider = sdk_tracer(endpoint)
        with tracer.start_as_current_span("workflow"):
            for said in order:
                trial = {"tcbreplay.trial": 0} if said == "named" else {}
                with tracer.start_as_current_span("invoke_agent shop", attributes={
                    "gen_ai.operation.name": "invoke_agent", "tcbreplay.sample_id": "s1",
                    **trial,
                }):  # fmt: skip
                    chat_span(tracer, said, "Done.")
        provider.shutdown()
    assert (summary[0].samples, summary[0].unstored) == (2, 0), log
    received = store / "live" / "received.otlp.pb"
    imported = cli("import", "--traces", received, "--run-id", "file", "--sample-by", "agent",
                   "--store", store)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    assert said_by_trial(store, "live") == said_by_trial(store, "file") == [(0, "named"), (1, "a")]
    assert sorted(samples_of(store, "live")) == sorted(samples_of(store, "file"))
    assert not [line for line in log if "not stored" in line], log


def test_a_trace_of_no_model_call_tool_run_or_agent_is_left_out_and_said(tmp_path):
    """An instrumented service's every request is exported: its health checks were samples
    of no messages, scored as an agent that did nothing (import leaves them out)."""
    from tcbreplay.errors import TcbReplayWarning

    store = tmp_path / "store"
    said = (
        r"^collect: 1 trace holds no model call, tool run or agent span \(GenAI, "
        r"OpenInference, the AI SDK\), left out: trace [0-9a-f]{32} "
    )
    with (
        pytest.warns(TcbReplayWarning, match=said + r"\('GET /health'\)$"),
        collecting(store) as (endpoint, log, summary),
    ):
        tracer, provider = sdk_tracer(endpoint)
        with tracer.start_as_current_span("GET /health", attributes={
            "http.request.method": "GET", "url.path": "/health",
        }):  # fmt: skip
            pass
        with tracer.start_as_current_span("POST /chat"):
            chat_span(tracer, "Hi", "Hello.")
        provider.shutdown()
    assert (summary[0].samples, summary[0].no_agent, summary[0].unstored) == (1, 1, 0), log
    assert [row[2] for row in samples_of(store, "live")] == ["Hi"]


def test_json_and_protobuf_requests_are_received_as_they_come(tmp_path):
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, summary):
        assert post(f"{endpoint}/v1/traces", PB, "application/x-protobuf") == (200, b"")
        for line in JSON_LINES:  # spans and log records, as the JSON file exporters wrote them
            kind = "logs" if line.startswith(b'{"resourceLogs"') else "traces"
            assert post(f"{endpoint}/v1/{kind}", line, "application/json") == (200, b"{}")
        # while it runs, the samples are in the run's journal
        journal = (store / "live" / "journal.jsonl").read_text().splitlines()
        assert len({json.loads(x)["sample_id"] for x in journal}) == 6
    assert summary[0].samples == 6
    assert sum(len(v) for v in calls_by_input(store, "live").values()) == 10
    assert (store / "live" / "received.otlp.pb").stat().st_size == len(PB) + 4
    # the run's model is the one its model calls answered with, as an import names it
    (store / "both.otlp.jsonl").write_bytes(b"\n".join(JSON_LINES) + b"\n")
    imported = cli("import", "--traces", store / "both.otlp.jsonl", "--run-id", "file",
                   "--store", store)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    model = {r: json.loads((store / r / "manifest.json").read_text())["model"]
             for r in ("live", "file")}  # fmt: skip
    assert model["live"]["id"] == model["file"]["id"] == "gpt-4o-mini-2024-07-18"
    assert model["live"]["provider"] == "collect"


def test_chunked_bodies_are_read_as_javascripts_exporter_sends_them(tmp_path):
    import http.client

    with collecting(tmp_path / "store") as (endpoint, _log, summary):
        host, port = endpoint.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        pieces = (PB[k : k + 1000] for k in range(0, len(PB), 1000))
        connection.request("POST", "/v1/traces", body=pieces, encode_chunked=True,
                           headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
        assert connection.getresponse().status == 200
        connection.close()
    assert summary[0].samples == 3


@pytest.mark.parametrize("coding", ["gzip", "GZIP", "Gzip "])
def test_gzip_bodies_are_read(tmp_path, coding):
    """Content codings are case-insensitive (RFC 9110): GZIP got 400."""
    with collecting(tmp_path / "store") as (endpoint, _log, summary):
        status, answer = post(f"{endpoint}/v1/traces", gzip.compress(PB),
                              "application/x-protobuf", **{"Content-Encoding": coding})  # fmt: skip
        assert status == 200, answer
    assert summary[0].samples == 3


@pytest.mark.parametrize(
    ("body", "content_type", "why"),
    [
        (b"\x0a\xff\xff\xff\xff\x0f", "application/x-protobuf",
         "not an OTLP protobuf export request"),
        (b"{not json", "application/json", "not JSON"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
         "application/json", "not a readable OTLP export request"),
        (PB, "text/plain", "Content-Type 'text/plain': send application/x-protobuf or"),
        # (json.loads took them, they were kept, and were no request once read again)
        (JSON_LINES[1].decode().encode("utf-16"), "application/json", "not UTF-8 JSON"),
        (JSON_LINES[1].decode().encode("utf-32"), "application/json", "not UTF-8 JSON"),
    ],
)  # fmt: skip
def test_a_bad_payload_gets_400_and_a_log_line_and_nothing_else_changes(
    tmp_path, body, content_type, why
):
    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        status, answer = post(f"{endpoint}/v1/traces", body, content_type)
        assert status == 400
        assert why in json.loads(answer)["message"]
        assert post(f"{endpoint}/v1/traces", PB, "application/x-protobuf")[0] == 200
    assert any("/v1/traces: refused (400): " in line and why in line for line in log), log
    assert (summary[0].samples, summary[0].refused) == (3, 1)
    assert (store / "live" / "received.otlp.pb").read_bytes()[4:] == PB  # the bad one not kept


def test_a_utf8_byte_order_mark_is_dropped_from_what_is_kept(tmp_path):
    """(JSON is read as UTF-8 text now; a BOM kept on a line past the first is no JSON.)"""
    from tcbreplay.errors import TcbReplayWarning

    store = tmp_path / "store"
    # (a chat span and an execute_tool span, their content on log records not sent)
    with (
        pytest.warns(TcbReplayWarning, match=r"^collect: 1 tool runs hold no result and no "
                     r"error .* trace a033956a2e5cc148a5a84c4dc3491d3d span efc23ee12de0103e "
                     r"\(multiply_numbers\)$"),
        collecting(store) as (endpoint, _log, summary),
    ):  # fmt: skip
        assert post(f"{endpoint}/v1/traces", JSON_LINES[1], "application/json")[0] == 200
        status, _ = post(f"{endpoint}/v1/traces", b"\xef\xbb\xbf" + JSON_LINES[2],
                         "application/json")  # fmt: skip
        assert status == 200
    assert summary[0].requests == 2
    received = (store / "live" / "received.otlp.jsonl").read_bytes()
    assert received.splitlines() == [JSON_LINES[1], JSON_LINES[2]]


def test_a_tool_run_answering_no_call_is_said_once_however_often_its_trace_is_built(tmp_path):
    """A trace made a sample again as each of its spans came (a parentless span first): the
    warning of a tool run answering no call came again with every span after it, as the CLI
    shows every warning; it comes once per run now, and a new such run is still said."""
    import warnings

    from opentelemetry.context import Context

    from tcbreplay.errors import TcbReplayWarning

    def tool_span(tracer, name: str, call_id: str) -> None:
        with tracer.start_as_current_span(f"execute_tool {name}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id, "gen_ai.tool.call.result": "1",
        }):  # fmt: skip
            pass

    store = tmp_path / "store"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TcbReplayWarning)  # (as the CLI shows them)
        with collecting(store) as (endpoint, log, summary):
            tracer, provider = sdk_tracer(endpoint, trace_id=0x7778 << 64)
            with tracer.start_as_current_span(
                "invoke_agent shop", attributes={"gen_ai.operation.name": "invoke_agent"}
            ):
                with tracer.start_as_current_span("guard", context=Context()):  # (no parent)
                    pass
                chat_span(tracer, "What is 2 plus 3?", "It is 5.")
                tool_span(tracer, "add", "call_unasked")
                chat_span(tracer, "What is 2 plus 3?", "It is 5.")
                tool_span(tracer, "lookup", "call_other")
            provider.shutdown()
    assert summary[0].samples == 1, log
    said = [str(w.message) for w in caught if "answer no call" in str(w.message)]
    assert [text.split(": ", 2)[-1] for text in said] == [
        "1 tool runs answer no call its model made, left out of the sample's messages: "
        "add (call_unasked)",
        "1 tool runs answer no call its model made, left out of the sample's messages: "
        "lookup (call_other)",
    ], said


def test_an_unknown_path_is_404(tmp_path):
    with collecting(tmp_path / "store") as (endpoint, log, _summary):
        status, answer = post(f"{endpoint}/v1/metrics?api_key=sk-0123456789", b"{}",
                              "application/json")  # fmt: skip
        assert status == 404
        assert b"/v1/metrics?..." in answer and b"sk-0123456789" not in answer
        # OTLP/JSON's empty request: one of nothing (protobuf's empty body was taken; it got 400)
        assert post(f"{endpoint}/v1/traces", b"{}", "application/json") == (200, b"{}")
    # a line on stderr, as every other refusal has (a 404 had none)
    assert any("/v1/metrics?...: refused (404): no such path" in line for line in log), log


def test_a_body_shorter_than_its_length_is_400_and_not_kept(tmp_path):
    """The first of three traces, sent with the length of all three (a client cut off): it
    was answered 200, the first trace stored and the others lost, unknown to the exporter."""
    import socket

    store = tmp_path / "store"
    with collecting(store) as (endpoint, log, summary):
        host, port = endpoint.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/x-protobuf\r\nContent-Length: %d\r\n\r\n" % len(PB)
                         + PB[: len(PB) // 3])  # fmt: skip
            conn.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := conn.recv(65536):  # (the answer, then the server closes)
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert f"the body ended after {len(PB) // 3} of its {len(PB)} bytes".encode() in answer
    assert summary[0].samples == 0 and summary[0].refused == 1
    assert any("refused (400): the body ended after" in line for line in log), log
    assert not (store / "live" / "received.otlp.pb").read_bytes()


def test_a_burst_of_exporters_waits_to_be_accepted_not_reset(tmp_path):
    """64 exporters that connect at once, before the receiver accepts any: socketserver's
    backlog of 5 reset or stalled the connections past it, and their spans were lost."""
    import socket

    receiver = collect_module.Receiver("127.0.0.1", 0)
    conns = []
    try:
        for _ in range(64):  # (not served: each connection waits in the backlog)
            conns.append(socket.create_connection(receiver.server_address[:2], timeout=1))
    finally:
        for conn in conns:
            conn.close()
        receiver.server_close()
    assert len(conns) == 64


def test_a_request_that_comes_as_the_collector_stops_is_503_to_be_sent_again(tmp_path):
    """A keep-alive connection posting while the run is finished: its files were closed
    under it (a 500, which exporters do not retry, and a traceback)."""
    collector = Collector(Store(tmp_path / "store"), "live")
    collector.finish()
    with pytest.raises(collect_module.BodyError) as refused:
        collector.receive(PB, "application/x-protobuf")
    assert refused.value.code == 503 and "stopping" in str(refused.value)


def test_a_gzip_body_past_the_limit_once_decompressed_is_413_and_not_kept(tmp_path, monkeypatch):
    """A few MB of gzip can hold gigabytes (it was decompressed whole, and written)."""
    monkeypatch.setattr(collect_module, "MAX_BODY", 2**20)
    bomb = gzip.compress(b'{"resourceSpans": [], "x": "' + b" " * 2**21 + b'"}')
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, summary):
        status, answer = post(f"{endpoint}/v1/traces", bomb, "application/json",
                              **{"Content-Encoding": "gzip"})  # fmt: skip
        assert status == 413, answer
        assert b"once decompressed" in answer
    assert summary[0].refused == 1
    assert not (store / "live" / "received.otlp.jsonl").read_bytes()


def test_a_lone_surrogate_in_a_span_is_400_and_not_kept(tmp_path):
    """Valid JSON escapes, in JSON text a span attribute holds: no text UTF-8 can store (the
    request got a 500 after it was kept, and the run could not be taken up again)."""
    request = next(json.loads(line) for line in JSON_LINES if b"resourceSpans" in line)
    span = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    said = '[{"role": "assistant", "parts": [{"type": "text", "content": "\\ud800"}]}]'
    span["attributes"].append({"key": "gen_ai.output.messages", "value": {"stringValue": said}})
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, summary):
        status, answer = post(f"{endpoint}/v1/traces", json.dumps(request).encode(),
                              "application/json")  # fmt: skip
        assert status == 400
        assert "holds a lone surrogate \\ud800" in json.loads(answer)["message"]
    assert summary[0].refused == 1
    assert not (store / "live" / "received.otlp.jsonl").read_bytes()


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /v1/traces HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400),
        (b"POST /v1/traces HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST /v1/traces HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", 400),
        (b"GET /v1/traces HTTP/1.1\r\n\r\n", 405),
        (b"PUT /v1/traces HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
    ],
)
def test_malformed_http_gets_a_4xx_of_json(tmp_path, head, status):
    """(They got no answer and a traceback, an HTML 501 page, or waited for the client.)"""
    import socket

    with collecting(tmp_path / "store") as (endpoint, _log, _summary):
        host, port = endpoint.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(head)
            answer = conn.recv(65536)
    assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer
    assert b"application/json" in answer


@pytest.mark.slow  # a process of its own
def test_kill_9_loses_nothing_acknowledged_and_collect_goes_on_with_the_run(tmp_path):
    store = tmp_path / "store"
    process = cli_process("--store", str(store), "collect", "--run-id", "k", "--port", "0")
    try:
        line = process.stderr.readline()
        while "listening on" not in line:
            assert line, "collect ended before it listened"
            line = process.stderr.readline()
        endpoint = line.split("listening on ")[1].split()[0]
        assert post(f"{endpoint}/v1/traces", PB, "application/x-protobuf")[0] == 200
        assert post(f"{endpoint}/v1/traces", JSON_LINES[1], "application/json")[0] == 200
    finally:
        process.kill()  # SIGKILL: no chance to finish anything
        process.wait(10)
    # the samples wait in the run's journal; scoring says how to finish it
    scored = cli("score", "k", "--store", store)
    assert scored.exit_code == 1
    assert f"tcbreplay collect --run-id k --store {store}" in scored.output
    # a request the kill cut in half, after the acknowledged ones
    with (store / "k" / "received.otlp.pb").open("ab") as f:
        f.write(len(PB).to_bytes(4, "big") + PB[:100])
    with collecting(store, "k") as (endpoint, _log, summary):
        pass
    assert summary[0].samples == 4  # three traces, and the one the JSON line began
    assert calls_by_input(store, "k")["pen price?"] == [["list_items", {}]]
    assert (store / "k" / "received.otlp.pb").stat().st_size == len(PB) + 4


@pytest.mark.slow  # a process of its own
def test_ctrl_c_finishes_the_run(tmp_path):
    store = tmp_path / "store"
    process = cli_process("--store", str(store), "collect", "--run-id", "c", "--port", "0")
    try:
        line = process.stderr.readline()
        while "listening on" not in line:
            assert line, "collect ended before it listened"
            line = process.stderr.readline()
        endpoint = line.split("listening on ")[1].split()[0]
        assert post(f"{endpoint}/v1/traces", PB, "application/x-protobuf")[0] == 200
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "run c: 3 samples from 16 spans (1 request)" in out
    assert json.loads((store / "c" / "manifest.json").read_text())["status"] == "complete"
    assert cli("score", "c", "--store", store).exit_code == 0


def test_a_refusal_quoting_a_header_keeps_no_secret(tmp_path):
    """Refusals quote what the client sent (a Content-Type, a Content-Encoding): a key in it
    went to the log and back to the client as it came."""
    key = "Zq9xTT7pLmW3vR8sCT"
    with collecting(tmp_path / "store") as (endpoint, log, _summary):
        status, answer = post(f"{endpoint}/v1/traces", PB, f"text/plain; api_key={key}")
        assert status == 400
        status, answer2 = post(f"{endpoint}/v1/traces", PB, "application/x-protobuf",
                               **{"Content-Encoding": f"br; Bearer {key}1"})  # fmt: skip
        assert status == 400
    said = "\n".join(log).encode() + answer + answer2
    assert b"api_key=[redacted]" in said and b"Bearer [redacted]" in said
    assert key.encode() not in said


@pytest.mark.parametrize("host", ["", "  "])
def test_an_empty_host_is_refused_not_every_interface(tmp_path, host):
    result = cli("collect", "--run-id", "h", "--host", host, "--port", "0",
                 "--store", tmp_path / "store")  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "Error: --host '': give an address to listen on (127.0.0.1: this machine only)"
    )
    assert not (tmp_path / "store").exists()


def test_a_port_that_cannot_be_had_leaves_the_store_as_it_was(tmp_path):
    """The run was made before the port was bound: a busy port left an empty run, listed by
    runs as interrupted."""
    import socket

    store = tmp_path / "store"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("collect", "--run-id", "c3", "--port", port, "--store", store)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}: ")
    assert not (store / "c3").exists()


def test_a_run_that_was_not_collected_is_not_added_to(tmp_path):
    store = tmp_path / "store"
    traces = OTEL / "openai_v2_latest.otlp.jsonl"
    assert cli("import", "--traces", traces, "--run-id", "imp", "--store", store).exit_code == 0
    result = cli("collect", "--run-id", "imp", "--port", "0", "--store", store)
    assert result.exit_code == 2
    assert "run 'imp' exists and was not collected" in result.output


def test_quiet_samples_are_let_go_and_read_back_when_more_comes(tmp_path, monkeypatch):
    """Memory stays flat: a sample's spans leave memory once quiet; a late log record of
    its trace brings them back from the received file, and the sample is made again."""
    monkeypatch.setattr(collect_module, "LINGER", 0.0)
    collector = Collector(Store(tmp_path / "store"), "m")
    spans_line = next(x for x in JSON_LINES if x.startswith(b'{"resourceSpans"'))
    logs_line = next(x for x in JSON_LINES if x.startswith(b'{"resourceLogs"'))
    collector.receive(PB, "application/x-protobuf")
    time.sleep(0.01)
    collector.receive(spans_line, "application/json")
    assert all(not t.spans for t in list(collector._traces.values())[:3])
    collector.receive(logs_line, "application/json")
    summary = collector.finish()
    assert summary.samples >= 3
    assert calls_by_input(tmp_path / "store", "m")["pen price?"] == [["list_items", {}]]
    # the dataset written as the collection ends is the one its manifest vouches for
    assert cli("score", "m", "--store", tmp_path / "store").exit_code == 0
    report = verify_run(Store(tmp_path / "store"), "m")
    assert report.ok and report.notes == [], report


def test_a_request_not_read_again_keeps_its_sample_and_no_place_is_given_twice(tmp_path):
    """A UTF-16 request an earlier version kept (and acknowledged), then a kill: taken up
    again, its trace was skipped, the next sample given its place (sample_index 0 twice: the
    run could not be scored) and the closing line counted three samples of the four."""
    store = tmp_path / "store"
    docs = [json.loads(x) for x in JSON_LINES if x.startswith(b'{"resourceSpans"')]
    request, spans = docs[0], docs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans += [span for doc in docs[1:] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
              for span in ss["spans"] if span["traceId"] == spans[0]["traceId"]]  # fmt: skip
    whole = json.dumps(request, ensure_ascii=False)  # (a whole trace: a sample)
    killed = Collector(Store(store), "k")
    killed.receive(whole.encode(), "application/json")
    killed.receive(PB, "application/x-protobuf")
    killed.close()  # (as a kill -9 leaves it: the samples in the journal)
    # the request as that version kept it: UTF-16, its newline bytes taken out
    utf16 = whole.encode("utf-16").replace(b"\r", b"").replace(b"\n", b"") + b"\n"
    (store / "k" / "received.otlp.jsonl").write_bytes(utf16)
    log: list[str] = []
    summary = Collector(Store(store), "k", log=log.append).finish()
    assert any("received.otlp.jsonl at byte 0: skipped" in line for line in log), log
    rows = cli("--format", "json", "sql", "select sample_index from samples where run_id = 'k'",
               "--store", store)  # fmt: skip
    indices = [row["sample_index"] for row in json.loads(rows.output)]
    assert summary.samples == len(indices) == len(set(indices)) == 4
    scored = cli("score", "k", "--store", store)
    assert scored.exit_code == 0, scored.output
    assert any("1 sample kept as stored in the run" in line for line in log), log


def test_a_run_an_earlier_version_gave_a_place_twice_is_mended_when_taken_up_again(tmp_path):
    """The journal such a resume left: the samples made again at the places before theirs (the
    skipped request's sample, at 0, beside another at 0). Taken up again, each sample made
    again from the received files takes a free place; the one not made again keeps its own."""
    store = tmp_path / "store"
    killed = Collector(Store(store), "k")
    for line in JSON_LINES[:6]:  # (a whole trace, its root last)
        killed.receive(line, "application/json")
    killed.receive(PB, "application/x-protobuf")
    killed.close()
    journal = store / "k" / "journal.jsonl"
    records = [json.loads(x) for x in journal.read_text().splitlines()]
    assert [r["sample_index"] for r in records] == [0, 1, 2, 3]  # (the JSON line's trace first)
    moved = [{**r, "sample_index": r["sample_index"] - 1} for r in records[1:]]
    with journal.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in moved)
    (store / "k" / "received.otlp.jsonl").write_bytes(b"")  # (its request skipped, as UTF-16)
    summary = Collector(Store(store), "k").finish()
    rows = cli("--format", "json", "sql", "select sample_index from samples where run_id = 'k'",
               "--store", store)  # fmt: skip
    indices = [row["sample_index"] for row in json.loads(rows.output)]
    assert summary.samples == len(indices) == len(set(indices)) == 4
    assert cli("score", "k", "--store", store).exit_code == 0


def test_a_collection_taken_up_again_counts_the_requests_of_the_run(tmp_path):
    store = tmp_path / "store"
    with collecting(store, "again") as (endpoint, _log, first):
        assert post(f"{endpoint}/v1/traces", PB, "application/x-protobuf")[0] == 200
    with collecting(store, "again") as (endpoint, _log, second):
        assert post(f"{endpoint}/v1/traces", JSON_LINES[1], "application/json")[0] == 200
    (before,), (after,) = first, second
    assert (after.requests, after.earlier_requests) == (2, 1)
    assert after.spans > before.spans and after.samples == 4


def agent_run_request(question: str, attributes: dict, *, as_json: bool) -> bytes:
    """An agent run (as :func:`agent_runs` makes one) as one export request of its spans, in
    protobuf or in OTLP/JSON (protobuf's JSON printer: ids in base64)."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tcbreplay-tests")
    with tracer.start_as_current_span("invoke_agent shop", attributes={
        "gen_ai.operation.name": "invoke_agent", **attributes,
    }):  # fmt: skip
        chat_span(tracer, question, "Done.")
    request = encode_spans(exporter.get_finished_spans())
    return MessageToJson(request).encode() if as_json else request.SerializeToString()


def test_a_collection_taken_up_again_reads_the_requests_in_the_order_they_came(tmp_path):
    """A protobuf request, then a JSON one, of one sample: taken up again, the JSON file was
    read first, and its trace took the sample's trial 0 and its dataset entry."""
    store = tmp_path / "store"
    s1 = {"tcbreplay.sample_id": "s1"}
    with collecting(store) as (endpoint, log, _):
        for question, as_json in (("first", False), ("second", True), ("third", False)):
            body = agent_run_request(question, s1, as_json=as_json)
            kind = "application/json" if as_json else "application/x-protobuf"
            assert post(f"{endpoint}/v1/traces", body, kind)[0] == 200
    before = samples_of(store, "live")
    assert [row[:3] for row in before] == [("s1", 0, "first"), ("s1", 1, "first"),
                                           ("s1", 2, "first")]  # fmt: skip
    said = "select trial, json_extract_string(message, '$.data.content') from messages " \
           "where run_id = 'live' and type = 'human' order by trial"  # fmt: skip
    first = cli("--format", "json", "sql", said, "--store", store)
    with collecting(store) as (_endpoint, log, summary):
        pass
    assert summary[0].earlier_requests == 3, log
    assert samples_of(store, "live") == before
    assert cli("--format", "json", "sql", said, "--store", store).output == first.output
    assert "first" in first.output and "third" in first.output
    assert (store / "live" / "received.order").read_bytes() == b"pjp"
    # a run collected before the order was kept: read as it was, and said
    (store / "live" / "received.order").unlink()
    with collecting(store) as (_endpoint, log, summary):
        pass
    assert "collect: live: 3 requests of the received files are not in received.order" in (
        "\n".join(log)
    )
    assert (store / "live" / "received.order").read_bytes() == b"jpp"


@pytest.mark.parametrize("time", ["999999999999999999999999999", "-5"])
def test_a_span_time_beyond_otlps_range_is_400_and_not_kept(tmp_path, time):
    """Such a time crashed the collection's end (no datetime that far): the run stayed
    unfinished."""
    doc = json.loads(next(x for x in JSON_LINES if x.startswith(b'{"resourceSpans"')))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["startTimeUnixNano"] = time
    with collecting(tmp_path / "store") as (endpoint, _log, summary):
        status, body = post(f"{endpoint}/v1/traces", json.dumps(doc).encode(), "application/json")
        assert status == 400 and b"startTimeUnixNano" in body
    assert summary[0].status == "complete" and summary[0].requests == 0


def test_an_empty_request_is_answered_and_kept_nowhere(tmp_path):
    """{} gets 200, as exporters expect, and no line: a received file's first line must hold
    spans for the file to import as it is."""
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, summary):
        assert post(f"{endpoint}/v1/traces", b"{}", "application/json") == (200, b"{}")
        first = next(x for x in JSON_LINES if x.startswith(b'{"resourceSpans"'))
        assert post(f"{endpoint}/v1/traces", first, "application/json") == (200, b"{}")
    assert summary[0].requests == 2 and summary[0].unstored == 0
    received = store / "live" / "received.otlp.jsonl"
    assert received.read_bytes().splitlines() == [first]
    again = cli("import", "--traces", received, "--run-id", "again", "--store", store)
    assert again.exit_code == 0, again.output


def test_a_trace_whose_spans_make_no_sample_is_counted_and_the_collection_fails(
    tmp_path, monkeypatch
):
    """A span sent again with other values is known only once both came, after the first
    was acknowledged: the trace is said in the log, counted at the end, and collect exits 1
    (it was dropped from the closing line before)."""
    store = tmp_path / "store"
    first = next(x for x in JSON_LINES if x.startswith(b'{"resourceSpans"'))
    doc = json.loads(first)
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["name"] = span["name"] + " (sent again, changed)"
    with collecting(store) as (endpoint, log, summary):
        assert post(f"{endpoint}/v1/traces", first, "application/json")[0] == 200
        assert post(f"{endpoint}/v1/traces", json.dumps(doc).encode(), "application/json")[0] == 200
    assert summary[0].unstored == 1
    assert any(": not stored (" in line and "comes twice" in line for line in log), log

    def collected(*args, **kwargs):
        return summary[0]

    monkeypatch.setattr(collect_module, "collect", collected)
    result = cli("collect", "--run-id", "live", "--port", "0", "--store", store)
    assert result.exit_code == 1
    assert "; 1 trace not stored -> " in result.stdout
    assert result.stderr.startswith("Error: the spans of each trace not stored are in the run's")


def test_a_stored_trace_whose_later_spans_make_no_sample_says_it_is_kept_as_it_was(
    tmp_path, monkeypatch
):
    """A whole trace, stored, then one of its spans sent again with other values: collect said
    "not stored" (and "1 trace not stored") while the trace's sample stayed in the run, as it
    was, and was scored. It says what is kept: the sample as stored before."""
    store = tmp_path / "store"
    trace = json.loads(JSON_LINES[1])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    again = json.loads(JSON_LINES[1])
    again["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] += " (sent again, changed)"
    with collecting(store) as (endpoint, log, summary):
        for line in JSON_LINES[:6]:  # the first trace, its root last
            kind = "logs" if line.startswith(b'{"resourceLogs"') else "traces"
            assert post(f"{endpoint}/v1/{kind}", line, "application/json")[0] == 200
        stored = (store / "live" / "journal.jsonl").read_text().splitlines()
        assert (
            post(f"{endpoint}/v1/traces", json.dumps(again).encode(), "application/json")[0] == 200
        )
        assert (store / "live" / "journal.jsonl").read_text().splitlines() == stored
    assert (summary[0].samples, summary[0].unstored, summary[0].stale) == (1, 0, 1)
    said = [line for line in log if trace in line]
    assert len(said) == 1 and said[0].startswith(
        f"collect: trace {trace}: kept as stored before: the spans of it that came since are "
        "not in the run ("
    ), log
    assert "comes twice" in said[0]
    record = json.loads(stored[-1])
    assert samples_of(store, "live") == [(trace, 0, record["input"], len(record["messages"]))]
    assert record["input"] == "Multiply 7 by 8 for me." and len(record["messages"]) == 5

    def collected(*args, **kwargs):
        return summary[0]

    monkeypatch.setattr(collect_module, "collect", collected)
    result = cli("collect", "--run-id", "live", "--port", "0", "--store", store)
    assert result.exit_code == 1
    assert "; 1 trace kept as stored before its later spans -> " in result.stdout
    assert result.stderr.startswith("Error: the spans of each trace kept as stored before are in")


def test_a_received_file_cut_as_it_was_written_imports_refused_naming_the_request(tmp_path):
    """The received protobuf file of a collection killed as it wrote a request, imported as it
    is: protobuf's "Wire format was corrupt" named no request."""
    store = tmp_path / "store"
    killed = Collector(Store(store), "k")
    killed.receive(PB, "application/x-protobuf")
    killed.receive(gzip.compress(PB), "application/x-protobuf", "gzip")
    killed.close()
    received = store / "k" / "received.otlp.pb"
    with received.open("ab") as f:  # (the third request, cut by the kill)
        f.write(len(PB).to_bytes(4, "big") + PB[:100])
    at = 2 * (len(PB) + 4)
    result = cli("import", "--traces", received, "--run-id", "again", "--store", store)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        f"Error: received.otlp.pb: request 3 at byte {at} is cut short: 100 of its {len(PB)} "
        "bytes are there"
    )
    assert f"the requests before it end at byte {at}" in result.stderr
    assert not (store / "again").exists()
    with received.open("rb+") as f:  # cut there, the file imports
        f.truncate(at)
    result = cli("import", "--traces", received, "--run-id", "again", "--store", store)
    assert result.exit_code == 0, result.output


def test_a_request_kept_after_a_cut_tail_is_read_where_it_was_written(tmp_path):
    """A collection taken up again cuts the request a kill left half-written; the next request
    kept is then written where the cut was, and found there: the file's position was read
    before the cut, so its place was the cut request's end, and reading it back (a trace let
    go, then read again) read other bytes."""
    from tcbreplay._importers.otel.collect_files import PROTO_FILE

    store = tmp_path / "store"
    killed = Collector(Store(store), "k")
    killed.receive(PB, "application/x-protobuf")
    killed.close()
    with (store / "k" / "received.otlp.pb").open("ab") as f:  # (cut by the kill)
        f.write(len(PB).to_bytes(4, "big") + PB[:100])
    again = Collector(Store(store), "k")
    try:
        where = again._received.append(PROTO_FILE, PB)
        assert where == (PROTO_FILE, len(PB) + 8, len(PB))
        batch = again._received.read(*where)
        assert batch is not None and batch.spans
    finally:
        again.close()
