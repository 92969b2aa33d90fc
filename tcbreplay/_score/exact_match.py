"""Whether the agent's calls match gold's exactly, and where they first diverge: ``exact``,
``first_divergence`` and ``write_exact`` (the outcome metrics, which track a sample's success),
per sample, and their run-level numbers.

A gold call **accepts** an agent call when both have the same name, every argument the
agent passed is valid for it and no non-optional key of its ``args`` is left out (the pair's
``args_invalid`` and ``args_missing`` are 0). ``exact`` is the "clean sample" of pass^k
(:func:`tcbreplay._score.metrics.success`): the agent's calls can be paired one to one with
gold's, block by block, each pair accepted. ``first_divergence`` walks the agent's calls
along gold's blocks and gives the position of the first call no open gold call of its block
accepts (or where one side ends before the other); it is null exactly when ``exact`` holds.
``write_exact`` is ``exact`` of the calls to tools with the role ``write`` alone, in any order.
``covered``: every gold call accepts some agent call, in any order, other calls allowed.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import polars as pl

from tcbreplay._score import kernels


def first_divergence(
    pairs: np.ndarray,
    a_first: np.ndarray,
    g_first: np.ndarray,
    grouped: np.ndarray | None,
    g_block: np.ndarray | None,
) -> pl.Series:
    """Each sample's first divergence (Int32, null: none) from the judged candidate
    ``pairs`` of the kernel (every same-name pair of a sample with order-free blocks; on a
    longest common subsequence of the names elsewhere, which holds every pair of a common
    prefix), the samples' first agent and gold calls, and the gold blocks (``grouped``: per
    sample, a block of two or more calls; ``g_block``: each gold call's block number)."""
    a = np.diff(a_first)
    g = np.diff(g_first)
    common = np.minimum(a, g)
    offsets = np.zeros(len(common) + 1, dtype=np.int64)
    np.cumsum(common, out=offsets[1:])
    accepted = (pairs[:, kernels.INVALID] == 0) & (pairs[:, kernels.MISSING] == 0)
    diagonal = accepted & (pairs[:, kernels.AGENT] == pairs[:, kernels.GOLD])
    on_path = np.zeros(int(offsets[-1]), dtype=np.bool_)
    rows = np.flatnonzero(diagonal)  # row numbers: copying the rows costs twice this
    on_path[offsets[pairs[rows, kernels.SAMPLE]] + pairs[rows, kernels.AGENT]] = True
    off = np.flatnonzero(~on_path)
    # each sample's first pair off the path: the pairs off it before the sample's, counted
    # (as np.searchsorted(off, offsets[:-1]) finds them, at a fraction of its time)
    off_before = np.zeros(len(on_path) + 1, dtype=np.int64)
    np.cumsum(~on_path, out=off_before[1:])
    at = off_before[offsets[:-1]]
    if len(off):
        first_off = off[np.minimum(at, len(off) - 1)]
        found = (at < len(off)) & (first_off < offsets[1:])
    else:
        first_off, found = offsets[:-1], np.zeros(len(common), dtype=np.bool_)
    where = np.where(found, first_off - offsets[:-1], common)
    where = np.where(found | (a != g), where, -1)
    if grouped is not None and g_block is not None and grouped.any():
        samples = np.flatnonzero(grouped[: len(a)])
        # each such sample's accepted pairs, found once (pairs are in sample order)
        kept = pairs[accepted]
        bounds = np.searchsorted(kept[:, kernels.SAMPLE], np.stack([samples, samples + 1]))
        agent_of, gold_of = kept[:, kernels.AGENT].tolist(), kept[:, kernels.GOLD].tolist()
        for s, lo, hi in zip(samples.tolist(), bounds[0].tolist(), bounds[1].tolist(), strict=True):
            fits: dict[int, list[int]] = {}
            for k in range(lo, hi):
                fits.setdefault(agent_of[k], []).append(gold_of[k])
            g0 = int(g_first[s])
            where[s] = _block_divergence(fits, int(a[s]), g_block[g0 : g0 + int(g[s])].tolist())
    column = pl.Series("first_divergence", where, dtype=pl.Int32)
    return pl.select(pl.when(column >= 0).then(column).alias(column.name)).to_series()


def _block_divergence(fits: dict[int, list[int]], a: int, blocks: list[int]) -> int:
    """The first divergence of a sample with order-free blocks (-1: none), from the gold
    calls that accept each agent call (``fits``), its ``a`` agent calls and each gold call's
    block: block by block, the agent's calls at the block's positions must each find a gold
    call of the block that accepts it, one to one (a matching grown by augmenting paths)."""
    g = len(blocks)
    start = 0
    while start < g:
        end = start
        while end < g and blocks[end] == blocks[start]:
            end += 1
        taken: dict[int, int] = {}  # gold call -> agent call
        for i in range(start, min(end, a)):
            if not _augment(i, fits, taken, start, end, set()):
                return i
        if a < end:
            return a
        start = end
    return g if a > g else -1


def _augment(
    i: int, fits: dict[int, list[int]], taken: dict[int, int], lo: int, hi: int, seen: set[int]
) -> bool:
    for j in fits.get(i, ()):
        if lo <= j < hi and j not in seen:
            seen.add(j)
            if j not in taken or _augment(taken[j], fits, taken, lo, hi, seen):
                taken[j] = i
                return True
    return False


def summarize_exact_match(scores: pl.DataFrame) -> dict[str, Any]:
    """Run-level ``exact`` (share of all rows), ``write_exact`` (share of the rows where it
    is defined; None when it is nowhere), ``first_divergence`` (mean position over the
    rows that diverge) and ``covered`` (share of all rows), each with the counts behind it."""
    if "exact" not in scores.columns:
        return {}
    exact = scores["exact"].drop_nulls()
    write = scores["write_exact"].drop_nulls()
    diverged = scores["first_divergence"].drop_nulls()
    return {
        "exact": _share(exact),
        "n_exact": exact.len(),
        "exact_samples": int(exact.sum()),
        "write_exact": _share(write),
        "n_write_exact": write.len(),
        "write_exact_samples": int(write.sum()),
        "first_divergence": cast(float, diverged.mean()) if diverged.len() else None,
        "n_first_divergence": diverged.len(),
        **_covered(scores),
    }


def _covered(scores: pl.DataFrame) -> dict[str, Any]:
    covered = scores["covered"].drop_nulls() if "covered" in scores.columns else None
    if covered is None:
        return {}
    return {
        "covered": _share(covered),
        "n_covered": covered.len(),
        "covered_samples": int(covered.sum()),
    }


def _share(flags: pl.Series) -> float | None:
    return int(flags.sum()) / flags.len() if flags.len() else None
