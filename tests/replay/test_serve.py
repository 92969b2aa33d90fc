"""``serve`` (#29): a recorded run answering the real OpenAI and Anthropic SDK clients (streamed
and not), LangChain's ChatOpenAI inside a LangGraph agent, and the τ-bench sample replayed by
an OpenAI SDK loop; each trial its own conversation; 409 for a request that matches nothing;
4xx for malformed ones; and the log run, crash-safe.

The served run is the built-in benchmark recorded with ``sim:seed=7,error_rate=0.3``. The
clients run the benchmark's own tools, so an unchanged agent asks what the recording's agent
asked, turn after turn."""

from __future__ import annotations

import functools
import http.client
import json
import shutil
import signal
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers import cli, cli_process, journal_lines, wait_for

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._replay.serve import serve_run
from tcbreplay._store.runs import Store

PARENT = "sim-seed7"
INPUTS = load_inputs("tool-call")
TOOLS = {t.name: t for t in INPUTS.toolset.tools}
# a few samples of one, two and more tool calls (and one of the sim's wrong calls)
SAMPLES = ["mul-7-by-8", "3-notebooks-2-pens", "backpack-plus-4-pens"]


@pytest.fixture(scope="module")
def root(sim_run, tmp_path_factory) -> Path:
    """A store holding a copy of the sim run, which the tests serve."""
    store, run_id = sim_run
    path = tmp_path_factory.mktemp("serve") / "traces"
    shutil.copytree(store.run_dir(run_id), path / run_id)
    shutil.rmtree(path / run_id / "scores", ignore_errors=True)
    return path


@pytest.fixture(scope="module")
def server(root):
    with serve_run(root, PARENT) as running:
        yield running


def sql(root: Path, query: str) -> list[dict]:
    result = cli("sql", query, "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def run_calls(root: Path, run_id: str) -> dict[tuple[str, int], list[tuple]]:
    """Each sample and trial's tool calls: (name, arguments) in order."""
    rows = sql(root, "select sample_id, trial, name, args::varchar as args from tool_calls "
               f"where run_id = '{run_id}' order by sample_id, trial, call_index")  # fmt: skip
    out: dict[tuple[str, int], list[tuple]] = {}
    for r in rows:
        out.setdefault((r["sample_id"], r["trial"]), []).append((r["name"], json.loads(r["args"])))
    return out


@pytest.fixture(scope="module")
def parent_calls(root) -> dict[tuple[str, int], list[tuple]]:
    return run_calls(root, PARENT)


def sample_input(sample_id: str) -> str:
    return next(s.input for s in INPUTS.dataset.samples if s.sample_id == sample_id)


def run_tool(name: str, args: dict) -> str:
    """A tool's output as LangChain's tool node gives it to the model (JSON text)."""
    out = TOOLS[name].invoke(args)
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


# ---------------------------------------------------------------- the SDKs' own loops


def openai_tools() -> list[dict]:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return [convert_to_openai_tool(t) for t in INPUTS.toolset.tools]


@functools.cache
def openai_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url + "/v1", api_key="not-needed", max_retries=0)


@functools.cache
def anthropic_client(base_url: str) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=base_url, api_key="not-needed", max_retries=0)


def openai_loop(base_url: str, user: str, *, stream: bool = False) -> list[tuple]:
    """An agent on the OpenAI SDK: ask, run the tools asked for, until it answers; the tool
    calls it made."""
    client = openai_client(base_url)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INPUTS.system_prompt},
        {"role": "user", "content": user},
    ]
    made = []
    for _ in range(10):
        if stream:
            with client.chat.completions.stream(model="any", messages=messages,
                                                tools=openai_tools()) as events:  # fmt: skip
                message = events.get_final_completion().choices[0].message
        else:
            answer = client.chat.completions.create(model="any", messages=messages,
                                                    tools=openai_tools())  # fmt: skip
            message = answer.choices[0].message
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        if not message.tool_calls:
            return made
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            made.append((call.function.name, args))
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": run_tool(call.function.name, args)})  # fmt: skip
    raise AssertionError("no final answer in 10 turns")


def opening(sample_id: str) -> list[dict[str, Any]]:
    """A conversation's first request: the benchmark's prompt and the sample's question."""
    return [{"role": "system", "content": INPUTS.system_prompt},
            {"role": "user", "content": sample_input(sample_id)}]  # fmt: skip


def next_turn(url: str, messages: list[dict[str, Any]], made: list[tuple] | None = None) -> bool:
    """One request of a conversation on the OpenAI SDK: ``messages`` extended with the answer
    and its tools' results (each call made added to ``made``); whether it asked for tools."""
    answer = openai_client(url).chat.completions.create(
        model="any", messages=messages, tools=openai_tools()
    )
    message = answer.choices[0].message
    messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
    for call in message.tool_calls or []:
        args = json.loads(call.function.arguments)
        if made is not None:
            made.append((call.function.name, args))
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": run_tool(call.function.name, args)})  # fmt: skip
    return bool(message.tool_calls)


def anthropic_loop(base_url: str, user: str, *, stream: bool = False) -> list[tuple]:
    """The same agent on the Anthropic SDK."""
    client = anthropic_client(base_url)
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in openai_tools()]  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    made = []
    for _ in range(10):
        kwargs = {"model": "any", "max_tokens": 1024, "system": INPUTS.system_prompt,
                  "messages": messages, "tools": tools}  # fmt: skip
        if stream:
            with client.messages.stream(**kwargs) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        messages.append({"role": "assistant", "content": message.content})
        uses = [block for block in message.content if block.type == "tool_use"]
        if not uses:
            return made
        results = []
        for block in uses:
            made.append((block.name, block.input))
            results.append({"type": "tool_result", "tool_use_id": block.id,
                            "content": run_tool(block.name, block.input)})  # fmt: skip
        messages.append({"role": "user", "content": results})
    raise AssertionError("no final answer in 10 turns")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_the_openai_sdk_in_a_loop_gets_the_recorded_turns(parent_calls, server, stream):
    for sample_id in SAMPLES:
        made = openai_loop(server.url, sample_input(sample_id), stream=stream)
        assert made == parent_calls[(sample_id, 0)], sample_id


@pytest.mark.slow  # (about 3 s)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_the_anthropic_sdk_in_a_loop_gets_the_recorded_turns(parent_calls, server, stream):
    for sample_id in SAMPLES:
        made = anthropic_loop(server.url, sample_input(sample_id), stream=stream)
        assert made == parent_calls[(sample_id, 0)], sample_id


