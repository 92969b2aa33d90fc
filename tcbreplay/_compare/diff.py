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

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import polars as pl

from tcbreplay._compare.resampling import ResampleSums, ratio, refuse_few_resamples
from tcbreplay._score.audit_record import sql_sha256
from tcbreplay._score.read_results import (
    read_scoring_file,
    read_summary,
    refuse_repeated_rows,
    scoring_file_batches,
)
from tcbreplay._store.files import written_dataset_sha256
from tcbreplay._store.parquet import read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCORES
from tcbreplay._store.views import shown_status
from tcbreplay._words import count
from tcbreplay.errors import InputError

if TYPE_CHECKING:
    from tcbreplay._score.options import ScoreOptions

METRICS = ("tsa", "tp", "ahr")
# the outcome metrics: shares (exact, write_exact) and a position, shown beside the three;
# whether a sample regressed is still decided by the three alone
OUTCOMES = ("exact", "write_exact", "first_divergence")
SCORE_COLUMNS = ["sample_id", "sample_index", "n_gold", *METRICS, "args_invalid", "args_total"]
PAIR_COLUMNS = ["sample_id", "tool", "args_invalid", "args_valid"]
_PAIR_NUMBERS = PAIR_COLUMNS[1:]  # (read apart from the ids, which are mostly only checked)
# what diff reads of the scores (a file written before trials or the outcomes reads without)
DIFF_COLUMNS = [*SCORE_COLUMNS, "trial", *OUTCOMES, "pairs"]
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


