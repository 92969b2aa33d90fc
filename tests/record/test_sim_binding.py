"""The sim model answers as its tools are bound: ``tool_choice`` (no call, a call, one named
tool's calls) and ``parallel_tool_calls`` (one call a turn), in LangChain's, OpenAI's and
Anthropic's forms; an agent that binds them replays its own recording unchanged."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tcbreplay._inputs.benchmarks.tool_call.tools import add_numbers, list_items, multiply_numbers
from tcbreplay._record.models.sim import SAMPLE_ID_KEY, SimChatModel, parse_sim_options

TOOLS = [list_items, add_numbers, multiply_numbers]
GOLD = [
    ("add_numbers", {"a": 3, "b": 4}),
    ("multiply_numbers", {"a": 7, "b": 2}),
    ("add_numbers", {"a": 14, "b": 1}),
    ("list_items", {}),
]
# every call joins the turn before it (up to three a turn), and no mistakes
SETTINGS = parse_sim_options("seed=1,error_rate=0,parallel=1")


def answers(model, turns: int = 6) -> list[list[tuple[str, dict]]]:
    """The calls of each turn the model answers, its calls answered, until it calls none."""
    messages: list = [HumanMessage("go")]
    made = []
    for _ in range(turns):
        answer = model.invoke(messages, config={"metadata": {SAMPLE_ID_KEY: "s"}})
        assert isinstance(answer, AIMessage)
        made.append([(c["name"], c["args"]) for c in answer.tool_calls])
        messages.append(answer)
        if not answer.tool_calls:
            return made
        messages += [ToolMessage("{}", tool_call_id=c["id"]) for c in answer.tool_calls]
    return made


@pytest.fixture
def sim() -> SimChatModel:
    return SimChatModel.from_settings(SETTINGS, {"s": GOLD})


def test_unbound_the_plan_is_played(sim):
    assert answers(sim.bind_tools(TOOLS)) == [GOLD[:3], GOLD[3:], []]


@pytest.mark.parametrize(
    "binding",
    [{"parallel_tool_calls": False},
     {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}],
)  # fmt: skip
def test_no_parallel_calls_plays_the_plan_one_call_a_turn(sim, binding):
    assert answers(sim.bind_tools(TOOLS, **binding)) == [[call] for call in GOLD] + [[]]


@pytest.mark.parametrize("choice", ["none", {"type": "none"}])
def test_tool_choice_none_calls_nothing(sim, choice):
    assert answers(sim.bind_tools(TOOLS, tool_choice=choice)) == [[]]


@pytest.mark.parametrize(
    "choice",
    ["add_numbers", {"type": "function", "function": {"name": "add_numbers"}},
     {"type": "tool", "name": "add_numbers"}],
)  # fmt: skip
def test_a_named_tool_is_the_only_one_called(sim, choice):
    made = answers(sim.bind_tools(TOOLS, tool_choice=choice), turns=3)
    # the turn's calls of that tool; a turn planned without one calls its first planned call
    assert made == [[GOLD[0], GOLD[2]], [GOLD[0]], [GOLD[0]]]


@pytest.mark.parametrize("choice", ["any", "required", True, {"type": "any"}])
def test_a_required_call_is_made_once_the_plan_is_done(sim, choice):
    made = answers(sim.bind_tools(TOOLS, tool_choice=choice), turns=4)
    assert made[:2] == [GOLD[:3], GOLD[3:]]
    names = {tool.__name__ for tool in TOOLS}
    assert [len(calls) for calls in made[2:]] == [1, 1]
    assert {name for calls in made[2:] for name, _ in calls} <= names
    # seeded: the same calls again
    again = SimChatModel.from_settings(SETTINGS, {"s": GOLD})
    assert answers(again.bind_tools(TOOLS, tool_choice=choice), turns=4) == made


def test_a_call_may_bind_them_too(sim):
    """``model.bind(tool_choice=...)`` hands them to each call, over bind_tools' own."""
    bound = sim.bind_tools(TOOLS, tool_choice="required").bind(tool_choice="none")
    assert answers(bound) == [[]]


def test_a_named_tool_not_bound_is_refused_as_a_provider_refuses_it(sim):
    from tcbreplay.errors import ModelError

    with pytest.raises(ModelError, match="tool_choice names 'nope', which is not among the tools"):
        answers(sim.bind_tools(TOOLS, tool_choice="nope"))
