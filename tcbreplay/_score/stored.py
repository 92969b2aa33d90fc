"""A stored scoring that scoring the run again would write again: read, not written.

A scoring is a function of the run's files, its options, the SQL the scorer runs and the
toolkit's version, which its audit record holds; where all of them are those of the scoring
stored under its options' name (its dashboard file the one it wrote, in the same mode; with
``--dashboard none``, one that records none), ``score`` gives that scoring as it is stored and
writes nothing, so that a store one may only read (read-only credentials on object storage, a
read-only mount) still answers it. A scoring against ``--gold-run`` is always done again (the
gold run's files are not in the record), and so is one whose files do not read as Parquet (what
a damaged file's error says to do).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tcbreplay._score.audit_record import PendingAudit, sha256_file
from tcbreplay._score.dashboard import dashboard_path
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.results import read_summary
from tcbreplay._store import objects
from tcbreplay._store.files import TEMPORARY_SUFFIX
from tcbreplay._store.parquet import parquet_file
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import DEFAULT_SCORER, SCORES
from tcbreplay.errors import StoreError

# what of an audit record says what the scoring read and how: equal, the results are
_SAME = ("toolkit_version", "inputs_sha256", "inputs_seen", "sql_sha256", "options_sha256")


def stored_scoring(
    run: Run, options: ScoreOptions, dashboard: str, audit: PendingAudit
) -> dict[str, Any] | None:
    """The summary of the scoring stored for ``options`` when scoring the run again (its
    dashboard file in mode ``dashboard``, or ``none``) would write it again; else None."""
    if options.gold_run is not None:
        return None
    folder = run.scores_dir(options.scoring)
    names = set(objects.list_names(folder)) if objects.is_remote(folder) else None
    wanted = ["summary.json", "scores.parquet"]
    if options.scorer == DEFAULT_SCORER:
        wanted.append("pairs.parquet")
    if names is None:
        names = {name for name in wanted if (folder / name).exists()}
    if not set(wanted) <= names:
        return None
    if names_left_over(run):  # (a scoring killed before its renames: the next one writing
        return None  # removes what it left)
    try:
        summary, stored_options = read_summary(run, folder)
        for name in wanted[1:]:  # (their footers: a file cut short, or no Parquet, is not)
            parquet_file(folder / name)
    except (StoreError, OSError, ValueError, pa.ArrowException):  # (scored again: replaced)
        return None
    before = summary.get("audit") or {}
    if stored_options.to_dict() != options.to_dict() or summary.get("run_status") != run.status:
        return None
    try:
        now = audit.finish()
    except StoreError:  # (a data file the run did not write: said where scoring says it)
        return None
    if any(before.get(key) != now.get(key) for key in _SAME):
        return None
    if dashboard == "none":  # (one that records a dashboard file: audit verify holds the file
        # to the latest scoring recording it, which writing it again would make this one)
        return None if "dashboard" in before else summary
    if not _dashboard_written(run, summary, dashboard):
        return None
    return summary


def names_left_over(run: Run) -> bool:
    """Whether a scoring of the run (a local one's) was killed before it put its files in
    place, leaving them under temporary names."""
    if objects.is_remote(run.dir):
        return False
    return any((run.dir / SCORES).glob(f"*/*{TEMPORARY_SUFFIX}"))


def _dashboard_written(run: Run, summary: dict[str, Any], mode: str) -> bool:
    """Whether the run's dashboard file is the one the scoring of ``summary`` wrote, in
    ``mode``: its record names this scoring (a scoring that writes none carries the one
    before's) and the file's sha256 is the recorded one."""
    record = (summary.get("audit") or {}).get("dashboard")
    if not isinstance(record, dict):
        return False
    if record.get("mode") != mode or record.get("scored_at") != summary.get("scored_at"):
        return False
    path = dashboard_path(run)
    try:
        return sha256_file(path) == record.get("sha256")
    except OSError:  # (none there)
        return False
