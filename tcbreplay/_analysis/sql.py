"""Read-only SQL over every run in the store (``tcbreplay sql``): statements checked, then run
on the store's locked-down views within a time and memory limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcbreplay._analysis.query_limits import run_statements
from tcbreplay._analysis.statements import check_read_only
from tcbreplay._store.runs import Store
from tcbreplay._store.views import connect, query_text


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
    statements = check_read_only(sql)
    con = connect(store, memory_limit=memory_limit)
    columns, rows = run_statements(con, statements, params, timeout=timeout)
    return QueryResult(columns=columns, rows=rows)


def list_runs(store: Store) -> QueryResult:
    """The runs in the store, oldest first: status, samples ok and not, the tsa, tp and ahr
    of each run's latest scoring (and its name), model and creation time."""
    return run_sql(store, query_text("runs"))
