"""Parquet files as the dialects read them (LangSmith's bulk exports, Langfuse's blob storage
exports): their columns, for a sniff, and their rows, JSON text parsed where a column holds
it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tcbreplay import _json
from tcbreplay._importers.dialect import TraceFile
from tcbreplay.errors import TraceError

MAGIC = b"PAR1"


def columns(file: TraceFile) -> set[str]:
    """The columns of a Parquet file (none, if its footer cannot be read)."""
    import pyarrow.parquet as pq

    try:
        return set(pq.read_schema(_source(file)).names)
    except Exception:  # a sniff: a file pyarrow cannot read has no columns
        return set()


def rows(file: TraceFile, json_columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of a Parquet file: its ``json_columns``' JSON text parsed, maps as dicts and
    times in ISO form."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(_source(file))
        rows = table.to_pylist()
    except Exception as exc:  # any file pyarrow cannot read is bad input
        raise TraceError(f"{file.name}: not a Parquet file pyarrow can read ({exc})") from exc
    maps = {f.name for f in table.schema if pa.types.is_map(f.type)}
    for n, row in enumerate(rows):
        for key, value in row.items():
            if isinstance(value, datetime):
                row[key] = value.isoformat()
            elif key in maps and isinstance(value, list):
                row[key] = dict(value)
            elif key in json_columns and isinstance(value, str):
                try:
                    row[key] = _json.loads(value)
                except json.JSONDecodeError:
                    pass  # text that is not JSON: kept as text
                except _json.LimitError as exc:
                    raise TraceError(
                        f"{file.name}: row {n}: {key}: {exc}", hint=_json.HINT
                    ) from None
    return rows


def _source(file: TraceFile) -> Any:
    import pyarrow as pa

    return str(file.path) if file.path is not None else pa.BufferReader(file.data)
