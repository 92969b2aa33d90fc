"""``tcbreplay sql``: read-only SQL over every run in the store."""

from __future__ import annotations

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main
from tcbreplay._cli.query_limits import MEMORY_OPTION, TIMEOUT_OPTION, deadline


@main.command("sql")
@click.argument("query")
@FORMAT_OPTION
@TIMEOUT_OPTION
@MEMORY_OPTION
@STORE_OPTION
def sql_command(query, fmt, timeout, memory_limit, store) -> None:
    """Run a read-only SQL query over every run in the store.

    Views: runs, samples, messages, tool_calls, gold_calls, scores (each run's default
    scoring, spec), scores_all (every scoring), scorings, tools, divergences (replays'). A
    path such as 'RUN/scores/spec/scores.parquet' is read from the store.
    """
    from tcbreplay._cli.grids import query_output
    from tcbreplay._query.sql import run_sql
    from tcbreplay._store.runs import Store

    by = deadline(timeout)
    result = run_sql(Store(store), query, timeout=timeout, memory_limit=memory_limit)
    emit(query_output(result), fmt, by)
