"""``serve``'s wire layer: what it answers in each API's form, and what it says of a request
it refuses or cannot answer, with the real OpenAI and Anthropic SDKs as its clients (raw
sockets for what no SDK sends)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from helpers import cli

from tcbreplay._replay.serve import serve_run

SYSTEM = "You are a shop."
QUESTION = "Add 2 and 3 and multiply 4 by 5"
TOOLS = [
    {"name": "add_numbers", "description": "Add two numbers.",
     "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                     "b": {"type": "number"}},
                    "required": ["a", "b"]}},
    {"name": "multiply_numbers", "description": "Multiply two numbers.",
     "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                     "b": {"type": "number"}},
                    "required": ["a", "b"]}},
]  # fmt: skip


def openai_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": t} for t in TOOLS]


def anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in TOOLS]  # fmt: skip


def import_run(root: Path, run_id: str, messages: list[Any]) -> None:
    """A run of one sample whose conversation is ``messages`` (LangChain's), imported from a
    traces file of the langchain dialect."""
    from langchain_core.messages import messages_to_dict

    folder = root.parent / f"{run_id}-files"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps([{"id": "s", "input": QUESTION,
                                                      "target": []}]))  # fmt: skip
    (folder / "tools.json").write_text(json.dumps(TOOLS))
    line = {"sample_id": "s", "messages": messages_to_dict(messages)}
    (folder / "traces.jsonl").write_text(json.dumps(line) + "\n")
    made = cli("import", "--format", "langchain", "--dataset", folder / "dataset.json",
               "--tools", folder / "tools.json", "--traces", folder / "traces.jsonl",
               "--run-id", run_id, "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output


def parallel_turn(arguments: tuple[str, str]) -> Any:
    """The model's first answer, two calls (c1 add_numbers, c2 multiply_numbers) as OpenAI
    sends them, read by LangChain: arguments that are no JSON object make an invalid call,
    which LangChain keeps in ``invalid_tool_calls``, after the valid ones."""
    from langchain_core.messages import AIMessage

    calls = [{"id": f"c{k + 1}", "type": "function", "function": {"name": name, "arguments": a}}
             for k, (name, a) in enumerate(zip(["add_numbers", "multiply_numbers"], arguments,
                                               strict=True))]  # fmt: skip
    return AIMessage(content="", additional_kwargs={"tool_calls": calls})


def conversation(arguments: tuple[str, str], results: tuple[str, str]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    return [
        SystemMessage(SYSTEM),
        HumanMessage(QUESTION),
        parallel_turn(arguments),
        ToolMessage(results[0], tool_call_id="c1", name="add_numbers"),
        ToolMessage(results[1], tool_call_id="c2", name="multiply_numbers"),
        AIMessage("Done."),
    ]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A store with two imported runs: ``mixed`` (the first call's arguments no JSON object,
    LangChain's invalid call) and ``valid`` (both calls valid)."""
    root = tmp_path_factory.mktemp("wire") / "traces"
    mixed = conversation(("{bad", '{"a": 4, "b": 5}'), ("error: bad arguments", "20"))
    assert mixed[2].invalid_tool_calls and mixed[2].tool_calls[0]["id"] == "c2"
    import_run(root, "mixed", mixed)
    import_run(root, "valid", conversation(('{"a": 2, "b": 3}', '{"a": 4, "b": 5}'),
                                           ('{"result": 5}', '{"result": 20}')))  # fmt: skip
    return root


def openai_client(url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=url + "/v1", api_key="not-needed", max_retries=0)


def anthropic_client(url: str) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=url, api_key="not-needed", max_retries=0)


# ---------------------------------------------------------------- invalid calls


@pytest.mark.parametrize("stream", [False, True], ids=["json", "streamed"])
def test_an_openai_client_that_sends_back_an_invalid_call_verbatim_is_answered(root, stream):
    """The invalid call was served after the valid one, and its echo got a 409 at
    ``tool_calls[1].arguments: "{bad" -> {"[tcbreplay: ...]": "{bad"}``."""
    with serve_run(root, "mixed") as server:
        client = openai_client(server.url)
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": QUESTION}]  # fmt: skip
        kwargs = {"model": "m", "messages": messages, "tools": openai_tools()}
        if stream:
            with client.chat.completions.stream(**kwargs) as events:
                message = events.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(**kwargs).choices[0].message
        served = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls]
        assert served == [("c1", "add_numbers", "{bad"),
                          ("c2", "multiply_numbers", '{"a": 4, "b": 5}')]  # fmt: skip
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        messages += [{"role": "tool", "tool_call_id": "c1", "content": "error: bad arguments"},
                     {"role": "tool", "tool_call_id": "c2", "content": "20"}]  # fmt: skip
        final = client.chat.completions.create(**kwargs).choices[0].message
        assert final.content == "Done."
        assert server.service.diverged == 0


