"""``tcbreplay catalog``: a DuckDB file of the store's views."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main
from tcbreplay._cli.params import OutputPath
from tcbreplay._words import count


@main.command()
@click.option(
    "-o",
    "--output",
    type=OutputPath(dir_okay=False, path_type=Path),
    default="tcbreplay.duckdb",
    show_default=True,
    help="The DuckDB file to write (not inside the store).",
)
@FORMAT_OPTION
@STORE_OPTION
def catalog(output, fmt, store) -> None:
    """Write a DuckDB file with the store's views, to open in any DuckDB client."""
    from tcbreplay._cli.render import Grid, Output
    from tcbreplay._query.catalog import VIEWS, write_catalog
    from tcbreplay._store.runs import Store

    runs = write_catalog(Store(store), output)
    line = f"{output}: views {', '.join(VIEWS)} over {count(len(runs), 'run')}"
    data = {"path": str(output), "views": list(VIEWS), "runs": runs}
    grid = Grid(["path", "views", "runs"], [(str(output), list(VIEWS), runs)])
    emit(Output(grids=[grid], text=[line], data=data), fmt)