def test_a_streamed_answer_is_server_sent_events_as_each_api_sends_them(server):
    """What each SDK parses: OpenAI's data chunks ending in [DONE]; Anthropic's named events."""
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "tools": openai_tools(), "messages": [
                {"role": "system", "content": INPUTS.system_prompt},
                {"role": "user", "content": sample_input("mul-7-by-8")}]}  # fmt: skip
    status, headers, text = post(server, "/v1/chat/completions", body)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert (call["index"], call["function"]["name"]) == (0, "multiply_numbers")
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
    body = {"model": "m", "max_tokens": 64, "stream": True, "system": INPUTS.system_prompt,
            "messages": [{"role": "user", "content": sample_input("mul-7-by-8")}],
            "tools": [{"name": t["function"]["name"], "description": t["function"][
                "description"], "input_schema": t["function"]["parameters"]}
                for t in openai_tools()]}  # fmt: skip
    status, headers, text = post(server, "/v1/messages", body)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    names = [e.split("\n")[0] for e in text.split("\n\n") if e]
    assert names == ["event: message_start", "event: content_block_start",
                     "event: content_block_delta", "event: content_block_stop",
                     "event: message_delta", "event: message_stop"]  # fmt: skip
    # the whole call's usage on message_delta, where langchain-anthropic reads a stream's
    # (it read 0 input tokens)
    data = {e.split("\n")[0]: json.loads(e.split("\ndata: ")[1]) for e in text.split("\n\n") if e}
    start, delta = data["event: message_start"], data["event: message_delta"]
    assert delta["usage"]["input_tokens"] == start["message"]["usage"]["input_tokens"] > 0


def test_langchain_chat_openai_in_a_langgraph_agent_replays(parent_calls, server):
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    for streaming in (False, True):
        model = ChatOpenAI(model="any", base_url=server.url + "/v1", api_key="not-needed",
                           max_retries=0, streaming=streaming)  # fmt: skip
        agent = create_agent(model, INPUTS.toolset.tools, system_prompt=INPUTS.system_prompt)
        for sample_id in SAMPLES[:3]:
            state = agent.invoke({"messages": [{"role": "user",
                                                "content": sample_input(sample_id)}]})  # fmt: skip
            made = [(c["name"], c["args"]) for m in state["messages"]
                    for c in getattr(m, "tool_calls", None) or []]  # fmt: skip
            assert made == parent_calls[(sample_id, 0)], (streaming, sample_id)
            assert state["messages"][-1].content  # its final answer, as recorded


# ---------------------------------------------------------------- divergences


def test_a_huge_first_message_finds_its_nearest_by_its_head(server, monkeypatch):
    """The nearest samples were found by the edit distance of the whole first message to
    each sample's: a 60 MB one kept the server (which answers one request at a time) busy
    for 34 s. Their heads are weighed (fuzz.ratio's time grows with both lengths)."""
    import openai
    from rapidfuzz import process

    from tcbreplay._replay import nearest

    weighed: list[int] = []
    real = process.extract

    def extract(query, choices, **kwargs):
        weighed.extend([len(query), *(len(c) for c in choices)])
        return real(query, choices, **kwargs)

    monkeypatch.setattr(process, "extract", extract)
    text = "Multiply 7 by 8 for me. " + "And then some more. " * 200_000  # 4 MB
    with pytest.raises(openai.ConflictError) as caught:
        openai_client(server.url).chat.completions.create(model="m", tools=openai_tools(),
            messages=[{"role": "system", "content": INPUTS.system_prompt},
                      {"role": "user", "content": text}])  # fmt: skip
    assert caught.value.body["nearest"] == {"sample_id": "mul-7-by-8", "trial": 0, "turn": 0}
    assert weighed and max(weighed) <= nearest._NEAREST_CHARS


@pytest.mark.slow  # (about 2.6 s)
def test_a_request_that_matches_nothing_gets_409_naming_the_nearest(server):
    import anthropic
    import openai

    client = openai_client(server.url)
    with pytest.raises(openai.ConflictError) as caught:
        client.chat.completions.create(model="m", tools=openai_tools(), messages=[
            {"role": "system", "content": INPUTS.system_prompt},
            {"role": "user", "content": "Multiply 7 by 9 for me."}])  # fmt: skip
    body = caught.value.body
    assert body["type"] == "divergence"
    assert body["nearest"] == {"sample_id": "mul-7-by-8", "trial": 0, "turn": 0}
    assert body["divergence"]["path"] == "messages[1].content"  # the request's, system counted
    assert json.loads(body["divergence"]["replayed"]) == "Multiply 7 by 9 for me."
    assert "nearest: sample mul-7-by-8" in body["message"]
    other = anthropic_client(server.url)
    with pytest.raises(anthropic.ConflictError) as caught:
        other.messages.create(model="m", max_tokens=9, system="You are a bank.",
                              messages=[{"role": "user", "content": "Multiply 7 by 8 for me."}],
                              tools=[])  # fmt: skip
    error = caught.value.body["error"]
    assert (error["divergence"]["component"], error["nearest"]["sample_id"]) == (
        "system",
        "mul-7-by-8",
    )


def test_an_sdk_with_its_default_retries_is_told_not_to_ask_again(server):
    """Both SDKs retry a 409 twice by default: each divergence was answered three times (1.4 s)
    and a --log-run logged three trials of it."""
    import anthropic
    import openai

    def diverged() -> int:
        with urllib.request.urlopen(server.url + "/", timeout=10) as answer:
            return json.loads(answer.read())["diverged"]

    before = diverged()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="not-needed")
    with pytest.raises(openai.ConflictError):
        client.chat.completions.create(model="m", tools=openai_tools(), messages=[
            {"role": "user", "content": "Multiply 7 by 9 for me."}])  # fmt: skip
    other = anthropic.Anthropic(base_url=server.url, api_key="not-needed")
    with pytest.raises(anthropic.ConflictError):
        said = [{"role": "user", "content": "Multiply 7 by 8."}]
        other.messages.create(model="m", max_tokens=9, system="You are a bank.", messages=said)
    assert diverged() - before == 2


