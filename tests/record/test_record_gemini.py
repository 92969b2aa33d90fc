"""Recording through the real Gemini client (langchain-google-genai) against a loopback server.

Nothing here is mocked inside tcbreplay or LangChain: ``ChatGoogleGenerativeAI`` sends real
HTTP requests to :class:`gemini_server.GeminiServer`, the tools really run, and the store
is read back from Parquet.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from gemini_server import Fault, GeminiServer, default_usage
from langchain_core.messages import message_to_dict, messages_from_dict

from tcbreplay._cli import main
from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._inputs.benchmarks.tool_call.tools import CATALOG
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run

FAKE_KEY = "fake-gemini-key-7f3a9c"
MODEL = "google_genai:gemini-2.5-flash"
TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
PROMPT = BENCHMARKS["tool-call"].system_prompt
ITEMS = {"items": [dict(item) for item in CATALOG]}

GREET, MUL, PAR, SEQ, EXTRA = (
    "Hi there!",
    "What is 2 times 3?",
    "Show me the price list, and what is 2 plus 3?",
    "What do 2 pens cost, plus a bottle?",
    "What is 12.5 times 4?",
)
L = ("list_items", {})
# id, input, gold calls, scripted turns (each a list of calls), tool results per turn
CASES = [
    ("greet", GREET, [], [], []),
    (
        "mul",
        MUL,
        [("multiply_numbers", {"a": 3, "b": 2})],
        [[("multiply_numbers", {"a": 3, "b": 2})]],
        [[{"result": 6.0}]],
    ),
    (  # both calls in one model turn: parallel calls
        "par",
        PAR,
        [L, ("add_numbers", {"a": 3, "b": 2})],
        [[L, ("add_numbers", {"a": 3, "b": 2})]],
        [[ITEMS, {"result": 5.0}]],
    ),
    (  # a wrong value (b), then the add is skipped
        "seq",
        SEQ,
        [L, ("multiply_numbers", {"a": 2, "b": 1.2}), ("add_numbers", {"a": 8.0, "b": 2.4})],
        [[L], [("multiply_numbers", {"a": 2, "b": 1.5})]],
        [[ITEMS], [{"result": 3.0}]],
    ),
    (  # an unneeded lookup first
        "extra",
        EXTRA,
        [("multiply_numbers", {"a": 12.5, "b": 4})],
        [[L], [("multiply_numbers", {"a": 12.5, "b": 4})]],
        [[ITEMS], [{"result": 50.0}]],
    ),
]
SCRIPT = {text: turns for _, text, _, turns, _ in CASES}
ANSWERS = {text: f"Answer to: {text}" for text in SCRIPT}


@pytest.fixture
def dataset(tmp_path) -> Path:
    path = tmp_path / "dataset.json"
    entries = [
        {"id": sid, "input": text, "target": [{"name": n, "args": a} for n, a in gold]}
        for sid, text, gold, _, _ in CASES
    ]
    path.write_text(json.dumps(entries, indent=1))
    return path


@pytest.fixture
def key(monkeypatch) -> str:
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE_KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    return FAKE_KEY


@pytest.fixture
def server():
    with GeminiServer(SCRIPT, answers=ANSWERS) as srv:
        yield srv


def _record(dataset, server, store, run_id="gemini", **options):
    inputs = load_inputs(None, dataset, TOOLS, PROMPT)
    spec = parse_model(MODEL, {"base_url": server.url})
    opts = RecordOptions(**{"workers": 4, "backoff": 0.01, **options})
    return record_run(inputs, spec, store, run_id=run_id, options=opts)


def _samples(run_dir) -> dict[str, dict]:
    return {r["sample_id"]: r for r in pq.read_table(Path(run_dir) / "samples.parquet").to_pylist()}


def _messages(run_dir) -> dict[str, list[dict]]:
    """Each sample's stored messages, in position order."""
    out: dict[str, list[dict]] = {}
    rows = pq.read_table(Path(run_dir) / "messages.parquet").to_pylist()
    for row in sorted(rows, key=lambda r: (r["sample_index"], r["position"])):
        out.setdefault(row["sample_id"], []).append(row)
    return out


def _assert_no_key(run_dir) -> None:
    leaks = [
        p for p in Path(run_dir).rglob("*") if p.is_file() and FAKE_KEY.encode() in p.read_bytes()
    ]
    assert leaks == []


# -- the full path: record_run -------------------------------------------------------------


