"""Does a metric track the outcome? Per metric of a scoring: its mean when the outcome is
true and when it is false, AUC and the point-biserial correlation, with bootstrap intervals.

Every sample and trial with an outcome (:mod:`tcbreplay._compare.outcomes`) is one
observation. A metric is oriented first so that higher is better (ahr is negated;
``first_divergence`` null, never off the gold path, counts as one step past the latest
divergence in the run), so AUC > 0.5 and r > 0 mean it tracks success:

- AUC: the chance that a success scores better than a failure, ties counting half;
- r: Pearson's correlation of the oriented metric with the outcome as 0/1;
- intervals: percentile bootstrap over samples (all trials of a sample drawn together),
  the same resamples for every metric, seeded.

A metric undefined for an observation (a null ahr: no argument judged) leaves it out of
that metric's n only. pass^k with trials: of the outcome and of each true/false metric.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

from tcbreplay._compare.diff import MAX_BOOT
from tcbreplay._compare.outcomes import Outcomes, read_outcomes
from tcbreplay._compare.resampling import least_resamples, refuse_few_resamples
from tcbreplay._compare.scored_runs import load_scores
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DEFAULT_SCORER
from tcbreplay._store.tables import stored_scorings
from tcbreplay.errors import InputError

HIGHER, LOWER, LATER = "higher", "lower", "later"
# the per-sample metric columns a scoring may hold, and which way is better; a column
# the scoring lacks is left out
METRICS: dict[str, str] = {
    "tsa": HIGHER,
    "tp": HIGHER,
    "ahr": LOWER,
    "exact": HIGHER,
    "write_exact": HIGHER,
    "first_divergence": LATER,
    "covered": HIGHER,
}
CONFIDENCE = 0.95
_CHUNK_CELLS = 4_000_000  # resample counts held in memory at once


@dataclass
class Validity:
    """What ``tcbreplay validity`` reports for one run."""

    run_id: str
    scoring: str
    outcome: str
    n: int  # observations (samples × trials) with an outcome
    n_true: int
    n_false: int
    n_samples: int  # samples with an outcome in some trial
    trials: int
    no_outcome: int  # observations without one
    no_outcome_samples: list[str]
    metrics: dict[str, dict[str, Any]]
    n_boot: int
    seed: int
    pass_k: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "scoring": self.scoring,
            "outcome": self.outcome,
            "n": self.n,
            "n_true": self.n_true,
            "n_false": self.n_false,
            "n_samples": self.n_samples,
            "trials": self.trials,
            "no_outcome": self.no_outcome,
            "no_outcome_samples": self.no_outcome_samples,
            "bootstrap": {
                "n_boot": self.n_boot,
                "seed": self.seed,
                "confidence": CONFIDENCE,
                "resamples": "samples",
            },
            "metrics": self.metrics,
            "pass_k": self.pass_k,
        }


def validity_runs(
    store: Store,
    run_ids: list[str] | str,
    *,
    outcome: str | None = None,
    scoring: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[Validity]:
    """For each run, how well every metric of its latest scoring (or ``scoring``) tracks the
    outcome of its samples (``outcome``: a metadata field or expression; by default
    ``abs(reward - 1) <= 1e-6``, see :func:`~tcbreplay._compare.outcomes.read_outcomes`)."""
    refuse_few_resamples(n_boot, CONFIDENCE)
    if n_boot > MAX_BOOT:
        raise InputError(f"--bootstrap {n_boot}: give {least_resamples(CONFIDENCE)} to {MAX_BOOT}")
    if seed < 0:
        raise InputError(f"--seed {seed}: must be 0 or more")
    if isinstance(run_ids, str):  # one run, not its letters
        run_ids = [run_ids]
    if not run_ids:
        raise InputError("name at least one run")
    named = [r for r in dict.fromkeys(run_ids) if run_ids.count(r) > 1]
    if named:  # (report refuses it alike)
        raise InputError(f"run {named[0]!r} is named twice")
    out = []
    for run_id in run_ids:
        run = store.open_run(run_id)
        with run.reading():
            name = scoring or latest_scoring(run)
            if name == "bfcl":
                raise InputError(
                    f"--scoring bfcl: run {run.run_id!r}: the bfcl scoring gives no per-sample "
                    "metrics (tsa, tp, ahr ...) to compare with the outcome"
                )
            # the outcomes first: a run without any is refused before it is read or scored
            outcomes = read_outcomes(run, outcome)
            scores, _ = load_scores(store, run, name)
        out.append(
            scores_validity(
                scores, outcomes, run_id=run.run_id, scoring=name, n_boot=n_boot, seed=seed
            )
        )
    return out


def latest_scoring(run: Run) -> str:
    """The run's most recent stored scoring with per-sample metrics (not bfcl), or ``spec``
    (scored in memory) when it has none."""
    found = sorted(
        (name, str(summary.get("scored_at") or ""))
        for name, _, summary in stored_scorings(run)
        if (summary.get("options") or {}).get("scorer", DEFAULT_SCORER) != "bfcl"
    )
    # the newest; among equal times, the name first in order (as `runs` picks)
    return max(found, key=lambda t: t[1])[0] if found else "spec"


def scores_validity(
    scores: pl.DataFrame,
    outcomes: Outcomes,
    *,
    run_id: str = "",
    scoring: str = "",
    n_boot: int = 2000,
    seed: int = 0,
) -> Validity:
    """The validity numbers of one run's per-sample scores against its outcomes."""
    frame = scores.with_columns(pl.col("trial").cast(pl.Int64)).join(
        outcomes.frame, on=["sample_id", "trial"], how="left"
    )
    missing = frame.filter(pl.col("outcome").is_null())
    frame = frame.filter(pl.col("outcome").is_not_null())
    if frame.height == 0:
        raise InputError(
            f"run {run_id!r}: no sample has an outcome under {outcomes.expression!r} "
            f"({missing.height} without one)",
            hint="check the field's name and values: tcbreplay sql \"select metadata from "
            f"samples where run_id = '{run_id}' limit 3\"",
        )
    _, cluster = np.unique(frame["sample_id"].to_numpy(), return_inverse=True)
    y = frame["outcome"].to_numpy().astype(bool)
    n_clusters = int(cluster.max()) + 1
    pending = {
        name: _Metric(frame[name], orientation, y, cluster)
        for name, orientation in METRICS.items()
        if name in frame.columns
    }
    for counts in _counts(n_clusters, n_boot, seed):  # each draw once, for every metric
        weights = counts.astype(float)
        for metric in pending.values():
            metric.add_draws(weights)
    metrics = {name: metric.finish() for name, metric in pending.items()}
    trials = int(cast(int, scores["trial"].max())) + 1 if scores.height else 1
    return Validity(
        run_id=run_id,
        scoring=scoring,
        outcome=outcomes.expression,
        n=frame.height,
        n_true=int(y.sum()),
        n_false=int((~y).sum()),
        n_samples=n_clusters,
        trials=trials,
        no_outcome=missing.height,
        no_outcome_samples=sorted(set(missing["sample_id"].to_list())),
        metrics=metrics,
        n_boot=n_boot,
        seed=seed,
        pass_k=pass_hat_k(frame, [m for m in ("exact", "write_exact") if m in frame.columns])
        if trials > 1
        else [],
    )


