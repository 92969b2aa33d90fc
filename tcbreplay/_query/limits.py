"""Time and memory limits on user SQL, and Ctrl-C while it runs.

The statements run in a worker thread that owns the connection; the calling thread waits
for it, so a Ctrl-C or the time limit reaches the caller at once (DuckDB, running in the
calling thread, turned a Ctrl-C into a RuntimeError or missed it) and stops the query by
interrupting the connection. DuckDB's ``memory_limit`` bounds what DuckDB holds (it spills
to its temporary folder beyond that); the rows fetched into Python for printing are counted
against the same limit, since a cross join's rows would otherwise fill the machine's memory.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import duckdb

from tcbreplay._store.sandbox import MEMORY_HINT, memory_error
from tcbreplay.errors import QueryError, QueryLimitError, first_line

_CHUNK_ROWS = 10_000  # rows fetched at a time, then counted against the memory limit
_SAMPLED_ROWS = 32  # rows of each chunk whose size is measured
_POLL_S = 0.1  # how often the waiting thread looks at the clock and for a Ctrl-C
_STOP_GRACE_S = 10.0  # how long a stopped query may take to notice before it is left behind

Rows = list[tuple[Any, ...]]


def run_statements(
    con: duckdb.DuckDBPyConnection,
    statements: list[str],
    params: Mapping[str, Any] | None,
    *,
    timeout: float | None,
) -> tuple[list[str], Rows]:
    """Run the statements on ``con`` and close it; the last one's columns and rows.

    ``timeout``: seconds until the query is stopped with a :class:`QueryLimitError`
    (None or 0: no limit). A KeyboardInterrupt stops the query and is raised again.
    """
    ((limit_text,),) = con.execute("select current_setting('memory_limit')").fetchall()
    stop = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["result"] = _execute(con, statements, params, limit_text, stop)
        except BaseException as exc:  # handed to the calling thread
            outcome["error"] = exc
        finally:
            con.close()

    worker = threading.Thread(target=work, name="tcbreplay-sql", daemon=True)
    worker.start()
    deadline = time.monotonic() + timeout if timeout else None
    try:
        # in short waits: a Ctrl-C that the system hands to one of DuckDB's threads does
        # not wake a long one, and is seen only when this thread next runs Python code
        while worker.is_alive() and (deadline is None or time.monotonic() < deadline):
            worker.join(_POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic()))
    except KeyboardInterrupt:
        _stop(con, worker, stop)
        raise
    if worker.is_alive():
        _stop(con, worker, stop)
        raise QueryLimitError(
            f"the query ran past its time limit of {timeout:g} s and was stopped",
            hint="raise it with --timeout SECONDS, or --timeout 0 for no limit",
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _stop(con: duckdb.DuckDBPyConnection, worker: threading.Thread, stop: threading.Event) -> None:
    """Interrupt the query until the worker ends (each interrupt stops only what is running
    at that moment, so it is repeated), giving up after a grace period."""
    stop.set()
    deadline = time.monotonic() + _STOP_GRACE_S
    while worker.is_alive() and time.monotonic() < deadline:
        with contextlib.suppress(duckdb.Error):  # closed by the worker meanwhile
            con.interrupt()
        worker.join(0.05)


def _execute(
    con: duckdb.DuckDBPyConnection,
    statements: list[str],
    params: Mapping[str, Any] | None,
    limit_text: str,
    stop: threading.Event,
) -> tuple[list[str], Rows]:
    budget = memory_bytes(limit_text)
    columns: list[str] = []
    rows: Rows = []
    for index, text in enumerate(statements):
        last = index == len(statements) - 1
        try:
            cursor = con.execute(text, dict(params) if params else None)
            columns = [d[0] for d in cursor.description or []]
            rows = []
            held = 0
            while not stop.is_set() and (chunk := cursor.fetchmany(_CHUNK_ROWS)):
                if not last:
                    continue
                held += _approx_bytes(chunk)
                if budget is not None and held > budget:
                    raise QueryLimitError(
                        f"the query's rows take more memory than its limit of {limit_text} "
                        "and it was stopped",
                        hint=f"select fewer rows or columns, or {MEMORY_HINT}",
                    )
                rows.extend(chunk)
        except duckdb.InterruptException as exc:
            if stop.is_set():  # stopped by the calling thread, which reports why
                return [], []
            raise QueryError(f"query failed: {first_line(exc)}") from exc
        except duckdb.OutOfMemoryException as exc:
            raise memory_error(exc, limit_text) from exc
        except duckdb.PermissionException as exc:
            raise QueryError(f"query failed: {first_line(exc)}", hint=_PATH_HINT) from exc
        except duckdb.Error as exc:
            raise QueryError(f"query failed: {first_line(exc)}") from exc
    return columns, rows


_PATH_HINT = (
    "SQL reads the files of the store's runs only: name one from the store folder, as in "
    "read_parquet('RUN/scores/spec/scores.parquet'), or use the views"
)


_UNITS = {"bytes": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}  # fmt: skip


def memory_bytes(text: str) -> int | None:
    """Bytes of a size as DuckDB prints it ('11.7 GiB', '1000 bytes'); None if unknown."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", text)
    if match is None or match.group(2) not in _UNITS:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _approx_bytes(rows: Rows) -> int:
    """The memory a chunk of fetched rows takes, estimated from an even sample of them."""
    step = max(1, len(rows) // _SAMPLED_ROWS)
    sample = rows[::step]
    return sys.getsizeof(rows) + len(rows) * sum(map(_deep_size, sample)) // len(sample)


def _deep_size(value: Any) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, (list, tuple, set)):
        size += sum(map(_deep_size, value))
    elif isinstance(value, dict):
        size += sum(_deep_size(k) + _deep_size(v) for k, v in value.items())
    return size
