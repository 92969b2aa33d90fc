"""Request fingerprints (#29): what enters the canonical request and what never does, the same
conversation from LangChain, OpenAI and Anthropic messages, and the paths of divergences."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from tcbreplay._replay.divergence import describe, distance, first_difference, nearest
from tcbreplay._replay.fingerprint import (
    Conversation,
    canonical_json,
    canonical_messages,
    canonical_params,
    canonical_request,
    canonical_tools,
    fingerprint,
    message_hashes,
    request_text,
)
from tcbreplay._replay.tool_pool import ToolOutput, ToolPool

ADD = {
    "name": "add_numbers",
    "description": "Add two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["b", "a"],
    },
}
ITEMS = {"name": "list_items", "description": "The catalog.", "parameters": {"type": "object",
         "properties": {}}}  # fmt: skip
TOOLS = canonical_tools([ADD, ITEMS])


def langchain_conversation(**ids: str) -> list:
    call_id = ids.get("call", "c1")
    return [
        SystemMessage("You are a shop."),
        HumanMessage("What is 2 plus 3?", id=ids.get("human")),
        AIMessage(
            "",
            tool_calls=[{"name": "add_numbers", "args": {"a": 3, "b": 2}, "id": call_id}],
            id=ids.get("ai"),
            usage_metadata={"input_tokens": 9, "output_tokens": 2, "total_tokens": 11},
            response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        ),
        ToolMessage('{"result": 5}', tool_call_id=call_id, id=ids.get("tool")),
    ]


def test_the_canonical_request_holds_what_the_model_sees():
    request = canonical_request(langchain_conversation(), TOOLS, {"temperature": 0})
    assert request == {
        "system": "You are a shop.",
        "messages": [
            {"role": "user", "content": "What is 2 plus 3?"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"name": "add_numbers", "arguments": {"a": 3, "b": 2}}]},
            {"role": "tool", "name": "add_numbers", "content": {"result": 5}, "call": 0},
        ],
        "tools": {
            "add_numbers": {"description": "Add two numbers.", "required": ["a", "b"],
                            "parameters": {"a": {"type": "number"}, "b": {"type": "number"}}},
            "list_items": {"description": "The catalog.", "parameters": {}, "required": []},
        },
        "params": {"temperature": 0},
    }  # fmt: skip
    assert (
        fingerprint(request)
        == __import__("hashlib").sha256(canonical_json(request).encode()).hexdigest()
    )


def test_ids_usage_and_metadata_never_enter_it():
    one = canonical_request(langchain_conversation(), TOOLS, {})
    other = canonical_request(
        langchain_conversation(human="h-9", ai="run-42", tool="t-7", call="call_XYZ"), TOOLS, {}
    )
    assert fingerprint(one) == fingerprint(other)


def test_tool_order_key_order_and_number_form_never_enter_it():
    messages = langchain_conversation()
    same = langchain_conversation()
    same[2] = AIMessage("", tool_calls=[{"name": "add_numbers", "args": {"b": 2.0, "a": 3},
                                         "id": "c1"}])  # fmt: skip
    same[3] = ToolMessage('{"result":5.0}', tool_call_id="c1")
    one = canonical_request(messages, canonical_tools([ADD, ITEMS]), {})
    other = canonical_request(same, canonical_tools([ITEMS, ADD]), {})
    assert fingerprint(one) == fingerprint(other)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda m: m.__setitem__(0, SystemMessage("You are a bank.")), "system"),
        (lambda m: m.__setitem__(1, HumanMessage("What is 2 plus 4?")), "messages[0].content"),
        (lambda m: m.__setitem__(3, ToolMessage('{"result": 6}', tool_call_id="c1")),
         "messages[2].content.result"),
        (lambda m: m.__setitem__(2, AIMessage("", tool_calls=[
            {"name": "add_numbers", "args": {"a": 3, "b": 4}, "id": "c1"}])),
         "messages[1].tool_calls[0].arguments.b"),
        (lambda m: m.pop(), "messages[2]"),
    ],
)  # fmt: skip
def test_each_change_is_found_at_its_smallest_path(change, path):
    recorded = canonical_request(langchain_conversation(), TOOLS, {})
    messages = langchain_conversation()
    change(messages)
    replayed = canonical_request(messages, TOOLS, {})
    assert fingerprint(recorded) != fingerprint(replayed)
    assert first_difference(recorded, replayed)[0] == path


def test_which_result_answers_which_call_enters_it():
    """Two calls of one tool, their results in the recorded order but given to each other's
    call ids (a bug of concurrent tool runs): the model reads each call's result as the
    other's, yet the request matched the recording."""

    def asked(answers: list[tuple[str, str]]) -> dict:
        calls = [{"name": "add_numbers", "args": {"a": a, "b": 1}, "id": f"c{a}"} for a in (8, 45)]
        results = [ToolMessage(text, tool_call_id=call) for call, text in answers]
        messages = [HumanMessage("Add 1 to 8 and to 45."), AIMessage("", tool_calls=calls)]
        return canonical_request([*messages, *results], TOOLS, {})

    recorded = asked([("c8", '{"result": 9}'), ("c45", '{"result": 46}')])
    swapped = asked([("c45", '{"result": 9}'), ("c8", '{"result": 46}')])
    assert fingerprint(recorded) != fingerprint(swapped)
    assert first_difference(recorded, swapped)[0] == "messages[2].call"


