"""Audit records of scoring, and proof that stored scores follow from the raw traces.

Every scoring stores an audit record beside its scores: the sha256 of the run's
manifest, samples and messages files, of the SQL and the options it ran with,
and the toolkit version. :func:`verify_run` re-scores from the raw traces and
compares everything.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tcbreplay import __version__
from tcbreplay.errors import InputError
from tcbreplay.sql import queries_dir
from tcbreplay.store import MANIFEST, MESSAGES, SAMPLES, SCORES, Run, Store

AUDITED_FILES = (MANIFEST, SAMPLES, MESSAGES)
SCORING_QUERIES = (
    "macros", "score_split", "score_gold_calls", "score_agent_calls", "json_values_as_text",
)  # fmt: skip
# Run-level fields compared by verify; the rest of a summary (times, paths) may differ.
SUMMARY_FIELDS = (
    "tsa", "tp", "ahr", "n_samples", "n_tsa", "n_tp", "args_invalid", "args_total",
    "args_missing", "n_errors",
)  # fmt: skip
BREAKDOWN_FIELDS = ("by_tool", "by_category")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def sql_sha256() -> str:
    """One hash over the SQL files scoring runs, in a fixed order."""
    digest = hashlib.sha256()
    for name in SCORING_QUERIES:
        digest.update(name.encode() + b"\0" + (queries_dir() / f"{name}.sql").read_bytes())
    return digest.hexdigest()


def current_sha256(run: Run, name: str) -> str:
    """sha256 of one of the run's files: the one the manifest recorded when the file was
    written, while its size and modification time are unchanged; else hashed now."""
    path = run.dir / name
    known = (run.manifest.get("files") or {}).get(name) or {}
    stat = path.stat()
    if known.get("size") == stat.st_size and known.get("mtime_ns") == stat.st_mtime_ns:
        return known["sha256"]
    return sha256_file(path)


class PendingAudit:
    """File hashes for the audit record, computed in a thread while scoring runs.

    The data files' sha256 recorded in the manifest when they were written is reused
    while a file's size and modification time are unchanged; ``audit verify`` always
    hashes the files anew.
    """

    def __init__(self, run: Run, options: dict[str, Any]) -> None:
        self.run = run
        self.options = options
        self.hashes: dict[str, str] = {}
        self._thread = threading.Thread(target=self._hash, daemon=True)
        self._thread.start()

    def _hash(self) -> None:
        for name in AUDITED_FILES:
            self.hashes[name] = current_sha256(self.run, name)

    def finish(self, scores: pl.DataFrame | None = None) -> dict[str, Any]:
        self._thread.join()
        options_text = json.dumps(self.options, sort_keys=True)
        return {
            "toolkit_version": __version__,
            "inputs_sha256": dict(self.hashes),
            "sql_sha256": sql_sha256(),
            "options": self.options,
            "options_sha256": hashlib.sha256(options_text.encode()).hexdigest(),
        }


def audit_record(run: Run, options: dict[str, Any]) -> PendingAudit:
    """Start hashing the run's inputs; ``finish()`` returns the audit record."""
    return PendingAudit(run, options)


@dataclass
class Difference:
    """One field that differs between stored and recomputed results."""

    scoring: str
    sample_id: str | None
    field: str
    stored: Any
    recomputed: Any


@dataclass
class AuditReport:
    """The outcome of :func:`verify_run`."""

    run_id: str
    scorings: list[str]
    samples_checked: int = 0
    differences: list[Difference] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.changed_files

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "scorings": self.scorings,
            "samples_checked": self.samples_checked,
            "changed_files": self.changed_files,
            "differences": [d.__dict__ for d in self.differences],
        }


def verify_run(store: Store, run_id: str, scoring: str | None = None) -> AuditReport:
    """Re-score the run from its raw traces and compare with every stored scoring."""
    from tcbreplay.score import ScoreOptions, score_run

    run = store.open_run(run_id)
    folders = sorted(p.parent for p in (run.dir / SCORES).glob("*/summary.json"))
    if scoring is not None:
        folders = [f for f in folders if f.name == scoring]
    if not folders:
        what = f"scoring named {scoring!r}" if scoring else "stored scores"
        raise InputError(
            f"run {run_id!r} has no {what} to verify", hint=f"score it: tcbreplay score {run_id}"
        )
    report = AuditReport(run_id=run.run_id, scorings=[f.name for f in folders])
    for folder in folders:
        stored_summary = json.loads((folder / "summary.json").read_text())
        audit = stored_summary.get("audit")
        if not audit:
            report.differences.append(
                Difference(folder.name, None, "audit", None, "the summary has no audit record")
            )
            audit = {}
        for name, digest in (audit.get("inputs_sha256") or {}).items():
            if sha256_file(run.dir / name) != digest and name not in report.changed_files:
                report.changed_files.append(name)
        options = ScoreOptions.from_dict(stored_summary.get("options") or {})
        fresh = score_run(store, run_id, options, write=False, allow_incomplete=True)
        for key in SUMMARY_FIELDS + BREAKDOWN_FIELDS:
            if stored_summary.get(key) != fresh.summary.get(key):
                report.differences.append(
                    Difference(folder.name, None, key, stored_summary.get(key), fresh.summary[key])
                )
        report.differences += _compare_scores(
            folder.name, pl.read_parquet(folder / "scores.parquet"), fresh.scores
        )
        report.samples_checked = max(report.samples_checked, fresh.scores.height)
    return report


def _compare_scores(scoring: str, stored: pl.DataFrame, fresh: pl.DataFrame) -> list[Difference]:
    out = []
    stored_ids = set(stored["sample_id"].to_list())
    fresh_ids = set(fresh["sample_id"].to_list())
    for sid in sorted(fresh_ids - stored_ids):
        out.append(Difference(scoring, sid, "sample", None, "present"))
    for sid in sorted(stored_ids - fresh_ids):
        out.append(Difference(scoring, sid, "sample", "present", None))
    joined = fresh.join(stored, on="sample_id", suffix="__stored")
    for column in fresh.columns:
        # run_id is the directory's name: a run copied or renamed keeps its numbers
        if column in ("sample_id", "run_id") or f"{column}__stored" not in joined.columns:
            continue
        a, b = pl.col(column), pl.col(f"{column}__stored")
        differs = joined.filter(~(a.eq_missing(b)))
        for sid, new, old in differs.select("sample_id", column, f"{column}__stored").iter_rows():
            out.append(Difference(scoring, sid, column, old, new))
    return out