def test_record_run_against_gemini_server(dataset, server, store, key):
    summary = _record(dataset, server, store)

    assert (summary.status, summary.total, summary.ok, summary.errors) == ("complete", 5, 5, 0)
    assert server.unknown_inputs == []
    # one request per model turn: the scripted turns plus the final answer
    assert len(server.requests) == sum(len(turns) + 1 for turns in SCRIPT.values())
    prompt = PROMPT.read_text()
    for request in server.requests:
        assert request.method == "POST"
        assert (request.model, request.rpc) == ("gemini-2.5-flash", "generateContent")
        assert request.headers["x-goog-api-key"] == FAKE_KEY
        assert request.body["systemInstruction"] == {"parts": [{"text": prompt}]}
        (tools,) = request.body["tools"]
        declared = {d["name"]: d for d in tools["functionDeclarations"]}
        assert sorted(declared) == ["add_numbers", "list_items", "multiply_numbers"]
        assert sorted(declared["multiply_numbers"]["parameters"]["properties"]) == ["a", "b"]
        assert request.status == 200
    # the real tool results went back to the model
    (second,) = [r for r in server.requests_for(MUL) if r.turn == 1]
    assert second.body["contents"][-1] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "multiply_numbers", "response": {"result": 6.0}}}],
    }

    samples = _samples(summary.run_dir)
    messages = _messages(summary.run_dir)
    assert sorted(samples) == sorted(sid for sid, *_ in CASES)
    for sid, text, _, turns, results in CASES:
        row = samples[sid]
        assert (row["status"], row["attempts"], row["error"]) == ("ok", 1, None)
        rows = messages[sid]
        assert [r["position"] for r in rows] == list(range(len(rows)))
        loaded = [messages_from_dict([json.loads(r["message"])])[0] for r in rows]
        # exact round trip of LangChain's serialization
        assert [message_to_dict(m) for m in loaded] == [json.loads(r["message"]) for r in rows]
        assert [r["type"] for r in rows] == [m.type for m in loaded]
        _check_trajectory(loaded, text, turns, results)
        _check_usage(rows, text, turns)
        usage = [default_usage(text, k, len(t)) for k, t in enumerate([*turns, []])]
        assert row["input_tokens"] == sum(p for p, _ in usage)
        assert row["output_tokens"] == sum(c for _, c in usage)

    manifest = json.loads((Path(summary.run_dir) / "manifest.json").read_text())
    model = manifest["model"]
    assert (model["id"], model["provider"], model["name"]) == (
        MODEL,
        "google_genai",
        "gemini-2.5-flash",
    )
    assert model["simulated"] is False
    assert model["settings"]["base_url"] == server.url
    recorded = {**model["settings"], **model.get("effective_settings", {})}
    assert recorded["temperature"] == server.requests[0].body["generationConfig"]["temperature"]
    assert manifest["totals"]["input_tokens"] == sum(r["input_tokens"] for r in samples.values())

    result = score_run(store, summary.run_id)
    scores = {r["sample_id"]: r for r in result.scores.to_dicts()}
    expected = {  # sample: (tsa, tp, ahr, args_invalid, args_total)
        "greet": (None, 1.0, None, 0, 0),
        "mul": (1.0, 1.0, 0.0, 0, 2),
        "par": (1.0, 1.0, 0.0, 0, 2),
        "seq": (2 / 3, 2 / 3, 0.5, 1, 2),  # list_items + multiply of 3 gold; b is wrong
        "extra": (1.0, 0.5, 0.0, 0, 2),  # one extra call of two
    }
    for sid, (tsa, tp, ahr, invalid, total) in expected.items():
        got = scores[sid]
        assert got["tsa"] is None if tsa is None else got["tsa"] == pytest.approx(tsa)
        assert got["tp"] == pytest.approx(tp)
        assert got["ahr"] is None if ahr is None else got["ahr"] == pytest.approx(ahr)
        assert (got["args_invalid"], got["args_total"], got["args_missing"]) == (invalid, total, 0)
    assert result.summary["tsa"] == pytest.approx(11 / 12)  # mean of 1, 1, 2/3, 1
    assert result.summary["tp"] == pytest.approx(5 / 6)  # mean of 1, 1, 1, 2/3, 1/2
    assert result.summary["ahr"] == pytest.approx(1 / 8)
    assert result.summary["n_errors"] == 0
    _assert_no_key(summary.run_dir)


