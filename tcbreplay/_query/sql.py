"""Read-only SQL over every run in the store (``tcbreplay sql``): statements checked, paths
inside runs read from the store folder, then run on the store's locked-down views within a
time and memory limit.
"""

from __future__ import annotations

import math
import shlex
import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from tcbreplay._query.limits import run_statements
from tcbreplay._query.statements import check_read_only
from tcbreplay._store.runs import Store
from tcbreplay._store.views import connect, query_text
from tcbreplay.errors import QueryError, TcbReplayWarning


@dataclass
class QueryResult:
    """Column names and rows of a query."""

    columns: list[str]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def run_sql(
    store: Store,
    sql: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    memory_limit: str | None = None,
) -> QueryResult:
    """Run read-only SQL over every run in the store; the last statement's rows are returned.

    ``timeout``: seconds until the query is stopped (a :class:`QueryLimitError`; None or 0:
    no limit). ``memory_limit``: DuckDB's (such as '4GB' or '50%'), which also bounds the
    rows held in memory; by default DuckDB's own. Ctrl-C stops the query.
    """
    if timeout is not None and not (isinstance(timeout, (int, float)) and 0 <= timeout < math.inf):
        raise QueryError(f"timeout {timeout!r}: give seconds, 0 or more (0 or None: no limit)")
    statements = check_read_only(sql)
    con = connect(store, memory_limit=memory_limit)
    run_ids = {row[0] for row in con.execute("select run_id from runs").fetchall()}
    root = store.root.resolve()
    statements = [resolve_run_paths(text, root, run_ids) for text in statements]
    stale = _stale_scorings(con, statements, params)  # (the statements close the connection)
    columns, rows = run_statements(con, statements, params, timeout=timeout)
    for run, scoring in stale:
        where = store.open_run(run).store_option()
        warnings.warn(
            TcbReplayWarning(
                f"run {run!r}: its {scoring} scoring is of its files before they changed "
                f"(recorded or folded since): tcbreplay score {shlex.quote(run)}{where} scores "
                "it again"
            ),
            stacklevel=2,
        )
    return QueryResult(columns=columns, rows=rows)


# the views whose rows are a stored scoring's (``scorings`` has its own ``stale`` column)
_SCORES_VIEWS = frozenset({"scores", "scores_all"})


def _stale_scorings(
    con: duckdb.DuckDBPyConnection, statements: list[str], params: Mapping[str, Any] | None
) -> list[tuple[str, str]]:
    """The stored scorings a query over the scores views may read that are of their run's
    files before they changed (``runs`` shows them as stale; the views hold them as they
    were), as (run, scoring): of the run ``params`` names as ``run_id``, or of every run."""
    if not any(_names(text) & _SCORES_VIEWS for text in statements):
        return []
    run_id = (params or {}).get("run_id")
    bound = {"run_id": run_id if isinstance(run_id, str) else None}
    return con.execute(query_text("stale_scorings"), bound).fetchall()


def _names(sql: str) -> set[str]:
    """The names (identifiers and keywords, in lower case) ``sql`` holds, as DuckDB reads it."""
    found = duckdb.tokenize(sql)
    ends = [position for position, _ in found[1:]] + [len(sql)]
    return {
        sql[start:end].rstrip().strip('"').lower()
        for (start, kind), end in zip(found, ends, strict=True)
        if kind.name in ("identifier", "keyword")
    }


_GLOB = frozenset("*?[{")


def resolve_run_paths(sql: str, root: Path, run_ids: Collection[str]) -> str:
    """Make each string literal that is a path inside a run's folder, relative to the
    store (``'RUN/scores/spec/scores.parquet'``, ``'RUN/scores/*/scores.parquet'``),
    absolute under ``root``; nothing else changes.

    DuckDB would read such a path from the working folder, which the sandbox does not
    allow. The literal is rewritten only when its first part is a run of the views, it has
    no ``..`` part, and the path exists or is a pattern, so a value that merely looks like
    one stays as it is. A path that leaves the run it names (``RUN/../x``, even
    ``RUN/../OTHER_RUN/file``) is thus not read from the store, and the sandbox refuses it:
    a path reads from the run it names, and another run's files are read by its own name.
    """
    found = duckdb.tokenize(sql)
    ends = [position for position, _ in found[1:]] + [len(sql)]
    out, done = [], 0
    for (start, kind), end in zip(found, ends, strict=True):
        text = sql[start:end].rstrip()
        if kind.name != "string_const" or not text.startswith("'") or not text.endswith("'"):
            continue
        value = text[1:-1].replace("''", "'")
        run_id, sep, rest = value.partition("/")
        if not sep or run_id not in run_ids or not rest or ".." in rest.split("/"):
            continue
        if not (_GLOB & set(rest) or (root / value).exists()):
            continue
        prefix = str(root / run_id).replace("'", "''")
        out += [sql[done:start], f"'{prefix}/{text[1 + len(run_id) + 1 :]}"]
        done = start + len(text)
    return "".join([*out, sql[done:]])


def list_runs(store: Store) -> QueryResult:
    """The runs in the store, oldest first: status, samples ok and not, the tsa, tp and ahr
    of each run's latest scoring (and its name), model and creation time."""
    return run_sql(store, query_text("runs"))
