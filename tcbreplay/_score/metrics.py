"""The metric spec in plain Python, and the run-level aggregates of per-sample scores.

Per sample, with G the gold calls and A the agent's calls, both in order:

- ``tsa`` = |N(A) ∩ N(G)| / |N(G)| over the sets of names; null when G is empty.
- ``tp`` = 1 − lev(names(A), names(G)) / max(|A|, |G|); 1.0 when both are empty; the gold
  calls of an order-free block in any order (:mod:`tcbreplay._score.pairing`).
- AHR pairs agent calls with gold calls of the same name, one-to-one, in order but for
  order-free blocks, choosing the pairing with the most pairs, then the fewest invalid
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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import polars as pl

from tcbreplay._inputs.parameters import extra_arguments
from tcbreplay._score.pairing import align_one_pairs, align_pairs, blocks_of

DEFAULT_REL_TOL = 1e-9
# 0: numbers below 1e-9 are physical constants (8.854e-12 F/m), not rounding noise
DEFAULT_ABS_TOL = 0.0
# the default of tcbreplay 0.1: what a stored scoring whose options lack abs_tol used
FORMER_ABS_TOL = 1e-9
STRINGS = ("exact", "bfcl")
TYPES = ("lenient", "strict")
# verdicts of an argument that count as valid
VALID_VERDICTS = frozenset({"ok", "accepted", "not_compared"})

__all__ = ["align_one_pairs", "align_pairs", "blocks_of"]


@dataclass(frozen=True)
class Compare:
    """How values are compared: number tolerances, ``strings`` (``exact``, or ``bfcl``:
    lowercase, without spaces and ``,./-_*^``, ``'`` read as ``"``, as BFCL's checker
    compares them, and no declared default taken for a key gold lacks, as BFCL takes only its
    answer's values) and ``types`` (``lenient``, or ``strict``: a float for a parameter whose
    schema says ``"type": "integer"`` is invalid, even 10.0, unless gold's own value for it
    is a float, as BFCL takes the type of its answer's first value)."""

    rel_tol: float = DEFAULT_REL_TOL
    abs_tol: float = DEFAULT_ABS_TOL
    strings: str = "exact"
    types: str = "lenient"


DEFAULT_COMPARE = Compare()


_BFCL_DROPPED = re.compile(r"[ ,./\-_*^]")


def normalized(text: str, strings: str = "exact") -> str:
    """A string as ``strings`` compares it: ``bfcl`` drops spaces and ``,./-_*^``, then
    lowercases (Python's ``str.lower``) and reads ``'`` as ``"``, as BFCL does."""
    if strings == "bfcl":
        return _BFCL_DROPPED.sub("", text).lower().replace("'", '"')
    return text


def values_equal(
    a: Any,
    b: Any,
    rel_tol: float = DEFAULT_REL_TOL,
    abs_tol: float = DEFAULT_ABS_TOL,
    strings: str = "exact",
) -> bool:
    """The spec's equality of argument values (JSON values as Python objects); ``strings``
    applies to strings at any depth (not to object keys)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(_as_float(a), _as_float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, str) or isinstance(b, str):
        if not (isinstance(a, str) and isinstance(b, str)):
            return False
        return a == b or (strings != "exact" and normalized(a, strings) == normalized(b, strings))
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(
            values_equal(x, y, rel_tol, abs_tol, strings) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(
            values_equal(a[k], b[k], rel_tol, abs_tol, strings) for k in a
        )
    return False


def _as_float(x: int | float) -> float:
    """``x`` as a float; an integer beyond the float range as infinity of its sign, as the
    compiled scorer reads it."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


@dataclass(frozen=True)
class GoldRules:
    """A gold call's rules beside its ``args``: ``accept`` (per key, every acceptable value),
    ``optional`` (keys the agent may leave out), ``group`` (calls of one group, next to
    each other, in any order) and ``compare`` (the only keys compared; None: every key)."""

    accept: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()
    group: Any = None
    compare: frozenset[str] | None = None

    def compared(self, key: str) -> bool:
        """Whether the value of ``key`` is compared with gold's (else any value is right)."""
        return self.compare is None or key in self.compare

    @classmethod
    def of(cls, call: Mapping[str, Any]) -> GoldRules:
        """The rules of a gold call object as stored (keys left out: none); values of other
        types than the dataset allows are ignored."""
        accept = call.get("accept")
        optional = call.get("optional")
        compare = call.get("compare")
        return cls(
            accept={k: v for k, v in accept.items() if isinstance(v, list)}
            if isinstance(accept, dict)
            else {},
            optional=frozenset(k for k in optional if isinstance(k, str))
            if isinstance(optional, list)
            else frozenset(),
            group=call.get("group"),
            compare=frozenset(k for k in compare if isinstance(k, str))
            if isinstance(compare, list)
            else None,
        )


NO_RULES = GoldRules()


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
        "n_missing": int((scores["status"] == "missing").sum()),
    }


