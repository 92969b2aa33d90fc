"""The tools a model call was sent, read from the invocation parameters the providers' real
chat models (and sim's) give a callback, as ``record``'s call watcher reads them for an agent
of one's own (tcbreplay._record.call_tools)."""

from __future__ import annotations

import pytest

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._record.call_tools import sent_tools, tool_names

TOOLS = load_inputs("tool-call").toolset.tools
NAMES = tool_names(TOOLS)
REPLY = {
    "title": "Reply",
    "type": "object",
    "properties": {"reply": {"type": "string"}},
    "required": ["reply"],
}


class _Stop(Exception):
    """Raised by the callback once it has the call's parameters (no request is sent)."""


def invocation_params(runnable) -> dict:
    """The invocation parameters a call of ``runnable`` gives the callbacks."""
    from langchain_core.callbacks import BaseCallbackHandler

    seen: dict = {}

    class Watch(BaseCallbackHandler):
        raise_error = True

        def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs):
            seen.update(kwargs.get("invocation_params") or {})
            raise _Stop

    with pytest.raises(_Stop):
        runnable.invoke("Hi there!", config={"callbacks": [Watch()]})
    return seen


@pytest.fixture(params=["openai:gpt-4o-mini", "anthropic:claude-3-5-haiku-latest",
                        "google_genai:gemini-2.5-flash", "sim:seed=1"])  # fmt: skip
def model(request, monkeypatch):
    from tcbreplay._record.models import build_chat_model, parse_model

    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(key, "fake-key-for-no-request-7f3a9c")
    return build_chat_model(parse_model(request.param, {}))


def test_a_call_sent_the_runs_tools_keeps_nothing(model):
    """(sim kept its tools out of the invocation parameters: a call was taken as sent none)"""
    assert sent_tools(invocation_params(model.bind_tools(TOOLS)), NAMES) is None
    assert sent_tools(invocation_params(model.bind_tools(TOOLS[::-1])), NAMES) is None


def test_a_call_sent_none_or_some_keeps_their_names(model):
    assert sent_tools(invocation_params(model), NAMES) == []
    assert sent_tools(invocation_params(model.bind_tools(TOOLS[1:])), NAMES) == NAMES[1:]


def test_a_tool_not_the_runs_is_kept_as_its_schema(monkeypatch):
    """Anthropic's ``with_structured_output`` sends a tool of the schema's name: its name
    alone does not say what the call was sent."""
    from tcbreplay._record.models import build_chat_model, parse_model

    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key-for-no-request-7f3a9c")
    model = build_chat_model(parse_model("anthropic:claude-3-5-haiku-latest", {}))
    params = invocation_params(model.with_structured_output(REPLY))
    assert sent_tools(params, NAMES) == [
        {"name": "Reply", "description": "", "parameters": {k: REPLY[k] for k in
                                                            ("type", "properties", "required")}}
    ]  # fmt: skip
    assert sent_tools({"tools": [{"type": "web_search"}]}, ["web_search"]) == [
        {"name": "web_search", "unreadable": "web_search"}
    ]


def test_a_run_whose_calls_were_sent_its_tools_keeps_none(tmp_path):
    """An agent binding the run's tools at every call (sim's model, then replay's recorded
    one) adds nothing to its samples' metadata: its recording is as before."""
    import json

    import pyarrow.parquet as pq
    from helpers import cli

    from tcbreplay._replay.run import replay_run
    from tcbreplay._store.runs import Store

    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:seed=3", "--agent", "replay_fixtures:react_graph",
                 "--run-id", "mine", "--limit", 4, "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert replay_run(store, "mine", new_run_id="again").diverged_samples == 0
    for run_id in ("mine", "again"):
        table = pq.read_table(store.open_run(run_id).samples_path, columns=["metadata"])
        kept = [json.loads(m) for m in table["metadata"].to_pylist() if m]
        assert not any("tcbreplay_tools" in m for m in kept)
