"""``tcbreplay report``: one self-contained HTML page of one or more runs."""

from __future__ import annotations

from pathlib import Path

import click

from tcbreplay._cli.common import (
    FORMAT_OPTION,
    STORE_OPTION,
    complete_run_id,
    complete_scoring,
    emit,
    main,
)
from tcbreplay._cli.params import OutputPath


@main.command()
@click.argument(
    "run_ids",
    nargs=-1,
    required=True,
    metavar="RUN_ID [RUN_ID ...]",
    shell_complete=complete_run_id,
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(path_type=Path),
    default="report.html",
    show_default=True,
    help="The HTML file to write.",
)
@click.option("--allow-incomplete", is_flag=True, help="Report runs that did not finish.")
@click.option(
    "--scoring",
    default="spec",
    show_default=True,
    shell_complete=complete_scoring,
    help="The scoring whose numbers the page shows, as spec_only-write.",
)
@click.option(
    "--outcome",
    metavar="FIELD|EXPRESSION",
    help="The samples' outcome for the validity panel, as in tcbreplay validity (default: "
    "abs(reward - 1) <= 1e-6 where samples have a reward).",
)
@click.option(
    "--samples",
    "limit",
    type=click.IntRange(min=0),
    default=2_000,  # _report.shown.SAMPLES, not imported: the command line starts light
    show_default=True,
    help="Samples the page shows with their transcripts; past it, those regressed, in error "
    "or failed first, then a seeded choice of the rest (every number counts all samples).",
)
@click.option(
    "--all-samples", is_flag=True, help="Show every sample (the file grows with the run)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of that choice.")
@FORMAT_OPTION
@STORE_OPTION
def report(
    run_ids, output, allow_incomplete, scoring, outcome, limit, all_samples, seed, fmt, store
) -> None:
    """Write one self-contained HTML report of the runs (the first is the baseline)."""
    from tcbreplay._cli.render import Grid, Output
    from tcbreplay._report import write_report
    from tcbreplay._store.runs import Store

    path = write_report(
        Store(store),
        list(run_ids),
        output,
        allow_incomplete=allow_incomplete,
        scoring=scoring,
        outcome=outcome,
        samples=None if all_samples else limit,
        seed=seed,
    )
    data = {"path": str(path), "runs": list(run_ids)}
    emit(Output(grids=[Grid(["path"], [(str(path),)])], text=[str(path)], data=data), fmt)
