"""The sha256 of a scoring's stored files, taken as they are written, and the check that a
stored scoring is still what its scoring wrote.

The Parquet files' sha256 (``scores.parquet``, ``pairs.parquet``) go in the audit record as
``results_sha256``: scoring the same run with the same options writes the same bytes, so the
record stays the same. ``summary.json`` cannot hold the sha256 of its own file: it holds
``summary_sha256``, that of its text without that field (as :func:`summary_text` writes it),
which an edit to any other field changes, ``scored_at`` too: the time is the scoring's, and
the warning of a stored scoring standing in names it. Two scorings of the run with the same
options therefore differ in ``scored_at`` and ``summary_sha256``; their audit records are the
same. A stored scoring stands in for one the store refuses to write
(:mod:`tcbreplay._score.stored`) only where all of them hold; ``audit verify`` lists each
file for which one does not (:func:`changed_since_scoring`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from tcbreplay._score.audit_record import sha256_file
from tcbreplay._score.hashed_file import HashedFile
from tcbreplay._store import objects
from tcbreplay._store.files import json_text
from tcbreplay.errors import StoreError, first_line

# the audit record's field of the Parquet files' sha256, and the summary's of its own
RESULTS_SHA256 = "results_sha256"
SUMMARY_SHA256 = "summary_sha256"

_SHA256 = re.compile(r"[0-9a-f]{64}")


def write_hashed(path: Path, write: Callable[[BinaryIO], None]) -> str:
    """Write ``path`` through ``write(file object)``; the sha256 of what it wrote. A failure
    to write is raised as the operating system's error, whatever the writer made of it."""
    with path.open("wb") as opened:
        out = HashedFile(opened)
        try:
            write(out)  # type: ignore[arg-type]
        except Exception as exc:
            if out.failure is not None and out.failure is not exc:
                raise out.failure from exc
            raise
    return out.hexdigest()


def write_frame_hashed(frame: Any, path: Path, level: int = 1) -> str:
    """Write a Polars frame to ``path`` as :func:`tcbreplay._store.parquet.write_frame_to`
    does (the same bytes); its sha256."""
    return write_hashed(
        path, lambda out: frame.write_parquet(out, compression="zstd", compression_level=level)
    )


def summary_text(summary: dict[str, Any]) -> str:
    """The text of ``summary`` whose sha256 is its ``summary_sha256``: as it is stored,
    without that field."""
    return json_text({key: value for key, value in summary.items() if key != SUMMARY_SHA256})


def seal(summary: dict[str, Any], results: dict[str, str]) -> None:
    """Record the sha256 of the scoring's Parquet files ``results`` (by file name) in the
    summary's audit record, then the summary's own (last: of everything else)."""
    summary["audit"][RESULTS_SHA256] = dict(sorted(results.items()))
    summary[SUMMARY_SHA256] = _own_sha256(summary)


def _own_sha256(summary: dict[str, Any]) -> str:
    """The sha256 a summary's ``summary_sha256`` is held to: that of :func:`summary_text`."""
    return hashlib.sha256(summary_text(summary).encode("utf-8", "surrogatepass")).hexdigest()


def changed_since_scoring(folder: Path, summary: dict[str, Any]) -> list[str] | None:
    """The names of the stored scoring's files (in ``folder``; ``summary``: its summary as
    read) that are not as its scoring wrote them: ``summary.json`` where its
    ``summary_sha256`` is not that of the rest of it, then each Parquet file whose sha256 is
    not the one ``audit.results_sha256`` records (one removed, or one present that it records
    no sha256 of, too).
    None where the scoring records neither (scored by a version before they were)."""
    audit = summary.get("audit") or {}
    hashes, own = audit.get(RESULTS_SHA256), summary.get(SUMMARY_SHA256)
    if hashes is None and own is None:
        return None
    changed = [] if own == _own_sha256(summary) else ["summary.json"]
    recorded = hashes if isinstance(hashes, dict) else {}
    # the scores file is written by every scoring; the pairs file where it records one, and
    # every pairs file there is hashed as it is written: one present that it records no
    # sha256 of is not the scoring's
    pairs = "pairs.parquet" in recorded or objects.is_file(folder / "pairs.parquet")
    names = ["scores.parquet"] + (["pairs.parquet"] if pairs else [])
    for name in names:
        file = folder / name
        if name not in recorded or not objects.is_file(file):
            changed.append(name)
            continue
        try:
            digest = sha256_file(file)
        except OSError as exc:
            raise StoreError(f"{file}: cannot read it: {first_line(exc)}") from exc
        if digest != recorded[name]:
            changed.append(name)
    return changed


def check_stored(folder: Path, summary: dict[str, Any], names: Iterable[str], hint: str) -> None:
    """Refuse a stored scoring (in ``folder``: its ``summary`` as read, its Parquet files
    ``names``) one of whose files is not as its scoring wrote it (changed by hand, or
    damaged), naming that file; or that records no sha256 (scored by a version before they
    were recorded), since it cannot be vouched for. ``hint``: how to write it again."""
    path = folder / "summary.json"
    audit = summary.get("audit") or {}
    hashes, own = audit.get(RESULTS_SHA256), summary.get(SUMMARY_SHA256)
    if hashes is None and own is None:
        raise StoreError(
            f"{path}: records no sha256 of the scoring's files (scored by an earlier version), "
            "so it cannot be checked to stand in for this scoring",
            hint=hint,
        )
    if own != _own_sha256(summary):
        raise StoreError(
            f"{path}: {_CHANGED} ({SUMMARY_SHA256} is not that of the rest of it)", hint=hint
        )
    for name in names:
        file = folder / name
        recorded = hashes.get(name) if isinstance(hashes, dict) else None
        if not isinstance(recorded, str) or not _SHA256.fullmatch(recorded):
            raise StoreError(f"{path}: audit.{RESULTS_SHA256} has no sha256 of {name}", hint=hint)
        try:
            digest = sha256_file(file)
        except OSError as exc:
            raise StoreError(f"{file}: cannot read it: {first_line(exc)}", hint=hint) from exc
        if digest != recorded:
            raise StoreError(
                f"{file}: {_CHANGED} (its sha256 is not the one summary.json recorded)", hint=hint
            )


_CHANGED = "not the file its scoring wrote: changed or replaced since"
