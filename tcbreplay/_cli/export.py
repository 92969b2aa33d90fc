"""``tcbreplay export``: a run as files that ``import`` reads (or as its tables)."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import STORE_OPTION, complete_run_id, emit, main, output_format
from tcbreplay._cli.params import OutputPath


@main.command()
@click.argument("run_id", shell_complete=complete_run_id)
@click.option(
    "-o",
    "--output",
    type=OutputPath(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the files.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["langchain", "openai", "otlp", "tables"]),
    default="langchain",
    show_default=True,
    help="langchain, openai: traces.jsonl, dataset.jsonl, tools.json and manifest.json, as "
    "import reads them; otlp: traces.otlp.jsonl (OTLP/JSON spans, GenAI conventions) in their "
    "stead; tables: samples.jsonl, messages.jsonl and manifest.json.",
)
@STORE_OPTION
def export(run_id, output, fmt, store) -> None:
    """Export a run: as traces that import reads back, or as its tables in JSONL.

    The output format goes before the command: tcbreplay --format json export ..."""
    from tcbreplay._cli.render import Grid, Output
    from tcbreplay._importers.export import check_export_folder, export_traces, import_command
    from tcbreplay._store.export import export_jsonl
    from tcbreplay._store.runs import Store

    store_ = Store(store)
    store_.check_output(output)
    check_export_folder(Path(output), fmt)
    run = store_.open_run(run_id)
    if fmt == "tables":
        files = [str(path) for path in export_jsonl(run, output)]
        notes = []
    else:
        files = [str(path) for path in export_traces(run, output, fmt)]
        # (the store holds the run: the same id is for another store)
        notes = [
            "next, into another store (--store), or with another --run-id into this one: "
            + import_command(output, fmt, run_id)
        ]
    grid = Grid(["path"], [(f,) for f in files])
    data = {"run_id": run_id, "format": fmt, "files": files}
    emit(Output(grids=[grid], text=files + notes, data=data, notes=notes), output_format())
