"""The ``tcbreplay`` command line: parse options, call one library function, render the result.

Library modules are imported inside each command so that ``score`` and ``sql``
never load LangChain.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tcbreplay import __version__
from tcbreplay.errors import InputError, TcbReplayError

STORE_OPTION = click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default="traces",
    show_default=True,
    envvar="TCBREPLAY_STORE",
    help="Trace store directory.",
)


class _Cli(click.Group):
    """Turn typed errors into one ``Error:`` line (plus a hint) and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TcbReplayError as exc:
            for line in str(exc).splitlines() or [type(exc).__name__]:
                click.echo(f"Error: {line}", err=True)
            if exc.hint:
                click.echo(f"Hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tcbreplay")
def main() -> None:
    """Record tool-calling agent traces once; score them offline as often as you like."""


def _options(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


@main.command()
@click.option("--benchmark", help="Built-in benchmark (default tool-call).")
@click.option("--dataset", type=click.Path(dir_okay=False, path_type=Path), help="Dataset file.")
@click.option("--tools", help="Tools as module:attr.")
@click.option("--system-prompt", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--model",
    default=None,
    help="PROVIDER:NAME (default google_genai:gemini-2.5-flash), "
    "or sim[:seed=N,error_rate=P,...] to record offline.",
)
@click.option(
    "--model-option",
    "model_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Non-secret model setting (temperature=0, base_url=...); repeatable.",
)
@click.option("--workers", default=4, show_default=True, help="Samples run at once.")
@click.option("--retries", default=2, show_default=True, help="Retries of transient failures.")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds per sample.")
@click.option(
    "--call-timeout",
    default=120.0,
    show_default=True,
    help="Seconds one model call may take before it is retried.",
)
@click.option(
    "--backoff",
    default=1.0,
    show_default=True,
    help="Base seconds of the exponential backoff between retries.",
)
@click.option("--max-rpm", type=float, help="At most this many model calls per minute, run-wide.")
@click.option(
    "--max-tpm",
    type=float,
    help="At most this many tokens per minute, run-wide (as the model reports usage).",
)
@click.option(
    "--run-id",
    help="Run id (default: <benchmark>-<model>-<inputs hash>). "
    "An existing run with the same inputs is resumed.",
)
@click.option(
    "--resume",
    "resume_id",
    metavar="RUN_ID",
    help="Record what RUN_ID is missing, with the inputs in its manifest.",
)
@click.option(
    "--retry-errors",
    "retry_id",
    metavar="RUN_ID",
    help="Like --resume, and re-run the samples stored with status error.",
)
@click.option("--overwrite", is_flag=True, help="Delete an existing run of that id first.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "jsonl"]),
    default="parquet",
    show_default=True,
    help="jsonl also exports the run as JSONL beside the Parquet.",
)
@click.option("--quiet", is_flag=True, help="No progress output.")
@STORE_OPTION
def record(
    benchmark,
    dataset,
    tools,
    system_prompt,
    model,
    model_options,
    workers,
    retries,
    timeout,
    call_timeout,
    backoff,
    max_rpm,
    max_tpm,
    run_id,
    resume_id,
    retry_id,
    overwrite,
    fmt,
    quiet,
    store,
) -> None:
    """Run the agent over a dataset and store its raw message traces."""
    from tcbreplay.benchmarks import inputs_from_manifest, load_inputs
    from tcbreplay.models import DEFAULT_MODEL, parse_model, spec_from_manifest
    from tcbreplay.record import RecordInterrupted, RecordOptions, record_run
    from tcbreplay.render import Progress
    from tcbreplay.store import Run, Store, export_jsonl

    store_ = Store(store)
    existing = resume_id or retry_id
    if existing:
        if any((benchmark, dataset, tools, system_prompt, model, model_options, run_id)):
            raise InputError(
                "--resume/--retry-errors take the run's inputs from its manifest",
                hint="drop --benchmark, --dataset, --tools, --system-prompt, "
                "--model, --model-option and --run-id",
            )
        run = store_.open_run(existing)
        manifest = run.manifest
        inputs = inputs_from_manifest(manifest, run.dir)
        spec = spec_from_manifest(manifest["model"])
        run_id = existing
    else:
        inputs = load_inputs(benchmark, dataset, tools, system_prompt)
        spec = parse_model(model or DEFAULT_MODEL, _options(model_options, "--model-option"))
    options = RecordOptions(
        workers=workers,
        retries=retries,
        timeout=timeout,
        call_timeout=call_timeout,
        backoff=backoff,
        max_rpm=max_rpm,
        max_tpm=max_tpm,
    )
    label = f"recording {spec.id}" + (" (simulated)" if spec.simulated else "")
    progress = Progress(label, quiet=quiet)
    try:
        summary = record_run(
            inputs,
            spec,
            store_,
            run_id=run_id,
            options=options,
            progress=progress,
            retry_errors=bool(retry_id),
            overwrite=overwrite,
        )
    except RecordInterrupted as stop:
        progress.close()
        s = stop.summary
        click.echo(f"Interrupted: kept {s.recorded}/{s.total} samples in {s.run_dir}", err=True)
        click.echo(f"Hint: continue with: tcbreplay record --resume {s.run_id}", err=True)
        sys.exit(130)
    finally:
        progress.close()
    if fmt == "jsonl":
        export_jsonl(Run(Path(summary.run_dir)), Path(summary.run_dir) / "jsonl")
    sim = " (simulated model)" if summary.simulated else ""
    if not summary.attempted:
        click.echo(
            f"run {summary.run_id}{sim} already holds all {summary.total} samples; "
            "nothing to record (--overwrite records it again)"
        )
    else:
        click.echo(
            f"run {summary.run_id}{sim}: {summary.ok}/{summary.total} ok, "
            f"{summary.errors} errors, {summary.retries} retries; recorded "
            f"{summary.attempted} in {summary.duration_s:.1f} s -> {summary.run_dir}"
        )
    if summary.errors:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.error_types.items()))
        click.echo(f"errors: {kinds} (re-run them with --retry-errors {summary.run_id})")
    click.echo(
        f"next: tcbreplay score {summary.run_id}"
        + (f" --store {store}" if str(store) != "traces" else "")
    )


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
    from tcbreplay.render import breakdown_tables, metrics_table, print_table, to_json
    from tcbreplay.score import ScoreOptions, score_run
    from tcbreplay.store import Store

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