def test_an_anthropic_client_that_sends_back_an_invalid_call_verbatim_is_answered(root):
    with serve_run(root, "mixed") as server:
        client = anthropic_client(server.url)
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "messages": messages,
                  "tools": anthropic_tools()}  # fmt: skip
        answer = client.messages.create(**kwargs)
        assert [(b.id, b.name) for b in answer.content] == [
            ("c1", "add_numbers"),
            ("c2", "multiply_numbers"),
        ]
        messages.append({"role": "assistant", "content": answer.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "error: bad arguments"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "20"}]})  # fmt: skip
        final = client.messages.create(**kwargs)
        assert [b.text for b in final.content] == ["Done."]
        assert server.service.diverged == 0


# ---------------------------------------------------------------- what a 4xx says back


def raw(server: Any, data: bytes) -> tuple[bytes, dict[str, Any]]:
    """What the server answers to bytes sent as they are: its status line and its JSON."""
    with socket.create_connection((server.host, server.port), timeout=30) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], json.loads(body)


def test_a_4xx_never_says_back_a_key_in_the_request_line_or_a_header(root, capfd):
    """Both were quoted in the error's message, which the SDKs put in their exceptions'
    text: ``not an HTTP request line: 'POST http://...?key=AIza...'`` and ``not a header
    line: 'Authorization : Bearer sk-proj-...'``."""
    google = "AIzaSyLEAKED1234567890abcdefghijklmnop"
    openai_key = "sk-proj-LEAKEDLEAKED1234567890"
    answers = []
    with serve_run(root, "valid") as server:
        status, said = raw(server, b"POST http://127.0.0.1/v1/chat/completions?key=" +
                           google.encode() + b" HTTP/1.1\r\nContent-Length: 2\r\n"
                           b"Connection: close\r\n\r\n{}")  # fmt: skip
        answers.append(said)
        assert status == b"HTTP/1.1 400 Bad Request"
        assert said["error"]["message"] == (
            "not an HTTP request line: 'POST http://127.0.0.1/v1/chat/completions?... HTTP/1.1'"
        )
        status, said = raw(server, b"POST /v1/messages HTTP/1.1\r\nContent-Length: 2\r\n"
                           b"Authorization : Bearer " + openai_key.encode()
                           + b"\r\nConnection: close\r\n\r\n{}")  # fmt: skip
        answers.append(said)
        assert status == b"HTTP/1.1 400 Bad Request"
        assert said["error"]["message"] == (
            "header line 2 'Authorization ': not a header line (Name: value, no space before "
            "the colon; its value not shown)")  # fmt: skip
        status, said = raw(server, b"POST /v1/messages HTTP/1.1\r\n" + openai_key.encode()
                           + b"\r\nConnection: close\r\n\r\n")  # fmt: skip
        answers.append(said)
        assert status == b"HTTP/1.1 400 Bad Request"
        assert said["error"]["message"].startswith("header line 1: not a header line")
    shown = json.dumps(answers) + capfd.readouterr().err
    assert google not in shown and openai_key not in shown
    assert "LEAKED" not in shown


# ---------------------------------------------------------------- where a 409 points


