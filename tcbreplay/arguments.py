"""AHR's argument verdicts, vectorised over every candidate pair of a run.

Each distinct arguments object is split once into (key, value) rows, each value typed
as the spec sees it (int, float, bool, str, null or nested). A pair whose two
argument texts are identical, with every key a parameter of the tool and no NaN, is
all valid; every other pair is judged value by value with Polars expressions that
follow the spec's equality. Only where both values are lists or objects is Python's
``values_equal`` asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from tcbreplay.metrics import arg_verdicts

_VALUE_COLUMNS = ("kind", "num", "value", "text")
# kinds of values, as small integers
INT, FLOAT, BOOL, STR, NULL, NESTED = range(6)


def typed_values(kv: pl.DataFrame) -> pl.DataFrame:
    """Add ``kind`` and ``num`` to rows of ``value`` (canonical JSON text) and ``text`` (a
    string's decoded value)."""
    v = pl.col("value")
    first = v.str.slice(0, 1)
    kind = (
        pl.when(first == '"')
        .then(STR)
        .when(v.is_in(["true", "false"]))
        .then(BOOL)
        .when(v == "null")
        .then(NULL)
        .when(first.is_in(["[", "{"]))
        .then(NESTED)
        .when(v.str.contains(r"^-?[0-9]+$"))
        .then(INT)
        .otherwise(FLOAT)
    )
    return kv.with_columns(
        kind.cast(pl.UInt8).alias("kind"), v.cast(pl.Float64, strict=False).alias("num")
    )


def defaults_table(specs: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """One row per (tool, parameter): whether it has a default, and the default typed."""
    rows = []
    for spec in specs:
        props = (spec.get("parameters") or {}).get("properties") or {}
        for param, schema in props.items():
            has_default = isinstance(schema, dict) and "default" in schema
            rows.append(
                {
                    "name": spec["name"],
                    "key": param,
                    "has_default": has_default,
                    "value": _canonical(schema["default"]) if has_default else None,
                    "text": schema["default"]
                    if has_default and isinstance(schema["default"], str)
                    else None,
                }
            )
    frame = pl.DataFrame(
        rows,
        schema={
            "name": pl.String,
            "key": pl.String,
            "has_default": pl.Boolean,
            "value": pl.String,
            "text": pl.String,
        },
    )
    return typed_values(frame)


def _canonical(value: Any) -> str:
    # ints, bools and null compare by this text, as DuckDB writes them; strings by ``text``
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _equal(a: str, b: str, rel_tol: float, abs_tol: float) -> pl.Expr:
    """The spec's equality of typed values ``a_*`` and ``b_*``; null when both are nested."""
    ak, bk = pl.col(f"{a}_kind"), pl.col(f"{b}_kind")
    an, bn = pl.col(f"{a}_num"), pl.col(f"{b}_num")
    at, bt = pl.col(f"{a}_value"), pl.col(f"{b}_value")
    astr, bstr = pl.col(f"{a}_text"), pl.col(f"{b}_text")
    numeric = (ak <= FLOAT) & (bk <= FLOAT)
    close = (an - bn).abs() <= pl.max_horizontal(
        rel_tol * pl.max_horizontal(an.abs(), bn.abs()), pl.lit(abs_tol)
    )
    number_equal = (
        pl.when(an.is_nan() | bn.is_nan())
        .then(False)
        .when(an.is_infinite() | bn.is_infinite())
        .then(an == bn)
        .otherwise(close)
    )
    return (
        pl.when((ak == NESTED) & (bk == NESTED))
        .then(None)
        .when((ak == INT) & (bk == INT))
        .then(at == bt)
        .when(numeric)
        .then(number_equal)
        .when((ak == STR) & (bk == STR))
        .then(astr == bstr)
        .when((ak == bk) & ((ak == BOOL) | (ak == NULL)))
        .then(at == bt)
        .otherwise(False)
    )


def judge_pairs(
    pairs: pl.DataFrame,
    kv: pl.DataFrame,
    defaults: pl.DataFrame,
    rel_tol: float,
    abs_tol: float,
) -> pl.DataFrame:
    """Argument counts of candidate pairs.

    ``pairs``: ``tool`` (code of the tool's name), ``a_id``, ``g_id`` (ids of the agent's
    and gold's arguments); ``kv``: typed (``id``, ``key``) rows of every arguments object;
    ``defaults``: from :func:`defaults_table`, its names as ``tool`` codes. Returns ``pairs``
    with ``invalid``, ``valid``, ``missing`` and ``undecided`` (pairs whose list or object
    values are left to Python).
    """
    # joins run on small integer codes of tool names and keys
    keys = pl.Enum(pl.concat([kv["key"], defaults["key"]]).unique().sort())
    kv = kv.with_columns(pl.col("key").cast(keys).to_physical())
    defaults = defaults.with_columns(pl.col("key").cast(keys).to_physical())
    quick, key_counts = _quick_pairs(pairs, kv, defaults)
    # identical argument texts with every key a parameter and no NaN: all valid
    fast = pairs.filter(quick).with_columns(
        pl.lit(0, pl.Int64).alias("invalid"),
        pl.Series("valid", key_counts[pairs["a_id"].to_numpy()][quick.to_numpy()]),
        pl.lit(0, pl.Int64).alias("missing"),
        pl.lit(0, pl.Int64).alias("undecided"),
    )
    slow = pairs.filter(~quick)
    # the verdicts depend on the tool and the two arguments objects only: judged once each
    triples = slow.select("tool", "a_id", "g_id").unique().with_row_index("pid")
    triples = triples.with_columns(pl.Series("n", key_counts[triples["g_id"].to_numpy()]))
    kv = kv.lazy()
    defaults = defaults.lazy()
    agent_side = kv.rename({c: f"a_{c}" for c in _VALUE_COLUMNS})
    gold_side = kv.rename({c: f"g_{c}" for c in _VALUE_COLUMNS})
    param_side = defaults.rename({c: f"d_{c}" for c in _VALUE_COLUMNS})
    rows = (
        triples.lazy()
        .select("pid", "tool", "a_id", "g_id")
        .join(agent_side, left_on="a_id", right_on="id")
        .join(gold_side, left_on=["g_id", "key"], right_on=["id", "key"], how="left")
        .join(param_side, on=["tool", "key"], how="left")
        .with_columns(
            pl.col("g_kind").is_not_null().alias("in_gold"),
            pl.col("has_default").is_not_null().alias("known"),
        )
        .with_columns(
            # what the agent's value is held against: gold's value, else the default
            pl.when(pl.col("in_gold"))
            .then(pl.col(f"g_{c}"))
            .otherwise(pl.col(f"d_{c}"))
            .alias(f"e_{c}")
            for c in _VALUE_COLUMNS
        )
        .with_columns(
            pl.when(~pl.col("known"))
            .then(True)
            .when(~pl.col("in_gold") & ~pl.col("has_default"))
            .then(True)
            .otherwise(~_equal("a", "e", rel_tol, abs_tol))
            .alias("invalid")
        )
    )
    counts = rows.group_by("pid").agg(
        pl.col("invalid").fill_null(False).sum().cast(pl.Int64).alias("invalid"),
        (~pl.col("invalid")).fill_null(False).sum().cast(pl.Int64).alias("valid"),
        pl.col("invalid").is_null().sum().cast(pl.Int64).alias("undecided"),
        pl.col("in_gold").sum().cast(pl.Int64).alias("matched"),
    )
    verdicts = (
        triples.lazy()
        .join(counts, on="pid", how="left")
        .with_columns(
            pl.col("invalid").fill_null(0),
            pl.col("valid").fill_null(0),
            (pl.col("n") - pl.col("matched").fill_null(0)).alias("missing"),
            pl.col("undecided").fill_null(0),
        )
        .drop("pid", "n", "matched")
    )
    slow = slow.lazy().join(verdicts, on=["tool", "a_id", "g_id"], how="left")
    return pl.concat([fast.lazy(), slow], how="diagonal").collect()


def _quick_pairs(
    pairs: pl.DataFrame, kv: pl.DataFrame, defaults: pl.DataFrame
) -> tuple[pl.Series, np.ndarray]:
    """The pairs whose two argument texts are identical, with no NaN and every key a
    parameter of the tool (all their arguments are valid), and the number of keys of each
    arguments id. Array lookups by id, no joins."""
    ids = kv["id"].to_numpy()
    a_id, g_id = pairs["a_id"].to_numpy(), pairs["g_id"].to_numpy()
    size = int(max(ids.max(initial=0), a_id.max(initial=0), g_id.max(initial=0))) + 1
    order = np.argsort(ids, kind="stable")
    n_keys = np.bincount(ids, minlength=size)
    first = np.cumsum(n_keys) - n_keys  # each id's first row in ``order``
    has_nan = np.zeros(size, dtype=bool)
    has_nan[ids[kv["value"].str.contains("NaN", literal=True).to_numpy()]] = True
    idx = np.flatnonzero((a_id == g_id) & ~has_nan[a_id])
    # every key of each such pair's arguments, checked against the tool's parameters
    counts = n_keys[a_id[idx]]
    owner = np.repeat(np.arange(len(idx)), counts)
    rows = order[np.repeat(first[a_id[idx]] - (np.cumsum(counts) - counts), counts)
                 + np.arange(counts.sum())]  # fmt: skip
    tool, key = defaults["tool"].to_numpy(), defaults["key"].to_numpy()
    known = np.zeros(
        (int(max(tool.max(initial=0), pairs["tool"].max() or 0)) + 1,
         int(max(key.max(initial=0), kv["key"].max() or 0)) + 1),
        dtype=bool,
    )  # fmt: skip
    known[tool, key] = True
    pair_tool = pairs["tool"].to_numpy()
    unknown = ~known[pair_tool[idx][owner], kv["key"].to_numpy()[rows]]
    undeclared = np.bincount(owner, weights=unknown, minlength=len(idx)) > 0
    quick = np.zeros(pairs.height, dtype=bool)
    quick[idx[~undeclared]] = True
    return pl.Series(quick), n_keys.astype(np.int64)


def decide_nested(
    judged: pl.DataFrame,
    args: pl.DataFrame,
    specs: Iterable[dict[str, Any]],
    names: pl.Enum,
    rel_tol: float,
    abs_tol: float,
) -> pl.DataFrame:
    """Recount, with Python's ``values_equal``, the pairs where lists or objects met
    (``names``: the tool names behind the ``tool`` codes)."""
    todo = judged.filter(pl.col("undecided") > 0).select("tool", "a_id", "g_id").unique()
    if not todo.height:
        return judged
    props = {s["name"]: (s.get("parameters") or {}).get("properties") or {} for s in specs}
    text = dict(zip(args["id"].to_list(), args["args"].to_list(), strict=True))
    tool_names = names.categories.to_list()
    fixed = []
    for tool, a_id, g_id in todo.iter_rows():
        verdicts = arg_verdicts(
            json.loads(text[a_id]), json.loads(text[g_id]), props.get(tool_names[tool]),
            rel_tol, abs_tol,
        )  # fmt: skip
        invalid = sum(v != "ok" for v in verdicts.values())
        fixed.append((tool, a_id, g_id, invalid, len(verdicts) - invalid))
    fixed_frame = pl.DataFrame(
        fixed,
        schema={
            "tool": judged.schema["tool"],
            "a_id": judged.schema["a_id"],
            "g_id": judged.schema["g_id"],
            "invalid_fixed": pl.Int64,
            "valid_fixed": pl.Int64,
        },
        orient="row",
    )
    return (
        judged.join(fixed_frame, on=["tool", "a_id", "g_id"], how="left")
        .with_columns(
            pl.coalesce("invalid_fixed", "invalid").alias("invalid"),
            pl.coalesce("valid_fixed", "valid").alias("valid"),
        )
        .drop("invalid_fixed", "valid_fixed")
    )
