"""``tcbreplay import``: traces recorded elsewhere, stored as a run."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from tcbreplay._cli.common import STORE_OPTION, main
from tcbreplay._importers.sniff import ALIASES, FORMATS
from tcbreplay.errors import InputError, TraceError

# formats whose traces hold the samples' inputs and gold calls: --dataset may be left out
_SELF_CONTAINED = ("tau-bench", "inspect")


@main.command("import")
@click.option(
    "--dataset",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The samples' inputs and gold calls (not needed for tau-bench, nor for inspect logs "
    "whose samples hold their calls).",
)
@click.option(
    "--tools",
    help="module:attr or a JSON file of tool schemas in any common shape (default with "
    "abet-evaluation: the built-in tool-call tools; with inspect: the log's).",
)
@click.option(
    "--traces",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The traces file: JSONL of {sample_id, messages, ...} lines, a τ-bench results "
    "file, an inspect_ai log or a dashboard file.",
)
@click.option("--run-id", required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FORMATS, *ALIASES]),
    help="The traces' dialect (default: told from the file, and said on stderr).",
)
@click.option(
    "--model", "model_label", help="Label of the model that produced the traces (default: unknown)."
)
@STORE_OPTION
def import_command(dataset, tools, traces, run_id, fmt, model_label, store) -> None:
    """Store traces recorded elsewhere as a run that score treats like a recorded one."""
    from tcbreplay._importers.import_run import import_traces
    from tcbreplay._importers.sniff import sniff
    from tcbreplay._inputs.benchmarks import get_benchmark, load_inputs
    from tcbreplay._store.runs import Store

    validate_run_id(run_id)
    why = None
    if fmt is None and traces.is_file():
        # a file that cannot be read, or told: importing it says what is wrong
        with contextlib.suppress(OSError, TraceError):
            fmt, why = sniff(traces, traces.read_bytes())
    fmt = ALIASES.get(fmt, fmt)
    if tools is None and fmt == "abet-evaluation":
        tools = get_benchmark("tool-call").tools
    inputs = None
    if dataset is not None:
        if tools is None:
            raise InputError("--tools is required", hint="give module:attr or a tools.json file")
        inputs = load_inputs(None, dataset, tools, None, need_prompt=False)
    elif fmt is not None and fmt not in _SELF_CONTAINED:
        raise InputError(
            "--dataset is required" + (f" with --format {fmt}" if fmt else ""),
            hint=f"only {' and '.join(_SELF_CONTAINED)} traces hold their samples' gold calls",
        )
    chosen = None if why is None else f"{fmt} ({why}); --format chooses another"
    try:
        summary = import_traces(
            inputs, traces, Store(store), run_id, model=model_label, fmt=fmt, tools=tools
        )
    except TraceError as exc:  # traces that could not be read: say how they were read
        if chosen is not None:
            exc.hint = (f"{exc.hint}; " if exc.hint else "") + f"read as {chosen}"
        raise
    if chosen is not None:
        click.echo(f"format: {chosen}", err=True)
    missing = f", {summary.missing} without a trace (status missing)" if summary.missing else ""
    trials = f" ({summary.trials} trials each)" if summary.trials > 1 else ""
    click.echo(
        f"run {summary.run_id}: {summary.imported}/{summary.samples} samples imported{trials}"
        f"{missing} -> {summary.run_dir}"
    )


def validate_run_id(run_id: str) -> None:
    from tcbreplay._store.runs import validate_run_id as check

    check(run_id)