def first_turn_openai(client: Any) -> list[dict[str, Any]]:
    """The conversation's first request and its answer, as the OpenAI SDK gets it."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    answer = client.chat.completions.create(model="m", messages=messages, tools=openai_tools())
    return [*messages, answer.choices[0].message.model_dump(exclude_none=True)]


def test_a_409_points_into_the_openai_request_as_sent(root):
    """The path indexed the canonical messages, which leave the system message out: the
    client's messages[3] was ``messages[2]``; results in reverse order said ``messages at
    messages[2].call: 0 -> 1``."""
    import openai

    with serve_run(root, "valid") as server:
        client = openai_client(server.url)
        said = []
        for results in [('{"result": 6}', '{"result": 20}'), ('{"result": 5}', '{"result": 21}')]:
            messages = first_turn_openai(client) + [
                {"role": "tool", "tool_call_id": f"c{k + 1}", "content": r}
                for k, r in enumerate(results)
            ]
            with pytest.raises(openai.ConflictError) as caught:
                client.chat.completions.create(model="m", messages=messages, tools=openai_tools())
            said.append(caught.value.body["divergence"])
        assert [(d["component"], d["path"]) for d in said] == [
            ("tool_output", "messages[3].content.result"),
            ("tool_output", "messages[4].content.result"),
        ]
        reversed_ = [
            *first_turn_openai(client),
            {"role": "tool", "tool_call_id": "c2", "content": '{"result": 20}'},
            {"role": "tool", "tool_call_id": "c1", "content": '{"result": 5}'},
        ]
        with pytest.raises(openai.ConflictError) as caught:
            client.chat.completions.create(model="m", messages=reversed_, tools=openai_tools())
    divergence = caught.value.body["divergence"]
    assert (divergence["path"], divergence["recorded"], divergence["replayed"]) == (
        "messages[3].tool_call_id", '"c1"', '"c2"')  # fmt: skip
    assert caught.value.body["message"].startswith(
        "no recorded turn answers this request: turn 1: tool results in another order than "
        "the calls of messages[2]: messages[3] answers c2 (multiply_numbers) where the "
        "recording's answered c1 (add_numbers); give the results in the calls' order"
    )


def test_a_409_points_into_the_responses_request_as_sent(root):
    """On ``/v1/responses`` a model turn is an assistant message and the function_call items
    after it: a call's path names its item, a result's its function_call_output item."""
    import openai

    with serve_run(root, "valid") as server:
        client = openai_client(server.url)
        kwargs = {"model": "m", "instructions": SYSTEM,
                  "tools": [{"type": "function", **t} for t in TOOLS]}  # fmt: skip
        asked: list[Any] = [{"role": "user", "content": QUESTION}]
        answer = client.responses.create(input=asked, **kwargs)
        assert [(o.type, o.call_id) for o in answer.output] == [
            ("function_call", "c1"), ("function_call", "c2")]  # fmt: skip
        asked += [o.model_dump(exclude_none=True) for o in answer.output]

        def results(*given: tuple[str, str]) -> list[dict[str, Any]]:
            return [{"type": "function_call_output", "call_id": i, "output": o} for i, o in given]

        said = []
        for sent in [results(("c1", '{"result": 5}'), ("c2", '{"result": 21}')),
                     results(("c2", '{"result": 20}'), ("c1", '{"result": 5}'))]:  # fmt: skip
            with pytest.raises(openai.ConflictError) as caught:
                client.responses.create(input=[*asked, *sent], **kwargs)
            said.append(caught.value.body)
        # a reasoning item between the message and the calls is no message, but an item
        # (the path said input[3] for the call at input[4]); a result left out is input[4]
        # (it said messages[4])
        reasoned = [asked[0], {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": ""}]},
                    {"type": "reasoning", "id": "rs_1", "summary": []}, asked[1],
                    {**asked[2], "arguments": '{"a": 4, "b": 6}'},
                    *results(("c1", '{"result": 5}'), ("c2", '{"result": 20}'))]  # fmt: skip
        for sent in [reasoned, [*asked, *results(("c1", '{"result": 5}'))]]:
            with pytest.raises(openai.ConflictError) as caught:
                client.responses.create(input=sent, **kwargs)
            said.append(caught.value.body)
        final = client.responses.create(
            input=[*asked, *results(("c1", '{"result": 5}'), ("c2", '{"result": 20}'))], **kwargs
        )
        assert final.output_text == "Done."
    assert said[2]["divergence"]["path"] == "input[4].arguments.b"
    assert (said[3]["divergence"]["path"], said[3]["divergence"]["replayed"]) == ("input[4]", None)
    assert said[0]["divergence"]["path"] == "input[4].output.result"
    assert said[1]["divergence"]["path"] == "input[3].call_id"
    assert ("tool results in another order than the calls of input[1]: input[3] answers c2 "
            "(multiply_numbers) where the recording's answered c1 (add_numbers)"
            ) in said[1]["message"]  # fmt: skip


def test_a_409_points_into_the_anthropic_request_as_sent(root):
    """Each tool_result block is a message of its own in the canonical form: the path said
    ``messages[3]`` for the second block of the client's ``messages[2]``, and for a second
    result left out after the first (where it would go: ``messages[2].content[1]``)."""
    import anthropic

    def results(*given: tuple[str, str]) -> list[dict[str, Any]]:
        return [{"type": "tool_result", "tool_use_id": i, "content": c} for i, c in given]

    with serve_run(root, "valid") as server:
        client = anthropic_client(server.url)
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "tools": anthropic_tools()}
        asked = [{"role": "user", "content": QUESTION}]
        answer = client.messages.create(messages=asked, **kwargs)
        asked.append({"role": "assistant", "content": answer.content})
        said = []
        for sent in [results(("c1", '{"result": 5}'), ("c2", '{"result": 21}')),
                     results(("c2", '{"result": 20}'), ("c1", '{"result": 5}')),
                     results(("c1", '{"result": 5}')),
                     results(("c1", '{"result": 6}'))]:  # fmt: skip
            with pytest.raises(anthropic.ConflictError) as caught:
                client.messages.create(messages=[*asked, {"role": "user", "content": sent}],
                                       **kwargs)  # fmt: skip
            said.append(caught.value.body["error"])
    assert said[0]["divergence"]["path"] == "messages[2].content[1].content.result"
    assert said[1]["divergence"]["path"] == "messages[2].content[0].tool_use_id"
    assert (said[2]["divergence"]["path"], said[2]["divergence"]["replayed"]) == (
        "messages[2].content[1]", None)  # fmt: skip
    assert said[3]["divergence"]["path"] == "messages[2].content[0].content.result"
    assert "tool results in another order than the calls of messages[1]: messages[2].content[0] " \
        "answers c2 (multiply_numbers)" in said[1]["message"]  # fmt: skip


def test_the_first_result_left_out_gets_409_naming_the_apis_id_field(root):
    """Only the second call's result sent: the 409 said ``messages[2].content[0].call: 0 ->
    1`` (Anthropic; ``messages[3].call`` on Chat Completions), a field no API has, and the
    calls' positions for values (on Responses too, at ``input[3].call_id``); it names the
    API's own field of the call answered, with the recorded and sent call ids."""
    import anthropic
    import openai

    second = '{"result": 20}'
    with serve_run(root, "valid") as server:
        claude = anthropic_client(server.url)
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "tools": anthropic_tools()}
        asked: list[Any] = [{"role": "user", "content": QUESTION}]
        asked.append(
            {
                "role": "assistant",
                "content": claude.messages.create(messages=asked, **kwargs).content,
            }
        )
        result = {"type": "tool_result", "tool_use_id": "c2", "content": second}
        with pytest.raises(anthropic.ConflictError) as caught:
            claude.messages.create(messages=[*asked, {"role": "user", "content": [result]}],
                                   **kwargs)  # fmt: skip
        said = [caught.value.body["error"]]
        chat = openai_client(server.url)
        sent = [*first_turn_openai(chat), {"role": "tool", "tool_call_id": "c2", "content": second}]
        with pytest.raises(openai.ConflictError) as caught:
            chat.chat.completions.create(model="m", messages=sent, tools=openai_tools())
        said.append(caught.value.body)
        tools = [{"type": "function", **t} for t in TOOLS]
        given: list[Any] = [{"role": "user", "content": QUESTION}]
        answer = chat.responses.create(model="m", instructions=SYSTEM, input=given, tools=tools)
        given += [o.model_dump(exclude_none=True) for o in answer.output]
        given.append({"type": "function_call_output", "call_id": "c2", "output": second})
        with pytest.raises(openai.ConflictError) as caught:
            chat.responses.create(model="m", instructions=SYSTEM, input=given, tools=tools)
        said.append(caught.value.body)
    assert [(s["divergence"]["path"], s["divergence"]["recorded"], s["divergence"]["replayed"])
            for s in said] == [
        ("messages[2].content[0].tool_use_id", '"c1"', '"c2"'),
        ("messages[3].tool_call_id", '"c1"', '"c2"'),
        ("input[3].call_id", '"c1"', '"c2"'),
    ]  # fmt: skip
    assert said[0]["message"].startswith(
        "no recorded turn answers this request: turn 1: messages at "
        'messages[2].content[0].tool_use_id: "c1" -> "c2"'
    )


