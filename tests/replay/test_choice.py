"""What a request's tool_choice and parallel_tool_calls allow of a recorded answer
(``tcbreplay._replay.choice``), in LangChain's, OpenAI's and Anthropic's forms."""

from __future__ import annotations

import pytest

from tcbreplay._replay.choice import conflict


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
    ],
)  # fmt: skip
def test_an_answer_the_request_forbids_diverges(settings, calls, path):
    found = conflict(3, settings, calls)
    assert (found.path if found else None) == path
    if found is not None:
        assert (found.turn, found.component) == (3, "params")
