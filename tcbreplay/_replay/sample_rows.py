"""What a replay keeps of a recorded run's samples until they are read: each sample's own tools,
status, error, ``sample_index`` and the system messages its agent sent, read from
``samples.parquet`` (not its messages)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tcbreplay._replay.fingerprint import canonical_messages
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import SAMPLES_SCHEMA, SENT_SYSTEM_KEY, with_optional_columns
from tcbreplay.errors import read_error

# (sample id, trial)
Key = tuple[str, int]


@dataclass(slots=True)
class SampleRow:
    """What is kept of a sample until it is read: its own tools (JSON text), its status, and
    its ``sample_index`` (its messages'; None when it has none)."""

    tools: str | None
    status: str
    index: int | None
    error: tuple[str | None, str | None] = (None, None)  # its error_type and error
    # the system text each answered request began with, where an agent of one's own sent
    # other system messages than the run's prompt (SENT_SYSTEM_KEY); None: the prompt
    systems: list[str] | None = None


def read_rows(run: Run, *, sent_system: bool = False) -> dict[Key, SampleRow]:
    """The run's samples: their own tools, status and sample_index (and, with
    ``sent_system``, the system messages an agent of one's own sent instead of the prompt)."""
    import pyarrow as pa

    from tcbreplay._store.parquet import read_table

    columns = ["sample_id", "trial", "sample_index", "tools", "status", "error_type", "error"]
    columns += ["metadata"] if sent_system else []
    try:
        samples = with_optional_columns(
            read_table(run.samples_path, columns=_present(run.samples_path, columns)),
            SAMPLES_SCHEMA,
        )
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise read_error(run.dir, exc, "its samples") from exc
    rows: dict[Key, SampleRow] = {}
    for row in samples.to_pylist():
        rows[(row["sample_id"], row["trial"])] = SampleRow(
            row.get("tools"),
            row.get("status") or "ok",
            row.get("sample_index"),
            (row.get("error_type"), row.get("error")),
            _sent_systems(row.get("metadata")),
        )
    return rows


def _sent_systems(metadata: str | None) -> list[str] | None:
    """The system text of each answered request a trial's metadata says its agent sent
    (see :data:`SENT_SYSTEM_KEY`); None when it says none (the prompt was sent)."""
    if not metadata or SENT_SYSTEM_KEY not in metadata:
        return None
    sent = json.loads(metadata).get(SENT_SYSTEM_KEY)
    if not isinstance(sent, list) or not sent:
        return None
    return [
        canonical_messages(
            [{"type": "system", "content": c} for c in contents if isinstance(contents, list)]
        )[0]
        for contents in sent
    ]


def _present(path: Any, columns: list[str]) -> list[str]:
    from tcbreplay._store.parquet import read_schema

    names = read_schema(path).names
    return [c for c in columns if c in names]
