"""``serve`` as OpenAI's Responses API (``POST /v1/responses``): the sim run of the built-in
benchmark answering the real openai SDK's ``client.responses`` (JSON, ``stream=True`` and its
stream helper) and ChatOpenAI with ``use_responses_api`` in a LangChain agent, with no
divergence; a changed tool output gets its 409 with a path into ``input``; a malformed
request a 4xx of one line; the key is never said back."""

from __future__ import annotations

import functools
import http.client
import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._replay.serve import serve_run

PARENT = "sim-seed7"
INPUTS = load_inputs("tool-call")
TOOLS = {t.name: t for t in INPUTS.toolset.tools}
SAMPLES = ["mul-7-by-8", "3-notebooks-2-pens", "backpack-plus-4-pens"]
KEY = "sk-proj-LEAKEDresponses0123456789abcdef"


@pytest.fixture(scope="module")
def root(sim_run, tmp_path_factory) -> Path:
    store, run_id = sim_run
    path = tmp_path_factory.mktemp("responses") / "traces"
    shutil.copytree(store.run_dir(run_id), path / run_id)
    shutil.rmtree(path / run_id / "scores", ignore_errors=True)
    return path


@pytest.fixture(scope="module")
def parent_calls(sim_run) -> dict[str, list[tuple]]:
    """Each sample's calls in trial 0 of the recording, in order."""
    from tcbreplay._replay.recording import RecordedRun

    store, run_id = sim_run
    recording = RecordedRun.load(store.open_run(run_id))
    out = {}
    for sample_id in SAMPLES:
        messages = [json.loads(text) for text in recording.sample((sample_id, 0)).texts]
        out[sample_id] = [(c["name"], c["args"]) for m in messages
                          for c in (m.get("data") or {}).get("tool_calls") or []]  # fmt: skip
    return out


@pytest.fixture(scope="module")
def server(root):
    with serve_run(root, PARENT) as running:
        yield running


def sample_input(sample_id: str) -> str:
    return next(s.input for s in INPUTS.dataset.samples if s.sample_id == sample_id)


def run_tool(name: str, args: dict) -> str:
    out = TOOLS[name].invoke(args)
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


@functools.cache
def tools() -> list[dict[str, Any]]:
    from langchain_core.utils.function_calling import convert_to_openai_function

    return [{"type": "function", **convert_to_openai_function(t)} for t in INPUTS.toolset.tools]


def client(url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)


def respond(url: str, items: list[Any], how: str = "json") -> Any:
    """One request of a conversation on ``client.responses``: its response."""
    kwargs = {"model": "gpt-x", "instructions": INPUTS.system_prompt, "input": items,
              "tools": tools()}  # fmt: skip
    if how == "helper":
        with client(url).responses.stream(**kwargs) as events:
            return events.get_final_response()
    if how == "events":
        events = list(client(url).responses.create(stream=True, **kwargs))
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        return events[-1].response
    return client(url).responses.create(**kwargs)


def loop(url: str, user: str, how: str, each_after: bool = False) -> list[tuple]:
    """An agent on the Responses API: ask, run the tools asked for, until it answers
    (``each_after``: each call sent back followed by its output, as OpenAI's guide does)."""
    items: list[Any] = [{"role": "user", "content": user}]
    made = []
    for _ in range(10):
        response = respond(url, items, how)
        assert response.status == "completed" and response.usage.input_tokens > 0
        calls = [item for item in response.output if item.type == "function_call"]
        if not each_after or not calls:
            items += [item.model_dump(exclude_none=True) for item in response.output]
        if not calls:
            assert response.output_text.startswith("The answer is")
            return made
        for call in calls:
            args = json.loads(call.arguments)
            made.append((call.name, args))
            if each_after:
                items.append(call.model_dump(exclude_none=True))
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": run_tool(call.name, args)})  # fmt: skip
    raise AssertionError("no final answer in 10 turns")


@pytest.mark.parametrize("how", ["json", "events", "helper"])
def test_the_openai_sdks_responses_in_a_loop_get_the_recorded_turns(root, parent_calls, how):
    """``POST /v1/responses`` got a 404."""
    with serve_run(root, PARENT) as server:
        for sample_id in SAMPLES:
            assert loop(server.url, sample_input(sample_id), how) == parent_calls[sample_id]
        assert server.service.diverged == 0


