"""The reference scorer: the metric spec computed the way the original evaluator did.

A plain per-sample Python loop: read the stored rows, ``json.loads`` every message,
collect each sample's tool calls from its AI messages, then per sample compute ``tsa``,
``tp`` (Levenshtein over lists of names, from rapidfuzz's C implementation) and the AHR
pairing (a dynamic programme over ``(pairs, -invalid, valid, -missing)`` tuples), and
the run-level numbers; and, as the original evaluator did after scoring, the dashboard
file of the mismatched samples (``json.dump`` of their inputs and calls). It shares no
code with ``_score.metrics``, the SQL in ``queries/`` or ``_score.dashboard``: the
benchmark checks both give the same numbers and the same dashboard samples.

    python -m bench.reference RUN_ID --store DIR [--scores-out FILE.parquet]
        [--dashboard-out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rapidfuzz.distance import Levenshtein

REL_TOL = 1e-9
ABS_TOL = 1e-9
Call = tuple[str, dict[str, Any]]

SCORE_COLUMNS = (
    "sample_id",
    "sample_index",
    "category",
    "status",
    "n_gold",
    "n_agent",
    "tsa",
    "tp",
    "ahr",
    "args_invalid",
    "args_total",
    "args_missing",
    "pairs",
)


def values_equal(a: Any, b: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    """The spec's equality of two JSON values."""
    if type(a) is bool or type(b) is bool:
        return type(a) is bool and type(b) is bool and a == b
    if type(a) is int and type(b) is int:
        return a == b
    if type(a) in (int, float) and type(b) in (int, float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    if type(a) is str or type(b) is str:
        return type(a) is str and type(b) is str and a == b
    if a is None or b is None:
        return a is None and b is None
    if type(a) is list and type(b) is list:
        return len(a) == len(b) and all(
            values_equal(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
        )
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(values_equal(a[k], b[k], rel_tol, abs_tol) for k in a)
    return False


_NO_DEFAULT = object()


def pair_counts(
    agent_args: Mapping[str, Any],
    gold_args: Mapping[str, Any],
    params: Mapping[str, Any],
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
) -> tuple[int, int, int]:
    """(invalid, valid, missing) of one agent call paired with one gold call of its tool."""
    invalid = 0
    for key, value in agent_args.items():
        if key not in params:
            invalid += 1  # (a) the tool has no such parameter
        elif key in gold_args:
            invalid += not values_equal(value, gold_args[key], rel_tol, abs_tol)  # (b)
        else:
            default = params[key].get("default", _NO_DEFAULT)  # (c)
            invalid += default is _NO_DEFAULT or not values_equal(value, default, rel_tol, abs_tol)
    missing = sum(1 for key in gold_args if key not in agent_args)
    return invalid, len(agent_args) - invalid, missing


def best_pairing(
    agent: Sequence[Call],
    gold: Sequence[Call],
    tool_params: Mapping[str, Mapping[str, Any]],
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
) -> tuple[int, int, int, int]:
    """(pairs, invalid, valid, missing) of the spec's pairing: order-preserving, one-to-one,
    same names; most pairs, then fewest invalid, most valid, fewest missing."""
    a, g = len(agent), len(gold)
    best = [[(0, 0, 0, 0)] * (g + 1) for _ in range(a + 1)]
    for x in range(1, a + 1):
        name, args = agent[x - 1]
        for y in range(1, g + 1):
            options = [best[x - 1][y], best[x][y - 1]]
            gname, gargs = gold[y - 1]
            if name == gname:
                inv, val, mis = pair_counts(
                    args, gargs, tool_params.get(name, {}), rel_tol, abs_tol
                )
                p, ni, v, nm = best[x - 1][y - 1]
                options.append((p + 1, ni - inv, v + val, nm - mis))
            best[x][y] = max(options)
    pairs, neg_invalid, valid, neg_missing = best[a][g]
    return pairs, -neg_invalid, valid, -neg_missing


def score_sample(
    agent: Sequence[Call],
    gold: Sequence[Call],
    tool_params: Mapping[str, Mapping[str, Any]],
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
) -> dict[str, Any]:
    """The per-sample numbers of the spec."""
    agent_names = [name for name, _ in agent]
    gold_names = [name for name, _ in gold]
    gold_set = set(gold_names)
    tsa = len(set(agent_names) & gold_set) / len(gold_set) if gold_set else None
    longest = max(len(agent_names), len(gold_names))
    tp = 1.0 - Levenshtein.distance(agent_names, gold_names) / longest if longest else 1.0
    pairs, invalid, valid, missing = best_pairing(agent, gold, tool_params, rel_tol, abs_tol)
    total = invalid + valid
    return {
        "n_gold": len(gold),
        "n_agent": len(agent),
        "tsa": tsa,
        "tp": tp,
        "ahr": invalid / total if total else None,
        "args_invalid": invalid,
        "args_total": total,
        "args_missing": missing,
        "pairs": pairs,
    }


def agent_calls(run_dir: Path) -> dict[str, list[Call]]:
    """Every sample's tool calls: AI messages in order, each message's ``tool_calls`` in order."""
    calls: dict[str, list[tuple[int, list[Call]]]] = {}
    messages = pq.ParquetFile(run_dir / "messages.parquet")
    for batch in messages.iter_batches(
        batch_size=65_536, columns=["sample_id", "position", "type", "message"]
    ):
        columns = batch.to_pydict()
        for sid, position, kind, text in zip(
            columns["sample_id"],
            columns["position"],
            columns["type"],
            columns["message"],
            strict=True,
        ):
            message = json.loads(text)
            if kind != "ai":
                continue
            made = [
                (c["name"], c.get("args") or {}) for c in message["data"].get("tool_calls") or []
            ]
            if made:
                calls.setdefault(sid, []).append((position, made))
    return {
        sid: [call for _, made in sorted(turns, key=lambda t: t[0]) for call in made]
        for sid, turns in calls.items()
    }


def score_run_dir(
    run_dir: str | Path, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL, keep: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-sample scores (in sample order) and the run-level summary of a stored run;
    ``keep``: each row also keeps the sample's ``input``, ``agent`` and ``gold`` calls, for
    the dashboard file (holding them costs the loop time, so only then)."""
    run_dir = Path(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    tool_params = {
        spec["name"]: (spec.get("parameters") or {}).get("properties") or {}
        for spec in manifest["tools"]["specs"]
    }
    calls = agent_calls(run_dir)
    samples = pq.read_table(
        run_dir / "samples.parquet",
        columns=["sample_id", "sample_index", "category", "status", "gold"]
        + (["input"] if keep else []),
    ).sort_by("sample_index")
    rows = []
    for batch in samples.to_batches(max_chunksize=65_536):
        for sample in batch.to_pylist():
            gold = [(c["name"], c.get("args") or {}) for c in json.loads(sample.pop("gold"))]
            agent = calls.get(sample["sample_id"], [])
            numbers = score_sample(agent, gold, tool_params, rel_tol, abs_tol)
            if keep:
                numbers.update(agent=agent, gold=gold)
            rows.append({**sample, **numbers})
    return rows, summarize(rows)


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Run level: mean of the defined tsa, mean tp, Σ invalid / Σ total, and the n behind each."""
    tsa = [r["tsa"] for r in rows if r["tsa"] is not None]
    invalid = sum(r["args_invalid"] for r in rows)
    total = sum(r["args_total"] for r in rows)
    return {
        "tsa": math.fsum(tsa) / len(tsa) if tsa else None,
        "tp": math.fsum(r["tp"] for r in rows) / len(rows) if rows else None,
        "ahr": invalid / total if total else None,
        "n_samples": len(rows),
        "n_tsa": len(tsa),
        "n_tp": len(rows),
        "args_invalid": invalid,
        "args_total": total,
        "args_missing": sum(r["args_missing"] for r in rows),
        "n_errors": sum(1 for r in rows if r["status"] != "ok"),
    }


def write_dashboard(
    rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], run_id: str, path: Path
) -> None:
    """The dashboard file: every sample whose names differ from gold (tp < 1) or with an
    invalid or missing argument, its input, its calls and the gold calls."""

    def calls(made: Sequence[Call]) -> dict[str, list[Any]]:
        return {
            "tool_call_names": [name for name, _ in made],
            "tool_call_args": [args for _, args in made],
        }

    doc = {
        "benchmark_name": "Tool Call Benchmark",
        "run_id": run_id,
        "results": {key: summary[key] for key in ("tsa", "ahr", "tp")},
        "samples": [
            {"input": r["input"], "output": calls(r["agent"]), "target": calls(r["gold"])}
            for r in rows
            if r["tp"] < 1.0 or r["args_invalid"] > 0 or r["args_missing"] > 0
        ],
    }
    with path.open("w", encoding="utf-8") as out:
        json.dump(doc, out, ensure_ascii=False)


def write_scores(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """The per-sample scores as Parquet, columns as ``scores.parquet`` names them."""
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in SCORE_COLUMNS} for r in rows]), path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reference", description=__doc__.split("\n")[0]
    )
    parser.add_argument("run_id")
    parser.add_argument("--store", type=Path, default=Path("traces"))
    parser.add_argument("--rel-tol", type=float, default=REL_TOL)
    parser.add_argument("--abs-tol", type=float, default=ABS_TOL)
    parser.add_argument("--scores-out", type=Path, help="write the per-sample scores here")
    parser.add_argument("--dashboard-out", type=Path, help="write the dashboard file here")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    keep = args.dashboard_out is not None
    rows, summary = score_run_dir(args.store / args.run_id, args.rel_tol, args.abs_tol, keep)
    seconds = time.perf_counter() - t0
    report = {**summary, "seconds_in_process": round(seconds, 3)}
    if args.dashboard_out:  # timed on its own: the benchmark compares with and without it
        t0 = time.perf_counter()
        write_dashboard(rows, summary, args.run_id, args.dashboard_out)
        report["dashboard_seconds"] = round(time.perf_counter() - t0, 3)
    if args.scores_out:
        write_scores(rows, args.scores_out)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
