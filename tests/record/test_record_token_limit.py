"""A reply the model stopped at its token limit, through the real clients of the three
providers (OpenAI's ``finish_reason`` ``length``, Anthropic's ``stop_reason`` ``max_tokens``,
Gemini's ``finishReason`` ``MAX_TOKENS``) against the loopback servers: the sample is an error
saying so, never the model's answer, and the run counts it."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic_server
import gemini_server
import openai_server
import pyarrow.parquet as pq
import pytest
from helpers import ADD, GREET, add_and_greet, cli

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._store.runs import Store

TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
PROMPT = BENCHMARKS["tool-call"].system_prompt
SCRIPT = {ADD: [[("add_numbers", {"a": 25.0, "b": 4.5})]], GREET: []}
ANSWERS = {ADD: "The total is 29.5.", GREET: "Hello! How can I help you today?"}

# each provider's model, server, faults, and the finish reason its reply said
PROVIDERS = {
    "openai": ("openai:gpt-4o-mini", openai_server.OpenAIServer, openai_server.Fault, "length"),
    "anthropic": ("anthropic:claude-opus-4-7", anthropic_server.AnthropicServer,
                  anthropic_server.Fault, "max_tokens"),
    "google_genai": ("google_genai:gemini-2.5-flash", gemini_server.GeminiServer,
                     gemini_server.Fault, "MAX_TOKENS"),
}  # fmt: skip


@pytest.fixture
def dataset(tmp_path) -> Path:
    return add_and_greet(tmp_path)


@pytest.fixture(autouse=True)
def keys(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-a-loopback-server")
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-gemini-key-for-a-loopback-server")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)


def _samples(run_dir) -> dict[str, dict]:
    return {r["sample_id"]: r for r in pq.read_table(Path(run_dir) / "samples.parquet").to_pylist()}


def _messages(run_dir, sample_id) -> list[dict]:
    rows = pq.read_table(Path(run_dir) / "messages.parquet").to_pylist()
    rows = sorted((r for r in rows if r["sample_id"] == sample_id), key=lambda r: r["position"])
    return [json.loads(r["message"])["data"] for r in rows]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_at_the_token_limit_is_an_error_saying_so_not_retried(dataset, tmp_path, provider):
    """A reply cut at max_tokens was stored as the model's answer, status ok: half the
    answer's text was the final answer, scored as if whole."""
    model, server_class, faults, reason = PROVIDERS[provider]
    pytest.importorskip(f"langchain_{provider}")
    with server_class(SCRIPT, answers=ANSWERS) as server:
        server.inject(faults.at_token_limit(), input=GREET)
        inputs = load_inputs(None, dataset, TOOLS, PROMPT)
        choice = parse_model(model, {"base_url": server.url, "max_tokens": "12"})
        options = RecordOptions(workers=1, backoff=0.01)
        summary = record_run(inputs, choice, Store(tmp_path / "traces"), run_id="r",
                             options=options)  # fmt: skip

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "TokenLimitReply")
    assert row["error"] == (
        f"the model stopped at its token limit (max_tokens=12, finish reason {reason}): what it "
        "wrote is cut off; raise --model-option max_tokens=N"
    )
    # the cut answer is not stored: only the input
    assert [m["type"] for m in _messages(summary.run_dir, "greet")] == ["human"]
    assert _samples(summary.run_dir)["add"]["status"] == "ok"
    assert (summary.errors, summary.error_types) == (1, {"TokenLimitReply": 1})


def test_a_reply_at_the_token_limit_is_counted_and_said_by_record(dataset, tmp_path):
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit(), input=ADD, turn=0)  # a cut call
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--workers", "2",
                     "--max-errors", "1", "--store", tmp_path / "traces", "--run-id", "r",
                     "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "1/2 ok, 1 error," in result.output
    assert "errors: TokenLimitReply x1 (" in result.output
    row = _samples(tmp_path / "traces" / "r")["add"]
    assert row["error"].startswith(
        "the model stopped at its token limit (max_tokens not set: the provider's own, "
        "finish reason length)"
    )
    assert len(server.requests) == 2  # greet's, and add's first turn once: not retried


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stop_on_replies_at_the_token_limit_says_to_raise_it(dataset, tmp_path, workers):
    """The stop said "the first sample failed after its retries" and hinted --retry-errors:
    such a reply is never retried, and --retry-errors keeps the limit that cut it."""
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit())
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}",
                     "--model-option", "max_tokens=5", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--workers", workers,
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    error = next(line for line in lines if line.startswith("Error:"))
    where = "the first sample" if workers == 1 else "each of the first 2 samples"
    kept, them = ("1 finished sample", "it") if workers == 1 else ("2 finished samples", "them")
    assert error == (
        f"Error: recording of r stopped: the model stopped at its token limit in {where} "
        "(max_tokens=5, finish reason length), and a retry is cut off the same way: record "
        "again with a higher --model-option max_tokens=N, as another run"
    )
    hint = next(line for line in lines if line.startswith("Hint:"))
    assert hint == (
        f"Hint: the run keeps its {kept}, but --retry-errors would record {them} with "
        "max_tokens as it is, to be cut off again: a higher max_tokens is another run: give it "
        "another --run-id (or replace r with --overwrite)"
    )
    manifest = json.loads((tmp_path / "traces" / "r" / "manifest.json").read_text())
    assert manifest["stopped"].startswith("token limit: TokenLimitReply: the model stopped")
    assert len(server.requests) == workers  # none retried

    # as the hint says: a higher limit, the run replaced
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}",
                     "--model-option", "max_tokens=500", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--overwrite",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2/2 ok" in result.output