def test_a_request_that_forbids_the_recorded_calls_gets_409_on_tool_choice(server):
    """tool_choice is in no fingerprint: "none" was answered with the recorded tool call."""
    import anthropic
    import openai

    messages = [{"role": "system", "content": INPUTS.system_prompt},
                {"role": "user", "content": sample_input("mul-7-by-8")}]  # fmt: skip
    client = openai_client(server.url)
    answered = client.chat.completions.create(model="m", messages=messages, tools=openai_tools())
    assert answered.choices[0].message.tool_calls  # the recording calls a tool here
    with pytest.raises(openai.ConflictError) as caught:
        client.chat.completions.create(model="m", messages=messages, tools=openai_tools(),
                                       tool_choice="none")  # fmt: skip
    said = caught.value.body["divergence"]
    assert (said["component"], said["path"], said["replayed"]) == (
        "params", "params.tool_choice", '"none"')  # fmt: skip
    assert caught.value.body["nearest"]["sample_id"] == "mul-7-by-8"
    forced = {"type": "function", "function": {"name": "list_items"}}
    with pytest.raises(openai.ConflictError):
        client.chat.completions.create(model="m", messages=messages, tools=openai_tools(),
                                       tool_choice=forced)  # fmt: skip
    # (allowed_tools that leave the recorded call out was answered with it)
    for names, allowed in [(["add_numbers"], False), (["add_numbers", "multiply_numbers"], True)]:
        choice = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
            {"type": "function", "function": {"name": n}} for n in names]}}  # fmt: skip
        try:
            client.chat.completions.create(model="m", messages=messages, tools=openai_tools(),
                                           tool_choice=choice)  # fmt: skip
            assert allowed, names
        except openai.ConflictError as caught:
            assert not allowed, names
            assert caught.body["divergence"]["path"] == "params.tool_choice"
    other = anthropic_client(server.url)
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in openai_tools()]  # fmt: skip
    with pytest.raises(anthropic.ConflictError) as caught:
        other.messages.create(model="m", max_tokens=9, system=INPUTS.system_prompt, tools=tools,
                              messages=messages[1:], tool_choice={"type": "none"})  # fmt: skip
    assert caught.value.body["error"]["divergence"]["path"] == "params.tool_choice"


def test_a_changed_tool_output_diverges_on_tool_output(server):
    import openai

    client = openai_client(server.url)
    messages = [{"role": "system", "content": INPUTS.system_prompt},
                {"role": "user", "content": sample_input("mul-7-by-8")}]  # fmt: skip
    first = client.chat.completions.create(model="m", messages=messages, tools=openai_tools())
    call = first.choices[0].message.tool_calls[0]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"result": 57}'},
    ]
    with pytest.raises(openai.ConflictError) as caught:
        client.chat.completions.create(model="m", messages=messages, tools=openai_tools())
    divergence = caught.value.body["divergence"]
    assert (divergence["turn"], divergence["component"]) == (1, "tool_output")
    assert divergence["path"] == "messages[3].content.result"  # the client's messages[3]
    assert caught.value.body["nearest"]["turn"] == 1


def post(server, path: str, body: Any, headers: dict | None = None) -> tuple[int, dict, str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("POST", path, data, {"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, text


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/v1/chat/completions", b"{not json", 400, "not JSON"),
        ("/v1/chat/completions", b"[1, 2]", 400, "a JSON object"),
        ("/v1/chat/completions", {"model": "m"}, 400, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, 400,
         "role 'wizard'"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                  "tools": [{"type": "function"}]}, 400, "tools[0]"),
        ("/v1/messages", {"messages": [{"role": "user", "content": 7}]}, 400, "content"),
        ("/v1/messages", b"[" * 5000 + b"]" * 5000, 400, "not JSON"),
        ("/v1/embeddings", {"input": "x"}, 404, "not served"),
        # reached the code past the checks before, which failed with a 500 and a traceback
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": [
            {"type": "function", "function": {"name": "f", "parameters": "x"}}]}, 400,
         "tools[0].function.parameters: a JSON schema object"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"required": 5}}}]},
         400, "tools[0].function.parameters"),
        ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}],
                          "tools": [{"name": "f", "input_schema": ["x"]}]}, 400,
         "tools[0].input_schema"),
        ("/v1/messages", {"system": [1], "messages": [{"role": "user", "content": "hi"}]}, 400,
         "system must be a string or a list of text blocks"),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\ud800"}]}', 400,
         "half a surrogate pair"),
    ],
)  # fmt: skip
def test_a_malformed_request_gets_4xx_and_one_line_of_json(server, path, body, status, says):
    code, headers, text = post(server, path, body)
    assert code == status
    assert headers["content-type"] == "application/json"
    assert text.count("\n") == 1 and text.endswith("\n")
    error = json.loads(text)["error"]
    assert says in error["message"]


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
@pytest.mark.parametrize("kind", [{}, [], 5])
def test_a_content_part_whose_type_is_not_text_gets_4xx(server, path, kind):
    body = {"model": "m", "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": kind, "text": "x"}]}]}  # fmt: skip
    code, _, text = post(server, path, body)
    assert 400 <= code < 500, text  # was 500: TypeError: unhashable type
    assert "error" in json.loads(text)


@pytest.mark.parametrize(
    ("path", "extra", "said"),
    [
        ("/v1/chat/completions", {"stream": "yes"}, "stream 'yes': true or false"),
        ("/v1/chat/completions", {"tool_choice": 17}, "tool_choice 17: a text or an object"),
        ("/v1/chat/completions", {"n": 2}, "n 2: a recording holds one answer a turn"),
        ("/v1/messages", {"max_tokens": "lots"}, "max_tokens 'lots': a whole number"),
        (
            "/v1/messages",
            {"messages": [{"role": "system", "content": "x"}]},
            "messages[0].role 'system': user or assistant",
        ),
    ],
)
def test_settings_the_api_would_refuse_get_400(server, path, extra, said):
    """Each was answered 200 as if not given (one choice for n 2, a stream for "yes"); an
    Anthropic message of role system got a 409 for a divergence."""
    question = [{"role": "user", "content": sample_input("mul-7-by-8")}]
    body = {"model": "m", "max_tokens": 10, "messages": question, **extra}
    code, _, text = post(server, path, body)
    assert code == 400 and said in text, text