def _check_trajectory(loaded, text, turns, results) -> None:
    """human, then per turn an AI message with the calls and one ToolMessage per call, then text."""
    human, *rest = loaded
    assert (human.type, human.content) == ("human", text)
    for calls, outputs in zip(turns, results, strict=True):
        ai, rest = rest[0], rest[1:]
        assert ai.type == "ai"
        assert [(c["name"], c["args"]) for c in ai.tool_calls] == [(n, a) for n, a in calls]
        tools, rest = rest[: len(calls)], rest[len(calls) :]
        for call, tool, output in zip(ai.tool_calls, tools, outputs, strict=True):
            assert tool.type == "tool"
            assert (tool.name, tool.tool_call_id, tool.status) == (
                call["name"],
                call["id"],
                "success",
            )
            assert json.loads(tool.content) == output
    (final,) = rest
    assert (final.type, final.content, final.tool_calls) == ("ai", ANSWERS[text], [])
    assert final.response_metadata["model_name"] == "gemini-2.5-flash"
    assert not final.response_metadata.get("simulated")


def _check_usage(rows, text, turns) -> None:
    ai_rows = [r for r in rows if r["type"] == "ai"]
    assert len(ai_rows) == len(turns) + 1
    for k, r in enumerate(ai_rows):
        prompt, candidates = default_usage(text, k, len(turns[k]) if k < len(turns) else 0)
        assert (r["input_tokens"], r["output_tokens"], r["total_tokens"]) == (
            prompt,
            candidates,
            prompt + candidates,
        )
        assert r["latency_s"] is not None and r["latency_s"] > 0
    for r in rows:
        if r["type"] != "ai":
            assert r["input_tokens"] is None and r["output_tokens"] is None
        if r["type"] == "human":
            assert r["latency_s"] is None


# -- the CLI -------------------------------------------------------------------------------