class _Metric:
    """One metric's row of the table: its point values from the samples as they are, its
    intervals from the draws added (:meth:`add_draws`) as they come."""

    def __init__(
        self, column: pl.Series, orientation: str, y: np.ndarray, cluster: np.ndarray
    ) -> None:
        values, self.note = metric_values(column, orientation)
        keep = ~np.isnan(values)
        x, yy, kept = values[keep], y[keep], cluster[keep]
        # each observation's sample (None: the samples themselves, one each, in order)
        self.cluster = None if np.array_equal(kept, np.arange(len(cluster))) else kept
        oriented = -x if orientation == LOWER else x
        self.out: dict[str, Any] = {
            "orientation": orientation,
            "n": int(keep.sum()),
            "n_true": int(yy.sum()),
            "n_false": int((~yy).sum()),
        }
        if not keep.any():
            self.note = "undefined for every sample" + (
                " (no tool roles declared: score with --role write=...)"
                if column.name == "write_exact"
                else ""
            )
        elif not (yy.any() and (~yy).any()):  # (an empty ROC curve, and no r, said why)
            one = (f"every sample it is defined for has outcome {bool(yy[0])}: AUC and r need "
                   "samples of both outcomes")  # fmt: skip
            self.note = one if self.note is None else f"{self.note}; {one}"
        self.point = _stats(np.ones((1, len(x))), x, oriented, yy)
        self.groups = _Groups(oriented, yy, flipped=orientation == LOWER)
        self.draws: list[dict[str, np.ndarray]] = []

    def add_draws(self, counts: np.ndarray) -> None:
        """The statistics of a batch of resamples: ``counts`` (batch, samples), how many
        times each resample drew each sample."""
        self.draws.append(self.groups.stats(counts, self.cluster))

    def finish(self) -> dict[str, Any]:
        out = dict(self.out)
        for key, value in self.point.items():
            out[key] = _num(value[0])
            sample = np.concatenate([d[key] for d in self.draws])
            sample = sample[~np.isnan(sample)]
            if len(sample):
                low_high = np.quantile(sample, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
                out[f"{key}_ci"] = [_num(v) for v in low_high]
            else:
                out[f"{key}_ci"] = [None, None]
        out["note"] = self.note
        return out


def metric_values(column: pl.Series, orientation: str) -> tuple[np.ndarray, str | None]:
    """A metric's values as numbers (NaN where undefined; a ``later`` metric's null, never
    off the gold path, as one past the latest value seen), and a note saying so."""
    values = column.cast(pl.Float64).fill_nan(None).to_numpy().astype(float)
    if orientation != LATER:
        return values, None
    defined = values[~np.isnan(values)]
    if not len(defined):  # none seen (a scorer without it, or no sample left the gold path):
        return values, None  # "one past the latest" is no number: undefined for every sample
    never = float(defined.max()) + 1
    note = None
    if np.isnan(values).any():
        note = f"never off the gold path counts as {never:g} (one past the latest seen)"
    return np.where(np.isnan(values), never, values), note


def roc_points(
    column: pl.Series, orientation: str, outcome: pl.Series
) -> tuple[list[float], list[float]]:
    """The ROC curve of a metric as a classifier of the outcome: (false positive rates,
    true positive rates) as the threshold on the oriented metric falls, from (0, 0) to
    (1, 1); empty when either outcome is absent."""
    values, _ = metric_values(column, orientation)
    y = outcome.to_numpy().astype(bool)
    keep = ~np.isnan(values)
    s, y = values[keep], y[keep]
    s = -s if orientation == LOWER else s
    positives, negatives = int(y.sum()), int((~y).sum())
    if not positives or not negatives:
        return [], []
    levels, inverse = np.unique(-s, return_inverse=True)  # best first
    tp = np.cumsum(np.bincount(inverse, weights=y, minlength=len(levels)))
    fp = np.cumsum(np.bincount(inverse, weights=~y, minlength=len(levels)))
    return [0.0, *(fp / negatives).tolist()], [0.0, *(tp / positives).tolist()]


def _counts(n_clusters: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Batches of bootstrap draws, shape (batch, samples): how many times each resample
    drew each sample (its trials together)."""
    rng = np.random.default_rng(seed)
    batch = max(1, min(n_boot, _CHUNK_CELLS // max(n_clusters, 1)))
    done = 0
    while done < n_boot:
        size = min(batch, n_boot - done)
        drawn = rng.integers(0, n_clusters, size=(size, n_clusters))
        offsets = (np.arange(size) * n_clusters)[:, None]
        counts = np.bincount((drawn + offsets).ravel(), minlength=size * n_clusters)
        yield counts.reshape(size, n_clusters)
        done += size


class _Groups:
    """A metric's observations grouped by value and outcome: every statistic of
    :func:`_stats` depends on a resample only through how many times it drew each group, so
    a batch of resamples is counted into groups once (a pass over the observations a
    resample) and the statistics are computed over the few groups."""

    def __init__(self, oriented: np.ndarray, y: np.ndarray, flipped: bool) -> None:
        self.levels, level = np.unique(oriented, return_inverse=True)  # ascending, as _auc
        self.group = level.reshape(-1) * 2 + y  # group 2l + outcome
        self.size = 2 * len(self.levels)
        # x and oriented of each group, the outcome of each (the groups of a level side by
        # side), and what _correlation centres on: the observations' means, the farthest
        self.x = np.repeat(-self.levels if flipped else self.levels, 2)
        self.s = np.repeat(self.levels, 2)
        self.y = np.tile([False, True], len(self.levels))
        self.s_mean = float(oriented.mean()) if len(oriented) else 0.0
        self.y_mean = float(y.mean()) if len(y) else 0.0
        self.scale = float(np.abs(oriented - self.s_mean).max()) if len(oriented) else 0.0

    def stats(self, counts: np.ndarray, cluster: np.ndarray | None) -> dict[str, np.ndarray]:
        """:func:`_stats` of each resample of ``counts`` (``cluster``: each observation's
        sample, None for the samples themselves), from its weights of the groups."""
        weights = np.empty((len(counts), self.size))
        for k, row in enumerate(counts):
            drawn = row if cluster is None else row[cluster]
            weights[k] = np.bincount(self.group, weights=drawn, minlength=self.size)
        return _stats(weights, self.x, self.s, self.y, (self.s_mean, self.y_mean, self.scale))


def _stats(
    w: np.ndarray,
    x: np.ndarray,
    oriented: np.ndarray,
    y: np.ndarray,
    centre: tuple[float, float, float] | None = None,
) -> dict[str, np.ndarray]:
    """Per row of weights ``w`` (batch, n): the means by outcome of ``x``, and AUC and r of
    ``oriented`` against ``y``, each observation counted as often as its weight says (an
    observation may stand for a group of equal ones: ``centre``, see :func:`_correlation`)."""
    yf = y.astype(float)
    wt, wf = w @ yf, w @ (1 - yf)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_true = np.where(wt > 0, (w @ (x * yf)) / wt, np.nan)
        mean_false = np.where(wf > 0, (w @ (x * (1 - yf))) / wf, np.nan)
    return {
        "mean_if_true": mean_true,
        "mean_if_false": mean_false,
        "auc": _auc(w, oriented, y, wt, wf),
        "r": _correlation(w, oriented, yf, centre),
    }


def _auc(w: np.ndarray, s: np.ndarray, y: np.ndarray, wt: np.ndarray, wf: np.ndarray) -> np.ndarray:
    """Weighted Mann-Whitney AUC: over the pairs of a success and a failure, the share in
    which the success scores higher, ties counting half."""
    if len(s) == 0:
        return np.full(len(w), np.nan)
    order = np.argsort(s, kind="stable")
    levels, starts = np.unique(s[order], return_index=True)
    del levels
    ws, ys = w[:, order], y[order]
    pos = np.add.reduceat(np.where(ys, ws, 0.0), starts, axis=1)
    neg = np.add.reduceat(np.where(ys, 0.0, ws), starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg  # failures scoring lower than each level
    wins = (pos * (below + 0.5 * neg)).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((wt > 0) & (wf > 0), wins / (wt * wf), np.nan)


def _correlation(
    w: np.ndarray, s: np.ndarray, y: np.ndarray, centre: tuple[float, float, float] | None = None
) -> np.ndarray:
    """Weighted Pearson correlation of ``s`` and ``y`` (the point-biserial r), NaN where
    either is constant. Centred first on the observations' unweighted means, and a spread
    below 1e-12 of the largest distance from them squared counts as none; ``centre``: those
    means and that distance, of the observations that ``s`` and ``y`` stand for as groups."""
    if len(s) == 0:
        return np.full(len(w), np.nan)
    s_mean, y_mean, far = centre or (s.mean(), y.mean(), np.abs(s - s.mean()).max())
    xs, ys = s - s_mean, y - y_mean  # centred first: fewer digits lost below
    total = w.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mx, my = (w @ xs) / total, (w @ ys) / total
        vx = (w @ (xs * xs)) / total - mx * mx
        vy = (w @ (ys * ys)) / total - my * my
        cov = (w @ (xs * ys)) / total - mx * my
        scale = max(float(far), 1e-300) ** 2
        flat = (vx <= 1e-12 * scale) | (vy <= 1e-12)
        return np.where(flat, np.nan, np.clip(cov / np.sqrt(vx * vy), -1.0, 1.0))


def pass_hat_k(frame: pl.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """pass^k of the outcome and of each true/false column, for k = 1 to the fewest trials
    any sample has: per sample, the chance that k of its trials drawn without replacement
    all pass, averaged over samples (trials where a column is null are not counted)."""
    per_column = {}
    for name in ["outcome", *columns]:
        counts = (
            frame.filter(pl.col(name).is_not_null())
            .group_by("sample_id")
            .agg(pl.len().alias("n"), pl.col(name).cast(pl.Int64).sum().alias("c"))
        )
        if counts.height:
            per_column[name] = counts.select("n", "c").rows()
    if not per_column:
        return []
    fewest = min(n for rows in per_column.values() for n, _ in rows)
    return [
        {
            "k": k,
            **{
                name: sum(math.comb(c, k) / math.comb(n, k) for n, c in rows) / len(rows)
                for name, rows in per_column.items()
            },
        }
        for k in range(1, fewest + 1)
    ]


def _num(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value
