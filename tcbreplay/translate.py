"""Raw messages to tool-call rows, by the SQL in ``queries/`` over the store's views.

Nothing here imports LangChain: the serialized messages are read as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from tcbreplay.sql import query_text


def tool_params_table(specs: Iterable[dict[str, Any]]) -> pa.Table:
    """One row per (tool, parameter) with its declared default as JSON, from manifest specs."""
    rows = []
    for spec in specs:
        props = (spec.get("parameters") or {}).get("properties") or {}
        for param, schema in props.items():
            has_default = isinstance(schema, dict) and "default" in schema
            rows.append(
                {
                    "name": spec["name"],
                    "param": param,
                    "has_default": has_default,
                    "default_value": json.dumps(schema["default"]) if has_default else None,
                }
            )
    schema = pa.schema(
        [
            ("name", pa.string()),
            ("param", pa.string()),
            ("has_default", pa.bool_()),
            ("default_value", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def bind_tool_params(con: duckdb.DuckDBPyConnection, specs: Iterable[dict[str, Any]]) -> None:
    """Make ``tool_params`` (name, param, has_default, default_value JSON) visible to SQL."""
    con.register("_tool_params", tool_params_table(specs))
    con.execute(
        "create or replace temp view tool_params as "
        "select name, param, has_default, default_value::json as default_value from _tool_params"
    )


def agent_calls(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every agent tool call: sample_id, call_index, name, args (JSON text), position."""
    return con.sql(
        "select sample_id, call_index, name, args::varchar as args, position "
        "from tool_calls order by sample_id, call_index"
    ).pl()


def gold_calls(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every gold call: sample_id, call_index, name, args (JSON text)."""
    return con.sql(
        "select sample_id, call_index, name, args::varchar as args "
        "from gold_calls order by sample_id, call_index"
    ).pl()


def arg_checks(con: duckdb.DuckDBPyConnection, rel_tol: float, abs_tol: float) -> pl.DataFrame:
    """Candidate AHR pairs with one row per agent argument (see ``queries/arg_checks.sql``)."""
    params = {"rel_tol": rel_tol, "abs_tol": abs_tol}
    return con.sql(query_text("arg_checks"), params=params).pl()
