"""``tcbreplay score``: the metrics of a run, written beside it."""

from __future__ import annotations

from typing import Any

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, complete_run_id, emit, main
from tcbreplay.errors import InputError


@main.command()
@click.argument("run_id", shell_complete=complete_run_id)
@FORMAT_OPTION
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
    default=0.0,
    show_default=True,
    help="Absolute tolerance for numbers when one is a float.",
)
@click.option(
    "--strings",
    type=click.Choice(["exact", "bfcl"]),
    default="exact",
    show_default=True,
    help="bfcl: compare strings lowercased, without spaces and ,./-_*^, and take no declared "
    "default for a parameter gold leaves out (as BFCL does).",
)
@click.option(
    "--types",
    type=click.Choice(["lenient", "strict"]),
    default="lenient",
    show_default=True,
    help="strict: a float for an integer parameter is invalid, even 10.0, unless gold's "
    "value is a float (as BFCL does).",
)
@click.option(
    "--scorer",
    type=click.Choice(["spec", "abet", "bfcl"]),
    default="spec",
    show_default=True,
    help="spec: the metric spec; abet: the original benchmark's evaluator; "
    "bfcl: BFCL's AST checker (runs imported with --format bfcl).",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="ROLE=NAME,...",
    help="Give tools a role (write, read or scratch), over their schemas' own; repeatable: "
    "--role write=book_reservation,cancel_reservation; a name holding a comma in double "
    "quotes (as in CSV): --role 'write=\"look,up\"'.",
)
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="ROLE|TOOL,...",
    help="Every metric over the calls to these tools, or tools of these roles, only "
    "(repeatable; a scoring of its own: spec_only-...).",
)
@click.option(
    "--without",
    "without",
    multiple=True,
    metavar="ROLE|TOOL,...",
    help="Every metric with the calls to these tools or roles left out (spec_without-...).",
)
@click.option(
    "--gold-run",
    metavar="RUN_ID",
    shell_complete=complete_run_id,
    help="Score against this run's calls (per sample and trial) instead of the dataset's "
    "gold: a scoring of its own (..._gold-RUN_ID), such as a replay or fork against its parent.",
)
@click.option(
    "--side",
    type=click.Choice(["agent", "user", "both"]),
    default="agent",
    show_default=True,
    help="Whose calls are held to which gold calls: the agent's to its own; user: the user's "
    "own calls (as τ²-bench's telecom user acts on its device) to gold calls of the side "
    "user; both: all of them together (a scoring of its own: spec_side-...).",
)
@click.option("--allow-incomplete", is_flag=True, help="Score a run that did not finish.")
@click.option(
    "--dashboard",
    type=click.Choice(["mismatches", "all", "none"]),
    default="mismatches",
    show_default=True,
    help="Samples written to the dashboard file.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the run's parts are scored: threads of this process, or Ray tasks on a "
    "cluster that reads the store (pip install 'tcbreplay[ray]'); the same results.",
)
@click.option(
    "--ray-address",
    metavar="ADDR",
    help="The Ray cluster to join with --engine ray (default: RAY_ADDRESS, else a Ray "
    "started on this machine for the command).",
)
@click.option(
    "--ray-keep",
    type=float,
    metavar="SECONDS",
    help="With --engine ray, how long the scorers stay on the cluster, idle, for the next "
    "scorings [default: 300]; 0 stops them as this scoring ends.",
)
@STORE_OPTION
def score(
    run_id, fmt, rel_tol, abs_tol, strings, types, scorer, roles, only, without, gold_run,
    side, allow_incomplete, dashboard, engine, ray_address, ray_keep, store,
) -> None:  # fmt: skip
    """Score a stored run from its raw traces (no model, tools or network)."""
    from tcbreplay._cli.grids import bfcl_output, score_output
    from tcbreplay._cli.progress import working
    from tcbreplay._score.options import ScoreOptions
    from tcbreplay._score.roles import parse_names, parse_roles
    from tcbreplay._score.run import score_run
    from tcbreplay._store.runs import Store

    options = ScoreOptions(
        scorer=scorer,
        rel_tol=rel_tol,
        abs_tol=abs_tol,
        strings=strings,
        types=types,
        roles=parse_roles(roles),
        only=parse_names(only, "--only"),
        without=parse_names(without, "--without"),
        gold_run=gold_run,
        side=side,
    )
    _check_dashboard(dashboard, options)
    with working(f"scoring {run_id} …"):
        result = score_run(
            Store(store),
            run_id,
            options,
            allow_incomplete=allow_incomplete,
            dashboard=dashboard,
            engine=engine,
            ray_address=ray_address,
            ray_keep=ray_keep,
        )
    files = {"scores_file": str(result.scores_path), "dashboard_file": result.dashboard_path}
    summary = {"warnings": result.warnings, **result.summary}
    output = bfcl_output(summary, files) if scorer == "bfcl" else score_output(summary, files)
    if fmt in ("table", "markdown"):  # above the metrics: a failed run must not look passed
        for warning in result.warnings:
            click.echo(f"Warning: {warning}")
    elif fmt not in ("json", "jsonl"):  # (whose summary holds them): on stderr, off the rows
        for warning in result.warnings:
            click.echo(f"Warning: {warning}", err=True)
    emit(output, fmt)


def _check_dashboard(dashboard: str, options: Any) -> None:
    """Refuse a --dashboard given with options whose scoring writes no dashboard file (it
    holds the original benchmark's metrics of every agent call against the dataset's gold):
    the file was left out in silence."""
    source = click.get_current_context().get_parameter_source("dashboard")
    if dashboard == "none" or source is not click.core.ParameterSource.COMMANDLINE:
        return
    given = (
        ("--scorer bfcl", options.scorer == "bfcl"),
        ("--only/--without", options.focused),
        ("--gold-run", options.gold_run is not None),
        (f"--side {options.side}", options.side != "agent"),
    )
    why = [flag for flag, on in given if on]
    if why:
        raise InputError(
            f"--dashboard {dashboard}: a scoring with {why[0]} writes no dashboard file (it "
            "holds the benchmark's metrics of every agent call against the dataset's gold)",
            hint="leave --dashboard out, or score without " + why[0],
        )
