"""``tcbreplay replay``: run every sample of a run through the agent again, its model the
recording, and say where it diverges."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tcbreplay._cli.common import (
    FORMAT_OPTION,
    STORE_OPTION,
    complete_run_id,
    emit,
    main,
    sigterm_as_ctrl_c,
)
from tcbreplay._cli.params import INPUT_FILE, options_dict
from tcbreplay._words import noun_for


@main.command()
@click.argument("run_id", shell_complete=complete_run_id)
@click.option("--run-id", "new_run_id", help="The replay's run id [default: RUN-replay-<hash>].")
@click.option(
    "--system-prompt", type=INPUT_FILE, help="Replay with this system prompt (a text file)."
)
@click.option("--tools", help="Replay with these tools (module:attr, or a JSON file).")
@click.option("--dataset", type=INPUT_FILE, help="Replay with this dataset's inputs.")
@click.option(
    "--agent",
    metavar="MODULE:FACTORY",
    help="Replay through this agent: factory(model=, tools=, system_prompt=) -> LangGraph graph "
    "[default: the run's].",
)
@click.option(
    "--recorded-tools",
    is_flag=True,
    help="Tools answer with their recorded outputs (by name and arguments), not run live.",
)
@click.option("--then", metavar="MODEL", help="Go on live with MODEL where a sample diverges.")
@click.option(
    "--model-option",
    "model_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A setting of the --then model; repeatable.",
)
@click.option(
    "--fork-at",
    type=int,
    metavar="TURN",
    help="Every sample goes on with the --then model from this turn (0: its first request).",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Any request for the --then model fails at once (with --then only).",
)
@click.option("--allow-divergence", is_flag=True, help="Exit 0 even when samples diverged.")
@click.option("--workers", type=int, help="Samples replayed at once [default: 4].")
@click.option("--processes", type=int, help="Processes the workers are spread over.")
@click.option("--timeout", type=float, help="Seconds per sample [default: 300].")
@click.option("--overwrite", is_flag=True, help="Delete an existing run of the replay's id first.")
@click.option("--limit", type=click.IntRange(min=1), help="Replay only the first N samples.")
@click.option("--sample-id", "sample_ids", multiple=True, metavar="ID",
              help="Replay only this sample (repeatable).")  # fmt: skip
@click.option("--quiet", is_flag=True, help="No progress output.")
@FORMAT_OPTION
@STORE_OPTION
def replay(
    run_id, new_run_id, system_prompt, tools, dataset, agent, recorded_tools, then,
    model_options, fork_at, offline, allow_divergence, workers, processes, timeout, overwrite,
    limit, sample_ids, quiet, fmt, store,
) -> None:  # fmt: skip
    """Re-run every sample (and trial) of RUN_ID through the agent, each model request
    answered by the recorded turn whose request matches; the replay is a run of its own.

    A sample stops at its first request the recording does not answer (status diverged), and
    the divergences view says where it first differs. Exits 1 when a sample diverged or
    ended in error (--allow-divergence: diverged samples do not count), 0 when none did."""
    from tcbreplay._cli.grids import replay_output
    from tcbreplay._cli.progress import Progress
    from tcbreplay._record.finish import RecordInterrupted, RecordSummary
    from tcbreplay._replay.run import replay_run, replay_summary
    from tcbreplay._store.run_dir import Run
    from tcbreplay._store.runs import Store
    from tcbreplay.errors import RecordError

    given = {
        name: value
        for name, value in (("workers", workers), ("processes", processes), ("timeout", timeout))
        if value is not None
    }
    progress = Progress(f"replaying {run_id}", quiet=quiet, verb="replayed")
    try:
        with sigterm_as_ctrl_c() as stopped:  # a job stopped by its scheduler keeps its samples
            summary = replay_run(
                Store(store),
                run_id,
                new_run_id=new_run_id,
                system_prompt=system_prompt,
                tools=tools,
                dataset=dataset,
                agent=agent,
                then=then,
                then_options=options_dict(model_options, "--model-option"),
                fork_at=fork_at,
                recorded_tools=recorded_tools,
                offline=offline,
                options=given,
                progress=progress,
                overwrite=overwrite,
                limit=limit,
                sample_ids=sample_ids or None,
            )
    except RecordError as failed:  # stopped: what it replayed said first, as record says it
        progress.close()
        if isinstance(failed.summary, RecordSummary):
            emit(replay_output(replay_summary(Store(store), failed.summary), store), fmt)
        raise
    except RecordInterrupted as stop:
        progress.close()
        s = stop.summary
        kept = f"{s.recorded}/{s.total} {noun_for(s.total, 'sample')}"
        click.echo(f"Interrupted: kept {kept} in {s.run_dir}", err=True)
        click.echo(f"Hint: continue with: {Run(Path(s.run_dir)).resume_command()}", err=True)
        sys.exit(stopped.exit_code)
    finally:
        progress.close()
    emit(replay_output(summary, store), fmt)
    # an error the recording ended in too, where it did, is no change
    errors = (
        summary.errors
        - summary.recorded_errors
        - sum(summary.error_types.get(kind, 0) for kind in ("diverged", "missing"))
    )  # (missing: trials the parent holds no recording of, not replayed)
    if errors or (summary.diverged_samples and not allow_divergence):
        sys.exit(1)
