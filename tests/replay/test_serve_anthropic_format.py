"""Anthropic's ``output_config`` on ``/v1/messages``: ``record`` keeps the schema each call of
an agent of one's own asked for in ``output_config.format`` (ChatAnthropic's
``with_structured_output(method="json_schema")``), and ``serve`` answers a request asking for
the same one, 409s one asking for another or none, and refuses with a 400 one asking a
recording that kept none, as Gemini's schema and OpenAI's ``response_format`` are compared;
another field of ``output_config`` (``effort``) is served only as the recording's model
settings have it. The requests are those ChatAnthropic sent, sent again by the anthropic SDK."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic_server import AnthropicServer
from helpers import record_greeting
from replay_fixtures import REPLY_SCHEMA, claude_provider_strategy

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._replay.serve import serve_run

HELLO = "Hi there!"
ANSWER = '{"reply": "Hello!"}'
MODEL = "claude-opus-4-7"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A store holding ``schema``, a run of one sample recorded with ChatAnthropic (its
    ``reasoning_effort`` high) by ``replay_fixtures:asks_claude_a_schema``; ``plain``, one
    recorded by the built-in agent (no schema, no effort); ``strategy``, one recorded by
    ``replay_fixtures:claude_provider_strategy`` (LangChain's create_agent); ``model_class``,
    one recorded by ``replay_fixtures:claude_given_a_model_class``; and the body of each
    one's request."""
    folder = tmp_path_factory.mktemp("anthropic-format")
    bodies = {}
    for run_id, agent, options in [
        ("schema", "replay_fixtures:asks_claude_a_schema", {"reasoning_effort": "high"}),
        ("plain", None, {}),
        ("strategy", "replay_fixtures:claude_provider_strategy", {}),
        ("model_class", "replay_fixtures:claude_given_a_model_class", {}),
    ]:
        with (
            pytest.MonkeyPatch.context() as patch,
            AnthropicServer({HELLO: []}, answers={HELLO: ANSWER}) as server,
        ):
            patch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-recording-7f3a9c")
            record_greeting(folder, HELLO, f"anthropic:{MODEL}", server.url, run_id,
                            agent=agent, **options)  # fmt: skip
            (bodies[run_id],) = server.requests
    return folder / "traces", bodies


def answer(url: str, body: dict[str, Any]) -> str | tuple[int, str]:
    """The text the anthropic SDK is answered for ``body``, or the status and message of
    its error."""
    client = anthropic.Anthropic(
        base_url=url, api_key="sk-ant-serve-test", max_retries=0, timeout=60
    )  # (a timeout given: no limit on max_tokens)
    try:
        return client.messages.create(**body).content[0].text
    except anthropic.APIStatusError as exc:
        return exc.status_code, str(exc.body["error"]["message"])


def test_record_keeps_the_schema_of_output_config_format(recorded):
    """The store kept no call's format: ChatAnthropic's output_config was lost."""
    from tcbreplay._store.runs import Store

    root, bodies = recorded
    sent = bodies["schema"]["output_config"]
    assert (sent["format"]["type"], sent["effort"]) == ("json_schema", "high")
    assert sent["format"]["schema"]["properties"] == REPLY_SCHEMA["properties"]
    run = Store(root).open_run("schema")
    import pyarrow.parquet as pq

    (metadata,) = pq.read_table(run.samples_path, columns=["metadata"])["metadata"].to_pylist()
    assert json.loads(metadata) == {"tcbreplay_format": [{"schema": sent["format"]["schema"]}]}


def test_the_recorded_schema_is_answered_and_another_or_none_gets_409(recorded):
    """``output_config`` was not read: every request was answered the recorded JSON, one
    asking another schema or none too."""
    root, bodies = recorded
    body = bodies["schema"]
    other = copy.deepcopy(body)
    other["output_config"]["format"]["schema"]["properties"]["reply"]["type"] = "integer"
    none = copy.deepcopy(body)
    del none["output_config"]["format"]
    with serve_run(root, "schema") as server:
        assert answer(server.url, body) == ANSWER
        changed = answer(server.url, other)
        left_out = answer(server.url, none)
    assert changed == (409, "no recorded turn answers this request: turn 0: params at "
                       "output_config.format.schema.properties.reply.type: "
                       '"string" -> "integer" (nearest: sample greet, trial 0, turn 0)'
                       )  # fmt: skip
    assert left_out[0] == 409
    assert 'params at params.response_format: {"schema": ' in left_out[1]


