"""The abet-evaluation dialect (``tcbreplay._importers.abet``): the original benchmark's
dashboard files, read against the dataset."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA

from tcbreplay._importers import abet
from tcbreplay._importers.dialect import TraceFile
from tcbreplay._inputs.benchmarks import get_benchmark, load_inputs
from tcbreplay.errors import InputError

DATA = TEST_DATA / "abet"


def test_it_sniffs_a_dashboard_file():
    verdict = abet.sniff(TraceFile.at(DATA / "evaluation.json"))
    assert verdict.confidence == 0.9
    assert verdict.reason == "a dashboard file of the original benchmark"


def test_an_inspect_log_with_samples_and_results_is_not_its():
    log = {"version": 2, "eval": {}, "results": {}, "samples": []}
    verdict = abet.sniff(TraceFile("log.json", data=json.dumps(log).encode()))
    assert not verdict.fits


def test_it_reads_a_trace_per_sample_and_needs_the_dataset():
    file = TraceFile("evaluation.json", data=(DATA / "evaluation.json").read_bytes())
    with pytest.raises(InputError, match="--format abet-evaluation needs --dataset"):
        abet.read(file, None)
    inputs = load_inputs(None, DATA / "dataset.json", get_benchmark("tool-call").tools, None,
                         need_prompt=False)  # fmt: skip
    source = abet.read(file, inputs)
    samples = [s.sample_id for s in inputs.dataset.samples]
    assert [line.sample_id for line in source.lines] == samples