def test_a_stop_on_replies_at_the_token_limit_of_a_run_named_by_default(dataset, tmp_path):
    """Without --run-id, a higher limit names another run: the hint says so, and the same
    command with it records one."""
    command = ("record", "--model", "openai:gpt-4o-mini", "--dataset", dataset, "--tools", TOOLS,
               "--system-prompt", PROMPT, "--workers", "1", "--store", tmp_path / "traces",
               "--quiet")  # fmt: skip
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit(), times=1)
        result = cli(*command, "--model-option", f"base_url={server.url}")
        assert result.exit_code == 1, result.output
        lines = result.output.splitlines()
        error = next(line for line in lines if line.startswith("Error:"))
        assert "(max_tokens not set: the provider's own, finish reason length)" in error
        assert error.endswith(
            "set --model-option max_tokens=N above the provider's default, as another run"
        )
        hint = next(line for line in lines if line.startswith("Hint:"))
        assert hint.endswith(
            "a higher max_tokens is another run: the same command with it records one under a "
            "run id of its own"
        )
        result = cli(*command, "--model-option", f"base_url={server.url}",
                     "--model-option", "max_tokens=500")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len([p for p in (tmp_path / "traces").iterdir() if p.is_dir()]) == 2


def test_a_first_wave_partly_at_the_token_limit_says_so_beside_the_other_fix(dataset, tmp_path):
    """A wave of which some samples failed otherwise and some were cut at the token limit
    stopped with the others' fix alone, never saying that a retry is cut off again; then it
    said "the first 2 samples failed after their retries" (a reply at the token limit is never
    retried) and hinted --retry-errors, which records the cut ones with the same limit."""
    invalid = {"type": "invalid_request_error", "message": "Unsupported parameter: 'foo'"}
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit(), input=ADD)
        server.inject(openai_server.Fault.error_body(invalid), input=GREET)
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}",
                     "--model-option", "max_tokens=5", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--workers", "2",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    error = next(line for line in lines if line.startswith("Error:"))
    assert error.startswith(
        "Error: recording of r stopped: no model call succeeded: the first 2 samples failed "
        "(ErrorReply: the provider answered 200 with an error, taken as a 400: "
        "invalid_request_error: Unsupported parameter: 'foo'): the provider refuses the "
        "request: check --model and --model-option settings; "
    )
    assert error.endswith(
        "; 1 of the 2 stopped at the model's token limit (max_tokens=5, finish reason length), "
        "which no retry lifts: record again with a higher --model-option max_tokens=N, as "
        "another run"
    )
    assert next(line for line in lines if line.startswith("Hint:")) == (
        "Hint: the run keeps its 2 finished samples, but --retry-errors would record the 1 cut "
        "off at the token limit with max_tokens as it is, to be cut off again: once the others' "
        "fault is fixed, a higher max_tokens is another run: give it another --run-id (or "
        "replace r with --overwrite)"
    )


def test_a_first_wave_only_partly_at_the_token_limit_stops_as_unanswered():
    from tcbreplay._record.failures import Breaker, Outcome, RecordStop

    cut = Outcome("error", answered=False, error="TokenLimitReply: the model stopped at ...")
    breaker = Breaker(wave=2)
    breaker.see(cut)
    with pytest.raises(RecordStop) as stop:
        breaker.see(Outcome("error", answered=False, error="ConnectError: refused"))
    assert (stop.value.reason, stop.value.failed, stop.value.cut) == ("unanswered", 2, 1)
    assert (stop.value.cut_error, stop.value.other_error) == (cut.error, "ConnectError: refused")
    breaker = Breaker(wave=2)
    breaker.see(cut)
    with pytest.raises(RecordStop) as stop:
        breaker.see(cut)
    assert (stop.value.reason, stop.value.failed) == ("token limit", 2)


