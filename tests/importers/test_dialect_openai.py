"""The openai dialect (``tcbreplay._importers.openai``): JSON Lines whose messages are in
OpenAI's Chat Completions form."""

from __future__ import annotations

import json
import math

import pytest

from tcbreplay._importers import openai
from tcbreplay._importers.dialect import TraceFile

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "add_numbers", "arguments": '{"a": 3, "b": 2}'},
}
LINE = {"sample_id": "add", "messages": [
    {"role": "user", "content": "What is 2 plus 3?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "5"},
]}  # fmt: skip


def file_of(*lines: dict) -> TraceFile:
    return TraceFile("t.jsonl", data="".join(json.dumps(x) + "\n" for x in lines).encode())


def test_it_sniffs_openais_roles_and_tool_calls():
    verdict = openai.sniff(file_of(LINE))
    assert (verdict.confidence, verdict.reason) == (
        0.8, "its messages have OpenAI's roles and tool_calls"
    )  # fmt: skip


def test_plain_turns_are_its_less_surely():
    verdict = openai.sniff(file_of({**LINE, "messages": LINE["messages"][:1]}))
    assert verdict.confidence == 0.5


def test_it_does_not_take_langchains_dicts():
    verdict = openai.sniff(file_of({"sample_id": 0, "messages": [{"type": "human", "data": {}}]}))
    assert not verdict.fits


def test_it_reads_the_calls_from_the_bytes():
    source = openai.read(file_of(LINE, {**LINE, "trial": 1}), None)
    assert [(line.sample_id, line.trial) for line in source.lines] == [("add", 0), ("add", 1)]
    ai = json.loads(source.lines[0].messages[1]["message"])  # as the store keeps it
    assert ai["data"]["tool_calls"][0]["args"] == {"a": 3, "b": 2}


def test_a_misspelt_or_call_bearing_key_is_refused_and_any_other_kept():
    """tool_call for tool_calls gave a sample of no calls, exit 0 (the key dropped)."""
    import pytest

    from tcbreplay.errors import TraceError

    misspelt = {"role": "assistant", "content": None, "tool_call": [CALL]}
    typo = {**LINE, "messages": [LINE["messages"][0], misspelt]}
    where = r"t\.jsonl: line 1: message 1: unknown key 'tool_call' \(did you mean 'tool_calls'\?\)"
    with pytest.raises(TraceError, match=where + "; an assistant message's calls are"):
        openai.read(file_of(typo), None)
    user = {"role": "user", "content": "What is 2 plus 3?", "timestamp": "2026-11-30T02:00:00Z"}
    other = {**LINE, "messages": [user, *LINE["messages"][1:]]}
    source = openai.read(file_of(other), None)
    kept = json.loads(source.lines[0].messages[0]["message"])
    assert kept["data"]["additional_kwargs"] == {"timestamp": "2026-11-30T02:00:00Z"}


def test_arguments_beyond_the_json_limits_are_refused_with_their_place():
    """They were stored as "arguments not a JSON object", their valid keys lost with them."""
    import pytest

    from tcbreplay.errors import TraceError

    text = '{"a": ' + "9" * 641 + ', "b": 2}'
    huge = {"id": "c1", "type": "function", "function": {"name": "add_numbers", "arguments": text}}
    answer = {"role": "assistant", "content": None, "tool_calls": [huge]}
    line = {**LINE, "messages": [LINE["messages"][0], answer]}
    where = r"line 1: message 1: tool_calls\[0\]\.function\.arguments: "
    with pytest.raises(TraceError, match=where + "an integer of 641 digits"):
        openai.read(file_of(line), None)


@pytest.mark.parametrize(
    ("value", "number"),
    [("NaN", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf), ("1e400", math.inf)],
)
def test_arguments_holding_no_finite_number_are_values_as_in_every_dialect(value, number):
    """Python's reader takes NaN and Infinity (no JSON) and reads 1e400 as infinity. The
    langchain dialect stores them as values, and the metric spec compares them as such (a
    NaN equals nothing): this dialect kept the whole text as invalid arguments, so an openai
    export of a run scored otherwise once imported (ahr 3/7 became 3/3, args_missing 0 6)."""
    text = '{"a": ' + value + ', "b": 3}'
    call = {"id": "c1", "type": "function", "function": {"name": "add_numbers", "arguments": text}}
    answer = {"role": "assistant", "content": None, "tool_calls": [call]}
    (read,) = openai.read(file_of({**LINE, "messages": [LINE["messages"][0], answer]}), None).lines
    data = json.loads(read.messages[-1]["message"])["data"]
    ((args,),) = [[c["args"] for c in data["tool_calls"]]]
    assert list(args) == ["a", "b"] and args["b"] == 3
    assert (math.isnan(args["a"]) and math.isnan(number)) or args["a"] == number


def test_a_lone_surrogate_in_arguments_is_refused_with_its_place():
    """It crashed the fold (UnicodeEncodeError, a traceback); elsewhere one is refused."""
    from tcbreplay.errors import TraceError

    text = '{"a": "\\ud800", "b": 3}'
    call = {"id": "c1", "type": "function", "function": {"name": "add_numbers", "arguments": text}}
    answer = {"role": "assistant", "content": None, "tool_calls": [call]}
    line = {**LINE, "messages": [LINE["messages"][0], answer]}
    where = r"line 1: message 1: tool_calls\[0\]\.function\.arguments: holds a lone surrogate"
    with pytest.raises(TraceError, match=where):
        openai.read(file_of(line), None)


def test_a_legacy_function_call_is_a_call():
    """The API's call before tool_calls was kept aside (additional_kwargs): the sample scored
    as an agent that made no call."""
    call = {"name": "add_numbers", "arguments": '{"a": 3, "b": 2}'}
    legacy = {"role": "assistant", "content": None, "function_call": call}
    line = {"sample_id": "add", "messages": [LINE["messages"][0], legacy]}
    (read,) = openai.read(file_of(line), None).lines
    data = json.loads(read.messages[-1]["message"])["data"]
    assert [(c["name"], c["args"]) for c in data["tool_calls"]] == [
        ("add_numbers", {"a": 3, "b": 2})
    ]
    assert "function_call" not in data["additional_kwargs"]
