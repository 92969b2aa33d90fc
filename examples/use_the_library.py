#!/usr/bin/env python3
"""Use tcbreplay from Python: import two runs of traces, score them, ask SQL questions of the
store, and compare the runs, as the command line does.

    python examples/use_the_library.py DATASET TOOLS TRACES_A TRACES_B [STORE]

TRACES_A and TRACES_B are JSON Lines traces of the same DATASET; TOOLS a JSON file of tool
schemas. The runs go into STORE (default: a new temporary folder).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import tcbreplay
from tcbreplay.errors import TcbReplayError


def main(dataset: str, tools: str, traces_a: str, traces_b: str, root: str) -> None:
    store = tcbreplay.Store(root)
    inputs = tcbreplay.load_inputs(dataset=dataset, tools=tools, need_prompt=False)
    for run_id, traces in (("a", traces_a), ("b", traces_b)):
        imported = tcbreplay.import_traces(inputs, traces, store, run_id)
        print(f"run {imported.run_id}: {imported.imported} samples imported")

        # the metrics, per run and per sample (a Polars DataFrame), as `tcbreplay score`
        result = tcbreplay.score_run(store, run_id)
        summary = result.summary
        print(f"  tsa {summary['tsa']:.4f}  tp {summary['tp']:.4f}  ahr {summary['ahr']:.4f}")
        worst = result.scores.sort("tp", "sample_id").head(2)
        for row in worst.iter_rows(named=True):
            print(f"  lowest tp: {row['sample_id']} ({row['tp']:.2f})")

    # any read-only SQL over every run in the store, as `tcbreplay sql`
    rows = tcbreplay.run_sql(
        store, "select run_id, count(*) as calls from tool_calls group by run_id order by run_id"
    ).records()
    print("calls per run:", {row["run_id"]: row["calls"] for row in rows})

    # b against a, as `tcbreplay diff a b`
    diff = tcbreplay.diff_runs(store, "a", "b", n_boot=500)
    tp = diff.to_dict()["metrics"]["tp"]
    print(f"tp: {tp['a']:.4f} -> {tp['b']:.4f} (delta {tp['delta']:+.4f})")
    print("regressed:", ", ".join(diff.regressed) or "none")
    print("improved:", ", ".join(diff.improved) or "none")


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    root = sys.argv[5] if len(sys.argv) == 6 else tempfile.mkdtemp(prefix="tcbreplay-")
    try:
        main(*sys.argv[1:5], root=str(Path(root)))
    except TcbReplayError as exc:  # bad input: one line, as the command line says it
        sys.exit(f"Error: {exc}")
