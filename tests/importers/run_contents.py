"""What a run in a store holds (message hashes, scores, samples), read back for the export tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from helpers import cli

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
