"""``tcbreplay export``: a run as JSON Lines."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import STORE_OPTION, complete_run_id, emit, main, output_format


@main.command()
@click.argument("run_id", shell_complete=complete_run_id)
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
    from tcbreplay._cli.render import Grid, Output
    from tcbreplay._store.export import export_jsonl
    from tcbreplay._store.runs import Store

    store_ = Store(store)
    store_.check_output(output)
    files = [str(path) for path in export_jsonl(store_.open_run(run_id), output)]
    grid = Grid(["path"], [(f,) for f in files])
    emit(Output(grids=[grid], text=files, data={"run_id": run_id, "files": files}), output_format())
