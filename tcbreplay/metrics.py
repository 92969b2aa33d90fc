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

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

DEFAULT_REL_TOL = 1e-9
DEFAULT_ABS_TOL = 1e-9
# Above this base the packed alignment score could overflow int64 (base**4 < 2**62).
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


def json_values_equal(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    """``values_equal`` on two JSON texts."""
    return values_equal(json.loads(a), json.loads(b), rel_tol, abs_tol)


def name_metrics(agent_names: pl.Series, gold_names: pl.Series) -> pl.DataFrame:
    """Per-sample ``tsa`` and ``tp`` from two list[str] series of the same length."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cpdist

    frame = pl.DataFrame({"a": agent_names, "g": gold_names})
    n_gold_set = frame["g"].list.unique().list.len()
    common = frame.select(pl.col("a").list.set_intersection(pl.col("g")).list.len())["a"]
    tsa = (common / n_gold_set).to_numpy().astype(float)
    tsa[n_gold_set.to_numpy() == 0] = np.nan
    a_str, g_str = _encode_sequences(frame["a"], frame["g"])
    dist = cpdist(a_str, g_str, scorer=Levenshtein.distance, workers=-1)
    longest = np.maximum(frame["a"].list.len().to_numpy(), frame["g"].list.len().to_numpy())
    with np.errstate(divide="ignore", invalid="ignore"):
        tp = np.where(longest == 0, 1.0, 1.0 - dist / np.maximum(longest, 1))
    return pl.DataFrame(
        {"tsa": pl.Series(tsa, dtype=pl.Float64).fill_nan(None), "tp": tp.astype(float)}
    )


def _encode_sequences(a: pl.Series, g: pl.Series) -> tuple[list[str], list[str]]:
    """Map each distinct name to one code point, so a name sequence becomes a string."""
    names = pl.concat([a.explode(), g.explode()]).drop_nulls().unique().sort()
    codes = [chr(k if k < 0xD800 else k + 0x800) for k in range(len(names))]
    mapping = dict(zip(names.to_list(), codes, strict=True))

    def encode(series: pl.Series) -> list[str]:
        joined = series.list.eval(pl.element().replace_strict(mapping, return_dtype=pl.String))
        return joined.list.join("").fill_null("").to_list()

    return encode(a), encode(g)


def align(
    pairs: pl.DataFrame, n_agent: np.ndarray, n_gold: np.ndarray, same_names: np.ndarray
) -> pl.DataFrame:
    """Choose the AHR pairing per sample and total its argument counts.

    ``pairs`` holds the candidate pairs: ``s`` (sample position), ``i`` (agent call
    index), ``j`` (gold call index), ``invalid``, ``valid``, ``missing``. Samples whose
    name sequences are equal (``same_names``) have only their diagonal as candidates,
    which is then the unique best pairing. The others are aligned by dynamic
    programming, vectorised over every sample with the same (|A|, |G|) shape, on
    a packed score whose integer order is the spec's order of preference.
    Returns one row per sample: ``pairs``, ``args_invalid``, ``args_valid``, ``args_missing``.
    """
    n = len(n_agent)
    out = np.zeros((n, 4), dtype=np.int64)
    if pairs.height:
        s = pairs["s"].to_numpy()
        cols = [pairs[c].to_numpy().astype(np.int64) for c in ("invalid", "valid", "missing")]
        direct = same_names[s]
        if direct.any():
            idx = s[direct]
            np.add.at(out[:, 0], idx, 1)
            for k, col in enumerate(cols, start=1):
                np.add.at(out[:, k], idx, col[direct])
        rest = pairs.filter(pl.Series(~direct))
        if rest.height:
            _align_dp(rest, n_agent, n_gold, out)
    return pl.DataFrame(
        {
            "pairs": out[:, 0],
            "args_invalid": out[:, 1],
            "args_valid": out[:, 2],
            "args_missing": out[:, 3],
        }
    )


def _align_dp(
    pairs: pl.DataFrame, n_agent: np.ndarray, n_gold: np.ndarray, out: np.ndarray
) -> None:
    pairs = pairs.with_columns(
        pl.Series("a", n_agent[pairs["s"].to_numpy()]),
        pl.Series("g", n_gold[pairs["s"].to_numpy()]),
    )
    for (a, g), group in pairs.group_by(["a", "g"], maintain_order=True):
        samples = np.unique(group["s"].to_numpy())
        for start in range(0, len(samples), _BUCKET_ROWS):
            chunk = samples[start : start + _BUCKET_ROWS]
            part = group.filter(pl.col("s").is_in(chunk)) if len(samples) > _BUCKET_ROWS else group
            _align_bucket(part, chunk, int(a), int(g), out)


def _align_bucket(part: pl.DataFrame, samples: np.ndarray, a: int, g: int, out: np.ndarray) -> None:
    s = part["s"].to_numpy()
    i = part["i"].to_numpy()
    j = part["j"].to_numpy()
    inv = part["invalid"].to_numpy().astype(np.int64)
    val = part["valid"].to_numpy().astype(np.int64)
    mis = part["missing"].to_numpy().astype(np.int64)
    c = int(max(inv.max(), mis.max()))
    base = min(a, g) * max(c, int(val.max()), 1) + 1
    if base > _MAX_BASE:
        for sample in samples:
            mask = s == sample
            out[sample] = align_one(
                list(zip(i[mask], j[mask], inv[mask], val[mask], mis[mask], strict=True)), a, g
            )
        return
    local = np.searchsorted(samples, s)
    weight = np.full((len(samples), a, g), -1, dtype=np.int64)
    weight[local, i, j] = base**3 + (c - inv) * base**2 + val * base + (c - mis)
    best = np.zeros((len(samples), a + 1, g + 1), dtype=np.int64)
    for x in range(1, a + 1):
        for y in range(1, g + 1):
            keep = np.maximum(best[:, x - 1, y], best[:, x, y - 1])
            w = weight[:, x - 1, y - 1]
            take = np.where(w >= 0, best[:, x - 1, y - 1] + w, -1)
            best[:, x, y] = np.maximum(keep, take)
    total = best[:, a, g]
    p, rem = np.divmod(total, base**3)
    d2, rem = np.divmod(rem, base**2)
    d3, d4 = np.divmod(rem, base)
    out[samples, 0] = p
    out[samples, 1] = p * c - d2
    out[samples, 2] = d3
    out[samples, 3] = p * c - d4


def align_one(
    cands: Sequence[tuple[int, int, int, int, int]], a: int, g: int
) -> tuple[int, int, int, int]:
    """The same choice for one sample, on tuples: ``(pairs, invalid, valid, missing)``."""
    table = {(i, j): (1, -inv, val, -mis) for i, j, inv, val, mis in cands}
    best = [[(0, 0, 0, 0)] * (g + 1) for _ in range(a + 1)]
    for x in range(1, a + 1):
        for y in range(1, g + 1):
            options = [best[x - 1][y], best[x][y - 1]]
            w = table.get((x - 1, y - 1))
            if w is not None:
                prev = best[x - 1][y - 1]
                options.append(tuple(p + q for p, q in zip(prev, w, strict=True)))
            best[x][y] = max(options)
    p, neg_inv, val, neg_mis = best[a][g]
    return p, -neg_inv, val, -neg_mis


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
    best: list[list[tuple[tuple[int, int, int, int], list[tuple[int, int]]]]] = [
        [((0, 0, 0, 0), [])] * (g + 1) for _ in range(a + 1)
    ]
    for x in range(1, a + 1):
        for y in range(1, g + 1):
            options = [best[x - 1][y], best[x][y - 1]]
            cand = cands.get((x - 1, y - 1))
            if cand is not None:
                (p, ni, v, nm), chosen = best[x - 1][y - 1]
                key = (p + 1, ni - cand[0], v + cand[1], nm - cand[2])
                options.append((key, [*chosen, (x - 1, y - 1)]))
            best[x][y] = max(options, key=lambda o: o[0])
    chosen = best[a][g][1]
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
