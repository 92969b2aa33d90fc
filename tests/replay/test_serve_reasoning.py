"""OpenAI's reasoning settings on ``serve``: the Responses API's ``reasoning`` (``effort``,
``summary``) and Chat Completions' ``reasoning_effort`` are served only as the recording's
model settings have them, as Anthropic's ``output_config.effort`` is
(``test_serve_anthropic_format.py``): another value, or one a recording made at none, is a
400 naming the field. The requests are the real openai SDK's, of the turn ChatOpenAI sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from helpers import record_greeting
from openai_server import OpenAIServer

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._replay.serve import serve_run

HELLO = "Hi there!"
ANSWER = "Hello!"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """A store holding ``effort``, a run of one sample recorded with ChatOpenAI at
    ``reasoning_effort`` high, and ``plain``, one recorded at none; and the body of the
    first one's request (the two are alike but for ``reasoning_effort``)."""
    folder = tmp_path_factory.mktemp("openai-reasoning")
    bodies = {}
    for run_id, options in [("effort", {"reasoning_effort": "high"}), ("plain", {})]:
        with (
            pytest.MonkeyPatch.context() as patch,
            OpenAIServer({HELLO: []}, answers={HELLO: ANSWER}) as server,
        ):
            patch.setenv("OPENAI_API_KEY", "sk-fake-recording-7f3a9c")
            record_greeting(folder, HELLO, "openai:o4-mini", server.url, run_id, **options)
            (bodies[run_id],) = server.requests
    assert bodies["effort"]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in bodies["plain"]
    return folder / "traces", bodies["effort"]


def said(call: Any) -> str | tuple[int, str]:
    """The text the openai SDK's ``call`` is answered, or the status and message of its
    error."""
    try:
        return call()
    except openai.APIStatusError as exc:
        return exc.status_code, str(exc.body.get("message") if isinstance(exc.body, dict)
                                    else exc.body)  # fmt: skip


def chat(url: str, body: dict[str, Any], **changed: Any) -> str | tuple[int, str]:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-serve-test", max_retries=0)
    sent = {k: v for k, v in body.items() if k != "reasoning_effort"}
    return said(lambda: client.chat.completions.create(**sent, **changed).choices[0]
                .message.content or "")  # fmt: skip


def responses(url: str, body: dict[str, Any], **changed: Any) -> str | tuple[int, str]:
    """The recorded Chat Completions turn ``body`` sent again as a Responses request."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-serve-test", max_retries=0)
    system, user = body["messages"]
    tools = [{"type": "function", **t["function"]} for t in body["tools"]]
    return said(lambda: client.responses.create(
        model=body["model"], instructions=system["content"], input=user["content"],
        tools=tools, **changed).output_text)  # fmt: skip


NOT_MADE = ("not served (the recording's model settings have no {}: its answers were not "
            "made at it); leave it out")  # fmt: skip
MADE_AT = ("not served (the recording's answers were made at effort 'high', as its model "
           "settings say); leave it out")  # fmt: skip


@pytest.mark.parametrize(
    ("run_id", "changed", "expected"),
    [
        ("plain", {}, ANSWER),
        ("plain", {"reasoning": {"effort": "high"}},
         (400, "reasoning.effort 'high': " + NOT_MADE.format("reasoning.effort"))),
        ("effort", {"reasoning": {"effort": "high"}}, ANSWER),
        ("effort", {}, ANSWER),
        ("effort", {"reasoning": {"effort": "low"}}, (400, f"reasoning.effort 'low': {MADE_AT}")),
        ("effort", {"reasoning": {"effort": "high", "summary": "auto"}},
         (400, "reasoning.summary 'auto': " + NOT_MADE.format("reasoning.summary"))),
    ],
)  # fmt: skip
def test_responses_reasoning_is_served_only_as_recorded(recorded, run_id, changed, expected):
    """``reasoning`` was dropped where the recording's settings had no reasoning_effort:
    the recorded answer, made at none, was given as though made at the effort asked."""
    root, body = recorded
    with serve_run(root, run_id) as server:
        assert responses(server.url, body, **changed) == expected


@pytest.mark.parametrize(
    ("run_id", "changed", "expected"),
    [
        ("plain", {}, ANSWER),
        ("plain", {"reasoning_effort": "high"},
         (400, "reasoning_effort 'high': " + NOT_MADE.format("reasoning_effort"))),
        ("effort", {"reasoning_effort": "high"}, ANSWER),
        ("effort", {"reasoning_effort": "low"}, (400, f"reasoning_effort 'low': {MADE_AT}")),
        ("effort", {"reasoning_effort": 5},
         (400, "reasoning_effort 5: a text such as low, medium or high")),
    ],
)  # fmt: skip
def test_chat_reasoning_effort_is_served_only_as_recorded(recorded, run_id, changed, expected):
    """Chat Completions' ``reasoning_effort`` was dropped where the recording had none."""
    root, body = recorded
    with serve_run(root, run_id) as server:
        assert chat(server.url, body, **changed) == expected


@pytest.mark.parametrize(
    ("run_id", "given", "diverges"),
    [
        ("effort", {"reasoning": {"effort": "high"}}, False),
        ("effort", {"reasoning": {"effort": "low"}}, True),
        ("effort", {"reasoning": {"effort": "high", "summary": "auto"}}, True),
        ("plain", {"reasoning": {"effort": "high"}}, True),
        ("plain", {"reasoning_effort": "high"}, True),
    ],
)  # fmt: skip
def test_the_recorded_model_compares_the_reasoning_a_call_gives(recorded, run_id, given,
                                                                diverges):  # fmt: skip
    """``replay``'s model answered a call giving ChatOpenAI's ``reasoning`` as though it
    gave none."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from tcbreplay._replay.model import RecordedChatModel
    from tcbreplay.errors import DivergenceError

    model = RecordedChatModel.from_run(run_id, recorded[0])
    bound = model.bind_tools(load_inputs("tool-call").toolset.tools)
    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    messages = [SystemMessage(prompt), HumanMessage(HELLO)]
    if not diverges:
        assert bound.invoke(messages, **given).text == ANSWER
        return
    with pytest.raises(DivergenceError) as caught:
        bound.invoke(messages, **given)
    assert "params at params.reasoning" in str(caught.value)