def test_a_result_that_answers_no_call_gets_400_naming_its_id_field(root):
    """A result whose id is no call's of the conversation got a 409, as a difference from the
    recording; the APIs answer it 400 (Anthropic's ``invalid_request_error``: a tool_result
    needs its tool_use), and so does serve, naming the id's field in the body as sent."""
    import anthropic
    import openai

    result = '{"result": 5}'
    with serve_run(root, "valid") as server:
        claude = anthropic_client(server.url)
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "tools": anthropic_tools()}
        asked: list[Any] = [{"role": "user", "content": QUESTION}]
        answer = claude.messages.create(messages=asked, **kwargs)
        asked.append({"role": "assistant", "content": answer.content})
        blocks = [{"type": "tool_result", "tool_use_id": "c1", "content": result},
                  {"type": "tool_result", "tool_use_id": "c9", "content": result}]  # fmt: skip
        with pytest.raises(anthropic.BadRequestError) as caught:
            claude.messages.create(messages=[*asked, {"role": "user", "content": blocks}],
                                   **kwargs)  # fmt: skip
        said = [(caught.value.body["error"]["type"], caught.value.body["error"]["message"])]
        chat = openai_client(server.url)
        sent = [*first_turn_openai(chat), {"role": "tool", "tool_call_id": "c9", "content": result}]
        with pytest.raises(openai.BadRequestError) as caught:
            chat.chat.completions.create(model="m", messages=sent, tools=openai_tools())
        said.append((caught.value.body["type"], caught.value.body["message"]))
        tools = [{"type": "function", **t} for t in TOOLS]
        given: list[Any] = [{"role": "user", "content": QUESTION}]
        answer = chat.responses.create(model="m", instructions=SYSTEM, input=given, tools=tools)
        given += [o.model_dump(exclude_none=True) for o in answer.output]
        given.append({"type": "function_call_output", "call_id": "c9", "output": result})
        with pytest.raises(openai.BadRequestError) as caught:
            chat.responses.create(model="m", instructions=SYSTEM, input=given, tools=tools)
        said.append((caught.value.body["type"], caught.value.body["message"]))
    assert said == [
        ("invalid_request_error", "messages[2].content[1].tool_use_id 'c9': answers no tool_use "
         "of the conversation; a result follows the tool_use it answers"),
        ("invalid_request_error", "messages[3].tool_call_id 'c9': answers no tool call of the "
         "conversation; a result follows the tool call it answers"),
        ("invalid_request_error", "input[3].call_id 'c9': answers no function_call of the "
         "conversation; a result follows the function_call it answers"),
    ]  # fmt: skip


