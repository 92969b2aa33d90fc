"""``serve`` as Gemini's ``generateContent``: a run recorded with the default model
(``google_genai``, langchain-google-genai against the loopback :mod:`gemini_server`) served
back to the same stack (ChatGoogleGenerativeAI in a LangChain agent) and to the google-genai
SDK in a loop of its own, streamed and not; a changed request gets its 409 with a path into
``contents``; a malformed one a 4xx in Google's error shape; and the key is never said back."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from gemini_server import GeminiServer
from helpers import cli

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._replay.serve import serve_run

PROMPT = BENCHMARKS["tool-call"].system_prompt.read_text()
KEY = "AIzaSyLEAKEDgemini0123456789abcdefghijk"
TOOLS_SOURCE = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
INPUTS = load_inputs("tool-call")
TOOLS = {t.name: t for t in INPUTS.toolset.tools}
ITEMS = {"name": "list_items", "args": {}}
# id, input, the scripted model's turns (each a list of calls)
CASES = [
    ("mul", "What is 2 times 3?", [[("multiply_numbers", {"a": 3, "b": 2})]]),
    ("par", "Show me the price list, and what is 2 plus 3?",
     [[("list_items", {}), ("add_numbers", {"a": 3, "b": 2})]]),
    ("seq", "What do 2 pens cost, plus a bottle?",
     [[("list_items", {})], [("multiply_numbers", {"a": 2, "b": 1.5})]]),
    ("greet", "Hi there!", []),
]  # fmt: skip
MODEL = "gemini-2.5-flash"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict[str, list[tuple[str, dict]]]]:
    """A store holding the run ``gemini``, recorded with ``google_genai:gemini-2.5-flash``
    (the default model) against the loopback Gemini server; and each sample's calls."""
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    folder = tmp_path_factory.mktemp("gemini")
    dataset = folder / "dataset.json"
    dataset.write_text(json.dumps([{"id": sid, "input": text, "target": []}
                                   for sid, text, _ in CASES]))  # fmt: skip
    script = {text: turns for _, text, turns in CASES}
    with pytest.MonkeyPatch.context() as patch, GeminiServer(script) as server:
        patch.setenv("GOOGLE_API_KEY", "fake-recording-key-7f3a9c")
        inputs = load_inputs(None, dataset, TOOLS_SOURCE, BENCHMARKS["tool-call"].system_prompt)
        model = parse_model(f"google_genai:{MODEL}", {"base_url": server.url})
        summary = record_run(inputs, model, Store(folder / "traces"), run_id="gemini",
                             options=RecordOptions(workers=2))  # fmt: skip
    assert summary.ok == len(CASES)
    calls = {sid: [(n, a) for turn in turns for n, a in turn] for sid, _, turns in CASES}
    return folder / "traces", calls


@pytest.fixture(scope="module")
def server(recorded):
    with serve_run(recorded[0], "gemini") as running:
        yield running


def run_tool(name: str, args: dict) -> Any:
    out = TOOLS[name].invoke(args)
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


def question(sample_id: str) -> str:
    return next(text for sid, text, _ in CASES if sid == sample_id)


# ---------------------------------------------------------------- the stack it was recorded on


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "streamed"])
def test_chat_google_generative_ai_in_an_agent_replays_the_default_models_run(recorded, streaming):
    """The default model's recordings could not be served to the stack that made them:
    ``POST /v1/models/gemini-2.5-flash:generateContent`` got a 404."""
    from langchain.agents import create_agent
    from langchain_google_genai import ChatGoogleGenerativeAI

    root, calls = recorded
    with serve_run(root, "gemini") as server:
        model = ChatGoogleGenerativeAI(model=MODEL, google_api_key=KEY, base_url=server.url,
                                       max_retries=0, streaming=streaming)  # fmt: skip
        agent = create_agent(model, INPUTS.toolset.tools, system_prompt=PROMPT)
        for sample_id, text, _ in CASES:
            state = agent.invoke({"messages": [{"role": "user", "content": text}]})
            made = [(c["name"], c["args"]) for m in state["messages"]
                    for c in getattr(m, "tool_calls", None) or []]  # fmt: skip
            assert made == calls[sample_id], sample_id
            assert state["messages"][-1].text == "Done."
            assert state["messages"][-1].usage_metadata["input_tokens"] > 0
        assert (server.service.served, server.service.diverged) == (
            sum(len(c[2]) + 1 for c in CASES), 0)  # fmt: skip


