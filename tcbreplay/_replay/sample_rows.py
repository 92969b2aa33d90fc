"""What a replay keeps of a recorded run's samples until they are read: each sample's own tools,
status, error, ``sample_index``, and the system messages its agent sent, the answer formats its
calls asked for and the tools they were sent, read from ``samples.parquet`` (not its
messages)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tcbreplay._record.formats import format_as_sent
from tcbreplay._replay.fingerprint import canonical_messages, canonical_tools, normalized
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import (
    ASKED_FORMAT_KEY,
    SAMPLES_SCHEMA,
    SENT_SYSTEM_KEY,
    SENT_TOOLS_KEY,
    with_optional_columns,
)
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
    # the answer format each answered request asked for (its ``response_format``, None where
    # none), where an agent of one's own asked any (ASKED_FORMAT_KEY); None: none asked
    formats: list[Any] | None = None
    # the tools each answered request was sent (None where the sample's), where an agent of
    # one's own sent any other (SENT_TOOLS_KEY); None: the sample's, at every request
    sent_tools: list[Any] | None = None

    def tools_at(self, tools: dict[str, Any], turn: int) -> dict[str, Any]:
        """The tools of its request of ``turn`` (canonical): ``tools`` (the sample's) itself,
        or those that request was sent instead (by name among ``tools``, or as a schema)."""
        sent = self.sent_tools[turn] if self.sent_tools and turn < len(self.sent_tools) else None
        if not isinstance(sent, list):
            return tools
        named = {str(n): tools.get(n, {"unrecorded": True}) for n in sent if isinstance(n, str)}
        return {**named, **canonical_tools([s for s in sent if isinstance(s, dict)])}

    def params(self, params: dict[str, Any], turn: int) -> dict[str, Any]:
        """The sampling settings of its request of ``turn``: the run's ``params``, with the
        answer format that request asked for."""
        asked = self.formats[turn] if self.formats and turn < len(self.formats) else None
        return params if asked is None else {**params, "response_format": asked}


def read_rows(run: Run, *, sent_system: bool = False, provider: str = "") -> dict[Key, SampleRow]:
    """The run's samples: their own tools, status and sample_index (and, with
    ``sent_system``, the system messages an agent of one's own sent instead of the prompt,
    the answer formats its calls asked for, as its model of ``provider`` sent them, and the
    tools they were sent instead of the sample's)."""
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
        metadata = row.get("metadata")
        kept = json.loads(metadata) if metadata and "tcbreplay_" in metadata else {}
        rows[(row["sample_id"], row["trial"])] = SampleRow(
            row.get("tools"),
            row.get("status") or "ok",
            row.get("sample_index"),
            (row.get("error_type"), row.get("error")),
            _sent_systems(kept),
            _asked_formats(kept, provider),
            _sent_tools(kept),
        )
    return rows


def _asked_formats(kept: Any, provider: str) -> list[Any] | None:
    """The answer format each answered request asked for, as a trial's metadata keeps them
    (see :data:`ASKED_FORMAT_KEY`), in the form the model of ``provider`` sent it; None when
    it keeps none (none was asked)."""
    asked = kept.get(ASKED_FORMAT_KEY) if isinstance(kept, dict) else None
    if not isinstance(asked, list) or not asked:
        return None
    return [normalized(format_as_sent(f, provider)) for f in asked]


def _sent_tools(kept: Any) -> list[Any] | None:
    """The tools each answered request was sent, as a trial's metadata keeps them (see
    :data:`SENT_TOOLS_KEY`); None when it keeps none (each was sent the sample's)."""
    sent = kept.get(SENT_TOOLS_KEY) if isinstance(kept, dict) else None
    return sent if isinstance(sent, list) and sent else None


def _sent_systems(kept: Any) -> list[str] | None:
    """The system text of each answered request a trial's metadata says its agent sent
    (see :data:`SENT_SYSTEM_KEY`); None when it says none (the prompt was sent)."""
    sent = kept.get(SENT_SYSTEM_KEY) if isinstance(kept, dict) else None
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
