"""Replies a provider sends that are no whole answer of the model, through the real clients.

``ChatOpenAI`` talks to :class:`openai_server.OpenAIServer` over HTTP, as in a recording, and
``ChatAnthropic`` to :class:`anthropic_server.AnthropicServer`: a stream cut off before its
finish reason, a 200 that cannot be read, tool-call arguments that are no JSON object.
Nothing in tcbreplay, LangChain or the SDKs is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic_server
import pyarrow.parquet as pq
import pytest
from helpers import ADD, GREET, add_and_greet, cli
from openai_server import Fault, OpenAIServer

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store

pytest.importorskip("langchain_openai")

MODEL = "openai:gpt-4o-mini"
TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
PROMPT = BENCHMARKS["tool-call"].system_prompt
SCRIPT = {ADD: [[("add_numbers", {"a": 25.0, "b": 4.5})]], GREET: []}
ANSWERS = {ADD: "The total is 29.5.", GREET: "Hello! How can I help?"}


@pytest.fixture
def dataset(tmp_path) -> Path:
    return add_and_greet(tmp_path)


@pytest.fixture(autouse=True)
def key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-a-loopback-server")


# each provider's model, server and faults, and the finish reason its answer ends with
PROVIDERS = {
    "openai": (MODEL, OpenAIServer, Fault, "finish_reason", "stop"),
    "anthropic": ("anthropic:claude-opus-4-7", anthropic_server.AnthropicServer,
                  anthropic_server.Fault, "stop_reason", "end_turn"),
}  # fmt: skip


def _record(dataset, server, tmp_path, streaming=False, model=MODEL, **options):
    inputs = load_inputs(None, dataset, TOOLS, PROMPT)
    settings = {"base_url": server.url, **({"streaming": "true"} if streaming else {})}
    opts = RecordOptions(**{"workers": 1, "backoff": 0.01, **options})
    return record_run(inputs, parse_model(model, settings), Store(tmp_path / "traces"), run_id="r",
                      options=opts)  # fmt: skip


def _samples(run_dir) -> dict[str, dict]:
    return {r["sample_id"]: r for r in pq.read_table(Path(run_dir) / "samples.parquet").to_pylist()}


def _messages(run_dir, sample_id) -> list[dict]:
    rows = pq.read_table(Path(run_dir) / "messages.parquet").to_pylist()
    rows = sorted((r for r in rows if r["sample_id"] == sample_id), key=lambda r: r["position"])
    return [json.loads(r["message"])["data"] for r in rows]


# -- a stream cut off ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_off_is_retried_and_never_stored_as_the_answer(dataset, tmp_path, provider):
    """A stream that stopped mid tool-call arguments was stored ``ok``: LangChain filled the
    broken JSON in as {"a": 25.0} and that call ran; one cut after half the answer's text was
    stored as the final answer, without finish reason or usage."""
    model, server_class, faults, finish, reason = PROVIDERS[provider]
    pytest.importorskip(f"langchain_{provider}")
    with server_class(SCRIPT, ANSWERS) as server:
        server.inject(faults.cut(), input=ADD, turn=0, times=1)  # mid the arguments
        server.inject(faults.cut(), input=ADD, turn=1, times=1)  # mid the answer's text
        summary = _record(dataset, server, tmp_path, streaming=True, model=model)
    assert all(request["stream"] for request in server.requests)

    row = _samples(summary.run_dir)["add"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 3, None)
    messages = _messages(summary.run_dir, "add")
    (call,) = messages[1]["tool_calls"]
    assert (call["name"], call["args"]) == ("add_numbers", {"a": 25.0, "b": 4.5})
    assert json.loads(messages[2]["content"]) == {"result": 29.5}
    answer = messages[-1]
    assert answer["content"] in (
        "The total is 29.5.",
        [{"type": "text", "text": "The total is 29.5.", "index": 0}],
    )
    assert answer["response_metadata"][finish] == reason
    assert answer["usage_metadata"]["output_tokens"] == 7
    assert _samples(summary.run_dir)["greet"]["attempts"] == 1


def test_a_live_stream_cut_off_in_a_replay_is_retried(dataset, tmp_path):
    """A replay going on live (``--then``, streamed) stored the live model's stream cut off
    half-way as the sample's answer, status ok: the recorded model's replies are not checked,
    and the live model's passed with them."""
    from tcbreplay._replay.run import replay_run

    with OpenAIServer(SCRIPT, ANSWERS) as server:
        _record(dataset, server, tmp_path)
        server.inject(Fault.cut(), input=GREET, times=1)
        again = replay_run(Store(tmp_path / "traces"),
                           "r", new_run_id="again", then=MODEL, fork_at=0,
                           then_options={"base_url": server.url, "streaming": "true"},
                           options={"workers": 1})  # fmt: skip

    row = _samples(again.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)
    assert _messages(again.run_dir, "greet")[-1]["content"] == ANSWERS[GREET]