def test_parallel_calls_each_followed_by_its_output_get_the_recorded_turns(root, parent_calls):
    """OpenAI's guide sends back each call of an answer followed by its output
    (``[call0, out0, call1, out1]``): read as turns one after the other, it diverged
    (``input[3].arguments.a``, the second call taken for the next turn's). The samples hold
    answers of one call after another and one of two calls (3-notebooks-2-pens)."""
    with serve_run(root, PARENT) as server:
        for sample_id in SAMPLES:
            assert loop(server.url, sample_input(sample_id), "json", True) == parent_calls[
                sample_id]  # fmt: skip
        assert server.service.diverged == 0


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "streamed"])
def test_chat_openai_on_the_responses_api_in_an_agent_replays(root, parent_calls, streaming):
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    with serve_run(root, PARENT) as server:
        model = ChatOpenAI(model="gpt-x", base_url=server.url + "/v1", api_key=KEY,
                           max_retries=0, use_responses_api=True, streaming=streaming)  # fmt: skip
        agent = create_agent(model, INPUTS.toolset.tools, system_prompt=INPUTS.system_prompt)
        for sample_id in SAMPLES:
            state = agent.invoke({"messages": [{"role": "user",
                                                "content": sample_input(sample_id)}]})  # fmt: skip
            made = [(c["name"], c["args"]) for m in state["messages"]
                    for c in getattr(m, "tool_calls", None) or []]  # fmt: skip
            assert made == parent_calls[sample_id], sample_id
            assert state["messages"][-1].text.startswith("The answer is")
        assert server.service.diverged == 0


def test_a_changed_tool_output_gets_409_with_its_path_into_input(server):
    import openai

    items: list[Any] = [{"role": "user", "content": sample_input("mul-7-by-8")}]
    response = respond(server.url, items)
    (call,) = response.output
    items += [call.model_dump(exclude_none=True),
              {"type": "function_call_output", "call_id": call.call_id,
               "output": '{"result": 57}'}]  # fmt: skip
    with pytest.raises(openai.ConflictError) as caught:
        respond(server.url, items)
    said = caught.value.body
    assert said["type"] == "divergence"
    assert (said["divergence"]["component"], said["divergence"]["path"]) == (
        "tool_output", "input[2].output.result")  # fmt: skip
    assert said["nearest"] == {"sample_id": "mul-7-by-8", "trial": 0, "turn": 1}
    changed = [*items[:1], {**items[1], "arguments": '{"a": 8, "b": 6}'}, items[2]]
    with pytest.raises(openai.ConflictError) as caught:
        respond(server.url, changed)
    assert caught.value.body["divergence"]["path"] == "input[1].arguments.b"


def allowed(mode: str, *names: str) -> dict[str, Any]:
    return {"type": "allowed_tools", "mode": mode,
            "tools": [{"type": "function", "name": n} for n in names]}  # fmt: skip


@pytest.mark.parametrize(
    ("choice", "forbids"),
    [
        ("none", True),
        ({"type": "function", "name": "add_numbers"}, True),
        (allowed("required", "add_numbers"), True),
        (allowed("auto", "add_numbers", "list_items"), True),
        (allowed("required", "add_numbers", "multiply_numbers"), False),
        ({"type": "function", "name": "multiply_numbers"}, False),
    ],
)  # fmt: skip
def test_a_tool_choice_that_forbids_the_recorded_call_gets_409(server, choice, forbids):
    """An allowed_tools choice leaving out the recorded call was answered with it."""
    import openai

    items = [{"role": "user", "content": sample_input("mul-7-by-8")}]
    kwargs = {"model": "gpt-x", "instructions": INPUTS.system_prompt, "input": items,
              "tools": tools(), "tool_choice": choice}  # fmt: skip
    if not forbids:
        (call,) = client(server.url).responses.create(**kwargs).output
        assert call.name == "multiply_numbers"
        return
    with pytest.raises(openai.ConflictError) as caught:
        client(server.url).responses.create(**kwargs)
    said = caught.value.body["divergence"]
    assert (said["component"], said["path"], said["recorded"]) == (
        "params", "params.tool_choice", '["multiply_numbers"]')  # fmt: skip


