"""The store as DuckDB views on a locked-down connection, and the SQL files that query it.

Views (names are stable; queries use them, never file paths):
``runs``, ``tools``, ``samples``, ``messages``, ``tool_calls``, ``gold_calls``, ``scores``
(the default scoring of each run), ``scores_all`` (every scoring), ``scorings`` (the
run-level numbers of every scoring) and ``divergences`` (where replays diverged).
Once the views exist, the connection may read the files of the runs' folders only,
cannot load extensions, and its configuration is locked; ``tcbreplay sql``
(:mod:`tcbreplay._query.sql`) also refuses every statement that is not a query. A store on
object storage is read through its fsspec filesystem, registered on the connection (DuckDB's
own S3 extension is neither installed nor loaded: a path no registered filesystem serves fails
at once).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

from tcbreplay._machine import usable_cores
from tcbreplay._store import objects
from tcbreplay._store.objects import is_remote
from tcbreplay._store.parquet import read_schema
from tcbreplay._store.run_dir import Run, check_columns, check_inside
from tcbreplay._store.runs import Store
from tcbreplay._store.sandbox import (
    lock_down,
    memory_error,
    open_connection,
    sandbox_config,
    spill_dir,
)
from tcbreplay._store.schema import (
    DEFAULT_SCORING,
    DIVERGENCES_SCHEMA,
    MESSAGE_CALLS,
    MESSAGES_SCHEMA,
    OPTIONAL_COLUMNS,
    SAMPLES_SCHEMA,
    SCORES_ADDED,
    SCORES_SCHEMA,
    WRITTEN_MESSAGES_SCHEMA,
    with_optional_columns,
)
from tcbreplay._store.tables import runs_table, scorings_table, stored_scorings, tools_table
from tcbreplay.errors import (
    QueryError,
    SkippedRunWarning,
    StoreError,
    TcbReplayWarning,
)


@cache
def queries_dir() -> Path:
    """Where the SQL files are: the package ``tcbreplay.queries``, which setup.py makes of
    the repository's ``queries/``; a wheel holds it as ``tcbreplay/queries/``, an editable
    install finds it where it is."""
    return Path(str(resources.files("tcbreplay.queries")))


@cache
def query_text(name: str) -> str:
    """The text of ``queries/<name>.sql``."""
    path = queries_dir() / f"{name}.sql"
    try:
        return path.read_text()
    except OSError as exc:
        raise QueryError(f"no query named {name!r} ({path})") from exc


def connect(
    store: Store | None = None,
    runs: Iterable[Run] | None = None,
    *,
    with_scores: bool = True,
    traces_only: bool = False,
    lock: bool = True,
    threads: int | None = None,
    memory_limit: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with the store's runs bound to the views
    (``threads``: DuckDB's threads, by default one per core; ``memory_limit``: DuckDB's,
    such as '4GB' or '50%', by default DuckDB's own). ``lock``: the connection may then read
    the runs' folders only (see :mod:`tcbreplay._store.sandbox`). ``traces_only``: the
    views ``samples`` and ``messages`` alone, what scoring reads (no macros, derived views
    or store-wide tables: about 18 ms less to open)."""
    if runs is not None:  # runs named by the caller: one they cannot read is an error
        run_list = list(runs)
        for run in run_list:
            run.check()
    else:
        run_list = readable_runs(store) if store else []
    if not lock:
        con = _new_connection(threads)
        if traces_only:
            bind_traces(con, run_list)
        else:
            create_views(con, run_list, with_scores=with_scores, materialize=False)
        return con
    spill = spill_dir()
    con = open_connection(
        {"threads": threads or usable_cores(), **sandbox_config(spill, memory_limit)}
    )
    try:
        con.execute("set enable_progress_bar = false")  # it would draw on the user's terminal
        if traces_only:
            bind_traces(con, run_list)
        else:
            create_views(con, run_list, with_scores=with_scores, materialize=False)
        lock_down(con, [r.dir.resolve() for r in run_list], spill)
    except BaseException as exc:
        con.close()
        if isinstance(exc, duckdb.OutOfMemoryException):  # a memory limit too small for any
            raise memory_error(exc, memory_limit or "DuckDB's default") from exc
        raise
    return con


