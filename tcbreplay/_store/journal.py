"""A run's journal: finished samples appended as JSON lines, then folded into Parquet.

Appends survive a crash of the writer; a torn last line (a crash mid-write) is
skipped when read and cut before new lines are appended. Folding merges the journal
with the Parquet files already there (the latest record of a sample wins) and is
safe to repeat after a crash at any point. On object storage, which has no appends, the
journal is a series of numbered objects (``journal/<n>.jsonl``), each written whole
(:class:`ChunkJournal`), read here in their order.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcbreplay import _json
from tcbreplay._store import objects
from tcbreplay._store.locks import LeaseLock
from tcbreplay._store.objects import (
    PreconditionFailed,
    create_object,
    is_remote,
    list_names,
    same_version,
    url,
    version,
)
from tcbreplay._store.parquet import parquet_file, read_table, write_messages, write_parquet
from tcbreplay._store.records import divergence_rows, message_rows, sample_rows
from tcbreplay._store.schema import (
    DIVERGENCES,
    DIVERGENCES_SCHEMA,
    JOURNAL,
    JOURNAL_CHUNKS,
    MESSAGES,
    SAMPLES,
    SAMPLES_SCHEMA,
    SHARD_JOURNALS,
    WRITTEN_MESSAGES_SCHEMA,
    with_optional_columns,
)
from tcbreplay.errors import RunLockedError, StoreError, first_line


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
        return list(chunks(run_dir / JOURNAL_CHUNKS))
    path = run_dir / JOURNAL
    return [path] if path.exists() else []


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


def journals(run_dir: Path) -> list[Path]:
    """A run's journals: its shards' (``record --shard``, on a local store), then its own
    (:func:`journal_files`), whose records are the latest (a ``--retry-errors`` after a
    sharded recording)."""
    shards = [] if is_remote(run_dir) else sorted(run_dir.glob(SHARD_JOURNALS))
    return [*shards, *journal_files(run_dir)]


def journal_records(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The records of every journal of a run, the latest of a sample last."""
    for path in journals(run_dir):
        yield from read_journal(path)


def unfolded(run_dir: Path, manifest_files: dict[str, Any] | None = None) -> int:
    """How many samples the journals hold that the Parquet files do not (yet).

    The journals' lines, counted without reading them, while ``samples.parquet`` is absent
    or the very file the manifest recorded (``manifest_files``: the manifest's ``files``):
    a fold removes the journals before it records its files, so lines written since are
    new. A fold killed after it wrote the files, before it removed the journals, leaves
    records the files hold already, and a file the manifest does not know: then each record
    is matched as the fold matches rows, by sample id and trial, and its latest one is told
    from the row of an earlier recording of the sample (``--retry-errors``) by its
    ``finished_at``. Only the samples file's key columns are read."""
    samples = run_dir / SAMPLES
    files = manifest_files if isinstance(manifest_files, dict) else {}
    if not samples.exists() or same_version(files.get(SAMPLES), version(samples)):
        return _lines(journals(run_dir))
    latest: dict[tuple[str, int], Any] = {}
    for record in journal_records(run_dir):
        latest[(record["sample_id"], record.get("trial", 0))] = _finished(record)
    if not latest:
        return 0
    folded = _folded(samples)
    return sum(1 for key, finished in latest.items() if folded.get(key, ()) != finished)


def _lines(paths: list[Path]) -> int:
    """The complete lines of ``paths`` (a torn last one left out), counted unread."""
    lines = 0
    for path in paths:
        try:
            with path.open("rb") as f:
                while chunk := f.read(1 << 22):
                    lines += chunk.count(b"\n")
        except FileNotFoundError:  # (folded meanwhile)
            continue
    return lines


def _finished(record: dict[str, Any]) -> Any:
    """A record's ``finished_at`` as its row would hold it: a time, or None (or text that no
    row holds, which the fold would refuse)."""
    value = record.get("finished_at")
    if isinstance(value, str):
        with suppress(ValueError):
            return dt.datetime.fromisoformat(value)
    return value


def _folded(path: Path) -> dict[tuple[str, int], dt.datetime | None]:
    """The (sample id, trial) of a samples file's rows, and when each finished."""
    try:
        with parquet_file(path) as file:
            trial = "trial" in file.schema_arrow.names  # (not in a version 1 file: trial 0)
            columns = ["sample_id", "finished_at", *(["trial"] if trial else [])]
            table = file.read(columns=columns)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise StoreError(f"{path}: not a readable Parquet file ({first_line(exc)})") from exc
    ids = table["sample_id"].to_pylist()
    trials = table["trial"].to_pylist() if trial else [0] * len(ids)
    return dict(zip(zip(ids, trials, strict=True), table["finished_at"].to_pylist(), strict=True))