def post(server: Any, path: str, body: Any, headers: dict | None = None) -> tuple[int, str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("POST", path, data, {"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response.status, text


ASK = [{"role": "user", "content": "Multiply 7 by 8 for me."}]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "the request body is not JSON"),
        ({"model": "m"}, "input: a text or a non-empty list of input items is required"),
        ({"input": [{"role": "wizard", "content": "x"}]},
         "input[0].role 'wizard': user, assistant, system or developer"),
        ({"input": [*ASK, {"type": "computer_call", "call_id": "c"}]},
         "input[1].type 'computer_call': message, function_call or function_call_output"),
        ({"input": [*ASK, {"type": "item_reference", "id": "msg_1"}]},
         "input[1]: an item_reference names an item OpenAI keeps"),
        ({"input": [*ASK, {"type": "function_call", "name": "f", "arguments": "{}"}]},
         "input[1].call_id: a string is required"),
        ({"input": ASK, "previous_response_id": "resp_1"},
         "previous_response_id: a conversation kept by OpenAI is not served"),
        ({"input": ASK, "tools": [{"type": "web_search"}]},
         "tools[0]: function tools only ('web_search' is not served)"),
        ({"input": ASK, "tools": [{"type": "function", "name": "f", "parameters": [1]}]},
         "tools[0].parameters: a JSON schema object is required"),
        ({"input": ASK, "tool_choice": {"type": "function"}},
         "tool_choice.name: the name of the function to call is required"),
        ({"input": ASK, "tool_choice": {"type": "allowed_tools", "mode": "all", "tools": []}},
         "tool_choice.mode 'all': auto or required"),
        ({"input": ASK, "tool_choice": {"type": "allowed_tools", "mode": "auto"}},
         "tool_choice.tools: a list of the tools allowed is required"),
        ({"input": ASK, "max_tool_calls": 0}, "max_tool_calls 0: a whole number of 1 or more"),
        ({"input": ASK, "prompt": {"id": "pmpt_1", "version": "2"}},
         "prompt: a prompt template kept by OpenAI is not served"),
        ({"input": ASK, "n": 3}, "n 3: a recording holds one answer a turn"),
        ({"input": ASK, "reasoning": {"effort": 5}}, "reasoning.effort 5: a text such as low"),
        ({"input": ASK, "text": {"format": {"type": "yaml"}}},
         "text.format.type 'yaml': text, json_object or json_schema"),
        ({"input": ASK, "temperature": 3}, "temperature 3: a number from 0 to 2"),
        ({"input": ASK, "stream": "yes"}, "stream 'yes': true or false"),
        ({"input": ASK, "instructions": ["x"]}, "instructions: a string is required"),
        ({"input": ASK, "text": {"verbosity": "low"}}, "text.verbosity 'low': not served"),
        ({"input": ASK, "background": "yes"}, "background 'yes': true or false"),
    ],
)  # fmt: skip
def test_a_malformed_request_gets_4xx_and_one_line_of_json(server, body, says):
    code, text = post(server, f"/v1/responses?key={KEY}", body, {"Authorization": f"Bearer {KEY}"})
    assert code == 400
    assert text.count("\n") == 1
    error = json.loads(text)["error"]
    assert error["message"].startswith(says), error["message"]
    assert KEY not in text


@pytest.mark.parametrize("kind", ["json_schema", "json_object"])
def test_text_format_is_the_response_format_chat_completions_compares(kind):
    """``text.format`` was left out: a request asking for another format than the recorded
    one was answered. ChatOpenAI's bodies for one response_format, on either API, read to
    the same sampling setting (compared where the recording has it)."""
    from langchain_openai import ChatOpenAI

    from tcbreplay._replay.routes import WIRES

    schema = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"],
              "additionalProperties": False}  # fmt: skip
    wanted = {"type": kind}
    if kind == "json_schema":
        wanted["json_schema"] = {"name": "answer", "strict": True, "schema": schema}
    params = []
    for responses in (False, True):
        model = ChatOpenAI(model="gpt-x", api_key=KEY, use_responses_api=responses)
        body = model._get_request_payload([("user", "Hi")], response_format=wanted)
        assert ("text" in body) is responses
        params.append(WIRES["responses" if responses else "openai"].read(body).params)
    assert params[1] == params[0] == {"response_format": wanted}


def test_the_key_is_never_said_back_nor_logged(root, capfd):
    with serve_run(root, PARENT, verbose=True) as server:
        with socket.create_connection((server.host, server.port), timeout=30) as s:
            s.sendall(f"POST /v1/responses?key={KEY} HTTP/1.1\r\nAuthorization : Bearer {KEY}"
                      "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".encode())  # fmt: skip
            said = b"".join(iter(lambda: s.recv(65536), b"")).decode()
        assert said.startswith("HTTP/1.1 400")
        code, text = post(server, f"/v1/responses?key={KEY}", {"input": "Unrecorded"})
        assert code == 409
    shown = said + text + capfd.readouterr().err
    assert "POST /v1/responses?..." in shown
    assert KEY not in shown and "LEAKED" not in shown


