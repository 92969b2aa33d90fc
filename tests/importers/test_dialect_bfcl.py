"""The bfcl dialect (``tcbreplay._importers.bfcl``): BFCL's results files, read with its
questions and answers; sniffing recognises them but never picks the dialect."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA

from tcbreplay._importers import bfcl, registry
from tcbreplay._importers.dialect import TraceFile
from tcbreplay.errors import InputError

DATA = TEST_DATA / "bfcl"
RESULT = {"id": "simple_python_0",
          "result": [{"calculate_triangle_area": {"base": 10, "height": 5}}]}  # fmt: skip


def results() -> TraceFile:
    return TraceFile("results.jsonl", data=(json.dumps(RESULT) + "\n").encode())


def test_it_recognises_a_results_file_but_is_only_given():
    assert bfcl.sniff(results()).fits
    assert registry.get("bfcl").given_only is not None
    assert not bfcl.sniff(TraceFile("t.jsonl", data=b'{"sample_id": 0, "messages": []}\n')).fits


def test_it_reads_the_answers_with_the_questions():
    with pytest.raises(InputError, match="--format bfcl needs --dataset"):
        bfcl.read(results(), None)
    name = "BFCL_v4_simple_python.json"
    inputs = bfcl.load_bfcl_inputs(DATA / name, DATA / "possible_answer" / name)
    (line,) = bfcl.read(results(), inputs).lines
    assert line.sample_id == "simple_python_0"
    calls = json.loads(line.messages[-1]["message"])["data"]["tool_calls"]  # as stored
    assert [(c["name"], c["args"]) for c in calls] == [
        ("calculate_triangle_area", {"base": 10, "height": 5})
    ]
