"""Commands that judge runs: ``score``, ``diff``, ``audit verify`` and ``report``."""

from __future__ import annotations

import sys
from pathlib import Path

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
    for table in breakdown_tables(result.summary):
        print_table(table)
    if result.dashboard_path:
        click.echo(f"dashboard: {result.dashboard_path}")


@main.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--scoring", default="spec", show_default=True, help="Which scoring to compare.")
@click.option("--bootstrap", "n_boot", default=2000, show_default=True, help="Resamples.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--confidence", default=0.95, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Samples listed per direction.",
)
@STORE_OPTION
def diff(run_a, run_b, scoring, n_boot, seed, confidence, fmt, limit, store) -> None:
    """Compare RUN_B with RUN_A: paired deltas (B − A) with bootstrap intervals."""
    from tcbreplay._analysis.diff import diff_runs
    from tcbreplay._cli.render import diff_tables, print_table, to_json
    from tcbreplay._store.runs import Store

    result = diff_runs(
        Store(store),
        run_a,
        run_b,
        scoring=scoring,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    if fmt == "json":
        click.echo(to_json(result.to_dict()))
        return
    for table in diff_tables(result, limit):
        print_table(table)


@main.group()
def audit() -> None:
    """Prove that stored scores follow from the raw traces."""


@audit.command("verify")
@click.argument("run_id")
@click.option("--scoring", help="Only this scoring (a folder under scores/).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@STORE_OPTION
def audit_verify(run_id, scoring, fmt, store) -> None:
    """Re-score RUN_ID from its raw traces and compare with its stored scores (exit 1 if not)."""
    from tcbreplay._analysis.audit import verify_run
    from tcbreplay._cli.render import to_json
    from tcbreplay._store.runs import Store

    report = verify_run(Store(store), run_id, scoring)
    if fmt == "json":
        click.echo(to_json(report.to_dict()))
    else:
        for name in report.changed_files:
            click.echo(f"changed since scoring: {name} (sha256 differs from the audit record)")
        for d in report.differences[:200]:
            where = f"sample {d.sample_id}" if d.sample_id is not None else "run"
            click.echo(
                f"{d.scoring}: {where}: {d.field}: stored {d.stored!r}, recomputed {d.recomputed!r}"
            )
        if len(report.differences) > 200:
            click.echo(f"... and {len(report.differences) - 200} more differences")
        if report.ok:
            click.echo(
                f"verified: {', '.join(report.scorings)} of {run_id}: "
                f"{report.samples_checked} samples identical to a re-score from raw traces"
            )
    if not report.ok:
        sys.exit(1)


@main.command()
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_ID [RUN_ID ...]")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default="report.html",
    show_default=True,
    help="The HTML file to write.",
)
@click.option("--allow-incomplete", is_flag=True, help="Report runs that did not finish.")
@STORE_OPTION
def report(run_ids, output, allow_incomplete, store) -> None:
    """Write one self-contained HTML report of the runs (the first is the baseline)."""
    from tcbreplay._analysis.report import write_report
    from tcbreplay._store.runs import Store

    path = write_report(Store(store), list(run_ids), output, allow_incomplete=allow_incomplete)
    click.echo(str(path))
