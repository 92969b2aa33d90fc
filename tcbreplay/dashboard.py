"""The original benchmark's dashboard file, written from a scored run.

DuckDB writes each listed sample's JSON object as text, from the calls scoring already
parsed: argument texts are canonical JSON, so they are spliced in as they are, not parsed
again, and a run of a million samples writes its file without a Python object per call.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay.sql import query_text
from tcbreplay.store import EVALUATIONS, Run
from tcbreplay.translate import SideCalls

# samples joined into one text per write, so that a large file is not built whole in memory
_SAMPLES_PER_WRITE = 50_000


def write_dashboard(
    run: Run, scores: pl.DataFrame, calls: Callable[[str], SideCalls], summary: dict[str, Any],
    mode: str,
) -> Path:  # fmt: skip
    """Write ``evaluations/<title>_<run_id>.json``; ``mode`` ``mismatches`` lists only samples
    whose names differ from gold or with an invalid or missing argument, as the original did.
    ``calls(side)``: the run's ``agent`` or ``gold`` calls."""
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
    # the listed samples in sample order (DuckDB writes the rows as they come), and each
    # sample's row among them (-1: not listed)
    listed_s = listed["s"].to_numpy()
    row = np.full(scores.height, -1, dtype=np.int64)
    row[listed_s] = np.arange(len(listed_s))
    inputs = pl.read_parquet(run.samples_path, columns=["sample_index", "input"]).sort(
        "sample_index"
    )
    frame = pa.table(
        {
            "input": inputs["input"].gather(listed_s).to_arrow(),
            **_lists(calls("agent"), "agent", row, len(listed_s)),
            **_lists(calls("gold"), "gold", row, len(listed_s)),
        }
    )
    head = {
        "benchmark_name": title,
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
    }
    path = run.dir / EVALUATIONS / f"{title}_{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    con = duckdb.connect()
    try:
        con.register("listed", frame)
        samples = con.sql(query_text("dashboard_samples")).pl()["sample"]
    finally:
        con.close()
    try:
        with tmp.open("w", encoding="utf-8") as out:
            # laid out as DuckDB writes a JSON array: a sample per line, each after a tab
            out.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "samples": [\n\t')
            for start in range(0, samples.len(), _SAMPLES_PER_WRITE):
                chunk = samples.slice(start, _SAMPLES_PER_WRITE).str.join(",\n\t").item()
                out.write((",\n\t" if start else "") + chunk)
            out.write("\n]\n}\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def _lists(calls: SideCalls, side: str, row: np.ndarray, n: int) -> dict[str, pa.Array]:
    """The call names and argument texts of each of ``n`` listed samples, in order, as Arrow
    lists (``row``: each sample's row among them, -1 if not listed). Calls come sorted by
    sample and call order, so a list is a slice of them: no grouping."""
    at = row[calls.s]
    listed = at >= 0
    keep = pa.array(listed)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(at[listed], minlength=n), out=offsets[1:])
    return {
        f"{side}_{column}": pa.LargeListArray.from_arrays(
            offsets, values.filter(keep).combine_chunks()
        )
        for column, values in (("names", calls.name), ("args", calls.args))
    }
