"""The anthropic dialect (``tcbreplay._importers.anthropic``): JSON Lines whose messages are
Anthropic's Messages API turns, with an optional system prompt beside them."""

from __future__ import annotations

import json

from tcbreplay._importers import anthropic
from tcbreplay._importers.dialect import TraceFile

LINE = {"sample_id": "add", "messages": [
    {"role": "user", "content": "What is 2 plus 3?"},
    {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "add_numbers", "input": {"a": 3, "b": 2}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "5"}]},
]}  # fmt: skip


def file_of(*lines: dict) -> TraceFile:
    return TraceFile("t.jsonl", data="".join(json.dumps(x) + "\n" for x in lines).encode())


def test_its_own_marks_are_sure_plain_turns_less():
    assert anthropic.sniff(file_of({**LINE, "system": "Be brief."})).confidence == 0.95
    assert anthropic.sniff(file_of(LINE)).reason == (
        "its messages hold tool_use or tool_result blocks (Anthropic's)"
    )
    plain = anthropic.sniff(file_of({**LINE, "messages": LINE["messages"][:1]}))
    assert 0 < plain.confidence < 0.5


def test_it_does_not_take_openais_tool_role():
    verdict = anthropic.sniff(file_of({"sample_id": 0, "messages": [{"role": "tool"}]}))
    assert not verdict.fits


def test_it_reads_the_system_prompt_and_the_calls():
    source = anthropic.read(file_of({**LINE, "system": "Be brief."}), None)
    (line,) = source.lines
    assert [m["type"] for m in line.messages] == ["system", "human", "ai", "tool"]
    ai = json.loads(line.messages[2]["message"])  # as the store keeps it
    assert ai["data"]["tool_calls"][0]["args"] == {"a": 3, "b": 2}


def test_calls_beside_the_content_are_refused_and_other_keys_kept():
    """A turn holding "tool_use": [...] beside its content gave a sample of no calls."""
    import pytest

    from tcbreplay.errors import TraceError

    beside = {**LINE, "messages": [LINE["messages"][0], {"role": "assistant", "content": "",
              "tool_use": [LINE["messages"][1]["content"][0]]}]}  # fmt: skip
    with pytest.raises(TraceError, match=r"line 1: message 1: unknown key 'tool_use'; a turn's "
                       "calls are its content's tool_use blocks"):  # fmt: skip
        anthropic.read(file_of(beside), None)
    tagged = {**LINE, "messages": [{**LINE["messages"][0], "turn": 1}, *LINE["messages"][1:]]}
    source = anthropic.read(file_of(tagged), None)
    user = json.loads(source.lines[0].messages[0]["message"])
    assert user["data"]["additional_kwargs"] == {"turn": 1}


def test_token_counts_that_are_no_counts_are_refused_with_their_place():
    """'7' crashed (TypeError), true crashed (ArrowTypeError), 2.7 was stored as 2."""
    import pytest

    from tcbreplay.errors import TraceError

    for usage, shown in (({"input_tokens": 5, "output_tokens": "7"}, "usage.output_tokens '7'"),
                         ({"input_tokens": True}, "usage.input_tokens True"),
                         ({"input_tokens": 5, "output_tokens": 2.7}, "usage.output_tokens 2.7"),
                         ("many", "usage must be an object")):  # fmt: skip
        answer = {**LINE["messages"][1], "usage": usage}
        line = {**LINE, "messages": [LINE["messages"][0], answer, *LINE["messages"][2:]]}
        with pytest.raises(TraceError, match=r"t\.jsonl: line 1: message 1: ") as caught:
            anthropic.read(file_of(line), None)
        assert shown in str(caught.value)
    answer = {**LINE["messages"][1], "usage": {"output_tokens": 4}}
    (read,) = anthropic.read(file_of({**LINE, "messages": [LINE["messages"][0], answer]}),
                             None).lines  # fmt: skip
    assert (read.messages[-1]["input_tokens"], read.messages[-1]["output_tokens"]) == (0, 4)
