"""``with_structured_output(schema, method="json_schema")`` under ``replay``: the recorded model
asks for the answer format the recorded run's model class asks for (OpenAI's
``response_format``, Anthropic's ``output_config``, Gemini's ``response_json_schema``),
answers with the recorded structured answer, and a replaying agent that asks for another
schema diverges where the schema differs; a schema given as JSON or as a pydantic model
(which ChatOpenAI binds as the class, and ``record`` keeps as the openai SDK sends it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import AnthropicServer
from gemini_server import GeminiServer
from helpers import record_greeting
from openai_server import OpenAIServer

from tcbreplay._replay.run import replay_run

HELLO = "Hi there!"
ANSWER = '{"reply": "Hello!"}'
# each provider: its model, its loopback server, the variable of its key, the place of the
# schema's reply type in a request's canonical params, and the format a request's body sent
# as the recording keeps it
PROVIDERS = {
    "openai": ("openai:gpt-4o-mini", OpenAIServer, "OPENAI_API_KEY",
               "params.response_format.json_schema.schema.properties.reply.type",
               lambda body: body["response_format"]),
    "anthropic": ("anthropic:claude-opus-4-7", AnthropicServer, "ANTHROPIC_API_KEY",
                  "params.response_format.schema.properties.reply.type",
                  lambda body: {"schema": body["output_config"]["format"]["schema"]}),
    "google_genai": ("google_genai:gemini-2.5-flash", GeminiServer, "GOOGLE_API_KEY",
                     "params.response_format.schema.properties.reply.type",
                     lambda body: {"schema":
                                   body.body["generationConfig"]["responseJsonSchema"]}),
}  # fmt: skip
# the agent asking for a reply of the schema, and the same asking for a number, by the form
# the schema is given in
AGENTS = {
    "json": ("answers_structured", "answers_a_number"),
    "pydantic": ("answers_in_a_model", "answers_a_number_model"),
}
CASES = [(provider, form) for provider in PROVIDERS for form in AGENTS]


@pytest.fixture(scope="module", params=CASES, ids=["-".join(case) for case in CASES])
def recorded(request, tmp_path_factory) -> tuple[Path, str, str, Any]:
    """A store holding ``structured``, a run of one sample recorded with the provider's
    LangChain model by the case's agent; the agent asking for a number; the path at which a
    request's schema gives the reply's type; and the format its request sent, as the
    recording keeps it."""
    provider, form = request.param
    model, server_class, key, place, sent = PROVIDERS[provider]
    agent, other = AGENTS[form]
    folder = tmp_path_factory.mktemp(f"structured-{provider}-{form}")
    with (
        pytest.MonkeyPatch.context() as patch,
        server_class({HELLO: []}, answers={HELLO: ANSWER}) as server,
    ):
        patch.setenv(key, "fake-recording-key-7f3a9c")
        root = record_greeting(folder, HELLO, model, server.url, "structured",
                               agent=f"replay_fixtures:{agent}")  # fmt: skip
        (body,) = server.requests
    return root, other, place, sent(body)


def test_record_keeps_the_format_as_sent(recorded):
    """ChatOpenAI's pydantic model was kept as ``{"unreadable": "Reply"}``, which no
    request's format equals."""
    import pyarrow.parquet as pq

    from tcbreplay._store.runs import Store

    root, _, _, sent = recorded
    run = Store(root).open_run("structured")
    (metadata,) = pq.read_table(run.samples_path, columns=["metadata"])["metadata"].to_pylist()
    assert json.loads(metadata)["tcbreplay_format"] == [sent]


def test_an_agent_using_json_schema_structured_output_replays_unchanged(recorded):
    """The recorded model bound the schema as a tool (LangChain's default for a model
    without a format of its own): the agent's request diverged at ``tools.Reply``."""
    root = recorded[0]
    summary = replay_run(root, "structured", new_run_id="again")
    assert summary.divergences == []
    assert (summary.ok, summary.turns_served, summary.live_calls) == (1, 1, 0)


def test_an_agent_asking_for_another_schema_diverges_where_it_differs(recorded):
    root, other, place, _ = recorded
    summary = replay_run(root, "structured", new_run_id="number",
                         agent=f"replay_fixtures:{other}")  # fmt: skip
    (divergence,) = summary.divergences
    assert (divergence["turn"], divergence["component"]) == (0, "params")
    assert divergence["path"] == place
    assert (divergence["recorded"], divergence["replayed"]) == ('"string"', '"integer"')
