"""A run exported as JSON Lines: its samples, its messages and a copy of its manifest
(``export --format tables``), and its traces read back sample by sample for the exports
that ``import`` reads (:func:`run_traces`)."""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcbreplay._store.files import (
    json_text,
    staged,
    writing,
)
from tcbreplay._store.objects import is_remote
from tcbreplay._store.parquet import read_table
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import (
    MANIFEST,
    MESSAGES,
    MESSAGES_SCHEMA,
    SAMPLES,
    SAMPLES_SCHEMA,
    with_optional_columns,
)
from tcbreplay._store.shards import finish_hint
from tcbreplay.errors import (
    InputError,
    StoreError,
    TcbReplayError,
    first_line,
)


def export_jsonl(
    run: Run, out_dir: Path, *, error: type[TcbReplayError] = InputError
) -> list[Path]:
    """Write the run's samples and messages as JSONL files beside a copy of the manifest.

    The three files are written under temporary names and renamed once all are whole: an
    export that fails or is killed leaves the files of an earlier one as they were. A failure
    to write is ``error`` (``out_dir`` is the user's choice; StoreError inside the store)."""
    with run.reading():  # not deleted (record --overwrite) while it is read
        tables = {}
        for name in (SAMPLES, MESSAGES):  # both read before anything is written
            try:
                tables[name] = read_table(run.dir / name)
            except (OSError, pa.ArrowException) as exc:
                unfinished = run.status not in ("complete", "imported")
                raise StoreError(
                    f"{run.dir / name}: cannot read it: {first_line(exc)}",
                    hint=f"the run is {run.status}; {finish_hint(run)}" if unfinished else None,
                ) from exc
        manifest = json_text(run.manifest)
    if not is_remote(out_dir):  # (object storage has no folders to make)
        with writing(out_dir, error=error):
            out_dir.mkdir(parents=True, exist_ok=True)
    # messages in sample order and position, whatever the file's row groups
    tables[MESSAGES] = tables[MESSAGES].sort_by(
        [("sample_index", "ascending"), ("position", "ascending")]
    )
    written = [out_dir / name.replace(".parquet", ".jsonl") for name in tables]
    with staged(error) as files:
        for path, table in zip(written, tables.values(), strict=True):
            files.write(path, partial(_write_jsonl_table, table))
        written.append(out_dir / MANIFEST)
        files.write(written[-1], lambda tmp: tmp.write_text(manifest, encoding="utf-8"))
    return written


def _write_jsonl_table(table: pa.Table, path: Path) -> None:
    import jsonlines

    with jsonlines.open(path, mode="w") as writer:
        for batch in table.to_batches(max_chunksize=10_000):
            writer.write_all(_jsonable(row) for row in batch.to_pylist())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in row.items()}


def run_traces(run: Run) -> list[dict[str, Any]]:
    """Every stored sample and trial of a run in ``sample_index`` order: ``sample_id``,
    ``trial``, ``status``, ``error``, ``error_type``, ``metadata`` (an object or None) and
    ``messages`` (each as ``message_to_dict`` wrote it). The caller holds ``run.reading()``."""
    import json

    tables = {}
    for name, schema in ((SAMPLES, SAMPLES_SCHEMA), (MESSAGES, MESSAGES_SCHEMA)):
        try:
            tables[name] = with_optional_columns(read_table(run.dir / name), schema)
        except (OSError, pa.ArrowException) as exc:
            raise StoreError(f"{run.dir / name}: cannot read it: {first_line(exc)}") from exc
    messages: dict[int, list[dict[str, Any]]] = {}
    ordered = (
        tables[MESSAGES]
        .select(["sample_index", "position", "message"])
        .sort_by([("sample_index", "ascending"), ("position", "ascending")])
    )
    for index, text in zip(
        ordered["sample_index"].to_pylist(), ordered["message"].to_pylist(), strict=True
    ):
        messages.setdefault(index, []).append(json.loads(text))
    samples = tables[SAMPLES].sort_by("sample_index")
    out = []
    for row in samples.select(
        ["sample_id", "trial", "sample_index", "status", "error", "error_type", "metadata"]
    ).to_pylist():
        meta = row.pop("metadata")
        row["metadata"] = json.loads(meta) if meta else None
        row["messages"] = messages.get(row.pop("sample_index"), [])
        out.append(row)
    return out
