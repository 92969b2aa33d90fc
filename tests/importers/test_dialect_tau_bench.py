"""The tau-bench dialect (``tcbreplay._importers.tau_bench``): τ-bench's results files, which
hold the samples too."""

from __future__ import annotations

import json

from helpers import TEST_DATA

from tcbreplay._importers import tau_bench
from tcbreplay._importers.dialect import TraceFile

RESULTS = TEST_DATA / "tau-bench" / "gpt-4o-airline-sample.json"


def test_it_sniffs_a_list_of_results():
    verdict = tau_bench.sniff(TraceFile.at(RESULTS))
    assert verdict.confidence == 0.9
    assert verdict.reason.startswith("a JSON list of τ-bench results")


def test_another_list_is_close_but_not_its():
    verdict = tau_bench.sniff(TraceFile("t.json", data=json.dumps([{"a": 1}]).encode()))
    assert not verdict.fits and verdict.close
    assert not tau_bench.sniff(TraceFile("t.json", data=b'{"a": 1}')).close


def test_it_reads_the_tasks_as_the_samples():
    source = tau_bench.read(TraceFile(RESULTS.name, data=RESULTS.read_bytes()), None)
    assert source.dataset is not None
    assert source.benchmark == ("tau-bench", "τ-bench")
    assert {line.sample_id for line in source.lines} == set(source.dataset.by_id)
    assert max(line.trial for line in source.lines) == 3
