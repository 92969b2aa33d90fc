"""Google ADK eval sets as datasets (``tcbreplay._inputs.adk_evalset``): each case an entry,
its expected tool trajectory the gold calls; the gold of OpenTelemetry traces. The eval set
is written by ADK's own models (tests/data/otel/make_adk_evalset.py)."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA, cli

from tcbreplay._inputs.dataset import load_dataset
from tcbreplay.errors import DatasetError

OTEL = TEST_DATA / "otel"
EVALSET = OTEL / "shop.evalset.json"
SHOP_TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"


def test_each_case_is_an_entry_with_its_tool_trajectory_as_gold():
    dataset = load_dataset(EVALSET)
    assert [s.sample_id for s in dataset.samples] == [
        "mul-7-by-8",
        "price-pen",
        "backpack-bottle-pen",
    ]
    first = dataset.samples[0]
    assert first.input == "Multiply 7 by 8 for me."
    assert [(c["name"], c["args"]) for c in first.gold_calls()] == [
        ("multiply_numbers", {"a": 8, "b": 7})
    ]
    assert first.metadata == {
        "eval_set_id": "shop",
        "invocations": 1,
        "final_response": "7 times 8 is 56.00.",
    }
    assert [c["name"] for c in dataset.samples[2].gold_calls()] == [
        "list_items",
        "add_numbers",
        "add_numbers",
    ]


def test_camel_case_and_several_invocations(tmp_path):
    doc = {"evalSetId": "s", "evalCases": [{"evalId": "c", "conversation": [
        {"userContent": {"role": "user", "parts": [{"text": "first"}]},
         "intermediateData": {"toolUses": [{"name": "a", "args": {"x": 1}}]}},
        {"userContent": {"role": "user", "parts": [{"text": "then"}]},
         "intermediateData": {"toolUses": [{"name": "b", "args": {}}]},
         "finalResponse": {"role": "model", "parts": [{"text": "done"}]}},
    ]}]}  # fmt: skip
    path = tmp_path / "s.evalset.json"
    path.write_text(json.dumps(doc))
    (sample,) = load_dataset(path).samples
    assert (sample.sample_id, sample.input) == ("c", "first")
    assert [c["name"] for c in sample.gold_calls()] == ["a", "b"]
    assert sample.metadata["turns"] == ["then"]


def test_a_case_without_a_name_on_a_tool_use_is_refused_with_its_place(tmp_path):
    doc = {"eval_set_id": "s", "eval_cases": [{"eval_id": "c", "conversation": [
        {"user_content": {"parts": [{"text": "q"}]}, "intermediate_data": {"tool_uses": [{}]}},
    ]}]}  # fmt: skip
    path = tmp_path / "s.evalset.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        DatasetError,
        match=r"s.evalset.json: eval_cases\[0\]: conversation\[0\]: tool_uses\[0\] needs a name",
    ):
        load_dataset(path)


def test_the_eval_set_is_the_gold_of_traces_matched_by_their_input(tmp_path):
    """openai-v2's spans of the same three questions, scored against the eval set: the
    7 x 9 is the one case whose trajectory is wrong."""
    store = tmp_path / "store"
    result = cli("import", "--traces", OTEL / "openai_v2_latest.otlp.jsonl", "--dataset", EVALSET,
                 "--tools", SHOP_TOOLS, "--run-id", "adk", "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "3/3 samples imported" in result.output
    assert cli("score", "adk", "--store", store).exit_code == 0
    rows = cli("--format", "json", "sql", "select sample_id, exact from scores where run_id = "
               "'adk' order by sample_id", "--store", store)  # fmt: skip
    assert json.loads(rows.output) == [
        {"sample_id": "backpack-bottle-pen", "exact": True},
        {"sample_id": "mul-7-by-8", "exact": False},
        {"sample_id": "price-pen", "exact": True},
    ]
