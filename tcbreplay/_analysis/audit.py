"""Audit records of scoring, and proof that stored scores follow from the raw traces.

Every scoring stores an audit record beside its scores: the sha256 of the run's
manifest, samples and messages files, of the SQL and the options it ran with,
and the toolkit version. :func:`verify_run` re-scores from the raw traces and
compares everything.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tcbreplay import __version__
from tcbreplay._inputs import limits
from tcbreplay._store.runs import DEFAULT_STORE, MANIFEST, MESSAGES, SAMPLES, SCORES, Run, Store
from tcbreplay._store.views import queries_dir
from tcbreplay.errors import InputError, StoreError, first_line

if TYPE_CHECKING:
    from tcbreplay._score.run import ScoreOptions

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
_SHA256 = re.compile(r"[0-9a-f]{64}")


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
    where = f"{run.dir / MANIFEST}: files: {name}"
    if not isinstance(known, dict):
        raise StoreError(f"{where}: {known!r} is not an object (sha256, size, mtime_ns)")
    stat = path.stat()
    if known.get("size") == stat.st_size and known.get("mtime_ns") == stat.st_mtime_ns:
        digest = known.get("sha256")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise StoreError(f"{where}: sha256 {digest!r} is not a sha256 in hex")
        return digest
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
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._hash, daemon=True)
        self._thread.start()

    def _hash(self) -> None:
        try:
            for name in AUDITED_FILES:
                self.hashes[name] = current_sha256(self.run, name)
        except BaseException as exc:  # raised by finish(), in the thread that can report it
            self._error = exc

    def finish(self, scores: pl.DataFrame | None = None) -> dict[str, Any]:
        self._thread.join()
        if self._error is not None:
            raise self._error
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


def rescore_hint(run: Run, scoring: str) -> str | None:
    """The command that writes the run's scoring folder ``scoring`` again."""
    from tcbreplay._score.run import ScoreOptions

    options = ScoreOptions.from_scoring(scoring)
    if options is None:
        return None
    flags = ""
    if options.scorer == "abet":
        flags = " --scorer abet"
    elif scoring != "spec":
        flags = f" --rel-tol {options.rel_tol:g} --abs-tol {options.abs_tol:g}"
    store = run.dir.parent
    where = "" if store == Path(DEFAULT_STORE) else f" --store {shlex.quote(str(store))}"
    return f"score it again: tcbreplay score {shlex.quote(run.run_id)}{flags}{where}"


def read_summary(run: Run, folder: Path) -> tuple[dict[str, Any], ScoreOptions]:
    """A stored scoring's summary.json and the options it was scored with, checked for the
    shape its readers rely on."""
    from tcbreplay._score.run import ScoreOptions

    path = folder / "summary.json"
    hint = rescore_hint(run, folder.name)
    try:
        summary = limits.loads(path.read_text())
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        raise StoreError(f"{path}: unreadable summary ({first_line(exc)})", hint=hint) from exc
    if not isinstance(summary, dict):
        raise StoreError(f"{path}: not a scoring summary (not a JSON object)", hint=hint)
    for key in ("options", "audit"):
        if summary.get(key) is not None and not isinstance(summary[key], dict):
            raise StoreError(f"{path}: {key} is not an object", hint=hint)
    hashes = (summary.get("audit") or {}).get("inputs_sha256")
    if hashes is not None and not (
        isinstance(hashes, dict)
        and all(name in AUDITED_FILES and isinstance(v, str) for name, v in hashes.items())
    ):
        raise StoreError(
            f"{path}: audit.inputs_sha256 is not the sha256 of {', '.join(AUDITED_FILES)}",
            hint=hint,
        )
    try:
        options = ScoreOptions.from_dict(summary.get("options") or {})
    except (InputError, TypeError) as exc:
        raise StoreError(f"{path}: options: {first_line(exc)}", hint=hint) from exc
    return summary, options


def read_scoring_file(run: Run, path: Path, columns: list[str]) -> pl.DataFrame:
    """A stored scoring's Parquet file (scores or pairs), with at least ``columns``."""
    hint = rescore_hint(run, path.parent.name)
    try:
        # read by Arrow, which reports a corrupt file where Polars may panic
        frame = pl.from_arrow(pq.read_table(path))
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise StoreError(
            f"{path}: not a readable Parquet file ({first_line(exc)})", hint=hint
        ) from exc
    assert isinstance(frame, pl.DataFrame)
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise StoreError(f"{path}: no column {', '.join(missing)}", hint=hint)
    return frame


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
    run = store.open_run(run_id)
    with run.reading():  # not deleted (record --overwrite) while it is verified
        return _verify(store, run, scoring)


def _verify(store: Store, run: Run, scoring: str | None) -> AuditReport:
    from tcbreplay._score.run import score_run

    run_id = run.run_id
    folders = sorted(p.parent for p in (run.dir / SCORES).glob("*/summary.json"))
    if scoring is not None:
        folders = [f for f in folders if f.name == scoring]
    if not folders:
        what = f"scoring named {scoring!r}" if scoring else "stored scores"
        raise InputError(
            f"run {run_id!r} has no {what} to verify", hint=f"score it: tcbreplay score {run_id}"
        )
    report = AuditReport(run_id=run.run_id, scorings=[f.name for f in folders])
    digests = {name: _hash_now(run.dir / name) for name in AUDITED_FILES}
    for folder in folders:
        stored_summary, options = read_summary(run, folder)
        audit = stored_summary.get("audit")
        if not audit:
            report.differences.append(
                Difference(folder.name, None, "audit", None, "the summary has no audit record")
            )
            audit = {}
        hashes = audit.get("inputs_sha256") or {}
        for name, digest in digests.items():
            if name not in hashes:  # a file the record does not vouch for is not verified
                if audit:
                    report.differences.append(
                        Difference(folder.name, None, f"inputs_sha256 {name}", None, digest)
                    )
            elif digest != hashes[name] and name not in report.changed_files:
                report.changed_files.append(name)
        fresh = score_run(store, run_id, options, write=False, allow_incomplete=True)
        for key in SUMMARY_FIELDS + BREAKDOWN_FIELDS:
            if stored_summary.get(key) != fresh.summary.get(key):
                report.differences.append(
                    Difference(folder.name, None, key, stored_summary.get(key), fresh.summary[key])
                )
        stored = read_scoring_file(run, folder / "scores.parquet", fresh.scores.columns)
        report.differences += _compare_scores(folder.name, stored, fresh.scores)
        report.samples_checked = max(report.samples_checked, fresh.scores.height)
    return report


def _hash_now(path: Path) -> str:
    try:
        return sha256_file(path)
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


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
