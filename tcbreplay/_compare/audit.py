"""Audit records of scoring, and proof that stored scores follow from the raw traces.

Every scoring stores an audit record beside its scores: the sha256 of the run's
manifest, samples and messages files, of the SQL and the options it ran with, of the
files it wrote (:mod:`tcbreplay._score.result_hashes`), and the toolkit version.
:func:`verify_run` re-scores from the raw traces and compares everything.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tcbreplay._compare.audit_dashboard import check_dashboard
from tcbreplay._compare.audit_scores import KEYS, UNCOMPARED, Difference, PairsCheck, ScoresCheck
from tcbreplay._compare.replay_audit import verify_replay
from tcbreplay._score.audit_record import AUDITED_FILES, sha256_file, sql_sha256
from tcbreplay._score.options import missing_scoring_hint
from tcbreplay._score.read_results import read_summary, scoring_file_batches
from tcbreplay._score.result_hashes import changed_since_scoring
from tcbreplay._store import objects
from tcbreplay._store.files import written_dataset_sha256, written_sha256
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DATASET, SCORES, SCORES_ADDED
from tcbreplay.errors import InputError, StoreError

# Run-level fields compared by verify; the rest of a summary (times, paths) may differ.
SUMMARY_FIELDS = (
    "tsa", "tp", "ahr", "n_samples", "n_tsa", "n_tp", "args_invalid", "args_total",
    "args_missing", "n_errors", "accuracy", "valid", "total", "categories", "error_types",
)  # fmt: skip
BREAKDOWN_FIELDS = ("by_tool", "by_category")
# written since trials: checked where the stored summary has them
TRIAL_FIELDS = ("trials", "by_trial", "by_sample", "pass_k")
# the run's fields beside the numbers (from its manifest), checked where the stored summary
# has them
RUN_FIELDS = ("model", "simulated", "run_status", "n_missing")
# written since the outcome metrics and roles: checked where the stored summary has them
OUTCOME_FIELDS = (
    "exact", "n_exact", "exact_samples", "write_exact", "n_write_exact", "write_exact_samples",
    "first_divergence", "n_first_divergence", "roles", "focus", "covered", "n_covered",
    "covered_samples",
)  # fmt: skip


@dataclass
class AuditReport:
    """The outcome of :func:`verify_run`."""

    run_id: str
    scorings: list[str]
    samples_checked: int = 0
    differences: list[Difference] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)
    # data files whose sha256 is not the one the manifest recorded when the run wrote them
    changed_since_written: list[str] = field(default_factory=list)
    # scorings made by other SQL than this version's (an earlier version's): their numbers
    # are compared with a re-score by today's, and say nothing is wrong if identical
    other_sql: list[str] = field(default_factory=list)
    replay_of: str | None = None  # a replay's parent, whose turns it served
    turns_checked: int = 0  # a replay's served turns checked against the parent's messages
    # what could not be checked, and why (a run or scoring written before its sha256 was)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.changed_files and not self.changed_since_written

    def to_dict(self) -> dict[str, Any]:
        replay = {"replay_of": self.replay_of, "turns_checked": self.turns_checked}
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "scorings": self.scorings,
            "samples_checked": self.samples_checked,
            **(replay if self.replay_of is not None else {}),
            "changed_files": self.changed_files,
            "changed_since_written": self.changed_since_written,
            "other_sql": self.other_sql,
            "notes": self.notes,
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
    # scores a scoring did not finish (it writes its summary last): diff would read them
    for orphan in sorted(p.parent for p in (run.dir / SCORES).glob("*/scores.parquet")):
        if orphan not in everything and (scoring is None or orphan.name == scoring):
            report.differences.append(
                Difference(orphan.name, None, "summary.json", None, "scores without a summary")
            )
    if replay:
        report.replay_of = str((run.manifest.get("replay") or {}).get("parent_run_id") or "")
        report.turns_checked, found = verify_replay(store, run)
        report.differences += [Difference("replay", *item) for item in found]
    digests = {name: _hash_now(run.dir / name) for name in AUDITED_FILES}
    report.changed_since_written = [  # rows changed by hand (and maybe scored since)
        name
        for name, digest in digests.items()
        if written_sha256(run.manifest, name) not in (None, digest)
    ]
    _check_dataset(run, report)
    unsealed: list[str] = []  # scorings that record no sha256 of their own files
    for folder in folders:
        stored_summary, options = read_summary(run, folder)
        audit = stored_summary.get("audit")
        if not audit:
            report.differences.append(
                Difference(folder.name, None, "audit", None, "the summary has no audit record")
            )
            audit = {}
        if audit and audit.get("sql_sha256") != sql_sha256(options.scorer):
            report.other_sql.append(folder.name)
        report.differences += _options_difference(folder.name, audit, stored_summary)
        changed = changed_since_scoring(folder, stored_summary)
        if changed is None:
            unsealed.append(f"{SCORES}/{folder.name}")
        report.changed_files += [f"{SCORES}/{folder.name}/{name}" for name in changed or []]
        hashes = audit.get("inputs_sha256") or {}
        for name, digest in digests.items():
            if name not in hashes:  # a file the record does not vouch for is not verified
                if audit:
                    report.differences.append(
                        Difference(folder.name, None, f"inputs_sha256 {name}", None, digest)
                    )
            elif digest != hashes[name] and name not in report.changed_files:
                report.changed_files.append(name)
        check = _ScoresOf(run, folder)
        fresh = score_run(
            store, run_id, options, write=False, allow_incomplete=True, each_part=check.add
        )
        later = TRIAL_FIELDS + OUTCOME_FIELDS + RUN_FIELDS
        trial_fields = tuple(key for key in later if key in stored_summary)
        for key in SUMMARY_FIELDS + BREAKDOWN_FIELDS + trial_fields:
            if not same_numbers(stored_summary.get(key), fresh.summary.get(key)):
                report.differences.append(
                    Difference(folder.name, None, key, stored_summary.get(key), fresh.summary[key])
                )
        report.differences += check.finish()
        report.samples_checked = max(report.samples_checked, check.rows)
    if unsealed:  # (said once, for all of them: their contents are verified all the same)
        report.notes.append(
            f"{', '.join(unsealed)}: the sha256 of summary.json, scores.parquet and "
            "pairs.parquet are not checked: scored by an earlier version, which recorded none "
            "(score again to record them)"
        )
    board = check_dashboard(run, everything, scoring)
    report.changed_files += board.changed
    report.differences += board.differences
    report.notes += board.notes
    # after the re-scores, which name a message that is not JSON in one line
    report.differences += calls_differences(run)
    return report


def _check_dataset(run: Run, report: AuditReport) -> None:
    """The run's ``dataset.jsonl`` (the gold calls ``export`` writes) against the sha256 the
    manifest recorded when the run wrote it; a manifest written before it recorded one has
    only the sha256 of the file the run was made from, which vouches for it only where the
    run stored that file as it was."""
    path = run.dir / DATASET
    recorded = written_dataset_sha256(run.manifest)
    digest = _hash_now(path) if objects.is_file(path) else None
    if recorded is not None:
        if digest != recorded:
            report.changed_since_written.append(DATASET)
        return
    source = (run.manifest.get("dataset") or {}).get("sha256")
    if digest is not None and digest != source:
        report.notes.append(
            f"{DATASET} not checked: its sha256 is not the manifest's dataset sha256, which "
            "is of the file the run was made from (a run written by an earlier version records "
            f"none of {DATASET} itself)"
        )


def _options_difference(
    scoring: str, audit: dict[str, Any], summary: dict[str, Any]
) -> list[Difference]:
    """An audit record whose options' hash is not that of the options the summary holds
    (which every version has written alike: the record or the options edited)."""
    if not audit:
        return []
    text = json.dumps(summary.get("options"), sort_keys=True)
    given = hashlib.sha256(text.encode()).hexdigest()
    if audit.get("options_sha256") == given:
        return []
    return [Difference(scoring, None, "options_sha256", audit.get("options_sha256"), given)]


class _ScoresOf:
    """A stored scoring's per-sample scores and pairs compared with a re-score's as its parts
    come (:class:`~tcbreplay._compare.audit_scores.ScoresCheck`, ``PairsCheck``); the stored
    files opened at the first part, once the re-score has found nothing wrong with the run."""

    def __init__(self, run: Run, folder: Path) -> None:
        self.run, self.folder = run, folder
        self.check: ScoresCheck | None = None
        self.pairs: PairsCheck | None = None

    def add(self, fresh: pl.DataFrame, pairs: pl.DataFrame | None) -> None:
        if self.pairs is None:
            self.pairs = PairsCheck(self.folder.name, self._stored_pairs(pairs))
        self.pairs.add(pairs)
        if self.check is None:
            # a scores file written before a column was added is compared without it
            needed = [c for c in fresh.columns if c not in SCORES_ADDED]
            read = [c for c in fresh.columns if c not in UNCOMPARED or c in KEYS]
            read.append("scoring")  # checked against the folder's name (see ScoresCheck)
            path = self.folder / "scores.parquet"
            empty, batches = scoring_file_batches(self.run, path, needed, read)
            self.check = ScoresCheck(self.folder.name, empty, batches)
        self.check.add(fresh)

    @property
    def rows(self) -> int:
        return self.check.rows if self.check is not None else 0

    def _stored_pairs(self, fresh: pl.DataFrame | None) -> Iterator[pl.DataFrame] | None:
        """The stored pairs file's rows, batch by batch, of the re-score's columns (None: no
        such file)."""
        path = self.folder / "pairs.parquet"
        if not path.exists():
            return None
        columns = [] if fresh is None else fresh.columns
        return scoring_file_batches(self.run, path, ["sample_id"], columns)[1]

    def finish(self) -> list[Difference]:
        found = self.check.finish() if self.check is not None else []
        return found + (self.pairs.finish() if self.pairs is not None else [])


# Run-level means are exact sums divided once (tcbreplay._score.fold); scorings stored before
# summed in Polars' order, which may differ in the last bits: such means are compared to this
# relative tolerance (every count, and every per-sample number, exactly)
MEAN_REL_TOL = 1e-12


def same_numbers(stored: Any, fresh: Any) -> bool:
    """Whether a summary's value holds what the fresh one does: floats within
    ``MEAN_REL_TOL``, everything else (counts, texts, the shape) equal."""
    if isinstance(stored, float) and isinstance(fresh, float):
        return math.isclose(stored, fresh, rel_tol=MEAN_REL_TOL, abs_tol=0.0)
    if isinstance(stored, dict) and isinstance(fresh, dict):
        return stored.keys() == fresh.keys() and all(
            same_numbers(stored[k], fresh[k]) for k in stored
        )
    if isinstance(stored, list) and isinstance(fresh, list):
        return len(stored) == len(fresh) and all(
            same_numbers(a, b) for a, b in zip(stored, fresh, strict=True)
        )
    return type(stored) is type(fresh) and stored == fresh


# messages whose calls differ listed one by one, the rest counted
CALLS_SHOWN = 3


def calls_differences(run: Run) -> list[Difference]:
    """Messages whose stored ``calls`` (what scoring reads) are not the calls their message
    holds: a rewrite of either that kept the files' hashes in step (the manifest's and the
    audit record's) would otherwise re-score to the same numbers and verify."""
    from tcbreplay._store.views import connect, query_text

    con = connect(runs=[run], traces_only=True)
    try:
        rows = con.execute(query_text("audit_calls"), {"shown": CALLS_SHOWN}).fetchall()
    finally:
        con.close()
    found = [
        Difference(
            "messages",
            sample_id,
            f"calls of message {position} (trial {trial})",
            _cut(calls),
            _cut(held),
        )
        for sample_id, trial, position, calls, held, _ in rows
    ]
    more = rows[0][-1] - len(rows) if rows else 0
    if more:
        found.append(Difference("messages", None, "calls", f"{more} more messages", "differ"))
    return found


def _cut(text: str | None, most: int = 200) -> str | None:
    return text if text is None or len(text) <= most else text[: most - 1] + "…"


def _hash_now(path: Path) -> str:
    try:
        return sha256_file(path)
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
