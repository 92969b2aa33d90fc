"""Commands that read the store: ``sql``, ``query``, ``runs``, ``export`` and ``catalog``."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import STORE_OPTION, main, options_dict, render_rows

# the output of query results: a table on the terminal, or CSV or JSON for other programs
_FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
# the limits of a query; the library's functions have none unless given
_TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=300,
    show_default=True,
    metavar="SECONDS",
    help="Stop the query after this long (0: no limit).",
)
_MEMORY_OPTION = click.option(
    "--memory-limit",
    default="50%",
    show_default=True,
    metavar="SIZE",
    help="Most memory DuckDB may use (it spills to disk beyond it), and most the rows held "
    "for printing may take: a size such as 4GB, or a share of the machine's memory such "
    "as 50%.",
)


@main.command("sql")
@click.argument("query")
@_FORMAT_OPTION
@_TIMEOUT_OPTION
@_MEMORY_OPTION
@STORE_OPTION
def sql_command(query, fmt, timeout, memory_limit, store) -> None:
    """Run a read-only SQL query over every run in the store.

    Views: runs, samples, messages, tool_calls, gold_calls, scores, tools.
    """
    from tcbreplay._store.runs import Store
    from tcbreplay._store.views import run_sql

    result = run_sql(Store(store), query, timeout=timeout, memory_limit=memory_limit)
    render_rows(result, fmt)


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
@_FORMAT_OPTION
@_TIMEOUT_OPTION
@_MEMORY_OPTION
@STORE_OPTION
def query(name, params, list_, show, fmt, timeout, memory_limit, store) -> None:
    """Run a named query from queries/named/ (see --list)."""
    from tcbreplay._analysis.named_queries import list_named, load_named, run_named
    from tcbreplay._store.runs import Store

    if list_ or name is None:
        for q in list_named():
            click.echo(f"{q.name:<18} {q.description}")
            if q.params:
                click.echo(f"{'':<18} params: {q.usage()}")
        return
    if show:
        click.echo(load_named(name).sql, nl=False)
        return
    given = options_dict(params, "-p")
    result = run_named(Store(store), name, given, timeout=timeout, memory_limit=memory_limit)
    render_rows(result, fmt)


@main.command()
@STORE_OPTION
def runs(store) -> None:
    """List the runs in the store."""
    from tcbreplay._cli.render import print_table, rows_table
    from tcbreplay._store.runs import Store
    from tcbreplay._store.views import run_sql

    result = run_sql(
        Store(store),
        "select run_id, status, model, simulated, n_samples, ok, "
        "errors, created_at from runs order by created_at",
    )
    print_table(rows_table(result.columns, result.rows))


@main.command()
@click.argument("run_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for samples.jsonl, messages.jsonl and manifest.json.",
)
@STORE_OPTION
def export(run_id, output, store) -> None:
    """Export a run as JSONL files."""
    from tcbreplay._store.export import export_jsonl
    from tcbreplay._store.runs import Store

    store_ = Store(store)
    store_.check_output(output)
    for path in export_jsonl(store_.open_run(run_id), output):
        click.echo(str(path))


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
    from tcbreplay._store.runs import Store
    from tcbreplay._store.views import write_catalog

    runs = write_catalog(Store(store), output)
    click.echo(
        f"{output}: views runs, tools, samples, messages, tool_calls, gold_calls, scores "
        f"over {len(runs)} runs"
    )
