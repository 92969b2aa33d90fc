"""``tcbreplay export``: a run as files that ``import`` reads (or as its tables)."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import (
    STORE_OPTION,
    main,
)


@main.command()
@click.argument("run_id")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the files.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["langchain", "openai", "tables"]),
    default="langchain",
    show_default=True,
    help="langchain, openai: traces.jsonl, dataset.jsonl, tools.json and manifest.json, as "
    "import reads them; tables: samples.jsonl, messages.jsonl and manifest.json.",
)
@STORE_OPTION
def export(run_id, output, fmt, store) -> None:
    """Export a run: as traces that import reads back, or as its tables in JSONL."""
    from tcbreplay._importers.export import export_traces, import_command
    from tcbreplay._store.export import export_jsonl
    from tcbreplay._store.runs import Store

    store_ = Store(store)
    store_.check_output(output)
    run = store_.open_run(run_id)
    if fmt == "tables":
        for path in export_jsonl(run, output):
            click.echo(str(path))
        return
    for path in export_traces(run, output, fmt):
        click.echo(str(path))
    click.echo(f"next: {import_command(output, fmt, run_id)}")
