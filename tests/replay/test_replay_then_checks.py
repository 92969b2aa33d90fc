"""A replay going on live (``--then``) is held to ``record``'s checks before it runs, and its
stops are said in ``record``'s words, with the replay's options: the tool names the live
model's provider refuses, and a live model that stops the run."""

from __future__ import annotations

import json

import anthropic_server
import openai_server
import pytest
from helpers import cli

TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
GREET = "Hi there!"
NAMED_TOOLS = '''
from langchain_core.tools import StructuredTool


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


TOOLS = [StructuredTool.from_function(add, name="add numbers")]
'''


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps([{"id": "greet", "input": GREET, "target": []}]))
    (tmp_path / "prompt.txt").write_text("Use the tools.")
    return path


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-a-loopback-server")
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(variable, raising=False)


def test_a_tool_name_the_then_models_provider_refuses_is_refused_before_the_replay(
    tmp_path, dataset, monkeypatch
):
    """``record`` refuses a tool name the provider refuses; a replay going on live with such a
    provider sent it, each live call to get the provider's 400."""
    pytest.importorskip("langchain_anthropic")
    (tmp_path / "spaced_tools.py").write_text(NAMED_TOOLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim", "--dataset", dataset, "--tools", "spaced_tools:TOOLS",
                 "--system-prompt", tmp_path / "prompt.txt", "--run-id", "r", "--store", store,
                 "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    with anthropic_server.AnthropicServer({}, {GREET: "Hello!"}) as server:
        result = cli("replay", "r", "--then", "anthropic:claude-opus-4-7",
                     "--model-option", f"base_url={server.url}", "--fork-at", "0",
                     "--run-id", "again", "--store", store, "--quiet")  # fmt: skip
        refused = (
            "Error: run 'r''s tools (spaced_tools:TOOLS): the tool name 'add numbers' is not one "
            "Anthropic takes: 1 to 128 letters, digits, _ and - (^[a-zA-Z0-9_-]{1,128}$)"
        )
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines()[0] == refused
        assert server.requests == []
        assert not (store / "again").exists()
        # offline, the live model is sent nothing: no name of it is refused
        result = cli("replay", "r", "--then", "anthropic:claude-opus-4-7",
                     "--model-option", f"base_url={server.url}", "--offline",
                     "--run-id", "offline", "--store", store, "--quiet")  # fmt: skip
        assert "is not one Anthropic takes" not in result.output, result.output
        assert (store / "offline").is_dir()


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            {"type": "invalid_request_error", "code": "model_not_found", "message": "No model"},
            "no model 'gpt-4o-mini' at {url} (ErrorReply: the provider answered 200 with an "
            "error, taken as a 404: invalid_request_error (model_not_found): No model): check "
            "--then or --model-option base_url=",
        ),
        (
            {"type": "invalid_request_error", "message": "Unsupported parameter: 'foo'"},
            "no live model call was answered: the first sample failed (ErrorReply: "
            "the provider answered 200 with an error, taken as a 400: invalid_request_error: "
            "Unsupported parameter: 'foo'): the provider refuses the request: check --then and "
            "--model-option settings",
        ),
    ],
    ids=["unknown model", "refused request"],
)
def test_a_replay_stopped_by_its_live_model_says_so_as_record_does(tmp_path, dataset, error, said):
    """The stop was said raw ("unknown model: ErrorReply: ..."), where ``record`` says what
    happened and what to set."""
    store = tmp_path / "traces"
    with openai_server.OpenAIServer({}, {GREET: "Hello!"}) as server:
        result = cli("record", "--model", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}", "--dataset", dataset,
                     "--tools", TOOLS, "--system-prompt", tmp_path / "prompt.txt",
                     "--store", store, "--run-id", "r", "--quiet")  # fmt: skip
        assert result.exit_code == 0, result.output
        server.inject(openai_server.Fault.error_body(error))
        result = cli("replay", "r", "--then", "openai:gpt-4o-mini",
                     "--model-option", f"base_url={server.url}", "--fork-at", "0",
                     "--run-id", "again", "--workers", "1", "--store", store,
                     "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    error_line = next(line for line in result.output.splitlines() if line.startswith("Error:"))
    assert error_line == "Error: replay of again stopped: " + said.format(url=server.url)