def test_an_anthropic_result_answering_an_older_turns_call_gets_400(root):
    """A tool_result answering a tool_use of an assistant message before the one just before
    it (the conversation's first calls, after its answer "Done.") got a 409, as a difference
    from the recording; Anthropic's API answers it 400 (``invalid_request_error``: each
    tool_result answers a tool_use of the message before its own), and so does serve, naming
    the id and the messages."""
    import anthropic

    results = ['{"result": 5}', '{"result": 20}']
    with serve_run(root, "valid") as server:
        claude = anthropic_client(server.url)
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "tools": anthropic_tools()}
        asked: list[Any] = [{"role": "user", "content": QUESTION}]
        for blocks in [[{"type": "tool_result", "tool_use_id": f"c{k + 1}", "content": r}
                        for k, r in enumerate(results)], None]:  # fmt: skip
            answer = claude.messages.create(messages=asked, **kwargs)
            asked.append({"role": "assistant", "content": answer.content})
            if blocks:
                asked.append({"role": "user", "content": blocks})
        assert answer.content[0].text == "Done."
        again = {"type": "tool_result", "tool_use_id": "c1", "content": results[0]}
        with pytest.raises(anthropic.BadRequestError) as caught:
            claude.messages.create(messages=[*asked, {"role": "user", "content": [again]}],
                                   **kwargs)  # fmt: skip
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "messages[4].content[0].tool_use_id 'c1': answers a tool_use of "
        "messages[1], not of the assistant message just before it (messages[3]); a "
        "tool_result answers a tool_use of the message before its own",
    }


