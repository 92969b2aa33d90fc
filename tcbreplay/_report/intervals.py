"""Bootstrap intervals of a run's tsa, tp and ahr, as the report shows them beside each number."""

from __future__ import annotations

import numpy as np
import polars as pl

from tcbreplay._compare.diff import by_sample
from tcbreplay._compare.resampling import ResampleSums, ratio

METRICS = ("tsa", "tp", "ahr")
N_BOOT = 1000
CONFIDENCE = 0.95
# resample indexes drawn at once: how the seed's stream is cut, so kept (the same seed gives
# the intervals reports gave before)
_CHUNK_CELLS = 2_000_000


def metric_intervals(
    scores: pl.DataFrame, scoring: str = "spec", n_boot: int = N_BOOT, seed: int = 0,
    confidence: float = CONFIDENCE,
) -> dict[str, tuple[float, float] | None]:  # fmt: skip
    """Percentile bootstrap intervals of the run-level tsa, tp and ahr: the run's samples
    resampled with replacement ``n_boot`` times (seeded, so a report is reproducible). A
    sample's trials are resampled together (they are no independent samples: as ``diff``
    does, :func:`~tcbreplay._compare.diff.by_sample`), and each metric is the ratio its
    scoring takes: under ``abet`` tsa is pooled over the gold calls, as that scorer pools it."""
    if scores.height and "trial" in scores.columns and (scores["trial"] > 0).any():
        ids = "base_id" if "base_id" in scores.columns else "sample_id"
        scores = by_sample(scores.with_columns(pl.col(ids).alias("sample_id")), scoring)
    n = scores.height
    if n == 0:
        return dict.fromkeys(METRICS)
    boot = ResampleSums(n, n_boot, seed, _CHUNK_CELLS)
    tsa = scores["tsa"].to_numpy().astype(float)
    if scoring == "abet":  # hits over gold calls (hits = tsa x gold calls, held exactly)
        gold = scores["n_gold"].to_numpy().astype(np.int64)
        hits = np.rint(np.nan_to_num(tsa) * gold)
        at = {"tsa": (boot.column(hits), boot.column(gold))}
    else:
        at = {"tsa": (boot.column(np.nan_to_num(tsa)), boot.column(~np.isnan(tsa)))}
    del tsa  # (each column is let go once the sums' table holds it: at 10M, 80 MB each)
    at["tp"] = (boot.column(scores["tp"].to_numpy().astype(float)), boot.column(np.ones(n)))
    at["ahr"] = (
        boot.column(scores["args_invalid"].to_numpy()),
        boot.column(scores["args_total"].to_numpy()),
    )
    sums = boot.sums()
    alpha = (1 - confidence) / 2
    out: dict[str, tuple[float, float] | None] = {}
    for metric, (num, den) in at.items():
        values = ratio(sums[:, num], sums[:, den])
        values = values[~np.isnan(values)]
        out[metric] = None
        if len(values):
            low, high = np.quantile(values, [alpha, 1 - alpha])
            out[metric] = (float(low), float(high))
    return out
