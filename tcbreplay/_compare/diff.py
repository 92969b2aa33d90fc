"""Compare two scored runs: paired per-sample deltas and bootstrap confidence intervals.

Both runs are scored with the same scoring (``spec`` by default; a run never scored
that way is scored in memory, without writing). Samples are paired by sample id;
deltas are always B − A. A run with several trials of a sample is compared by sample: its
tsa and tp are the means over the sample's trials, its ahr (and the arguments behind it)
pooled over them, so the bootstrap resamples samples, not trials. A sample *regressed* when
any of its tsa, tp or ahr got worse (tsa or tp lower, ahr higher) and *improved* when none
got worse and one got better. Confidence intervals come from a paired bootstrap over the
common samples (``n_boot`` resamples with replacement, percentile interval, seeded).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

from tcbreplay._compare.deltas import metric_delta, tool_deltas
from tcbreplay._compare.resampling import ResampleSums, refuse_few_resamples
from tcbreplay._compare.scored_runs import (
    DIFF_COLUMNS,
    METRICS,
    OUTCOMES,
    SCORE_COLUMNS,
    load_scores,
    unlike_options,
)
from tcbreplay._store.files import written_dataset_sha256
from tcbreplay._store.parquet import read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.tables import shown_status
from tcbreplay._words import count
from tcbreplay.errors import InputError

_CHUNK_CELLS = 20_000_000  # resample indices drawn at once (how the seed's stream is cut)
# Each metric and tool keeps its draws for the percentiles, 8 bytes a resample (8 MB at this
# bound); past a million resamples the percentiles' own sampling error is far below the
# digits shown, so more would only cost memory and time.
MAX_BOOT = 1_000_000
_SCORING_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a folder under scores/


@dataclass
class DiffResult:
    """Everything ``tcbreplay diff`` reports."""

    run_a: str
    run_b: str
    scoring: str
    n_common: int
    only_a: list[str]
    only_b: list[str]
    runs: dict[str, dict[str, Any]]
    tools: list[dict[str, Any]]
    samples: pl.DataFrame
    n_boot: int
    seed: int
    confidence: float
    regressed: list[str] = field(default_factory=list)
    improved: list[str] = field(default_factory=list)
    trials: dict[str, int] = field(default_factory=lambda: {"a": 1, "b": 1})
    # what a reader of the deltas must know: errors, runs not complete, samples left out
    warnings: list[str] = field(default_factory=list)
    # of them, those of the comparison itself: scorings made alike, other benchmarks
    caveats: list[str] = field(default_factory=list)

    @property
    def trials_note(self) -> str:
        """How the comparison treats trials, for people to read ('' with one trial each)."""
        if self.trials["a"] == self.trials["b"] == 1:
            return ""
        return (
            f"trials: A {self.trials['a']}, B {self.trials['b']}; each sample's tsa and tp "
            "are the means over its trials, its ahr pooled over them"
        )

    def to_dict(self, samples: bool = True) -> dict[str, Any]:
        out = {
            "warnings": self.warnings,
            "run_a": self.run_a,
            "run_b": self.run_b,
            "scoring": self.scoring,
            "n_common": self.n_common,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "bootstrap": {"n_boot": self.n_boot, "seed": self.seed, "confidence": self.confidence},
            "metrics": self.runs,
            "tools": self.tools,
            "regressed": self.regressed,
            "improved": self.improved,
            "trials": {**self.trials, "paired_by": "sample", "note": self.trials_note or None},
        }
        if samples:
            out["samples"] = self.samples.to_dicts()
        return out


# what makes a sample the task it is
TASK_COLUMNS = ["sample_id", "input", "gold"]


def _benchmarks_differ(a: Run, b: Run) -> list[str]:
    """Runs of two benchmarks (tau-bench and tau2, say): their samples are paired by id, and
    the same id may be another task in each. Runs of one benchmark name but other datasets
    (two imports are both ``custom``): the samples in common whose input or gold differ."""
    names = [((run.manifest.get("benchmark") or {}).get("name") or "?") for run in (a, b)]
    if names[0] != names[1]:
        return [
            f"A ({a.run_id}) is a run of {names[0]}, B ({b.run_id}) of {names[1]}: samples are "
            "paired by id alone, and an id may be another task in each"
        ]
    datasets = [(run.manifest.get("dataset") or {}).get("sha256") for run in (a, b)]
    # the dataset.jsonl each run wrote: a replay stores its parent's as it is, and its
    # samples' input is the first user message sent (an import's may be a task's instruction)
    written = [written_dataset_sha256(run.manifest) for run in (a, b)]
    if (
        (datasets[0] == datasets[1] and datasets[0] is not None)
        or (written[0] == written[1] and written[0] is not None)
        or not (a.has_data() and b.has_data())
    ):  # (a run only begun holds its samples in its journal: its scores tell no input)
        return []
    tasks = [  # (each trial holds its sample's task: one row of each sample)
        cast(pl.DataFrame, pl.from_arrow(read_table(run.samples_path, columns=TASK_COLUMNS)))
        for run in (a, b)
    ]
    joined = (
        tasks[0].unique("sample_id", keep="first").join(
            tasks[1].unique("sample_id", keep="first"), on="sample_id", suffix="_b"
        )
    )  # fmt: skip
    other = joined.filter(
        (pl.col("input") != pl.col("input_b")) | (pl.col("gold") != pl.col("gold_b"))
    )
    if other.height == 0:
        return []
    first = other["sample_id"].sort()[0]
    return [
        f"{other.height} of the {joined.height} samples in common are another task in A "
        f"({a.run_id}) and B ({b.run_id}), their input or gold calls not the same (the first: "
        f"{first!r}): samples are paired by id alone"
    ]


def diff_runs(
    store: Store,
    run_a: str,
    run_b: str,
    *,
    scoring: str = "spec",
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    progress: Callable[[int, int], None] | None = None,
) -> DiffResult:
    """Paired comparison of two runs on their common samples. ``progress``: told the
    bootstrap's resamples done and their number as they are drawn (at 10M samples, about
    a third of a second each)."""
    for name, value in (("--bootstrap", n_boot), ("--seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool):  # (the Python API's callers)
            raise InputError(f"{name} {value!r}: a whole number is required")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise InputError(f"--confidence {confidence!r}: a number between 0 and 1 is required")
    if not 0 < confidence < 1:
        raise InputError("--confidence must be between 0 and 1")
    refuse_few_resamples(n_boot, confidence)
    if n_boot > MAX_BOOT:
        raise InputError(f"--bootstrap {n_boot}: at most {MAX_BOOT}")
    if seed < 0:
        raise InputError(f"--seed {seed}: must be 0 or more")
    if not _SCORING_NAME.fullmatch(scoring):
        raise InputError(
            f"--scoring {scoring!r}: not a scoring name (a folder under scores/, such as spec, "
            "abet or spec_rel-0.001_abs-1e-09)"
        )
    if scoring == "bfcl":
        raise InputError(
            "--scoring bfcl: diff compares tsa, tp and ahr, which the bfcl scoring does not give",
            hint="compare BFCL's accuracy with: tcbreplay score RUN --scorer bfcl --format json",
        )
    a_run, b_run = store.open_run(run_a), store.open_run(run_b)
    with a_run.reading(), b_run.reading():  # neither deleted (record --overwrite) meanwhile
        as_a, differ = unlike_options(a_run, b_run, scoring)
        a, pairs_a = load_scores(store, a_run, scoring, like=[b_run], columns=DIFF_COLUMNS)
        b, pairs_b = load_scores(store, b_run, scoring, like=[a_run], columns=DIFF_COLUMNS,
                                 options=as_a)  # fmt: skip
    a, b = _with_outcomes(a), _with_outcomes(b)
    caveats = [*differ, *_benchmarks_differ(a_run, b_run)]
    warnings = [*caveats, *_run_warnings("A", a_run), *_run_warnings("B", b_run)]
    trials = {"a": _trials(a), "b": _trials(b)}
    if trials["a"] > 1 or trials["b"] > 1:
        # compared by sample: the pairs matched to samples by id, not by the trials' rows
        pairs_a, pairs_b = _with_ids(pairs_a, a), _with_ids(pairs_b, b)
        a, b = by_sample(a, scoring), by_sample(b, scoring)
    columns = [*SCORE_COLUMNS, *OUTCOMES]
    at_a, at_b = _rows(a, b)
    joined = _joined(a.select(columns), b.select(columns), at_a, at_b)
    same_ids = len(at_a) == a.height == b.height
    # the ids of one run only, sorted (by code point, as Python sorts them)
    only_a, only_b = (
        []
        if same_ids
        else x.join(y, on="sample_id", how="anti")["sample_id"].unique().sort().to_list()
        for x, y in ((a, b), (b, a))
    )
    rows_a, rows_b = a.height, b.height
    del a, b  # (the joined rows are what is compared)
    if joined.height == 0:
        raise InputError(f"runs {run_a!r} and {run_b!r} have no sample ids in common")
    if only_a or only_b:
        warnings.append(
            f"{joined.height} samples in common are compared; {len(only_a)} of A only and "
            f"{len(only_b)} of B only are left out (--format json lists them: only_a, only_b)"
        )

    boot = ResampleSums(joined.height, n_boot, seed, _CHUNK_CELLS)
    alpha = (1 - confidence) / 2
    # the abet scorer's tsa is pooled: hits over all samples / gold calls over all samples
    pooled = ("ahr", "tsa") if scoring == "abet" else ("ahr",)
    pending = {m: metric_delta(joined, m, boot, alpha, m in pooled) for m in METRICS}
    for m in OUTCOMES[:2]:  # shares of the samples where defined (none: no write role)
        if joined[m].null_count() < joined.height or joined[f"{m}_b"].null_count() < joined.height:
            pending[m] = metric_delta(joined, m, boot, alpha)
    sides = [(pairs_a, _k_of_rows(at_a, rows_a)), (pairs_b, _k_of_rows(at_b, rows_b))]
    del pairs_a, pairs_b  # (let go in turn as they are read)
    pending_tools = tool_deltas(joined, sides, boot, alpha)
    boot.sums(progress)  # (drawn once, for every statistic)
    runs = {m: finish() for m, finish in pending.items()}
    tools = [{**entry, **{f"ahr_{k}": v for k, v in finish().items()}}
             for entry, finish in pending_tools]  # fmt: skip
    deltas = joined.select(
        "sample_id",
        *(pl.col(m).alias(f"{m}_a") for m in METRICS),
        *(pl.col(f"{m}_b") for m in METRICS),
        *((pl.col(f"{m}_b") - pl.col(m)).alias(f"d_{m}") for m in METRICS),
        *(pl.col(m).alias(f"{m}_a") for m in OUTCOMES),
        *(pl.col(f"{m}_b") for m in OUTCOMES),
    )
    # ahr from above 0 to undefined (no paired arguments) is better: worse_by_metric's reverse
    ahr_down = (pl.col("d_ahr") < 0) | ((pl.col("ahr_a") > 0) & pl.col("ahr_b").is_null())
    worse = pl.any_horizontal(list(worse_by_metric().values()))
    better = (
        (pl.col("d_tsa") > 0).fill_null(False)
        | (pl.col("d_tp") > 0).fill_null(False)
        | ahr_down.fill_null(False)
    )
    deltas = deltas.with_columns(
        pl.when(worse)
        .then(pl.lit("regressed"))
        .when(better)
        .then(pl.lit("improved"))
        .otherwise(pl.lit("same"))
        .alias("change")
    )
    return DiffResult(
        run_a=a_run.run_id,
        run_b=b_run.run_id,
        scoring=scoring,
        n_common=joined.height,
        only_a=only_a,
        only_b=only_b,
        runs=runs,
        tools=tools,
        samples=deltas,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        regressed=deltas.filter(pl.col("change") == "regressed")["sample_id"].to_list(),
        improved=deltas.filter(pl.col("change") == "improved")["sample_id"].to_list(),
        trials=trials,
        warnings=warnings,
        caveats=caveats,
    )


def worse_by_metric() -> dict[str, pl.Expr]:
    """Per metric of :data:`METRICS`, whether a sample got worse in B, over the per-sample
    deltas (``d_tsa``, ``d_tp``, ``d_ahr``, ``ahr_a``, ``ahr_b``): tsa or tp lower, ahr higher
    (from undefined, no argument judged, to above 0 too). A sample that got worse in any
    regressed."""
    ahr_up = (pl.col("d_ahr") > 0) | (pl.col("ahr_a").is_null() & (pl.col("ahr_b") > 0))
    return {
        "tsa": (pl.col("d_tsa") < 0).fill_null(False),
        "tp": (pl.col("d_tp") < 0).fill_null(False),
        "ahr": ahr_up.fill_null(False),
    }


def _run_warnings(which: str, run: Any) -> list[str]:
    """What a comparison with ``run`` must say of it: samples that ended in error (they
    score with the calls made before the error; its manifest's totals count them), a run
    that did not finish."""
    out = []
    totals = run.manifest.get("totals") or {}
    errors, recorded = totals.get("errors"), totals.get("recorded")
    missing = totals.get("missing")
    if isinstance(errors, int) and isinstance(missing, int):
        errors -= missing  # (an import counts the samples its traces lack among its errors)
    diverged = totals.get("diverged") if run.manifest.get("source") == "replay" else None
    if isinstance(errors, int) and isinstance(diverged, int) and diverged > 0:
        errors -= diverged  # (a replay counts its divergences among its errors)
        out.append(
            f"{which} ({run.run_id}): {_of(diverged, recorded)} diverged from "
            f"{_their(diverged)} recording; {_they(diverged)} with the calls made until then"
        )
    if isinstance(errors, int) and errors > 0:
        out.append(
            f"{which} ({run.run_id}): {_of(errors, recorded)} ended in error; "
            f"{_they(errors)} with the calls made before the error"
        )
    if isinstance(missing, int) and missing > 0:  # an import's samples no trace held
        are = "is" if missing == 1 else "are"
        out.append(f"{which} ({run.run_id}): {count(missing, _TRIALS, _TRIALS_MANY)} of its "
                   f"dataset {are} missing from its traces")  # fmt: skip
    # finished: every sample recorded or imported, or those a --limit / --sample-id asked for
    status = shown_status(run) or run.status  # (interrupted, not recording, once none writes)
    if status not in ("complete", "imported", "partial"):
        out.append(f"{which} ({run.run_id}) is {status}: not every sample was recorded")
    return out


def _rows(a: pl.DataFrame, b: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Where each sample id both ``a`` and ``b`` hold is in each of them (ids are unique in
    each), in the order of ``a``'s sample_index. Two runs of one dataset list the same ids
    in the same order: then no join is needed."""
    if a["sample_id"].equals(b["sample_id"]):
        at = np.argsort(a["sample_index"].to_numpy(), kind="stable")
        return at, at
    rows = (
        a.select("sample_id", "sample_index")
        .with_row_index("at_a")
        .join(b.select("sample_id").with_row_index("at_b"), on="sample_id")
        .sort("sample_index")
    )
    return rows["at_a"].to_numpy(), rows["at_b"].to_numpy()


def _joined(a: pl.DataFrame, b: pl.DataFrame, at_a: np.ndarray, at_b: np.ndarray) -> pl.DataFrame:
    """The rows ``at_a`` of ``a`` and ``at_b`` of ``b`` side by side (``b``'s columns named
    with ``_b``): each side's rows gathered once, or taken as they are when already in
    that order."""

    def rows(frame: pl.DataFrame, at: np.ndarray) -> pl.DataFrame:
        in_order = len(at) == frame.height and bool((at == np.arange(len(at))).all())
        return frame if in_order else frame[at]

    side_b = rows(b.drop("sample_id"), at_b).rename(lambda name: f"{name}_b")
    return pl.concat([rows(a, at_a), side_b], how="horizontal")


def _k_of_rows(at: np.ndarray, height: int) -> np.ndarray:
    """For each row of a run's scores, its row in the joined rows (-1: not common)."""
    k = np.full(height, -1, dtype=np.int64)
    k[at] = np.arange(len(at))
    return k


def _with_ids(pairs: pl.DataFrame | None, scores: pl.DataFrame) -> pl.DataFrame | None:
    """``pairs`` with each pair's sample id (those given by their row of ``scores``)."""
    if pairs is None or "row" not in pairs.columns:
        return pairs
    return pairs.with_columns(scores["sample_id"].gather(pairs["row"])).drop("row")


def _with_outcomes(scores: pl.DataFrame) -> pl.DataFrame:
    """The scores with exact and write_exact as shares (1.0, 0.0; null where undefined) and
    first_divergence as a number; null where a scores file predates them."""
    return scores.with_columns(
        (pl.col(m).cast(pl.Float64) if m in scores.columns else pl.lit(None, pl.Float64)).alias(m)
        for m in OUTCOMES
    )


def _trials(scores: pl.DataFrame) -> int:
    last = scores["trial"].max() if "trial" in scores.columns else None
    return 1 if last is None else cast(int, last) + 1


def by_sample(scores: pl.DataFrame, scoring: str) -> pl.DataFrame:
    """One row per sample over its trials: tsa and tp their means (under ``abet``, tsa pooled
    over the trials' gold calls, as that scorer pools it), ahr and its arguments pooled."""
    tsa: pl.Expr
    if scoring == "abet":
        hits = (pl.col("tsa").fill_null(0) * pl.col("n_gold")).round().sum()
        tsa = pl.when(pl.col("n_gold").sum() > 0).then(hits / pl.col("n_gold").sum())
    else:
        tsa = pl.col("tsa").mean()
    invalid, total = pl.col("args_invalid").sum(), pl.col("args_total").sum()
    return (
        scores.group_by("sample_id", maintain_order=True)
        .agg(
            pl.col("sample_index").min(),
            pl.col("n_gold").sum(),
            tsa.alias("tsa"),
            pl.col("tp").mean(),
            *(pl.col(m).mean() for m in OUTCOMES),
            pl.when(total > 0).then(invalid / total).alias("ahr"),
            invalid.alias("args_invalid"),
            total.alias("args_total"),
        )
        .sort("sample_index")
    )


_TRIALS, _TRIALS_MANY = "sample and trial", "samples and trials"


def _of(n: int, recorded: Any) -> str:
    """``n`` samples and trials, of the ``recorded`` of the run when known."""
    if isinstance(recorded, int):
        return f"{n} of its {count(recorded, _TRIALS, _TRIALS_MANY)}"
    return count(n, _TRIALS, _TRIALS_MANY)


def _their(n: int) -> str:
    return "its" if n == 1 else "their"


def _they(n: int) -> str:
    return "it scores" if n == 1 else "they score"