def load_scores(
    store: Store, run: Run, scoring: str, like: list[Run] | None = None,
    columns: list[str] | None = None, options: ScoreOptions | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:  # fmt: skip
    """Stored per-sample scores and chosen pairs of a scoring, or computed in memory with the
    options it was stored with in one of the runs ``like``, else those its name stands for
    (so also when the run's files changed since it was stored: :meth:`Run.changed_since`).
    ``columns``: only these of the scores, those the scoring has (None: all of them). Of the
    pairs, ``PAIR_COLUMNS``, each pair's sample given by the row of the scores it is of
    (``row``) where the pairs list each row's pairs in the rows' order, as scoring writes
    them (:func:`pair_rows`), else by its ``sample_id``. ``options``: computed in memory with
    these, whatever is stored."""
    folder = run.scores_dir(scoring)
    kept = options is None and (folder / "scores.parquet").exists()
    if kept and _named_options(run, scoring, current=True):
        found = read_scoring_file(run, folder / "scores.parquet", SCORE_COLUMNS, columns)
        refuse_repeated_rows(run, folder / "scores.parquet", found)
        pairs_path = folder / "pairs.parquet"
        if not pairs_path.exists():
            return found, None
        numbers = read_scoring_file(run, pairs_path, PAIR_COLUMNS, _PAIR_NUMBERS, ("tool",))
        _, batches = scoring_file_batches(run, pairs_path, PAIR_COLUMNS, ["sample_id"])
        rows = pair_rows(found, numbers.height, (batch["sample_id"] for batch in batches))
        if rows is not None:  # (the pairs' ids were only read to check them, not kept)
            return found, numbers.with_columns(row=pl.Series(rows))
        ids = read_scoring_file(run, pairs_path, PAIR_COLUMNS, ["sample_id"])["sample_id"]
        return found, numbers.with_columns(ids)
    from tcbreplay._score.options import ScoreOptions, missing_scoring_hint
    from tcbreplay._score.run import score_run

    options = options or _stored_options(like or [], scoring) or ScoreOptions.from_scoring(scoring)
    if options is None:
        stored = sorted(p.parent.name for p in (run.dir / SCORES).glob("*/summary.json"))
        raise InputError(
            f"run {run.run_id!r} has no scoring {scoring!r}",
            hint=missing_scoring_hint(run.run_id, scoring, stored),
        )
    result = score_run(store, run.run_id, options, write=False)
    scores, pairs = result.scores, result.pairs
    if columns is not None:
        scores = scores.select(c for c in columns if c in scores.columns)
    if pairs is None:
        return scores, None
    rows = pair_rows(scores, pairs.height, [pairs["sample_id"]])
    if rows is not None:
        return scores, pairs.select(_PAIR_NUMBERS).with_columns(row=pl.Series(rows))
    return scores, pairs.select(PAIR_COLUMNS)


def _stored_options(runs: list[Run], scoring: str) -> ScoreOptions | None:
    """The options a scoring was stored with in one of ``runs``: its name rounds the
    tolerances to 6 digits, so the exact ones come from there."""
    for run in runs:
        folder = run.scores_dir(scoring)
        if (folder / "summary.json").exists() and _named_options(run, scoring):
            return read_summary(run, folder)[1]
    return None


def _unlike_options(a: Run, b: Run, scoring: str) -> tuple[ScoreOptions | None, list[str]]:
    """Of two runs whose stored scorings of one name were scored with other options (the
    name leaves out the roles: ``--role``, a role file) or chose other tools to focus on: A's
    options, to score B with in memory (None: B's stored scores are compared), and what the
    comparison must say."""
    found_a, found_b = _stored_summary(a, scoring), _stored_summary(b, scoring)
    if found_a is None or found_b is None:
        return None, []
    (summary_a, options_a), (summary_b, options_b) = found_a, found_b
    if options_a != options_b:
        return options_a, [
            f"B ({b.run_id}) was scored {scoring} with other options than A ({a.run_id}) "
            f"({_options_text(options_a, options_b)}): B is scored in memory with A's"
        ]
    focus_a, focus_b = summary_a.get("focus"), summary_b.get("focus")
    if focus_a != focus_b:
        return None, [
            f"the runs' {scoring} focus on other tools (their specs give them other roles): "
            f"A {_focus_text(focus_a)}, B {_focus_text(focus_b)}"
        ]
    return None, []


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


def _stored_summary(run: Run, scoring: str) -> tuple[dict[str, Any], ScoreOptions] | None:
    folder = run.scores_dir(scoring)
    if not (folder / "summary.json").exists() or not _named_options(run, scoring, current=True):
        return None
    return read_summary(run, folder)


def _options_text(a: ScoreOptions, b: ScoreOptions) -> str:
    """What differs between two scorings' options: ``roles B's (A: A's)``, ..."""
    out = []
    for name in (f.name for f in dataclasses.fields(a)):
        mine, theirs = getattr(b, name), getattr(a, name)
        if mine != theirs:
            out.append(f"{name} {_option_value(mine)} (A: {_option_value(theirs)})")
    return "; ".join(out)


def _option_value(value: Any) -> str:
    if isinstance(value, tuple) and all(isinstance(v, tuple) for v in value):
        return ", ".join("=".join(map(str, pair)) for pair in value) or "none"
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _focus_text(focus: Any) -> str:
    tools = focus.get("tools") if isinstance(focus, dict) else None
    return ", ".join(map(str, tools)) if isinstance(tools, list) else "every tool"


def _named_options(run: Run, scoring: str, current: bool = False) -> bool:
    """Whether the run's stored scoring ``scoring`` was scored with options of that name: a
    spec folder written under an earlier version's defaults (abs_tol 1e-9) was not, and is
    compared as if the run had none (scored in memory); ``current``: and of the run's files
    as they are."""
    folder = run.scores_dir(scoring)
    if not (folder / "summary.json").exists():
        # a scoring writes its summary last: scores without one are no scoring it finished
        return False
    summary, options = read_summary(run, folder)
    if options.scoring != scoring:
        return False
    if not current:
        return True
    audit = summary.get("audit")
    # scored by other SQL than today's (an earlier version's): scored again, as report does
    sql = audit.get("sql_sha256") if isinstance(audit, dict) else None
    return sql in (None, sql_sha256(options.scorer)) and not run.changed_since(summary)


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
        as_a, differ = _unlike_options(a_run, b_run, scoring)
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
    pending = {m: _metric_delta(joined, m, boot, alpha, m in pooled) for m in METRICS}
    for m in OUTCOMES[:2]:  # shares of the samples where defined (none: no write role)
        if joined[m].null_count() < joined.height or joined[f"{m}_b"].null_count() < joined.height:
            pending[m] = _metric_delta(joined, m, boot, alpha)
    sides = [(pairs_a, _k_of_rows(at_a, rows_a)), (pairs_b, _k_of_rows(at_b, rows_b))]
    del pairs_a, pairs_b  # (let go in turn as they are read)
    pending_tools = _tool_deltas(joined, sides, boot, alpha)
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


def pair_rows(
    scores: pl.DataFrame, n_pairs: int, id_batches: Iterable[pl.Series]
) -> np.ndarray | None:
    """The row of ``scores`` each of ``n_pairs`` pairs is of, when the pairs (whose sample
    ids come in ``id_batches``, in order) list each row's pairs (its ``pairs`` count) in the
    rows' order, as scoring writes them; None otherwise (a file written otherwise: the pairs
    are then matched by sample id). The ids are checked a batch at a time, and not kept:
    each row's pairs are one run of its id, starting where the counts say."""
    if "pairs" not in scores.columns:
        return None
    counts = scores["pairs"].fill_null(0).to_numpy().astype(np.int64)
    if (counts < 0).any() or int(counts.sum()) != n_pairs:
        return None
    having = np.flatnonzero(counts)  # the rows with pairs, and where their pairs start
    starts = np.cumsum(counts)[having] - counts[having]
    ids = scores["sample_id"]
    seen = found = 0  # pairs and runs of one id seen so far
    last: Any = None  # the id the batch before ended with
    for batch in id_batches:
        if not len(batch):
            continue
        runs = batch.rle_id().to_numpy()
        local = np.flatnonzero(np.diff(runs, prepend=-1))
        if seen and batch[0] == last:  # a run going on from the batch before
            local = local[1:]
        upto = found + len(local)
        if upto > len(starts) or not np.array_equal(local + seen, starts[found:upto]):
            return None
        if not ids.gather(having[found:upto]).equals(batch.gather(local)):
            return None
        seen, found, last = seen + len(batch), upto, batch[-1]
    if seen != n_pairs or found != len(starts):
        return None
    return np.repeat(np.arange(len(counts)), counts)


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


def _metric_delta(
    joined: pl.DataFrame, metric: str, boot: ResampleSums, alpha: float, pooled: bool = False
) -> Callable[[], dict[str, Any]]:
    """Run-level values of both runs, their delta and its bootstrap interval: the mean of the
    defined per-sample values, or when ``pooled`` a ratio of sums over the samples. Returns
    what computes them once every statistic's columns are in ``boot``."""
    if pooled:
        return _pooled_delta(
            (None, *_pooled_parts(joined, metric, "")),
            (None, *_pooled_parts(joined, metric, "_b")),
            boot,
            alpha,
        )
    va = joined[metric].to_numpy().astype(float)
    vb = joined[f"{metric}_b"].to_numpy().astype(float)
    za, ca = boot.column(np.nan_to_num(va)), boot.column(~np.isnan(va))
    zb, cb = boot.column(np.nan_to_num(vb)), boot.column(~np.isnan(vb))

    def stat(s: np.ndarray) -> np.ndarray:
        return ratio(s[:, zb], s[:, cb]) - ratio(s[:, za], s[:, ca])

    # the point values the way score computes them (polars mean), to the last bit
    return _finish(stat, _mean(joined[metric]), _mean(joined[f"{metric}_b"]), boot, alpha)


# one run's side of a pooled metric: the samples (None: every one, in joined's order), and
# at each the numerator and denominator whose sums make the metric
Pooled = tuple[np.ndarray | None, np.ndarray, np.ndarray]


def _pooled_delta(
    side_a: Pooled, side_b: Pooled, boot: ResampleSums, alpha: float
) -> Callable[[], dict[str, Any]]:
    """:func:`_metric_delta` of a ratio of sums over the samples."""
    (at_a, num_a, den_a), (at_b, num_b, den_b) = side_a, side_b
    na, da = boot.column(num_a, at_a), boot.column(den_a, at_a)
    nb, db = boot.column(num_b, at_b), boot.column(den_b, at_b)

    def stat(s: np.ndarray) -> np.ndarray:
        return ratio(s[:, nb], s[:, db]) - ratio(s[:, na], s[:, da])

    # integer sums divided once, as score does
    value_a = float(ratio(int(num_a.sum()), int(den_a.sum())))
    value_b = float(ratio(int(num_b.sum()), int(den_b.sum())))
    return _finish(stat, value_a, value_b, boot, alpha)


def _finish(
    stat: Callable[[np.ndarray], np.ndarray], value_a: float, value_b: float,
    boot: ResampleSums, alpha: float,
) -> Callable[[], dict[str, Any]]:  # fmt: skip
    """What computes a metric's values, delta and interval once every statistic's columns
    are in ``boot``: ``stat`` takes the resamples' sums to the delta's draws."""

    def finish() -> dict[str, Any]:
        draws = stat(boot.sums())
        draws = draws[~np.isnan(draws)]
        low, high = np.quantile(draws, [alpha, 1 - alpha]) if len(draws) else (np.nan, np.nan)
        return {
            "a": _num(value_a),
            "b": _num(value_b),
            "delta": _num(value_b - value_a),
            "ci_low": _num(low),
            "ci_high": _num(high),
        }

    return finish


def _pooled_parts(joined: pl.DataFrame, metric: str, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Per sample, the numerator and denominator whose sums make a pooled metric: ahr's
    invalid and total arguments; tsa's hits and gold calls (hits = tsa × gold calls, an
    integer the division held exactly)."""
    if metric == "ahr":
        return (
            joined[f"args_invalid{side}"].to_numpy().astype(np.int64),
            joined[f"args_total{side}"].to_numpy().astype(np.int64),
        )
    gold = joined[f"n_gold{side}"].to_numpy().astype(np.int64)
    share = np.nan_to_num(joined[f"{metric}{side}"].to_numpy().astype(float))
    return np.rint(share * gold).astype(np.int64), gold


def _tool_deltas(
    joined: pl.DataFrame,
    sides: list[tuple[pl.DataFrame | None, np.ndarray]],
    boot: ResampleSums,
    alpha: float,
) -> list[tuple[dict[str, Any], Callable[[], dict[str, Any]]]]:
    """Per tool: its paired calls in each run, and what computes ahr over them in each run,
    the delta and its interval (see :func:`_metric_delta`). ``sides``: each run's pairs (see
    :func:`load_scores`) and each of its scores rows' row in ``joined`` (:func:`_k_of_rows`),
    taken out of the list as they are read."""
    if any(pairs is None for pairs, _ in sides):
        return []
    tools = sorted(set().union(*(pairs["tool"].unique() for pairs, _ in sides)))  # type: ignore[index]
    order = joined.select("sample_id").with_row_index("k")
    # each run's pairs as arrays, once: tool, row k in ``joined`` (-1: of a sample not
    # common), and the arguments' counts; each run's pairs let go as soon as read
    arrays = []
    while sides:
        pairs, k_of_row = sides.pop(0)
        assert pairs is not None
        if "row" in pairs.columns:  # by the row of the run's scores each pair is of
            k = k_of_row[pairs["row"].to_numpy()]
        else:  # by sample id
            k = (
                pairs.select("sample_id")
                .join(order, on="sample_id", how="left", maintain_order="left")["k"]
                .fill_null(-1)
                .cast(pl.Int64)
                .to_numpy()
            )
        codes = np.full(pairs.height, -1, dtype=np.int32)
        for c, tool in enumerate(tools):
            codes[(pairs["tool"] == tool).fill_null(False).to_numpy()] = c
        codes[k < 0] = -1  # (pairs of samples not common)
        inv, valid = (
            pairs[c].fill_null(0).cast(pl.Int32).to_numpy() for c in ("args_invalid", "args_valid")
        )
        arrays.append((codes, k, inv, valid))
        del pairs
    out = []
    for c, tool in enumerate(tools):
        parts = []
        for codes, k, inv, valid in arrays:
            keep = codes == c
            at, (inv_at, valid_at, paired) = _summed_by(k[keep], inv[keep], valid[keep])
            parts.append((at, inv_at, inv_at + valid_at, int(paired.sum())))
        entry = {"tool": tool, "paired_a": parts[0][3], "paired_b": parts[1][3]}
        out.append((entry, _pooled_delta(parts[0][:3], parts[1][:3], boot, alpha)))
    return out


def _summed_by(k: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The distinct ``k`` ascending, and at each the sum of each of ``values`` and the count
    of its entries (pairs come in the order of their samples, so ``k`` is most often sorted
    already)."""
    if len(k) > 1 and (np.diff(k) < 0).any():
        order = np.argsort(k, kind="stable")
        k, values = k[order], tuple(v[order] for v in values)
    starts = np.flatnonzero(np.diff(k, prepend=-1))  # (k is 0 or more)
    if not len(starts):
        return k, tuple(np.zeros(0, np.int64) for _ in range(len(values) + 1))
    sums = tuple(np.add.reduceat(np.asarray(v, np.int64), starts) for v in values)
    return k[starts], (*sums, np.diff(starts, append=len(k)))


def _mean(series: pl.Series) -> float:
    # in one chunk, as score sums the column (a mean of several chunks may differ in its
    # last bit)
    defined = series.rechunk().drop_nulls()
    return cast(float, defined.mean()) if defined.len() else float("nan")


def _num(value: Any) -> float | None:
    value = float(value)
    return None if np.isnan(value) else value


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