def test_an_openai_tool_message_answering_an_older_call_gets_400(root):
    """Chat Completions refuses a tool message answering a call of an assistant message
    before the last one (after the answer "Done.", a result of the first calls again) as a
    bad request; serve did so with a 409, as a difference from the recording."""
    import openai

    with serve_run(root, "valid") as server:
        chat = openai_client(server.url)
        sent: list[Any] = [{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": QUESTION}]  # fmt: skip
        results = ['{"result": 5}', '{"result": 20}']
        for turn in range(2):
            answer = chat.chat.completions.create(model="m", messages=sent, tools=openai_tools())
            sent.append(answer.choices[0].message.model_dump(exclude_none=True))
            if turn == 0:
                sent.append({"role": "tool", "tool_call_id": "c1", "content": results[0]})
                sent.append({"role": "tool", "tool_call_id": "c2", "content": results[1]})
        assert answer.choices[0].message.content == "Done."
        sent.append({"role": "tool", "tool_call_id": "c1", "content": results[0]})
        with pytest.raises(openai.BadRequestError) as caught:
            chat.chat.completions.create(model="m", messages=sent, tools=openai_tools())
    assert (caught.value.body["type"], caught.value.body["message"]) == (
        "invalid_request_error",
        "messages[6].tool_call_id 'c1': answers a tool call of messages[2], not of the "
        "assistant message before it (messages[5]); a tool message answers a call of the "
        "assistant message before it",
    )


def test_calls_left_unanswered_as_the_conversation_goes_on_get_400(root):
    """A conversation that went on (a user or assistant message) before each call of the
    model's turn was answered got a 409 at the message where the results were missing, as a
    difference from the recording; both APIs answer it 400 (``invalid_request_error``:
    Anthropic's tool_use ids without tool_result blocks in the next message, Chat
    Completions' tool_call_ids without a tool message), and so does serve, naming the
    model's message, the ids left unanswered and the message that went on."""
    import anthropic
    import openai

    went_on = [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "And 6?"}]
    one = {"type": "tool_result", "tool_use_id": "c1", "content": '{"result": 5}'}
    with serve_run(root, "valid") as server:
        client = anthropic_client(server.url)
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "tools": anthropic_tools()}
        asked = [{"role": "user", "content": QUESTION}]
        answer = client.messages.create(messages=asked, **kwargs)
        asked.append({"role": "assistant", "content": answer.content})
        said = []
        for sent in [
            [*asked, went_on[1]],
            [*asked, *went_on],
            [*asked, {"role": "user", "content": [{"type": "text", "text": "And 6?"}]}],
            [*asked, {"role": "user", "content": [one, {"type": "text", "text": "And 6?"}]}],
            [*asked, {"role": "user", "content": [one]}, *went_on],
        ]:
            with pytest.raises(anthropic.BadRequestError) as caught:
                client.messages.create(messages=sent, **kwargs)
            error = caught.value.body["error"]
            said.append((error["type"], error["message"]))
        chat = openai_client(server.url)
        first = first_turn_openai(chat)
        result = {"role": "tool", "tool_call_id": "c1", "content": '{"result": 5}'}
        for sent in [[*first, *went_on], [*first, result, *went_on]]:
            with pytest.raises(openai.BadRequestError) as caught:
                chat.chat.completions.create(model="m", messages=sent, tools=openai_tools())
            said.append((caught.value.body["type"], caught.value.body["message"]))

    def claude(ids: str, at: str) -> tuple[str, str]:
        return ("invalid_request_error", f"messages[1]: tool_use ids {ids} have no tool_result "
                f"before {at}; each tool_use of a message is answered by a tool_result before "
                "the conversation goes on")  # fmt: skip

    def gpt(ids: str, at: str) -> tuple[str, str]:
        return ("invalid_request_error", f"messages[2]: tool call ids {ids} have no tool "
                f"message before {at}; each tool call of a message is answered by a tool "
                "message before the conversation goes on")  # fmt: skip

    assert said == [
        claude("'c1', 'c2'", "messages[2]"),
        claude("'c1', 'c2'", "messages[2]"),
        claude("'c1', 'c2'", "messages[2]"),
        claude("'c2'", "messages[2].content[1]"),
        claude("'c2'", "messages[3]"),
        gpt("'c1', 'c2'", "messages[3]"),
        gpt("'c2'", "messages[4]"),
    ]


