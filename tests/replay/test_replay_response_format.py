"""LangChain's ``create_agent(model, tools, response_format=schema)`` under ``replay``: its
AutoStrategy asks for the provider's answer format where the model's profile says it has one
(``structured_output``; Gemini's before 3 not beside tools, by the model's name), else binds
the schema as a tool. ``record`` keeps the profile in the manifest's ``model``, and the
recorded model reports it (and the model's name), so that the replaying agent asks as the
recording's did; a run recorded before has no profile, and replays as it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import AnthropicServer
from gemini_server import GeminiServer
from helpers import record_greeting
from openai_server import OpenAIServer

from tcbreplay._replay.run import replay_run
from tcbreplay._store.runs import Store

HELLO = "Hi there!"
BYE = "Goodbye!"
ANSWER = '{"reply": "Hello!"}'
# each provider: its model, its loopback server, the variable of its key, and the answer
# format its request sent (None: none, the schema bound as a tool)
PROVIDERS = {
    "openai": ("openai:gpt-4o-mini", OpenAIServer, "OPENAI_API_KEY",
               lambda body: body.get("response_format")),
    "anthropic": ("anthropic:claude-opus-4-7", AnthropicServer, "ANTHROPIC_API_KEY",
                  lambda body: body.get("output_config")),
    "google_genai": ("google_genai:gemini-3-flash-preview", GeminiServer, "GOOGLE_API_KEY",
                     lambda body: body.body["generationConfig"].get("responseJsonSchema")),
}  # fmt: skip
AGENTS = {"pydantic": "responds_in_a_model", "json": "responds_in_a_schema"}
CASES = [(provider, form) for provider in PROVIDERS for form in AGENTS]


def _tool_names(body: Any) -> list[str]:
    """The names of the tools a request of any of the three wires was sent."""
    body = getattr(body, "body", body)
    names = []
    for tool in body.get("tools") or []:
        names += [f["name"] for f in tool.get("functionDeclarations") or []]
        names += [tool.get("name") or (tool.get("function") or {}).get("name")]
    return [name for name in names if name]


@pytest.fixture(scope="module", params=CASES, ids=["-".join(case) for case in CASES])
def recorded(request, tmp_path_factory) -> tuple[Path, str]:
    """A store holding ``auto``, a run of one sample recorded with the provider's LangChain
    model by ``create_agent`` given a response format (a pydantic model, a JSON schema); the
    provider's model spec."""
    provider, form = request.param
    model, server_class, key, sent = PROVIDERS[provider]
    folder = tmp_path_factory.mktemp(f"auto-{provider}-{form}")
    with (
        pytest.MonkeyPatch.context() as patch,
        server_class({HELLO: []}, answers={HELLO: ANSWER}) as server,
    ):
        patch.setenv(key, "fake-recording-key-7f3a9c")
        root = record_greeting(folder, HELLO, model, server.url, "auto",
                               agent=f"replay_fixtures:{AGENTS[form]}")  # fmt: skip
        (body,) = server.requests
    # (the recording asked for the provider's format: the schema is no tool)
    assert sent(body) is not None and "Reply" not in _tool_names(body)
    return root, model


def _manifest(root: Path, run_id: str) -> dict[str, Any]:
    return json.loads((root / run_id / "manifest.json").read_text())


def test_record_keeps_the_model_profile(recorded):
    root, _ = recorded
    block = _manifest(root, "auto")["model"]
    assert block["profile"]["structured_output"] is True
    assert block["profile"]["tool_calling"] is True


def test_an_agent_given_a_response_format_replays_unchanged(recorded):
    """The recorded model had no profile: create_agent bound the schema as a tool, and the
    replay diverged at turn 0, ``tools.Reply``."""
    root, _ = recorded
    summary = replay_run(root, "auto", new_run_id="again")
    assert summary.divergences == []
    assert (summary.ok, summary.turns_served, summary.live_calls) == (1, 1, 0)


def test_the_recorded_model_reports_the_profile_and_name_it_was_recorded_with(recorded):
    from tcbreplay import RecordedChatModel

    root, model = recorded
    replayed = RecordedChatModel.from_run("auto", root)
    assert replayed.profile == _manifest(root, "auto")["model"]["profile"]
    assert replayed.model_name == model.partition(":")[2]
    bound = replayed.bind_tools([])  # (its copies too)
    assert (bound.profile, bound.model_name) == (replayed.profile, replayed.model_name)


