"""``tcbreplay runs``: the runs in the store."""

from __future__ import annotations

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main


@main.command()
@FORMAT_OPTION
@STORE_OPTION
def runs(fmt, store) -> None:
    """List the runs in the store, with the tsa, tp and ahr of their latest scoring."""
    from tcbreplay._cli.grids import query_output
    from tcbreplay._query.sql import list_runs
    from tcbreplay._store.objects import is_remote
    from tcbreplay._store.runs import Store

    root = Store(store)
    found = list_runs(root)
    output = query_output(found)
    output.grids[0].digits = ".4f"
    output.grids[0].time_format = "%Y-%m-%d %H:%M"
    emit(output, fmt)
    # (a missing local folder is warned of when read; a prefix of object storage holds no
    # folder to miss)
    if not found.rows and (is_remote(root.root) or root.root.is_dir()):
        # on stderr, so that a pipe still reads the (empty) table alone
        click.echo(f"Warning: no runs to list in the store {store}: is --store right?", err=True)
