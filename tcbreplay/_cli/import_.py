"""``tcbreplay import``: traces recorded elsewhere, stored as a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tcbreplay._cli.common import STORE_OPTION, emit, main, output_format
from tcbreplay.errors import InputError


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
    type=click.Choice(["jsonl", "abet-evaluation", "bfcl"]),
    default="jsonl",
    show_default=True,
    help="abet-evaluation: a dashboard file of the original benchmark; "
    "bfcl: a BFCL results file (with BFCL's questions as --dataset and --answers).",
)
@click.option(
    "--answers",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --format bfcl: BFCL's possible answers for the --dataset questions.",
)
@click.option(
    "--model", "model_label", help="Label of the model that produced the traces (default: unknown)."
)
@STORE_OPTION
def import_command(dataset, tools, traces, run_id, fmt, answers, model_label, store) -> None:
    """Store traces recorded elsewhere as a run that score treats like a recorded one."""
    from tcbreplay._cli.grids import summary_output
    from tcbreplay._importers.import_run import import_traces
    from tcbreplay._inputs.benchmarks import get_benchmark, load_inputs
    from tcbreplay._store.runs import Store, validate_run_id

    validate_run_id(run_id)
    bfcl = _bfcl_inputs(fmt, dataset, answers, tools)
    if tools is None and bfcl is None:
        if fmt != "abet-evaluation":
            raise InputError("--tools is required", hint="give module:attr or a tools.json file")
        tools = get_benchmark("tool-call").tools
    inputs = bfcl or load_inputs(None, dataset, tools, None, need_prompt=False)
    summary = import_traces(inputs, traces, Store(store), run_id, model=model_label, fmt=fmt)
    missing = f", {summary.missing} without a trace (status missing)" if summary.missing else ""
    line = (
        f"run {summary.run_id}: {summary.imported}/{summary.samples} samples imported{missing}"
        f" -> {summary.run_dir}"
    )
    emit(summary_output(summary, [line]), output_format())


def _bfcl_inputs(fmt: str, questions: Path, answers: Path | None, tools: str | None) -> Any:
    """BFCL's questions and answers as the run's inputs, with --format bfcl (else None)."""
    from tcbreplay._importers.bfcl import load_bfcl_inputs

    if fmt != "bfcl":
        if answers is not None:
            raise InputError("--answers goes with --format bfcl")
        return None
    if answers is None:
        raise InputError("--format bfcl needs --answers", hint="give BFCL's possible answers file")
    if tools is not None:
        raise InputError("--format bfcl takes no --tools: each question defines its functions")
    return load_bfcl_inputs(questions, answers)
