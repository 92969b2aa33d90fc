"""Compatibility with the original Tool Call Benchmark: its dashboard files and its evaluator.

The original saved, per model, a dashboard file listing only the samples with some
mismatch; a sample it left out had output equal to its target. Its evaluator
differs from the metric spec (see the README):

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

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tcbreplay._inputs import limits
from tcbreplay._inputs.dataset import Dataset, lone_surrogate
from tcbreplay.errors import TraceError

Call = tuple[str, Any]


def read_evaluation(path: str | Path, dataset: Dataset) -> dict[str, list[Call]]:
    """Every dataset sample's agent calls from a dashboard file (left-out samples: the target)."""
    path = Path(path)
    try:
        text = path.read_text()
        doc = limits.loads(text)
    except limits.LimitError as exc:
        raise TraceError(f"{path.name}: {exc}", hint=limits.HINT) from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path.name}: cannot read dashboard file: {exc}") from exc
    listed = doc.get("samples") if isinstance(doc, dict) else None
    if not isinstance(listed, list):
        raise TraceError(f"{path.name}: expected an object with a samples list")
    by_input: dict[str, list[str]] = {}
    for sample in dataset.samples:
        by_input.setdefault(sample.input, []).append(sample.sample_id)
    calls = {s.sample_id: [(c.name, c.args) for c in s.target] for s in dataset.samples}
    seen: dict[str, int] = {}
    for k, item in enumerate(listed):
        place = f"{path.name}: samples[{k}]"
        if not isinstance(item, dict) or not isinstance(item.get("input"), str):
            raise TraceError(f"{place}: expected an object with input and output")
        surrogate = lone_surrogate(item, text)
        if surrogate:
            raise TraceError(
                f"{place}: holds a lone surrogate {surrogate}, which is not valid Unicode"
            )
        ids = by_input.get(item["input"], [])
        if len(ids) != 1:
            problem = "matches no dataset entry" if not ids else "matches several dataset entries"
            raise TraceError(f"{place}: input {item['input'][:60]!r} {problem}")
        if ids[0] in seen:  # the last would silently win
            first = seen[ids[0]]
            raise TraceError(
                f"{place}: input {item['input'][:60]!r} appears twice (also samples[{first}])",
                hint="list each sample once",
            )
        seen[ids[0]] = k
        output = item.get("output")
        names = output.get("tool_call_names") if isinstance(output, dict) else None
        args = output.get("tool_call_args") if isinstance(output, dict) else None
        if not isinstance(names, list) or not isinstance(args, list) or len(names) != len(args):
            raise TraceError(
                f"{place}: output needs tool_call_names and tool_call_args of equal length"
            )
        if not all(isinstance(n, str) for n in names) or not all(isinstance(a, dict) for a in args):
            raise TraceError(f"{place}: tool names must be strings and args objects")
        calls[ids[0]] = list(zip(names, args, strict=True))
    return calls


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
