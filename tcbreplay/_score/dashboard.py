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
from tcbreplay._score.flat_calls import FlatCalls
from tcbreplay._score.hashed_file import HashedFile
from tcbreplay._score.texts import one_array, valid_mask
from tcbreplay._store.files import MAX_NAME_PART_BYTES, names_a_file
from tcbreplay._store.parquet import read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import DASHBOARD_DIR, MANIFEST
from tcbreplay._store.views import query_text
from tcbreplay.errors import StoreError


def dashboard_path(run: Run) -> Path:
    """Where the run's dashboard file goes: ``evaluations/<title>_<run_id>.json``."""
    return run.dir / DASHBOARD_DIR / f"{_title(run)}_{run.run_id}.json"


def dashboard_record(path: Path, sha256: str) -> dict[str, str]:
    """What a scoring's audit record holds of the dashboard file it wrote to ``path``: its
    place in the run's folder and its ``sha256`` (taken as it was written: see
    :class:`~tcbreplay._score.hashed_file.HashedFile`), which ``audit verify`` holds the
    file to."""
    return {"file": f"{DASHBOARD_DIR}/{path.name}", "sha256": sha256}


def _title(run: Run) -> str:
    title = (run.manifest.get("benchmark") or {}).get("title") or "Tool Call Benchmark"
    if not names_a_file(title):
        raise StoreError(
            f"{run.dir / MANIFEST}: benchmark title {title!r} cannot name the dashboard file",
            hint=f"give benchmark.title without '/', NUL or a leading '.', at most "
            f"{MAX_NAME_PART_BYTES} bytes",
        )
    return title


def listed_samples(scores: pl.DataFrame, mode: str) -> np.ndarray:
    """The positions of the samples of ``scores`` the dashboard file lists, ascending:
    ``mismatches`` only those whose names differ from gold or with an invalid or missing
    argument, as the original did; ``all`` every one."""
    listed = scores.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("s"), "tp", "args_invalid", "args_missing"
    )
    if mode == "mismatches":
        listed = listed.filter(
            (pl.col("tp") < 1.0)
            | (pl.col("args_invalid") > 0)
            | (pl.col("args_missing").fill_null(0) > 0)
        )
    return listed["s"].to_numpy()


def input_buffers(inputs: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, ...]:
    """Input texts (nullable) as :func:`samples_text` takes them: offsets, bytes, validity."""
    column = one_array(inputs)
    offsets, data = kernels.text_buffers(column)
    valid = valid_mask(column)
    return offsets, data, np.ones(len(column), np.bool_) if valid is None else valid


def samples_text(
    flat: FlatCalls, listed: np.ndarray, inputs: tuple[np.ndarray, ...],
    rows: np.ndarray | None = None,
) -> bytes:  # fmt: skip
    """The listed samples of a range (positions in ``flat``) as the dashboard file writes
    them, joined by ",\\n\\t"; ``inputs``: :func:`input_buffers` of the inputs, the listed
    samples' at ``rows`` (default: their positions)."""
    if not len(listed):
        return b""
    calls = (*flat.agent.buffers(), *flat.gold.buffers())
    listing = (listed, listed if rows is None else rows, *inputs, *calls)
    text = np.empty(0, dtype=np.uint8)
    size = kernels.functions().dashboard_samples(*listing, text)
    if size < 0:
        text = np.empty(-size, dtype=np.uint8)
        size = kernels.functions().dashboard_samples(*listing, text)
    return text.data[:size].tobytes()


def part_text(
    con: Any, samples: tuple[int, int], flat: FlatCalls, scores: pl.DataFrame, mode: str
) -> tuple[bytes, int]:
    """A range's listed samples as the dashboard file writes them, and how many: the range
    of ``sample_index`` values ``samples`` of ``con``'s run, its calls and scores (in sample
    order)."""
    listed = listed_samples(scores, mode)
    if not len(listed):
        return b"", 0
    bounds = {"lo": samples[0], "hi": samples[1]}
    inputs = con.sql(query_text("score_inputs"), params=bounds).to_arrow_table()["input"]
    return samples_text(flat, listed, input_buffers(inputs)), len(listed)


def head_text(run: Run, summary: dict[str, Any]) -> bytes:
    """What the dashboard file holds before its samples."""
    head = {
        "benchmark_name": _title(run),
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
    }
    # laid out as DuckDB writes a JSON array: a sample per line, each after a tab
    return (json.dumps(head, ensure_ascii=False)[:-1] + ', "samples": [\n\t').encode()


# what the dashboard file holds after its samples
TAIL = b"\n]\n}\n"
# between the texts of two parts
BETWEEN = b",\n\t"


def write_dashboard(
    run: Run,
    scores: pl.DataFrame,
    parts: list[FlatCalls],
    summary: dict[str, Any],
    mode: str,
    path: Path,
) -> str:
    """Write the dashboard file to ``path`` (a temporary name: see :func:`dashboard_path`)
    from a whole run's scores: ``mode`` as :func:`listed_samples`; ``parts``: the run's
    calls, consecutive ranges of samples in the order of ``scores``. Its sha256."""
    listed_s = listed_samples(scores, mode)
    # read with Arrow, whose threads are not the ones Polars writes the scores with meanwhile
    table = pa.concat_tables(
        [read_table(file, columns=["sample_index", "input"]) for file in run.samples_paths]
    )
    indexes = table["sample_index"].to_numpy()
    inputs = input_buffers(table["input"])
    # each listed sample's row of the file (scores are in sample_index order)
    rows = listed_s if np.all(indexes[1:] > indexes[:-1]) else np.argsort(indexes)[listed_s]
    with path.open("wb") as written:
        out = HashedFile(written)
        out.write(head_text(run, summary))
        first = 0
        for part in parts:
            lo, hi = np.searchsorted(listed_s, [first, first + part.samples.height])
            if hi > lo:
                if lo:
                    out.write(BETWEEN)
                out.write(samples_text(part, listed_s[lo:hi] - first, inputs, rows[lo:hi]))
            first += part.samples.height
        out.write(TAIL)
    return out.hexdigest()