def test_a_first_wave_partly_with_the_context_window_full_says_so_in_line_and_hints():
    """A sample whose context window was full, in a first wave with others that failed
    otherwise, was said nowhere (the line quoted the last error alone), "after their retries"
    it never had, and both hints said to run its samples again as they were."""
    from tcbreplay._record.failures import (
        Breaker,
        Outcome,
        RecordStop,
        replay_stop_hint,
        stop_hint,
        stop_message,
    )

    full = Outcome("error", answered=False, error="ContextWindowReply: the model's context "
                   "window is full (stop reason model_context_window_exceeded)")  # fmt: skip
    breaker = Breaker(wave=2)
    breaker.see(full)
    with pytest.raises(RecordStop) as stopped:
        breaker.see(Outcome("error", answered=False, error="ConnectError: refused"))
    stop = stopped.value
    assert (stop.reason, stop.failed, stop.full, stop.cut) == ("unanswered", 2, 1, 0)
    assert (stop.full_error, stop.other_error) == (full.error, "ConnectError: refused")
    assert stop_message(stop, None) == (
        "no model call succeeded: the first 2 samples failed (ConnectError: refused): check "
        "that the provider can be reached (--model-option base_url=... for a proxy or a "
        "compatible endpoint) and the network; 1 of the 2 had the model's context window full "
        "at the first request, which neither a retry nor a higher max_tokens empties: shorten "
        "the system prompt, the tools or the inputs, or use a model with a larger context "
        "window, as another run"
    )
    assert stop_hint(stop, "r", named=True) == (
        "but --retry-errors would send the 1 whose context window was full the same first "
        "requests, to fill the context window again: once the others' fault is fixed, shorter "
        "inputs or a model with a larger context window is another run: give it another "
        "--run-id (or replace r with --overwrite)"
    )
    assert replay_stop_hint(stop, "again", "tcbreplay replay r --run-id again") == (
        "the run keeps its 2 finished samples, all in error, which the same command does not "
        "replay again: once fixed (--then or its --model-option settings corrected in it, where "
        "they were at fault; for the 1 whose context window was full, shorter inputs in "
        "--system-prompt, --tools or --dataset, or a --then model with a larger context "
        "window), replay them anew with: tcbreplay replay r --run-id again --overwrite"
    )
    # one cut at the token limit beside one refused: a replay's hint says to raise it
    breaker = Breaker(wave=2)
    breaker.see(Outcome("error", answered=False, error="TokenLimitReply: the model stopped"))
    with pytest.raises(RecordStop) as stopped:
        breaker.see(Outcome("error", answered=False, error="ConnectError: refused"))
    assert replay_stop_hint(stopped.value, "again", "tcbreplay replay r --run-id again") == (
        "the run keeps its 2 finished samples, all in error, which the same command does not "
        "replay again: once fixed (--then or its --model-option settings corrected in it, where "
        "they were at fault; for the 1 cut off at the token limit, a higher --model-option "
        "max_tokens=N), replay them anew with: tcbreplay replay r --run-id again --overwrite"
    )
    # every one of the wave's context window full: nothing else to fix
    breaker = Breaker(wave=1)
    with pytest.raises(RecordStop) as stopped:
        breaker.see(full)
    assert replay_stop_hint(stopped.value, "again", "tcbreplay replay r --run-id again") == (
        "the run keeps its 1 finished sample, in error, which the same command does not "
        "replay again: once fixed (for the 1 whose context window was full, shorter inputs in "
        "--system-prompt, --tools or --dataset, or a --then model with a larger context "
        "window), replay it anew with: tcbreplay replay r --run-id again --overwrite"
    )


def _context_window_full(text: str) -> dict:
    """Anthropic's reply of a model whose context window filled up as it wrote, as its SDK
    types it."""
    from anthropic.types import Message, TextBlock, Usage

    return Message(
        id="msg_full", type="message", role="assistant", model=anthropic_server.MODEL,
        content=[TextBlock(type="text", text=text)], stop_reason="model_context_window_exceeded",
        stop_sequence=None, usage=Usage(input_tokens=199_990, output_tokens=10),
    ).model_dump(mode="json")  # fmt: skip