@main.command("sql")
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@STORE_OPTION
def sql_command(query, fmt, store) -> None:
    """Run a read-only SQL query over every run in the store.

    Views: runs, samples, messages, tool_calls, gold_calls, scores.
    """
    from tcbreplay.sql import run_sql
    from tcbreplay.store import Store

    _render_rows(run_sql(Store(store), query), fmt)


def _render_rows(result: Any, fmt: str) -> None:
    from tcbreplay.render import print_table, rows_csv, rows_table, to_json

    if fmt == "json":
        click.echo(to_json(result.records()))
    elif fmt == "csv":
        click.echo(rows_csv(result.columns, result.rows), nl=False)
    else:
        print_table(rows_table(result.columns, result.rows))


@main.command()
@click.argument("name", required=False)
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="A parameter of the query (JSON values parse as JSON); repeatable.",
)
@click.option("--list", "list_", is_flag=True, help="List the named queries.")
@click.option("--show", is_flag=True, help="Print the query's SQL instead of running it.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@STORE_OPTION
def query(name, params, list_, show, fmt, store) -> None:
    """Run a named query from queries/named/ (see --list)."""
    from tcbreplay.named_queries import list_named, load_named, run_named
    from tcbreplay.store import Store

    if list_ or name is None:
        for q in list_named():
            click.echo(f"{q.name:<18} {q.description}")
            if q.params:
                click.echo(f"{'':<18} params: {q.usage()}")
        return
    if show:
        click.echo(load_named(name).sql, nl=False)
        return
    result = run_named(Store(store), name, _options(params, "-p"))
    _render_rows(result, fmt)


@main.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default="tcbreplay.duckdb",
    show_default=True,
)
@STORE_OPTION
def catalog(output, store) -> None:
    """Write a DuckDB file with the store's views, to open in any DuckDB client."""
    from tcbreplay.sql import write_catalog
    from tcbreplay.store import Store

    runs = write_catalog(Store(store), output)
    click.echo(
        f"{output}: views runs, tools, samples, messages, tool_calls, gold_calls, scores "
        f"over {len(runs)} runs"
    )


