"""OpenAI's ``response_format`` where an agent of one's own gave one to its calls: ``record``
keeps the format each answered call asked for, and ``serve`` answers a Chat Completions
request asking for the same one and 409s one asking for another or none, as Gemini's schema
is compared (``test_serve_gemini_schema.py``)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from helpers import chat_answer as answer
from helpers import record_greeting
from openai_server import OpenAIServer
from replay_fixtures import REPLY_FORMAT

from tcbreplay._replay.serve import serve_run

HELLO = "Hi there!"
ANSWER = '{"reply": "Hello!"}'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict]:
    """A store holding ``format``, a run of one sample recorded with ChatOpenAI by
    ``replay_fixtures:asks_a_format``; and the body of its request, its tools as the run
    keeps them (a recording keeps the run's tools, not how a call bound them: the agent
    bound them strict)."""
    folder = tmp_path_factory.mktemp("openai-format")
    with (
        pytest.MonkeyPatch.context() as patch,
        OpenAIServer({HELLO: []}, answers={HELLO: ANSWER}) as server,
    ):
        patch.setenv("OPENAI_API_KEY", "sk-fake-recording-7f3a9c")
        record_greeting(folder, HELLO, "openai:gpt-4o-mini", server.url, "format",
                        agent="replay_fixtures:asks_a_format")  # fmt: skip
        (body,) = server.requests
    assert body["response_format"] == REPLY_FORMAT
    for tool in body["tools"]:
        tool["function"].pop("strict")
        tool["function"]["parameters"].pop("additionalProperties")
    return folder / "traces", body


def test_the_recorded_response_format_is_answered_and_another_or_none_diverges(recorded):
    """The recording kept no call's format: the request the agent sent diverged at
    ``params.response_format`` (recorded none), and one without it was answered."""
    root, body = recorded
    other = copy.deepcopy(body)
    other["response_format"]["json_schema"]["name"] = "Other"
    none = {k: v for k, v in body.items() if k != "response_format"}
    with serve_run(root, "format") as server:
        assert answer(server.url, body) == ANSWER
        changed = answer(server.url, other)
        left_out = answer(server.url, none)
    assert changed == (409, "no recorded turn answers this request: turn 0: params at "
                       'params.response_format.json_schema.name: "Reply" -> "Other" '
                       "(nearest: sample greet, trial 0, turn 0)")  # fmt: skip
    assert left_out[0] == 409
    assert 'params at params.response_format: {"json_schema": ' in left_out[1]