def genai_client(url: str) -> Any:
    from google import genai

    return genai.Client(api_key=KEY, http_options={"base_url": url})


def genai_config() -> Any:
    from google.genai import types
    from langchain_core.utils.function_calling import convert_to_openai_function

    declared = [types.FunctionDeclaration(name=f["name"], description=f["description"],
                                          parameters_json_schema=f["parameters"])
                for f in map(convert_to_openai_function, INPUTS.toolset.tools)]  # fmt: skip
    return types.GenerateContentConfig(
        system_instruction=PROMPT,
        tools=[types.Tool(function_declarations=declared)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        temperature=0.7,  # (ChatGoogleGenerativeAI's, recorded with the run)
    )


def genai_turn(url: str, contents: list[Any], stream: bool = False) -> Any:
    """One request of a google-genai conversation: its answer as a content."""
    from google.genai import types

    client = genai_client(url)
    if stream:
        chunks = list(client.models.generate_content_stream(model=MODEL, contents=contents,
                                                            config=genai_config()))  # fmt: skip
        parts = [p for chunk in chunks for p in chunk.candidates[0].content.parts]
        assert chunks[-1].candidates[0].finish_reason == "STOP"
        return types.Content(role="model", parts=parts)
    answer = client.models.generate_content(model=MODEL, contents=contents, config=genai_config())
    assert answer.usage_metadata.prompt_token_count > 0
    return answer.candidates[0].content


def results(content: Any, made: list[tuple] | None = None) -> Any:
    """The user content answering a model content's calls, the tools run."""
    from google.genai import types

    parts = []
    for part in content.parts:
        if part.function_call is not None:
            call = part.function_call
            if made is not None:
                made.append((call.name, dict(call.args or {})))
            output = json.loads(run_tool(call.name, dict(call.args or {})))
            parts.append(types.Part.from_function_response(name=call.name, response=output))
    return types.Content(role="user", parts=parts) if parts else None


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_the_google_genai_sdk_in_a_loop_gets_the_recorded_turns(recorded, stream):
    from google.genai import types

    root, calls = recorded
    with serve_run(root, "gemini") as server:
        for sample_id, text, _ in CASES:
            contents = [types.Content(role="user", parts=[types.Part.from_text(text=text)])]
            made: list[tuple] = []
            for _ in range(10):
                answer = genai_turn(server.url, contents, stream)
                contents.append(answer)
                answered = results(answer, made)
                if answered is None:
                    break
                contents.append(answered)
            assert made == calls[sample_id], sample_id
            assert contents[-1].parts[-1].text == "Done."
        assert server.service.diverged == 0


# ---------------------------------------------------------------- what a 409 and a 4xx say


def first_turn(url: str, sample_id: str) -> list[Any]:
    from google.genai import types

    contents = [types.Content(role="user", parts=[types.Part.from_text(text=question(sample_id))])]
    contents.append(genai_turn(url, contents))
    return contents


def test_a_changed_tool_output_gets_409_with_its_path_into_contents(server):
    from google.genai import errors, types

    contents = first_turn(server.url, "mul")
    changed = types.Part.from_function_response(name="multiply_numbers", response={"result": 7})
    with pytest.raises(errors.ClientError) as caught:
        genai_turn(server.url, [*contents, types.Content(role="user", parts=[changed])])
    error = caught.value.details["error"]
    assert (caught.value.code, error["status"]) == (409, "ABORTED")
    assert error["divergence"]["component"] == "tool_output"
    assert error["divergence"]["path"] == "contents[2].parts[0].functionResponse.response.result"
    assert error["nearest"] == {"sample_id": "mul", "trial": 0, "turn": 1}
    assert error["message"].startswith("no recorded turn answers this request: turn 1:")
    assert KEY not in json.dumps(caught.value.details)


def test_results_in_another_order_than_the_calls_get_409_naming_them(server):
    from google.genai import errors, types

    contents = first_turn(server.url, "par")
    (items, add) = [json.loads(run_tool(n, a)) for n, a in CASES[1][2][0]]
    backwards = [types.Part.from_function_response(name="add_numbers", response=add),
                 types.Part.from_function_response(name="list_items", response=items)]  # fmt: skip
    with pytest.raises(errors.ClientError) as caught:
        genai_turn(server.url, [*contents, types.Content(role="user", parts=backwards)])
    error = caught.value.details["error"]
    assert error["divergence"]["path"] == "contents[2].parts[0].functionResponse.name"
    assert ("tool results in another order than the calls of contents[1]: contents[2].parts[0] "
            "answers add_numbers where the recording's answered list_items; give the results "
            "in the calls' order") in error["message"]  # fmt: skip


def test_a_result_left_out_gets_409_at_its_place_in_contents(server):
    """The path said ``messages[3]`` (the canonical form's) for the second functionResponse
    part of ``contents[2]``, ``messages[2]`` where no results were sent; left out with
    contents after it, ``contents[3].call`` (the next content of the body)."""
    from google.genai import errors, types

    contents = first_turn(server.url, "par")
    (name, args) = CASES[1][2][0][0]
    one = types.Part.from_function_response(name=name, response=json.loads(run_tool(name, args)))
    went_on = [
        types.Content(role="user", parts=[one]),
        types.Content(role="model", parts=[types.Part.from_text(text="Done.")]),
        types.Content(role="user", parts=[types.Part.from_text(text="And 6 times 7?")]),
    ]
    said = []
    for sent in [[*contents, types.Content(role="user", parts=[one])], contents,
                 [*contents, *went_on]]:  # fmt: skip
        with pytest.raises(errors.ClientError) as caught:
            genai_turn(server.url, sent)
        said.append(caught.value.details["error"]["divergence"])
    assert [d["path"] for d in said] == ["contents[2].parts[1]", "contents[2]",
                                         "contents[2].parts[1]"]  # fmt: skip
    assert said[2]["replayed"] is None


def test_the_first_result_left_out_gets_409_naming_the_call_answered(server):
    """Only the second call's functionResponse sent: the 409 said
    ``contents[2].parts[0].functionResponse.name: 0 -> 1``, the calls' positions for values;
    it gives the names of the calls answered, or their ids where the client gave its calls
    ids and answered by them."""
    from google.genai import errors, types

    contents = first_turn(server.url, "par")
    (_, (name, args)) = CASES[1][2][0]
    output = json.loads(run_tool(name, args))
    by_name = types.Part.from_function_response(name=name, response=output)
    with_ids = types.Content(role="model", parts=[
        types.Part(function_call=p.function_call.model_copy(update={"id": f"fc{j}"}))
        for j, p in enumerate(contents[1].parts)
    ])  # fmt: skip
    by_id = types.Part(function_response=types.FunctionResponse(id="fc1", name=name,
                                                                response=output))  # fmt: skip
    said = []
    for sent in [[*contents, types.Content(role="user", parts=[by_name])],
                 [contents[0], with_ids, types.Content(role="user", parts=[by_id])]]:  # fmt: skip
        with pytest.raises(errors.ClientError) as caught:
            genai_turn(server.url, sent)
        said.append(caught.value.details["error"])
    assert [(e["divergence"]["path"], e["divergence"]["recorded"], e["divergence"]["replayed"])
            for e in said] == [
        ("contents[2].parts[0].functionResponse.name", '"list_items"', '"add_numbers"'),
        ("contents[2].parts[0].functionResponse.id", '"fc0"', '"fc1"'),
    ]  # fmt: skip
    assert ('messages at contents[2].parts[0].functionResponse.name: "list_items" -> '
            '"add_numbers"') in said[0]["message"]  # fmt: skip


def test_every_result_of_a_wave_left_out_gets_409_at_the_content_of_them(server):
    """Left out with contents after it, the whole wave's functionResponse parts were said
    at ``contents[2].call``, a field no content has; they are said where they would be
    (``contents[2]``, the content after the model's calls), in the second wave too."""
    from google.genai import errors, types

    def text(said: str, role: str = "user") -> Any:
        return types.Content(role=role, parts=[types.Part.from_text(text=said)])

    par = first_turn(server.url, "par")
    seq = first_turn(server.url, "seq")
    seq.append(results(seq[-1]))
    seq.append(genai_turn(server.url, seq))  # (the second wave's call)
    said = []
    for sent in [[*par, text("And 6 times 7?")],
                 [*par, text("Done.", "model"), text("And 6 times 7?")],
                 [*seq, text("Done.", "model"), text("And 6 times 7?")]]:  # fmt: skip
        with pytest.raises(errors.ClientError) as caught:
            genai_turn(server.url, sent)
        said.append(caught.value.details["error"])
    assert [(e["divergence"]["path"], e["divergence"]["replayed"]) for e in said] == [
        ("contents[2]", None), ("contents[2]", None), ("contents[4]", None)]  # fmt: skip
    assert "messages at contents[2]: 0 -> (nothing)" in said[0]["message"]


def post(server: Any, path: str, body: Any, headers: dict | None = None) -> tuple[int, str]:
    import http.client

    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("POST", path, data, {"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response.status, text


ASK = [{"role": "user", "parts": [{"text": "What is 2 times 3?"}]}]
GENERATE = f"/v1beta/models/{MODEL}:generateContent"


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        (GENERATE, b"{not json", 400, "the request body is not JSON"),
        (GENERATE, {"contents": []}, 400, "contents: a non-empty list of contents is required"),
        (GENERATE, {"contents": [{"role": "wizard", "parts": [{"text": "x"}]}]}, 400,
         "contents[0].role 'wizard': user or model"),
        (GENERATE, {"contents": [{"role": "user", "parts": [{"inlineData": {
            "mimeType": "image/png", "data": "AA=="}}]}]}, 400,
         "contents[0].parts[0]: a part of text, functionCall or functionResponse is required "
         "(inlineData is not served)"),
        (GENERATE, {"contents": [{"role": "user", "parts": [{"text": "x", "fileData": {
            "mimeType": "application/pdf", "fileUri": "gs://b/x.pdf"}}]}]}, 400,
         "contents[0].parts[0]: a part of text, functionCall or functionResponse is required "
         "(fileData is not served)"),
        (GENERATE, {"contents": [*ASK, {"role": "model", "parts": [{"functionCall": {
            "name": "f", "args": {}}, "codeExecutionResult": {"outcome": "OUTCOME_OK"}}]}]}, 400,
         "contents[1].parts[0]: a part of text, functionCall or functionResponse is required "
         "(codeExecutionResult is not served)"),
        (GENERATE, {"contents": [*ASK, {"role": "model", "parts": [{"functionCall": {
            "name": "f", "args": {}}}]}, {"role": "user", "parts": [{"functionResponse": {
                "name": "f", "response": {}, "parts": [{"inlineData": {}}]}}]}]}, 400,
         "contents[2].parts[0].functionResponse.parts: not served"),
        (GENERATE, {"contents": ASK, "systemInstruction": {"parts": [{"text": "x",
            "inlineData": {"mimeType": "image/png", "data": "AA=="}}]}}, 400,
         "systemInstruction.parts[0]: a text part is required (inlineData is not served)"),
        (GENERATE, {"contents": ASK, "cachedContent": "cachedContents/abc"}, 400,
         "cachedContent: not served"),
        (GENERATE, {"contents": ASK, "generationConfig": {"responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT"}}}, 400,
         "generationConfig.responseSchema: an answer of a schema is not served"),
        (GENERATE, {"contents": ASK, "tools": [{"functionDeclarations": [{"name": "f"}],
            "function_declarations": [{"name": "g"}]}]}, 400,
         "tools[0]: functionDeclarations and function_declarations are both given"),
        (GENERATE, {"contents": [*ASK, {"role": "model", "parts": [{"functionCall": {
            "name": "f", "args": [1]}}]}]}, 400,
         "contents[1].parts[0].functionCall.args: an object is required"),
        (GENERATE, {"contents": ASK, "tools": [{"googleSearch": {}}]}, 400,
         "tools[0]: function declarations only (googleSearch is not served)"),
        (GENERATE, {"contents": ASK, "tools": [{"functionDeclarations": [{"name": "f",
            "parameters": {"properties": [1]}}]}]}, 400,
         "tools[0].functionDeclarations[0].parameters: a JSON schema object is required"),
        (GENERATE, {"contents": ASK, "generationConfig": {"candidateCount": 2}}, 400,
         "generationConfig.candidateCount 2: a recording holds one answer a turn"),
        (GENERATE, {"contents": ASK, "generationConfig": {"temperature": 3}}, 400,
         "generationConfig.temperature 3: a number from 0 to 2"),
        (GENERATE, {"contents": ASK, "generationConfig": {"candidateCount": True}}, 400,
         "generationConfig.candidateCount True: a recording holds one answer a turn"),
        (GENERATE, {"contents": ASK, "generationConfig": {"candidateCount": 1.0}}, 400,
         "generationConfig.candidateCount 1.0: a recording holds one answer a turn"),
        (GENERATE, {"contents": ASK, "generationConfig": {"maxOutputTokens": -5}}, 400,
         "generationConfig.maxOutputTokens -5: a whole number of 1 or more"),
        (GENERATE, {"contents": ASK, "generationConfig": {"topK": "abc"}}, 400,
         "generationConfig.topK 'abc': a whole number of 1 or more"),
        (GENERATE, {"contents": ASK, "generationConfig": {"seed": 1.5}}, 400,
         "generationConfig.seed 1.5: a whole number"),
        (GENERATE, {"contents": ASK, "generationConfig": {"stop_sequences": "x"}}, 400,
         "generationConfig.stopSequences 'x': a list of strings"),
        (GENERATE, {"contents": ASK, "generationConfig": {"presencePenalty": "x"}}, 400,
         "generationConfig.presencePenalty 'x': a number"),
        (f"/v1beta/models/{MODEL}:streamGenerateContent", {"contents": ASK}, 400,
         "streamGenerateContent: ?alt=sse is required"),
        (f"/v1beta/models/{MODEL}:countTokens", {"contents": ASK}, 404,
         f"POST /v1beta/models/{MODEL}:countTokens?...: not served"),
    ],
)  # fmt: skip
def test_a_malformed_request_gets_4xx_in_googles_error_shape(server, path, body, status, says):
    code, text = post(server, path + f"?key={KEY}", body, {"x-goog-api-key": KEY})
    assert code == status
    assert text.count("\n") == 1
    error = json.loads(text)["error"]
    assert (error["code"], error["status"]) == (status, "INVALID_ARGUMENT" if status == 400
                                                else "NOT_FOUND")  # fmt: skip
    assert error["message"].startswith(says)
    assert KEY not in text


