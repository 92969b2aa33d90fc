"""Replies to an agent of one's own (``--agent``) whose graph streams its model itself
(``astream`` or ``stream``, not ``ainvoke``): checked once the stream ends, as an invoked
reply is. ``ChatOpenAI`` talks to :class:`openai_server.OpenAIServer` over HTTP, streaming;
nothing in tcbreplay, LangChain or the SDK is mocked."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import ADD, GREET, add_and_greet, cli
from openai_server import Fault, OpenAIServer

from tcbreplay._inputs.benchmarks import BENCHMARKS

pytest.importorskip("langchain_openai")

MODEL = "openai:gpt-4o-mini"
TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
PROMPT = BENCHMARKS["tool-call"].system_prompt
SCRIPT = {ADD: [[("add_numbers", {"a": 25.0, "b": 4.5})]], GREET: []}
ANSWERS = {ADD: "The total is 29.5.", GREET: "Hello! How can I help?"}
# the graph's model node streams its model: asynchronously (astream), or in a thread (stream)
STREAMING = pytest.mark.parametrize(
    "agent", ["streams_its_model", "streams_its_model_sync"], ids=["astream", "stream"]
)


@pytest.fixture
def dataset(tmp_path) -> Path:
    return add_and_greet(tmp_path)


@pytest.fixture(autouse=True)
def key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")


def record(server: OpenAIServer, dataset: Path, tmp_path: Path, agent: str, *options: object):
    return cli("record", "--model", MODEL, "--model-option", f"base_url={server.url}",
               *options, "--dataset", dataset, "--tools", TOOLS, "--system-prompt", PROMPT,
               "--workers", 1, "--backoff", 0, "--agent", f"replay_fixtures:{agent}",
               "--store", tmp_path / "traces", "--run-id", "r", "--quiet")  # fmt: skip


def samples(tmp_path: Path) -> dict[str, dict]:
    rows = pq.read_table(tmp_path / "traces" / "r" / "samples.parquet").to_pylist()
    return {row["sample_id"]: row for row in rows}


def messages(tmp_path: Path, sample_id: str) -> list[dict]:
    rows = pq.read_table(tmp_path / "traces" / "r" / "messages.parquet").to_pylist()
    rows = sorted((r for r in rows if r["sample_id"] == sample_id), key=lambda r: r["position"])
    return [json.loads(r["message"])["data"] for r in rows]


@STREAMING
def test_an_empty_streamed_reply_is_retried(dataset, tmp_path, agent):
    """An empty reply the graph streamed (no content, no tool call) was the model's answer:
    the sample ended on it, status ok, as if the model had nothing to say."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.empty(), input=GREET, times=1)
        result = record(server, dataset, tmp_path, agent, "--retries", 1)
    assert result.exit_code == 0, result.output
    assert all(request["stream"] for request in server.requests)
    row = samples(tmp_path)["greet"]
    assert (row["status"], row["attempts"], row["error"]) == ("ok", 2, None)
    answer = messages(tmp_path, "greet")[-1]
    assert answer["content"] == ANSWERS[GREET]
    # none of the empty reply's chunks reached the graph (its usage would be added in)
    assert answer["usage_metadata"]["output_tokens"] == 7


@STREAMING
def test_streamed_empty_replies_stop_the_run_as_invoked_ones(dataset, tmp_path, agent):
    """Empty streamed replies were each an answered call: the first sample "answered" with
    nothing, the run did not stop, and every sample after it did the same."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.empty())
        result = record(server, dataset, tmp_path, agent, "--retries", 1)
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert error.startswith("Error: recording of r stopped: no model call succeeded: the first "
                            "sample failed after its retries (EmptyModelResponse: ")  # fmt: skip
    assert len(server.requests) == 2  # the first sample's call, retried once


@STREAMING
def test_a_streamed_reply_at_the_token_limit_is_refused(dataset, tmp_path, agent):
    """A streamed reply cut at the token limit was the model's answer (half its arguments,
    or half its text), counted as an answered call: the run went on cutting every sample."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.at_token_limit())
        result = record(server, dataset, tmp_path, agent, "--model-option", "max_tokens=5")
    assert result.exit_code == 1, result.output
    error = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert error.startswith(
        "Error: recording of r stopped: the model stopped at its token limit in the first "
        "sample (max_tokens=5, finish reason length)"
    )
    assert len(server.requests) == 1


@STREAMING
def test_a_streamed_reply_cut_off_after_its_first_chunk_is_refused(dataset, tmp_path, agent):
    """A stream cut off before its finish reason (half the answer's text) was the model's
    answer, status ok. Its first chunk was handed on to the graph, which holds it: refused,
    not retried (an invoked reply cut off is retried: nothing of it was handed on)."""
    with OpenAIServer(SCRIPT, ANSWERS) as server:
        server.inject(Fault.cut(), input=ADD, turn=1, times=1)  # mid the answer's text
        result = record(server, dataset, tmp_path, agent, "--retries", 1, "--max-errors", 1)
    assert result.exit_code == 0, result.output
    row = samples(tmp_path)["add"]
    assert (row["status"], row["attempts"], row["error_type"]) == ("error", 1, "TruncatedReply")
    assert "cut off before its end" in row["error"]
    # the call before it was answered; the half answer is not stored
    assert [m["type"] for m in messages(tmp_path, "add")] == ["human", "ai", "tool"]
    assert samples(tmp_path)["greet"]["status"] == "ok"
