"""A run's journal: finished samples appended as JSON lines, then folded into Parquet.

Appends survive a crash of the writer; a torn last line (a crash mid-write) is
skipped when read and cut before new lines are appended. Folding merges the journal
with the Parquet files already there (the latest record of a sample wins) and is
safe to repeat after a crash at any point. On object storage, which has no appends, the
journal is a series of numbered objects (``journal/<n>.jsonl``), each written whole
(:class:`tcbreplay._store.objects.ChunkJournal`), read here in their order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcbreplay import _json
from tcbreplay._store import objects
from tcbreplay._store.objects import is_remote
from tcbreplay._store.parquet import read_table, write_messages, write_parquet
from tcbreplay._store.schema import (
    DIVERGENCES,
    DIVERGENCES_SCHEMA,
    JOURNAL,
    JOURNAL_CHUNKS,
    MESSAGES,
    MESSAGES_SCHEMA,
    SAMPLES,
    SAMPLES_SCHEMA,
    divergence_rows,
    message_rows,
    sample_rows,
    with_optional_columns,
)
from tcbreplay.errors import StoreError


def drop_torn_tail(path: Path) -> None:
    """Cut a half-written last line (a crash mid-append) so new lines start clean."""
    if is_remote(path) or not path.exists():
        return
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        chunk = min(size, 1 << 20)
        while True:
            f.seek(size - chunk)
            data = f.read(chunk)
            cut = data.rfind(b"\n")
            if cut >= 0 or chunk == size:
                f.truncate(size - chunk + cut + 1 if cut >= 0 else 0)
                return
            chunk = min(size, chunk * 2)


# what every journal record holds (see sample_rows and message_rows)
_RECORD_KEYS = ("run_id", "sample_id", "sample_index", "input", "gold", "status")


def journal_files(run_dir: Path) -> list[Path]:
    """The files of a run's journal, in order: ``journal.jsonl``, or on object storage its
    batches (none once folded)."""
    if is_remote(run_dir):
        return list(objects.chunks(run_dir / JOURNAL_CHUNKS))
    path = run_dir / JOURNAL
    return [path] if path.exists() else []


def read_run_journal(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The records of a run's journal, in the order they were written."""
    for path in journal_files(run_dir):
        yield from read_journal(path)


def read_journal(path: Path) -> Iterator[dict[str, Any]]:
    """Yield complete journal lines; a torn last line (a crash mid-write) is skipped, and
    any other line that is not a sample record is an error naming it."""
    if not path.exists():
        return
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break
            try:
                record = _json.loads(line.decode("utf-8"), first_line=number)
            except UnicodeDecodeError as exc:
                raise StoreError(f"{path}: line {number}: not UTF-8 text") from exc
            except json.JSONDecodeError as exc:
                raise StoreError(f"{path}: line {number}: not valid JSON: {exc}") from exc
            except _json.LimitError as exc:
                raise StoreError(f"{path}: line {number}: {exc.problem}") from exc
            if not isinstance(record, dict) or any(key not in record for key in _RECORD_KEYS):
                raise StoreError(
                    f"{path}: line {number}: not a sample record (needs {', '.join(_RECORD_KEYS)})"
                )
            yield record


def fold_journal(run_dir: Path) -> None:
    """Merge journal records into the Parquet files (latest record per sample wins).

    Both files are rewritten through temporary names and renamed, messages first;
    the journal is removed last, so a crash at any point can be folded again.
    """
    journal = journal_files(run_dir)
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for path in journal:
        for record in read_journal(path):
            records[(record["sample_id"], record.get("trial", 0))] = record
    if not records and (run_dir / SAMPLES).exists():
        _remove(journal)
        return
    keep = set(records)
    samples = [_old_rows(run_dir / SAMPLES, SAMPLES_SCHEMA, keep)]
    messages = [_old_rows(run_dir / MESSAGES, MESSAGES_SCHEMA, keep)]
    samples.append(_table(sample_rows(records.values()), SAMPLES_SCHEMA))
    messages.append(_table(message_rows(records.values()), MESSAGES_SCHEMA))
    # rows in sample_index order, messages by their sample's row, then position
    sample_table = pa.concat_tables(samples).sort_by("sample_index")
    message_table = pa.concat_tables(messages).sort_by(
        [("sample_index", "ascending"), ("position", "ascending")]
    )
    replayed = any("divergences" in r for r in records.values())
    if replayed or (run_dir / DIVERGENCES).exists():  # a replay's (no other run has them)
        divergences = pa.concat_tables(
            [
                _old_rows(run_dir / DIVERGENCES, DIVERGENCES_SCHEMA, keep),
                _table(divergence_rows(records.values()), DIVERGENCES_SCHEMA),
            ]
        ).sort_by([("sample_index", "ascending"), ("turn", "ascending")])
        write_parquet(divergences, run_dir / DIVERGENCES)
    write_messages(message_table, run_dir / MESSAGES)
    write_parquet(sample_table, run_dir / SAMPLES)
    _remove(journal)


def _remove(journal: list[Path]) -> None:
    """Remove the journal's files, once folded."""
    for path in journal:
        if is_remote(path):
            objects.remove_object(path)
        else:
            path.unlink(missing_ok=True)


def _old_rows(path: Path, schema: pa.Schema, drop: set[tuple[str, int]]) -> pa.Table:
    """The rows of a run file that the journal does not replace (a version 1 file's as
    trial 0, without metadata)."""
    if not path.exists():
        return schema.empty_table()
    table = with_optional_columns(read_table(path), schema).cast(schema)
    if drop:
        keys = zip(table["sample_id"].to_pylist(), table["trial"].to_pylist(), strict=True)
        mask = [key not in drop for key in keys]
        table = table.filter(pa.array(mask, pa.bool_()))
    return table


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)
