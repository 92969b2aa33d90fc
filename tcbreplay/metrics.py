"""The metric spec, vectorised: TSA, TP and AHR per sample, and their run-level aggregates.

Per sample, with G the gold calls and A the agent's calls, both in order:

- ``tsa`` = |N(A) ∩ N(G)| / |N(G)| over the sets of names; null when G is empty.
- ``tp`` = 1 − lev(names(A), names(G)) / max(|A|, |G|); 1.0 when both are empty.
- AHR pairs agent calls with gold calls of the same name, order-preserving and
  one-to-one, choosing the pairing with the most pairs, then the fewest invalid
  arguments, then the most valid, then the fewest missing gold keys. ``ahr`` =
  args_invalid / args_total over the paired calls; null when args_total is 0.

Run level: TSA is the mean of the defined per-sample values, TP the mean over
all samples, AHR = Σ args_invalid / Σ args_total.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

DEFAULT_REL_TOL = 1e-9
DEFAULT_ABS_TOL = 1e-9
# Above this base the packed alignment score could overflow int64 (base**4 < 2**63 - 1).
_MAX_BASE = 55_000
_BUCKET_ROWS = 100_000


def values_equal(
    a: Any, b: Any, rel_tol: float = DEFAULT_REL_TOL, abs_tol: float = DEFAULT_ABS_TOL
) -> bool:
    """The spec's equality of argument values (JSON values as Python objects)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            values_equal(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], rel_tol, abs_tol) for k in a)
    return False


@dataclass
class NameScores:
    """Per-sample results of the name metrics, as arrays indexed by sample position, and the
    candidate pairs of the samples whose name sequences differ."""

    n_agent: np.ndarray
    n_gold: np.ndarray
    same: np.ndarray  # name sequences equal
    tsa: np.ndarray  # NaN where there is no gold call
    tp: np.ndarray
    # (sample, agent call, gold call) of every same-name pair on some longest common
    # subsequence of a sample whose sequences differ: the only pairs a pairing with the
    # most pairs can use
    pair_s: np.ndarray
    pair_i: np.ndarray
    pair_j: np.ndarray


def name_scores(
    n: int, a_s: np.ndarray, a_code: np.ndarray, g_s: np.ndarray, g_code: np.ndarray
) -> NameScores:
    """TSA and TP of ``n`` samples from their calls' sample positions and name codes.

    Calls come sorted by sample and then by call order. Names are integer codes, so
    any number of distinct names in any script is one symbol each.
    """
    n_agent = np.bincount(a_s, minlength=n)
    n_gold = np.bincount(g_s, minlength=n)
    same = n_agent == n_gold
    # where the counts agree, the two sorted call lists line up call by call
    a_sel, g_sel = same[a_s], same[g_s]
    differs = a_code[a_sel] != g_code[g_sel]
    same[a_s[a_sel][differs]] = False
    hits, distinct_gold = _set_overlap(n, a_s, a_code, g_s, g_code)
    with np.errstate(divide="ignore", invalid="ignore"):
        tsa = np.where(distinct_gold > 0, hits / np.maximum(distinct_gold, 1), np.nan)
    tables = _SequenceTables(n_agent, n_gold, a_code, g_code, np.flatnonzero(~same))
    longest = np.maximum(n_agent, n_gold)
    tp = np.where(longest == 0, 1.0, 1.0 - tables.distance / np.maximum(longest, 1))
    return NameScores(
        n_agent=n_agent,
        n_gold=n_gold,
        same=same,
        tsa=tsa,
        tp=tp,
        pair_s=tables.pair_s,
        pair_i=tables.pair_i,
        pair_j=tables.pair_j,
    )