def test_a_reply_with_the_context_window_full_is_an_error_saying_so(dataset, tmp_path):
    """Anthropic's stop reason model_context_window_exceeded was stored as the model's whole
    answer, status ok, though what it wrote was cut off where the window filled up."""
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, answers=ANSWERS) as server:
        server.inject(anthropic_server.Fault.body(_context_window_full("The total")), input=ADD,
                      turn=1)  # fmt: skip
        inputs = load_inputs(None, dataset, TOOLS, PROMPT)
        choice = parse_model("anthropic:claude-opus-4-7", {"base_url": server.url})
        summary = record_run(inputs, choice, Store(tmp_path / "traces"), run_id="r",
                             options=RecordOptions(workers=1, backoff=0.01))  # fmt: skip

    row = _samples(summary.run_dir)["add"]
    assert (row["status"], row["attempts"], row["error_type"]) == (
        "error", 1, "ContextWindowReply"
    )  # fmt: skip
    assert row["error"] == (
        "the model's context window is full (stop reason model_context_window_exceeded): what "
        "it wrote is cut off, and a higher max_tokens does not help; shorten the conversation "
        "(fewer turns, shorter tool outputs) or use a model with a larger context window"
    )
    assert [m["type"] for m in _messages(summary.run_dir, "add")] == ["human", "ai", "tool"]
    assert len(server.requests) == 3  # add's two turns, greet's one: none retried
    assert _samples(summary.run_dir)["greet"]["status"] == "ok"


def test_a_stop_on_a_full_context_window_says_max_tokens_does_not_help(dataset, tmp_path):
    pytest.importorskip("langchain_anthropic")
    with anthropic_server.AnthropicServer(SCRIPT, answers=ANSWERS) as server:
        server.inject(anthropic_server.Fault.body(_context_window_full("Hel")))
        result = cli("record", "--model", "anthropic:claude-opus-4-7",
                     "--model-option", f"base_url={server.url}", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--workers", "1",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    error = next(line for line in lines if line.startswith("Error:"))
    # (it said "the first sample failed after its retries": such a reply is never retried)
    assert error.startswith(
        "Error: recording of r stopped: no model call succeeded: the first sample failed "
        "(ContextWindowReply: the model's context window is full "
    )
    assert error.endswith(
        "the model's context window was full at the first request, which a higher max_tokens "
        "does not help: shorten the system prompt, the tools or the inputs, or use a model "
        "with a larger context window"
    )
    # (it hinted --retry-errors, which sends the same requests, to fill the window again)
    assert next(line for line in lines if line.startswith("Hint:")) == (
        "Hint: the run keeps its 1 finished sample, but --retry-errors would send it the "
        "same first requests, to fill the context window again: shorter inputs or a model "
        "with a larger context window is another run: give it another --run-id (or replace r "
        "with --overwrite)"
    )
    assert len(server.requests) == 1  # not retried


def test_an_empty_gemini_reply_at_the_token_limit_is_not_retried(dataset, tmp_path):
    """Gemini's thinking can spend the whole limit: a reply with no content ending
    MAX_TOKENS was retried as an empty reply, to be cut again at every attempt."""
    pytest.importorskip("langchain_google_genai")
    with gemini_server.GeminiServer(SCRIPT, answers=ANSWERS) as server:
        server.inject(gemini_server.Fault.finish("MAX_TOKENS"), input=GREET)
        inputs = load_inputs(None, dataset, TOOLS, PROMPT)
        choice = parse_model("google_genai:gemini-2.5-flash", {"base_url": server.url})
        summary = record_run(inputs, choice, Store(tmp_path / "traces"), run_id="r",
                             options=RecordOptions(workers=1, backoff=0.01))  # fmt: skip

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "TokenLimitReply")
    assert len(server.requests_for(GREET)) == 1


def test_an_agents_own_model_refuses_a_reply_at_the_token_limit_once():
    """The model an ``--agent`` factory is given keeps to the same rule."""
    import asyncio

    from langchain_openai import ChatOpenAI

    from tcbreplay._record.agent import CallPolicy, SampleState, TokenLimitReply, current_sample
    from tcbreplay._record.policed_model import under_policy

    state = SampleState()
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit())
        chat = ChatOpenAI(model="gpt-4o-mini", base_url=server.url, max_tokens=9, max_retries=0)
        model = under_policy(chat, CallPolicy(retries=2, backoff=0.01))

        async def call() -> None:
            current_sample.set(state)
            await model.ainvoke(GREET)

        with pytest.raises(TokenLimitReply, match=r"\(max_tokens=9, finish reason length\)"):
            asyncio.run(call())
    assert (len(server.requests), state.retries) == (1, 0)
    assert isinstance(state.model_error, TokenLimitReply)


