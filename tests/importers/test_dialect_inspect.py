"""The inspect dialect (``tcbreplay._importers.inspect``): inspect_ai's eval logs, read with
inspect_ai (the reading test is skipped without it)."""

from __future__ import annotations

import json

import pytest

from tcbreplay._importers import inspect
from tcbreplay._importers.dialect import TraceFile


def test_a_zip_file_or_an_eval_name_is_surely_its():
    assert inspect.sniff(TraceFile("log.bin", data=b"PK\x03\x04rest")).confidence == 1.0
    assert inspect.sniff(TraceFile("log.eval", data=b"not a zip")).confidence == 1.0


def test_a_json_log_is_told_by_eval_and_version():
    log = {"version": 2, "status": "success", "eval": {"task": "t"}, "samples": []}
    verdict = inspect.sniff(TraceFile("log.json", data=json.dumps(log).encode()))
    assert (verdict.confidence, verdict.reason) == (0.9, "an inspect_ai .json log (eval, samples)")
    assert not inspect.sniff(TraceFile("t.json", data=b'{"eval": {}}')).fits


def test_it_reads_a_log_given_as_bytes(tmp_path):
    pytest.importorskip("inspect_ai")
    from inspect_logs import write_log

    log = write_log(tmp_path / "logs", epochs=1)
    source = inspect.read(TraceFile(log.name, data=log.read_bytes()), None)
    assert sorted(line.sample_id for line in source.lines) == ["add", "mul"]
    assert source.dataset is not None  # the samples' metadata holds their gold calls
    assert source.tools and {t["name"] for t in source.tools} == {"add_numbers", "multiply_numbers"}
