"""``tcbreplay record``: run an agent over a dataset and store its traces."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main, options_dict
from tcbreplay.errors import InputError, StoreError


@main.command()
@click.option("--benchmark", help="Built-in benchmark (default tool-call).")
@click.option("--dataset", type=click.Path(dir_okay=False, path_type=Path), help="Dataset file.")
@click.option("--tools", help="Tools as module:attr.")
@click.option(
    "--system-prompt",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Text file of the agent's system prompt (default: the benchmark's).",
)
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
@click.option(
    "--processes",
    type=int,
    help="Processes the workers are spread over (default on Linux: one per 32 workers, "
    "at most one per core; elsewhere 1).",
)
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
    "--export-jsonl", is_flag=True, help="Also export the run as JSON Lines into <run>/jsonl/."
)
@click.option("--quiet", is_flag=True, help="No progress output.")
@FORMAT_OPTION
@STORE_OPTION
def record(
    benchmark,
    dataset,
    tools,
    system_prompt,
    model,
    model_options,
    workers,
    processes,
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
    export_jsonl,
    quiet,
    fmt,
    store,
) -> None:
    """Run the agent over a dataset and store its raw message traces."""
    from tcbreplay._cli.grids import summary_output
    from tcbreplay._cli.render import Progress
    from tcbreplay._inputs.benchmarks import inputs_from_manifest, load_inputs
    from tcbreplay._record.models import DEFAULT_MODEL, model_from_manifest, parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import RecordInterrupted, record_run
    from tcbreplay._store.export import export_jsonl
    from tcbreplay._store.runs import Run, Store

    store_ = Store(store)
    if resume_id and retry_id:
        raise InputError(
            "--resume and --retry-errors cannot be combined: --resume records only the samples "
            "the run does not hold, --retry-errors also re-runs those stored as errors",
            hint=f"give one of them: --retry-errors {retry_id} also records what is missing",
        )
    existing = resume_id or retry_id
    if existing and overwrite:
        flag = "--resume" if resume_id else "--retry-errors"
        raise InputError(
            f"{flag} and --overwrite cannot be combined: {flag} keeps the run's samples, "
            "--overwrite deletes them",
            hint="drop --overwrite to keep them; to record the run anew, give its inputs, "
            "--run-id and --overwrite",
        )
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
        choice = model_from_manifest(manifest["model"])
        run_id = existing
    else:
        inputs = load_inputs(benchmark, dataset, tools, system_prompt)
        choice = parse_model(model or DEFAULT_MODEL, options_dict(model_options, "--model-option"))
    options = RecordOptions(
        workers=workers,
        processes=processes,
        retries=retries,
        timeout=timeout,
        call_timeout=call_timeout,
        backoff=backoff,
        max_rpm=max_rpm,
        max_tpm=max_tpm,
    )
    label = f"recording {choice.id}" + (" (simulated)" if choice.simulated else "")
    progress = Progress(label, quiet=quiet)
    try:
        summary = record_run(
            inputs,
            choice,
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
        click.echo(f"Hint: continue with: {Run(Path(s.run_dir)).resume_command()}", err=True)
        sys.exit(130)
    finally:
        progress.close()
    if export_jsonl:
        run_dir = Path(summary.run_dir)
        export_jsonl(Run(run_dir), run_dir / "jsonl", error=StoreError)
    sim = " (simulated model)" if summary.simulated else ""
    lines = []
    if not summary.attempted:
        lines.append(
            f"run {summary.run_id}{sim} already holds all {summary.total} samples; "
            "nothing to record (--overwrite records it again)"
        )
    else:
        tokens = ""
        if summary.input_tokens is not None or summary.output_tokens is not None:
            tokens = (
                f", {summary.input_tokens or 0:,} input and {summary.output_tokens or 0:,} "
                "output tokens"
            )
        lines.append(
            f"run {summary.run_id}{sim}: {summary.ok}/{summary.total} ok, "
            f"{summary.errors} errors, {summary.retries} retries{tokens}; recorded "
            f"{summary.attempted} in {summary.duration_s:.1f} s -> {summary.run_dir}"
        )
    if summary.errors:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.error_types.items()))
        lines.append(f"errors: {kinds} (re-run them with --retry-errors {summary.run_id})")
    lines.append(
        f"next: tcbreplay score {summary.run_id}"
        + (f" --store {store}" if str(store) != "traces" else "")
    )
    emit(summary_output(summary, lines), fmt)