def test_cli_record_against_gemini_server(dataset, server, key, tmp_path):
    store = tmp_path / "cli-traces"
    args = [
        "record",
        "--dataset", str(dataset),
        "--tools", TOOLS,
        "--system-prompt", str(PROMPT),
        "--model", MODEL,
        "--model-option", f"base_url={server.url}",
        "--model-option", "temperature=0",
        "--store", str(store),
        "--quiet",
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)

    assert result.exit_code == 0, result.output
    assert FAKE_KEY not in result.output
    (run_dir,) = [p for p in store.iterdir() if p.is_dir()]
    assert run_dir.name in result.output
    assert {r["status"] for r in _samples(run_dir).values()} == {"ok"}
    assert len(_samples(run_dir)) == len(CASES)
    assert all(r.body["generationConfig"]["temperature"] == 0 for r in server.requests)
    assert all(
        r.body["systemInstruction"] == {"parts": [{"text": PROMPT.read_text()}]}
        for r in server.requests
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model"]["settings"] == {"base_url": server.url, "temperature": 0}
    assert manifest["model"]["id"] == MODEL
    _assert_no_key(run_dir)


def test_cli_missing_key_fails_in_one_line(dataset, server, monkeypatch, tmp_path):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    store = tmp_path / "traces"
    args = [
        "record",
        "--dataset",
        str(dataset),
        "--tools",
        TOOLS,
        "--system-prompt",
        str(PROMPT),
        "--model",
        MODEL,
        "--model-option",
        f"base_url={server.url}",
        "--store",
        str(store),
    ]
    result = CliRunner().invoke(main, args)

    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "GOOGLE_API_KEY" in errors[0]
    assert "--model sim" in result.output
    assert "Traceback" not in result.output
    assert not store.exists() or not any(store.iterdir())
    assert server.requests == []


# -- failures ------------------------------------------------------------------------------


def test_non_transient_400_is_stored_as_that_samples_error(dataset, server, store, key):
    server.inject(Fault.error(400, "Invalid JSON payload received."), input=MUL)
    summary = _record(dataset, server, store, retries=2)

    assert (summary.status, summary.ok, summary.errors) == ("complete", 4, 1)
    samples = _samples(summary.run_dir)
    bad = samples["mul"]
    assert (bad["status"], bad["attempts"]) == ("error", 1)
    assert "400" in bad["error"] and "Invalid JSON payload received." in bad["error"]
    assert "\n" not in bad["error"]
    assert bad["error_type"]
    assert len(server.requests_for(MUL)) == 1  # not retried
    assert all(r["status"] == "ok" for sid, r in samples.items() if sid != "mul")
    # the failed sample keeps the messages it had: the human input
    assert [r["type"] for r in _messages(summary.run_dir)["mul"]] == ["human"]
    # an errored sample still scores (as a sample without calls) and is counted as an error
    result = score_run(store, summary.run_id)
    assert result.summary["n_errors"] == 1
    _assert_no_key(summary.run_dir)


@pytest.mark.parametrize(
    "fault",
    [Fault.error(500), Fault.error(503), Fault.rate_limit(retry_after=0)],
    ids=["500", "503", "429"],
)
def test_transient_error_then_success_is_retried(dataset, server, store, key, fault):
    server.inject(fault, input=SEQ, times=1)
    summary = _record(dataset, server, store, retries=1)

    samples = _samples(summary.run_dir)
    assert (samples["seq"]["status"], samples["seq"]["attempts"]) == ("ok", 2)
    assert samples["seq"]["error"] is None
    assert [r.status for r in server.requests_for(SEQ)] == [fault.status, 200, 200, 200]
    assert all(r["attempts"] == 1 for sid, r in samples.items() if sid != "seq")
    assert (summary.ok, summary.retries) == (5, 1)
    # only the successful attempt's messages are stored
    types = [r["type"] for r in _messages(summary.run_dir)["seq"]]
    assert types == ["human", "ai", "tool", "ai", "tool", "ai"]


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_a_retried_server_error_prints_nothing_under_quiet(dataset, server, key, tmp_path):
    # langchain_core left a coroutine of google-genai's aiohttp response never awaited on
    # every failed call, and Python printed a RuntimeWarning for it past --quiet
    server.inject(Fault.error(503), input=SEQ, times=1)
    done = subprocess.run(
        [sys.executable, "-m", "tcbreplay", "record", "--dataset", str(dataset), "--tools", TOOLS,
         "--system-prompt", str(PROMPT),
         "--model", MODEL, "--model-option", f"base_url={server.url}", "--backoff", "0.01",
         "--store", str(tmp_path / "quiet"), "--quiet"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [r.status for r in server.requests_for(SEQ)][:2] == [503, 200]
    assert done.stderr == ""


def test_transient_error_without_retries_is_an_error(dataset, server, store, key):
    server.inject(Fault.error(503), input=MUL)
    summary = _record(dataset, server, store, retries=0)

    bad = _samples(summary.run_dir)["mul"]
    assert (bad["status"], bad["attempts"]) == ("error", 1)
    assert "503" in bad["error"]


def _post(server, text: str, history: list | None = None, version: str = "v1beta"):
    """POST a generateContent request; return (status, headers, parsed body or raw text)."""
    import urllib.error
    import urllib.request

    contents = [{"role": "user", "parts": [{"text": text}]}, *(history or [])]
    request = urllib.request.Request(
        f"{server.url}/{version}/models/gemini-2.5-flash:generateContent",
        data=json.dumps({"contents": contents}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, headers, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        status, headers, raw = exc.code, exc.headers, exc.read()
    try:
        return status, headers, json.loads(raw)
    except json.JSONDecodeError:
        return status, headers, raw.decode()


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_server_answers_every_api_version_the_sdks_send(version):
    """google-genai sent v1beta before 3.6 and v1 since: the server answers both alike."""
    with GeminiServer(SCRIPT, answers=ANSWERS) as server:
        status, _, body = _post(server, MUL, version=version)
        (request,) = server.requests
    assert (status, request.model, request.rpc) == (200, "gemini-2.5-flash", "generateContent")
    (part,) = body["candidates"][0]["content"]["parts"]
    assert part["functionCall"]["name"] == "multiply_numbers"


def test_server_faults_and_turns():
    """The server itself: Google-style 429, rule matching, turn counting, unknown inputs."""
    with GeminiServer(SCRIPT, answers=ANSWERS) as server:
        server.inject(Fault.rate_limit(retry_after=7), requests=[1])
        server.inject(Fault.error(503), input=MUL, times=1)
        server.inject(Fault.malformed("not_json"), requests=[5])

        status, headers, body = _post(server, GREET)  # request 1: by number
        assert (status, headers["Retry-After"]) == (429, "7")
        assert (body["error"]["code"], body["error"]["status"]) == (429, "RESOURCE_EXHAUSTED")
        assert body["error"]["details"][0]["retryDelay"] == "7s"
        status, _, body = _post(server, GREET)  # request 2: no rule
        assert (status, body["candidates"][0]["content"]["parts"]) == (
            200,
            [{"text": ANSWERS[GREET]}],
        )
        assert _post(server, MUL)[0] == 503  # request 3: first for MUL
        status, _, body = _post(server, PAR)  # request 4: parallel calls in one answer
        calls = [p["functionCall"] for p in body["candidates"][0]["content"]["parts"]]
        assert calls == [
            {"name": "list_items", "args": {}},
            {"name": "add_numbers", "args": {"a": 3, "b": 2}},
        ]
        status, headers, body = _post(server, MUL)  # request 5: by number, not JSON
        assert (status, headers["Content-Type"], body) == (
            200,
            "text/html",
            "<html>upstream proxy error</html>",
        )
        model_turn = {
            "role": "model",
            "parts": [{"functionCall": {"name": "list_items", "args": {}}}],
        }
        status, _, body = _post(
            server, SEQ, [model_turn, {"role": "user", "parts": [{"text": "x"}]}]
        )
        assert body["candidates"][0]["content"]["parts"] == [
            {"functionCall": {"name": "multiply_numbers", "args": {"a": 2, "b": 1.5}}}
        ]
        assert _post(server, "unscripted")[0] == 400
        assert server.unknown_inputs == ["unscripted"]
    numbers = [(r.number, r.input, r.status) for r in server.requests]
    assert numbers[:5] == [
        (1, GREET, 429),
        (2, GREET, 200),
        (3, MUL, 503),
        (4, PAR, 200),
        (5, MUL, 200),
    ]
    assert server.requests[4].fault == Fault.malformed("not_json")
    assert [r.turn for r in server.requests_for(SEQ)] == [1]
    times = [r.at for r in server.requests]
    assert times == sorted(times)


@pytest.mark.slow  # (1.3 s of waiting)
def test_hang_ends_as_sample_timeout(dataset, server, store, key):
    server.inject(Fault.hang(30), input=MUL)
    summary = _record(dataset, server, store, timeout=1, retries=0)

    samples = _samples(summary.run_dir)
    bad = samples["mul"]
    assert (bad["status"], bad["error_type"], bad["attempts"]) == ("error", "SampleTimeout", 1)
    assert "1 s" in bad["error"]
    assert 1 <= bad["duration_s"] < 5  # cut at the timeout, not at the server's 30 s
    assert len(server.requests_for(MUL)) == 1
    assert [r["type"] for r in _messages(summary.run_dir)["mul"]] == ["human"]
    assert all(r["status"] == "ok" for sid, r in samples.items() if sid != "mul")
    assert summary.error_types == {"SampleTimeout": 1}


@pytest.mark.slow  # (1.3 s of waiting)
def test_hung_call_is_retried_with_a_client_timeout(dataset, server, store, key):
    """``--model-option timeout=S`` bounds each HTTP call, so one hung call is retried
    instead of spending the whole sample's ``--timeout``."""
    server.inject(Fault.hang(30), input=MUL, times=1)
    inputs = load_inputs(None, dataset, TOOLS, PROMPT)
    spec = parse_model(MODEL, {"base_url": server.url, "timeout": "1"})
    summary = record_run(
        inputs, spec, store, run_id="t", options=RecordOptions(timeout=20, retries=1, backoff=0.01)
    )

    bad = _samples(summary.run_dir)["mul"]
    assert (bad["status"], bad["attempts"]) == ("ok", 2)
    assert [r.status for r in server.requests_for(MUL)] == [None, 200, 200]
    assert summary.ok == len(CASES)


def test_body_that_is_not_json_is_an_error(dataset, server, store, key):
    server.inject(Fault.malformed("not_json"), input=GREET)
    summary = _record(dataset, server, store, retries=0)

    samples = _samples(summary.run_dir)
    assert samples["greet"]["status"] == "error"
    assert samples["greet"]["error"]
    assert summary.ok == 4


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_a_json_error_answering_with_a_200_fails_naming_it(dataset, server, store, key, streaming):
    """A 200 whose body is Google's JSON error (a gateway's), not a reply nor events, was
    retried as a reply with no content, the error lost; streamed, it was a 400 as if the
    server had answered one. It is now taken as the same body from OpenAI's SDK is."""
    error = {"code": 400, "message": "Request contains an invalid argument.",
             "status": "INVALID_ARGUMENT"}  # fmt: skip
    server.inject(Fault.json_body({"error": error}), input=MUL)
    inputs = load_inputs(None, dataset, TOOLS, PROMPT)
    settings = {"base_url": server.url, **({"streaming": "true"} if streaming else {})}
    opts = RecordOptions(workers=4, backoff=0.01)
    summary = record_run(inputs, parse_model(MODEL, settings), store, run_id="g", options=opts)
    rpc = "streamGenerateContent" if streaming else "generateContent"
    assert {r.rpc for r in server.requests} == {rpc}

    row = _samples(summary.run_dir)["mul"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "ErrorReply")
    assert row["error"] == (
        "the provider answered 200 with an error, taken as a 400: "
        "Request contains an invalid argument."
    )
    assert len(server.requests_for(MUL)) == 1  # not retried
    assert summary.ok == len(CASES) - 1


@pytest.mark.parametrize("body", [{"error": "Model is loading"}, {"error": {"message": "Busy"}}],
                         ids=["text", "no-code"])  # fmt: skip
def test_a_streamed_json_error_of_no_kind_is_retried(dataset, server, store, key, body):
    """Streamed, an error with no code failed the sample at once in google-genai
    (``TypeError``), one that is only text so too (``AttributeError``)."""
    server.inject(Fault.json_body(body), input=MUL, times=1)
    inputs = load_inputs(None, dataset, TOOLS, PROMPT)
    spec = parse_model(MODEL, {"base_url": server.url, "streaming": "true"})
    opts = RecordOptions(workers=4, backoff=0.01)
    summary = record_run(inputs, spec, store, run_id="g", options=opts)

    row = _samples(summary.run_dir)["mul"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)


def test_response_without_candidates_is_not_an_ok_sample(dataset, server, store, key):
    server.inject(Fault.malformed("no_candidates"), input=MUL)
    summary = _record(dataset, server, store, retries=0)

    assert _samples(summary.run_dir)["mul"]["status"] == "error"


def test_an_empty_reply_is_retried_and_its_error_names_its_finish_reason(
    dataset, server, store, key
):
    """A reply Gemini withheld (finishReason SAFETY) was an EmptyModelResponse whose text
    did not say why."""
    server.inject(Fault.finish("SAFETY"), input=MUL)
    summary = _record(dataset, server, store, retries=1)

    row = _samples(summary.run_dir)["mul"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 2, "EmptyModelResponse")
    assert (
        row["error"]
        == "the model answered with no content and no tool calls (finish reason SAFETY)"
    )


def test_a_malformed_function_call_is_the_models_answer_not_retried(dataset, server, store, key):
    """MALFORMED_FUNCTION_CALL (the model wrote a call the API could not parse) was retried
    as an empty reply until a draw passed: the run scored the model above what it does. It
    is the model's behaviour, stored as its answer (no call) and scored."""
    message = "Malformed function call: print(default_api.multiply_numbers(a=3, b="
    server.inject(Fault.finish("MALFORMED_FUNCTION_CALL", message), input=MUL)
    summary = _record(dataset, server, store)

    row = _samples(summary.run_dir)["mul"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 1, None)
    assert len(server.requests_for(MUL)) == 1
    _human, answer = (json.loads(r["message"])["data"] for r in _messages(summary.run_dir)["mul"])
    assert (answer["content"], answer["tool_calls"], answer["invalid_tool_calls"]) == ("", [], [])
    assert answer["response_metadata"]["finish_reason"] == "MALFORMED_FUNCTION_CALL"
    scores = score_run(store, summary.run_id, write=False).scores
    (scored,) = scores.filter(scores["sample_id"] == "mul").to_dicts()
    assert (scored["status"], scored["n_agent"], scored["tsa"]) == ("ok", 0, 0.0)


@pytest.mark.slow  # (processes of their own)
def test_two_processes_record_what_one_records_against_gemini_server(dataset, server, store, key):
    """The provider's client is built before the fork and used by each child process."""

    def calls_and_texts(run_dir) -> dict[str, list]:
        out = {}
        for sid, rows in _messages(run_dir).items():
            data = [json.loads(r["message"])["data"] for r in rows]
            out[sid] = [
                (r["type"], d["content"], [(c["name"], c["args"]) for c in d.get("tool_calls", [])])
                for r, d in zip(rows, data, strict=True)
            ]
        return out

    one = _record(dataset, server, store, run_id="one", processes=1)
    requests = len(server.requests)
    two = _record(dataset, server, store, run_id="two", processes=2)
    assert (two.processes, two.status, two.ok) == (2, "complete", 5)
    assert len(server.requests) == 2 * requests
    assert calls_and_texts(two.run_dir) == calls_and_texts(one.run_dir)
    _assert_no_key(two.run_dir)


# -- a key the provider quotes back (issue #18) ----------------------------------------------


@pytest.mark.parametrize("processes", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_key_the_provider_quotes_is_redacted_wherever_errors_go(
    dataset, server, store, key, monkeypatch, tmp_path, processes
):
    """An error quoting the request's key reaches samples.error, the journal, export, the
    report and the printed output as ``[redacted]``."""
    from helpers import cli

    from tcbreplay._store.writer import RunWriter

    journal: list[str] = []
    append_line = RunWriter.append_line

    def spy(self, line: str) -> None:
        journal.append(line)
        append_line(self, line)

    monkeypatch.setattr(RunWriter, "append_line", spy)
    server.inject(Fault.echo_key(400), input=MUL)
    summary = _record(dataset, server, store, retries=0, processes=processes)

    (request,) = server.requests_for(MUL)
    assert FAKE_KEY in request.response["error"]["message"]  # the provider did quote it
    bad = _samples(summary.run_dir)["mul"]
    assert bad["status"] == "error"
    assert "API key [redacted] not valid" in bad["error"]
    assert len(journal) == len(CASES)
    assert any("API key [redacted] not valid" in line for line in journal)
    assert not any(FAKE_KEY in line for line in journal)
    _assert_no_key(summary.run_dir)

    root = str(store.root)
    errors = "select error from samples where status = 'error'"
    printed = [
        cli("sql", errors, "--store", root, "--format", "csv"),  # in full: a table cuts it
        cli("query", "error_breakdown", "--store", root),
        cli("export", summary.run_id, "-o", tmp_path / "export", "--store", root),
        cli("report", summary.run_id, "-o", tmp_path / "report.html", "--store", root),
    ]
    assert all(r.exit_code == 0 for r in printed), [r.output for r in printed]
    assert "[redacted]" in printed[0].output
    assert not any(FAKE_KEY in r.output for r in printed)
    exported = (tmp_path / "export" / "traces.jsonl").read_text()
    assert "[redacted]" in exported and FAKE_KEY not in exported
    html = (tmp_path / "report.html").read_text()
    assert "[redacted]" in html and FAKE_KEY not in html


def test_cli_record_prints_no_key_the_provider_quotes(dataset, server, key, tmp_path):
    server.inject(Fault.echo_key(401), input=MUL)
    store = tmp_path / "traces"
    result = CliRunner().invoke(
        main,
        ["record", "--dataset", str(dataset), "--tools", TOOLS, "--system-prompt", str(PROMPT),
         "--model", MODEL, "--model-option", f"base_url={server.url}", "--retries", "0",
         "--store", str(store), "--run-id", "echo"],
    )  # fmt: skip

    # a 401 stops the recording (issue #22), and its one line quotes no key either
    assert result.exit_code == 1, result.output
    assert "Error: recording of echo stopped: the provider refused the API key" in result.output
    assert "[redacted]" in result.output
    assert FAKE_KEY not in result.output
    _assert_no_key(store / "echo")


# A fake key holding "/", "+" and "=" (as AWS secret keys and base64 tokens do), and the forms
# a provider may echo it in (issue #27)
SLASHY_KEY = "AIzaSECRET9f8e7d/+=x"
ECHOES = {
    "quote (keeps /)": quote,
    "quote safe=''": lambda k: quote(k, safe=""),
    "lower-case hex": lambda k: re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), quote(k)),
    "JSON-escaped": lambda k: k.replace("/", "\\/"),
    "base64": lambda k: base64.b64encode(k.encode()).decode(),
    "urlsafe base64 unpadded": lambda k: base64.urlsafe_b64encode(k.encode()).decode().rstrip("="),
}


def _leaks(text: str) -> list[str]:
    """The forms of :data:`SLASHY_KEY` found in ``text``."""
    return [name for name, encode in ECHOES.items() if encode(SLASHY_KEY) in text]


def _files_leaking(root: Path | str) -> list[str]:
    return [
        str(path)
        for path in Path(root).rglob("*")
        if path.is_file() and _leaks(path.read_bytes().decode("latin-1"))
    ]


@pytest.mark.parametrize("echo", ECHOES)
def test_a_key_echoed_in_any_encoding_is_redacted(dataset, server, store, monkeypatch, echo):
    monkeypatch.setenv("GOOGLE_API_KEY", SLASHY_KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    server.inject(Fault.echo_key(400, ECHOES[echo]), input=MUL)
    summary = _record(dataset, server, store, retries=0)

    (request,) = server.requests_for(MUL)
    assert ECHOES[echo](SLASHY_KEY) in request.response["error"]["message"]
    bad = _samples(summary.run_dir)["mul"]
    assert "API key [redacted] not valid" in bad["error"], bad["error"]
    assert _files_leaking(summary.run_dir) == []


def test_cli_record_redacts_a_key_the_provider_echoes_url_encoded(
    dataset, server, monkeypatch, tmp_path
):
    """The reported leak: a 400 quoting ``quote(key)``, which keeps "/" and escapes "+" and
    "=", reached samples.error, sql, export and the report."""
    from helpers import cli

    monkeypatch.setenv("GOOGLE_API_KEY", SLASHY_KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    for text in SCRIPT:
        server.inject(Fault.echo_key(400, quote), input=text)
    store = tmp_path / "traces"
    printed = [
        cli("record", "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
            "--model", MODEL, "--model-option", f"base_url={server.url}", "--limit", "3",
            "--retries", "0", "--max-errors", "100%", "--store", store, "--run-id", "echo"),
        cli("sql", "select error from samples", "--format", "csv", "--store", store),
        cli("export", "echo", "-o", tmp_path / "out", "--store", store),
        cli("report", "echo", "-o", tmp_path / "r.html", "--allow-incomplete", "--store", store),
    ]  # fmt: skip
    assert quote(SLASHY_KEY) in server.requests[0].response["error"]["message"]
    # no call answered: the recording stops after the three (issue #22), its line redacted
    assert printed[0].exit_code == 1 and "API key [redacted] not valid" in printed[0].output
    assert printed[1].exit_code == 0 and printed[1].output.count("API key [redacted]") == 3
    assert [_leaks(r.output) for r in printed] == [[]] * 4, [r.output for r in printed]
    assert _files_leaking(tmp_path) == []


# -- a model answering with arguments beyond the limits (issue #18) --------------------------


def test_arguments_beyond_the_limits_from_a_model_are_stored_and_scored_invalid(
    dataset, store, key, tmp_path
):
    """Arguments nested 150 deep or an integer of 1,000 digits are the agent's behaviour: the
    sample is stored, within the limits, with those parts replaced by a string saying so, and
    they score as invalid arguments (they were stored as given, beyond what the store holds)."""
    from helpers import cli

    from tcbreplay import _json

    deep: object = 3
    for _ in range(150):
        deep = [deep]
    script = {
        **SCRIPT,
        MUL: [[("multiply_numbers", {"a": deep, "b": 2})]],
        EXTRA: [[("multiply_numbers", {"a": int("9" * 1000), "b": 4})]],
    }
    with GeminiServer(script, answers=ANSWERS) as server:
        summary = _record(dataset, server, store)

    assert (summary.status, summary.ok) == ("complete", 5)
    messages = _messages(summary.run_dir)
    for rows in messages.values():
        for row in rows:
            assert _json.value_problem(json.loads(row["message"])) is None
    calls = {}
    for sid in ("mul", "extra"):
        data = [json.loads(r["message"])["data"] for r in messages[sid]]
        calls[sid] = [c for d in data for c in d.get("tool_calls", [])]
    inner = calls["mul"][0]["args"]["a"]
    levels = 0
    while isinstance(inner, list):
        inner, levels = inner[0], levels + 1
    # the message is level 1, data 2, tool_calls 3, the call 4, args 5: "a" keeps 95 levels
    assert (levels, inner) == (95, _json.OVER_DEPTH)
    assert calls["extra"][0]["args"] == {"a": _json.OVER_DIGITS, "b": 4}

    scores = {r["sample_id"]: r for r in score_run(store, summary.run_id).scores.to_dicts()}
    assert (scores["mul"]["args_invalid"], scores["mul"]["args_total"]) == (1, 2)
    assert (scores["extra"]["args_invalid"], scores["extra"]["args_total"]) == (1, 2)
    root = str(store.root)
    for args in (["score", summary.run_id, "--scorer", "abet"], ["audit", "verify", summary.run_id],
                 ["report", summary.run_id, "-o", tmp_path / "r.html"]):  # fmt: skip
        result = cli(*args, "--store", root)
        assert result.exit_code == 0, result.output
