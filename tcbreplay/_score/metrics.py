"""The metric spec in plain Python, and the run-level aggregates of per-sample scores.

Per sample, with G the gold calls and A the agent's calls, both in order:

- ``tsa`` = |N(A) ∩ N(G)| / |N(G)| over the sets of names; null when G is empty.
- ``tp`` = 1 − lev(names(A), names(G)) / max(|A|, |G|); 1.0 when both are empty.
- AHR pairs agent calls with gold calls of the same name, order-preserving and
  one-to-one, choosing the pairing with the most pairs, then the fewest invalid
  arguments, then the most valid, then the fewest missing gold keys. ``ahr`` =
  args_invalid / args_total over the paired calls; null when args_total is 0.

Run level: TSA is the mean of the defined per-sample values, TP the mean over
all samples, AHR = Σ args_invalid / Σ args_total.

Scoring runs the compiled :mod:`tcbreplay._score.kernels`; the functions here are the spec
as people read it, used where Python is the right tool (arguments the kernels leave to
Python, ``explain_sample`` for reports) and as what the kernels are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import polars as pl

DEFAULT_REL_TOL = 1e-9
DEFAULT_ABS_TOL = 1e-9


def values_equal(
    a: Any, b: Any, rel_tol: float = DEFAULT_REL_TOL, abs_tol: float = DEFAULT_ABS_TOL
) -> bool:
    """The spec's equality of argument values (JSON values as Python objects)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(_as_float(a), _as_float(b), rel_tol=rel_tol, abs_tol=abs_tol)
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


def _as_float(x: int | float) -> float:
    """``x`` as a float; an integer beyond the float range as infinity of its sign, as the
    compiled scorer reads it."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def align_one_pairs(
    cands: Sequence[tuple[int, int, int, int, int]], a: int, g: int
) -> list[tuple[int, int]]:
    """The chosen pairs ``(i, j)`` of one sample from ``(i, j, invalid, valid, missing)``
    candidates: the same choice as :func:`choose_pairs`, on Python tuples."""
    table = {(int(i), int(j)): (1, -int(inv), int(val), -int(mis)) for i, j, inv, val, mis in cands}
    best: list[list[tuple[int, ...]]] = [[(0, 0, 0, 0)] * (g + 1) for _ in range(a + 1)]
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
        "tsa": cast(float, tsa.mean()) if tsa.len() else None,
        "tp": cast(float, scores["tp"].mean()) if scores.height else None,
        "ahr": invalid / total if total else None,
        "n_samples": scores.height,
        "n_tsa": tsa.len(),
        "n_tp": scores.height,
        "args_invalid": invalid,
        "args_total": total,
        "args_missing": int(scores["args_missing"].sum()),
        "n_errors": int((scores["status"] != "ok").sum()),
    }


def success() -> pl.Expr:
    """A clean sample (the "success" of pass^k and pass@k): every gold tool used (tsa 1, or no
    gold calls), the gold trajectory's names exactly (tp 1), no invalid argument (ahr 0, or
    no argument judged) and no gold argument left out."""
    return (
        (pl.col("tsa").is_null() | (pl.col("tsa") == 1.0))
        & (pl.col("tp") == 1.0)
        & (pl.col("ahr").is_null() | (pl.col("ahr") == 0.0))
        & (pl.col("args_missing") == 0)
    )


def trial_summary(scores: pl.DataFrame) -> dict[str, Any]:
    """With more than one trial: the metrics of each trial, of each sample averaged over its
    trials (then over samples), and pass^k and pass@k for k = 1 .. the fewest trials of any
    sample. With one trial: only ``{"trials": 1}``."""
    trials = cast(int, scores["trial"].max()) + 1 if scores.height else 1
    if trials == 1:
        return {"trials": 1}
    rows = scores.with_columns(success().alias("success"))
    by_trial = [
        {"trial": int(trial), **_level(group)}
        for (trial,), group in rows.sort("trial").group_by("trial", maintain_order=True)
    ]
    # in the rows' order: the means are summed in one order, so a scoring repeats to the bit
    per_sample = rows.group_by("sample_id", maintain_order=True).agg(
        pl.len().alias("n"),
        pl.col("success").sum().alias("c"),
        pl.col("tsa").mean(),
        pl.col("tp").mean(),
        (pl.col("args_invalid").sum() / pl.col("args_total").sum()).alias("ahr"),
    )
    fewest = cast(int, per_sample["n"].min())
    counts = per_sample.group_by("n", "c").agg(pl.len().alias("samples")).sort("n", "c").rows()
    pass_k = []
    for k in range(1, fewest + 1):
        hat = sum(m * math.comb(c, k) / math.comb(n, k) for n, c, m in counts)
        at = sum(m * (1 - math.comb(n - c, k) / math.comb(n, k)) for n, c, m in counts)
        pass_k.append(
            {"k": k, "pass_hat_k": hat / per_sample.height, "pass_at_k": at / per_sample.height}
        )
    ahr = per_sample["ahr"].fill_nan(None).drop_nulls()
    return {
        "trials": trials,
        "by_trial": by_trial,
        "by_sample": {
            "n_samples": per_sample.height,
            "tsa": _mean(per_sample["tsa"]),
            "tp": _mean(per_sample["tp"]),
            "ahr": cast(float, ahr.mean()) if ahr.len() else None,
            "success": cast(float, (per_sample["c"] / per_sample["n"]).mean()),
        },
        "pass_k": pass_k,
    }


def _level(scores: pl.DataFrame) -> dict[str, Any]:
    """Run-level numbers of some rows, and their share of clean samples."""
    level = summarize(scores)
    keep = ("tsa", "tp", "ahr", "n_samples", "args_invalid", "args_total")
    return {**{k: level[k] for k in keep}, "success": cast(float, scores["success"].mean())}


def _mean(series: pl.Series) -> float | None:
    defined = series.drop_nulls()
    return cast(float, defined.mean()) if defined.len() else None


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
        elif isinstance(params[key], dict) and "default" in params[key]:
            same = values_equal(value, params[key]["default"], rel_tol, abs_tol)
            out[key] = "ok" if same else "not_default"
        else:
            out[key] = "no_default"
    return out


def tool_properties(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool name's parameters (name -> JSON schema); a tool declared more than once has
    the parameters of all its declarations, a parameter declared again its last schema."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        props = (tool.get("parameters") or {}).get("properties") or {}
        out.setdefault(tool["name"], {}).update(props)
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
    props = tool_properties(tools)
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
