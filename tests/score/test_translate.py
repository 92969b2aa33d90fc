"""``translate.load_calls`` against a plain-Python reading of the same tables: messages out of
order, messages of samples the run does not hold, sample indexes with gaps, and calls or
lists that are empty, null or lack a name or arguments."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcbreplay._score import translate
from tcbreplay._store.schema import SAMPLES_SCHEMA, WRITTEN_MESSAGES_SCHEMA
from tcbreplay._store.views import connect_tables
from tcbreplay.errors import StoreError


def ai(tool_calls: Any, *, drop_key: bool = False) -> str:
    data: dict[str, Any] = {"content": "", "type": "ai", "tool_calls": tool_calls}
    if drop_key:
        del data["tool_calls"]
    return json.dumps({"type": "ai", "data": data})


def human() -> str:
    return json.dumps({"type": "human", "data": {"content": "q", "type": "human"}})


def sample(index: int, gold: Any) -> dict[str, Any]:
    return {
        "run_id": "t", "sample_id": f"s{index}", "sample_index": index, "input": "q",
        "gold": json.dumps(gold), "category": None, "status": "ok", "attempts": 1,
        "n_messages": 0,
    }  # fmt: skip


def message(index: int, position: int, kind: str, text: str) -> dict[str, Any]:
    return {
        "run_id": "t", "sample_id": f"s{index}", "sample_index": index,
        "position": position, "type": kind, "message": text,
    }  # fmt: skip


def canonical(args: Any) -> str | None:
    return None if args is None else json.dumps(args, separators=(",", ":"))


def expected(samples: list[dict[str, Any]], messages: list[dict[str, Any]]):
    """What the calls are, read the obvious way: (s, index, name, args) rows."""
    indexes = sorted(row["sample_index"] for row in samples)
    s_of = {index: s for s, index in enumerate(indexes)}
    gold, agent = [], []
    for row in samples:
        for j, call in enumerate(json.loads(row["gold"])):
            gold.append((s_of[row["sample_index"]], j, call["name"], canonical(call.get("args"))))
    counter: dict[int, int] = {}
    for row in sorted(messages, key=lambda r: (r["sample_index"], r["position"])):
        if row["type"] != "ai" or row["sample_index"] not in s_of:
            continue
        s = s_of[row["sample_index"]]
        for call in json.loads(row["message"])["data"].get("tool_calls") or []:
            call = call or {}
            i = counter.get(s, 0)
            counter[s] = i + 1
            agent.append((s, i, call.get("name") or "", canonical(call.get("args")) or "{}"))
    return sorted(gold), agent


def loaded(samples: list[dict[str, Any]], messages: list[dict[str, Any]]):
    con = connect_tables(
        pa.Table.from_pylist(samples, schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist(messages, schema=WRITTEN_MESSAGES_SCHEMA),
    )
    try:
        tables = translate.load_calls(con)
    finally:
        con.close()
    gold = [
        (s, j, n, None if a == "{}" else json.dumps(json.loads(a), separators=(",", ":")))
        for s, j, n, a in tables.gold.select("s", "j", "name", "args").iter_rows()
    ]
    agent = [
        (s, i, n, json.dumps(json.loads(a), separators=(",", ":")))
        for s, i, n, a in tables.agent.select("s", "i", "name", "args").iter_rows()
    ]
    return tables, sorted(gold), agent


def edge_case_run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    samples = [
        sample(20, [{"name": "add", "args": {"a": 1}}, {"name": "mul"}]),
        sample(5, []),
        sample(9, [{"name": "add", "args": {"a": 2.5, "b": [1, {"c": None}]}}]),
    ]
    messages = [
        message(20, 2, "ai", ai([{"name": "mul", "args": {}}, None])),
        message(9, 0, "human", human()),
        message(20, 1, "ai", ai([{"name": "add", "args": {"a": 1}}, {"args": {"x": "y"}}])),
        message(5, 1, "ai", ai([])),
        message(5, 2, "ai", ai(None)),
        message(5, 3, "ai", ai(None, drop_key=True)),
        message(7, 1, "ai", ai([{"name": "ghost", "args": {}}])),  # no such sample
        message(9, 1, "ai", ai([{"name": "add"}, {"name": "add", "args": {"b": "x"}}])),
        message(20, 0, "human", human()),
    ]
    return samples, messages


def test_edge_cases_read_as_plain_python_reads_them():
    samples, messages = edge_case_run()
    tables, gold, agent = loaded(samples, messages)
    want_gold, want_agent = expected(samples, messages)
    assert gold == want_gold
    assert agent == want_agent
    assert tables.samples["sample_index"].to_list() == [5, 9, 20]
    # the call without a name reads as '', the ones without arguments as {}
    assert (2, 1, "", '{"x":"y"}') in agent
    assert (1, 0, "add", "{}") in agent
    assert "ghost" not in tables.agent["name"].to_list()


@pytest.mark.parametrize("seed", range(5))
def test_row_order_of_the_files_does_not_matter(seed):
    rng = random.Random(seed)
    samples, messages = edge_case_run()
    rng.shuffle(samples)
    rng.shuffle(messages)
    _, gold, agent = loaded(samples, messages)
    assert (gold, agent) == expected(samples, messages)


def test_dense_indexes_and_a_message_past_the_last_sample():
    samples = [sample(k, [{"name": "f", "args": {"k": k}}]) for k in range(3)]
    messages = [message(k, 1, "ai", ai([{"name": "f", "args": {"k": k}}])) for k in range(4)]
    tables, gold, agent = loaded(samples, messages)
    assert agent == [(k, 0, "f", json.dumps({"k": k}, separators=(",", ":"))) for k in range(3)]
    assert (gold, agent) == expected(samples, messages)
    assert tables.agent["s"].dtype == tables.gold["s"].dtype


@pytest.mark.parametrize("column", ["sample_index", "sample_id"])
def test_a_sample_without_sample_index_or_id_is_a_clear_error(column):

    rows = [sample(0, []), {**sample(1, []), column: None}, {**sample(2, []), column: None}]
    con = connect_tables(
        pa.Table.from_pylist(rows, schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist([], schema=WRITTEN_MESSAGES_SCHEMA),
    )
    try:
        with pytest.raises(StoreError, match=f"^samples.parquet: 2 samples have no {column}$"):
            translate.split_samples(con, 2)
    finally:
        con.close()


@pytest.mark.parametrize(
    ("indexes", "parts", "expected"),
    [
        ([], 2, [translate.ALL_SAMPLES]),
        ([4], 3, [(4, 5)]),
        (list(range(10)), 2, [(0, 5), (5, 10)]),
        ([0, 1, 2, 100], 3, [(0, 33), (33, 67), (67, 101)]),
    ],
)
def test_samples_are_cut_into_ranges_that_cover_them(indexes, parts, expected):
    con = connect_tables(
        pa.Table.from_pylist([sample(k, []) for k in indexes], schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist([], schema=WRITTEN_MESSAGES_SCHEMA),
    )
    try:
        assert translate.split_samples(con, parts) == expected
    finally:
        con.close()


def test_consecutive_indexes_not_from_zero_with_messages_either_side():
    samples = [sample(k, [{"name": "f", "args": {"k": k}}]) for k in (3, 4, 5)]
    messages = [message(k, 1, "ai", ai([{"name": "f", "args": {"k": k}}])) for k in (1, 3, 5, 7)]
    _, gold, agent = loaded(samples, messages)
    assert [row[:2] for row in agent] == [(0, 0), (2, 0)]
    assert (gold, agent) == expected(samples, messages)


def test_a_gold_call_without_a_name_is_a_clear_error():

    with pytest.raises(StoreError, match="sample 's1' has a gold call without a name"):
        loaded([sample(0, []), sample(1, [{"args": {"a": 1}}])], [])


def test_a_message_without_a_position_comes_first_in_its_sample():
    samples = [sample(0, [])]
    messages = [
        message(0, 1, "ai", ai([{"name": "f", "args": {}}])),
        {**message(0, 0, "ai", ai([{"name": "g", "args": {}}])), "position": None},
    ]
    _, _, agent = loaded(samples, messages)
    assert [name for _, _, name, _ in agent] == ["g", "f"]


def test_both_scorers_refuse_samples_without_sample_index():
    from tcbreplay._score.options import ScoreOptions
    from tcbreplay._score.run import score_tables

    rows = [sample(0, []), {**sample(1, []), "sample_index": None}]
    samples = pa.Table.from_pylist(rows, schema=SAMPLES_SCHEMA)
    messages = pa.Table.from_pylist([], schema=WRITTEN_MESSAGES_SCHEMA)
    for scorer in ("spec", "abet"):
        with pytest.raises(StoreError, match="have no sample_index"):
            score_tables(samples, messages, [], ScoreOptions(scorer=scorer))


@pytest.mark.parametrize("text", ["[null]", "[5]", '["s"]', "[[1]]", '[{"name": null}]', "[{}]"])
def test_a_gold_call_that_is_no_named_object_is_a_clear_error(text):
    with pytest.raises(StoreError, match="sample 's1' has a gold call without a name"):
        loaded([sample(0, []), {**sample(1, []), "gold": text}], [])


# -- the agent's calls split from DuckDB's JSON text, against json_transform's reading ----------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
# names as tools are named, and as no tool is: quotes, escapes, control characters, unicode
_NAMES = st.sampled_from(["add", "get_weather", "", 'a"b', "a\\b", "tab\there", "é", "😀", "\x01"])
_NAMES = _NAMES | st.text(max_size=6) | _VALUES
_KEYS = st.sampled_from(["name", "args", "id", "type", "Name", "ARGS", "x"])


@st.composite
def _call_text(draw: Any) -> str:
    """One element of a tool_calls list, as JSON text: mostly an object whose members may
    repeat a key, sometimes any other value."""
    if draw(st.integers(0, 9)) == 0:
        return json.dumps(draw(_VALUES))
    members = draw(st.lists(st.tuples(_KEYS, st.booleans()), max_size=5))
    ascii_only = draw(st.booleans())
    parts = []
    for key, odd in members:
        if key == "name" and not odd:
            value = draw(_NAMES)
        elif key == "args" and not odd:
            value = draw(st.dictionaries(st.text(max_size=4), _VALUES, max_size=4))
        else:
            value = draw(_VALUES)
        parts.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=ascii_only)}")
    return "{" + ", ".join(parts) + "}"


@st.composite
def _tool_calls_text(draw: Any) -> str | None:
    """A message's tool_calls as JSON text (None: the key left out)."""
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return None
    if shape == 1:
        return json.dumps(draw(_VALUES))  # no list: no calls
    return "[" + ", ".join(draw(st.lists(_call_text(), max_size=4))) + "]"


