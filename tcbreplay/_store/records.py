"""A finished trial as the journal holds it (:func:`sample_record`), and the rows of the
run's Parquet files made of such records (:func:`sample_rows`, :func:`message_rows`,
:func:`divergence_rows`). Every writer of a run (recording, importing, replaying) builds its
records here.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any, Protocol

from tcbreplay._secrets import redact
from tcbreplay._store.schema import STATUSES


class SampleLike(Protocol):
    """What a sample row needs of a dataset sample (read only)."""

    def gold_calls(self) -> list[dict[str, Any]]: ...  # as stored, with their rules

    def tool_schemas(self) -> list[dict[str, Any]] | None: ...  # its own tools, or None

    @property
    def sample_id(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def input(self) -> str: ...
    @property
    def category(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any] | None: ...


def sample_record(
    run_id: str,
    sample: SampleLike,
    *,
    status: str,
    messages: list[dict[str, Any]],
    attempts: int,
    started_at: str,
    finished_at: str,
    duration_s: float | None = None,
    error_type: str | None = None,
    error: str | None = None,
    trial: int = 0,
    sample_index: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One finished trial of a sample as the journal holds it (folded into both Parquet
    files): the dataset sample, how it ended, and its messages (``message`` JSON text,
    ``type``, token counts and latency each). ``sample_index``: the row's number
    (:func:`~tcbreplay._store.schema.row_index`; by default the entry's position);
    ``metadata``: the trial's own, over the entry's."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r}: not one of {', '.join(STATUSES)}")
    merged = {**(sample.metadata or {}), **(metadata or {})}
    return {
        "run_id": run_id,
        "sample_id": sample.sample_id,
        "trial": trial,
        "sample_index": sample.index if sample_index is None else sample_index,
        "input": sample.input,
        "gold": sample.gold_calls(),
        "tools": sample.tool_schemas(),
        "category": sample.category,
        "metadata": merged or None,
        "status": status,
        "attempts": attempts,
        "error_type": error_type,
        "error": None if error is None else redact(error),  # (said again as the docs say)
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_s": duration_s,
        "messages": messages,
    }


def sample_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``samples.parquet`` from journal records."""
    rows = []
    for r in records:
        msgs = r.get("messages", [])
        rows.append(
            {
                "run_id": r["run_id"],
                "sample_id": r["sample_id"],
                "trial": r.get("trial", 0),
                "sample_index": r["sample_index"],
                "input": r["input"],
                "gold": json.dumps(r["gold"], ensure_ascii=False),
                "tools": _json_or_null(r.get("tools")),
                "category": r.get("category"),
                "metadata": metadata_text(r.get("metadata")),
                "status": r["status"],
                "attempts": r.get("attempts", 0),
                "error_type": r.get("error_type"),
                "error": r.get("error"),
                "started_at": _ts(r.get("started_at")),
                "finished_at": _ts(r.get("finished_at")),
                "duration_s": r.get("duration_s"),
                "n_messages": len(msgs),
                "input_tokens": _sum(m.get("input_tokens") for m in msgs),
                "output_tokens": _sum(m.get("output_tokens") for m in msgs),
            }
        )
    return rows


def message_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``messages.parquet`` from journal records."""
    rows = []
    for r in records:
        for position, m in enumerate(r.get("messages", [])):
            rows.append(
                {
                    "run_id": r["run_id"],
                    "sample_id": r["sample_id"],
                    "trial": r.get("trial", 0),
                    "sample_index": r["sample_index"],
                    "position": position,
                    "type": m["type"],
                    "message": m["message"],
                    "input_tokens": m.get("input_tokens"),
                    "output_tokens": m.get("output_tokens"),
                    "total_tokens": m.get("total_tokens"),
                    "latency_s": m.get("latency_s"),
                }
            )
    return rows


def divergence_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of ``divergences.parquet`` from journal records (a replay's carry
    ``divergences``)."""
    rows = []
    for r in records:
        for d in r.get("divergences") or []:
            rows.append(
                {
                    "run_id": r["run_id"],
                    "sample_id": r["sample_id"],
                    "trial": r.get("trial", 0),
                    "sample_index": r["sample_index"],
                    **{key: d.get(key) for key in ("turn", "component", "path", "recorded",
                                                   "replayed")},
                }
            )  # fmt: skip
    return rows


def _json_or_null(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def metadata_text(metadata: dict[str, Any] | None) -> str | None:
    """A sample's metadata as stored: JSON text of the object, null when it has none."""
    return json.dumps(metadata, ensure_ascii=False) if metadata else None


def _ts(value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromisoformat(value)


def _sum(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None
