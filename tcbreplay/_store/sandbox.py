"""The locked-down DuckDB connection that user SQL runs on: it may read the run folders of
the views and nothing else.

With ``enable_external_access = false`` DuckDB reads only under ``allowed_directories``
and ``allowed_paths``, and it adds to them on its own: the temporary (spill) directory,
``.tmp`` in the working folder by default, and the files of attached databases (an
in-memory connection has none). A ``.tmp`` symbolic link to ``/`` in the working folder
thus opened every file to SQL. So the spill directory is a fresh folder of our own under
the system's temporary folder, with a name no one can guess (DuckDB makes it when it first
spills and removes it when the connection closes), and once the configuration is locked
the allowed directories and paths are read back and checked: anything else there refuses
the connection. DuckDB resolves symbolic links before it checks a path, so a link inside a
run folder leads nowhere outside it. Persistent secrets (``~/.duckdb/stored_secrets``) are
not read, and extensions are neither installed nor loaded.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb

from tcbreplay.errors import InputError, QueryLimitError, StoreError, first_line


def spill_dir() -> Path:
    """A folder that does not exist yet, for DuckDB to spill into."""
    return Path(tempfile.gettempdir()).resolve() / f"tcbreplay-duckdb-{secrets.token_hex(16)}"


def sandbox_config(spill: Path, memory_limit: str | None) -> dict[str, Any]:
    """DuckDB settings fixed when the connection opens, before its configuration is locked."""
    config: dict[str, Any] = {
        "temp_directory": str(spill),
        "allow_persistent_secrets": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if memory_limit is not None:
        config["memory_limit"] = memory_limit
    return config


def open_connection(config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` with ``config``; a memory limit DuckDB cannot read is bad input,
    and so is a negative one (DuckDB takes it for its default)."""
    limit = config.get("memory_limit")
    if isinstance(limit, str) and limit.strip().startswith("-"):
        raise InputError(f"memory limit {limit!r}: a size cannot be negative", hint=_MEMORY_SIZES)
    try:
        return duckdb.connect(config=config)
    except duckdb.OutOfMemoryException as exc:  # a limit too small to open a connection
        raise memory_error(exc, config.get("memory_limit", "DuckDB's default")) from exc
    except duckdb.Error as exc:
        if "memory_limit" in config:
            reason = first_line(exc).split(": ", 1)[-1]  # without DuckDB's 'Parser Error'
            raise InputError(
                f"memory limit {config['memory_limit']!r}: {reason}", hint=_MEMORY_SIZES
            ) from exc
        raise


def lock_down(con: duckdb.DuckDBPyConnection, run_dirs: Iterable[Path], spill: Path) -> None:
    """Let ``con`` read the (resolved) run folders only, and lock its configuration."""
    dirs = sorted({f"{d}/" for d in run_dirs})
    if dirs:
        con.execute("set allowed_directories = $dirs", {"dirs": dirs})
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")
    # fetched to the end: a result left open would keep the connection busy for a cursor
    ((allowed, paths),) = con.execute(
        "select current_setting('allowed_directories'), current_setting('allowed_paths')"
    ).fetchall()
    expected = {*dirs, f"{spill}/"}
    extra = [d for d in allowed if d not in expected] + list(paths)
    if extra or os.path.lexists(spill):
        con.close()
        raise StoreError(
            f"DuckDB would let SQL read {', '.join(extra) or spill}, outside the run folders, "
            "so the query is not run",
            hint=f"is {spill.parent} (the temporary folder) or a run folder a symbolic link?",
        )


def memory_error(exc: duckdb.OutOfMemoryException, limit: str) -> QueryLimitError:
    """The error of a query that needed more memory than ``limit``."""
    detail = str(exc).splitlines()[0].removeprefix("Out of Memory Error:").strip()
    return QueryLimitError(
        f"the query needs more memory than its limit of {limit} ({detail})", hint=MEMORY_HINT
    )


MEMORY_HINT = "raise it with --memory-limit SIZE (such as 8GB or 75%)"
_MEMORY_SIZES = (
    "give --memory-limit a size such as 4GB or 512MB, or a share of the machine's memory "
    "such as 50%"
)
