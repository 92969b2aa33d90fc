"""The ``abet`` scorer: the original Tool Call Benchmark's evaluator, re-implemented.

It differs from the metric spec (see docs/abet.md):

- tsa: positional and micro-averaged: for each gold index i, stopping at the first
  i the agent has no call for, a hit when agent name i equals gold name i;
  tsa = hits over all samples / gold calls over all samples.
- ahr: for each call matched by position and name, every key of the gold args counts
  once in the denominator, and as correct when the agent has it with a value equal
  under Python ``==`` (so 90 == 90.0, but 3.5999999999999996 != 3.6); invented keys
  and the tool's signature are never looked at. ahr = (denominator − correct) /
  denominator over all samples.
- tp: per-sample Levenshtein similarity of the name sequences; the mean over samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from tcbreplay._score import translate
from tcbreplay._score.flat_calls import CallTables
from tcbreplay._score.results import Scored, category_breakdown

Call = tuple[str, Any]  # a tool call: its name and its arguments


def sample_counts(agent: Sequence[Call], gold: Sequence[Call]) -> dict[str, Any]:
    """One sample as the original evaluator saw it."""
    from rapidfuzz.distance import Levenshtein

    a_names = [n for n, _ in agent]
    g_names = [n for n, _ in gold]
    hits = 0
    for i, name in enumerate(g_names):
        if i >= len(a_names):
            break
        hits += a_names[i] == name
    denominator = correct = matched = 0
    for i in range(min(len(a_names), len(g_names))):
        if a_names[i] != g_names[i]:
            continue
        matched += 1
        agent_args = agent[i][1] if isinstance(agent[i][1], dict) else {}
        for key, value in gold[i][1].items():
            denominator += 1
            correct += key in agent_args and agent_args[key] == value
    longest = max(len(a_names), len(g_names))
    tp = 1.0 if longest == 0 else 1 - Levenshtein.distance(a_names, g_names) / longest
    return {
        "hits": hits,
        "n_gold": len(g_names),
        "n_agent": len(a_names),
        "tp": tp,
        "args_invalid": denominator - correct,
        "args_total": denominator,
        "pairs": matched,
    }


def summarize(counts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Run-level numbers the way the original evaluator computed them."""
    gold_calls = sum(c["n_gold"] for c in counts)
    total = sum(c["args_total"] for c in counts)
    invalid = sum(c["args_invalid"] for c in counts)
    return {
        "tsa": sum(c["hits"] for c in counts) / gold_calls if gold_calls else None,
        "tp": sum(c["tp"] for c in counts) / len(counts) if counts else None,
        "ahr": invalid / total if total else None,
        "n_samples": len(counts),
        "n_tsa": gold_calls,
        "n_tp": len(counts),
        "args_invalid": invalid,
        "args_total": total,
        "args_missing": 0,
    }


def score_tables_abet(tables: CallTables) -> Scored:
    """The original evaluator, sample by sample over ``json.loads``-ed arguments."""
    samples = tables.samples
    ids = samples["sample_id"]
    agent_by: dict[int, list[tuple[str, Any]]] = {}
    for s, name, args in tables.agent.select("s", "name", "args").iter_rows():
        where = f"sample {ids[s]!r}: call {len(agent_by.get(s, []))}: "
        agent_by.setdefault(s, []).append((name, translate.read_args(args, where)))
    gold_by: dict[int, list[tuple[str, Any]]] = {}
    for s, name, args in tables.gold.select("s", "name", "args").iter_rows():
        where = f"sample {ids[s]!r}: gold call {len(gold_by.get(s, []))}: "
        gold_by.setdefault(s, []).append((name, translate.read_args(args, where)))
    counts = [sample_counts(agent_by.get(s, []), gold_by.get(s, [])) for s in samples["s"]]
    scores = samples.select(
        "sample_id", "trial", "sample_index", "category", "status"
    ).with_columns(
        pl.Series("n_gold", [c["n_gold"] for c in counts], dtype=pl.Int32),
        pl.Series("n_agent", [c["n_agent"] for c in counts], dtype=pl.Int32),
        pl.Series(
            "tsa", [c["hits"] / c["n_gold"] if c["n_gold"] else None for c in counts], pl.Float64
        ),
        pl.Series("tp", [c["tp"] for c in counts], dtype=pl.Float64),
        pl.Series(
            "ahr",
            [c["args_invalid"] / c["args_total"] if c["args_total"] else None for c in counts],
            pl.Float64,
        ),
        pl.Series("args_invalid", [c["args_invalid"] for c in counts], dtype=pl.Int64),
        pl.Series("args_total", [c["args_total"] for c in counts], dtype=pl.Int64),
        pl.Series("args_missing", [None] * len(counts), dtype=pl.Int64),
        pl.Series("pairs", [c["pairs"] for c in counts], dtype=pl.Int32),
    )
    metrics = {
        **summarize(counts),
        "n_errors": int((scores["status"] != "ok").sum()),
        "n_missing": int((scores["status"] == "missing").sum()),  # (of the errors)
    }
    by_category = category_breakdown(scores, pooled_tsa=True)
    return Scored(scores=scores, metrics=metrics, by_category=by_category, _tables=tables)