def readable_runs(store: Store) -> list[Run]:
    """The store's runs whose manifest and files can be read. Each other run is left out
    with a :class:`SkippedRunWarning` that says what is wrong, so that one broken run does
    not hide the others from store-wide views."""
    with objects.failures(store.root):
        there = objects.exists(store.root) if is_remote(store.root) else store.root.is_dir()
    if not there:
        if is_remote(store.root):
            objects.check_bucket(store.root)
            why = "nothing is stored under this prefix yet"
        else:
            why = "no such store folder"
        warnings.warn(TcbReplayWarning(f"{store.root}: {why}, so there are no runs"), stacklevel=2)
        return []
    readable = []
    for run in store.runs():
        try:
            run.check()
        except StoreError as exc:
            warnings.warn(SkippedRunWarning(f"left out run {run.run_id!r}: {exc}"), stacklevel=2)
            continue
        readable.append(run)
    return readable


def _readable_scorings(run_list: list[Run]) -> list[tuple[str, Path, dict]]:
    """Every stored scoring of each run: (scoring, scores file, summary). A scoring is
    stored once its summary is written; one whose scores file cannot be read is left out
    of the scores views with a warning (the run's traces stay in the other views)."""
    found = []
    for run in run_list:
        for scoring, path, summary in stored_scorings(run):
            try:
                check_inside(path, run.dir)
                check_columns(path, SCORES_SCHEMA, SCORES_ADDED)
            except StoreError as exc:
                warnings.warn(
                    SkippedRunWarning(f"left out the scores of run {run.run_id!r}: {exc}"),
                    stacklevel=3,
                )
                continue
            found.append((scoring, path, {**summary, "stale": run.changed_since(summary)}))
    return found


def create_views(
    con: duckdb.DuckDBPyConnection, run_list: list[Run], *, with_scores: bool, materialize: bool
) -> None:
    """Create the views (``materialize``: the manifest tables are stored, for a catalog file)."""
    bind_traces(con, run_list)
    con.execute(query_text("macros"))
    con.execute(f"create or replace view tool_calls as {query_text('tool_calls')}")
    con.execute(f"create or replace view gold_calls as {query_text('gold_calls')}")
    divergences = [r.divergences_path for r in run_list if r.divergences_path.exists()]
    _bind_files(con, "divergences", divergences, DIVERGENCES_SCHEMA)
    scorings = _readable_scorings(run_list) if with_scores else []
    # `scores` keeps one meaning, the default scoring, whichever scored last; `scores_all`
    # holds every scoring, told apart by its `scoring` column
    default = [path for name, path, _ in scorings if name == DEFAULT_SCORING]
    _bind_files(con, "scores", default, SCORES_SCHEMA)
    _bind_files(con, "scores_all", [path for _, path, _ in scorings], SCORES_SCHEMA)
    kind = "table" if materialize else "view"
    con.register("_runs_table", runs_table(run_list))
    con.execute(f"create or replace {kind} runs as select * from _runs_table")
    con.register("_tools_table", tools_table(run_list))
    con.execute(
        f"create or replace {kind} tools as select run_id, tool, description, param, has_default,"
        " default_value::json as default_value from _tools_table"
    )
    con.register("_scorings_table", scorings_table(scorings))
    con.execute(
        f"create or replace {kind} scorings as select * replace "
        "(try_cast(scored_at as timestamptz) as scored_at) from _scorings_table"
    )
    if materialize:
        con.unregister("_runs_table")
        con.unregister("_tools_table")
        con.unregister("_scorings_table")


def bind_traces(con: duckdb.DuckDBPyConnection, run_list: list[Run]) -> None:
    """Bind the views ``samples`` and ``messages`` to the runs' files."""
    register_filesystems(con, run_list)
    _bind_files(con, "samples", [r.samples_path for r in run_list if r.has_data()], SAMPLES_SCHEMA)
    _bind_files(
        con, "messages", [r.messages_path for r in run_list if r.has_data()], MESSAGES_SCHEMA
    )


def register_filesystems(con: duckdb.DuckDBPyConnection, run_list: list[Run]) -> None:
    """Let DuckDB read the runs on object storage through their fsspec filesystems."""
    registered = set(con.list_filesystems())
    for run in run_list:
        if is_remote(run.dir):
            fs, _ = objects.fs_path(run.dir)
            name = fs.protocol[0] if isinstance(fs.protocol, tuple) else fs.protocol
            if name not in registered:  # (DuckDB names a filesystem by its first protocol)
                con.register_filesystem(objects.reader_fs(fs))
                registered.add(name)


