"""The tools' parameters as scoring reads them: the run's tools (:func:`tools_table`) and
those of the samples that have their own (:func:`sample_tool_sets`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import _json
from tcbreplay._score.metrics import free_form_tools, tool_properties
from tcbreplay.errors import StoreError


@dataclass
class Tools:
    """The run's tools as scoring needs them: names, and each tool's parameters with their
    names escaped and defaults written as DuckDB writes JSON (so bytes compare as values)."""

    names: list[str]
    # per tool: (escaped parameter name, canonical default text or None)
    params: list[list[tuple[bytes, bytes | None]]]
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the tools that take free-form arguments, and their schema (see free_form_tools): the
    # kernel knows their declared parameters only, so their pairs are judged in Python
    free_form: dict[str, dict[str, Any]] = field(default_factory=dict)

    def integers(self) -> list[list[bool]]:
        """Per tool and parameter (as ``params``): the schema says ``"type": "integer"``."""
        return [
            [_integer(self.properties[name].get(key.decode())) for key, _ in rows]
            if name in self.properties
            else [False] * len(rows)
            for name, rows in zip(self.names, self.params, strict=True)
        ]


def _tool_shaped(tool: Any) -> bool:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return False
    params = tool.get("parameters")
    return params is None or (
        isinstance(params, dict) and isinstance(params.get("properties"), dict | None)
    )


def _integer(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "integer"


@dataclass
class SampleTools:
    """The tools of the samples of a range that have their own: ``set`` gives each sample's
    tool set (-1: the run's tools), ``sets`` the tools of each."""

    set: np.ndarray  # int32 per sample
    sets: list[Tools]


def sample_tool_sets(
    con: duckdb.DuckDBPyConnection, texts: pa.Array, sample_ids: pl.Series
) -> SampleTools:
    """Each distinct tool list of the samples (JSON text per sample, null: the run's tools)
    as :class:`Tools`."""
    import pyarrow.compute as pc  # here: see tcbreplay._score.texts

    codes = (
        pc.dictionary_encode(texts).combine_chunks()
        if isinstance(texts, pa.ChunkedArray)
        else pc.dictionary_encode(texts)
    )
    indices = pc.fill_null(codes.indices, -1).to_numpy(zero_copy_only=False)
    sets = []
    for k, text in enumerate(codes.dictionary.to_pylist()):
        where = f"samples.parquet: sample {sample_ids[int(np.argmax(indices == k))]!r}: "
        try:
            schemas = _json.loads(text)
        except ValueError as exc:
            raise StoreError(f"{where}its tools are not JSON Python reads: {exc}") from None
        if not isinstance(schemas, list) or not all(_tool_shaped(t) for t in schemas):
            raise StoreError(
                f"{where}its tools are not a list of tool schemas, each with a name and its "
                "parameters' properties as an object"
            )
        sets.append(tools_table(con, schemas))
    return SampleTools(set=indices.astype(np.int32), sets=sets)


def tools_table(con: duckdb.DuckDBPyConnection, schemas: list[dict[str, Any]]) -> Tools:
    """:class:`Tools` of tool schemas (see :func:`tcbreplay._score.metrics.tool_properties`
    for a name declared twice)."""
    properties = tool_properties(schemas)
    rows = [
        (t, key, json.dumps(schema["default"]) if _has_default(schema) else None)
        for t, props in enumerate(properties.values())
        for key, schema in props.items()
    ]
    texts: list[tuple[Any, ...]] = []
    if rows:
        # typed as Arrow would infer them: inferring loads dateutil (3 ms) to look for its
        # relativedelta
        frame = pa.table(
            {
                "t": pa.array([r[0] for r in rows], pa.int64()),
                "k": pa.array([r[1] for r in rows], pa.string()),
                "d": pa.array([r[2] for r in rows], pa.string()),
            }
        )
        cur = con.cursor()
        try:
            cur.register("_params", frame)
            texts = cur.sql(
                "select t, to_json(k)::varchar, json(d)::varchar from _params"
            ).fetchall()
        finally:
            cur.close()
    params: list[list[tuple[bytes, bytes | None]]] = [[] for _ in properties]
    for t, key, default in texts:
        params[t].append((key.encode()[1:-1], None if default is None else default.encode()))
    return Tools(names=list(properties), params=params, properties=properties,
                 free_form=free_form_tools(schemas))  # fmt: skip


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema
