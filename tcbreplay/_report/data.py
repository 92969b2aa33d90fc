"""Collect what the report shows: scores, calls, aligned pairs and validity of each run (its
transcripts: :mod:`tcbreplay._report.transcripts`).

Reads the run directories only and imports neither LangChain nor LangGraph: stored
messages are read as JSON. Scores come from the run's stored default scoring
(``scores/spec``) when its audit record matches the run's current files, otherwise
the run is scored in memory; nothing is written to the store
(:mod:`tcbreplay._report.scores`; their intervals: :mod:`tcbreplay._report.intervals`).
Later runs are compared with the first by :func:`tcbreplay._compare.diff.diff_runs`. A
sample's trials are rows of their own, each named by :func:`row_key` (its id, and
``(trial t)`` after it for t > 0), so every table and transcript is keyed by that name.
Past a number of rows the page shows some (:mod:`tcbreplay._report.shown`): the calls and
pairings of those are kept, the numbers still count every row
(:mod:`tcbreplay._report.calls`).
"""

from __future__ import annotations

import shlex
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from tcbreplay._compare.diff import diff_runs, worse_by_metric
from tcbreplay._compare.outcomes import NoOutcome, read_outcomes
from tcbreplay._compare.validity import Validity, scores_validity
from tcbreplay._report.calls import Call, keyed, load_calls
from tcbreplay._report.intervals import METRICS, N_BOOT, metric_intervals
from tcbreplay._report.scores import report_scores
from tcbreplay._report.shown import SAMPLES, SEED, Shown, choose
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SAMPLES_SCHEMA
from tcbreplay.errors import InputError, TcbReplayError, TcbReplayWarning

# Values differing by less than this are the same score (tp is a ratio of small integers).
_EPS = 1e-9
# the samples' columns read for every row: what the report keys on or counts over the run
_ROW_COLUMNS = ["sample_id", "trial", "sample_index", "category"]
# those read for the rows the page shows only (at ten million samples, input, gold and
# metadata alone are gigabytes)
_SHOWN_COLUMNS = [
    "sample_id",
    "trial",
    "sample_index",
    "input",
    "gold",
    "category",
    "status",
    "error",
    "input_tokens",
    "output_tokens",
    "duration_s",
    "metadata",
]


def row_key(sample_id: str, trial: int) -> str:
    """The name of a sample's trial in the report: its id (trial 0), else with the trial."""
    return sample_id if not trial else f"{sample_id} (trial {trial})"


def read_columns(path: Any, schema: Any, columns: list[str]) -> pl.DataFrame:
    """Columns of a run file, a version 1 file's as trial 0 without metadata: only those
    columns are read."""
    from tcbreplay._store.parquet import read_schema, read_table
    from tcbreplay._store.schema import with_optional_columns

    names = set(read_schema(path).names)
    table = read_table(path, columns=[c for c in columns if c in names])
    wanted = pa.schema([schema.field(c) for c in columns if c in schema.names])
    table = with_optional_columns(table, wanted)
    frame = pl.from_arrow(table.select([c for c in columns if c in table.column_names]))
    assert isinstance(frame, pl.DataFrame)
    return frame


def read_rows(
    path: Any, schema: Any, columns: list[str], indices: list[int] | None
) -> pl.DataFrame:
    """:func:`read_columns` of the rows whose sample_index is in ``indices`` (every row when
    None), in sample order: only the row groups that hold them read, one at a time."""
    from tcbreplay._store.export import Slices
    from tcbreplay._store.schema import with_optional_columns

    if indices is None:
        return read_columns(path, schema, columns).sort("sample_index")
    table = Slices(path, columns).read_indices(indices)
    wanted = pa.schema([schema.field(c) for c in columns if c in schema.names])
    table = with_optional_columns(table, wanted)
    frame = pl.from_arrow(table.select([c for c in columns if c in table.column_names]))
    assert isinstance(frame, pl.DataFrame)
    return frame.sort("sample_index")


@dataclass
class RunData:
    """One run as the report needs it, every per-sample frame in the run's sample order.

    ``scores`` and ``samples`` hold every row, with the few columns the report counts or
    keys on over the whole run; ``shown_samples`` every column the page shows of its rows
    (filled by :func:`add_calls`)."""

    run: Run
    summary: dict[str, Any]
    scores: pl.DataFrame
    samples: pl.DataFrame
    agent: dict[str, list[Call]]
    gold: dict[str, list[Call]]
    explanations: dict[str, dict[str, Any]]
    scored_in_memory: bool
    intervals: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    # per sample with any: each gold call's rules (accept, optional, group)
    gold_rules: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # per sample with tools of its own: those tools
    own_tools: dict[str, Any] = field(default_factory=dict)
    diff: dict[str, dict[str, Any]] | None = None
    diff_error: str | None = None
    diff_caveats: list[str] = field(default_factory=list)  # of the comparison with the first
    # of a later run compared with the first: the samples (base_id) that got worse, and in
    # which metrics (``worse``: bit k set for METRICS[k] worse), as diff decides it over
    # their trials
    worse: pl.DataFrame | None = None
    # when its samples carry an outcome: how each metric tracks it, and the rows behind it
    validity: Validity | None = None
    validity_rows: pl.DataFrame | None = None
    # the sample_index of each row the page shows (None: every row); the calls, pairings and
    # transcripts above are those rows'
    shown_indices: list[int] | None = None
    # per tool, over every sample: arguments of paired calls the tool does not take
    invented: Counter[str] = field(default_factory=Counter)
    # every call's name, gold calls' then agent calls', in the order the run first uses them
    call_names: list[str] = field(default_factory=list)
    # the samples' categories, over every row (sorted, none empty)
    categories: list[str] = field(default_factory=list)
    # the shown rows (every row when the page shows all) with every column the page shows
    shown_samples: pl.DataFrame | None = None

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return list((self.run.manifest.get("tools") or {}).get("specs") or [])

    def failed(self) -> dict[str, bool]:
        """Per sample: not a perfect match (see :func:`is_failed`)."""
        return failed_rows(self.scores)

    def shown(self) -> pl.DataFrame:
        """The rows of its samples the page shows, with every column it shows (a diverged
        row of a replay is one of them)."""
        if self.shown_samples is None:
            raise ValueError(f"run {self.run_id!r}: its shown samples are not read (add_calls)")
        return self.shown_samples

    @property
    def n_failed(self) -> int:
        """How many of the run's rows failed (see :func:`is_failed`)."""
        return int(self.scores.select(failed_expr().sum()).item())


@dataclass
class ToolRow:
    """The per-tool breakdown of one run (definitions in docs/commands/report.md)."""

    run_id: str
    tool: str
    gold_calls: int = 0
    agent_calls: int = 0
    paired_calls: int = 0
    args: int = 0
    invalid_args: int = 0
    invented_args: int = 0
    missing_args: int = 0


