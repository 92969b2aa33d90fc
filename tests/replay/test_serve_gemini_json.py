"""``serve`` as Gemini's ``generateContent`` asked for a JSON answer without a schema
(``generationConfig.responseMimeType: application/json``): answered where the run was
recorded asking for JSON (its model settings say so), refused with a 400 naming the field
where it was not; ``text/plain``, the default, answered either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gemini_server import GeminiServer
from helpers import ask_gemini

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._replay.serve import serve_run

KEY = "AIzaSyLEAKEDgemini0123456789abcdefghijk"
MODEL = "gemini-2.5-flash"
HELLO = "Hi there!"
JSON = "application/json"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A store of two runs of one sample (no calls) recorded with ``google_genai``: ``text``
    with the default settings, ``json`` with ``response_mime_type`` application/json."""
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    folder = tmp_path_factory.mktemp("gemini-json")
    dataset = folder / "dataset.json"
    dataset.write_text(json.dumps([{"id": "greet", "input": HELLO, "target": []}]))
    benchmark = BENCHMARKS["tool-call"]
    tools = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
    with pytest.MonkeyPatch.context() as patch, GeminiServer({HELLO: []}) as server:
        patch.setenv("GOOGLE_API_KEY", "fake-recording-key-7f3a9c")
        inputs = load_inputs(None, dataset, tools, benchmark.system_prompt)
        for run_id, options in [("text", {}), ("json", {"response_mime_type": JSON})]:
            model = parse_model(f"google_genai:{MODEL}", {"base_url": server.url, **options})
            summary = record_run(inputs, model, Store(folder / "traces"), run_id=run_id,
                                 options=RecordOptions(workers=1))  # fmt: skip
            assert summary.ok == 1
        asked = [r.body.get("generationConfig", {}) for r in server.requests]
    assert [c.get("responseMimeType") for c in asked] == [None, JSON]
    return folder / "traces"


def ask(url: str, mime: str | None) -> str:
    """The text google-genai is answered for the sample's question, asking for ``mime``."""
    return ask_gemini(url, KEY, MODEL, HELLO, response_mime_type=mime)


def test_json_asked_of_a_run_recorded_without_it_gets_400_naming_the_field(root):
    """It was answered 200 with the recorded free text, the setting left out silently."""
    from google.genai import errors

    with serve_run(root, "text") as server:
        with pytest.raises(errors.ClientError) as caught:
            ask(server.url, JSON)
        assert ask(server.url, "text/plain") == "Done."
        assert ask(server.url, None) == "Done."
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
    assert str(caught.value.message).startswith(
        "generationConfig.responseMimeType 'application/json': not served (the recording's "
        "answers were not asked for JSON"
    )


def test_json_asked_of_a_run_recorded_asking_json_is_answered(root):
    """ChatGoogleGenerativeAI with the settings it was recorded with replays its run."""
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_google_genai import ChatGoogleGenerativeAI

    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    tools = load_inputs("tool-call").toolset.tools
    with serve_run(root, "json") as server:
        model = ChatGoogleGenerativeAI(model=MODEL, google_api_key=KEY, base_url=server.url,
                                       max_retries=0, response_mime_type=JSON)  # fmt: skip
        answer = model.bind_tools(tools).invoke([SystemMessage(prompt), HumanMessage(HELLO)])
        assert answer.text == "Done."
        assert (server.service.served, server.service.diverged) == (1, 0)


def test_another_media_type_gets_400_naming_it(root):
    """``text/x.enum`` asks an answer of a schema's values (and needs the schema)."""
    from google.genai import errors

    with serve_run(root, "json") as server, pytest.raises(errors.ClientError) as caught:
        ask(server.url, "text/x.enum")
    assert str(caught.value.message) == (
        "generationConfig.responseMimeType 'text/x.enum': text/plain or application/json"
    )
