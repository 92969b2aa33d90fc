"""Small runs written straight into a store (ALPHA, BETA), for the SQL tests."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from helpers import TEST_DATA

from tcbreplay._store.runs import Store
from traces import ai_message, gold_call, human_message

SHOP_SPECS = json.loads((TEST_DATA / "tools_shop.json").read_text())


ALPHA = [
    {
        "sample_id": "s0",
        "gold": [("list_items", {}), ("add_numbers", {"a": 2, "b": 1})],
        "turns": [
            [("list_items", {})],
            [("add_numbers", {"a": 2, "b": 1}), ("multiply_numbers", {"a": 1, "b": 1})],
        ],
    },
    {"sample_id": "s1", "gold": [], "turns": []},
]


BETA = [
    {
        "sample_id": "s0",
        "gold": [("add_numbers", {"a": 1, "b": 2})],
        "turns": [[("add_numbers", {"a": 1, "b": 3})]],
    },
]


# runs made so far by this process, by make_run's arguments: most tests here start from the
# same two runs (ALPHA, BETA), which took a tenth of a second each to write (DuckDB
# connected anew to derive the messages' calls) and a few milliseconds to copy
_MADE: dict[str, Path] = {}
_MADE_IN = tempfile.TemporaryDirectory(prefix="sql-runs-")


def make_run(store: Store, run_id: str, cases: list[dict], status: str = "complete") -> None:
    """A run written through the store's own writer, with messages serialized by hand (the
    first time; the same arguments again copy the folder it wrote, files as written)."""
    key = json.dumps([run_id, cases, status], sort_keys=True, default=repr)
    made = _MADE.get(key)
    if made is None:
        made = Path(_MADE_IN.name) / str(len(_MADE)) / "traces"
        _write_run(Store(made), run_id, cases, status)
        _MADE[key] = made
    shutil.copytree(made / run_id, Path(store.root) / run_id, copy_function=shutil.copy)


def _write_run(store: Store, run_id: str, cases: list[dict], status: str) -> None:
    entries = [
        {"id": c["sample_id"], "input": f"q {c['sample_id']}",
         "target": [{"name": g[0], "args": g[1]} for g in c["gold"]]}
        for c in cases
    ]  # fmt: skip
    writer = store.create_run(
        {
            "run_id": run_id,
            "created_at": "2024-01-01T00:00:00+00:00",
            "benchmark": {"name": "custom", "title": "Tool Call Benchmark"},
            "dataset": {"source": "mem", "sha256": None, "n_entries": len(entries)},
            "tools": {"source": "tools_shop.json", "sha256": None, "specs": SHOP_SPECS},
            "model": {"id": "hand", "provider": "test", "name": "hand", "simulated": False},
        }
    )
    for index, case in enumerate(cases):
        sid = case["sample_id"]
        messages = [{"type": "human", "message": human_message(f"q {sid}")}]
        for k, turn in enumerate(case["turns"], start=1):
            messages.append({"type": "ai", "message": ai_message(turn, msg_id=f"{sid}-{k}")})
        writer.append(
            {
                "run_id": run_id,
                "sample_id": sid,
                "sample_index": index,
                "input": f"q {sid}",
                "gold": [gold_call(*c) for c in case["gold"]],
                "tools": case.get("tools"),
                "category": None,
                "status": "ok",
                "attempts": 1,
                "started_at": "2024-01-01T00:00:00+00:00",
                "finished_at": "2024-01-01T00:00:01+00:00",
                "messages": messages,
            }
        )
    writer.fold()
    writer.update_manifest(status=status, totals={"recorded": len(cases), "ok": len(cases)})
    writer.close()
