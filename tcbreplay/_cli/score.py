"""``tcbreplay score``: the metrics of a run, written beside it."""

from __future__ import annotations

import click

from tcbreplay._cli.common import STORE_OPTION, main


@main.command()
@click.argument("run_id")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--rel-tol",
    type=float,
    default=1e-9,
    show_default=True,
    help="Relative tolerance for numbers when one is a float.",
)
@click.option(
    "--abs-tol",
    type=float,
    default=1e-9,
    show_default=True,
    help="Absolute tolerance for numbers when one is a float.",
)
@click.option(
    "--scorer",
    type=click.Choice(["spec", "abet"]),
    default="spec",
    show_default=True,
    help="spec: the metric spec; abet: the original benchmark's evaluator.",
)
@click.option("--allow-incomplete", is_flag=True, help="Score a run that did not finish.")
@click.option(
    "--dashboard",
    type=click.Choice(["mismatches", "all", "none"]),
    default="mismatches",
    show_default=True,
    help="Samples written to the dashboard file.",
)
@STORE_OPTION
def score(run_id, fmt, rel_tol, abs_tol, scorer, allow_incomplete, dashboard, store) -> None:
    """Score a stored run from its raw traces (no model, tools or network)."""
    from tcbreplay._cli.render import breakdown_tables, metrics_table, print_table, to_json, working
    from tcbreplay._score.options import ScoreOptions
    from tcbreplay._score.run import score_run
    from tcbreplay._store.runs import Store

    with working(f"scoring {run_id} …"):
        result = score_run(
            Store(store),
            run_id,
            ScoreOptions(scorer=scorer, rel_tol=rel_tol, abs_tol=abs_tol),
            allow_incomplete=allow_incomplete,
            dashboard=dashboard,
        )
    if fmt == "json":
        click.echo(
            to_json(
                {
                    **result.summary,
                    "scores_file": str(result.scores_path),
                    "dashboard_file": str(result.dashboard_path),
                }
            )
        )
        return
    print_table(metrics_table(result.summary))
    for table in breakdown_tables(result.summary) + _trial_tables(result.summary):
        print_table(table)
    if result.summary.get("trials", 1) > 1:
        click.echo(SUCCESS)
    if result.dashboard_path:
        click.echo(f"dashboard: {result.dashboard_path}")


def _trial_tables(summary: dict) -> list:
    """With several trials: each trial's metrics, and pass^k and pass@k."""
    from rich.table import Table

    from tcbreplay._cli.render import _fmt

    if summary.get("trials", 1) < 2:
        return []
    per_trial = Table(title="per trial", title_justify="left")
    columns = ("trial", "n_samples", "tsa", "tp", "ahr", "success")
    for column in columns:
        per_trial.add_column(column, justify="right")
    for row in summary["by_trial"]:
        per_trial.add_row(*(_fmt(row.get(c)) for c in columns))
    mean = summary["by_sample"]
    per_trial.add_row(
        "per sample", _fmt(mean["n_samples"]), *(_fmt(mean[c]) for c in columns[2:]), style="bold"
    )
    per_trial.caption = "per sample: each sample's mean over its trials, averaged over samples"
    pass_k = Table(title="pass^k and pass@k", title_justify="left")
    for column in ("k", "pass^k", "pass@k"):
        pass_k.add_column(column, justify="right")
    for row in summary["pass_k"]:
        pass_k.add_row(str(row["k"]), _fmt(row["pass_hat_k"]), _fmt(row["pass_at_k"]))
    return [per_trial, pass_k]


SUCCESS = (
    "success: a clean sample (tsa 1 or no gold calls, tp 1, ahr 0 or none, no gold argument "
    "left out); pass^k: the chance that k of a sample's trials drawn without replacement all "
    "succeed, pass@k: that at least one does, averaged over samples"
)
