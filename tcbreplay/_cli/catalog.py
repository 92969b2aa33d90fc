"""``tcbreplay catalog``: a DuckDB file of the store's views."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import (
    STORE_OPTION,
    main,
)


@main.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default="tcbreplay.duckdb",
    show_default=True,
)
@STORE_OPTION
def catalog(output, store) -> None:
    """Write a DuckDB file with the store's views, to open in any DuckDB client."""
    from tcbreplay._analysis.catalog import write_catalog
    from tcbreplay._store.runs import Store

    runs = write_catalog(Store(store), output)
    click.echo(
        f"{output}: views runs, tools, samples, messages, tool_calls, gold_calls, scores "
        f"over {len(runs)} runs"
    )