def test_a_changed_tool_and_setting_name_their_parts():
    recorded = canonical_request(langchain_conversation(), TOOLS, {"temperature": 0})
    narrower = {**ADD, "parameters": {**ADD["parameters"], "properties": {"a": {"type": "number"},
                "b": {"type": "integer"}}}}  # fmt: skip
    replayed = canonical_request(langchain_conversation(), canonical_tools([narrower, ITEMS]),
                                 {"temperature": 0})  # fmt: skip
    divergence = describe(2, recorded, replayed)
    assert divergence.component == "tools"
    assert divergence.path == "tools.add_numbers.parameters.b.type"
    assert (divergence.recorded, divergence.replayed) == ('"number"', '"integer"')
    gone = canonical_request(langchain_conversation(), canonical_tools([ADD]), {"temperature": 0})
    assert describe(2, recorded, gone).path == "tools.list_items"
    assert describe(2, recorded, gone).replayed is None
    warmer = canonical_request(langchain_conversation(), TOOLS, canonical_params(
        {"temperature": 0.7, "max_output_tokens": 100, "timeout": 30}))  # fmt: skip
    assert warmer["params"] == {"temperature": 0.7, "max_tokens": 100}
    assert describe(2, recorded, warmer).path == "params.max_tokens"


def test_a_long_text_is_cut_to_its_first_difference():
    prompt = "x" * 500
    recorded = canonical_request([SystemMessage(prompt + " A"), HumanMessage("hi")], TOOLS, {})
    replayed = canonical_request([SystemMessage(prompt + " B"), HumanMessage("hi")], TOOLS, {})
    divergence = describe(0, recorded, replayed)
    assert json.loads(divergence.recorded).endswith("x A")
    assert json.loads(divergence.recorded).startswith("…")
    assert len(divergence.recorded) < 300


def test_the_line_for_a_person_shows_where_the_two_sides_differ():
    """A sentence added to a long prompt: the line cut both sides to their first 80
    characters, the same on both, and never showed the sentence."""
    prompt = "Answer as a short sentence with the value rounded to two decimals. " * 4
    recorded = canonical_request([SystemMessage(prompt), HumanMessage("hi")], TOOLS, {})
    replayed = canonical_request(
        [SystemMessage(prompt + "Always show your working."), HumanMessage("hi")], TOOLS, {}
    )
    line = describe(0, recorded, replayed).line()
    before, after = line.split(": ", 2)[2].split(" -> ")
    assert before != after
    assert "Always show your working." in after and "Always" not in before
    assert len(before) <= 81 and len(after) <= 81


def test_a_text_cut_for_the_line_keeps_its_quotes():
    """A prompt's JSON text cut to its neighbourhood of the difference lost its opening
    quote (``-> …entence ..."``): both sides are JSON strings, quoted, cut inside."""
    prompt = "Give the final answer as a short sentence with the value rounded to two decimals.\n"
    recorded = canonical_request([SystemMessage(prompt), HumanMessage("hi")], TOOLS, {})
    replayed = canonical_request(
        [SystemMessage(prompt + "\nAlways show your working.\n"), HumanMessage("hi")], TOOLS, {}
    )
    before, after = describe(0, recorded, replayed).line().split(": ", 2)[2].split(" -> ")
    assert after.startswith('"…') and after.endswith('working.\\n"'), after
    assert before.startswith('"') and before.endswith('"'), before


def test_the_nearest_recorded_request_shares_the_most():
    conversation = langchain_conversation()
    turn0 = canonical_request(conversation[:2], TOOLS, {})
    turn1 = canonical_request(conversation, TOOLS, {})
    drifted = [*conversation[:3], ToolMessage('{"result": 6}', tool_call_id="c1")]
    replayed = canonical_request(drifted, TOOLS, {})
    assert nearest([turn0, turn1], replayed) is turn1
    assert distance(turn1, replayed) < distance(turn0, replayed)