def _set_overlap(
    n: int, a_s: np.ndarray, a_code: np.ndarray, g_s: np.ndarray, g_code: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: |N(A) ∩ N(G)| and |N(G)| for the sets of name codes."""
    width = int(max(a_code.max(initial=0), g_code.max(initial=0))) + 1
    if width <= 64:  # one bit per name
        bits_a = np.zeros(n, dtype=np.uint64)
        bits_g = np.zeros(n, dtype=np.uint64)
        np.bitwise_or.at(bits_a, a_s, np.left_shift(np.uint64(1), a_code.astype(np.uint64)))
        np.bitwise_or.at(bits_g, g_s, np.left_shift(np.uint64(1), g_code.astype(np.uint64)))
        return np.bitwise_count(bits_a & bits_g), np.bitwise_count(bits_g)
    agent_sets = np.unique(a_s.astype(np.int64) * width + a_code)
    gold_sets = np.unique(g_s.astype(np.int64) * width + g_code)
    common = np.intersect1d(agent_sets, gold_sets, assume_unique=True)
    return np.bincount(common // width, minlength=n), np.bincount(gold_sets // width, minlength=n)


class _SequenceTables:
    """Edit distances and longest-common-subsequence pairs of the samples in ``todo``.

    Samples of the same shape (|A|, |G|) are computed together, a table row at a time:
    within a row both recurrences are running extremes (``np.maximum.accumulate`` for
    the LCS, ``np.minimum.accumulate`` for Levenshtein), so the Python loop runs
    min(|A|, |G|) times per shape, whatever the number of samples.
    """

    def __init__(
        self, n_agent: np.ndarray, n_gold: np.ndarray, a_code: np.ndarray, g_code: np.ndarray,
        todo: np.ndarray,
    ) -> None:  # fmt: skip
        self.distance = np.zeros(len(n_agent), dtype=np.int64)
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        a_start = np.cumsum(n_agent) - n_agent
        g_start = np.cumsum(n_gold) - n_gold
        shapes = n_agent[todo].astype(np.int64) * (int(n_gold.max(initial=0)) + 1) + n_gold[todo]
        order = np.argsort(shapes, kind="stable")
        bounds = np.flatnonzero(np.diff(shapes[order])) + 1
        for group in np.split(todo[order], bounds) if len(todo) else []:
            a, g = int(n_agent[group[0]]), int(n_gold[group[0]])
            if a == 0 or g == 0:
                self.distance[group] = max(a, g)
                continue
            step = max(1, _CELLS // ((a + 1) * (g + 1)))
            for start in range(0, len(group), step):
                chunk = group[start : start + step]
                agent = a_code[a_start[chunk][:, None] + np.arange(a)]
                gold = g_code[g_start[chunk][:, None] + np.arange(g)]
                self.distance[chunk] = _edit_distance(agent, gold)
                k, i, j = np.nonzero(_on_longest(agent, gold))
                found.append((chunk[k], i, j))
        parts = list(zip(*found, strict=True)) or [[np.zeros(0, dtype=np.int64)]] * 3
        self.pair_s, self.pair_i, self.pair_j = (np.concatenate(p).astype(np.int64) for p in parts)


# Cells of DP tables computed at once (a chunk of samples of one shape).
_CELLS = 2_000_000


def _edit_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Levenshtein distance of each row of ``x`` (m × a) to the same row of ``y`` (m × g)."""
    if x.shape[1] > y.shape[1]:
        x, y = y, x
    m, g = y.shape
    cols = np.arange(g + 1)
    row = np.broadcast_to(cols, (m, g + 1)).copy()
    for r in range(x.shape[1]):
        # D[r+1][c] = min over c' <= c of (best way into column c' from row r) + (c - c')
        into = np.empty_like(row)
        into[:, 0] = r + 1
        into[:, 1:] = np.minimum(row[:, 1:] + 1, row[:, :-1] + (x[:, r, None] != y))
        row = np.minimum.accumulate(into - cols, axis=1) + cols
    return row[:, g]


def _lcs_table(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P[k, r, c] = length of the longest common subsequence of x[k, :r] and y[k, :c]."""
    m, a = x.shape
    g = y.shape[1]
    table = np.zeros((m, a + 1, g + 1), dtype=np.int32)
    for r in range(a):
        prev = table[:, r]
        # P[r+1][c] = running max over c' <= c of max(P[r][c'], P[r][c'-1] + 1 on a match)
        into = prev.copy()
        into[:, 1:] = np.maximum(prev[:, 1:], np.where(x[:, r, None] == y, prev[:, :-1] + 1, 0))
        table[:, r + 1] = np.maximum.accumulate(into, axis=1)
    return table


def _on_longest(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean (m × a × g): x[k, i] == y[k, j] and the pair lies on a longest common
    subsequence of the two rows (prefix LCS + 1 + suffix LCS = LCS)."""
    if x.shape[1] > y.shape[1]:
        return _on_longest(y, x).transpose(0, 2, 1)
    before = _lcs_table(x, y)
    after = _lcs_table(x[:, ::-1], y[:, ::-1])[:, ::-1, ::-1]  # after[r, c]: of x[r:], y[c:]
    total = before[:, -1, -1, None, None]
    match = x[:, :, None] == y[:, None, :]
    return match & (before[:, :-1, :-1] + 1 + after[:, 1:, 1:] == total)


def align(
    pairs: pl.DataFrame, n_agent: np.ndarray, n_gold: np.ndarray, same_names: np.ndarray
) -> pl.DataFrame:
    """Choose the AHR pairing per sample and total its argument counts.

    ``pairs`` holds the candidate pairs: ``s`` (sample position), ``i`` (agent call
    index), ``j`` (gold call index), ``invalid``, ``valid``, ``missing``. Returns one
    row per sample: ``pairs``, ``args_invalid``, ``args_valid``, ``args_missing``.
    """
    chosen = choose_pairs(pairs, n_agent, n_gold, same_names)
    n = len(n_agent)
    s = pairs["s"].to_numpy()[chosen] if pairs.height else np.zeros(0, dtype=np.int64)

    def total(column: str | None) -> np.ndarray:
        weights = None if column is None else pairs[column].to_numpy()[chosen].astype(np.int64)
        return np.bincount(s, weights=weights, minlength=n).astype(np.int64)

    return pl.DataFrame(
        {
            "pairs": total(None),
            "args_invalid": total("invalid"),
            "args_valid": total("valid"),
            "args_missing": total("missing"),
        }
    )


def choose_pairs(
    pairs: pl.DataFrame, n_agent: np.ndarray, n_gold: np.ndarray, same_names: np.ndarray
) -> np.ndarray:
    """Mark the candidate pairs (rows of ``pairs``) that the spec's pairing chooses.

    Samples whose name sequences are equal (``same_names``) have only their diagonal
    as candidates, which is then the unique best pairing. The others are aligned by
    dynamic programming, vectorised over every sample with the same (|A|, |G|) shape,
    on a packed integer score whose order is the spec's order of preference (most
    pairs, fewest invalid, most valid, fewest missing). Among equally good pairings
    the walk back from the last calls prefers a pair, then skipping an agent call.
    """
    chosen = np.zeros(pairs.height, dtype=bool)
    if not pairs.height:
        return chosen
    s = pairs["s"].to_numpy()
    direct = same_names[s]
    chosen[direct] = True
    rest = np.flatnonzero(~direct)
    if not len(rest):
        return chosen
    # the rows to align, as arrays once, grouped by shape (|A|, |G|) and sample
    cols = {c: pairs[c].to_numpy()[rest] for c in ("s", "i", "j", "invalid", "valid", "missing")}
    a_of, g_of = n_agent[cols["s"]], n_gold[cols["s"]]
    order = np.lexsort((cols["s"], g_of, a_of))
    cols = {c: v[order] for c, v in cols.items()}
    rest, a_of, g_of = rest[order], a_of[order], g_of[order]
    shape_starts = np.flatnonzero(np.r_[True, (np.diff(a_of) != 0) | (np.diff(g_of) != 0)])
    for lo, hi in zip(shape_starts, np.r_[shape_starts[1:], len(rest)], strict=True):
        samples = np.unique(cols["s"][lo:hi])
        for start in range(0, len(samples), _BUCKET_ROWS):
            chunk = samples[start : start + _BUCKET_ROWS]
            # rows are sorted by sample within a shape: a chunk of samples is a slice
            within = cols["s"][lo:hi]
            part = slice(
                lo + int(np.searchsorted(within, chunk[0], side="left")),
                lo + int(np.searchsorted(within, chunk[-1], side="right")),
            )
            _choose_bucket(
                {c: v[part] for c, v in cols.items()}, rest[part], chunk,
                int(a_of[lo]), int(g_of[lo]), chosen,
            )  # fmt: skip
    return chosen


def _choose_bucket(
    cols: dict[str, np.ndarray], rows: np.ndarray, samples: np.ndarray, a: int, g: int,
    chosen: np.ndarray,
) -> None:  # fmt: skip
    s, i, j = cols["s"], cols["i"], cols["j"]
    inv = cols["invalid"].astype(np.int64)
    val = cols["valid"].astype(np.int64)
    mis = cols["missing"].astype(np.int64)
    c = int(max(inv.max(), mis.max()))
    base = min(a, g) * max(c, int(val.max()), 1) + 1
    if base > _MAX_BASE:
        for sample in samples:
            mask = s == sample
            cands = list(zip(i[mask], j[mask], inv[mask], val[mask], mis[mask], strict=True))
            picked = set(align_one_pairs(cands, a, g))
            for row, x, y in zip(rows[mask], i[mask], j[mask], strict=True):
                chosen[row] = (int(x), int(y)) in picked
        return
    m = len(samples)
    local = np.searchsorted(samples, s)
    weight = np.full((m, a, g), -1, dtype=np.int64)
    weight[local, i, j] = base**3 + (c - inv) * base**2 + val * base + (c - mis)
    where = np.full((m, a, g), -1, dtype=np.int64)
    where[local, i, j] = rows
    best = np.zeros((m, a + 1, g + 1), dtype=np.int64)
    for x in range(1, a + 1):
        # best[x][y] = max(best[x-1][y], best[x-1][y-1] + w, best[x][y-1]): the last term
        # makes a row a running maximum, so each row is computed at once
        prev = best[:, x - 1]
        w = weight[:, x - 1]
        into = prev.copy()
        into[:, 1:] = np.maximum(prev[:, 1:], np.where(w >= 0, prev[:, :-1] + w, -1))
        best[:, x] = np.maximum.accumulate(into, axis=1)
    # Walk back from (a, g) in every sample at once.
    k = np.arange(m)
    x = np.full(m, a)
    y = np.full(m, g)
    while True:
        live = (x > 0) & (y > 0)
        if not live.any():
            break
        k, x, y = k[live], x[live], y[live]
        here = best[k, x, y]
        w = weight[k, x - 1, y - 1]
        diag = (w >= 0) & (here == best[k, x - 1, y - 1] + w)
        up = ~diag & (here == best[k, x - 1, y])
        chosen[where[k[diag], x[diag] - 1, y[diag] - 1]] = True
        x = x - (diag | up)
        y = y - ~up


def align_one_pairs(
    cands: Sequence[tuple[int, int, int, int, int]], a: int, g: int
) -> list[tuple[int, int]]:
    """The chosen pairs ``(i, j)`` of one sample from ``(i, j, invalid, valid, missing)``
    candidates: the same choice as :func:`choose_pairs`, on Python tuples."""
    table = {(int(i), int(j)): (1, -int(inv), int(val), -int(mis)) for i, j, inv, val, mis in cands}
    best = [[(0, 0, 0, 0)] * (g + 1) for _ in range(a + 1)]
    for x in range(1, a + 1):
        for y in range(1, g + 1):
            options = [best[x - 1][y], best[x][y - 1]]
            w = table.get((x - 1, y - 1))
            if w is not None:
                prev = best[x - 1][y - 1]
                options.append(tuple(p + q for p, q in zip(prev, w, strict=True)))
            best[x][y] = max(options)
    picked = []
    x, y = a, g
    while x > 0 and y > 0:
        w = table.get((x - 1, y - 1))
        prev = best[x - 1][y - 1]
        if w is not None and best[x][y] == tuple(p + q for p, q in zip(prev, w, strict=True)):
            picked.append((x - 1, y - 1))
            x, y = x - 1, y - 1
        elif best[x][y] == best[x - 1][y]:
            x -= 1
        else:
            y -= 1
    return picked[::-1]


def align_one(
    cands: Sequence[tuple[int, int, int, int, int]], a: int, g: int
) -> tuple[int, int, int, int]:
    """Totals of one sample's chosen pairing: ``(pairs, invalid, valid, missing)``."""
    stats = {(int(i), int(j)): (inv, val, mis) for i, j, inv, val, mis in cands}
    picked = [stats[p] for p in align_one_pairs(cands, a, g)]
    return (
        len(picked),
        int(sum(p[0] for p in picked)),
        int(sum(p[1] for p in picked)),
        int(sum(p[2] for p in picked)),
    )


def summarize(scores: pl.DataFrame) -> dict[str, Any]:
    """Run-level metrics with the n behind each."""
    tsa = scores["tsa"].drop_nulls()
    invalid = int(scores["args_invalid"].sum())
    total = int(scores["args_total"].sum())
    return {
        "tsa": float(tsa.mean()) if tsa.len() else None,
        "tp": float(scores["tp"].mean()) if scores.height else None,
        "ahr": invalid / total if total else None,
        "n_samples": scores.height,
        "n_tsa": tsa.len(),
        "n_tp": scores.height,
        "args_invalid": invalid,
        "args_total": total,
        "args_missing": int(scores["args_missing"].sum()),
        "n_errors": int((scores["status"] != "ok").sum()),
    }


def arg_verdicts(
    agent_args: dict[str, Any],
    gold_args: dict[str, Any],
    params: dict[str, Any] | None,
    rel_tol: float = DEFAULT_REL_TOL,
    abs_tol: float = DEFAULT_ABS_TOL,
) -> dict[str, str]:
    """Judge each argument of one paired call: ``ok``, ``unknown`` (a), ``wrong`` (b),
    ``not_default`` (c, differs from the default) or ``no_default`` (c, gold lacks it and the
    parameter has none). ``params`` maps parameter names to their JSON schemas."""
    params = params or {}
    out = {}
    for key, value in agent_args.items():
        if key not in params:
            out[key] = "unknown"
        elif key in gold_args:
            out[key] = "ok" if values_equal(value, gold_args[key], rel_tol, abs_tol) else "wrong"
        elif "default" in (params[key] or {}):
            same = values_equal(value, params[key]["default"], rel_tol, abs_tol)
            out[key] = "ok" if same else "not_default"
        else:
            out[key] = "no_default"
    return out


def explain_sample(
    agent: Sequence[tuple[str, dict[str, Any]]],
    gold: Sequence[tuple[str, dict[str, Any]]],
    tools: Sequence[dict[str, Any]],
    rel_tol: float = DEFAULT_REL_TOL,
    abs_tol: float = DEFAULT_ABS_TOL,
) -> dict[str, Any]:
    """The AHR pairing of one sample and every argument's verdict, for people to read.

    Returns ``{"pairs": [{"agent": i, "gold": j, "args": {key: verdict}, "missing": [...]}],
    "unpaired_agent": [...], "unpaired_gold": [...]}``; the same choice ``align`` makes.
    """
    props = {t["name"]: (t.get("parameters") or {}).get("properties") or {} for t in tools}
    cands: dict[tuple[int, int], tuple[int, int, int, dict[str, str], list[str]]] = {}
    for i, (name, args) in enumerate(agent):
        for j, (gname, gargs) in enumerate(gold):
            if name != gname:
                continue
            verdicts = arg_verdicts(args, gargs, props.get(name), rel_tol, abs_tol)
            invalid = sum(v != "ok" for v in verdicts.values())
            missing = [k for k in gargs if k not in args]
            cands[(i, j)] = (invalid, len(verdicts) - invalid, len(missing), verdicts, missing)
    a, g = len(agent), len(gold)
    chosen = align_one_pairs(
        [(i, j, inv, val, len(miss)) for (i, j), (inv, val, _, _, miss) in cands.items()], a, g
    )
    paired_a = {i for i, _ in chosen}
    paired_g = {j for _, j in chosen}
    return {
        "pairs": [
            {"agent": i, "gold": j, "args": cands[(i, j)][3], "missing": cands[(i, j)][4]}
            for i, j in chosen
        ],
        "unpaired_agent": [i for i in range(a) if i not in paired_a],
        "unpaired_gold": [j for j in range(g) if j not in paired_g],
    }
