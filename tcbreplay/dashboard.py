"""The original benchmark's dashboard file, written from a scored run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from tcbreplay.store import EVALUATIONS, Run, write_json_atomic
from tcbreplay.translate import CallTables


def write_dashboard(
    run: Run, scores: pl.DataFrame, tables: CallTables, summary: dict[str, Any], mode: str
) -> Path:
    """Write ``evaluations/<title>_<run_id>.json``; ``mode`` ``mismatches`` lists only samples
    whose names differ from gold or with an invalid or missing argument, as the original did."""
    title = (run.manifest.get("benchmark") or {}).get("title") or "Tool Call Benchmark"
    samples = pl.read_parquet(run.samples_path, columns=["sample_id", "input", "gold"])
    table = samples.join(
        scores.select("sample_id", "sample_index", "tp", "args_invalid", "args_missing"),
        on="sample_id",
    )
    if mode == "mismatches":
        table = table.filter(
            (pl.col("tp") < 1.0)
            | (pl.col("args_invalid") > 0)
            | (pl.col("args_missing").fill_null(0) > 0)
        )
    table = table.sort("sample_index")
    wanted = tables.samples.filter(pl.col("sample_id").is_in(table["sample_id"].implode()))
    listed = tables.agent.join(wanted.select("s", "sample_id"), on="s").sort("s", "i")
    by_sample: dict[str, tuple[list[str], list[Any]]] = {}
    for sid, name, args in listed.select("sample_id", "name", "args").iter_rows():
        names, arglist = by_sample.setdefault(sid, ([], []))
        names.append(name)
        arglist.append(json.loads(args))
    out_samples = []
    for sid, text, gold in table.select("sample_id", "input", "gold").iter_rows():
        names, arglist = by_sample.get(sid, ([], []))
        target = json.loads(gold)
        out_samples.append(
            {
                "input": text,
                "output": {"tool_call_names": names, "tool_call_args": arglist},
                "target": {
                    "tool_call_names": [c["name"] for c in target],
                    "tool_call_args": [c["args"] for c in target],
                },
            }
        )
    doc = {
        "benchmark_name": title,
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
        "samples": out_samples,
    }
    path = run.dir / EVALUATIONS / f"{title}_{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    return path