def success() -> pl.Expr:
    """A clean sample (the "success" of pass^k and pass@k, stored as ``exact``): every gold
    tool used (tsa 1, or no gold calls), the gold trajectory's names exactly (tp 1), no
    invalid argument (ahr 0, or no argument judged) and no gold argument left out. Then the
    pairing pairs every call, so it holds exactly when the calls can be paired one to one
    with gold's, block by block, each pair's arguments valid and none left out."""
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
    # write_exact where the scoring computed it (a tool has the role write)
    write = "write_exact" in rows.columns and rows["write_exact"].null_count() < rows.height
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
        pl.col("write_exact").cast(pl.Int64).sum().alias("w") if write else pl.lit(0).alias("w"),
    )
    fewest = cast(int, per_sample["n"].min())
    counts = per_sample.group_by("n", "c").agg(pl.len().alias("samples")).sort("n", "c").rows()
    w_counts = per_sample.group_by("n", "w").agg(pl.len()).sort("n", "w").rows()
    pass_k = []
    for k in range(1, fewest + 1):
        hat = sum(m * math.comb(c, k) / math.comb(n, k) for n, c, m in counts)
        # (as a difference of whole numbers first: pass@1 is then pass^1 to the bit)
        at = sum(m * ((math.comb(n, k) - math.comb(n - c, k)) / math.comb(n, k))
                 for n, c, m in counts)  # fmt: skip
        pass_k.append(
            {"k": k, "pass_hat_k": hat / per_sample.height, "pass_at_k": at / per_sample.height}
        )
        if write:  # pass^k of write_exact beside that of exact (the success above)
            w_hat = sum(m * math.comb(c, k) / math.comb(n, k) for n, c, m in w_counts)
            pass_k[-1]["pass_hat_k_write_exact"] = w_hat / per_sample.height
    ahr = per_sample["ahr"].fill_nan(None).drop_nulls()
    out: dict[str, Any] = {
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
    if write:
        out["by_sample"]["write_exact"] = cast(float, (per_sample["w"] / per_sample["n"]).mean())
    return out


def _level(scores: pl.DataFrame) -> dict[str, Any]:
    """Run-level numbers of some rows, and their share of clean samples."""
    level = summarize(scores)
    keep = ("tsa", "tp", "ahr", "n_samples", "args_invalid", "args_total")
    out = {**{k: level[k] for k in keep}, "success": cast(float, scores["success"].mean())}
    write = scores["write_exact"].drop_nulls() if "write_exact" in scores.columns else None
    if write is not None and write.len():  # only where roles make it defined
        out["write_exact"] = int(write.sum()) / write.len()
    return out


def _mean(series: pl.Series) -> float | None:
    defined = series.drop_nulls()
    return cast(float, defined.mean()) if defined.len() else None


def arg_verdicts(
    agent_args: dict[str, Any],
    gold_args: dict[str, Any],
    params: dict[str, Any] | None,
    compare: Compare = DEFAULT_COMPARE,
    rules: GoldRules = NO_RULES,
    others: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Judge each argument of one paired call: valid are ``ok`` (gold's value, or the default
    of a key gold leaves out), ``accepted`` (another of the key's acceptable values) and
    ``not_compared`` (a key the gold call's ``compare`` leaves out); invalid are ``unknown``
    (a: the tool has no such parameter), ``not_integer`` (a float for an integer parameter,
    with ``types`` strict, where gold's value is not a float), ``wrong`` (b: none of gold's
    values for the key), ``not_default`` and ``no_default`` (c: gold lacks the key, which
    has no acceptable values, and the value is not the declared default, or there is none or
    ``strings`` is ``bfcl``, which takes none).
    ``params`` maps parameter names to their JSON schemas; ``others``: the schema of any
    other key, for a tool that takes free-form arguments (see :func:`free_form_tools`; None:
    it takes no other, which is ``unknown``)."""
    params = params or {}
    out = {}
    for key, value in agent_args.items():
        schema = params.get(key, others)
        if key not in params and others is None:
            out[key] = "unknown"
        elif (
            compare.types == "strict"
            and isinstance(value, float)
            and _integer(schema)
            and not isinstance(gold_args.get(key), float)
        ):
            out[key] = "not_integer"
        elif not rules.compared(key):
            out[key] = "not_compared"
        elif key in gold_args and _equal(value, gold_args[key], compare):
            out[key] = "ok"
        elif key in rules.accept and any(_equal(value, v, compare) for v in rules.accept[key]):
            out[key] = "accepted"
        elif key in gold_args:
            out[key] = "wrong"
        elif isinstance(schema, dict) and "default" in schema and compare.strings != "bfcl":
            same = _equal(value, schema["default"], compare)
            out[key] = "ok" if same else ("wrong" if key in rules.accept else "not_default")
        else:
            out[key] = "wrong" if key in rules.accept else "no_default"
    return out


def missing_keys(agent_args: Mapping[str, Any], gold_args: Mapping[str, Any],
                 rules: GoldRules = NO_RULES) -> list[str]:  # fmt: skip
    """Gold's keys the agent left out that are compared and not optional (they count in
    args_missing)."""
    return [
        k for k in gold_args
        if k not in agent_args and k not in rules.optional and rules.compared(k)
    ]  # fmt: skip


def _integer(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "integer"


def _equal(a: Any, b: Any, compare: Compare) -> bool:
    return values_equal(a, b, compare.rel_tol, compare.abs_tol, compare.strings)


def tool_properties(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool name's parameters (name -> JSON schema); a tool declared more than once has
    the parameters of all its declarations, a parameter declared again its last schema."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        props = (tool.get("parameters") or {}).get("properties") or {}
        out.setdefault(tool["name"], {}).update(props)
    return out


def free_form_tools(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool name that takes arguments besides the parameters it declares (free-form
    arguments: see :func:`tcbreplay._inputs.parameters.extra_arguments`), and their JSON schema
    (``{}``: any); of a tool declared more than once, of its last declaration that takes
    them."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        params = tool.get("parameters")
        extra = extra_arguments(params) if isinstance(params, Mapping) else None
        if extra is not None:
            out[tool["name"]] = extra
    return out


# a gold call as explain_sample takes it: (name, args) or (name, args, rules)
GoldLike = tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], GoldRules]


def explain_sample(
    agent: Sequence[tuple[str, dict[str, Any]]],
    gold: Sequence[GoldLike],
    tools: Sequence[dict[str, Any]],
    compare: Compare = DEFAULT_COMPARE,
) -> dict[str, Any]:
    """The AHR pairing of one sample and every argument's verdict, for people to read.

    Returns ``{"pairs": [{"agent": i, "gold": j, "args": {key: verdict}, "missing": [...],
    "optional": [...]}], "unpaired_agent": [...], "unpaired_gold": [...], "blocks": [...]}``
    (``optional``: optional gold keys left out; ``blocks``: each gold call's block, see
    :func:`tcbreplay._score.pairing.blocks_of`); the same choice scoring makes.
    """
    props, free = tool_properties(tools), free_form_tools(tools)
    rules = [call[2] if len(call) > 2 else NO_RULES for call in gold]
    cands: dict[tuple[int, int], tuple[int, int, dict[str, str], list[str], list[str]]] = {}
    for i, (name, args) in enumerate(agent):
        for j, (gname, gargs, *_) in enumerate(gold):
            if name != gname:
                continue
            verdicts = arg_verdicts(args, gargs, props.get(name), compare, rules[j],
                                    free.get(name))  # fmt: skip
            invalid = sum(v not in VALID_VERDICTS for v in verdicts.values())
            missing = missing_keys(args, gargs, rules[j])
            left_out = [k for k in gargs if k not in args and k in rules[j].optional]
            cands[(i, j)] = (invalid, len(verdicts) - invalid, verdicts, missing, left_out)
    a = len(agent)
    blocks = blocks_of([r.group for r in rules])
    chosen = align_pairs(
        [(i, j, inv, val, len(miss)) for (i, j), (inv, val, _, miss, _) in cands.items()],
        a,
        blocks,
    )
    paired_a = {i for i, _ in chosen}
    paired_g = {j for _, j in chosen}
    return {
        "pairs": [
            {
                "agent": i,
                "gold": j,
                "args": cands[(i, j)][2],
                "missing": cands[(i, j)][3],
                "optional": cands[(i, j)][4],
            }
            for i, j in chosen
        ],
        "unpaired_agent": [i for i in range(a) if i not in paired_a],
        "unpaired_gold": [j for j in range(len(gold)) if j not in paired_g],
        "blocks": blocks,
    }
