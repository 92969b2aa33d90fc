"""Errors worded for a user: memory running out is said in so many words, and a traceback
as the exception it ends in."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from helpers import cli

from tcbreplay.errors import StoreError, first_line, out_of_memory, read_error


def arrow_out_of_memory() -> pa.ArrowMemoryError:
    """The error pyarrow's allocator raises when it cannot have the memory asked for."""
    try:
        pa.allocate_buffer(1 << 62)
    except pa.ArrowMemoryError as exc:
        return exc
    raise AssertionError("pyarrow allocated 4 EiB")


def test_memory_running_out_is_told_from_the_error():
    wrapped = StoreError("wrapped")
    wrapped.__cause__ = arrow_out_of_memory()
    said = [
        arrow_out_of_memory(),
        MemoryError(),
        duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block"),
        RuntimeError("Failed to allocate 1 GiB"),
        wrapped,
    ]
    assert all(out_of_memory(exc) for exc in said)
    others = [OSError(5, "Input/output error"), pa.ArrowInvalid("bad file"), ValueError("memory")]
    assert not any(out_of_memory(exc) for exc in others)


def test_a_read_failing_for_memory_says_out_of_memory():
    error = read_error("traces/r1/messages.parquet", arrow_out_of_memory())
    assert str(error).startswith("out of memory while reading traces/r1/messages.parquet (")
    assert "GB free); malloc of size" in str(error) and error.hint
    other = read_error("traces/r1/messages.parquet", pa.ArrowInvalid("not a Parquet file"))
    assert str(other) == "traces/r1/messages.parquet: cannot read it: not a Parquet file"


@pytest.mark.parametrize("raised", ["arrow", "duckdb"])
def test_memory_running_out_anywhere_in_a_command_is_one_line(store, monkeypatch, raised):
    import tcbreplay._query.sql

    def run_sql(*args, **kwargs):
        if raised == "arrow":
            pa.allocate_buffer(1 << 62)
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data")

    monkeypatch.setattr(tcbreplay._query.sql, "run_sql", run_sql)
    result = cli("sql", "select 1", "--store", store.root)
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith("Error: out of memory while running tcbreplay sql (")
    assert ("malloc of size" if raised == "arrow" else "failed to allocate data") in error
    assert hint.startswith("Hint: close what else holds memory")


def test_an_error_whose_message_is_a_traceback_says_the_exception_it_ends_in():
    """DuckDB copies a Python filesystem's traceback into its error: `sql` on an s3:// store
    said only "query failed: Traceback (most recent call last): File ...threading.py"."""
    copied = duckdb.IOException(
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/threading.py", line 1002, in _bootstrap\n'
        '  File "/venv/lib/python3.11/site-packages/s3fs/core.py", line 2445, in modified\n'
        "IsADirectoryError: "
    )
    assert first_line(copied) == "IsADirectoryError (raised in s3fs/core.py, modified)"
    said = duckdb.IOException(
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/s3fs/core.py", line 114, in _call_s3\n'
        "    raise translated\n"
        "PermissionError: Access Denied\n"
    )
    assert first_line(said) == "PermissionError: Access Denied"
    assert first_line(ValueError("one\n\ntwo\nthree")) == "one two"
