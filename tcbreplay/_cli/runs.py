"""``tcbreplay runs``: the runs in the store."""

from __future__ import annotations

from tcbreplay._cli.common import (
    STORE_OPTION,
    main,
)


@main.command()
@STORE_OPTION
def runs(store) -> None:
    """List the runs in the store."""
    from tcbreplay._analysis.sql import run_sql
    from tcbreplay._cli.render import print_table, rows_table
    from tcbreplay._store.runs import Store

    result = run_sql(
        Store(store),
        "select run_id, status, model, simulated, n_samples, ok, "
        "errors, created_at from runs order by created_at",
    )
    print_table(rows_table(result.columns, result.rows))
