"""Proof that a replay served its parent's turns: each turn a replay's sample says it was
served (``metadata.replay.served``: the turn and the position of the parent's message) is,
as stored, the parent's stored message (but for its id, see :func:`_without_id`); and a
replay without a fork rule made no live call. The replay block's totals are
checked against its samples' too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from tcbreplay._store.parquet import read_schema, read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import MESSAGES_SCHEMA, SAMPLES_SCHEMA, with_optional_columns
from tcbreplay.errors import RunNotFoundError, StoreError, first_line

# (the check's field, the parent's value, the replay's value) and the sample it is of
Found = tuple[str | None, str, Any, Any]
# the totals of the replay block recomputed from the samples
_TOTALS = ("turns_served", "live_calls", "diverged_samples")


def verify_replay(store: Store, run: Run) -> tuple[int, list[Found]]:
    """The turns checked, and every difference: (sample label or None, field, the parent's
    value, the replay's)."""
    block = run.manifest.get("replay") or {}
    parent_id = str(block.get("parent_run_id") or "")
    try:
        parent = store.open_run(parent_id)
    except RunNotFoundError:
        return 0, [(None, "parent_run_id", parent_id, "not in the store")]
    found: list[Found] = []
    theirs = _messages(parent)
    mine = _messages(run)
    checked = 0
    totals = dict.fromkeys(_TOTALS, 0)
    for sample_id, trial, replay in _replays(run):
        label = sample_id if not trial else f"{sample_id} (trial {trial})"
        served = replay.get("served") or []
        totals["turns_served"] += len(served)
        totals["live_calls"] += int(replay.get("live_calls") or 0)
        totals["diverged_samples"] += replay.get("diverged_at") is not None
        ai = [m for m in mine.get((sample_id, trial), []) if m.get("type") == "ai"]
        # a server's log numbers a sample's conversations itself: each names its recorded trial
        parent_messages = theirs.get((sample_id, replay.get("parent_trial", trial)), [])
        for turn, position in served:
            checked += 1
            stored = ai[turn] if turn < len(ai) else None
            recorded = parent_messages[position] if position < len(parent_messages) else None
            if stored is None or _without_id(stored) != _without_id(recorded):
                found.append((label, f"served turn {turn}", recorded, stored))
    for key, value in totals.items():
        if block.get(key) != value:
            found.append((None, f"replay.{key}", value, block.get(key)))
    if not block.get("fork") and totals["live_calls"]:
        found.append((None, "live_calls", 0, totals["live_calls"]))
    return checked, found


def _without_id(message: Any) -> Any:
    """A stored message without its id: a served message keeps its recorded id, but one that
    had none is given one by LangChain, and one that repeats an earlier message's gets its
    own (:mod:`tcbreplay._replay.model`)."""
    data = message.get("data") if isinstance(message, dict) else None
    if not isinstance(data, dict):
        return message
    return {**message, "data": {k: v for k, v in data.items() if k != "id"}}


def _replays(run: Run) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Each sample's id, trial and replay record (its metadata's ``replay``)."""
    table = _read(run.samples_path, SAMPLES_SCHEMA, ["sample_id", "trial", "metadata"])
    for row in table.to_pylist():
        metadata = json.loads(row["metadata"]) if row["metadata"] else {}
        yield row["sample_id"], row["trial"], metadata.get("replay") or {}


def _messages(run: Run) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each sample's stored messages, parsed, by position."""
    table = _read(run.messages_path, MESSAGES_SCHEMA, ["sample_id", "trial", "position", "message"])
    table = table.sort_by([("sample_id", "ascending"), ("trial", "ascending"),
                           ("position", "ascending")])  # fmt: skip
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for sid, trial, text in zip(
        table["sample_id"].to_pylist(), table["trial"].to_pylist(),
        table["message"].to_pylist(), strict=True,
    ):  # fmt: skip
        out.setdefault((sid, trial), []).append(json.loads(text))
    return out


def _read(path: Any, schema: pa.Schema, columns: list[str]) -> pa.Table:
    try:
        names = read_schema(path).names
        table = read_table(path, columns=[c for c in columns if c in names])
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise StoreError(f"{path}: not a readable Parquet file ({first_line(exc)})") from exc
    return with_optional_columns(table, schema)
