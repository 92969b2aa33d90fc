"""The original benchmark's dashboard file, written from a scored run.

Each listed sample is assembled as JSON by DuckDB from the calls scoring already
parsed (arguments stay the exact JSON the agent sent), so a run of a million samples
writes its file without building a Python object per call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from tcbreplay.store import EVALUATIONS, Run
from tcbreplay.translate import CallTables

_SAMPLE_JSON = """
select to_json(struct_pack(
    input := input,
    output := struct_pack(
        tool_call_names := coalesce(agent_names, []::varchar[]),
        tool_call_args := coalesce(list_transform(agent_args, lambda a: a::json), []::json[])
    ),
    target := struct_pack(
        tool_call_names := coalesce(gold_names, []::varchar[]),
        tool_call_args := coalesce(list_transform(gold_args, lambda a: a::json), []::json[])
    )
))::varchar as doc
from listed
"""


def write_dashboard(
    run: Run, scores: pl.DataFrame, tables: CallTables, summary: dict[str, Any], mode: str
) -> Path:
    """Write ``evaluations/<title>_<run_id>.json``; ``mode`` ``mismatches`` lists only samples
    whose names differ from gold or with an invalid or missing argument, as the original did."""
    title = (run.manifest.get("benchmark") or {}).get("title") or "Tool Call Benchmark"
    listed = scores.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("s"), "tp", "args_invalid", "args_missing"
    )
    if mode == "mismatches":
        listed = listed.filter(
            (pl.col("tp") < 1.0)
            | (pl.col("args_invalid") > 0)
            | (pl.col("args_missing").fill_null(0) > 0)
        )
    listed = listed.select("s")
    inputs = pl.read_parquet(run.samples_path, columns=["sample_index", "input"]).sort(
        "sample_index"
    )
    frame = (
        listed.join(_lists(tables.agent, "agent"), on="s", how="left")
        .join(_lists(tables.gold, "gold"), on="s", how="left")
        .sort("s")
    )
    frame = frame.with_columns(inputs["input"].gather(frame["s"]).alias("input"))
    con = duckdb.connect()
    try:
        con.register("listed", frame.to_arrow())
        docs = con.sql(_SAMPLE_JSON).pl()["doc"]
    finally:
        con.close()
    head = {
        "benchmark_name": title,
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
    }
    path = run.dir / EVALUATIONS / f"{title}_{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "samples": [\n')
        f.write(",\n".join(docs.to_list()))
        f.write("\n]}\n")
    os.replace(tmp, path)
    return path


def _lists(calls: pl.DataFrame, side: str) -> pl.DataFrame:
    """Per sample position: the call names and argument texts, in order."""
    return calls.group_by("s", maintain_order=True).agg(
        pl.col("name").alias(f"{side}_names"), pl.col("args").alias(f"{side}_args")
    )
