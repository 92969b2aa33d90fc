"""Tool outputs a Gemini client sends alike (``{"output": "hi"}`` and ``"hi"`` both go as
``functionResponse.response`` ``{"output": "hi"}``) stand for the recorded message of the
conversation they are sent in: not another sample's (conversations interleaved), and not
another call's of the same tool in one sample."""

from __future__ import annotations

import json
from pathlib import Path

import gemini_terms_tools
import pytest
from helpers import cli

from tcbreplay._inputs.benchmarks import BENCHMARKS
from tcbreplay._replay.serve import serve_run

PROMPT = BENCHMARKS["tool-call"].system_prompt.read_text()
KEY = "AIzaSyLEAKEDgemini0123456789abcdefghijk"
MODEL = "gemini-2.5-flash"
CASES = [
    ("wrapped", "Echo hi wrapped", [[("echo", {"text": "hi", "wrap": True})]]),
    ("plain", "Echo hi plain", [[("echo", {"text": "hi"})]]),
    ("both", "Echo hi both ways",
     [[("echo", {"text": "hi"}), ("echo", {"text": "hi", "wrap": True})]]),
    ("twice", "Echo hi twice",
     [[("echo", {"text": "hi", "wrap": True})], [("echo", {"text": "hi"})]]),
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A store holding the run ``echo``, recorded with langchain-google-genai against the
    loopback Gemini server."""
    folder = tmp_path_factory.mktemp("echo")
    return gemini_terms_tools.record_cases(folder, CASES, "gemini_terms_tools:ECHO", "echo", MODEL)


def _agent(url: str):
    from langchain.agents import create_agent
    from langchain_google_genai import ChatGoogleGenerativeAI

    model = ChatGoogleGenerativeAI(model=MODEL, google_api_key=KEY, base_url=url, max_retries=0)
    return create_agent(model, gemini_terms_tools.ECHO, system_prompt=PROMPT)


def _start(text: str) -> list:
    from google.genai import types

    return [types.Content(role="user", parts=[types.Part.from_text(text=text)])]


def _step(url: str, contents: list) -> bool:
    """One request of a google-genai loop (so that loops can be interleaved), its answer and
    the tools' outputs added to ``contents``: whether the answer called tools."""
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=KEY, http_options={"base_url": url})
    config = types.GenerateContentConfig(
        system_instruction=PROMPT, temperature=0.7,
        tools=[gemini_terms_tools.echo_declaration()],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )  # fmt: skip
    answer = client.models.generate_content(model=MODEL, contents=contents, config=config)
    contents.append(answer.candidates[0].content)
    calls = answer.function_calls or []
    outputs = [gemini_terms_tools.echo.invoke(dict(c.args or {})) for c in calls]
    if calls:
        contents.append(types.Content(role="user", parts=[
            types.Part.from_function_response(
                name=c.name, response=out if isinstance(out, dict) else {"output": out})
            for c, out in zip(calls, outputs, strict=True)]))  # fmt: skip
    return bool(calls)


def test_interleaved_conversations_get_their_own_samples_outputs(recorded):
    """The output last learnt stood for every alike one: a conversation sending its tool's
    output after another sample's was answered got a 409 (or that sample's message)."""
    with serve_run(recorded, "echo") as server:
        conversations = [_start(text) for _, text, _ in CASES]
        while any([_step(server.url, contents) for contents in conversations if
                   contents[-1].role == "user"]):  # fmt: skip
            pass
        assert server.service.diverged == 0


def test_langchain_replays_alike_outputs_of_one_tool_in_one_sample(recorded):
    with serve_run(recorded, "echo") as server:
        agent = _agent(server.url)
        for _, text, _ in reversed(CASES):
            state = agent.invoke({"messages": [{"role": "user", "content": text}]})
            assert state["messages"][-1].text == "Done."
        assert server.service.diverged == 0


def test_the_log_of_interleaved_conversations_across_a_restart_replays(recorded, tmp_path):
    """The log of conversations interleaved (parallel calls of one tool, a restart in the
    middle) passes ``audit verify`` and replays with its recorded tools with no divergence."""
    import shutil

    root = tmp_path / "traces"
    shutil.copytree(recorded / "echo", root / "echo")
    conversations = [_start(text) for _, text, _ in CASES]
    with serve_run(root, "echo", log_run="served") as server:  # (two requests each)
        for _ in range(2):
            for contents in conversations:
                _step(server.url, contents)
    with serve_run(root, "echo", log_run="served") as server:  # (taken up: same trials)
        for contents in conversations:
            while contents[-1].role == "user":
                _step(server.url, contents)
        assert server.service.diverged == 0
    rows = json.loads(cli("sql", "select sample_id, trial, status from samples where run_id = "
                          "'served' order by sample_id", "--format", "json",
                          "--store", root).stdout)  # fmt: skip
    assert rows == [{"sample_id": sid, "trial": 0, "status": "ok"} for sid in
                    sorted(sid for sid, _, _ in CASES)]  # fmt: skip
    result = cli("audit", "verify", "served", "--store", root)
    assert result.exit_code == 0, result.output
    result = cli("replay", "served", "--recorded-tools", "--run-id", "again",
                 "--quiet", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(cli("sql", "select count(*) as n from divergences where run_id = 'again'",
                          "--format", "json", "--store", root).stdout)  # fmt: skip
    assert rows == [{"n": 0}]


def test_a_conversation_another_server_began_goes_on(recorded):
    """A conversation begun with one server (stopped, no log) and sent on to another: the
    new server had learnt no tool output yet, and gave ``{"output": "hi"}``'s sample a 409
    ``tool_output`` (a Chat Completions client goes on there)."""
    conversations = [_start(text) for _, text, _ in CASES]
    with serve_run(recorded, "echo") as server:
        assert all(_step(server.url, contents) for contents in conversations)
    with serve_run(recorded, "echo") as server:
        for contents in conversations:
            while _step(server.url, contents):
                pass
        assert server.service.diverged == 0


def echo(text: str, wrap: bool = False) -> str | dict:
    """Say the text back (in an object under "output" where asked)."""
    return {"output": text} if wrap else text


def test_google_genai_calling_the_functions_itself_replays(recorded):
    """google-genai given Python functions calls them itself and sends each value as
    ``{"result": value}``: every conversation got a 409 ``tool_output`` at its second turn."""
    from google import genai
    from google.genai import types

    config = types.GenerateContentConfig(system_instruction=PROMPT, tools=[echo],
                                         temperature=0.7)  # fmt: skip
    with serve_run(recorded, "echo") as server:
        client = genai.Client(api_key=KEY, http_options={"base_url": server.url})
        for _, text, _ in CASES:
            answer = client.models.generate_content(model=MODEL, contents=text, config=config)
            assert answer.text == "Done."
        assert server.service.diverged == 0
