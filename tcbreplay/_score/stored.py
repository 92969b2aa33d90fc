"""A stored scoring that scoring the run again would write again: what a store one may only
read answers ``score`` with.

A scoring is a function of the run's files, its options, the SQL the scorer runs and the
toolkit's version, which its audit record holds; where all of them are those of the scoring
stored under its options' name and the store refuses the scoring's writes (read-only
credentials on object storage, a read-only mount), ``score`` gives that scoring as it is
stored, saying so (the dashboard file is left as it is: it may be an earlier scoring's). Where
the store takes writes, the run is always scored again: the toolkit's version does not change
with every change to its code, so a stored scoring is never taken for a new one. A scoring
against ``--gold-run`` is never taken from the store (the gold run's files are not in the
record), nor one whose files do not read as Parquet (what a damaged file's error says to do).
A stored scoring that would stand in but whose files are not those its scoring wrote (their
sha256 is not the one it recorded: :mod:`tcbreplay._score.result_hashes`), or that recorded
none (scored before they were), is refused naming the file: it is never printed as stored.
"""

from __future__ import annotations

import shlex
from typing import Any

import pyarrow as pa

from tcbreplay._score.audit_record import PendingAudit
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.read_results import read_summary
from tcbreplay._score.result_hashes import check_stored
from tcbreplay._store import objects
from tcbreplay._store.files import TEMPORARY_SUFFIX
from tcbreplay._store.parquet import parquet_file
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import DEFAULT_SCORER, SCORES
from tcbreplay.errors import StoreError

# what of an audit record says what the scoring read and how: equal, the results are
_SAME = ("toolkit_version", "inputs_sha256", "inputs_seen", "sql_sha256", "options_sha256")


def stored_scoring(run: Run, options: ScoreOptions, audit: PendingAudit) -> dict[str, Any] | None:
    """The summary of the scoring stored for ``options`` when scoring the run again would
    write its results again; else None. A StoreError names a file of it that is not as its
    scoring wrote it (or a scoring that recorded no sha256 of its files)."""
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
    command = (
        f"tcbreplay score {shlex.quote(run.run_id)}{options.score_flags()}{run.store_option()}"
    )
    where = "where the store takes writes (write credentials, a writable mount)"
    hint = f"score it again {where}: {command}"
    check_stored(folder, summary, wanted[1:], hint)
    return summary


def names_left_over(run: Run) -> bool:
    """Whether a scoring of the run (a local one's) was killed before it put its files in
    place, leaving them under temporary names."""
    if objects.is_remote(run.dir):
        return False
    return any((run.dir / SCORES).glob(f"*/*{TEMPORARY_SUFFIX}"))
