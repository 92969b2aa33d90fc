"""``tcbreplay record``: run an agent over a dataset and store its traces."""

from __future__ import annotations

import shlex
import sys

import click

from tcbreplay._cli.common import FORMAT_OPTION, STORE_OPTION, emit, main, sigterm_as_ctrl_c
from tcbreplay._cli.params import INPUT_FILE, options_dict
from tcbreplay._store.store_urls import store_root
from tcbreplay._words import count, noun_for
from tcbreplay.errors import InputError, StoreError


@main.command()
@click.option("--benchmark", help="Built-in benchmark (default tool-call).")
@click.option("--dataset", type=INPUT_FILE, help="Dataset file.")
@click.option("--tools", help="Tools as module:attr.")
@click.option(
    "--system-prompt",
    type=INPUT_FILE,
    help="Text file of the agent's system prompt (default: the benchmark's).",
)
@click.option(
    "--agent",
    metavar="MODULE:FACTORY",
    help="Record your own agent: factory(model=, tools=, system_prompt=) returning a "
    "LangGraph graph (default: the built-in agent).",
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
@click.option("--workers", type=int, help="Samples run at once [default: 4, or a resumed run's].")
@click.option(
    "--processes",
    type=int,
    help="Processes the workers are spread over (default on Linux: one per 32 workers, "
    "at most one per core; elsewhere 1; or a resumed run's); no more are run than --max-rpm.",
)
@click.option("--retries", type=int, help="Retries of transient failures [default: 2].")
@click.option("--timeout", type=float, help="Seconds per sample [default: 300].")
@click.option(
    "--call-timeout",
    type=float,
    help="Seconds one model call may take before it is retried [default: 120].",
)
@click.option(
    "--backoff",
    type=float,
    help="Base seconds of the exponential backoff between retries [default: 1].",
)
@click.option(
    "--max-rpm",
    type=float,
    help="At most this many model calls per minute, run-wide (whole calls, at least 1; shared "
    "out in whole calls among processes and shards).",
)
@click.option(
    "--max-tpm",
    type=float,
    help="At most this many tokens per minute, run-wide (as the model reports usage).",
)
@click.option(
    "--trials",
    type=int,
    help="Record each sample this many times (trials 0 to K-1; default 1, or a resumed run's).",
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
    help="Like --resume, and re-run the samples stored with status error "
    "(--model-option may correct base_url=... or timeout=...).",
)
@click.option("--overwrite", is_flag=True, help="Delete an existing run of that id first.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    help="Record only the first N samples of the dataset (or of --sample-id): a partial run.",
)
@click.option(
    "--sample-id",
    "sample_ids",
    multiple=True,
    metavar="ID",
    help="Record only this sample (repeatable): a partial run.",
)
@click.option(
    "--max-errors",
    default="0",
    show_default=True,
    metavar="N|FRACTION",
    help="Samples left in error after their retries that still exit 0: a number, or a "
    "fraction of the samples recorded (0.05 or 5%).",
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Record only shard I of N of the run (a job of an array, on any machine sharing the "
    "store): the rows selected (the samples after --limit/--sample-id, each for every trial) "
    "are dealt out one by one in their order, trial by trial, shard I taking rows I, I+N, ...; "
    "with its share of --max-rpm/--max-tpm; the run is complete when every shard is. N is at "
    "most the samples selected times --trials, and at most --max-rpm.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the samples are recorded: this machine, or Ray actors, one shard each "
    "(pip install 'tcbreplay[ray]'; the cluster's machines share the store).",
)
@click.option(
    "--ray-address",
    metavar="ADDR",
    help="The Ray cluster to join with --engine ray (default: RAY_ADDRESS, else a Ray "
    "started on this machine for the command).",
)
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
    agent,
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
    trials,
    run_id,
    resume_id,
    retry_id,
    overwrite,
    limit,
    sample_ids,
    max_errors,
    shard,
    engine,
    ray_address,
    export_jsonl,
    quiet,
    fmt,
    store,
) -> None:
    """Run the agent over a dataset and store its raw message traces.

    Exits 1 when the recording stops on an error retrying cannot fix, or leaves more
    samples in error than --max-errors allows; the run is kept, to resume. A resumed run
    keeps its runner settings (workers, retries, timeouts, rate limits, trials) unless given
    anew."""
    from tcbreplay._cli.progress import Progress
    from tcbreplay._inputs.benchmarks import inputs_from_manifest, load_inputs
    from tcbreplay._ray import check_engine
    from tcbreplay._record.failures import MaxErrors
    from tcbreplay._record.finish import RecordInterrupted
    from tcbreplay._record.models import (
        DEFAULT_MODEL,
        model_from_manifest,
        parse_model,
        with_transport,
    )
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._record.selection import parse_shard
    from tcbreplay._store.files import check_dataset_file
    from tcbreplay._store.run_dir import Run
    from tcbreplay._store.runs import Store
    from tcbreplay._store.schema import DATASET
    from tcbreplay._store.shards import shard_command
    from tcbreplay.errors import RecordError

    store_ = Store(store)
    budget = MaxErrors.parse(max_errors)
    check_engine(engine, ray_address)
    shard_ = None if shard is None else parse_shard(shard)

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
    given = {
        name: value
        for name, value in (
            ("workers", workers),
            ("processes", processes),
            ("retries", retries),
            ("timeout", timeout),
            ("call_timeout", call_timeout),
            ("backoff", backoff),
            ("max_rpm", max_rpm),
            ("max_tpm", max_tpm),
            ("trials", trials),
        )
        if value is not None
    }
    RecordOptions.resolve(given)  # a bad setting is refused before anything is read
    if existing:
        if any((benchmark, dataset, tools, system_prompt, agent, model, run_id)):
            raise InputError(
                "--resume/--retry-errors take the run's inputs from its manifest",
                hint="drop --benchmark, --dataset, --tools, --system-prompt, --agent, --model "
                "and --run-id (--model-option may correct how requests travel: base_url=..., "
                "timeout=...)",
            )
        run = store_.open_run(existing, writing=True)
        manifest = run.manifest
        if manifest.get("source") == "replay":
            raise InputError(
                f"run {existing!r} is a replay: it is finished by the replay command",
                hint=f"run it again: {run.resume_command()}",
            )
        agent = (manifest.get("agent") or {}).get("factory")
        check_dataset_file(manifest, run.dir / DATASET)  # (as replay and audit verify do)
        inputs = inputs_from_manifest(manifest, run.dir)
        choice = with_transport(
            model_from_manifest(manifest["model"]),
            options_dict(model_options, "--model-option"),
        )
        run_id = existing
    else:
        inputs = load_inputs(benchmark, dataset, tools, system_prompt)
        choice = parse_model(
            DEFAULT_MODEL if model is None else model, options_dict(model_options, "--model-option")
        )
    # what this recording asks for, which the commands it suggests ask for again
    sample_ids = tuple(dict.fromkeys(sample_ids))  # (an id given twice: one sample)
    selection = {"limit": limit, "sample_ids": list(sample_ids)}
    label = f"recording {choice.id}" + (" (simulated)" if choice.simulated else "")
    progress = Progress(label, quiet=quiet)
    try:
        with (
            sigterm_as_ctrl_c() as stopped
        ):  # a job stopped by its scheduler keeps what it finished
            summary = record_run(
                inputs,
                choice,
                store_,
                run_id=run_id,
                options=given,
                progress=progress,
                retry_errors=bool(retry_id),
                overwrite=overwrite,
                limit=limit,
                sample_ids=sample_ids or None,
                max_errors=budget,
                agent=agent,
                shard=shard_,
                engine=engine,
                ray_address=ray_address,
            )
    except RecordInterrupted as stop:
        progress.close()
        s = stop.summary
        click.echo(f"Interrupted: kept {_kept(s, selection)} in {s.run_dir}", err=True)
        again = shard_command(Run(store_root(s.run_dir)), shard_, selection)
        click.echo(f"Hint: continue with: {again}", err=True)
        sys.exit(stopped.exit_code)
    except RecordError as failed:
        progress.close()
        if failed.summary is not None:
            _finish(failed.summary, fmt, store, selection, export_jsonl=export_jsonl, failed=True)
        raise
    finally:
        progress.close()
    _finish(summary, fmt, store, selection, budget, export_jsonl)


def _asked(summary, selection) -> int | None:
    """How many samples (and trials) a recording asked for (``selection``: its ``limit``
    and ``sample_ids``); None when it asked for the whole dataset."""
    limit, ids = selection.get("limit"), selection.get("sample_ids")
    if limit is None and not ids:
        return None
    trials = max(summary.trials, 1)
    entries = len(ids) if ids else summary.total // trials
    return min(entries, limit if limit is not None else entries) * trials


def _kept(summary, selection) -> str:
    """How many samples an interrupted recording keeps, of those it asked for when it asked
    for some."""
    asked = _asked(summary, selection)
    if asked is None:
        return f"{summary.recorded}/{summary.total} {noun_for(summary.total, 'sample')}"
    return (
        f"{summary.recorded}/{asked} {noun_for(asked, 'sample')} asked for ({summary.total} in "
        "the dataset)"
    )


def _finish(summary, fmt, store, selection, budget=None, export_jsonl=False, failed=False) -> None:
    """Export the run if asked, and print what the recording did in the chosen format
    (``selection``: the ``limit`` and ``sample_ids`` it asked for)."""
    from tcbreplay._cli.grids import summary_output
    from tcbreplay._store.export import export_jsonl as export_run
    from tcbreplay._store.run_dir import Run
    from tcbreplay._store.shards import shard_command

    run_ = Run(store_root(summary.run_dir))  # a URL stays one (s3://...)
    if export_jsonl:
        export_run(run_, run_.dir / "jsonl", error=StoreError)
    lines = []
    sharded = summary.sharding  # a shard's, while its recording is under way
    if not summary.attempted and sharded is not None:
        lines.append(f"run {summary.run_id}: this shard has nothing left to record")
    elif not summary.attempted and summary.status == "recording":  # a shard, others still going
        lines.append(
            f"run {summary.run_id}: this shard has nothing left to record; other shards are "
            f"still recording ({summary.recorded}/{summary.total} "
            f"{noun_for(summary.total, 'sample')} so far)"
        )
    elif not summary.attempted and summary.status == "incomplete":  # a shard, others missing
        lines.append(
            f"run {summary.run_id}: this shard has nothing left to record; the run holds "
            f"{summary.recorded}/{summary.total} {noun_for(summary.total, 'sample')}, the rest "
            "are other shards'"
        )
    elif not summary.attempted:
        sim = " (simulated model)" if summary.simulated else ""
        asked = " asked for" if summary.status == "partial" else ""
        held = count(summary.recorded, "sample")
        held = f"all {held}" if summary.recorded > 1 else f"its {held}"
        # a recording killed after its last sample: its fold (or status) finished now
        took_over = (
            f"; the {summary.took_over} recording that left it unfinished is finished (its "
            f"journal folded): the run is {summary.status} now"
            if summary.took_over
            else ""
        )
        lines.append(
            f"run {summary.run_id}{sim} already holds {held}{asked}"
            f"{took_over}; nothing to record (--overwrite records it again)"
        )
    else:
        lines.append(_summary_line(summary, selection))
    if not failed:
        if summary.errors:
            kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.error_types.items()))
            when = ", once every shard has finished," if sharded is not None else ""
            lines.append(
                f"errors: {kinds} (within --max-errors {budget}; re-run them{when} with: "
                f"{shard_command(run_, None, selection, '--retry-errors')})"
            )
        if summary.status == "partial":
            lines.append(f"partial run: record the rest with: {run_.resume_command()}")
        score = f"tcbreplay score {summary.run_id}" + (
            f" --store {shlex.quote(str(store))}" if str(store) != "traces" else ""
        )
        if sharded is not None:  # counted against what the shards were asked for
            if summary.status == "incomplete":
                lines.append(
                    f"the run misses {sharded.missing} of the {sharded.counted()}: "
                    f"{sharded.next_steps(run_)}; then: {score}"
                )
            else:  # others still recording
                lines.append(
                    f"the run holds {sharded.asked - sharded.missing} of the {sharded.counted()} "
                    f"so far: {sharded.next_steps(run_)}; next, once every shard has finished: "
                    f"{score}"
                )
        elif summary.status == "recording":  # a shard that finished before the others
            lines.append(f"next, once every shard has finished: {score}")
        elif summary.status == "incomplete":
            lines.append(
                f"the run misses {count(summary.total - summary.recorded, 'sample')} (of shards "
                "not run, "
                f"or stopped): run them, or record the rest with: {run_.resume_command()}; "
                f"then: {score}"
            )
        else:
            lines.append(f"next: {score}")
    emit(summary_output(summary, lines), fmt)