def _ai_text(tool_calls: str | None) -> str:
    calls = "" if tool_calls is None else f', "tool_calls": {tool_calls}'
    return '{"type": "ai", "data": {"content": "x"' + calls + ', "id": "m"}}'


# the straightforward reading: DuckDB's json_transform of every message, the calls unnested
_TRANSFORMED = """
select json_transform(
    message, '{"data": {"tool_calls": [{"name": "VARCHAR", "args": "JSON"}]}}'
).data.tool_calls as calls
from messages
where type = 'ai'
order by sample_index, position
"""


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_tool_calls_text(), min_size=1, max_size=6))
def test_agent_calls_read_as_json_transform_reads_them(lists):
    samples = [sample(0, []), sample(1, [])]
    messages = [message(k % 2, k, "ai", _ai_text(text)) for k, text in enumerate(lists)]
    con = connect_tables(
        pa.Table.from_pylist(samples, schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist(messages, schema=WRITTEN_MESSAGES_SCHEMA),
    )
    try:
        flat = translate.load_flat(con)
        want = [
            ("" if call is None or call["name"] is None else call["name"],
             "{}" if call is None or call["args"] is None else call["args"])
            for (calls,) in con.sql(_TRANSFORMED).fetchall()
            for call in calls or []
        ]  # fmt: skip
    finally:
        con.close()
    got = list(zip(flat.agent.name.to_pylist(), flat.agent.args.to_pylist(), strict=True))
    assert got == want  # both in sample order, then message position
    assert flat.agent.s.tolist() == sorted(flat.agent.s.tolist())


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=40),
    st.lists(st.integers(min_value=-3, max_value=45), max_size=120),
)
def test_each_samples_first_row_is_where_a_binary_search_puts_it(n, rows):
    s = np.array(sorted(rows), dtype=np.int64)
    assert translate._firsts(s, n).tolist() == np.searchsorted(s, np.arange(n + 1)).tolist()
