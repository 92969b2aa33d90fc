"""``tcbreplay import``: traces recorded elsewhere, stored as a run."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from tcbreplay._cli.common import STORE_OPTION, KnownCommand, emit, main, output_format
from tcbreplay._cli.params import INPUT_FILE
from tcbreplay._importers import registry
from tcbreplay._words import count
from tcbreplay.errors import InputError, TraceError


class _Dialects(click.Choice[str]):
    """The registered dialects' names and earlier names, read from the registry when used."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return registry.choices()

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # the registry holds them


class _ImportCommand(KnownCommand):
    """``import``, whose help ends with the registered dialects."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Dialects (--format)"):
            formatter.write_dl(
                [
                    (d.name, d.summary + (f" (also: {', '.join(d.aliases)})" if d.aliases else ""))
                    for d in registry.dialects()
                ]
            )


@main.command("import", cls=_ImportCommand)
@click.option(
    "--dataset",
    type=INPUT_FILE,
    help="The samples' inputs and gold calls (not needed for tau-bench and tau2, nor for "
    "inspect logs whose samples hold their calls; with bfcl: BFCL's questions). LangSmith's "
    "and Langfuse's traces are matched to its samples by an id they carry or by their input "
    "text; without it, each is a sample with no gold calls.",
)
@click.option(
    "--tools",
    help="module:attr or a JSON file of tool schemas in any common shape (default with "
    "abet-evaluation: the built-in tool-call tools; with inspect: the log's; with tau2: its "
    "domain's, for airline, retail and telecom; not needed when every dataset entry has its "
    "own).",
)
@click.option(
    "--traces",
    type=INPUT_FILE,
    required=True,
    help="The traces file: JSONL of {sample_id, messages, ...} lines, a τ-bench or τ²-bench "
    "results file, an inspect_ai log, LangSmith runs, Langfuse observations, a dashboard file, "
    "a BFCL results file, or OpenTelemetry traces (OTLP, Jaeger's JSON).",
)
@click.option("--run-id", required=True, help="Id of the new run (one the store does not hold).")
@click.option(
    "--format",
    "fmt",
    type=_Dialects(),
    help="The traces' dialect, one of those listed below (default: told from the file, and "
    "said on stderr; bfcl is given, with BFCL's questions as --dataset and --answers).",
)
@click.option(
    "--answers",
    type=INPUT_FILE,
    help="With --format bfcl: BFCL's possible answers for the --dataset questions.",
)
@click.option(
    "--gold-from",
    type=click.Choice(["tasks", "action-checks"]),
    help="With tau2: the gold calls of each task from its actions (tasks, the default) or "
    "from the actions its simulations were checked against (reward_info.action_checks).",
)
@click.option(
    "--model",
    "model_label",
    help="Label of the model that produced the traces (default: the model the traces name, "
    "else unknown).",
)
@click.option(
    "--sample-by",
    type=click.Choice(["trace", "agent"]),
    help="With otlp and jaeger: a sample per trace (the default), or per outermost agent span "
    "(invoke_agent, an OpenInference AGENT, generateText).",
)
@STORE_OPTION
def import_command(
    dataset, tools, traces, run_id, fmt, answers, gold_from, model_label, sample_by, store
) -> None:
    """Store traces recorded elsewhere as a run that score treats like a recorded one.

    The output format goes before the command: tcbreplay --format json import ..."""
    from tcbreplay._cli.grids import summary_output
    from tcbreplay._importers.dialect import TraceFile
    from tcbreplay._importers.import_run import import_traces
    from tcbreplay._importers.sniff import sniff
    from tcbreplay._inputs.benchmarks import get_benchmark, load_inputs
    from tcbreplay._store.run_dir import validate_run_id
    from tcbreplay._store.runs import Store

    validate_run_id(run_id)
    why = None
    if fmt is None and answers is None and traces.is_file():
        # a file that cannot be read, or told: importing it says what is wrong
        with contextlib.suppress(OSError, TraceError):
            sniffed = sniff(TraceFile.at(traces))
            fmt, why = sniffed.dialect, sniffed.reason
    dialect = None if fmt is None else registry.get(fmt)
    fmt = None if dialect is None else dialect.name
    if tools is None and fmt == "abet-evaluation":
        tools = get_benchmark("tool-call").tools
    inputs = _bfcl_inputs(fmt, dataset, answers, tools)
    if inputs is None and dataset is not None:
        inputs = load_inputs(None, dataset, tools, None, need_prompt=False, own_tools=True)
    elif inputs is None and dialect is not None and not dialect.holds_samples:
        *others, last = registry.holding_samples()
        raise InputError(
            f"--dataset is required with --format {fmt}",
            hint=f"only {', '.join(others)} and {last} traces can be imported without one",
        )
    options = {}
    if gold_from is not None:
        if fmt != "tau2":
            raise InputError(
                "--gold-from goes with --format tau2"
                + (f" (the traces were told to be {fmt})" if why is not None else "")
            )
        options["gold_from"] = gold_from
    if sample_by is not None:
        options["sample_by"] = sample_by
    chosen = None if why is None else f"{fmt} ({why}); --format chooses another"
    try:
        summary = import_traces(
            inputs, traces, Store(store), run_id, model=model_label, fmt=fmt, tools=tools,
            options=options,
        )  # fmt: skip
    except TraceError as exc:  # traces that could not be read: say how they were read
        if chosen is not None:
            exc.hint = (f"{exc.hint}; " if exc.hint else "") + f"read as {chosen}"
        raise
    if chosen is not None:
        summary.sniffed = why  # told here, before the import (which was given the format)
        click.echo(f"format: {chosen}", err=True)
    if "sample_by" in registry.get(summary.format).options:  # what a sample is: say which
        per = "outermost agent span" if sample_by == "agent" else "trace"
        click.echo(f"samples: one per {per} (--sample-by chooses)", err=True)
    missing = f", {summary.missing} without a trace (status missing)" if summary.missing else ""
    done = f"{summary.imported}/{summary.samples * summary.trials}"
    if summary.trials > 1:  # a sample's trials counted one by one
        done = f"{count(summary.samples, 'sample')}, {summary.trials} trials each: {done} trials"
    else:
        done += " samples"
    line = f"run {summary.run_id}: {done} imported{missing} -> {summary.run_dir}"
    emit(summary_output(summary, [line]), output_format())


def _bfcl_inputs(
    fmt: str | None, questions: Path | None, answers: Path | None, tools: str | None
) -> Any:
    """BFCL's questions and answers as the run's inputs, with --format bfcl (else None)."""
    from tcbreplay._importers.bfcl import load_bfcl_inputs

    if fmt != "bfcl":
        if answers is not None:
            raise InputError("--answers goes with --format bfcl")
        return None
    if questions is None:
        raise InputError(
            "--format bfcl needs --dataset", hint="give BFCL's questions file as --dataset"
        )
    if answers is None:
        raise InputError("--format bfcl needs --answers", hint="give BFCL's possible answers file")
    if tools is not None:
        raise InputError("--format bfcl takes no --tools: each question defines its functions")
    return load_bfcl_inputs(questions, answers)