def test_the_key_is_never_said_back_nor_logged(recorded, capfd):
    """Neither the ``?key=`` of a request line nor its ``x-goog-api-key`` header is in any
    answer, or in the server's --verbose log."""
    from google.genai import errors, types

    with serve_run(recorded[0], "gemini", verbose=True) as server:
        with socket.create_connection((server.host, server.port), timeout=30) as s:
            s.sendall(f"POST {GENERATE}?key={KEY} HTTP/1.1\r\nx-goog-api-key : {KEY}\r\n"
                      "Content-Length: 2\r\nConnection: close\r\n\r\n{}".encode())  # fmt: skip
            said = b"".join(iter(lambda: s.recv(65536), b"")).decode()
        assert said.startswith("HTTP/1.1 400") and '"status":"INVALID_ARGUMENT"' in said
        code, text = post(server, f"{GENERATE}?alt=sse&key={KEY}", {"contents": "x"},
                          {"x-goog-api-key": KEY})  # fmt: skip
        assert code == 400
        asked = [types.Content(role="user", parts=[types.Part.from_text(text="Unrecorded")])]
        with pytest.raises(errors.ClientError) as caught:
            genai_turn(server.url, asked)
        assert caught.value.code == 409
    shown = said + text + str(caught.value) + json.dumps(caught.value.details)
    shown += capfd.readouterr().err
    assert f"POST {GENERATE}?..." in shown
    assert KEY not in shown and "LEAKED" not in shown