def test_a_stream_cut_off_at_every_attempt_is_an_error_saying_so(dataset, tmp_path):
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.cut(), input=GREET)
        summary = _record(dataset, server, tmp_path, streaming=True, retries=1)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 2, "TruncatedReply")
    assert "cut off" in row["error"]
    # the half answer is not stored: only the input
    assert [m["type"] for m in _messages(summary.run_dir, "greet")] == ["human"]


def test_a_stop_on_streams_cut_off_names_them_not_the_network(dataset, tmp_path):
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.cut())
        result = cli("record", "--model", MODEL, "--model-option", f"base_url={server.url}",
                     "--model-option", "streaming=true", "--dataset", dataset, "--tools", TOOLS,
                     "--system-prompt", PROMPT,
                     "--workers", "1", "--retries", "1", "--backoff", "0.01",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert "no model call succeeded" in error
    assert "(TruncatedReply: " in error
    assert error.endswith("record without --model-option streaming=true")
    assert "can be reached" not in error


# -- a 200 that cannot be read -------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "streaming"),
    [(Fault.not_json(), False), (Fault.no_choices(), False),
     (Fault.not_json(), True), (Fault.no_choices(), True), (Fault.error_event(), True)],
    ids=["page", "no-choices", "page-streamed", "no-choices-streamed", "error-event"],
)  # fmt: skip
def test_a_reply_that_cannot_be_read_is_retried(dataset, tmp_path, fault, streaming):
    """A proxy's HTML page (ValueError), a completion with "choices": [] (IndexError) and a
    stream that broke off with an error (APIError) failed the sample at once."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(fault, input=GREET, times=1)
        summary = _record(dataset, server, tmp_path, streaming=streaming)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)
    assert _messages(summary.run_dir, "greet")[-1]["content"] == ANSWERS[GREET]


def test_an_error_event_mid_stream_of_anthropic_is_retried(dataset, tmp_path):
    """An ``overloaded_error`` event after a 200 was an APIStatusError of status 200: the
    status was taken for the verdict, and the sample failed at once."""
    pytest.importorskip("langchain_anthropic")
    model, server_class, faults, *_ = PROVIDERS["anthropic"]
    with server_class(SCRIPT, ANSWERS) as server:
        server.inject(faults.error_event(), input=ADD, turn=1, times=1)
        summary = _record(dataset, server, tmp_path, streaming=True, model=model)

    row = _samples(summary.run_dir)["add"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)


def test_a_stop_on_unreadable_replies_names_them_and_quotes_no_part_of_the_key(
    dataset, tmp_path, monkeypatch
):
    """The stop said to check that the endpoint can be reached and the network; and a page
    quoting the key, cut by LangChain inside it, left the key's first part unredacted."""
    key = "gateway-key-quoted-by-a-proxy-0123456789"  # (no form redact knows)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    page = "<html><p>" + "x" * 150 + " Bad Gateway for {api_key}</p></html>"
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.not_json(page))
        store = tmp_path / "traces"
        result = cli("record", "--model", MODEL, "--model-option", f"base_url={server.url}",
                     "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
                     "--workers", "1", "--retries", "1", "--backoff", "0.01",
                     "--store", store, "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert "no model call succeeded" in error
    assert "(UnreadableReply: the provider's reply could not be read: ValueError: " in error
    assert f"check that {server.url} is the model's API" in error
    assert "can be reached" not in error
    (row,) = _samples(store / "r").values()
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 2, "UnreadableReply")
    assert "Bad Gateway" in row["error"]
    for text in (result.output, row["error"]):
        assert key[:8] not in text, text


# -- a 200 whose body is an error -----------------------------------------------------------