@dataclass
class ReportData:
    """Every run of a report, their union of samples and the flags the table filters on."""

    runs: list[RunData]
    sample_ids: list[str]
    failed: list[bool]
    regressed: list[bool]
    tools: list[str]
    tool_rows: list[ToolRow] = field(default_factory=list)
    # how the samples shown were chosen, when they are not all (see tcbreplay._report.shown)
    shown: Shown | None = None
    # the stored scoring whose numbers the page shows (``report --scoring``)
    scoring: str = "spec"
    # the runs' samples (their union; n_samples counts each trial of one)
    n_tasks: int = 0
    # each row's sample (its id without the trial), aligned with ``sample_ids``
    base_ids: list[str] = field(default_factory=list)

    @property
    def n_samples(self) -> int:
        """The runs' rows, a sample's trials each (their union), shown or not."""
        return self.shown.total if self.shown is not None else len(self.sample_ids)

    @property
    def rows_word(self) -> str:
        """What a row of the page is: a sample, or (with trials) a sample's trial."""
        return "trials" if self.n_tasks and self.n_samples != self.n_tasks else "samples"

    def shown_rows(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The rows of a run's frame that the page shows (every row unless it chose some)."""
        if self.shown is None:
            return frame
        return frame.filter(pl.col("sample_id").is_in(self.sample_ids))


def failed_rows(scores: pl.DataFrame) -> dict[str, bool]:
    """Per row of a scores frame: not a perfect match (see :func:`is_failed`)."""
    cols = ("sample_id", "status", "tp", "args_invalid", "args_missing")
    return {row[0]: is_failed(*row[1:]) for row in scores.select(cols).iter_rows()}


def is_failed(
    status: str, tp: float | None, args_invalid: int | None, args_missing: int | None
) -> bool:
    """A sample failed unless it recorded fine and matched gold: same names, every argument
    valid, no gold argument left out (a count a scorer leaves null, as abet does
    ``args_missing``, is none)."""
    return (
        status != "ok"
        or (tp is not None and tp < 1.0 - _EPS)
        or (args_invalid or 0) > 0
        or (args_missing or 0) > 0
    )


def failed_expr() -> pl.Expr:
    """:func:`is_failed` of each row of a scores frame, as a column ``failed``."""
    return (
        pl.col("status").ne_missing("ok")
        | (pl.col("tp") < 1.0 - _EPS).fill_null(False)
        | (pl.col("args_invalid").fill_null(0) > 0)
        | (pl.col("args_missing").fill_null(0) > 0)
    ).alias("failed")


def run_validity(
    run: Run, scores: pl.DataFrame, outcome: str | None, n_boot: int, seed: int = 0
) -> tuple[Validity | None, pl.DataFrame | None]:
    """The run's validity numbers and the rows behind them (sample_id, trial, metrics,
    outcome), or (None, None) when no outcome is given and its samples carry none
    (an outcome given that cannot be read is an error)."""
    # the report names a trial's row by its own key: the sample's id is base_id
    frame = scores.with_columns(pl.col("base_id").alias("sample_id"))
    try:
        outcomes = read_outcomes(run, outcome)
        result = scores_validity(
            frame, outcomes, run_id=run.run_id, scoring="spec", n_boot=n_boot, seed=seed
        )
    except InputError as exc:
        if outcome is not None:
            raise
        if not isinstance(exc, NoOutcome):  # the samples' own outcome, unreadable: said
            warnings.warn(TcbReplayWarning(f"no validity panel for run {run.run_id!r}: {exc}"),
                          stacklevel=2)  # fmt: skip
        return None, None
    rows = frame.with_columns(pl.col("trial").cast(pl.Int64)).join(
        outcomes.frame, on=["sample_id", "trial"]
    )
    return result, rows.filter(pl.col("outcome").is_not_null())


def collect(
    store: Store,
    run_ids: list[str],
    *,
    allow_incomplete: bool = False,
    scoring: str = "spec",
    outcome: str | None = None,
    samples: int | None = SAMPLES,
    seed: int = SEED,
) -> ReportData:
    """Load every run and compute the table flags and the per-tool breakdown, with the
    numbers of ``scoring`` (and, where samples carry an outcome, the validity of each
    metric). ``samples``: how many samples the page shows in full (None: all), chosen as
    :func:`tcbreplay._report.shown.choose` does with ``seed``; the numbers count every one."""
    if not run_ids:
        raise InputError("name at least one run id")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"--seed {seed}: must be 0 or more")
    duplicates = [r for r, n in Counter(run_ids).items() if n > 1]
    if duplicates:
        raise InputError(f"run {duplicates[0]!r} is named twice")
    # the command an unfinished run's hint says to run with --allow-incomplete (the store
    # added by the run)
    retry = "tcbreplay report " + " ".join(shlex.quote(r) for r in run_ids)
    retry += "" if scoring == "spec" else f" --scoring {shlex.quote(scoring)}"
    runs = [
        load_scores(store, run_id, allow_incomplete=allow_incomplete, scoring=scoring, retry=retry)
        for run_id in run_ids
    ]
    for run in runs:
        run.validity, run.validity_rows = run_validity(run.run, run.scores, outcome, N_BOOT)
    rows = _union(runs)  # every row of any run, in the order the runs first have it
    regressed_ids: set[str] = set()
    for run in runs[1:]:
        try:
            diff = diff_runs(store, runs[0].run_id, run.run_id, scoring=scoring)
        except TcbReplayError as exc:  # e.g. no common samples, or an unfinished run
            run.diff_error = str(exc)
            continue
        run.diff = diff.runs
        run.diff_caveats = diff.caveats
        run.worse = worse_samples(diff.samples)
        regressed_ids.update(diff.regressed)
    # diff compares samples over their trials: each trial of a regressed sample is flagged
    rows = rows.with_columns(pl.col("base_id").is_in(list(regressed_ids)).alias("regressed"))
    flags = {name: rows[name].to_numpy() for name in ("regressed", "in_error", "failed")}
    kinds = {"regressed": flags["regressed"], "in error": flags["in_error"],
             "failed": flags["failed"]}  # fmt: skip
    positions, shown = choose(kinds, rows.height, samples, seed)
    at = pl.Series(positions, dtype=pl.UInt32)
    picked = rows if shown is None else rows.select(pl.all().gather(at))
    sample_ids = picked["sample_id"].to_list()
    base_ids = picked["base_id"].to_list()
    failed = picked["failed"].to_list()
    regressed = picked["regressed"].to_list()
    keep = None if shown is None else set(sample_ids)
    for run in runs:
        add_calls(run, keep)
    tools = _tool_names(runs)
    return ReportData(
        runs=runs,
        sample_ids=sample_ids,
        failed=failed,
        regressed=regressed,
        tools=tools,
        tool_rows=[row for run in runs for row in tool_breakdown(run, tools)],
        shown=shown,
        scoring=scoring,
        n_tasks=rows["base_id"].n_unique(),
        base_ids=base_ids,
    )


def worse_samples(deltas: pl.DataFrame) -> pl.DataFrame:
    """Of diff's per-sample deltas, the samples that got worse (``base_id``) and in which
    metrics (``worse``: bit k set for :data:`METRICS` [k])."""
    by_metric = worse_by_metric()
    bits = pl.sum_horizontal(
        by_metric[m].cast(pl.UInt8) * (1 << k) for k, m in enumerate(METRICS)
    ).cast(pl.UInt8)
    return deltas.select(pl.col("sample_id").alias("base_id"), bits.alias("worse")).filter(
        pl.col("worse") > 0
    )


