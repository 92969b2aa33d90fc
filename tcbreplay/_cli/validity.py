"""``tcbreplay validity``: does each metric track the samples' outcome?"""

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
@click.argument(
    "run_ids",
    nargs=-1,
    required=True,
    metavar="RUN [RUN ...]",
    shell_complete=complete_run_id,
)
@click.option(
    "--outcome",
    metavar="FIELD|EXPRESSION",
    help="The outcome: a metadata field (true/false or 0/1) or an SQL expression over "
    'metadata fields, such as "reward >= 1"; default when samples have a reward: '
    '"abs(reward - 1) <= 1e-6", τ-bench\'s success.',
)
@click.option(
    "--scoring",
    metavar="NAME",
    shell_complete=complete_scoring,
    help="The scoring whose metrics to test (a folder under scores/; default: the latest).",
)
@click.option(
    "--bootstrap",
    "n_boot",
    type=int,
    default=2000,
    show_default=True,
    help="Bootstrap resamples (of samples, all trials of a sample together).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@FORMAT_OPTION
@STORE_OPTION
def validity(run_ids, outcome, scoring, n_boot, seed, fmt, store) -> None:
    """Show how well each metric tracks the samples' outcome: AUC and correlation."""
    from tcbreplay._cli.validity_tables import validity_output
    from tcbreplay._compare.validity import validity_runs
    from tcbreplay._store.runs import Store

    results = validity_runs(
        Store(store), list(run_ids), outcome=outcome, scoring=scoring, n_boot=n_boot, seed=seed
    )
    emit(validity_output(results), fmt)