OVERLOADED = {"message": "The engine is currently overloaded.", "type": "overloaded_error"}
RATE_LIMITED = {"message": "Slow down.", "type": "requests", "code": "rate_limit_exceeded"}
BAD_GATEWAY = {"message": "Upstream error", "code": 502}
LOADING = {"message": "Model is loading, try again shortly"}  # (of no kind known: unreadable)
TOO_LONG = {"message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error", "code": "context_length_exceeded"}  # fmt: skip


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("error", [OVERLOADED, RATE_LIMITED, BAD_GATEWAY, LOADING],
                         ids=["overloaded", "rate-limited", "code-502", "no-kind"])  # fmt: skip
def test_a_200_holding_a_retryable_error_is_retried(dataset, tmp_path, error, streaming):
    """A gateway's 200 whose body is ``{"error": {...}}`` (overloaded) failed the sample at
    once (``ValueError: {'message': ...}``), as a request the provider refused."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.error_body(error), input=GREET, times=1)
        summary = _record(dataset, server, tmp_path, streaming=streaming)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)
    assert _messages(summary.run_dir, "greet")[-1]["content"] == ANSWERS[GREET]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_a_200_holding_an_error_that_is_only_text_is_retried(dataset, tmp_path, streaming):
    """A body ``{"error": "text"}`` failed the sample at once when not streamed
    (``ValueError: text``), though streamed it was retried."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        body = json.dumps({"error": "Model is loading, try again shortly"})
        server.inject(Fault("error_body", body), input=GREET, times=1)
        summary = _record(dataset, server, tmp_path, streaming=streaming)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)


def test_a_200_holding_an_error_of_the_request_fails_naming_it(dataset, tmp_path):
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.error_body(TOO_LONG), input=GREET)
        summary = _record(dataset, server, tmp_path)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "ErrorReply")
    assert row["error"] == (
        "the provider answered 200 with an error, taken as a 400: invalid_request_error "
        "(context_length_exceeded): This model's maximum context length is 8192 tokens."
    )
    assert len(server.requests) == 3  # add's two, greet's one


def test_a_stop_on_200s_holding_errors_says_the_servers_errors(dataset, tmp_path):
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.error_body(OVERLOADED))
        result = cli("record", "--model", MODEL, "--model-option", f"base_url={server.url}",
                     "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
                     "--workers", "1", "--retries", "1", "--backoff", "0.01",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert "no model call succeeded" in error
    assert "(ErrorReply: the provider answered 200 with an error, taken as a 529: " in error
    assert "the provider answered with server errors" in error


def test_a_200_holding_a_refused_key_stops_the_run_as_a_401_does(dataset, tmp_path):
    refused = {"message": "Incorrect API key provided.", "type": "invalid_request_error",
               "code": "invalid_api_key"}  # fmt: skip
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.error_body(refused))
        result = cli("record", "--model", MODEL, "--model-option", f"base_url={server.url}",
                     "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
                     "--workers", "1", "--store", tmp_path / "traces", "--run-id", "r",
                     "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert "stopped: the provider refused the API key (ErrorReply: " in error
    assert "taken as a 401: invalid_request_error (invalid_api_key): Incorrect" in error
    assert len(server.requests) == 1


def _invalid_request(provider: str) -> tuple[dict, str]:
    """An invalid request's error body as each provider's SDK types it, and how the sample's
    error says it."""
    if provider == "openai":
        from openai.types import ErrorObject

        error = ErrorObject(message="Unsupported parameter: 'foo'", type="invalid_request_error",
                            param="foo", code="unsupported_parameter")  # fmt: skip
        said = "invalid_request_error (unsupported_parameter): Unsupported parameter: 'foo'"
        return {"error": error.model_dump(mode="json", exclude_none=True)}, said
    from anthropic.types import ErrorResponse, InvalidRequestError

    error = InvalidRequestError(type="invalid_request_error", message="max_tokens: too big")
    body = ErrorResponse(type="error", error=error, request_id="req_1")
    return body.model_dump(mode="json"), "invalid_request_error: max_tokens: too big"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_json_error_answering_a_streamed_request_fails_naming_it(dataset, tmp_path, provider):
    """A 200 whose body is a JSON error, not events, answering a request for a stream, was
    retried as "No generations found in stream" (a reply that could not be read), its kind
    lost: an invalid request spent its retries. It is now taken as the same body answering
    a request not streamed is."""
    model = PROVIDERS[provider][0]
    pytest.importorskip(f"langchain_{provider}")
    body, said = _invalid_request(provider)
    server_class, faults = PROVIDERS[provider][1:3]
    with server_class(SCRIPT, ANSWERS) as server:
        server.inject(faults.json_body(body), input=GREET)
        summary = _record(dataset, server, tmp_path, streaming=True, model=model)
    assert all(request["stream"] for request in server.requests)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "ErrorReply")
    assert row["error"] == f"the provider answered 200 with an error, taken as a 400: {said}"
    assert len(server.requests) == 3  # add's two, greet's one: not retried
    assert _samples(summary.run_dir)["add"]["status"] == "ok"


def test_the_sdks_own_streams_read_a_json_body_so_too():
    """Read by the SDK's client itself (not streamed by LangChain, not async: as an agent's
    own code may), a JSON error raises its error; a JSON body holding none is read as before,
    a stream of no events."""
    import openai

    from tcbreplay._record.models.anthropic_calls import ErrorBody
    from tcbreplay._record.models.streamed_bodies import raise_streamed_error_bodies

    raise_streamed_error_bodies()
    body, _ = _invalid_request("openai")
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.json_body(body), times=1)
        server.inject(Fault.json_body({"id": "chatcmpl-1", "choices": []}), times=1)
        client = openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
        messages = [{"role": "user", "content": GREET}]
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                                stream=True)  # fmt: skip
        with pytest.raises(ErrorBody) as raised:
            list(stream)
        assert raised.value.error["code"] == "unsupported_parameter"
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                                stream=True)  # fmt: skip
        assert list(stream) == []


