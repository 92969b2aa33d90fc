"""``tcbreplay diff``: two runs compared sample by sample, with bootstrap intervals."""

from __future__ import annotations

import click

from tcbreplay._cli.common import (
    FORMAT_OPTION,
    STORE_OPTION,
    complete_run_id,
    complete_scoring,
    emit,
    main,
)


@main.command()
@click.argument("run_a", shell_complete=complete_run_id)
@click.argument("run_b", shell_complete=complete_run_id)
@click.option(
    "--scoring",
    default="spec",
    show_default=True,
    shell_complete=complete_scoring,
    help="Which scoring to compare.",
)
@click.option("--bootstrap", "n_boot", default=2000, show_default=True, help="Resamples.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--confidence", default=0.95, show_default=True, help="Level of the bootstrap intervals."
)
@FORMAT_OPTION
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Samples listed per direction.",
)
@STORE_OPTION
def diff(run_a, run_b, scoring, n_boot, seed, confidence, fmt, limit, store) -> None:
    """Compare RUN_B with RUN_A: paired deltas (B − A) with bootstrap intervals."""
    from tcbreplay._cli.grids import diff_output
    from tcbreplay._cli.progress import working
    from tcbreplay._compare.diff import diff_runs
    from tcbreplay._store.runs import Store

    doing = f"comparing {run_b} with {run_a}"
    with working(f"{doing} …") as say:
        result = diff_runs(
            Store(store),
            run_a,
            run_b,
            scoring=scoring,
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
            progress=lambda done, total: say(f"{doing}: {done:,} of {total:,} resamples …"),
        )
    if fmt in ("table", "markdown"):  # above the deltas, as score says its own
        for warning in result.warnings:
            click.echo(f"Warning: {warning}")
    elif fmt not in ("json", "jsonl"):  # (whose output holds them): on stderr, off the rows
        for warning in result.warnings:
            click.echo(f"Warning: {warning}", err=True)
    emit(diff_output(result, limit), fmt)