def test_a_background_response_is_there_when_asked_for_again(server):
    """``background: true`` was answered finished, but ``GET /v1/responses/{id}``, which a
    client polls (or resumes the stream at), got a 404."""
    import openai

    kwargs = {"model": "gpt-x", "instructions": INPUTS.system_prompt, "tools": tools()}
    made = []
    for sample_id in SAMPLES[:2]:
        asked = [{"role": "user", "content": sample_input(sample_id)}]
        made.append(client(server.url).responses.create(input=asked, background=True, **kwargs))
    for response in made:
        assert response.background is True
        again = client(server.url).responses.retrieve(response.id)
        assert again.status == "completed" and again.background is True
        assert again.model_dump(exclude={"created_at"}) == response.model_dump(
            exclude={"created_at"})  # fmt: skip
        events = list(client(server.url).responses.retrieve(response.id, stream=True))
        assert events[-1].type == "response.completed"
        assert events[-1].response.output == response.output
        rest = list(client(server.url).responses.retrieve(response.id, stream=True,
                                                          starting_after=2))  # fmt: skip
        assert [e.sequence_number for e in rest] == [e.sequence_number for e in events[3:]]
    # (each conversation's response its own, though the recorded ids may be alike)
    assert made[0].id != made[1].id and made[0].output != made[1].output
    with pytest.raises(openai.NotFoundError, match="no response of that id"):
        client(server.url).responses.retrieve("resp_unknown")


def test_a_response_is_cancelled_as_finished_and_deleted_as_openai_does(server):
    """``POST /v1/responses/{id}/cancel`` got a 404 and ``DELETE /v1/responses/{id}`` a 405,
    though ``GET`` of the same id was served: a client that cancels a background response
    it gave up on, or deletes those it kept, got an error."""
    import openai

    kwargs = {"model": "gpt-x", "instructions": INPUTS.system_prompt, "tools": tools()}
    asked = [{"role": "user", "content": sample_input(SAMPLES[0])}]
    background = client(server.url).responses.create(input=asked, background=True, **kwargs)
    cancelled = client(server.url).responses.cancel(background.id)
    # (it was finished when answered: a cancel changes nothing, as OpenAI's of a finished one)
    assert cancelled.status == "completed" and cancelled.background is True
    assert cancelled.model_dump(exclude={"created_at"}) == background.model_dump(
        exclude={"created_at"})  # fmt: skip
    foreground = client(server.url).responses.create(input=asked, **kwargs)
    with pytest.raises(openai.BadRequestError, match="only a response made with background"):
        client(server.url).responses.cancel(foreground.id)
    assert client(server.url).responses.delete(background.id) is None
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("DELETE", f"/v1/responses/{foreground.id}")
    deleted = conn.getresponse()
    assert (deleted.status, json.loads(deleted.read())) == (
        200, {"id": foreground.id, "object": "response.deleted", "deleted": True})  # fmt: skip
    conn.request("PUT", f"/v1/responses/{foreground.id}")
    put = conn.getresponse()
    put.read()
    assert (put.status, put.getheader("Allow")) == (405, "GET, DELETE")
    conn.close()
    for response in (background, foreground):
        with pytest.raises(openai.NotFoundError, match="no response of that id"):
            client(server.url).responses.retrieve(response.id)
        with pytest.raises(openai.NotFoundError):
            client(server.url).responses.cancel(response.id)
        with pytest.raises(openai.NotFoundError):
            client(server.url).responses.delete(response.id)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory) -> Path:
    """A run whose sampling settings are known (recorded with langchain-google-genai at
    temperature 0.7) and hold no response_format."""
    import gemini_terms_tools

    cases = [("hi", "Say hi", [[("echo", {"text": "hi"})]])]
    folder = tmp_path_factory.mktemp("sampled")
    return gemini_terms_tools.record_cases(folder, cases, "gemini_terms_tools:ECHO", "r",
                                           "gemini-2.5-flash")  # fmt: skip


def test_text_format_against_a_recording_without_one_gets_409_at_params(sampled):
    """A request asking for a JSON answer was answered the recording's free one: the
    format was counted only where the recording had one."""
    import gemini_terms_tools
    import openai
    from langchain_core.utils.function_calling import convert_to_openai_function

    echo = [{"type": "function", **convert_to_openai_function(gemini_terms_tools.echo)}]
    kwargs = {"model": "gpt-x", "instructions": INPUTS.system_prompt, "input": "Say hi",
              "tools": echo, "temperature": 0.7}  # fmt: skip
    with serve_run(sampled, "r") as server:
        assert client(server.url).responses.create(**kwargs).output[0].name == "echo"
        with pytest.raises(openai.ConflictError) as caught:
            client(server.url).responses.create(text={"format": {"type": "json_object"}},
                                                **kwargs)  # fmt: skip
    said = caught.value.body["divergence"]
    assert (said["component"], said["path"]) == ("params", "params.response_format")
    assert (said["recorded"], json.loads(said["replayed"])) == (None, {"type": "json_object"})
