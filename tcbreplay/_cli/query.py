"""``tcbreplay query``: the named queries in ``queries/named/``, run with parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main
from tcbreplay._cli.params import options_dict
from tcbreplay._cli.query_limits import MEMORY_OPTION, TIMEOUT_OPTION, deadline


@main.command()
@click.argument("name", required=False)
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="A parameter of the query (JSON values parse as JSON); repeatable.",
)
@click.option("--list", "list_", is_flag=True, help="List the named queries.")
@click.option("--show", is_flag=True, help="Print the query's SQL instead of running it.")
@FORMAT_OPTION
@TIMEOUT_OPTION
@MEMORY_OPTION
@STORE_OPTION
def query(name, params, list_, show, fmt, timeout, memory_limit, store) -> None:
    """Run a named query from queries/named/ (see --list)."""
    from tcbreplay._cli.grids import query_output
    from tcbreplay._cli.render import Grid, Output
    from tcbreplay._query.named import list_named, load_named, run_named
    from tcbreplay._store.runs import Store

    if list_ or name is None:
        named = list_named()
        lines = []
        for q in named:
            lines.append(f"{q.name:<18} {q.description}")
            if q.params:
                lines.append(f"{'':<18} params: {q.usage()}")
        rows: list[Sequence[Any]] = [(q.name, q.description, q.usage()) for q in named]
        emit(Output(grids=[Grid(["name", "description", "params"], rows)], text=lines), fmt)
        return
    if show:
        click.echo(load_named(name).sql, nl=False)
        return
    given = options_dict(params, "-p")
    by = deadline(timeout)
    result = run_named(Store(store), name, given, timeout=timeout, memory_limit=memory_limit)
    emit(query_output(result), fmt, by)
