"""What a graph of one's own leaves in its state is stored when LangChain can read it as
messages, and is its sample's error, in one line, when it cannot; what the graph raises
(``CancelledError``, ``SystemExit`` included) is its sample's error, never the recording's
end, while a Ctrl-C still ends it."""

from __future__ import annotations

import asyncio
import json
import re

import pyarrow.parquet as pq
import pytest
from helpers import cli
from langchain_core.messages import AIMessage, HumanMessage

from tcbreplay._inputs.dataset import Sample
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.sample import AgentStateError, run_sample, state_messages


def test_a_graph_keeping_its_messages_as_dicts_is_recorded(tmp_path):
    """A StateGraph whose state holds ``messages: list`` with no reducer (its messages stay
    as given: the user's a dict) crashed the recording with a traceback (AttributeError:
    'dict' object has no attribute 'type'), exit 1, the run left failed with no rows."""
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=1", "--agent", "replay_fixtures:plain_list_graph",
                 "--limit", "3", "--run-id", "r", "--quiet", "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = pq.read_table(store / "r" / "samples.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["ok"] * 3
    messages = pq.read_table(store / "r" / "messages.parquet").to_pylist()
    first = sorted(
        (m for m in messages if m["sample_id"] == rows[0]["sample_id"]), key=lambda m: m["position"]
    )
    assert [m["type"] for m in first] == ["human", "ai"]
    assert json.loads(first[0]["message"])["data"]["content"] == rows[0]["input"]


@pytest.mark.parametrize(
    ("agent", "error_type", "says"),
    [
        ("none_messages", "AgentStateError",
         "the graph's last state has 'messages' NoneType, not a list of messages"),
        ("yields_nothing", "AgentStateError",
         "the graph returned no messages: its stream ended without a state"),
        ("no_messages", "AgentStateError",
         "the graph returned no messages: its last state's 'messages' is empty"),
        ("raises_cancelled", "AgentRaised", "the agent raised CancelledError"),
        ("exits", "AgentRaised", "the agent raised SystemExit(5)"),
    ],
)  # fmt: skip
def test_what_a_graph_leaves_or_raises_is_its_sample_s_error_in_one_line(
    tmp_path, agent, error_type, says
):
    """``messages`` None crashed the recording with a traceback, a CancelledError of the
    graph's own too, and SystemExit(5) ended it with exit 5 and no word; a graph that gave
    no state, or no messages, was stored ``ok`` with an empty conversation."""
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=1", "--agent", f"replay_fixtures:{agent}",
                 "--limit", "3", "--workers", "1", "--run-id", "r", "--quiet",
                 "--store", store)  # fmt: skip
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output
    assert f"({error_type}: " in errors[0] and says in errors[0]
    assert "check the graph that --agent builds" in errors[0]
    (row,) = pq.read_table(store / "r" / "samples.parquet").to_pylist()
    assert (row["status"], row["error_type"]) == ("error", error_type)
    assert says in row["error"]


def test_the_messages_of_a_state_are_read_in_any_form_langchain_reads():
    said = state_messages(
        {"messages": [{"role": "user", "content": "hi"}, ("assistant", "hello"), AIMessage("x")]}
    )
    assert [(m.type, m.content) for m in said] == [("human", "hi"), ("ai", "hello"), ("ai", "x")]
    for state, says in [
        (None, "the graph returned no messages: its stream ended without a state"),
        ({"msgs": []}, "holds no 'messages' (its keys: 'msgs')"),
        ({"messages": "hi"}, "has 'messages' str, not a list of messages"),
        (
            {"messages": [HumanMessage("hi"), 42]},
            "messages[1] (int) is no message LangChain reads: Unsupported message type: "
            "<class 'int'>",
        ),
        ([HumanMessage("hi")], "is list, not a mapping with 'messages'"),
    ]:
        with pytest.raises(AgentStateError, match=re.escape(says)):
            state_messages(state)


def test_a_sample_cancelled_from_outside_is_cancelled_still():
    """Ctrl-C (or a stopped run) cancels the task running a sample: that goes on, as a
    cancellation, not as the sample's error."""

    class Waits:
        async def astream(self, input, config=None, stream_mode=None):
            await asyncio.sleep(60)
            yield {"messages": []}

    sample = Sample(id="s", index=0, input="hi", target=())

    async def main() -> None:
        task = asyncio.ensure_future(run_sample(Waits(), sample, "r", RecordOptions()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