def test_serve_lists_the_gemini_path_and_its_log_keeps_the_conversation(recorded, tmp_path):
    import shutil

    root = tmp_path / "traces"
    shutil.copytree(recorded[0] / "gemini", root / "gemini")
    with serve_run(root, "gemini", log_run="served") as server:
        code, text = post(server, "/v1/embeddings", {"x": 1})
        assert code == 404 and ":generateContent" in json.loads(text)["error"]["message"]
        contents = first_turn(server.url, "mul")
        contents.append(results(contents[-1]))
        final = genai_turn(server.url, contents, stream=True)
        assert final.parts[0].text == "Done."
    rows = json.loads(cli("sql", "select sample_id, status from samples where run_id = 'served'",
                          "--format", "json", "--store", root).stdout)  # fmt: skip
    assert rows == [{"sample_id": "mul", "status": "ok"}]


def test_the_log_answers_the_served_calls_by_their_recorded_ids(recorded, tmp_path):
    """Gemini's calls carry no ids: the log kept the tool messages under ids the wire made
    (``call_1_0``) that no stored call had, so a replay of the log diverged at
    ``messages[2].call``, a server restarted on the log began a new trial, and an export
    held tool messages answering no call."""
    import shutil

    root = tmp_path / "traces"
    shutil.copytree(recorded[0] / "gemini", root / "gemini")
    with serve_run(root, "gemini", log_run="served") as server:
        contents = first_turn(server.url, "par")
        contents.append(results(contents[-1]))
        assert genai_turn(server.url, contents).parts[0].text == "Done."
        contents = first_turn(server.url, "seq")
        contents.append(results(contents[-1]))
        contents.append(genai_turn(server.url, contents))
        contents.append(results(contents[-1]))
    with serve_run(root, "gemini", log_run="served") as server:  # (taken up: same trial)
        assert genai_turn(server.url, contents).parts[0].text == "Done."
    rows = json.loads(cli("sql", "select sample_id, trial, status from samples where run_id = "
                          "'served' order by sample_id", "--format", "json",
                          "--store", root).stdout)  # fmt: skip
    assert rows == [{"sample_id": "par", "trial": 0, "status": "ok"},
                    {"sample_id": "seq", "trial": 0, "status": "ok"}]  # fmt: skip
    messages = json.loads(cli("sql", "select message from messages where run_id = 'served' "
                              "order by sample_id, position", "--format", "json",
                              "--store", root).stdout)  # fmt: skip
    made: set[str] = set()
    answered = []
    for row in messages:
        data = json.loads(row["message"])["data"]
        made |= {c["id"] for c in data.get("tool_calls") or []}
        if data.get("tool_call_id") is not None:
            answered.append(data["tool_call_id"])
    assert len(answered) == 4 and set(answered) <= made
    result = cli("replay", "served", "--recorded-tools", "--run-id", "again",
                 "--quiet", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output


def test_a_recorded_error_is_answered_once_with_a_status_gemini_clients_do_not_retry(tmp_path):
    """A recorded provider error was answered 502, which google-genai retries whatever the
    answer says: ChatGoogleGenerativeAI (its default retries) sent it 6 times, took half a
    minute, and the log held 6 error trials."""

    from gemini_server import Fault
    from langchain.agents import create_agent
    from langchain_google_genai import ChatGoogleGenerativeAI

    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    dataset = tmp_path / "dataset.json"
    samples = [{"id": sid, "input": text, "target": []} for sid, text, _ in CASES
               if sid in ("mul", "greet")]  # fmt: skip
    dataset.write_text(json.dumps(samples))
    with pytest.MonkeyPatch.context() as patch, GeminiServer({t: s for _, t, s in CASES}) as fake:
        fake.inject(Fault.error(400), input="Hi there!")
        patch.setenv("GOOGLE_API_KEY", "fake-recording-key-7f3a9c")
        inputs = load_inputs(None, dataset, TOOLS_SOURCE, BENCHMARKS["tool-call"].system_prompt)
        model = parse_model(f"google_genai:{MODEL}", {"base_url": fake.url})
        summary = record_run(inputs, model, Store(tmp_path / "traces"), run_id="failed",
                             options=RecordOptions(workers=1, retries=0))  # fmt: skip
    assert summary.errors == 1
    with serve_run(tmp_path / "traces", "failed", log_run="served") as server:
        model = ChatGoogleGenerativeAI(model=MODEL, google_api_key=KEY, base_url=server.url)
        agent = create_agent(model, INPUTS.toolset.tools, system_prompt=PROMPT)
        with pytest.raises(Exception, match="recording ended here in an error") as caught:
            agent.invoke({"messages": [{"role": "user", "content": "Hi there!"}]})
        assert server.service.served == 1  # (asked once: not retried)
    assert "501" in str(caught.value) and "UNAVAILABLE" in str(caught.value)
    query = "select sample_id, trial, status from samples where run_id = 'served'"
    rows = json.loads(cli("sql", query, "--format", "json", "--store", tmp_path / "traces").stdout)
    assert rows == [{"sample_id": "greet", "trial": 0, "status": "error"}]


@pytest.mark.parametrize(
    ("calling", "status"),
    [
        ({"mode": "ANY", "allowedFunctionNames": ["add_numbers"]}, 409),
        ({"mode": "ANY", "allowedFunctionNames": ["add_numbers", "list_items"]}, 409),
        ({"mode": "VALIDATED", "allowedFunctionNames": ["add_numbers"]}, 409),
        ({"mode": "ANY", "allowedFunctionNames": ["add_numbers", "multiply_numbers"]}, 200),
        ({"mode": "VALIDATED", "allowedFunctionNames": ["multiply_numbers", "list_items"]}, 200),
        ({"mode": "VALIDATED"}, 200),
    ],
    ids=["one-other", "two-others", "validated-other", "two-with-it", "validated-it", "free"],
)
def test_a_call_outside_the_allowed_function_names_gets_409(server, calling, status):
    """With two or more allowedFunctionNames, or VALIDATED, the names were not read: the
    recorded call of another function was answered 200."""
    from google.genai import types

    config = genai_config()
    config.tool_config = types.ToolConfig(
        function_calling_config=types.FunctionCallingConfig(
            mode=calling["mode"], allowed_function_names=calling.get("allowedFunctionNames")
        )
    )
    contents = [types.Content(role="user", parts=[types.Part.from_text(text=question("mul"))])]
    client = genai_client(server.url)
    if status == 200:
        answer = client.models.generate_content(model=MODEL, contents=contents, config=config)
        assert answer.function_calls[0].name == "multiply_numbers"
        return
    from google.genai import errors

    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents=contents, config=config)
    assert caught.value.code == 409
    assert caught.value.details["error"]["divergence"]["path"] == "params.tool_choice"