@pytest.mark.parametrize("agent", ["react_graph", "sync_graph"], ids=["async", "sync"])
def test_an_agent_of_ones_own_stops_at_replies_at_the_token_limit(dataset, tmp_path, agent):
    """--agent's call cut at the token limit was counted as answered: a first sample cut
    off so did not stop the run, and every sample after it was cut off too, where the
    built-in agent stops at the first."""
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit())
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}",
                     "--model-option", "max_tokens=5", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--workers", 1,
                     "--agent", f"replay_fixtures:{agent}",
                     "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert error.startswith(
        "Error: recording of r stopped: the model stopped at its token limit in the first "
        "sample (max_tokens=5, finish reason length)"
    )
    assert len(server.requests) == 1


def test_a_reply_at_the_token_limit_an_older_recording_stored_replays_as_it_was(
    dataset, tmp_path, monkeypatch
):
    """A run recorded before such replies were refused holds one as an ``ok`` answer: its
    replay serves the recorded turn as it is (the recording is what it replays), not an
    error the recording did not have."""
    import tcbreplay._record.agent as agent_module
    from tcbreplay._replay.run import replay_run

    store = Store(tmp_path / "traces")
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(openai_server.Fault.at_token_limit(), input=GREET)
        with monkeypatch.context() as older:  # (as tcbreplay recorded before)
            older.setattr(agent_module, "TOKEN_LIMIT_REASONS", frozenset())
            inputs = load_inputs(None, dataset, TOOLS, PROMPT)
            choice = parse_model("openai:gpt-4o-mini", {"base_url": server.url})
            record_run(inputs, choice, store, run_id="r", options=RecordOptions(workers=1))
    assert _samples(tmp_path / "traces" / "r")["greet"]["status"] == "ok"

    summary = replay_run(store, "r", new_run_id="again")
    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["error"]) == ("ok", None)
    assert _messages(summary.run_dir, "greet")[-1]["response_metadata"]["finish_reason"] == "length"


def test_a_live_reply_at_the_token_limit_in_a_replay_is_an_error(dataset, tmp_path):
    """A replay going on live (``--then``) stored the live model's reply cut at its token limit
    as the answer, status ok: the recording's turns are served as they were, and the live
    model's were let through with them."""
    from tcbreplay._replay.run import replay_run

    store = Store(tmp_path / "traces")
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        inputs = load_inputs(None, dataset, TOOLS, PROMPT)
        choice = parse_model("openai:gpt-4o-mini", {"base_url": server.url})
        record_run(inputs, choice, store, run_id="r", options=RecordOptions(workers=1))
        server.inject(openai_server.Fault.at_token_limit(), input=GREET)
        summary = replay_run(store, "r", new_run_id="again", then="openai:gpt-4o-mini",
                             then_options={"base_url": server.url, "max_tokens": "9"},
                             fork_at=0, options={"workers": 1})  # fmt: skip

    row = _samples(summary.run_dir)["greet"]
    assert (row["status"], row["error_type"]) == ("error", "TokenLimitReply")
    assert "(max_tokens=9, finish reason length)" in row["error"]
    assert _samples(summary.run_dir)["add"]["status"] == "ok"


def test_a_replay_stopped_by_live_replies_at_the_token_limit_says_to_raise_it(dataset, tmp_path):
    """The stop said "token limit: TokenLimitReply: ..." and hinted to run the same command
    again, which is cut off the same way."""
    store = tmp_path / "traces"
    with openai_server.OpenAIServer(SCRIPT, ANSWERS) as server:
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", PROMPT, "--store", store,
                     "--run-id", "r", "--quiet")  # fmt: skip
        assert result.exit_code == 0, result.output
        server.inject(openai_server.Fault.at_token_limit())
        result = cli("replay", "r", "--then", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}", "--model-option", "max_tokens=5",
                     "--fork-at", "0", "--run-id", "again", "--workers", "1", "--store", store,
                     "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert next(line for line in lines if line.startswith("Error:")) == (
        "Error: replay of again stopped: the model stopped at its token limit in the first "
        "sample (max_tokens=5, finish reason length), and a retry is cut off the same way: "
        "replay again with a higher --model-option max_tokens=N, as another run"
    )
    assert next(line for line in lines if line.startswith("Hint:")) == (
        "Hint: the same command again would be cut off again: with a higher max_tokens it "
        "replays into a run id of its own (with --run-id: give another, or replace again with "
        "--overwrite)"
    )
