"""What a run in a store holds (message hashes, scores, samples), read back for the export tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from helpers import cli

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._store.runs import Store

SCORE_COLUMNS = ["sample_id", "trial", "sample_index", "status", "n_gold", "n_agent", "tsa",
                 "tp", "ahr", "args_invalid", "args_total", "args_missing", "pairs"]  # fmt: skip


def message_hashes(root: Path, run_id: str) -> dict[tuple, str]:
    """sha256 of every stored message, by (sample_id, trial, position)."""
    table = pq.read_table(root / run_id / "messages.parquet").to_pylist()
    return {
        (r["sample_id"], r["trial"], r["position"]): hashlib.sha256(
            r["message"].encode()
        ).hexdigest()
        for r in table
    }


def scores(root: Path, run_id: str) -> pl.DataFrame:
    result = cli("score", run_id, "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(root / run_id / "scores" / "spec" / "scores.parquet")
    return frame.select(SCORE_COLUMNS).sort("sample_index")


def samples(root: Path, run_id: str) -> list[dict]:
    rows = pq.read_table(root / run_id / "samples.parquet").to_pylist()
    keep = ("sample_id", "trial", "sample_index", "input", "gold", "category", "status",
            "error", "error_type", "metadata")  # fmt: skip
    return sorted(({k: r[k] for k in keep} for r in rows), key=lambda r: r["sample_index"])


def record_mixed_run(root: Path) -> Path:
    """Record run "rec" into the store at ``root``: 30 samples of the built-in benchmark with
    metadata, two trials each, errors among them."""
    entries = json.loads(BENCHMARKS["tool-call"].dataset.read_text())
    for k, entry in enumerate(entries[:30]):
        entry["metadata"] = {"k": k, "tags": ["a"]}
    dataset = root.parent / "ds.json"
    dataset.write_text(json.dumps(entries[:30]))
    inputs = load_inputs("tool-call", dataset)
    record_run(inputs, parse_model("sim:seed=5,error_rate=0.4,fault_rate=0.3"), Store(root),
               run_id="rec", options=RecordOptions(workers=8, trials=2, retries=0))  # fmt: skip
    return root