@main.command("import")
@click.option("--dataset", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option(
    "--tools",
    help="module:attr or a JSON file of function schemas "
    "(default with abet-evaluation: the built-in tool-call tools).",
)
@click.option(
    "--traces",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help='JSONL: {"sample_id": ..., "messages": [...]} per line, or a dashboard file.',
)
@click.option("--run-id", required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "abet-evaluation"]),
    default="jsonl",
    show_default=True,
    help="abet-evaluation: a dashboard file of the original benchmark.",
)
@click.option("--model", "model_label", help="Label of the model that produced the traces.")
@STORE_OPTION
def import_command(dataset, tools, traces, run_id, fmt, model_label, store) -> None:
    """Store traces recorded elsewhere as a run that score treats like a recorded one."""
    from tcbreplay.benchmarks import get_benchmark, load_inputs
    from tcbreplay.importer import import_traces
    from tcbreplay.store import Store, validate_run_id

    validate_run_id(run_id)
    if tools is None:
        if fmt != "abet-evaluation":
            raise InputError("--tools is required", hint="give module:attr or a tools.json file")
        tools = get_benchmark("tool-call").tools
    inputs = load_inputs(None, dataset, tools, None, need_prompt=False)
    summary = import_traces(inputs, traces, Store(store), run_id, model=model_label, fmt=fmt)
    missing = f", {summary.missing} without a trace (status missing)" if summary.missing else ""
    click.echo(
        f"run {summary.run_id}: {summary.imported}/{summary.samples} samples imported{missing}"
        f" -> {summary.run_dir}"
    )


@main.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--scoring", default="spec", show_default=True, help="Which scoring to compare.")
@click.option("--bootstrap", "n_boot", default=2000, show_default=True, help="Resamples.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--confidence", default=0.95, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--limit", default=10, show_default=True, help="Samples listed per direction.")
@STORE_OPTION
def diff(run_a, run_b, scoring, n_boot, seed, confidence, fmt, limit, store) -> None:
    """Compare RUN_B with RUN_A: paired deltas (B − A) with bootstrap intervals."""
    from tcbreplay.compare import diff_runs
    from tcbreplay.render import diff_tables, print_table, to_json
    from tcbreplay.store import Store

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
    from tcbreplay.audit import verify_run
    from tcbreplay.render import to_json
    from tcbreplay.store import Store

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
@STORE_OPTION
def runs(store) -> None:
    """List the runs in the store."""
    from tcbreplay.render import print_table, rows_table
    from tcbreplay.sql import run_sql
    from tcbreplay.store import Store

    result = run_sql(
        Store(store),
        "select run_id, status, model, simulated, n_samples, ok, "
        "errors, created_at from runs order by created_at",
    )
    print_table(rows_table(result.columns, result.rows))


@main.command()
@click.argument("run_id")
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
    from tcbreplay.store import Store, export_jsonl

    for path in export_jsonl(Store(store).open_run(run_id), output):
        click.echo(str(path))


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
    from tcbreplay.report import write_report
    from tcbreplay.store import Store

    path = write_report(Store(store), list(run_ids), output, allow_incomplete=allow_incomplete)
    click.echo(str(path))