def _summary_line(summary, selection) -> str:
    """One line: what the run holds and what this recording did (``selection``: what it
    asked for)."""
    sim = " (simulated model)" if summary.simulated else ""
    tokens = ""
    if summary.input_tokens is not None or summary.output_tokens is not None:
        tokens = (
            f", {summary.input_tokens or 0:,} input and {summary.output_tokens or 0:,} "
            "output tokens"
        )
    held = f"{summary.ok}/{summary.total} ok"
    if summary.status == "partial":
        held = f"{summary.ok}/{summary.recorded} ok (partial: {summary.total} in the dataset)"
        if summary.trials > 1:
            held = (
                f"{summary.ok}/{summary.recorded} ok (partial: {summary.total // summary.trials}"
                f" in the dataset, {summary.trials} trials each)"
            )
    elif summary.status == "failed":
        asked = _asked(summary, selection)
        held = f"{summary.ok}/{summary.total} ok (stopped)"
        if asked is not None:
            held = (
                f"{summary.ok}/{asked} ok of those asked for (stopped; {summary.total} in the "
                "dataset)"
            )
    elif summary.sharding is not None:  # a shard: what the run holds is said below
        held = f"{summary.ok} ok" + (" so far" if summary.status == "recording" else "")
    elif summary.status == "recording":  # a shard done, others not yet
        held = f"{summary.ok}/{summary.total} ok so far (shards still recording)"
    return (
        f"run {summary.run_id}{sim}: {held}, {count(summary.errors, 'error')}, "
        f"{count(summary.retries, 'retry', 'retries')}{tokens}; recorded {summary.attempted} in "
        f"{summary.duration_s:.1f} s "
        f"-> {summary.run_dir}"
    )