def test_a_schema_asked_of_a_recording_that_asked_none_gets_400(recorded):
    """It was answered the recorded text, the schema dropped."""
    root, bodies = recorded
    body = {**bodies["plain"], "output_config": bodies["schema"]["output_config"]}
    body["output_config"] = {"format": body["output_config"]["format"]}
    with serve_run(root, "plain") as server:
        assert answer(server.url, body) == (400, (
            "output_config.format.schema: an answer of a schema is not served (a recording's "
            "answer was not made to it: none of its requests asked for one)"
        ))  # fmt: skip


@pytest.mark.parametrize(
    ("run_id", "effort", "said"),
    [
        ("plain", "high", "output_config.effort 'high': not served (the recording's model "
         "settings have no output_config.effort: its answers were not made at it); leave it "
         "out"),
        ("schema", "low", "output_config.effort 'low': not served (the recording's answers "
         "were made at effort 'high', as its model settings say); leave it out"),
    ],
)  # fmt: skip
def test_an_effort_the_recordings_settings_do_not_have_gets_400(recorded, run_id, effort, said):
    """It was answered as though none was asked; the recorded one is answered."""
    root, bodies = recorded
    body = copy.deepcopy(bodies[run_id])
    body.setdefault("output_config", {})["effort"] = effort
    with serve_run(root, run_id) as server:
        assert answer(server.url, body) == (400, said)
        if run_id == "schema":  # (the recorded effort)
            assert answer(server.url, bodies[run_id]) == ANSWER


