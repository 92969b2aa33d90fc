"""The hints of ``record --engine ray`` fit the command given: a run id the user did not give
is not one to change ("another --run-id"), and Ray's tasks are not shards the user started.
Ray's scheduling is left out (each test runs the one task here, as Ray would run it); what
is under test is what the recording tells its task."""

from __future__ import annotations

import contextlib
import json

import openai_server
import pytest
from helpers import cli

import tcbreplay._record.on_ray as on_ray
import tcbreplay._record.runner as runner

GREET = "Hi there!"
TOOLS_MODULE = '''
from langchain_core.tools import StructuredTool


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b {change}


TOOLS = [StructuredTool.from_function(add, name="add_numbers")]
'''


@pytest.fixture(autouse=True)
def ray_here(monkeypatch):
    """Ray's one task run in this process: shard 1 of 1, with a stand-in for the actor of the
    shards' rate windows (used with --max-rpm only)."""
    monkeypatch.setattr(runner, "ray_session", lambda address: contextlib.nullcontext())
    monkeypatch.setattr(
        on_ray, "record_on_ray", lambda record_shard, tasks, address=None: record_shard(
            (1, 1), object()
        ),
    )  # fmt: skip


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps([{"id": "greet", "input": GREET, "target": []}]))
    (tmp_path / "prompt.txt").write_text("Use the tools.")
    (tmp_path / "ray_tools.py").write_text(TOOLS_MODULE.format(change=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "ray_tools", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")
    return ("--dataset", dataset, "--tools", "ray_tools:TOOLS", "--system-prompt",
            tmp_path / "prompt.txt", "--store", tmp_path / "traces", "--quiet")  # fmt: skip


def _line(result, start: str) -> str:
    return next(line for line in result.output.splitlines() if line.startswith(start))


def test_a_token_limit_stop_on_ray_of_a_run_named_by_default(inputs):
    """The hint said "give it another --run-id (or replace ... with --overwrite)": Ray's task
    is given the run id, which the user did not give."""
    with openai_server.OpenAIServer({}, {GREET: "Hello!"}) as server:
        server.inject(openai_server.Fault.at_token_limit())
        result = cli("record", "--model", "openai:gpt-4o-mini", *inputs,
                     "--model-option", f"base_url={server.url}", "--model-option", "max_tokens=5",
                     "--engine", "ray")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert _line(result, "Hint:").endswith(
        "a higher max_tokens is another run: the same command with it records one under a run "
        "id of its own"
    )


def test_a_run_of_other_inputs_on_ray_of_a_run_named_by_default(inputs, tmp_path):
    """The hint said "give every shard the same inputs, or use another --run-id": Ray's tasks
    are no shards the user gave inputs to, nor was a run id given."""
    assert cli("record", "--model", "sim", *inputs).exit_code == 0
    (tmp_path / "ray_tools.py").write_text(TOOLS_MODULE.format(change="+ 0"))
    __import__("sys").modules.pop("ray_tools", None)
    result = cli("record", "--model", "sim", *inputs, "--engine", "ray")
    assert result.exit_code == 2, result.output
    assert "exists with other inputs (the module of --tools ray_tools:TOOLS changed" in (
        _line(result, "Error:")
    )
    assert _line(result, "Hint:") == (
        "Hint: to go on with the run, put the module back as it was; or give the recording a "
        "--run-id of its own, or --overwrite to replace it"
    )