def test_broken_http_gets_4xx_json_and_the_server_goes_on(server):
    def raw(data: bytes) -> bytes:
        with socket.create_connection((server.host, server.port), timeout=30) as s:
            s.sendall(data)
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)

    bad_line = raw(b"NONSENSE\r\n\r\n")
    assert bad_line.startswith(b"HTTP/1.1 400") or bad_line.startswith(b"HTTP/1.0 400")
    assert b'"error"' in bad_line
    no_length = raw(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                    b"Connection: close\r\n\r\n0\r\n\r\n")  # fmt: skip
    assert no_length.startswith(b"HTTP/1.1 411")
    # in Anthropic's shape on its path (OpenAI's, before), naming the length given
    assert json.loads(no_length.split(b"\r\n\r\n", 1)[1])["type"] == "error"
    huge = raw(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n"
               b"Connection: close\r\n\r\n")  # fmt: skip
    assert huge.startswith(b"HTTP/1.1 413") and b"a request body of 999999999999 bytes" in huge
    assert json.loads(huge.split(b"\r\n\r\n", 1)[1])["type"] == "error"
    longer = raw(b"POST /v1/messages HTTP/1.1\r\nContent-Length: " + b"1" * 5000
                 + b"\r\nConnection: close\r\n\r\n")  # fmt: skip
    assert longer.startswith(b"HTTP/1.1 413")  # (int() takes at most 4,300 digits)
    zeros = raw(b"POST /v1/messages HTTP/1.1\r\nContent-Length: " + b"0" * 4300
                + b"2\r\nConnection: close\r\n\r\n{}")  # fmt: skip
    assert zeros.startswith(b"HTTP/1.1 400") and b"messages" in zeros  # the body read: 2 bytes
    superscript = raw("POST /v1/messages HTTP/1.1\r\nContent-Length: \u00b2\r\n"
                      "Connection: close\r\n\r\n{}".encode("latin-1"))  # fmt: skip
    assert superscript.startswith(b"HTTP/1.1 400") and b"not a length" in superscript
    bare_lf = raw(b"GET / HTTP/1.1\nHost: x\n\n")  # answered at once, not left waiting
    assert bare_lf.startswith(b"HTTP/1.1 400") and b"CRLF" in bare_lf
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", "/v1/chat/completions")
    refused = conn.getresponse()
    assert (refused.status, refused.getheader("Allow")) == (405, "POST")
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("HEAD", "/")
    assert conn.getresponse().status == 405
    # and it still answers
    assert openai_loop(server.url, sample_input("mul-7-by-8")) == [
        ("multiply_numbers", {"a": 8, "b": 7})
    ]


def test_a_connection_that_sends_nothing_is_closed(server, monkeypatch):
    """Connections that sent half a request and waited were held for ever: 20,000 of them
    took every file descriptor, and curl got an empty reply."""
    from tcbreplay._replay import server as server_module

    monkeypatch.setattr(server_module, "IDLE_SECONDS", 0.3)
    with socket.create_connection((server.host, server.port), timeout=10) as half:
        half.sendall(b"POST /v1/messages HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        answer = half.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408")  # in Anthropic's shape, on its path
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["type"] == "error"
        assert half.recv(1) == b""  # closed
    with socket.create_connection((server.host, server.port), timeout=10) as idle:
        idle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert idle.recv(65536).startswith(b"HTTP/1.1 200")
        assert idle.recv(1) == b""  # kept alive, then closed once idle
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 0)  # one more than it holds: 503
    with socket.create_connection((server.host, server.port), timeout=10) as extra:
        assert extra.recv(65536).startswith(b"HTTP/1.1 503")


def test_a_query_string_is_never_said_back_nor_logged(root, capfd):
    """A client may put its key in the URL: neither a reply nor the --verbose log shows it."""
    key = "sk-proj-QUERYSECRET0123456789"
    with serve_run(root, PARENT, verbose=True) as server:
        code, _, text = post(server, f"/v1/models?api_key={key}", {"x": 1})
        assert code == 404 and "/v1/models?...: not served" in text
        code, _, text = post(server, f"/v1/chat/completions?key={key}", {"messages": 1})
        assert code == 400
    err = capfd.readouterr().err
    assert "POST /v1/models?..." in err and "POST /v1/chat/completions?..." in err
    assert key not in err + text


def test_a_served_run_cannot_be_overwritten_meanwhile(root, tmp_path):
    """record --overwrite of the served run is refused while it is served (the server would
    go on answering from a recording no longer in the store), and done once it stops."""
    store = tmp_path / "traces"
    shutil.copytree(root / PARENT, store / PARENT)
    again = ["record", "--model", "sim:seed=5", "--run-id", PARENT, "--limit", 2, "--overwrite",
             "--quiet", "--store", store]  # fmt: skip
    with serve_run(store, PARENT):
        refused = cli(*again)
        assert refused.exit_code != 0
        assert (
            f"run {PARENT!r} is being read (scored, reported, audited, diffed, exported or "
            "served)" in refused.output
        )
        assert (store / PARENT / "messages.parquet").exists()
    assert cli(*again).exit_code == 0


def test_serve_listens_on_loopback_unless_told(root):
    server = serve_run(root, PARENT)
    try:
        assert server.host == "127.0.0.1"
    finally:
        server.close()


def test_a_stop_asked_before_serving_ends_it_at_once(root):
    """A SIGTERM or Ctrl-C that comes before the loop runs is not lost (serve would hang)."""
    import threading

    server = serve_run(root, PARENT)
    try:
        server.stop()
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        serving.join(20)
        assert not serving.is_alive()
    finally:
        server.close()


# ---------------------------------------------------------------- trials, and the log


def test_each_conversation_is_its_own_trial_and_the_log_keeps_them(tmp_path):
    """Three trials of each sample, which the sim answered differently: the first
    conversation of a sample gets trial 0's turns throughout, the next trial 1's, and so on
    (a server that answered from the first matching turn would give trial 0's to all)."""
    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:seed=5,error_rate=0.5", "--trials", 3, "--limit", 4,
                 "--run-id", "k", "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    recorded = run_calls(store.root, "k")
    ids = [s.sample_id for s in INPUTS.dataset.samples[:4]]
    with serve_run(store, "k", log_run="k-log") as server:
        for sample_id in ids:
            for trial in range(3):
                made = openai_loop(server.url, sample_input(sample_id), stream=trial == 1)
                assert made == recorded.get((sample_id, trial), []), (sample_id, trial)
    # the trials differ: the test would pass without them otherwise
    assert any(len({json.dumps(recorded.get((i, t))) for t in range(3)}) > 1 for i in ids)
    rows = sql(store.root, "select count(*) as n, count(distinct trial) as trials, "
               "sum(case when status = 'ok' then 1 else 0 end) as ok from samples "
               "where run_id = 'k-log'")  # fmt: skip
    assert rows == [{"n": 12, "trials": 3, "ok": 12}]
    assert run_calls(store.root, "k-log") == recorded
    verified = cli("audit", "verify", "k-log", "--store", store.root)
    assert verified.exit_code == 0, verified.output
    scored = cli("score", "k-log", "--gold-run", "k", "--format", "json", "--store", store.root)
    assert scored.exit_code == 0, scored.output