def test_a_run_recorded_before_the_profile_was_kept_replays_as_before(recorded, tmp_path):
    """Without a profile, create_agent binds the schema as a tool, as it did: the replay says
    where the request differs from the recording's."""
    root, _ = recorded
    store = tmp_path / "traces"
    shutil.copytree(root / "auto", store / "auto")
    path = store / "auto" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["model"]["profile"]
    path.write_text(json.dumps(manifest))
    from tcbreplay import RecordedChatModel

    older = RecordedChatModel.from_run("auto", store)
    assert (older.profile, older.model_name) == (None, None)
    summary = replay_run(store, "auto", new_run_id="again")
    (divergence,) = summary.divergences
    assert (divergence["turn"], divergence["path"]) == (0, "tools.Reply")


def test_gemini_before_3_with_tools_is_replayed_with_the_schema_as_a_tool(tmp_path, monkeypatch):
    """Its profile says structured_output, but create_agent binds the schema as a tool beside
    tools for a Gemini model before 3, by its name: the recorded model reports the name."""
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-recording-key-7f3a9c")
    with GeminiServer({HELLO: [[("Reply", {"reply": "Hello!"})]]}) as server:
        root = record_greeting(tmp_path, HELLO, "google_genai:gemini-2.5-flash", server.url,
                               "auto", agent="replay_fixtures:responds_in_a_model")  # fmt: skip
        (body,) = server.requests
    assert "Reply" in _tool_names(body)
    assert _manifest(root, "auto")["model"]["profile"]["structured_output"] is True
    summary = replay_run(root, "auto", new_run_id="again")
    assert summary.divergences == []
    assert (summary.ok, summary.turns_served) == (1, 1)


def test_a_run_recorded_before_and_resumed_keeps_the_profile_and_replays(tmp_path, monkeypatch):
    """A resumed run's manifest takes the model block of the recording that resumes it (its
    fingerprint, which names the run, holds no profile): the run recorded before, now resumed,
    replays whole."""
    from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run

    monkeypatch.setenv("OPENAI_API_KEY", "fake-recording-key-7f3a9c")
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps([{"id": "greet", "input": HELLO, "target": []},
                                   {"id": "bye", "input": BYE, "target": []}]))  # fmt: skip
    tools = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
    inputs = load_inputs(None, dataset, tools, BENCHMARKS["tool-call"].system_prompt)
    store = Store(tmp_path / "traces")
    with OpenAIServer({HELLO: [], BYE: []}, answers={HELLO: ANSWER, BYE: ANSWER}) as server:
        choice = parse_model("openai:gpt-4o-mini", {"base_url": server.url})

        def record(limit: int | None):
            return record_run(inputs, choice, store, run_id="auto", limit=limit,
                              options=RecordOptions(workers=1),
                              agent="replay_fixtures:responds_in_a_model")  # fmt: skip

        assert record(1).ok == 1
        path = tmp_path / "traces" / "auto" / "manifest.json"
        manifest = json.loads(path.read_text())
        del manifest["model"]["profile"]  # (as a recording before kept it)
        path.write_text(json.dumps(manifest))
        resumed = record(None)
    assert (resumed.recorded, resumed.attempted, resumed.ok) == (2, 1, 2)
    assert _manifest(tmp_path / "traces", "auto")["model"]["profile"]["structured_output"]
    summary = replay_run(store, "auto", new_run_id="again")
    assert summary.divergences == []
    assert summary.ok == 2


def test_an_openai_run_of_an_agent_given_a_provider_strategy_replays_unchanged(
    tmp_path, monkeypatch
):
    """``ProviderStrategy(Schema)`` given as such, in a run recorded before the profile was
    kept too: ChatOpenAI sends create_agent's format rewritten (its description beside the
    schema, its title dropped), and the recorded model's request diverged at
    ``params.response_format.json_schema.description``."""
    monkeypatch.setenv("OPENAI_API_KEY", "fake-recording-key-7f3a9c")
    with OpenAIServer({HELLO: []}, answers={HELLO: ANSWER}) as server:
        root = record_greeting(tmp_path, HELLO, "openai:gpt-4o-mini", server.url, "auto",
                               agent="replay_fixtures:responds_by_provider_strategy")  # fmt: skip
    summary = replay_run(root, "auto", new_run_id="again")
    assert summary.divergences == []
    assert (summary.ok, summary.turns_served) == (1, 1)
    path = root / "auto" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["model"]["profile"]
    path.write_text(json.dumps(manifest))
    older = replay_run(root, "auto", new_run_id="older")
    assert older.divergences == []
    assert (older.ok, older.turns_served) == (1, 1)
