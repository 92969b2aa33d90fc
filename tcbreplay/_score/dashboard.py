"""The original benchmark's dashboard file, written from a scored run.

Compiled code writes each listed sample's JSON object as text (``kernels/dashboard.pxi``)
from the calls scoring already parsed, part by part: argument texts are canonical JSON, so
they are copied in as they are, not parsed again, and a run of a million samples writes its
file without a Python object per sample or call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay._score import kernels
from tcbreplay._score.translate import FlatCalls
from tcbreplay._store.files import MAX_NAME_PART_BYTES, names_a_file
from tcbreplay._store.parquet import read_table
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import DASHBOARD_DIR, MANIFEST
from tcbreplay.errors import StoreError


def dashboard_path(run: Run) -> Path:
    """Where the run's dashboard file goes: ``evaluations/<title>_<run_id>.json``."""
    return run.dir / DASHBOARD_DIR / f"{_title(run)}_{run.run_id}.json"


def _title(run: Run) -> str:
    title = (run.manifest.get("benchmark") or {}).get("title") or "Tool Call Benchmark"
    if not names_a_file(title):
        raise StoreError(
            f"{run.dir / MANIFEST}: benchmark title {title!r} cannot name the dashboard file",
            hint=f"give benchmark.title without '/', NUL or a leading '.', at most "
            f"{MAX_NAME_PART_BYTES} bytes",
        )
    return title


def write_dashboard(
    run: Run,
    scores: pl.DataFrame,
    parts: list[FlatCalls],
    summary: dict[str, Any],
    mode: str,
    path: Path,
) -> None:
    """Write the dashboard file to ``path`` (a temporary name: see :func:`dashboard_path`);
    ``mode`` ``mismatches`` lists only samples whose names differ from gold or with an
    invalid or missing argument, as the original did. ``parts``: the run's calls,
    consecutive ranges of samples in the order of ``scores``."""
    listed = scores.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("s"), "tp", "args_invalid", "args_missing"
    )
    if mode == "mismatches":
        listed = listed.filter(
            (pl.col("tp") < 1.0)
            | (pl.col("args_invalid") > 0)
            | (pl.col("args_missing").fill_null(0) > 0)
        )
    listed_s = listed["s"].to_numpy()  # ascending
    # read with Arrow, whose threads are not the ones Polars writes the scores with meanwhile
    table = read_table(run.samples_path, columns=["sample_index", "input"])
    column = table["input"].cast(pa.large_string()).combine_chunks()
    inputs = kernels.text_buffers(column)
    has_input = column.is_valid().to_numpy(zero_copy_only=False)
    indexes = table["sample_index"].to_numpy()
    # each listed sample's row of the file (scores are in sample_index order)
    rows = listed_s if np.all(indexes[1:] > indexes[:-1]) else np.argsort(indexes)[listed_s]
    head = {
        "benchmark_name": _title(run),
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
    }
    with path.open("wb") as out:
        # laid out as DuckDB writes a JSON array: a sample per line, each after a tab
        out.write((json.dumps(head, ensure_ascii=False)[:-1] + ', "samples": [\n\t').encode())
        # one buffer for the parts' texts: written pages are not fresh pages again
        text = np.empty(0, dtype=np.uint8)
        first = 0
        for part in parts:
            lo, hi = np.searchsorted(listed_s, [first, first + part.samples.height])
            if hi > lo:
                calls = (*part.agent.buffers(), *part.gold.buffers())
                listing = (listed_s[lo:hi] - first, rows[lo:hi], *inputs, has_input, *calls)
                size = kernels.functions().dashboard_samples(*listing, text)
                if size < 0:
                    text = np.empty(-size, dtype=np.uint8)
                    size = kernels.functions().dashboard_samples(*listing, text)
                if lo:
                    out.write(b",\n\t")
                out.write(text.data[:size])
            first += part.samples.height
        out.write(b"\n]\n}\n")
