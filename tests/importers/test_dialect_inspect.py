"""The inspect dialect (``tcbreplay._importers.inspect``): how it knows inspect_ai's eval logs.
Reading one, with inspect_ai, is tested in test_import_inspect.py, beside the other tests that
pay inspect_ai's import."""

from __future__ import annotations

import json

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
