"""``tcbreplay runs``: the runs in the store."""

from __future__ import annotations

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main


@main.command()
@FORMAT_OPTION
@STORE_OPTION
def runs(fmt, store) -> None:
    """List the runs in the store, with the tsa, tp and ahr of their latest scoring."""
    from tcbreplay._analysis.sql import list_runs
    from tcbreplay._cli.grids import query_output
    from tcbreplay._store.runs import Store

    output = query_output(list_runs(Store(store)))
    output.grids[0].digits = ".4f"
    output.grids[0].time_format = "%Y-%m-%d %H:%M"
    emit(output, fmt)
