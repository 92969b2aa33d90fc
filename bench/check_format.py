"""Check that generated messages are exactly what recording would have stored.

Each stored message is loaded into a LangChain message with ``messages_from_dict``, then
serialized again the way ``tcbreplay._record.runner`` does (``json.dumps(message_to_dict(m),
ensure_ascii=False)``); the text must come back byte for byte. The store's schemas, the
``type`` column and the samples' message counts are checked too, and ``dataset.jsonl``
is read back the way ``record --resume`` reads it. Imports LangChain, so
it runs in its own process, never in the timed ones.

    python -m bench.check_format RUN_DIR [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tcbreplay._store.manifest import read_manifest
from tcbreplay._store.schema import DATASET, MESSAGES_SCHEMA, SAMPLES_SCHEMA


def check_run(run_dir: str | Path, limit: int | None = None) -> dict[str, Any]:
    """Round-trip the first ``limit`` messages (all by default); return counts and examples."""
    from langchain_core.messages import message_to_dict, messages_from_dict

    run_dir = Path(run_dir)
    problems: list[str] = []
    messages = pq.ParquetFile(run_dir / "messages.parquet")
    samples = pq.ParquetFile(run_dir / "samples.parquet")
    if not messages.schema_arrow.equals(MESSAGES_SCHEMA):
        problems.append(f"messages.parquet schema differs: {messages.schema_arrow}")
    if not samples.schema_arrow.equals(SAMPLES_SCHEMA):
        problems.append(f"samples.parquet schema differs: {samples.schema_arrow}")
    checked = 0
    kinds: dict[str, int] = {}
    per_sample: dict[str, int] = {}
    for batch in messages.iter_batches(batch_size=10_000, columns=["sample_id", "type", "message"]):
        for sid, kind, text in zip(*batch.to_pydict().values(), strict=True):
            if limit is not None and checked >= limit:
                break
            loaded = messages_from_dict([json.loads(text)])[0]
            again = json.dumps(message_to_dict(loaded), ensure_ascii=False, default=str)
            if again != text and len(problems) < 5:
                problems.append(f"{sid}: round trip differs:\n  stored {text}\n  again  {again}")
            if loaded.type != kind and len(problems) < 5:
                problems.append(f"{sid}: type column {kind!r}, message type {loaded.type!r}")
            kinds[kind] = kinds.get(kind, 0) + 1
            per_sample[sid] = per_sample.get(sid, 0) + 1
            checked += 1
    if limit is None:
        problems += _check_dataset(run_dir, samples.metadata.num_rows)
        table = samples.read(columns=["sample_id", "n_messages"]).to_pydict()
        for sid, n in zip(table["sample_id"], table["n_messages"], strict=True):
            if per_sample.get(sid, 0) != n and len(problems) < 10:
                problems.append(f"{sid}: n_messages {n}, stored {per_sample.get(sid, 0)}")
    return {"checked": checked, "types": kinds, "ok": not problems, "problems": problems}


def _check_dataset(run_dir: Path, n_samples: int) -> list[str]:
    """The manifest and ``dataset.jsonl`` as the store's readers see them."""
    from tcbreplay._inputs.benchmarks import read_dataset_file
    from tcbreplay._inputs.dataset import dataset_from_entries

    manifest = read_manifest(run_dir)
    path = run_dir / manifest["dataset"].get("file", DATASET)
    entries = read_dataset_file(path)
    dataset_from_entries(entries, str(path))  # raises on an invalid entry
    problems = []
    if not (len(entries) == manifest["dataset"].get("n_entries") == n_samples):
        problems.append(
            f"{path.name}: {len(entries)} entries, manifest says "
            f"{manifest['dataset'].get('n_entries')}, samples.parquet has {n_samples}"
        )
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if json.dumps(json.loads(line), ensure_ascii=False) + "\n" != line:
                problems.append(f"{path.name}: line {number} is not laid out as json.dumps")
                break
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.check_format")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--limit", type=int)
    args = parser.parse_args(argv)
    result = check_run(args.run_dir, args.limit)
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