def fold_journal(
    run_dir: Path, given: list[dict[str, Any]] | None = None,
    before_write: Callable[[], None] = lambda: None,
) -> None:  # fmt: skip
    """Merge journal records (its shards' too) into the Parquet files (latest record per
    sample wins); only while no shard appends to its journal. ``given``: records held in
    memory, taken as the journal's (which must be empty: they are not written to it first).
    ``before_write`` is called before each file is written or removed (a writer on object
    storage checks there that it still holds the run: it may have been paused meanwhile).

    Both files are rewritten through temporary names and renamed, messages first;
    the journals are removed last, so a crash at any point can be folded again.
    """
    paths = journals(run_dir)
    records: dict[tuple[str, int], dict[str, Any]] = {}
    if given is not None and any(True for _ in journal_records(run_dir)):
        raise StoreError(f"{run_dir}: the journal holds records; they would be folded twice")
    for record in journal_records(run_dir) if given is None else given:
        records[(record["sample_id"], record.get("trial", 0))] = record
    if not records and (run_dir / SAMPLES).exists():
        before_write()
        _remove(paths)
        return
    keep = set(records)
    samples = [_old_rows(run_dir / SAMPLES, SAMPLES_SCHEMA, keep)]
    # (each message's calls derived again as the file is written)
    messages = [_old_rows(run_dir / MESSAGES, WRITTEN_MESSAGES_SCHEMA, keep)]
    samples.append(_table(sample_rows(records.values()), SAMPLES_SCHEMA))
    messages.append(_table(message_rows(records.values()), WRITTEN_MESSAGES_SCHEMA))
    # rows in sample_index order, messages by their sample's row, then position
    sample_table = pa.concat_tables(samples).sort_by("sample_index")
    message_table = pa.concat_tables(messages).sort_by(
        [("sample_index", "ascending"), ("position", "ascending")]
    )
    fold = uuid.uuid4().hex  # (each file's footer says it: Run.check sees a fold cut short)
    replayed = any("divergences" in r for r in records.values())
    if replayed or (run_dir / DIVERGENCES).exists():  # a replay's (no other run has them)
        divergences = pa.concat_tables(
            [
                _old_rows(run_dir / DIVERGENCES, DIVERGENCES_SCHEMA, keep),
                _table(divergence_rows(records.values()), DIVERGENCES_SCHEMA),
            ]
        ).sort_by([("sample_index", "ascending"), ("turn", "ascending")])
        before_write()
        write_parquet(divergences, run_dir / DIVERGENCES, fold=fold)
    before_write()
    write_messages(message_table, run_dir / MESSAGES, fold)
    before_write()
    write_parquet(sample_table, run_dir / SAMPLES, fold=fold)
    before_write()
    _remove(paths)


def _remove(journal: list[Path]) -> None:
    """Remove the journal's files, once folded."""
    for path in journal:
        if is_remote(path):
            with objects.failures(path):  # (a delete refused: one line naming the object)
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


# -- on object storage ----------------------------------------------------------------------

# A journal batch is written once it holds this many samples, or its first is this old.
BATCH_LINES = 1000
BATCH_S = 1.0


class ChunkJournal:
    """A run's journal on object storage: finished samples, one JSON line each, written in
    numbered objects ``journal/<n>.jsonl`` (n from 1, created only if absent), a batch at a
    time: once it holds :data:`BATCH_LINES` samples or its first is :data:`BATCH_S` old, and
    when the journal closes. A process killed loses the samples of the batch not written yet
    (at most a second's), besides those in flight; no batch is ever half written."""

    def __init__(self, folder: Path, lock: LeaseLock | None) -> None:
        self.folder = folder
        self._lock = lock
        numbers = chunk_numbers(folder)
        self._next = max(numbers, default=0) + 1
        self._lines: list[str] = []
        self._first = 0.0
        self._mutex = threading.Lock()
        self._failed: BaseException | None = None
        self.closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="tcbreplay-journal", daemon=True)
        self._thread.start()

    def write(self, text: str) -> None:
        """Add finished samples' lines (each ending in a newline)."""
        with self._mutex:
            if self._failed is not None:
                raise self._failed
            if not self._lines:
                self._first = time.monotonic()
            self._lines.append(text)
            if len(self._lines) >= BATCH_LINES:
                self._write_batch()

    def flush(self) -> None:
        """Write the batch if it is due (a batch per append would be a request per sample)."""
        with self._mutex:
            if self._failed is not None:
                raise self._failed
            if self._lines and time.monotonic() - self._first >= BATCH_S:
                self._write_batch()

    def _tick(self) -> None:
        while not self._stop.wait(BATCH_S / 4):
            with suppress(Exception):  # kept in _failed: the next write raises it
                self.flush()

    def _write_batch(self) -> None:
        data = "".join(self._lines).encode("utf-8")
        path = self.folder / chunk_name(self._next)
        try:
            if self._lock is not None:
                self._lock.check()
            create_object(path, data)
        except PreconditionFailed as exc:
            self._failed = RunLockedError(
                f"{url(path)}: written by another process meanwhile: two processes write this run",
                hint="let one of them finish, then record the rest",
            )
            raise self._failed from exc
        except BaseException as exc:
            self._failed = exc
            raise
        self._next += 1
        self._lines = []

    def close(self) -> None:
        """Write what is left, and stop."""
        self._stop.set()
        with self._mutex:
            if not self.closed:
                self.closed = True
                if self._lines and self._failed is None:
                    self._write_batch()

    def forget(self) -> None:
        """In a forked child: drop the journal without writing (the parent writes it)."""
        self._stop.set()
        self.closed = True
        self._lines = []


_CHUNK = re.compile(r"^(\d{12})\.jsonl$")


def chunk_name(number: int) -> str:
    return f"{number:012d}.jsonl"


def chunk_numbers(folder: Path) -> list[int]:
    """The numbers of the journal batches in ``folder``, in order."""
    found = (_CHUNK.match(name) for name in list_names(folder))
    return sorted(int(m.group(1)) for m in found if m)


def chunks(folder: Path) -> Iterator[Path]:
    for number in chunk_numbers(folder):
        yield folder / chunk_name(number)
