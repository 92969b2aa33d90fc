"""audit_record"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any

import polars as pl

from tcbreplay import _json
from tcbreplay._store import objects
from tcbreplay._store.files import not_written, written_sha256
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import DEFAULT_SCORER, MANIFEST, MESSAGES, SAMPLES
from tcbreplay._store.views import queries_dir
from tcbreplay._version import __version__
from tcbreplay.errors import StoreError

AUDITED_FILES = (MANIFEST, SAMPLES, MESSAGES)


SCORING_QUERIES = (
    "macros", "score_split", "score_gold_calls", "score_agent_calls", "json_values_as_text",
    "json_minified",
)  # fmt: skip
# the SQL a scorer runs where it is not the above
_SCORER_QUERIES = {"bfcl": ("score_bfcl",)}


_SHA256 = re.compile(r"[0-9a-f]{64}")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def sql_sha256(scorer: str = DEFAULT_SCORER) -> str:
    """One hash over the SQL files the scorer runs, in a fixed order."""
    digest = hashlib.sha256()
    for name in _SCORER_QUERIES.get(scorer, SCORING_QUERIES):
        digest.update(name.encode() + b"\0" + (queries_dir() / f"{name}.sql").read_bytes())
    return digest.hexdigest()


def current_sha256(run: Run, name: str, audit: dict[str, Any] | None = None) -> str:
    """sha256 of one of the run's files (see :func:`input_sha256`)."""
    return input_sha256(run, name, audit)[0]


def input_sha256(
    run: Run, name: str, audit: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """sha256 of one of the run's files, and the version of the file it is of (size,
    modification time, an object's ETag: :func:`tcbreplay._store.objects.version`): the
    sha256 the manifest recorded when the file was written, while its size and modification
    time are unchanged; else the one an earlier scoring's audit record ``audit`` holds for
    that very version (a store copied or uploaded: its files are newer than its manifest);
    else hashed now."""
    path = run.dir / name
    known = (run.manifest.get("files") or {}).get(name) or {}
    where = f"{run.dir / MANIFEST}: files: {name}"
    if not isinstance(known, dict):
        raise StoreError(f"{where}: {known!r} is not an object (sha256, size, mtime_ns)")
    now = objects.version(path)
    if objects.same_version(known, now):
        digest = known.get("sha256")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise StoreError(f"{where}: sha256 {digest!r} is not a sha256 in hex")
        return digest, now
    if isinstance(audit, dict):
        hashes, seen = audit.get("inputs_sha256"), audit.get("inputs_seen")
        if isinstance(hashes, dict) and isinstance(seen, dict) and seen.get(name) == now:
            digest = hashes.get(name)
            if isinstance(digest, str) and _SHA256.fullmatch(digest):
                return digest, now
    return sha256_file(path), now


def check_written(run: Run, name: str, digest: str) -> None:
    """Refuse a data file whose sha256 is not the one the run wrote (a copy of the store
    keeps it): rows removed or changed by hand would be scored as if recorded."""
    if written_sha256(run.manifest, name) not in (None, digest):
        raise not_written(run.dir / name, run.manifest)


def earlier_audit(folder: Path) -> dict[str, Any] | None:
    """The audit record of the scoring stored in ``folder``, if one is there and reads as
    JSON (what it holds is checked where it is used)."""
    try:
        summary = _json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or not one to take hashes from
        return None
    audit = summary.get("audit") if isinstance(summary, dict) else None
    return audit if isinstance(audit, dict) else None


class PendingAudit:
    """File hashes for the audit record, computed in a thread while scoring runs.

    The data files' sha256 recorded in the manifest when they were written is reused while a
    file's size and modification time are unchanged, and the one the scoring before in
    ``folder`` recorded while the file is the version it hashed (:func:`input_sha256`);
    ``audit verify`` always hashes the files anew.
    """

    def __init__(
        self, run: Run, options: dict[str, Any], folder: Path | None = None, strict: bool = True
    ) -> None:
        self.run = run
        self.strict = strict  # a file the run did not write refused (see check_written)
        self.options = options
        self.folder = folder
        self.hashes: dict[str, str] = {}
        self.seen: dict[str, dict[str, Any]] = {}
        self.earlier: dict[str, Any] | None = None  # the audit record of the scoring before
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._hash, daemon=True)
        self._thread.start()

    def _hash(self) -> None:
        try:
            earlier = earlier_audit(self.folder) if self.folder is not None else None
            self.earlier = earlier
            for name in AUDITED_FILES:
                self.hashes[name], self.seen[name] = input_sha256(self.run, name, earlier)
                if self.strict:
                    check_written(self.run, name, self.hashes[name])
        except BaseException as exc:  # raised by finish(), in the thread that can report it
            self._error = exc

    def finish(self, scores: pl.DataFrame | None = None) -> dict[str, Any]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        options_text = json.dumps(self.options, sort_keys=True)
        record = {
            "toolkit_version": __version__,
            "inputs_sha256": dict(self.hashes),
            "inputs_seen": dict(self.seen),
            "sql_sha256": sql_sha256(self.options.get("scorer", DEFAULT_SCORER)),
            "options": self.options,
            "options_sha256": hashlib.sha256(options_text.encode()).hexdigest(),
        }
        # the dashboard file the scoring before wrote, which one that writes none leaves (one
        # that writes it records it anew: tcbreplay._score.dashboard.dashboard_record)
        board = (self.earlier or {}).get("dashboard")
        if isinstance(board, dict):
            record["dashboard"] = board
        return record


def audit_record(
    run: Run, options: dict[str, Any], folder: Path | None = None, strict: bool = True
) -> PendingAudit:
    """Start hashing the run's inputs; ``finish()`` returns the audit record (``folder``: the
    scoring's, whose earlier audit record may hold the hashes; ``strict``: a data file the run
    did not write is refused, as a scoring to be stored must)."""
    return PendingAudit(run, options, folder, strict)
