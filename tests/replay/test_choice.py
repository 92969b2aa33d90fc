"""What a request's tool_choice and parallel_tool_calls allow of a recorded answer
(``tcbreplay._replay.choice``), in LangChain's, OpenAI's and Anthropic's forms."""

from __future__ import annotations

import pytest

from tcbreplay._replay.choice import conflict


def chat_allowed(mode: str, *names: str) -> dict:
    tools = [{"type": "function", "function": {"name": n}} for n in names]
    return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}


def responses_allowed(mode: str, *names: str) -> dict:
    return {"type": "allowed_tools", "mode": mode,
            "tools": [{"type": "function", "name": n} for n in names]}  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "calls", "path"),
    [
        ({}, ["add"], None),
        ({"tool_choice": "auto"}, [], None),
        ({"tool_choice": "none"}, ["add"], "params.tool_choice"),
        ({"tool_choice": "none"}, [], None),
        ({"tool_choice": {"type": "none"}}, ["add"], "params.tool_choice"),
        ({"tool_choice": "required"}, [], "params.tool_choice"),
        ({"tool_choice": "any"}, [], "params.tool_choice"),
        ({"tool_choice": True}, [], "params.tool_choice"),
        ({"tool_choice": {"type": "any"}}, ["add"], None),
        ({"tool_choice": "add"}, ["add"], None),
        ({"tool_choice": "add"}, ["list_items"], "params.tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "add"}}}, ["add", "list"],
         "params.tool_choice"),
        ({"tool_choice": {"type": "tool", "name": "add"}}, [], "params.tool_choice"),
        ({"parallel_tool_calls": False}, ["add", "add"], "params.parallel_tool_calls"),
        ({"parallel_tool_calls": False}, ["add"], None),
        ({"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, ["a", "b"],
         "params.parallel_tool_calls"),
        # allowed_tools: Chat Completions' form, then the Responses API's
        ({"tool_choice": chat_allowed("required", "add", "list")}, ["list", "add"], None),
        ({"tool_choice": chat_allowed("auto", "add")}, [], None),
        ({"tool_choice": chat_allowed("auto", "add")}, ["mul"], "params.tool_choice"),
        ({"tool_choice": chat_allowed("required", "add")}, [], "params.tool_choice"),
        ({"tool_choice": responses_allowed("required", "add")}, ["add"], None),
        ({"tool_choice": responses_allowed("required", "add")}, ["mul"], "params.tool_choice"),
        ({"tool_choice": responses_allowed("required", "add")}, [], "params.tool_choice"),
        ({"tool_choice": responses_allowed("auto", "add", "mul")}, ["add", "mul"], None),
    ],
)  # fmt: skip
def test_an_answer_the_request_forbids_diverges(settings, calls, path):
    found = conflict(3, settings, calls)
    assert (found.path if found else None) == path
    if found is not None:
        assert (found.turn, found.component) == (3, "params")
