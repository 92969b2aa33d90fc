"""Audit records of scoring, and proof that stored scores follow from the raw traces.

Every scoring stores an audit record beside its scores: the sha256 of the run's
manifest, samples and messages files, of the SQL and the options it ran with,
and the toolkit version. :func:`verify_run` re-scores from the raw traces and
compares everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tcbreplay._compare.replay_audit import verify_replay
from tcbreplay._score.audit_record import AUDITED_FILES, sha256_file
from tcbreplay._score.options import missing_scoring_hint
from tcbreplay._score.results import read_scoring_file, read_summary
from tcbreplay._store.runs import Run, Store
from tcbreplay._store.schema import SCORES, SCORES_ADDED
from tcbreplay.errors import InputError, StoreError

# Run-level fields compared by verify; the rest of a summary (times, paths) may differ.
SUMMARY_FIELDS = (
    "tsa", "tp", "ahr", "n_samples", "n_tsa", "n_tp", "args_invalid", "args_total",
    "args_missing", "n_errors", "accuracy", "valid", "total", "categories", "error_types",
)  # fmt: skip
BREAKDOWN_FIELDS = ("by_tool", "by_category")
# written since trials: checked where the stored summary has them
TRIAL_FIELDS = ("trials", "by_trial", "by_sample", "pass_k")
# written since the outcome metrics and roles: checked where the stored summary has them
OUTCOME_FIELDS = (
    "exact", "n_exact", "exact_samples", "write_exact", "n_write_exact", "write_exact_samples",
    "first_divergence", "n_first_divergence", "roles", "focus", "covered", "n_covered",
    "covered_samples",
)  # fmt: skip


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
    replay_of: str | None = None  # a replay's parent, whose turns it served
    turns_checked: int = 0  # a replay's served turns checked against the parent's messages

    @property
    def ok(self) -> bool:
        return not self.differences and not self.changed_files

    def to_dict(self) -> dict[str, Any]:
        replay = {"replay_of": self.replay_of, "turns_checked": self.turns_checked}
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "scorings": self.scorings,
            "samples_checked": self.samples_checked,
            **(replay if self.replay_of is not None else {}),
            "changed_files": self.changed_files,
            "differences": [d.__dict__ for d in self.differences],
        }


def verify_run(store: Store, run_id: str, scoring: str | None = None) -> AuditReport:
    """Re-score the run from its raw traces and compare with every stored scoring; of a
    replay, check also that the turns it served are its parent's stored messages, and that
    it made no live call unless it forked (:mod:`tcbreplay._compare.replay_audit`)."""
    run = store.open_run(run_id)
    with run.reading():  # not deleted (record --overwrite) while it is verified
        return _verify(store, run, scoring)


def _verify(store: Store, run: Run, scoring: str | None) -> AuditReport:
    from tcbreplay._score.run import score_run

    run_id = run.run_id
    everything = sorted(p.parent for p in (run.dir / SCORES).glob("*/summary.json"))
    folders = [f for f in everything if scoring is None or f.name == scoring]
    replay = run.manifest.get("source") == "replay"
    if not folders and not (replay and scoring is None):
        what = f"scoring named {scoring!r}" if scoring else "stored scores"
        hint = f"score it: tcbreplay score {run_id}"
        if scoring:
            hint = missing_scoring_hint(run_id, scoring, [f.name for f in everything])
        raise InputError(f"run {run_id!r} has no {what} to verify", hint=hint)
    report = AuditReport(run_id=run.run_id, scorings=[f.name for f in folders])
    if replay:
        report.replay_of = str((run.manifest.get("replay") or {}).get("parent_run_id") or "")
        report.turns_checked, found = verify_replay(store, run)
        report.differences += [Difference("replay", *item) for item in found]
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
        trial_fields = tuple(key for key in TRIAL_FIELDS + OUTCOME_FIELDS if key in stored_summary)
        for key in SUMMARY_FIELDS + BREAKDOWN_FIELDS + trial_fields:
            if stored_summary.get(key) != fresh.summary.get(key):
                report.differences.append(
                    Difference(folder.name, None, key, stored_summary.get(key), fresh.summary[key])
                )
        # a scores file written before a column was added is compared without it
        needed = [c for c in fresh.scores.columns if c not in SCORES_ADDED]
        stored = read_scoring_file(run, folder / "scores.parquet", needed)
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
    keys = ["sample_id", "trial"]
    if "trial" not in stored.columns:  # scored before trials: every row is trial 0
        stored = stored.with_columns(pl.lit(0, pl.Int32).alias("trial"))
    stored_ids = set(stored.select(keys).iter_rows())
    fresh_ids = set(fresh.select(keys).iter_rows())
    for key in sorted(fresh_ids - stored_ids):
        out.append(Difference(scoring, _label(*key), "sample", None, "present"))
    for key in sorted(stored_ids - fresh_ids):
        out.append(Difference(scoring, _label(*key), "sample", "present", None))
    joined = fresh.join(stored, on=keys, suffix="__stored")
    for column in fresh.columns:
        # run_id is the directory's name: a run copied or renamed keeps its numbers; scoring
        # is the folder's, and a scoring stored as spec under an earlier version's defaults
        # (abs_tol 1e-9) is re-scored with the options it records, whose name today differs
        if column in (*keys, "run_id", "scoring") or f"{column}__stored" not in joined.columns:
            continue
        a, b = pl.col(column), pl.col(f"{column}__stored")
        differs = joined.filter(~(a.eq_missing(b)))
        rows = differs.select(*keys, column, f"{column}__stored").iter_rows()
        for sid, trial, new, old in rows:
            out.append(Difference(scoring, _label(sid, trial), column, old, new))
    return out


def _label(sample_id: str, trial: int) -> str:
    """A sample named as the user knows it: its id, and its trial when it has several."""
    return sample_id if not trial else f"{sample_id} (trial {trial})"