def test_the_log_run_holds_what_was_served_and_each_divergence(root):
    import openai

    with serve_run(root, PARENT, log_run="log") as server:
        assert openai_loop(server.url, sample_input("mul-7-by-8"))
        client = openai_client(server.url)
        with pytest.raises(openai.ConflictError):
            client.chat.completions.create(model="m", tools=openai_tools(), messages=[
                {"role": "system", "content": INPUTS.system_prompt},
                {"role": "user", "content": sample_input("mul-7-by-8") + " Now."}])  # fmt: skip
    manifest = json.loads((root / "log" / "manifest.json").read_text())
    assert manifest["source"] == "replay" and manifest["status"] == "partial"
    block = manifest["replay"]
    assert (
        block["parent_run_id"],
        block["served_by"],
        block["turns_served"],
        block["diverged_samples"],
        block["live_calls"],
    ) == (PARENT, "serve", 2, 1, 0)
    rows = sql(root, "select sample_id, trial, status from samples where run_id = 'log' "
               "order by trial")  # fmt: skip
    assert rows == [{"sample_id": "mul-7-by-8", "trial": 0, "status": "ok"},
                    {"sample_id": "mul-7-by-8", "trial": 1, "status": "diverged"}]  # fmt: skip
    divergences = sql(root, "select trial, turn, component, path from divergences "
                      "where run_id = 'log'")  # fmt: skip
    assert divergences == [{"trial": 1, "turn": 0, "component": "messages",
                            "path": "messages[0].content"}]  # fmt: skip
    assert cli("audit", "verify", "log", "--store", root).exit_code == 0


def test_a_divergence_stored_as_an_error_text_is_redacted(root, monkeypatch):
    """A client that sends a secret variable's value diverges; the sample's error text says
    where, with the value redacted, as every error text on its way into the store."""
    key = "sk-proj-ENVSECRET0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with serve_run(root, PARENT, log_run="log-secret") as server:
        said = sample_input("mul-7-by-8") + f" My key: {key}"
        body = {"model": "m", "tools": openai_tools(), "messages": [
            {"role": "system", "content": INPUTS.system_prompt},
            {"role": "user", "content": said}]}  # fmt: skip
        code, _, text = post(server, "/v1/chat/completions", body)
        assert code == 409, text
    rows = sql(root, "select status, error from samples where run_id = 'log-secret'")
    assert len(rows) == 1 and rows[0]["status"] == "diverged"
    assert "diverged at turn 0" in rows[0]["error"] and "[redacted]" in rows[0]["error"]
    assert key not in rows[0]["error"]


