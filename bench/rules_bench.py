"""``make bench-rules``: ``tcbreplay score`` at scale with gold rules on every sample.

Generates (or reuses, under ``bench/out/``) the 1M-sample run of ``bench.generate`` twice:
as ``make bench`` has it (no gold rules) and with ``--rules`` (every gold call an accept
list, every sample of two or more calls an order-free group). Times ``tcbreplay score
--format json --dashboard none`` on each in fresh processes (best of 3, interleaved), checks
a slice of the rules run sample by sample against the plain-Python spec
(``metrics.explain_sample`` and ``pairing.trajectory_precision``), and writes the table to
BENCHMARKS.md ("Gold rules at scale").

    python -m bench.rules_bench [--samples 1m] [--check 5000]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import polars as pl

from bench.generate import generate_run, generator_info, parse_size
from bench.run import (
    OUT,
    _valid_run,
    best_of,
    bin_path,
    git_head,
    label,
    load1,
    machine,
    write_section,
)

SECTION = "## Gold rules at scale"
TARGET_RULES_S = 10.0


def ensure(samples: int, rules: bool, out: Path) -> tuple[Path, str]:
    """The store and run id of the generated run, generated unless a valid one is there."""
    name = label(samples) + ("-rules" if rules else "")
    store, run_id = out / f"store-{name}", f"bench-{label(samples)}"
    if not _valid(store / run_id, samples, rules):
        print(f"generating {samples:,} samples{' with gold rules' if rules else ''}", flush=True)
        generate_run(store, run_id, samples, 0, quiet=False, rules=rules)
    return store, run_id


def _valid(run_dir: Path, samples: int, rules: bool) -> bool:
    if not rules:
        return _valid_run(run_dir, samples, 0)
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        manifest.get("generator") == generator_info(samples, 0, rules)
        and manifest.get("status") == "complete"
    )


def time_score(store: Path, run_id: str) -> list[str]:
    return [bin_path("tcbreplay"), "score", run_id, "--store", str(store), "--format", "json",
            "--dashboard", "none"]  # fmt: skip


def check_slice(store: Path, run_id: str, count: int) -> dict[str, Any]:
    """Samples ``count`` from the middle of the run, scored by the plain-Python spec, against
    the stored scores of the default scoring."""
    from tcbreplay._score import translate
    from tcbreplay._score.flat_calls import RULES
    from tcbreplay._score.metrics import VALID_VERDICTS, GoldRules, explain_sample
    from tcbreplay._score.pairing import blocks_of, trajectory_precision
    from tcbreplay._store.runs import Store
    from tcbreplay._store.views import connect

    run = Store(store).open_run(run_id)
    n = json.loads((run.dir / "manifest.json").read_text())["totals"]["samples"]
    lo = max(0, n // 2 - count // 2)
    con = connect(runs=[run], with_scores=False)
    try:
        tables = translate.load_calls(con, (lo, lo + count))
    finally:
        con.close()
    specs = run.manifest["tools"]["specs"]
    scores = pl.read_parquet(run.dir / "scores" / "spec" / "scores.parquet")
    scores = scores.filter(pl.col("sample_index").is_between(lo, lo + count - 1))
    by_id = {r["sample_id"]: r for r in scores.iter_rows(named=True)}
    agent = tables.agent.partition_by("s", as_dict=True)
    gold = tables.gold.partition_by("s", as_dict=True)
    equal = 0
    for s, sid in enumerate(tables.samples["sample_id"]):
        a = agent.get((s,))
        g = gold.get((s,))
        a_calls = [] if a is None else [(n, json.loads(x)) for n, x in a.select(
            "name", "args").iter_rows()]  # fmt: skip
        g_calls = []
        if g is not None:
            for name, args, *texts in g.select("name", "args", *RULES).iter_rows():
                rules = {k: json.loads(t) for k, t in zip(RULES, texts, strict=True) if t}
                g_calls.append((name, json.loads(args), GoldRules.of(rules)))
        explained = explain_sample(a_calls, g_calls, specs)
        invalid = valid = missing = 0
        for pair in explained["pairs"]:
            verdicts = pair["args"].values()
            invalid += sum(v not in VALID_VERDICTS for v in verdicts)
            valid += sum(v in VALID_VERDICTS for v in verdicts)
            missing += len(pair["missing"])
        names_a, names_g = [c[0] for c in a_calls], [c[0] for c in g_calls]
        tp = trajectory_precision(names_a, names_g, blocks_of([c[2].group for c in g_calls]))
        row = by_id[sid]
        mine = (row["args_invalid"], row["args_total"], row["args_missing"], row["pairs"])
        equal += mine == (invalid, invalid + valid, missing, len(explained["pairs"])) and (
            math.isclose(row["tp"], tp, rel_tol=0, abs_tol=1e-12)
        )
    return {"samples": len(tables.samples), "equal": equal, "from": lo}


def render(rows: list[dict[str, Any]], check: dict[str, Any], info: dict[str, Any]) -> str:
    lines = [
        SECTION,
        "",
        "Command: `make bench-rules` (`python -m bench.rules_bench`). The 1M-sample run of "
        "`bench/generate.py` (seed 0), and the same run generated with `--rules`: every gold "
        "call with an `accept` list for its first argument (gold's value and its text), and "
        "in every sample of two or more gold calls an order-free `group` of two or more "
        f"({info['grouped']:,} samples of {info['samples']:,} take the kernel's path for "
        "groups). `tcbreplay score RUN --format json --dashboard none`, wall seconds of a "
        "fresh process, best of 3, the two runs interleaved.",
        "",
        "| run | score (s) | peak RSS | tsa | tp | ahr |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['wall']:.2f} | {r['rss_mb']:,.0f} MB | {r['tsa']:.6f} | "
            f"{r['tp']:.6f} | {r['ahr']:.6f} |"
        )
    rules_wall = next(r["wall"] for r in rows if r["rules"])
    verdict = "PASS" if rules_wall < TARGET_RULES_S else "MISS"
    lines += [
        "",
        f"- With gold rules on every sample: {rules_wall:.2f} s, target under "
        f"{TARGET_RULES_S:.0f} s: {verdict}.",
        f"- Checked against the plain-Python spec (`metrics.explain_sample`, "
        f"`pairing.trajectory_precision`): samples {check['from']:,} to "
        f"{check['from'] + check['samples'] - 1:,} of the rules run, {check['equal']:,} of "
        f"{check['samples']:,} equal (args_invalid, args_total, args_missing, pairs, tp).",
        f"- Machine: {info['machine']}; load average {info['load']:.1f} at the start; "
        f"commit {info['commit']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rules_bench")
    parser.add_argument("--samples", type=parse_size, default=1_000_000)
    parser.add_argument("--check", type=int, default=5_000, help="samples checked in Python")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    load = load1()
    runs = [(False, *ensure(args.samples, False, args.out)),
            (True, *ensure(args.samples, True, args.out))]  # fmt: skip
    timings: dict[bool, Any] = {}
    for _ in range(3):  # interleaved: a busy moment of the machine falls on both
        for rules, store, run_id in runs:
            t = best_of(time_score(store, run_id), 1)
            if rules not in timings or t.wall < timings[rules].wall:
                timings[rules] = t
    rows = []
    for rules, _, _ in runs:
        t = timings[rules]
        summary = json.loads(t.best.stdout)
        rows.append({"name": f"{label(args.samples)}{', gold rules' if rules else ''}",
                     "rules": rules, "wall": t.wall, "rss_mb": t.rss_mb, **{k: summary[k] for k in (
                         "tsa", "tp", "ahr")}})  # fmt: skip
        print(f"{rows[-1]['name']}: {t.wall:.2f} s, {t.rss_mb:,.0f} MB", flush=True)
    _, store, run_id = runs[1]
    check = check_slice(store, run_id, args.check)
    print(f"checked {check['equal']:,}/{check['samples']:,} samples against Python", flush=True)
    scores = pl.read_parquet(store / run_id / "scores" / "spec" / "scores.parquet")
    grouped = scores.filter(pl.col("n_gold") >= 2).height
    info = {"machine": machine().get("cpu", "?"), "load": load, "commit": git_head(),
            "samples": args.samples, "grouped": grouped}  # fmt: skip
    text = render(rows, check, info)
    print(text)
    if not args.no_write:
        write_section(text, section=SECTION)
    return 0 if check["equal"] == check["samples"] else 1


if __name__ == "__main__":
    sys.exit(main())