def test_an_error_a_200_holds_is_said_by_its_kind_and_code():
    from tcbreplay._record.agent import ErrorReply

    assert str(ErrorReply.of(BAD_GATEWAY, 502, streamed=False)) == (
        "the provider answered 200 with an error, taken as a 502: Upstream error"
    )
    assert str(ErrorReply.of(RATE_LIMITED, 429, streamed=True)) == (
        "the provider's stream broke off with an error, taken as a 429: requests "
        "(rate_limit_exceeded): Slow down."
    )


# Anthropic's API answers so too (its body's "type" "error"): langchain-anthropic failed
# reading it, "TypeError: 'NoneType' object is not iterable"
ANTHROPIC = "anthropic:claude-opus-4-7"


@pytest.mark.parametrize("kind", ["overloaded_error", "rate_limit_error", "api_error"])
def test_a_200_holding_an_anthropic_error_to_retry_is_retried(dataset, tmp_path, kind):
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, ANSWERS) as server:
        server.inject(anthropic_server.Fault.error_body(kind), input=GREET, times=1)
        summary = _record(dataset, server, tmp_path, model=ANTHROPIC)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)
    assert _messages(summary.run_dir, "greet")[-1]["content"] == ANSWERS[GREET]


@pytest.mark.parametrize(
    "body", [{}, {"type": "error", "error": "Overloaded"}], ids=["empty", "error-text"]
)
def test_a_200_of_anthropic_that_is_no_message_is_retried(dataset, tmp_path, body):
    """A body with no content and no error object (a gateway's ``{}``) failed the sample at
    once, "TypeError: 'NoneType' object is not iterable", and a run of them stopped telling
    to check that the server can be reached."""
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, ANSWERS) as server:
        server.inject(anthropic_server.Fault.body(body), input=GREET, times=1)
        summary = _record(dataset, server, tmp_path, model=ANTHROPIC)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)


def test_a_stop_on_anthropic_200s_that_are_no_message_says_so(dataset, tmp_path):
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, ANSWERS) as server:
        server.inject(anthropic_server.Fault.body({}))
        result = cli("record", "--model", ANTHROPIC, "--model-option", f"base_url={server.url}",
                     "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
                     "--workers", "1", "--retries", "1", "--backoff", "0.01",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert "(UnreadableReply: the provider's reply could not be read: NoMessage: " in error
    assert "can be reached" not in error


@pytest.mark.parametrize(
    ("kind", "message", "status"),
    [("invalid_request_error", "max_tokens: too big", 400),
     # (was retried as an error of no kind, where a 402 is not: the credit does not come back)
     ("billing_error", "Your credit balance is too low", 402)],
    ids=["invalid-request", "billing"],
)  # fmt: skip
def test_a_200_holding_an_anthropic_error_of_the_request_fails_naming_it(
    dataset, tmp_path, kind, message, status
):
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, ANSWERS) as server:
        fault = anthropic_server.Fault.error_body(kind, message)
        server.inject(fault, input=GREET)
        summary = _record(dataset, server, tmp_path, model=ANTHROPIC)

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "ErrorReply")
    assert row["error"] == (
        f"the provider answered 200 with an error, taken as a {status}: {kind}: {message}"
    )
    assert _samples(summary.run_dir)["add"]["status"] == "ok"