@pytest.mark.slow  # server processes, started three times
def test_a_killed_server_keeps_its_log_and_the_same_command_goes_on(root, tmp_path):
    command = ["serve", PARENT, "--port", "0", "--log-run", "crash", "--store", str(root)]

    def start() -> tuple[Any, str]:
        proc = cli_process(*command)
        line = proc.stderr.readline()  # "serving ... at http://127.0.0.1:PORT"
        assert " at http://" in line, line + proc.stderr.read()
        for _ in range(4):  # OpenAI, Anthropic, Gemini, logging to
            proc.stderr.readline()
        return proc, line.rsplit(" at ", 1)[1].strip()

    proc, url = start()
    try:
        openai_loop(url, sample_input("mul-7-by-8"))
        wait_for(lambda: journal_lines(root / "crash") == 2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (root / "crash" / "samples.parquet").exists()  # never folded: only the journal
    # score names the command that folds it (it named record --resume, which refuses a log)
    said = cli("score", "crash", "--store", root).output
    assert f"which `tcbreplay serve {PARENT} --log-run crash" in said, said
    # the same command again: the log goes on, and a stop (SIGTERM, as Ctrl-C) folds it
    for stop in (signal.SIGTERM, signal.SIGINT):
        proc, url = start()
        try:
            if stop == signal.SIGTERM:
                openai_loop(url, sample_input("add-17.25-8.5"))
        finally:
            proc.send_signal(stop)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "logged 2 conversations to run crash" in err
    rows = sql(root, "select sample_id, status from samples where run_id = 'crash' order by 1")
    assert rows == [{"sample_id": "add-17.25-8.5", "status": "ok"},
                    {"sample_id": "mul-7-by-8", "status": "ok"}]  # fmt: skip
    assert cli("audit", "verify", "crash", "--store", root).exit_code == 0


@pytest.mark.parametrize(
    "killed", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["stopped", "killed"]
)  # (3-4 s each: one in test-slow)
def test_a_conversation_across_a_restart_stays_one_trial(root, parent_calls, killed):
    """A server stopped (or killed: its journal alone left) in the middle of a conversation,
    and started again with the same --log-run: the rest of the conversation was logged as
    a trial of its own beside a stub of its first turns (tsa 0.875 where 1.0 was served)."""
    sample_id, trial = max(parent_calls, key=lambda k: (len(parent_calls[k]), k))
    assert trial == 0 and len(parent_calls[(sample_id, 0)]) >= 2  # several turns to split
    log = f"span-{killed}"
    messages = opening(sample_id)
    made = []

    def turn(url: str) -> bool:
        return next_turn(url, messages, made)

    with serve_run(root, PARENT, log_run=log) as first:
        assert turn(first.url)  # the first answer: calls, and more to come
        sent = list(messages)
        assert turn(first.url)  # the second
        if killed:  # what kill -9 leaves: the journal, no Parquet files, no final status
            shutil.copytree(root / log, root.parent / "left")
    if killed:
        shutil.rmtree(root / log)
        shutil.copytree(root.parent / "left", root / log)
        shutil.rmtree(root.parent / "left")
    with serve_run(root, PARENT, log_run=log) as again:
        # the client's retry of the second request, unanswered as the server went down
        openai_client(again.url).chat.completions.create(
            model="any", messages=sent, tools=openai_tools()
        )
        while turn(again.url):
            pass
    assert made == parent_calls[(sample_id, 0)]
    rows = sql(root, f"select sample_id, trial, status from samples where run_id = '{log}'")
    assert rows == [{"sample_id": sample_id, "trial": 0, "status": "ok"}]
    assert run_calls(root, log) == {(sample_id, 0): made}


@pytest.mark.slow  # (a few seconds under the suite's load: make test's budget)
def test_a_request_sent_again_stays_in_its_conversation(root, parent_calls):
    """A client's retry (the SDKs retry after a timeout or a dropped connection) of a
    request after the first answer began a trial of its own in the log: one conversation
    logged as two, and audit verify counted more turns served than it had."""
    sample_id, _ = max(parent_calls, key=lambda k: (len(parent_calls[k]), k))
    messages = opening(sample_id)
    made = []

    def turn(url: str) -> bool:
        return next_turn(url, messages, made)

    with serve_run(root, PARENT, log_run="retried") as server:
        assert turn(server.url)  # turn 0: calls
        sent = list(messages)
        more = turn(server.url)  # turn 1, then the same request again: a retry
        openai_client(server.url).chat.completions.create(
            model="any", messages=sent, tools=openai_tools()
        )
        while more:
            more = turn(server.url)
    assert made == parent_calls[(sample_id, 0)]
    rows = sql(root, "select trial, status, json_extract(metadata, '$.replay.served') as served "
                     "from samples where run_id = 'retried'")  # fmt: skip
    assert len(rows) == 1 and rows[0]["trial"] == 0 and rows[0]["status"] == "ok"
    turns = [pair[0] for pair in json.loads(rows[0]["served"])]
    assert turns == list(range(len(turns)))  # each turn once
    assert cli("audit", "verify", "retried", "--store", root).exit_code == 0


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_conversation_sent_again_with_a_changed_output_keeps_a_log_audit_verifies(root, api):
    """Turns 0 and 1 served, then the same conversation sent again with its tool output
    changed (a 409): the log held the 409'd request's messages but still said turn 1 was
    served, and audit verify failed (``served turn 1: parent's {...}, replay's None``)."""
    import openai

    client = openai_client
    log = f"resent-{api}"
    with serve_run(root, PARENT, log_run=log) as server:
        if api == "chat":
            messages = opening("mul-7-by-8")
            assert next_turn(server.url, messages)
            assert not next_turn(server.url, messages[:])  # turn 1 answered
            messages[3] = {**messages[3], "content": '{"result": 57}'}
            with pytest.raises(openai.ConflictError):
                client(server.url).chat.completions.create(model="m", messages=messages[:4],
                                                           tools=openai_tools())  # fmt: skip
        else:
            kwargs = {
                "model": "m",
                "instructions": INPUTS.system_prompt,
                "tools": [{"type": "function", **t["function"]} for t in openai_tools()],
            }
            items: list[Any] = [{"role": "user", "content": sample_input("mul-7-by-8")}]
            (call,) = client(server.url).responses.create(input=items, **kwargs).output
            items += [call.model_dump(exclude_none=True),
                      {"type": "function_call_output", "call_id": call.call_id,
                       "output": run_tool(call.name, json.loads(call.arguments))}]  # fmt: skip
            assert client(server.url).responses.create(input=items, **kwargs).output_text
            items[2] = {**items[2], "output": '{"result": 57}'}
            with pytest.raises(openai.ConflictError):
                client(server.url).responses.create(input=items, **kwargs)
    rows = sql(root, "select status, json_extract(metadata, '$.replay.served') as served "
                     f"from samples where run_id = '{log}'")  # fmt: skip
    assert [(r["status"], [p[0] for p in json.loads(r["served"])]) for r in rows] == [
        ("diverged", [0])]  # fmt: skip
    verified = cli("audit", "verify", log, "--store", root)
    assert verified.exit_code == 0, verified.output


@pytest.mark.slow  # (a few seconds under the suite's load: make test's budget)
def test_a_log_scored_against_its_parent_takes_the_trial_each_conversation_was_served(
    root, parent_calls
):
    """The log numbers its trials as conversations began; --gold-run PARENT paired them with
    the parent's trials by number: a conversation served whole from parent trial 0 as the
    log's trial 1 was scored against no calls (tp 0, exact false)."""
    sample_id, _ = max(parent_calls, key=lambda k: (len(parent_calls[k]), k))
    question = {"role": "user", "content": sample_input(sample_id)}
    brief = {"role": "system", "content": INPUTS.system_prompt + " Be brief."}
    messages: list[dict[str, Any]] = [{"role": "system", "content": INPUTS.system_prompt}, question]
    with serve_run(root, PARENT, log_run="by-trial") as server:
        client = openai_client(server.url)
        with pytest.raises(Exception, match="409"):  # another prompt: trial 0, diverged
            client.chat.completions.create(model="any", tools=openai_tools(),
                                           messages=[brief, question])  # fmt: skip
        while next_turn(server.url, messages):  # the recorded conversation, whole: trial 1
            pass
    scored = cli("score", "by-trial", "--gold-run", PARENT, "--store", root)
    assert scored.exit_code == 0 and "not in --gold-run" not in scored.output, scored.output
    rows = sql(root, "select trial, tp from scores_all where run_id = 'by-trial' and "
                     f"scoring = 'spec_gold-{PARENT}' order by trial")  # fmt: skip
    assert rows[1] == {"trial": 1, "tp": 1.0}


def test_a_turn_whose_recording_ended_in_an_error_gets_that_error(tmp_path):
    """A request exactly as recorded, where the recording ended in a provider's error, got
    a 409 'no recorded turn answers this request' with no nearest (replay calls it no
    change): it gets a 502 naming the sample and the recorded error."""
    import openai

    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=5,fault_rate=0.4", "--limit", 12, "--retries", 0,
               "--max-errors", "100%", "--run-id", "flt", "--store", store, "--quiet")  # fmt: skip
    assert made.exit_code == 0, made.output
    failed = sql(store, "select sample_id, error_type from samples where status = 'error'")
    assert failed
    with serve_run(store, "flt", log_run="flt-log") as server:
        for row in failed:
            messages = opening(row["sample_id"])
            with pytest.raises(openai.APIStatusError) as caught:
                while True:  # the recorded turns, then the one that failed
                    next_turn(server.url, messages)
            assert caught.value.status_code == 502
            said = str(caught.value)
            assert f"sample {row['sample_id']!r} (trial 0): its recording ended here" in said
            assert row["error_type"] in said
    # the log ends each such conversation in its recorded error, as replay ends a sample
    logged = sql(store, "select sample_id, status, error_type, error, "
                 "json_extract(metadata, '$.replay.recorded_error')::bool as recorded_error "
                 "from samples where run_id = 'flt-log' order by sample_id")  # fmt: skip
    recorded = sql(store, "select sample_id, error_type, error from samples where run_id = "
                   "'flt' and status = 'error' order by sample_id")  # fmt: skip
    assert logged == [{**r, "status": "error", "recorded_error": True} for r in recorded]


