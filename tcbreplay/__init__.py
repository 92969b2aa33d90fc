"""tcbreplay: record tool-calling agent traces once, score them offline as often as you like.

The library's API is what this module exports (``__all__``), plus the typed errors in
:mod:`tcbreplay.errors`; the stage packages (``tcbreplay._inputs``, ``_record``,
``_replay``, ``_importers``, ``_store``, ``_score``, ``_query``, ``_compare``, ``_report``,
``_cli``) and the ground floor under them (``_version``, ``_json``, ``_secrets``, ...) are
private and may change.

    >>> import tcbreplay
    >>> store = tcbreplay.Store("traces")
    >>> result = tcbreplay.score_run(store, "demo-sim")
    >>> result.summary["tp"]

Names load on first use, so ``import tcbreplay`` stays cheap and scoring never loads
LangChain.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tcbreplay._version import __version__

# public name -> the private module that defines it
_EXPORTS = {
    # the store
    "Store": "tcbreplay._store.runs",
    "Run": "tcbreplay._store.run_dir",
    "export_jsonl": "tcbreplay._store.export",
    # inputs and recording
    "load_inputs": "tcbreplay._inputs.benchmarks",
    "BenchmarkInputs": "tcbreplay._inputs.benchmarks",
    "parse_model": "tcbreplay._record.models",
    "ModelChoice": "tcbreplay._record.models",
    "record_run": "tcbreplay._record.runner",
    "RecordOptions": "tcbreplay._record.options",
    "RecordSummary": "tcbreplay._record.runner",
    # replay
    "replay_run": "tcbreplay._replay.run",
    "ReplaySummary": "tcbreplay._replay.run",
    "RecordedChatModel": "tcbreplay._replay.model",
    "serve_run": "tcbreplay._replay.serve",
    "ReplayServer": "tcbreplay._replay.server",
    "import_traces": "tcbreplay._importers.import_run",
    "ImportSummary": "tcbreplay._importers.import_run",
    "export_traces": "tcbreplay._importers.export",
    # scoring and reading results
    "score_run": "tcbreplay._score.run",
    "ScoreOptions": "tcbreplay._score.options",
    "ScoreResult": "tcbreplay._score.results",
    "read_summary": "tcbreplay._score.read_results",
    # querying, comparing, reporting
    "run_sql": "tcbreplay._query.sql",
    "list_runs": "tcbreplay._query.sql",
    "QueryResult": "tcbreplay._query.sql",
    "diff_runs": "tcbreplay._compare.diff",
    "DiffResult": "tcbreplay._compare.diff",
    "verify_run": "tcbreplay._compare.audit",
    "AuditReport": "tcbreplay._compare.audit",
    "validity_runs": "tcbreplay._compare.validity",
    "Validity": "tcbreplay._compare.validity",
    "write_report": "tcbreplay._report",
    "write_catalog": "tcbreplay._query.catalog",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from tcbreplay._compare.audit import AuditReport as AuditReport
    from tcbreplay._compare.audit import verify_run as verify_run
    from tcbreplay._compare.diff import DiffResult as DiffResult
    from tcbreplay._compare.diff import diff_runs as diff_runs
    from tcbreplay._compare.validity import Validity as Validity
    from tcbreplay._compare.validity import validity_runs as validity_runs
    from tcbreplay._importers.export import export_traces as export_traces
    from tcbreplay._importers.import_run import ImportSummary as ImportSummary
    from tcbreplay._importers.import_run import import_traces as import_traces
    from tcbreplay._inputs.benchmarks import BenchmarkInputs as BenchmarkInputs
    from tcbreplay._inputs.benchmarks import load_inputs as load_inputs
    from tcbreplay._query.catalog import write_catalog as write_catalog
    from tcbreplay._query.sql import QueryResult as QueryResult
    from tcbreplay._query.sql import list_runs as list_runs
    from tcbreplay._query.sql import run_sql as run_sql
    from tcbreplay._record.models import ModelChoice as ModelChoice
    from tcbreplay._record.models import parse_model as parse_model
    from tcbreplay._record.options import RecordOptions as RecordOptions
    from tcbreplay._record.runner import RecordSummary as RecordSummary
    from tcbreplay._record.runner import record_run as record_run
    from tcbreplay._replay.model import RecordedChatModel as RecordedChatModel
    from tcbreplay._replay.run import ReplaySummary as ReplaySummary
    from tcbreplay._replay.run import replay_run as replay_run
    from tcbreplay._replay.serve import serve_run as serve_run
    from tcbreplay._replay.server import ReplayServer as ReplayServer
    from tcbreplay._report import write_report as write_report
    from tcbreplay._score.options import ScoreOptions as ScoreOptions
    from tcbreplay._score.read_results import read_summary as read_summary
    from tcbreplay._score.results import ScoreResult as ScoreResult
    from tcbreplay._score.run import score_run as score_run
    from tcbreplay._store.export import export_jsonl as export_jsonl
    from tcbreplay._store.run_dir import Run as Run
    from tcbreplay._store.runs import Store as Store


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tcbreplay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