def test_a_base_url_ending_in_v1_given_to_a_client_that_adds_it_is_said_so(root):
    """The Anthropic and google-genai SDKs add /v1 (/v1beta) themselves: given the OpenAI
    base URL (http://HOST:PORT/v1), they got a 404 in OpenAI's shape listing the paths
    served, which left the user to work out that their base URL was the mistake."""
    import anthropic
    from google import genai
    from google.genai import errors

    with serve_run(root, "valid") as server:
        client = anthropic_client(server.url + "/v1")
        with pytest.raises(anthropic.NotFoundError) as caught:
            client.messages.create(model="m", max_tokens=100, system=SYSTEM,
                                   messages=[{"role": "user", "content": QUESTION}])  # fmt: skip
        gemini = genai.Client(api_key="not-needed", http_options={"base_url": server.url + "/v1"})
        with pytest.raises(errors.ClientError) as refused:
            gemini.models.generate_content(model="gemini-2.5-flash", contents=QUESTION)
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error", body
    assert body["error"]["message"].endswith(
        "; Anthropic's client adds /v1 itself: give it the server's address without /v1 as "
        "its base URL (http://HOST:PORT)"
    )
    assert refused.value.code == 404 and refused.value.status == "NOT_FOUND"
    assert "Gemini's client adds /v1 itself" in str(refused.value.message)


# ---------------------------------------------------------------- settings the APIs refuse


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"parallel_tool_calls": "no"}, "parallel_tool_calls 'no': true or false"),
        ({"tool_choice": {"type": "function"}},
         "tool_choice.function.name: the name of the function tool to call is required"),
        ({"tool_choice": "any"}, "tool_choice 'any': none, auto, required or an object"),
        ({"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "all", "tools": []}}},
         "tool_choice.allowed_tools.mode 'all': auto or required"),
        ({"temperature": 3}, "temperature 3: a number from 0 to 2"),
        ({"top_p": "high"}, "top_p 'high': a number from 0 to 1"),
        ({"verbosity": "low"}, "verbosity 'low': not served (a recording keeps no verbosity"),
    ],
)  # fmt: skip
def test_settings_openai_refuses_get_400_naming_the_field(root, extra, said):
    """Each was answered 200: two parallel calls for "no", the recorded calls for a
    tool_choice naming no function, the recorded answer whatever verbosity was asked."""
    import openai

    with serve_run(root, "valid") as server:
        client = openai_client(server.url)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="m", messages=messages, tools=openai_tools(),
                                           **extra)  # fmt: skip
    assert caught.value.body["message"].startswith(said)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"messages": "Hi"}, "messages: a non-empty list of messages is required"),
        ({"messages": {"role": "user", "content": "Hi"}},
         "messages: a non-empty list of messages is required"),
        ({"tool_choice": {"type": "tool"}},
         "tool_choice.name: the name of the tool to use is required (type tool)"),
        ({"tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"}},
         "tool_choice.disable_parallel_tool_use 'yes': true or false"),
        ({"extra_body": {"temperature": 1.5}}, "temperature 1.5: a number from 0 to 1"),
    ],
)  # fmt: skip
def test_settings_anthropic_refuses_get_400_naming_the_field(root, extra, said):
    """``messages`` a text or an object said ``messages[0].role None: user or assistant``
    (the text's characters taken for messages); the others were answered 200."""
    import anthropic

    with serve_run(root, "valid") as server:
        client = anthropic_client(server.url)
        kwargs = {"model": "m", "max_tokens": 100, "system": SYSTEM, "tools": anthropic_tools(),
                  "messages": [{"role": "user", "content": QUESTION}], **extra}  # fmt: skip
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(**kwargs)
    assert caught.value.body["error"]["message"] == said


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_nan_in_a_request_gets_400_naming_the_field(root, path):
    """Python's reader takes NaN, which no JSON holds (the SDKs refuse to send it; curl
    does not): ``temperature: NaN`` was answered 200."""
    import http.client

    body = (b'{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "NaN"}],'
            b' "temperature": NaN}')  # fmt: skip
    with serve_run(root, "valid") as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        said = json.loads(answer.read())["error"]["message"]
    assert (answer.status, said) == (400, "temperature: NaN and Infinity are no JSON numbers")


@pytest.mark.parametrize("message", [{"role": "user"}, {"role": "user", "content": None}])
def test_a_user_message_without_content_gets_400_naming_it(root, message):
    """It was read as an empty text and answered 409 (no recorded turn sends one), where the
    API answers 400: the request is malformed, not a divergence."""
    import http.client

    body = json.dumps({"model": "m", "messages": [{"role": "system", "content": SYSTEM},
                                                  message]}).encode()  # fmt: skip
    with serve_run(root, "valid") as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        error = json.loads(answer.read())["error"]
    assert (answer.status, error["type"]) == (400, "invalid_request_error")
    assert error["message"] == "messages[1].content: a user message's content is required"
