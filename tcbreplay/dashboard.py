"""The original benchmark's dashboard file, written from a scored run.

The listed samples are written as a JSON array by DuckDB, from the calls scoring
already parsed (arguments stay the exact JSON the agent sent), so a run of a million
samples writes its file without building a Python object per call.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from tcbreplay.store import EVALUATIONS, Run
from tcbreplay.translate import CallTables

_SAMPLES = """
select
    input,
    struct_pack(
        tool_call_names := coalesce(agent_names, []::varchar[]),
        tool_call_args := coalesce(list_transform(agent_args, lambda a: a::json), []::json[])
    ) as output,
    struct_pack(
        tool_call_names := coalesce(gold_names, []::varchar[]),
        tool_call_args := coalesce(list_transform(gold_args, lambda a: a::json), []::json[])
    ) as target
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
    keep = np.zeros(scores.height, dtype=bool)
    keep[listed["s"].to_numpy()] = True
    inputs = pl.read_parquet(run.samples_path, columns=["sample_index", "input"]).sort(
        "sample_index"
    )
    # in sample order: DuckDB writes the rows as they come (no sort of the payloads)
    frame = listed.join(
        _lists(tables.agent, "agent", keep), on="s", how="left", maintain_order="left"
    ).join(_lists(tables.gold, "gold", keep), on="s", how="left", maintain_order="left")
    frame = frame.with_columns(inputs["input"].gather(frame["s"]).alias("input"))
    head = {
        "benchmark_name": title,
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
    }
    path = run.dir / EVALUATIONS / f"{title}_{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = path.with_name(path.name + ".samples.tmp")
    tmp = path.with_name(path.name + ".tmp")
    con = duckdb.connect()
    try:
        con.register("listed", frame.to_arrow())
        target = "'" + str(samples).replace("'", "''") + "'"
        con.execute(f"copy ({_SAMPLES}) to {target} (format json, array true)")
    finally:
        con.close()
    try:
        with tmp.open("wb") as out, samples.open("rb") as array:
            out.write((json.dumps(head, ensure_ascii=False)[:-1] + ', "samples": ').encode())
            shutil.copyfileobj(array, out, 1 << 22)
            out.write(b"}\n")
    finally:
        samples.unlink(missing_ok=True)
    os.replace(tmp, path)
    return path


def _lists(calls: pl.DataFrame, side: str, keep: np.ndarray) -> pl.DataFrame:
    """Per listed sample position (``keep``): the call names and argument texts, in order."""
    return (
        calls.filter(pl.Series(keep[calls["s"].to_numpy()]))
        .group_by("s", maintain_order=True)
        .agg(pl.col("name").alias(f"{side}_names"), pl.col("args").alias(f"{side}_args"))
    )
