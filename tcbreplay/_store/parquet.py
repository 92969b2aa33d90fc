"""Parquet files of the store, written atomically with zstd; messages in row groups by type; and
read, from a folder or object storage alike (:func:`read_table`)."""

from __future__ import annotations

import os
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tcbreplay._store.files import (
    os_failure,
    replace_with,
    writing,
)
from tcbreplay._store.locks import (
    WRITABLE_HINT,
)
from tcbreplay._store.objects import arrow_source, is_remote, open_known
from tcbreplay._store.schema import (
    MESSAGE_CALLS,
    MESSAGES_SCHEMA,
    PARQUET_OPTIONS,
    ROW_GROUP_ROWS,
)
from tcbreplay.errors import StoreError, first_line


def read_table(path: Path, **options: Any) -> pa.Table:
    """A store's Parquet file as an Arrow table (``options``: ``pq.read_table``'s, such as
    ``columns``), wherever the store is."""
    where, filesystem = arrow_source(path)
    return pq.read_table(where, filesystem=filesystem, **options)


def read_schema(path: Path) -> pa.Schema:
    """A store's Parquet file's schema, read from its footer."""
    if is_remote(path):
        return read_metadata(path).schema.to_arrow_schema()
    return pq.read_schema(path)


def parquet_file(path: Path, **options: Any) -> pq.ParquetFile:
    """A store's Parquet file opened for reading batch by batch, wherever the store is
    (``options``: ``pq.ParquetFile``'s, such as ``read_dictionary``)."""
    where, filesystem = arrow_source(path)
    return pq.ParquetFile(where, filesystem=filesystem, **options)


def read_metadata(path: Path) -> pq.FileMetaData:
    """A store's Parquet file's metadata (rows, row groups), read from its footer; of an
    object, once per version (:func:`_remote_footer`)."""
    if is_remote(path):
        return _remote_footer(path)
    return pq.read_metadata(path)


# footers of objects by (URL, ETag, size): a command asks a file's schema, row counts and fold
# mark several times (checking the run, binding its views, planning the scoring); each asked
# pyarrow's filesystem for the object twice and read the footer through a 5 MB read-ahead.
# Now a version's footer is read once, by the bytes it holds; a file replaced since is
# another version, read anew (the request for its details is made every time)
_FOOTERS: dict[tuple[str, str, int], pq.FileMetaData] = {}
_FOOTERS_KEPT = 256
_FOOTERS_LOCK = threading.Lock()


def _remote_footer(path: Path) -> pq.FileMetaData:
    opened, key = open_known(path)
    with opened:
        with _FOOTERS_LOCK:
            found = _FOOTERS.get(key)
        if found is None:
            found = pq.read_metadata(opened)
            with _FOOTERS_LOCK:
                if len(_FOOTERS) >= _FOOTERS_KEPT:
                    _FOOTERS.pop(next(iter(_FOOTERS)))
                _FOOTERS[key] = found
    return found


# a Parquet footer's key for the fold that wrote a run's data file: the files of one fold hold
# the same value, so that a reader tells a run whose fold was cut short (or is under way)
# between its renames from one whose files agree (see Run.check)
FOLD_KEY = b"tcbreplay.fold"


def with_fold(schema: pa.Schema, fold: str | None) -> pa.Schema:
    """``schema`` with the mark of fold ``fold`` among its metadata (None: as it is)."""
    if fold is None:
        return schema
    return schema.with_metadata({**(schema.metadata or {}), FOLD_KEY: fold.encode()})


def fold_of(schema: pa.Schema) -> str | None:
    """The fold that wrote a file of this (footer's) schema; None for a file written before
    folds were marked."""
    mark = (schema.metadata or {}).get(FOLD_KEY)
    return None if mark is None else mark.decode()


def write_parquet(
    table: pa.Table, path: Path, level: int | None = None, fold: str | None = None
) -> None:
    """Write a Parquet file atomically with zstd (``fold``: the fold it belongs to)."""
    table = table.replace_schema_metadata(with_fold(table.schema, fold).metadata)
    options = (
        dict(PARQUET_OPTIONS) if level is None else {**PARQUET_OPTIONS, "compression_level": level}
    )
    replace_with(
        path,
        lambda tmp: pq.write_table(table, tmp, row_group_size=ROW_GROUP_ROWS, **options),
        hint=WRITABLE_HINT,
    )


def write_table(table: pa.Table, path: Path, level: int | None = None) -> None:
    """Write a Parquet file atomically with zstd (``level``: the store's unless given)."""
    _make_folder(path.parent)
    write_parquet(table, path, level)


