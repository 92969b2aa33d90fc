"""``tcbreplay collect``: an OTLP/HTTP receiver writing what it receives into a run."""

from __future__ import annotations

import sys
import time

import click

from tcbreplay._cli.common import STORE_OPTION, emit, main, output_format, sigterm_as_ctrl_c
from tcbreplay._cli.params import listen_on
from tcbreplay._words import count


@main.command()
@click.option(
    "--run-id",
    required=True,
    help="The run to write into (a new one, or a collected one to go on with).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=4318, show_default=True,
              help="The port to listen on (0: any free one, said on stderr).")  # fmt: skip
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on: this machine only by default; 0.0.0.0 takes traces "
    "from anywhere that reaches it.",
)
@click.option(
    "--sample-by",
    type=click.Choice(["trace", "agent"]),
    default="trace",
    show_default=True,
    help="A sample per trace, or per outermost agent span (as import --sample-by).",
)
@STORE_OPTION
def collect(run_id, port, host, sample_by, store) -> None:
    """Receive OTLP/HTTP traces (protobuf or JSON, POST /v1/traces and /v1/logs) into a run,
    each trace a sample as it arrives; Ctrl-C finishes the run.

    Point an instrumented agent at it with OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318.
    What it acknowledges is on disk (a kill -9 loses none of it: collect the same run id
    again); a payload it cannot read gets HTTP 400 and a line on stderr."""
    from tcbreplay._cli.grids import summary_output
    from tcbreplay._importers.otel.collect import collect as collect_run
    from tcbreplay._store.run_dir import validate_run_id
    from tcbreplay._store.runs import Store

    validate_run_id(run_id)
    warning = listen_on(host)

    def log(line: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} {line}", err=True)

    def ready(endpoint: str) -> None:
        log(f"collect: run {run_id}: listening on {endpoint} (POST /v1/traces)")
        log("collect: Ctrl-C finishes the run")
        if warning:
            click.echo(warning, err=True)

    with sigterm_as_ctrl_c():  # SIGTERM finishes the run as Ctrl-C does
        summary = collect_run(
            Store(store), run_id, host=host, port=port, sample_by=sample_by, log=log, ready=ready
        )
    refused = f", {summary.refused} refused" if summary.refused else ""
    earlier = f", {summary.earlier_requests} before this start" if summary.earlier_requests else ""
    unstored = (
        f"; {summary.unstored} {'trace' if summary.unstored == 1 else 'traces'} not stored"
        if summary.unstored
        else ""
    )
    if summary.stale:
        traces = "trace" if summary.stale == 1 else "traces"
        its = "its" if summary.stale == 1 else "their"
        unstored += f"; {summary.stale} {traces} kept as stored before {its} later spans"
    line = (
        f"run {summary.run_id}: {count(summary.samples, 'sample')} from "
        f"{count(summary.spans, 'span')} ({count(summary.requests, 'request')}{earlier}"
        f"{refused}){unstored} -> {summary.run_dir}"
    )
    emit(summary_output(summary, [line]), output_format())
    sys.stdout.flush()
    if summary.unstored or summary.stale:  # received, acknowledged, not in the run: it failed
        counted = (("not stored", summary.unstored), ("kept as stored before", summary.stale))
        which = " or ".join(what for what, n in counted if n)
        click.echo(
            f"Error: the spans of each trace {which} are in the run's received files; "
            "the lines above say why each made no sample",
            err=True,
        )
        sys.exit(1)