def test_gemini_paths_answer_in_googles_shape_and_get_lists_them(server):
    """``GET /v1beta/models`` got OpenAI's error shape, and ``GET /`` did not list the
    streamed path."""
    code, text = post(server, "/v1beta/models", b"")
    assert code == 404 and json.loads(text)["error"]["status"] == "NOT_FOUND"
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", "/v1beta/models")
    response = conn.getresponse()
    error = json.loads(response.read())["error"]
    assert (response.status, error["code"], error["status"]) == (404, 404, "NOT_FOUND")
    assert ":streamGenerateContent?alt=sse" in error["message"]
    conn.request("GET", "/")
    endpoints = json.loads(conn.getresponse().read())["endpoints"]
    conn.close()
    assert "/v1beta/models/{model}:streamGenerateContent?alt=sse" in endpoints


def test_get_lists_every_path_served_and_each_is_served(server):
    """``GET /`` left out the paths without /v1 (a base URL without it), Gemini's under /v1
    (google-genai's ``api_version="v1"``) and GET's own."""
    from tcbreplay._replay.routes import ROUTES, cancel_of, kept, route

    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", "/")
    endpoints = json.loads(conn.getresponse().read())["endpoints"]
    conn.close()
    for path in ("/chat/completions", "/messages", "/responses", "GET /", "GET /responses/{id}",
                 "/v1/models/{model}:generateContent",
                 "/v1/models/{model}:streamGenerateContent?alt=sse"):  # fmt: skip
        assert path in endpoints
    assert set(ROUTES) <= set(endpoints)
    for listed in endpoints:  # each is served: none listed that is not
        method, _, path = listed.rpartition(" ")
        path = path.split("?")[0].replace("{model}", "m").replace("{id}", "resp_1")
        if method in ("GET", "DELETE"):
            assert path in ("/", "/v1") or kept(path) is not None, listed
        elif path.endswith("/cancel"):
            assert cancel_of(path) is not None, listed
        else:
            assert route(path) is not None, listed


def test_a_404_lists_every_path_get_lists(server):
    """A 404 listed only the main paths (not those without /v1, Gemini's under /v1, nor GET
    /), where ``GET /`` lists every one: the two lists are one routing table's."""
    import openai

    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", "/")
    endpoints = json.loads(conn.getresponse().read())["endpoints"]
    conn.close()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model="m", input="x")
    said = caught.value.body["message"]
    assert said.startswith("POST /v1/embeddings: not served (POST /v1/chat/completions, ")
    listed = said.partition(": not served (")[2].removesuffix(")")
    by_method = {group.split(" ", 1)[0]: group.split(" ", 1)[1].split(", ")
                 for group in listed.split("; ")}  # fmt: skip
    assert sorted(f"{m} {p}" for m, paths in by_method.items() for p in paths) == sorted(
        e if " " in e else f"POST {e}" for e in endpoints
    )
    assert KEY not in said