def test_the_same_conversation_from_openai_and_anthropic_has_the_same_fingerprint():
    """The importers' readers turn each provider's messages into LangChain's; from there the
    canonical form is one (what serve needs to answer any SDK from one recording)."""
    from tcbreplay._importers import anthropic, openai

    from_openai = openai.convert(
        [
            {"role": "system", "content": "You are a shop."},
            {"role": "user", "content": [{"type": "text", "text": "What is 2 plus 3?"}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "add_numbers", "arguments": '{"b": 2, "a": 3}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"result": 5}'},
        ],
        {}, "openai",
    )  # fmt: skip
    from_anthropic = anthropic.convert(
        [
            {"role": "user", "content": "What is 2 plus 3?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "add_numbers",
                 "input": {"a": 3, "b": 2}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"result": 5}'}]},
        ],
        {"system": "You are a shop."}, "anthropic", {},
    )  # fmt: skip
    prints = {
        fingerprint(canonical_request(messages, TOOLS, {}))
        for messages in (langchain_conversation(), from_openai, from_anthropic)
    }
    assert len(prints) == 1


def test_stored_messages_and_objects_give_one_form_and_built_requests_one_text():
    from langchain_core.messages import message_to_dict

    objects = langchain_conversation()
    stored = [json.loads(json.dumps(message_to_dict(m))) for m in objects]
    assert canonical_messages(objects) == canonical_messages(stored)
    assert message_hashes(objects) == message_hashes(stored)
    request = canonical_request(objects, TOOLS, {"seed": 1})
    system, items, _ = canonical_messages(objects)
    built = request_text([canonical_json(m) for m in items], canonical_json({"seed": 1}),
                         canonical_json(system), canonical_json(TOOLS))  # fmt: skip
    assert built == canonical_json(request)


def test_a_conversation_read_turn_by_turn_gives_each_request_and_fingerprint_as_a_whole():
    """Messages kept between turns give what reading every request whole gives, and a
    message given other content or tool calls (as objects) is read again."""
    conversation = Conversation()
    messages = langchain_conversation()
    # a tool message named otherwise than the call it answers: renamed, not held as read
    messages.append(ToolMessage("7", tool_call_id="c1", name="wrong_name"))
    params = {"temperature": 0}
    for turn in range(1, len(messages) + 1):
        request, digest = conversation.request(
            messages[:turn], TOOLS, canonical_json(TOOLS), params, "Be brief."
        )
        whole = canonical_request(messages[:turn], TOOLS, params, "Be brief.")
        assert (request, digest) == (whole, fingerprint(whole))
    before = conversation.request(messages, TOOLS, canonical_json(TOOLS), params)[1]
    messages[1].content = "What is 2 plus 4?"
    messages[2].tool_calls = [{"name": "add_numbers", "args": {"a": 4, "b": 2}, "id": "c1"}]
    request, digest = conversation.request(messages, TOOLS, canonical_json(TOOLS), params)
    assert digest != before
    assert (request, digest) == (
        canonical_request(messages, TOOLS, params),
        fingerprint(canonical_request(messages, TOOLS, params)),
    )
    assert request["messages"][0]["content"] == "What is 2 plus 4?"
    assert request["messages"][1]["tool_calls"] == [
        {"name": "add_numbers", "arguments": {"a": 4, "b": 2}}
    ]


def test_recorded_tool_outputs_are_served_by_call_not_by_order():
    outputs = [
        ToolOutput("add_numbers", {"a": 1, "b": 2}, '{"result": 3}', None, 2),
        ToolOutput("add_numbers", {"a": 5, "b": 5}, '{"result": 10}', None, 3),
        ToolOutput("add_numbers", {"a": 1, "b": 2}, '{"result": 3, "again": true}', None, 6),
    ]
    pool = ToolPool(outputs)
    # the model asks in another order, and in another form of the numbers
    assert pool.take("add_numbers", {"b": 5.0, "a": 5}).content == '{"result": 10}'
    assert pool.take("add_numbers", {"a": 1, "b": 2}).position == 2
    assert pool.take("add_numbers", {"a": 1, "b": 2}).position == 6
    assert pool.take("add_numbers", {"a": 1, "b": 2}) is None  # each output once
    assert pool.take("multiply_numbers", {"a": 1, "b": 2}) is None


def test_a_boolean_for_a_number_in_a_tool_output_is_drift_found_at_its_path():
    """true == 1 in Python: the output was called cosmetic, yet the request diverged, at
    the whole message list (no difference was found in it)."""
    from tcbreplay._replay.outputs import compare_output

    recorded = ToolOutput("list_items", {}, '{"items": [{"item_id": 1}]}', "success", 2)
    assert compare_output(recorded, '{"items": [{"item_id": true}]}', "success", True) == "drift"
    assert compare_output(recorded, '{"items":[{"item_id":1.0}]}', "success", True) == "cosmetic"
    assert compare_output(recorded, '{"items": [{"item_id": 1}]}', "success", True) == "same"
    one = {"messages": [{"role": "tool", "content": {"items": [{"item_id": 1}]}}]}
    other = {"messages": [{"role": "tool", "content": {"items": [{"item_id": True}]}}]}
    assert first_difference(one, other)[0] == "messages[0].content.items[0].item_id"
