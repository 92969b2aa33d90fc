"""A stored scoring read back: its summary and its scores and pairs files, checked for the
shape their readers rely on (a file that is not is an error naming it, with the command that
scores the run again).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import _json
from tcbreplay._score.audit_record import AUDITED_FILES
from tcbreplay._score.options import ScoreOptions
from tcbreplay._store.parquet import parquet_file, read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import ROW_GROUP_ROWS
from tcbreplay.errors import InputError, StoreError, first_line


def rescore_hint(run: Run, scoring: str) -> str | None:
    """The command that writes the run's scoring folder ``scoring`` again."""
    options = ScoreOptions.from_scoring(scoring)
    if options is None:
        return None
    flags = options.score_flags()
    return f"score it again: tcbreplay score {shlex.quote(run.run_id)}{flags}{run.store_option()}"


def read_summary(run: Run, folder: Path) -> tuple[dict[str, Any], ScoreOptions]:
    """A stored scoring's summary.json and the options it was scored with, checked for the
    shape its readers rely on."""
    path = folder / "summary.json"
    hint = rescore_hint(run, folder.name)
    try:
        summary = _json.loads(path.read_text())
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
    problem = _summary_problem(summary)
    if problem:
        raise StoreError(f"{path}: {problem}", hint=hint)
    try:
        options = ScoreOptions.from_dict(summary.get("options") or {})
    except (InputError, TypeError) as exc:
        raise StoreError(f"{path}: options: {first_line(exc)}", hint=hint) from exc
    return summary, options


# a summary's run-level numbers (a count, a share, a mean, or null where undefined)
_SUMMARY_NUMBERS = (
    "tsa", "tp", "ahr", "n_samples", "n_tsa", "n_tp", "args_invalid", "args_total",
    "args_missing", "n_errors", "n_missing", "exact", "n_exact", "exact_samples", "write_exact",
    "n_write_exact", "write_exact_samples", "first_divergence", "n_first_divergence",
    "covered", "n_covered", "covered_samples", "trials",
)  # fmt: skip


def _summary_problem(summary: dict[str, Any]) -> str | None:
    """What in a summary its readers cannot take (a number that is text, a breakdown that
    is no list of objects naming their tool or category), or None."""
    for key in _SUMMARY_NUMBERS:
        value = summary.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            return f"{key} is {value!r}, not a number"
    for key, name in (("by_tool", "tool"), ("by_category", "category")):
        rows = summary.get(key)
        if rows is not None and not (
            isinstance(rows, list)
            and all(isinstance(r, dict) and isinstance(r.get(name), str | None) for r in rows)
        ):
            return f"{key} is not a list of objects naming their {name}"
    return None


def read_scoring_file(
    run: Run, path: Path, columns: list[str], read: list[str] | None = None,
    categorical: tuple[str, ...] = (),
) -> pl.DataFrame:  # fmt: skip
    """A stored scoring's Parquet file (scores or pairs), with at least ``columns``.

    ``read``: only those of these columns it has (``columns`` among them), a batch at a time,
    each batch's texts taken over by Polars as it comes (at 1M samples, the file's columns
    at once take half again the memory), and ``categorical``: these as categories."""
    if read is not None:
        empty, batches = scoring_file_batches(run, path, columns, read, categorical)
        return pl.concat([empty, *batches])
    try:
        # read by Arrow, which reports a corrupt file where Polars may panic
        frame = pl.from_arrow(read_table(path))
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise _unreadable(run, path, exc) from exc
    assert isinstance(frame, pl.DataFrame)
    frame = _with_trial(frame)
    _check_columns(run, path, frame.columns, columns)
    return frame


def refuse_repeated_rows(run: Run, path: Path, scores: pl.DataFrame) -> None:
    """Refuse a stored scores file in which two rows are of one sample and trial: written so
    by hand, not by scoring (every comparison would count that sample twice)."""
    keys = [key for key in ("sample_id", "trial") if key in scores.columns]
    if "sample_id" not in keys or scores.height < 2:
        return
    hashes = np.sort(scores.select(pl.struct(keys).hash()).to_series().to_numpy())
    if not (hashes[1:] == hashes[:-1]).any():  # (a tenth of the time of a count of keys)
        return
    repeated = scores.filter(pl.struct(keys).is_duplicated())
    if not repeated.height:  # two keys of one hash
        return
    first = repeated.row(0, named=True)
    trial = first.get("trial") or 0
    sample = first["sample_id"] if not trial else f"{first['sample_id']} (trial {trial})"
    raise StoreError(
        f"{path}: sample {sample} has more than one row (not as scoring wrote it)",
        hint=f"tcbreplay audit verify {shlex.quote(run.run_id)}{run.store_option()} lists what "
        "changed; score it again to replace the file",
    )


# the rows of a stored scoring's file read at once (:func:`scoring_file_batches`)
BATCH_ROWS = ROW_GROUP_ROWS


def scoring_file_batches(
    run: Run, path: Path, columns: list[str], read: list[str],
    categorical: tuple[str, ...] = (),
) -> tuple[pl.DataFrame, Iterator[pl.DataFrame]]:  # fmt: skip
    """A stored scoring's Parquet file (scores or pairs), with at least ``columns``, read
    batch by batch (a row group at most each): an empty frame of its columns of ``read``
    (``categorical`` of them as categories), and the batches of those (a file that turns out
    unreadable on the way raises then)."""
    try:
        source = parquet_file(path, read_dictionary=list(categorical))
        names = source.schema_arrow.names
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise _unreadable(run, path, exc) from exc
    _check_columns(run, path, _names_with_trial(names), columns)
    trial = "trial" in read and "trial" not in names  # (a file of store version 1)
    read = [name for name in read if name in names]

    def frame(batch: pa.RecordBatch | pa.Table) -> pl.DataFrame:
        found = pl.from_arrow(batch)
        assert isinstance(found, pl.DataFrame)
        return _with_trial(found) if trial else found

    def batches() -> Iterator[pl.DataFrame]:
        try:
            for batch in source.iter_batches(batch_size=BATCH_ROWS, columns=read):
                yield frame(batch)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise _unreadable(run, path, exc) from exc

    return frame(source.schema_arrow.empty_table().select(read)), batches()


def _unreadable(run: Run, path: Path, exc: BaseException) -> StoreError:
    return StoreError(
        f"{path}: not a readable Parquet file ({first_line(exc)})",
        hint=rescore_hint(run, path.parent.name),
    )


def _with_trial(frame: pl.DataFrame) -> pl.DataFrame:
    """A stored scoring's rows; scored before trials (store version 1): every row trial 0."""
    if "trial" in frame.columns or "sample_id" not in frame.columns:
        return frame
    at = frame.columns.index("sample_id") + 1
    return frame.insert_column(at, pl.Series("trial", [0] * frame.height, pl.Int32))


def _names_with_trial(names: list[str]) -> list[str]:
    """A stored file's columns as it is read (:func:`_with_trial`)."""
    return [*names, "trial"] if "sample_id" in names and "trial" not in names else names


def _check_columns(run: Run, path: Path, found: list[str], columns: list[str]) -> None:
    missing = [name for name in columns if name not in found]
    if missing:
        raise StoreError(
            f"{path}: no column {', '.join(missing)}", hint=rescore_hint(run, path.parent.name)
        )