def test_a_changed_request_where_the_recording_failed_says_how_and_is_logged(tmp_path):
    """A request that differs from the one a recording failed at got a 409 measured against
    nothing ('messages: (nothing) -> [...]', nearest null) or against the last answered
    request ('messages[1]: (nothing) -> {assistant...}'), and its divergence was left out of
    the log run: it is said against the failed request (nearest: that sample and turn), and
    logged."""
    import openai

    store = tmp_path / "traces"
    # (8 workers: the first wave holds a sample answered, and the recording goes on)
    made = cli("record", "--model", "sim:seed=7,fault_rate=0.5", "--limit", 20, "--retries", 0,
               "--max-errors", "100%", "--workers", 8, "--processes", 1, "--run-id", "flt",
               "--store", store, "--quiet")  # fmt: skip
    assert made.exit_code == 0, made.output
    failed = [r["sample_id"] for r in sql(store, "select sample_id from samples where status "
                                          "= 'error' order by sample_id")]  # fmt: skip
    said: dict[str, tuple[int, int, dict]] = {}  # sample -> (turn, status, error body)
    where: dict[str, str] = {}
    with serve_run(store, "flt", log_run="flt-log") as server:
        for sample_id in failed:
            messages = opening(sample_id)
            with pytest.raises(openai.APIStatusError) as caught:
                while True:  # the recorded turns, up to the one that failed
                    next_turn(server.url, messages)
            assert caught.value.status_code == 502
            if messages[-1]["role"] == "tool":  # a tool answered otherwise
                messages[-1] = {**messages[-1], "content": '{"result": -1}'}
            else:  # another system prompt
                messages[0] = {**messages[0], "content": "Reply in French."}
            with pytest.raises(openai.APIStatusError) as caught:
                next_turn(server.url, messages)
            turn = sum(m["role"] == "assistant" for m in messages)
            said[sample_id] = (turn, caught.value.status_code, caught.value.body)
            # (the path of the tool message changed, in the request's body as sent)
            where[sample_id] = f"messages[{len(messages) - 1}]" if turn else "system"
    for sample_id, (turn, status, error) in said.items():
        assert status == 409, error
        assert error["nearest"] == {"sample_id": sample_id, "trial": 0, "turn": turn}
        divergence = error["divergence"]
        assert divergence["turn"] == turn
        assert divergence["component"] == ("tool_output" if turn else "system"), error
        assert divergence["path"].startswith(where[sample_id]), error
        assert divergence["recorded"] is not None
    assert {turn > 0 for turn, _, _ in said.values()} == {True, False}  # both kinds seen
    # each divergence is in the log run, the conversation diverged there
    logged = sql(store, "select sample_id, s.status, d.component from samples s join "
                 "divergences d using (run_id, sample_id, trial) where run_id = 'flt-log' "
                 "order by sample_id")  # fmt: skip
    assert logged == [
        {"sample_id": sid, "status": "diverged", "component": error["divergence"]["component"]}
        for sid, (_, _, error) in sorted(said.items())
    ]


def test_bad_input_exits_2(root, server):
    assert cli("serve", "nope", "--store", root).exit_code == 2
    taken = cli("serve", PARENT, "--port", server.port, "--store", root)
    assert taken.exit_code == 2
    assert f"--port {server.port}: cannot listen there" in taken.output
    assert "Hint: --port 0 takes a free port" in taken.output
    empty = cli("serve", PARENT, "--host", "", "--store", root)  # the OS: every interface
    assert empty.exit_code == 2 and "Error: --host '': give an address" in empty.output
    same = cli("serve", PARENT, "--log-run", PARENT, "--store", root)
    assert same.exit_code == 2 and "a run id of its own" in same.output
    shutil.copytree(root / PARENT, root / "not-a-log")
    taken = cli("serve", PARENT, "--log-run", "not-a-log", "--store", root)
    assert taken.exit_code == 2 and "no log of a server" in taken.output