def test_a_200_holding_an_anthropic_refused_key_stops_the_run(dataset, tmp_path):
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, ANSWERS) as server:
        fault = anthropic_server.Fault.error_body("authentication_error", "invalid x-api-key")
        server.inject(fault)
        result = cli("record", "--model", ANTHROPIC, "--model-option", f"base_url={server.url}",
                     "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
                     "--workers", "1", "--store", tmp_path / "traces", "--run-id", "r",
                     "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert error == (
        "Error: recording of r stopped: the provider refused the API key (ErrorReply: the "
        "provider answered 200 with an error, taken as a 401: authentication_error: invalid "
        "x-api-key): set ANTHROPIC_API_KEY to a valid key"
    )
    assert len(server.requests) == 1


# -- arguments that are no JSON object -------------------------------------------------------


@pytest.mark.parametrize("arguments", ['"{\\"a\\": 25, \\"b\\": 4.5}"', "[25, 4.5]"])
@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_arguments_that_are_no_json_object_are_the_agents_and_stored(
    dataset, tmp_path, arguments, streaming
):
    """A JSON string or a list as a call's arguments failed the whole sample
    (``ValidationError: 1 validation error for AIMessage``), and the model's message was lost.
    It is kept as LangChain keeps arguments that are no JSON: an invalid call, which is not
    run and which the metrics do not count as a call."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.with_arguments(arguments), input=ADD, turn=0)
        summary = _record(dataset, server, tmp_path, streaming=streaming)

    row = _samples(summary.run_dir)["add"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 1, None)
    _human, ai = _messages(summary.run_dir, "add")
    assert ai["tool_calls"] == []
    (invalid,) = ai["invalid_tool_calls"]
    assert (invalid["name"], invalid["args"]) == ("add_numbers", arguments)
    scores = score_run(Store(tmp_path / "traces"), "r", write=False).scores
    (scored,) = scores.filter(scores["sample_id"] == "add").to_dicts()
    assert (scored["status"], scored["n_agent"], scored["tsa"]) == ("ok", 0, 0.0)


@pytest.mark.parametrize("agent", ["react_graph", "sync_graph"], ids=["async", "sync"])
def test_an_agent_of_ones_own_stops_at_empty_replies_as_the_built_in_one(dataset, tmp_path, agent):
    """--agent's empty replies (no content, no tool call), retried, were each counted as an
    answered call: a first sample failing on them did not stop the run as one no call of
    which was answered, and every sample after it spent its retries on them too."""
    from openai.types.chat import ChatCompletion

    empty = ChatCompletion.model_validate({
        "id": "chatcmpl-empty", "object": "chat.completion", "created": 1,
        "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": ""}}],
    }).model_dump(mode="json", exclude_none=True)  # fmt: skip
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.json_body(empty))
        result = cli("record", "--model", MODEL, "--model-option", f"base_url={server.url}",
                     "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
                     "--workers", 1, "--retries", 1, "--backoff", 0,
                     "--agent", f"replay_fixtures:{agent}",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert error.startswith("Error: recording of r stopped: no model call succeeded: the first "
                            "sample failed after its retries (EmptyModelResponse: ")  # fmt: skip
    assert "the provider answered with empty replies" in error
    assert len(server.requests) == 2  # the first sample's call, retried once


def test_a_stop_on_empty_replies_does_not_blame_the_network():
    from tcbreplay._record.failures import _unanswered_fix

    error = "EmptyModelResponse: the model answered with no content and no tool calls (finish "
    fix = _unanswered_fix(error + "reason SAFETY)", "http://h/v1")
    assert fix.startswith("the provider answered with empty replies")
    assert "can be reached" not in fix
