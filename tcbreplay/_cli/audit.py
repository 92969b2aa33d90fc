"""``tcbreplay audit verify``: stored scores checked against the raw traces."""

from __future__ import annotations

import sys

import click

from tcbreplay._cli.common import STORE_OPTION, main


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
