"""The dashboard file in ``audit verify``: the published tsa, ahr and tp, in the original
benchmark's format, held to the scoring that wrote it.

A scoring that writes the dashboard file records its sha256 in its audit record
(``audit.dashboard``: ``file``, ``sha256``; a scoring of the same folder again that writes
none keeps it). The file is one of those: the latest scoring's whose record it matches,
else it changed since the latest scoring that records one wrote it. Its head's numbers are
held to that scoring's, which the re-score verifies. A dashboard file written before
scorings recorded it is held to the scoring whose numbers its head gives (else the latest):
its numbers are checked, its samples are not, and a note says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._compare.audit_scores import Difference
from tcbreplay._score.audit_record import sha256_file
from tcbreplay._score.dashboard import dashboard_path
from tcbreplay._score.read_results import read_summary
from tcbreplay._store import objects
from tcbreplay._store.files import names_a_file
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import DASHBOARD_DIR
from tcbreplay.errors import StoreError

# the numbers the dashboard file's head gives (its "results"), each the scoring's
RESULTS = ("tsa", "ahr", "tp")
# what of the file is read for its head (a line: the title and run id are short)
_HEAD_BYTES = 1 << 16


@dataclass
class DashboardCheck:
    """What :func:`check_dashboard` found: the file changed since its scoring wrote it (its
    name, as ``changed_files`` lists it), its numbers that are not the scoring's, and what
    it could not check."""

    changed: list[str] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_dashboard(run: Run, folders: list[Path], scoring: str | None) -> DashboardCheck:
    """Hold the run's dashboard file to the stored scoring that wrote it (``folders``: every
    scoring's; ``scoring``: only when it is that one)."""
    summaries = _summaries(run, folders)
    recorded = {
        name: record
        for name, summary in summaries.items()
        if isinstance(record := (summary.get("audit") or {}).get("dashboard"), dict)
    }
    if recorded:
        return _as_recorded(run, recorded, summaries, scoring)
    return _unrecorded(run, summaries, scoring)


def _as_recorded(
    run: Run, recorded: dict[str, dict[str, Any]], summaries: dict[str, dict[str, Any]],
    scoring: str | None,
) -> DashboardCheck:  # fmt: skip
    """The file held to the records of the scorings that wrote one (``recorded``)."""
    found = DashboardCheck()
    paths = {
        name: _recorded_path(run, str(record.get("file"))) for name, record in recorded.items()
    }
    digests: dict[Path | None, str] = {
        path: sha256_file(path) for path in set(paths.values()) if path and objects.is_file(path)
    }
    matching = [
        name for name, record in recorded.items()
        if digests.get(paths[name], "") == record.get("sha256")
    ]  # fmt: skip
    writer = _latest(matching or list(recorded), summaries)
    if scoring not in (None, writer):
        return found
    if not matching:
        found.changed.append(str(recorded[writer].get("file")))
    path = paths[writer]
    if path is not None and path in digests:
        found.differences += _results(writer, summaries[writer], _head(path))
    return found


def _unrecorded(
    run: Run, summaries: dict[str, dict[str, Any]], scoring: str | None
) -> DashboardCheck:
    """The file of a run whose scorings record none: held to the scoring whose numbers it
    gives (else the latest), its samples unchecked."""
    found = DashboardCheck()
    try:
        path = dashboard_path(run)
    except StoreError:  # a title that names no file: no scoring wrote one
        return found
    if not summaries or not objects.is_file(path):
        return found
    head = _head(path)
    matching = [name for name, summary in summaries.items() if not _results(name, summary, head)]
    writer = _latest(matching or list(summaries), summaries)
    if scoring not in (None, writer):
        return found
    found.differences += _results(writer, summaries[writer], head)
    found.notes.append(
        f"{DASHBOARD_DIR}/{path.name}: its samples are not checked: it was written before "
        f"scorings recorded its sha256 (score {writer} again to record one)"
    )
    return found


def _latest(names: list[str], summaries: dict[str, dict[str, Any]]) -> str:
    """The scoring of ``names`` stored last (its ``scored_at``)."""
    return max(names, key=lambda name: (str(summaries[name].get("scored_at") or ""), name))


def _summaries(run: Run, folders: list[Path]) -> dict[str, dict[str, Any]]:
    """Every stored scoring's summary (one that cannot be read is left out here: the
    scoring verified says so)."""
    out = {}
    for folder in folders:
        try:
            out[folder.name] = read_summary(run, folder)[0]
        except StoreError:
            continue
    return out


def _recorded_path(run: Run, name: str) -> Path | None:
    """The file an audit record names, where it names a dashboard file of the run."""
    folder, _, file = name.partition("/")
    if folder != DASHBOARD_DIR or not names_a_file(file):
        return None
    return run.dir / DASHBOARD_DIR / file


def _head(path: Path) -> dict[str, Any] | None:
    """The file's ``results`` (None: not the JSON object a scoring writes): read from its
    first line, where scoring writes them, else from the whole file."""
    try:
        with path.open("rb") as f:
            first = f.read(_HEAD_BYTES).split(b"\n", 1)[0]
        try:
            value = _json.loads(first + b"]}")
        except ValueError:
            value = _json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    results = value.get("results") if isinstance(value, dict) else None
    return results if isinstance(results, dict) else None


def _results(
    scoring: str, summary: dict[str, Any], results: dict[str, Any] | None
) -> list[Difference]:
    """The file's numbers (``results``) that are not the scoring's (stored: the file's,
    recomputed: the scoring's, which the re-score verifies)."""
    mine = {key: summary.get(key) for key in RESULTS}
    if results is None:
        return [Difference(scoring, None, "dashboard results", "unreadable", mine)]
    return [
        Difference(scoring, None, f"dashboard results.{key}", results.get(key), mine[key])
        for key in RESULTS
        # (written from the summary's very floats: read back equal, of the same type)
        if type(results.get(key)) is not type(mine[key]) or results.get(key) != mine[key]
    ]