def test_a_malformed_output_config_gets_400_naming_the_field(recorded):
    """Each was answered the recorded JSON, output_config not read."""
    root, bodies = recorded
    said = []
    with serve_run(root, "schema") as server:
        for config in [
            "json",
            {"format": {"type": "json_object"}},
            {"format": {"type": "json_schema"}},
            {"format": {"type": "json_schema", "schema": REPLY_SCHEMA, "name": "Reply"}},
        ]:
            said.append(answer(server.url, {**bodies["schema"], "output_config": config}))
    assert said == [
        (400, "output_config: an object ({effort, format}) is required"),
        (400, "output_config.format.type 'json_object': json_schema (a format object "
              "{type, schema})"),
        (400, "output_config.format.schema: a JSON schema object is required"),
        (400, "output_config.format.name: not served (a format is its type and schema)"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("run_id", "effort", "diverges"),
    [("schema", "high", False), ("schema", "low", True), ("plain", "high", True)],
)
def test_the_recorded_model_compares_an_effort_a_call_gives(recorded, run_id, effort, diverges):
    """``replay``'s model answered a call of another effort than the recording's, or of one
    where it had none: ``output_config.effort`` was not read."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from tcbreplay._replay.model import RecordedChatModel
    from tcbreplay.errors import DivergenceError

    root, bodies = recorded
    config = {**bodies[run_id].get("output_config", {}), "effort": effort}
    model = RecordedChatModel.from_run(run_id, root)
    bound = model.bind_tools(load_inputs("tool-call").toolset.tools)
    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    messages = [SystemMessage(prompt), HumanMessage(HELLO)]
    if not diverges:
        assert bound.invoke(messages, output_config=config).text == ANSWER
        return
    with pytest.raises(DivergenceError) as caught:
        bound.invoke(messages, output_config=config)
    assert f'params at params.output_config: (nothing) -> {{"effort": "{effort}"}}' in str(
        caught.value
    )


def strategy_agent(model: Any, reply_type: str = "string") -> Any:
    """``replay_fixtures:claude_provider_strategy``'s agent of ``model``, its schema's
    ``reply`` of ``reply_type``."""
    schema = copy.deepcopy(REPLY_SCHEMA)
    schema["properties"]["reply"]["type"] = reply_type
    tools = load_inputs("tool-call").toolset.tools
    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    return claude_provider_strategy(model, tools, prompt, schema)


def test_a_provider_strategys_schema_sent_by_chatanthropic_is_answered(recorded):
    """The request ChatAnthropic sends for create_agent's ProviderStrategy (the schema in
    output_config.format, rewritten by the anthropic SDK) got a 409: the recording keeps the
    OpenAI response_format the call was given. Another schema still gets one, naming where
    it differs."""
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage

    root, bodies = recorded
    sent = bodies["strategy"]["output_config"]["format"]["schema"]
    assert sent["additionalProperties"] is False  # (transform_schema's; the call's has none)
    with serve_run(root, "strategy") as server:

        def model() -> ChatAnthropic:
            return ChatAnthropic(model=MODEL, base_url=server.url, api_key="sk-ant-serve-test",
                                 max_retries=0)  # fmt: skip

        state = strategy_agent(model()).invoke({"messages": [HumanMessage(HELLO)]})
        with pytest.raises(anthropic.APIStatusError) as caught:
            strategy_agent(model(), "integer").invoke({"messages": [HumanMessage(HELLO)]})
    assert state["structured_response"] == json.loads(ANSWER)
    assert caught.value.status_code == 409
    assert caught.value.body["error"]["message"] == (
        "no recorded turn answers this request: turn 0: params at "
        'output_config.format.schema.properties.reply.type: "string" -> "integer" '
        "(nearest: sample greet, trial 0, turn 0)"
    )


def test_replay_answers_a_provider_strategys_call_as_recorded(recorded):
    """``replay``'s model compares a call's response_format in the form ChatAnthropic sent
    it, as the recording's are (an agent of the recorded one's answered, another diverges)."""
    from langchain_core.messages import HumanMessage

    from tcbreplay._replay.model import RecordedChatModel
    from tcbreplay.errors import DivergenceError

    root, _ = recorded
    model = RecordedChatModel.from_run("strategy", root)
    state = strategy_agent(model).invoke({"messages": [HumanMessage(HELLO)]})
    assert state["structured_response"] == json.loads(ANSWER)
    with pytest.raises(DivergenceError) as caught:
        strategy_agent(model, "integer").invoke({"messages": [HumanMessage(HELLO)]})
    assert 'params.response_format.schema.properties.reply.type: "string" -> "integer"' in str(
        caught.value
    )


def test_a_model_class_given_to_chatanthropic_is_compared_as_it_sent_it(recorded):
    """A pydantic model given to ChatAnthropic as its ``response_format`` was kept as the
    openai SDK sends it (every field required, no default) and compared after the anthropic
    SDK rewrote that again: the request ChatAnthropic sent got a 409 at
    ``output_config.format.schema.properties.mood.description``. It is kept as its JSON
    schema and compared in the form ChatAnthropic sent it; replay answers the agent."""
    import pyarrow.parquet as pq

    from tcbreplay._replay.run import replay_run
    from tcbreplay._store.runs import Store

    root, bodies = recorded
    body = bodies["model_class"]
    sent = body["output_config"]["format"]["schema"]
    assert sent["required"] == ["reply"]  # (mood has a default: ChatAnthropic's is optional)
    with serve_run(root, "model_class") as server:
        assert answer(server.url, body) == ANSWER
    run = Store(root).open_run("model_class")
    (metadata,) = pq.read_table(run.samples_path, columns=["metadata"])["metadata"].to_pylist()
    (kept,) = json.loads(metadata)["tcbreplay_format"]
    assert kept["required"] == ["reply"]
    summary = replay_run(root, "model_class", new_run_id="again")
    assert summary.divergences == []
    assert (summary.ok, summary.turns_served, summary.live_calls) == (1, 1, 0)
