"""The dashboard file's samples: JSON text built by SQL that reads back to what was listed."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay.sql import query_text

# argument texts as scoring has them: canonical JSON (DuckDB's) of any JSON object
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
calls = st.lists(st.tuples(st.text(), st.dictionaries(st.text(), json_values, max_size=3)))


def _canonical(con: duckdb.DuckDBPyConnection, obj: dict) -> str:
    return con.execute("select $t::json::varchar", {"t": json.dumps(obj)}).fetchall()[0][0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text(), calls, calls), max_size=4))
def test_samples_read_back_to_their_input_names_and_arguments(samples):
    con = duckdb.connect()
    columns: dict[str, list] = {"input": [s[0] for s in samples]}
    for side, k in (("agent", 1), ("gold", 2)):
        columns[f"{side}_names"] = [[name for name, _ in s[k]] for s in samples]
        columns[f"{side}_args"] = [[_canonical(con, args) for _, args in s[k]] for s in samples]
    con.register("listed", pa.table(columns))
    lines = [row[0] for row in con.sql(query_text("dashboard_samples")).fetchall()]
    assert len(lines) == len(samples)
    for line, (text, agent, gold) in zip(lines, samples, strict=True):
        doc = json.loads(line)
        assert doc["input"] == text
        for key, side in (("output", agent), ("target", gold)):
            assert doc[key]["tool_call_names"] == [name for name, _ in side]
            assert doc[key]["tool_call_args"] == [args for _, args in side]