def connect_tables(samples: pa.Table, messages: pa.Table) -> duckdb.DuckDBPyConnection:
    """A connection whose ``samples`` and ``messages`` tables are copies of Arrow tables."""
    con = _new_connection()
    con.execute(query_text("macros"))
    # tables, not registered views: a cursor of the connection (another thread) sees them
    for name, table, schema in (
        ("samples", samples, SAMPLES_SCHEMA),
        ("messages", messages, MESSAGES_SCHEMA),
    ):
        derived = name == "messages" and "calls" not in table.column_names
        if derived:  # each message's calls, as a writer derives them
            schema = WRITTEN_MESSAGES_SCHEMA
        con.register("_input", with_optional_columns(table, schema).cast(schema))
        calls = f", {MESSAGE_CALLS} as calls" if derived else ""
        con.execute(f"create table {name} as select *{calls} from _input")
        con.unregister("_input")
    con.execute(f"create or replace view tool_calls as {query_text('tool_calls')}")
    con.execute(f"create or replace view gold_calls as {query_text('gold_calls')}")
    return con


def _new_connection(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"threads": threads or usable_cores()})
    con.execute("set enable_progress_bar = false")  # it would draw on the user's terminal
    return con


# Where the run directory sits in each view's file paths: the run id is its name.
_RUN_DIR_PATTERN = {
    "samples": r"([^/]+)/[^/]+$",
    "messages": r"([^/]+)/[^/]+$",
    "divergences": r"([^/]+)/[^/]+$",
    "scores": r"([^/]+)/scores/[^/]+/[^/]+$",
    "scores_all": r"([^/]+)/scores/[^/]+/[^/]+$",
}


def _bind_files(
    con: duckdb.DuckDBPyConnection, view: str, files: list[Path], schema: pa.Schema
) -> None:
    """Bind a view to Parquet files; ``run_id`` is the name of each file's run directory, so a
    run directory copied or renamed is seen under its new name. Files written before a
    column was added read it as :func:`_optional_columns` says (older files: trial 0, no
    metadata; scores files before ``valid`` and ``error_type``: null)."""
    if files:  # checked by the caller (Run.check, _readable_scorings)
        optional = _optional_columns(view, schema)
        groups: dict[tuple[str, ...], list[Path]] = {}
        for path in files:
            groups.setdefault(_missing_optional(path, schema, optional), []).append(path)
        parts = []
        for missing, paths in groups.items():
            listing = ", ".join(_sql_string(_file_name(p)) for p in paths)
            filled = "".join(f", {optional[name]} as {name}" for name in missing)
            parts.append(f"select *{filled} from read_parquet([{listing}], filename = true)")
        pattern = _sql_string(_RUN_DIR_PATTERN[view])
        columns = ", ".join(
            f"regexp_extract(filename, {pattern}, 1) as run_id" if name == "run_id" else name
            for name in schema.names
        )
        source = parts[0] if len(parts) == 1 else " union all by name ".join(parts)
        con.execute(f"create or replace view {view} as select {columns} from ({source})")
    else:
        columns = ", ".join(f"null::{_duck_type(f.type)} as {f.name}" for f in schema)
        con.execute(f"create or replace view {view} as select {columns} where false")


def _file_name(path: Path) -> str:
    """A run file as DuckDB reads it: its absolute path, or its URL on object storage."""
    return objects.url(path) if is_remote(path) else str(path.resolve())


def _optional_columns(view: str, schema: pa.Schema) -> dict[str, str]:
    """The columns of a view that older files may lack, and the SQL value each reads as."""
    optional = {name: value for name, value in OPTIONAL_COLUMNS.items() if name in schema.names}
    if view in ("scores", "scores_all"):
        for name in SCORES_ADDED:
            optional[name] = f"null::{_duck_type(schema.field(name).type)}"
    return optional


def _missing_optional(path: Path, schema: pa.Schema, optional: dict[str, str]) -> tuple[str, ...]:
    """The optional columns a file lacks (read from its footer; checked before)."""
    names = read_schema(path).names
    return tuple(n for n in optional if n not in names)


def _duck_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_string(arrow_type):
        return "varchar"
    if pa.types.is_int32(arrow_type):
        return "integer"
    if pa.types.is_int64(arrow_type):
        return "bigint"
    if pa.types.is_floating(arrow_type):
        return "double"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    if pa.types.is_timestamp(arrow_type):
        return "timestamptz"
    raise TypeError(f"no DuckDB type for {arrow_type}")


def _sql_string(text: str) -> str:
    """Quote a path we built ourselves as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