def _union(runs: list[RunData]) -> pl.DataFrame:
    """The rows of every run (sample_id, base_id), each once, in the order the runs first
    have them, with whether it failed in any run and whether it ended in error in any."""
    frames = []
    for run in runs:
        flags = run.scores.select(
            "sample_id",
            failed_expr().fill_null(False),
            (pl.col("status") != "ok").fill_null(False).alias("in_error"),
        )
        rows = run.samples.select("sample_id", "base_id")
        if rows["sample_id"].equals(flags["sample_id"]):  # the same rows in the same order
            frames.append(rows.with_columns(flags["failed"], flags["in_error"]))
            continue
        rows = rows.join(flags, on="sample_id", how="left", maintain_order="left")
        frames.append(rows.with_columns(pl.col("failed", "in_error").fill_null(False)))
    if len(frames) == 1:
        return frames[0]
    every = pl.concat(frames).with_row_index("k")
    first = every.group_by("sample_id", maintain_order=True).agg(
        pl.col("k").first(),
        pl.col("base_id").last(),  # (as a dict of them all would have it)
        pl.col("failed").any(),
        pl.col("in_error").any(),
    )
    return first.sort("k").drop("k")


def load_run(
    store: Store, run_id: str, *, allow_incomplete: bool = False, scoring: str = "spec"
) -> RunData:
    """A run's scores (of ``scoring``), samples, agent and gold calls, and the AHR pairing of
    every sample."""
    run = load_scores(store, run_id, allow_incomplete=allow_incomplete, scoring=scoring)
    add_calls(run, None)
    return run


def load_scores(
    store: Store,
    run_id: str,
    *,
    allow_incomplete: bool = False,
    scoring: str = "spec",
    retry: str | None = None,
) -> RunData:
    """A run's scores (of ``scoring``) and samples, without its calls (:func:`add_calls`);
    ``retry``: the command an unfinished run's hint names (without its store)."""
    run = store.open_run(run_id)
    summary, scores, in_memory = report_scores(store, run, allow_incomplete, scoring, retry)
    samples = keyed(read_columns(run.samples_path, SAMPLES_SCHEMA, _ROW_COLUMNS))
    categories = samples["category"].unique().drop_nulls().to_list()
    samples = samples.drop("category").sort("sample_index")
    return RunData(
        run=run,
        summary=summary,
        scores=scores,
        samples=samples,
        agent={},
        gold={},
        explanations={},
        scored_in_memory=in_memory,
        intervals=metric_intervals(scores, scoring),
        categories=sorted(c for c in categories if c),
    )


def add_calls(data: RunData, shown: set[str] | None) -> None:
    """Add the run's calls (:func:`tcbreplay._report.calls.load_calls`): those of the rows in
    ``shown`` (every row when None), and the invented arguments and names of every row."""
    calls = load_calls(data.run, data.samples, data.tool_schemas, shown)
    if shown is not None:
        rows = data.samples.filter(pl.col("sample_id").is_in(list(shown)))
        data.shown_indices = rows["sample_index"].to_list()
    data.shown_samples = keyed(
        read_rows(data.run.samples_path, SAMPLES_SCHEMA, _SHOWN_COLUMNS, data.shown_indices)
    )
    data.agent, data.gold, data.explanations = calls.agent, calls.gold, calls.explanations
    data.gold_rules, data.own_tools = calls.gold_rules, calls.own_tools
    data.invented, data.call_names = calls.invented, calls.call_names


def _tool_names(runs: list[RunData]) -> list[str]:
    """Tools of every manifest in order, then any other name a gold or agent call used."""
    names: dict[str, None] = {}
    for run in runs:
        for tool in run.tool_schemas:
            names.setdefault(tool["name"], None)
    for run in runs:
        names.update(dict.fromkeys(run.call_names))
    return list(names)


def tool_breakdown(run: RunData, tools: list[str]) -> list[ToolRow]:
    """Per tool: the scorer's ``by_tool`` counts, plus the invented keys among paired calls."""
    rows = {tool: ToolRow(run.run_id, tool) for tool in tools}
    for item in run.summary.get("by_tool") or []:
        row = rows.setdefault(item["tool"], ToolRow(run.run_id, item["tool"]))
        row.gold_calls = int(item.get("gold_calls") or 0)
        row.agent_calls = int(item.get("agent_calls") or 0)
        row.paired_calls = int(item.get("paired") or 0)
        row.args = int(item.get("args_total") or 0)
        row.invalid_args = int(item.get("args_invalid") or 0)
        row.missing_args = int(item.get("args_missing") or 0)
    for tool, invented in run.invented.items():
        rows[tool].invented_args += invented
    return [rows[tool] for tool in tools]
