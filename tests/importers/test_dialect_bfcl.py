"""The bfcl dialect (``tcbreplay._importers.bfcl``): BFCL's results files, read with its
questions and answers; sniffing recognises them but never picks the dialect."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA

from tcbreplay._importers import bfcl, registry
from tcbreplay._importers.dialect import TraceFile
from tcbreplay.errors import InputError, TraceError

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


def test_counts_latency_and_a_failed_inference_are_kept():
    """bfcl-eval writes token counts and latency beside a result, and a failed inference as
    its error's text (which may quote the key): they were dropped, and the failure stored as
    an ok answer with the key in it."""
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"
    lines = [
        {**RESULT, "input_token_count": 123, "output_token_count": 45, "latency": 1.5},
        {"id": "simple_python_2", "traceback": "...",
         "result": f"Error during inference: Error code: 401 - Incorrect API key provided: {key}"},
    ]  # fmt: skip
    name = "BFCL_v4_simple_python.json"
    inputs = bfcl.load_bfcl_inputs(DATA / name, DATA / "possible_answer" / name)
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    answered, failed = bfcl.read(TraceFile("results.jsonl", data=data), inputs).lines
    assert (answered.status, answered.error) == ("ok", None)
    kept = {k: answered.messages[-1][k] for k in ("input_tokens", "output_tokens", "latency_s")}
    assert kept == {"input_tokens": 123, "output_tokens": 45, "latency_s": 1.5}
    assert (failed.status, failed.error_type) == ("error", "bfcl_inference")
    assert failed.error.endswith("401 - Incorrect API key provided: [redacted]")
    assert key not in json.dumps([failed.messages, failed.error])
    bad = TraceFile("r.jsonl", data=(json.dumps({**RESULT, "latency": "slow"}) + "\n").encode())
    with pytest.raises(TraceError, match=r"r\.jsonl: line 1: latency .slow. is not a count"):
        bfcl.read(bad, inputs)