class MessagesWriter:
    """``messages.parquet`` as the store lays it out: every row group holds messages of one
    type, so a scan of the AI messages (scoring's, the ``tool_calls`` view's) skips the
    others' row groups by their statistics, without reading their text. Within a type, rows
    keep the order they are written in (sample order, then position); files of other
    layouts read the same, only slower."""

    def __init__(self, path: Path, fold: str | None = None) -> None:
        self._writer = pq.ParquetWriter(path, with_fold(MESSAGES_SCHEMA, fold), **PARQUET_OPTIONS)
        self._pending: dict[str | None, list[pa.Table]] = {}
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        """Add rows (``MESSAGES_SCHEMA``, with or without ``calls``, which is derived from
        each message when absent); a type's full row groups are written at once."""
        import pyarrow.compute as pc  # here: commands that only read the store never load it

        if "calls" not in table.column_names:
            table = with_calls(table)
        types = table["type"]
        for kind in pc.unique(types).to_pylist():
            rows = table.filter(pc.is_null(types) if kind is None else pc.equal(types, kind))
            pending = self._pending.setdefault(kind, [])
            pending.append(rows)
            if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                whole = pa.concat_tables(pending)
                full = whole.num_rows - whole.num_rows % ROW_GROUP_ROWS
                self._write(whole.slice(0, full))
                self._pending[kind] = [whole.slice(full)]

    def close(self) -> None:
        """Write each type's last rows (types in name order) and finish the file."""
        for kind in sorted(self._pending, key=lambda k: (k is None, k or "")):
            self._write(pa.concat_tables(self._pending[kind]))
        self._pending = {}
        self._writer.close()

    def abandon(self) -> None:
        """Close the file after a failure, unfinished (its writer removes it)."""
        with suppress(Exception):
            self._writer.close()

    def _write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
            self.rows_written += table.num_rows


def with_calls(table: pa.Table) -> pa.Table:
    """Messages (``MESSAGES_SCHEMA`` but ``calls``) with each message's calls, as DuckDB
    reads them from it (``MESSAGE_CALLS``: the text scoring compares, written by the same
    JSON writer it was read by before the column existed)."""
    import duckdb  # here: as pyarrow.compute above

    names = [n for n in MESSAGES_SCHEMA.names if n != "calls"]
    con = _calls_database().cursor()  # a connection of its own, to a database made once
    try:
        con.register("written", table.select(["type", "message"]))
        calls = con.sql(f"select {MESSAGE_CALLS} as calls from written").to_arrow_table()
    except duckdb.Error as exc:
        raise StoreError(f"a message to store is not JSON text: {first_line(exc)}") from exc
    finally:
        con.close()
    column = calls["calls"].cast(pa.string())
    return pa.Table.from_arrays([table[n] for n in names] + [column], schema=MESSAGES_SCHEMA)


# the in-memory DuckDB database with_calls reads messages in, made once per process (a
# database takes about 40 ms to open; a connection to it, from any thread, microseconds)
_calls_db: tuple[int, Any] | None = None
_calls_db_lock = threading.Lock()


def _calls_database() -> Any:
    """The database of :func:`with_calls`: one thread (rows come back in the order given),
    made again in a forked child (a parent's is not to be used there)."""
    import duckdb

    global _calls_db
    with _calls_db_lock:
        if _calls_db is None or _calls_db[0] != os.getpid():
            _calls_db = (os.getpid(), duckdb.connect(config={"threads": 1}))
        return _calls_db[1]


def write_messages(table: pa.Table, path: Path, fold: str | None = None) -> None:
    """Write ``messages.parquet`` atomically, laid out by :class:`MessagesWriter` (``fold``:
    the fold it belongs to)."""

    def write(tmp: Path) -> None:
        writer = MessagesWriter(tmp, fold)
        try:
            writer.write(table)
            writer.close()
        except BaseException:
            writer.abandon()
            raise

    replace_with(path, write, hint=WRITABLE_HINT)


def write_frame(frame: Any, path: Path, level: int = 1) -> None:
    """Write a Polars frame as Parquet atomically with zstd at ``level``, by Polars'
    writer (which encodes columns in parallel)."""
    _make_folder(path.parent)
    replace_with(path, lambda tmp: write_frame_to(frame, tmp, level), hint=WRITABLE_HINT)


def _make_folder(path: Path) -> None:
    if not is_remote(path):  # (object storage has no folders)
        with writing(path, hint=WRITABLE_HINT):
            path.mkdir(parents=True, exist_ok=True)


def write_frame_to(frame: Any, path: Path, level: int = 1) -> None:
    """Write a Polars frame to ``path`` as it is (no temporary name: see :func:`write_frame`)."""
    try:
        frame.write_parquet(path, compression="zstd", compression_level=level)
    except Exception as exc:
        if os_failure(exc) is None and _THRIFT_WRITE in str(exc):
            _find_os_failure(frame, path, level)
        raise


# Polars' text for a failed write of a file's footer, which loses the operating system's error
_THRIFT_WRITE = "Invalid thrift: transport error"


def _find_os_failure(frame: Any, path: Path, level: int) -> None:
    """Write the file again through Python, to raise the operating system's error (a full
    disk, a limit on file sizes) that Polars did not name; return if that write succeeds."""
    import io

    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", compression_level=level)
    path.write_bytes(buffer.getvalue())