def test_a_run_with_no_recorded_answer_is_served_with_a_warning(root, tmp_path, monkeypatch):
    """A replay whose samples all diverged at their first request (a new prompt) holds no
    answer: served, it started as any run and answered every request with a 409."""
    from tcbreplay._replay.server import ReplayServer

    store = tmp_path / "traces"
    shutil.copytree(root / PARENT, store / PARENT)
    (tmp_path / "prompt.txt").write_text("Another prompt.\n")
    made = cli("replay", PARENT, "--run-id", "new-prompt", "--system-prompt",
               tmp_path / "prompt.txt", "--allow-divergence", "--quiet",
               "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output

    def stopped(self: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ReplayServer, "serve_forever", stopped)
    served = cli("serve", "new-prompt", "--port", 0, "--store", store)
    assert served.exit_code == 0, served.output
    assert ("Warning: run new-prompt holds no recorded model answer, so every request gets "
            f"409; its parent holds the recording: tcbreplay serve {PARENT} --store {store}"
            ) in served.output  # fmt: skip
    recorded = cli("serve", PARENT, "--port", 0, "--store", store)
    assert recorded.exit_code == 0 and "Warning" not in recorded.output, recorded.output


def test_a_server_stopped_after_one_request_says_it_in_the_singular(root, monkeypatch):
    """It said "served 1 requests, 0 diverged"."""
    from tcbreplay._replay.server import ReplayServer

    serve = ReplayServer.serve_forever

    def one_request(self: Any) -> None:  # served in a thread: one request, then Ctrl-C
        self.serve_forever = functools.partial(serve, self)
        self.start()
        next_turn(self.url, opening(SAMPLES[0]))
        raise KeyboardInterrupt

    monkeypatch.setattr(ReplayServer, "serve_forever", one_request)
    result = cli("serve", PARENT, "--port", 0, "--store", root)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == "served 1 request, 0 diverged"


def test_a_server_that_cannot_start_makes_no_log_run(root, server, tmp_path):
    """A port taken, or a parent whose dataset file cannot be read: refused in one line,
    and the store holds no log run."""
    before = sorted(p.name for p in root.iterdir())
    taken = cli("serve", PARENT, "--port", server.port, "--log-run", "never", "--store", root)
    assert taken.exit_code == 2 and "cannot listen there" in taken.output
    assert sorted(p.name for p in root.iterdir()) == before
    store = tmp_path / "traces"
    shutil.copytree(root / PARENT, store / PARENT)
    dataset = store / PARENT / "dataset.jsonl"
    first = dataset.read_bytes().split(b"\n", 1)[0]
    dataset.write_bytes(first + b"\n" + dataset.read_bytes())  # its first entry twice
    broken = cli("serve", PARENT, "--port", 0, "--log-run", "never", "--store", store)
    assert broken.exit_code == 2, broken.output
    assert [line for line in broken.output.splitlines() if line.startswith("Error:")] == [
        f"Error: {PARENT}/dataset.jsonl: entry 1: duplicate id {json.loads(first)['id']!r} "
        "(also entry 0)"
    ]
    assert sorted(p.name for p in store.iterdir()) == [PARENT]


def test_an_entry_found_unreadable_while_serving_is_one_line_and_the_server_goes_on(
    root, tmp_path, capfd
):
    """An entry of the parent's dataset file whose id reads but whose rest does not (the log
    parses an entry when a conversation of its sample first comes): that request gets a 500
    naming the file and entry, stderr one line and no traceback, and the others are served.
    (A parent that recorded its dataset file's sha256 is refused at once: this one is of a
    run an older tcbreplay wrote, without it.)"""
    store = tmp_path / "traces"
    shutil.copytree(root / PARENT, store / PARENT)
    manifest = store / PARENT / "manifest.json"
    fields = json.loads(manifest.read_text())
    del fields["dataset"]["stored_sha256"]
    manifest.write_text(json.dumps(fields))
    dataset = store / PARENT / "dataset.jsonl"
    lines = dataset.read_bytes().splitlines(keepends=True)
    k = next(i for i, line in enumerate(lines) if b'"mul-7-by-8"' in line)
    lines[k] = b'{"id": "mul-7-by-8", "input": \n'
    dataset.write_bytes(b"".join(lines))
    with serve_run(store, PARENT, log_run="log") as server:
        status, _, text = post(server, "/v1/chat/completions", {
            "model": "m", "tools": openai_tools(), "messages": [
                {"role": "system", "content": INPUTS.system_prompt},
                {"role": "user", "content": sample_input("mul-7-by-8")}]})  # fmt: skip
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request("GET", "/")
        counted = json.loads(conn.getresponse().read())
        assert (counted["served"], counted["diverged"]) == (0, 0)  # the failed one is neither
        assert openai_loop(server.url, sample_input(SAMPLES[1]))
    assert status == 500, text
    assert f"dataset.jsonl: unreadable dataset file: entry {k}" in json.loads(text)["error"][
        "message"]  # fmt: skip
    err = capfd.readouterr().err
    assert "Traceback" not in err
    said = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(said) == 1
    assert said[0].startswith(f"Error: {dataset}: unreadable dataset file: entry {k}: ")
    rows = sql(store, "select sample_id from samples where run_id = 'log'")
    assert rows == [{"sample_id": SAMPLES[1]}]


def test_a_log_run_of_a_parent_whose_dataset_file_was_changed_is_refused(root, tmp_path):
    """The log run's dataset entries are the parent's: an edited file was taken as it is."""
    from tcbreplay.errors import StoreError

    store = tmp_path / "traces"
    shutil.copytree(root / PARENT, store / PARENT)
    dataset = store / PARENT / "dataset.jsonl"
    dataset.write_bytes(dataset.read_bytes().replace(b'"mul-7-by-8"', b'"mul-7-by-9"'))
    with pytest.raises(StoreError, match=r"dataset\.jsonl: not the file the run wrote"):
        serve_run(store, PARENT, log_run="log").close()
    assert sorted(p.name for p in store.iterdir()) == [PARENT]


# ---------------------------------------------------------------- the τ-bench sample


@pytest.mark.slow  # over 2 s of CPU: 20 conversations, each request its whole history
def test_the_tau_bench_sample_served_to_an_openai_loop_that_replays_its_own_messages(tmp_path):
    """Each of its 20 conversations sent by the OpenAI SDK, with its recorded user and tool
    messages and the server's answers in place of the assistant's: every answer served,
    none diverging."""
    from helpers import import_tau_bench

    from tcbreplay._importers.openai import to_openai

    root = import_tau_bench(tmp_path / "traces")
    rows = sql(root, "select sample_id, trial, message from messages where run_id = 'tau' "
               "order by sample_id, trial, position")  # fmt: skip
    conversations: dict[tuple, list[dict]] = {}
    for row in rows:
        conversations.setdefault((row["sample_id"], row["trial"]), []).append(
            json.loads(row["message"])
        )
    specs = json.loads((root / "tau" / "manifest.json").read_text())["tools"]["specs"]
    served = 0
    with serve_run(root, "tau", log_run="tau-served") as server:
        client = openai_client(server.url)
        for recorded in conversations.values():
            sent: list[dict] = []
            for message in to_openai(recorded):
                if message["role"] != "assistant":
                    sent.append(message)
                    continue
                answer = client.chat.completions.create(
                    model="gpt-4o", messages=sent,
                    tools=[{"type": "function", "function": s} for s in specs],
                ).choices[0].message  # fmt: skip
                assert (answer.content or "") == (message.get("content") or "")
                assert [(c.function.name, json.loads(c.function.arguments))
                        for c in answer.tool_calls or []] == [
                    (c["function"]["name"], json.loads(c["function"]["arguments"]))
                    for c in message.get("tool_calls") or []]  # fmt: skip
                sent.append(answer.model_dump(exclude_none=True))
                served += 1
    assert served > 20 and server.service.diverged == 0
    block = json.loads((root / "tau-served" / "manifest.json").read_text())["replay"]
    assert (block["turns_served"], block["diverged_samples"]) == (served, 0)
    assert cli("audit", "verify", "tau-served", "--store", root).exit_code == 0


def test_a_run_of_one_turn_is_served_in_the_singular(tmp_path, monkeypatch):
    """Its start line said "(1 samples and trials, 1 turns)"."""
    from tcbreplay._replay.server import ReplayServer

    store = tmp_path / "traces"
    made = cli("record", "--model", "sim", "--sample-id", "hi-there", "--run-id", "one",
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output

    def stopped(self: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ReplayServer, "serve_forever", stopped)
    served = cli("serve", "one", "--port", 0, "--store", store)
    assert served.exit_code == 0, served.output
    assert served.stderr.startswith("serving one (1 sample and trial, 1 turn) at http://")
