"""``tcbreplay audit verify``: stored scores checked against the raw traces."""

from __future__ import annotations

import sys

import click

from tcbreplay._cli.common import (
    FORMAT_OPTION,
    STORE_OPTION,
    complete_run_id,
    complete_scoring,
    emit,
    main,
)


@main.group()
def audit() -> None:
    """Prove that stored scores follow from the raw traces."""


@audit.command("verify")
@click.argument("run_id", shell_complete=complete_run_id)
@click.option(
    "--scoring", shell_complete=complete_scoring, help="Only this scoring (a folder under scores/)."
)
@FORMAT_OPTION
@STORE_OPTION
def audit_verify(run_id, scoring, fmt, store) -> None:
    """Re-score RUN_ID from its raw traces and compare with its stored scores (exit 1 if not)."""
    from tcbreplay._cli.grids import audit_output
    from tcbreplay._compare.audit import verify_run
    from tcbreplay._store.runs import Store

    report = verify_run(Store(store), run_id, scoring)
    emit(audit_output(report), fmt)
    if not report.ok:
        sys.exit(1)
