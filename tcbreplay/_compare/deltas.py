"""Run-level deltas between two compared runs and their paired bootstrap intervals: of a
metric's per-sample values, of a ratio of sums (ahr, abet's tsa), and of ahr per tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import polars as pl

from tcbreplay._compare.resampling import ResampleSums, ratio


def metric_delta(
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
    """:func:`metric_delta` of a ratio of sums over the samples."""
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


def tool_deltas(
    joined: pl.DataFrame,
    sides: list[tuple[pl.DataFrame | None, np.ndarray]],
    boot: ResampleSums,
    alpha: float,
) -> list[tuple[dict[str, Any], Callable[[], dict[str, Any]]]]:
    """Per tool: its paired calls in each run, and what computes ahr over them in each run,
    the delta and its interval (see :func:`metric_delta`). ``sides``: each run's pairs (see
    :func:`~tcbreplay._compare.scored_runs.load_scores`) and each of its scores rows' row in
    ``joined`` (:func:`~tcbreplay._compare.diff._k_of_rows`),
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
