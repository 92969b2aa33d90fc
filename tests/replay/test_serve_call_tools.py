"""The tools each model call was sent, where an agent of one's own sends a call other tools
than the run's (a last ``with_structured_output`` step on the bare model sends none):
``record`` keeps them per call, and ``serve`` (and the recorded model of ``replay``) answers
the request the agent sends and 409s one with the run's tools at ``tools``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import chat_answer as answer
from helpers import record_greeting
from openai_server import OpenAIServer

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._replay.serve import serve_run

HELLO = "Hi there!"
ANSWER = '{"reply": "Hello!"}'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A store holding ``tools``, a run of one sample recorded with ChatOpenAI by
    ``replay_fixtures:answers_in_a_schema`` (a first call with the run's tools, a last one
    with none); and the bodies of its requests."""
    folder = tmp_path_factory.mktemp("call-tools")
    with (
        pytest.MonkeyPatch.context() as patch,
        OpenAIServer({HELLO: []}, answers={HELLO: ANSWER}) as server,
    ):
        patch.setenv("OPENAI_API_KEY", "sk-fake-recording-7f3a9c")
        record_greeting(folder, HELLO, "openai:gpt-4o-mini", server.url, "tools",
                        agent="replay_fixtures:answers_in_a_schema")  # fmt: skip
        bodies = list(server.requests)
    assert [len(b.get("tools") or []) for b in bodies] == [3, 0]
    return folder / "traces", bodies


def test_record_keeps_the_tools_of_a_call_sent_others(recorded):
    """The store kept the run's tools only: that the last call was sent none was lost."""
    import pyarrow.parquet as pq

    from tcbreplay._store.runs import Store

    run = Store(recorded[0]).open_run("tools")
    (metadata,) = pq.read_table(run.samples_path, columns=["metadata"])["metadata"].to_pylist()
    assert json.loads(metadata)["tcbreplay_tools"] == [None, []]


def test_the_request_sent_no_tools_is_answered_and_one_with_the_runs_gets_409(recorded):
    """The agent's last request (no tools) diverged at ``tools`` (the run's recorded), and the
    same request with the run's tools was answered the recorded answer of a call sent none."""
    root, (first, last) = recorded
    with_tools = {**last, "tools": first["tools"]}
    with serve_run(root, "tools") as server:
        assert answer(server.url, first) == ANSWER
        assert answer(server.url, last) == ANSWER
        refused = answer(server.url, with_tools)
        assert (server.service.served, server.service.diverged) == (2, 1)
    assert refused[0] == 409
    assert refused[1].startswith("no recorded turn answers this request: turn 1: tools at tools")


def test_the_recorded_model_compares_the_tools_of_each_call(recorded):
    """``replay``'s model answered a last call bound to the run's tools, and diverged on the
    one sent none."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from tcbreplay._replay.model import RecordedChatModel
    from tcbreplay.errors import DivergenceError

    root, (_, last) = recorded
    model = RecordedChatModel.from_run("tools", root)
    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    messages = [SystemMessage(prompt), HumanMessage(HELLO), AIMessage(ANSWER)]
    format_ = last["response_format"]
    assert model.invoke(messages, response_format=format_).text == ANSWER
    bound = model.bind_tools(load_inputs("tool-call").toolset.tools)
    with pytest.raises(DivergenceError) as caught:
        bound.invoke(messages, response_format=format_)
    assert "turn 1: tools at tools" in str(caught.value)


def test_the_agent_replays_its_recording_unchanged(recorded):
    """Its last step's ``with_structured_output(method="json_schema", include_raw=True)``
    on the recorded model bound the schema as a tool: the replay diverged at ``tools.Reply``."""
    from tcbreplay._replay.run import replay_run

    summary = replay_run(recorded[0], "tools", new_run_id="again")
    assert summary.divergences == []
    assert (summary.ok, summary.turns_served, summary.live_calls) == (1, 2, 0)
