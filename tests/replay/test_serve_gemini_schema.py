"""A schema a Gemini request's answer must follow (``generationConfig.responseJsonSchema``,
``responseSchema``), where an agent of one's own bound one to its calls: ``record`` keeps the
schema each answered call asked for, and ``serve`` (and the recorded model of ``replay``)
answers a request asking for the same one, 409s one asking for another or none, and refuses
one of a run that does not say (recorded before runs kept them) with a 400, as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from gemini_server import GeminiServer
from helpers import ask_gemini, record_greeting
from replay_fixtures import REPLY_SCHEMA

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._replay.serve import serve_run

KEY = "AIzaSyLEAKEDgemini0123456789abcdefghijk"
MODEL = "gemini-2.5-flash"
HELLO = "Hi there!"
ANSWER = '{"reply": "Hello!"}'
JSON = "application/json"
OTHER = {**REPLY_SCHEMA, "properties": {"reply": {"type": "integer"}}}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A store holding ``schema``, a run of one sample recorded with ``google_genai`` by
    ``replay_fixtures:asks_a_schema`` (its calls ask for a JSON answer of REPLY_SCHEMA), and
    ``before``, its copy as a run recorded before runs kept schemas is (its manifest's
    ``agent`` without ``format_kept``); and the generationConfig of each request recorded."""
    folder = tmp_path_factory.mktemp("gemini-schema")
    with (
        pytest.MonkeyPatch.context() as patch,
        GeminiServer({HELLO: []}, answers={HELLO: ANSWER}) as server,
    ):
        patch.setenv("GOOGLE_API_KEY", "fake-recording-key-7f3a9c")
        record_greeting(folder, HELLO, f"google_genai:{MODEL}", server.url, "schema",
                        agent="replay_fixtures:asks_a_schema")  # fmt: skip
        asked = [r.body.get("generationConfig", {}) for r in server.requests]
    root = folder / "traces"
    shutil.copytree(root / "schema", root / "before")
    path = root / "before" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["agent"].pop("format_kept", None)  # (none before runs kept them)
    path.write_text(json.dumps({**manifest, "run_id": "before"}))
    return root, asked


def ask(url: str, **config: object) -> str:
    """The text google-genai is answered for the sample's question, with the run's tools
    and these settings (``response_json_schema``, ``response_schema``)."""
    return ask_gemini(url, KEY, MODEL, HELLO, **config)


def refused(url: str, **config: object) -> tuple[int, str]:
    """The HTTP status and message google-genai raises for a request of these settings."""
    from google.genai import errors

    with pytest.raises(errors.APIError) as caught:
        ask(url, **config)
    return caught.value.code, str(caught.value.message)


def test_record_keeps_the_schema_each_call_asked_for(recorded):
    """The store kept no more than the run's model settings: which schema a call asked for
    was lost."""
    from tcbreplay._store.runs import Store

    root, asked = recorded
    assert asked == [{"temperature": 0.7, "candidateCount": 1, "responseMimeType": JSON,
                      "responseJsonSchema": REPLY_SCHEMA}]  # fmt: skip
    run = Store(root).open_run("schema")
    assert run.manifest["agent"]["format_kept"] is True
    assert "response_format" not in json.dumps(run.manifest["model"])
    import pyarrow.parquet as pq

    (metadata,) = pq.read_table(run.samples_path, columns=["metadata"])["metadata"].to_pylist()
    assert json.loads(metadata) == {"tcbreplay_format": [{"schema": REPLY_SCHEMA}]}


def test_the_recorded_schema_is_answered(recorded):
    """It was refused with a 400 (``an answer of a schema is not served``)."""
    with serve_run(recorded[0], "schema") as server:
        assert ask(server.url, response_mime_type=JSON, response_json_schema=REPLY_SCHEMA) == ANSWER
        # Gemini's own form of the same schema (the SDK sends it as responseSchema)
        gemini_form = {"type": "OBJECT", "properties": {"reply": {"type": "STRING"}},
                       "required": ["reply"], "propertyOrdering": ["reply"]}  # fmt: skip
        assert ask(server.url, response_mime_type=JSON, response_schema=gemini_form) == ANSWER
        assert (server.service.served, server.service.diverged) == (2, 0)


def test_another_schema_gets_409_naming_the_field(recorded):
    """It was refused with a 400 whatever the schema, the recorded one too."""
    with serve_run(recorded[0], "schema") as server:
        code, said = refused(server.url, response_mime_type=JSON, response_json_schema=OTHER)
    assert code == 409
    assert said.startswith("no recorded turn answers this request: turn 0: params at "
                           "generationConfig.responseJsonSchema.properties.reply.type: "
                           '"string" -> "integer"')  # fmt: skip


def test_no_schema_where_the_recording_asked_one_gets_409(recorded):
    """It was answered 200 with the recorded JSON, the schema the call asked for not known."""
    with serve_run(recorded[0], "schema") as server:
        code, said = refused(server.url)
    assert code == 409
    assert said.startswith("no recorded turn answers this request: turn 0: params at "
                           'params.response_format: {"schema": ')  # fmt: skip


def test_a_schema_asked_of_a_run_from_before_gets_400_as_before(recorded):
    """A run recorded before runs kept schemas does not say which its calls asked for."""
    with serve_run(recorded[0], "before") as server:
        code, said = refused(server.url, response_mime_type=JSON,
                             response_json_schema=REPLY_SCHEMA)  # fmt: skip
        assert ask(server.url) == ANSWER  # (as before: no schema asked, none compared)
    assert code == 400
    assert said == (
        "generationConfig.responseJsonSchema: an answer of a schema is not served (a "
        "recording's answer was not made to it: its agent's run was recorded before runs "
        "kept which schema each request asked for)"
    )


def test_the_recorded_model_compares_the_schema_a_call_asks_for(recorded):
    """``replay``'s model answered a call asking for another schema, the schema left out."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from tcbreplay._replay.model import RecordedChatModel
    from tcbreplay.errors import DivergenceError

    model = RecordedChatModel.from_run("schema", recorded[0])
    bound = model.bind_tools(load_inputs("tool-call").toolset.tools)
    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    messages = [SystemMessage(prompt), HumanMessage(HELLO)]
    answer = bound.invoke(messages, response_mime_type=JSON, response_json_schema=REPLY_SCHEMA)
    assert answer.text == ANSWER
    with pytest.raises(DivergenceError) as caught:
        bound.invoke(messages, response_mime_type=JSON, response_json_schema=OTHER)
    assert "params.response_format.schema.properties.reply.type" in str(caught.value)
