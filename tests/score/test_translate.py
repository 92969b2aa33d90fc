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

from tcbreplay._score import flat_calls, translate
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
    assert flat_calls.first_rows(s, n).tolist() == np.searchsorted(s, np.arange(n + 1)).tolist()


# -- the gold calls read by the kernels (gold.pxi), against json_transform's reading ---------

# the straightforward reading: DuckDB's json_transform of every gold list, the calls unnested
_GOLD_TRANSFORMED = """
select json_transform(gold, '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON",
    "optional": "JSON", "group": "JSON", "compare": "JSON", "side": "VARCHAR"}]') as calls
from samples
order by sample_index
"""
_GOLD_MEMBERS = ("name", "args", "accept", "optional", "group", "compare", "side")
_RULES = ("accept", "optional", "group", "compare")
# number texts as any writer may write them (DuckDB writes many of them otherwise)
_NUMBER_TEXTS = st.from_regex(r"-?(0|[1-9][0-9]{0,19})(\.[0-9]{1,19})?([eE][+-]?[0-9]{1,3})?",
                              fullmatch=True)  # fmt: skip
_GOLD_KEYS = st.sampled_from([*_GOLD_MEMBERS, "id", "Name", "n\\u0061me", "x"])


@st.composite
def _json_text(draw: Any, value: Any) -> str:
    """``value`` as JSON text, written one of the ways writers write it."""
    separators = draw(st.sampled_from([(", ", ": "), (",", ":"), (" ,\t", " :\n")]))
    return json.dumps(value, separators=separators, ensure_ascii=draw(st.booleans()))


@st.composite
def _gold_value(draw: Any) -> str:
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return draw(_NUMBER_TEXTS)
    if shape == 1:  # a number in an object, as a hand-written file holds it
        return '{"a": ' + draw(_NUMBER_TEXTS) + ', "b": [' + draw(_NUMBER_TEXTS) + "]}"
    if shape == 2:
        return draw(st.sampled_from(["NaN", "-Infinity", '"\\/"', '"\\u00e9"', "[1,]", "{}"]))
    return draw(_json_text(draw(_VALUES)))


@st.composite
def _gold_call(draw: Any) -> str:
    """One element of a gold list: mostly an object whose members may repeat a key."""
    if draw(st.integers(0, 9)) == 0:
        return draw(_json_text(draw(_VALUES)))
    parts = []
    for key in draw(st.lists(_GOLD_KEYS, max_size=6)):
        if key in ("name", "side") and draw(st.booleans()):
            names = st.sampled_from(["add", "agent", "user", "é", 'a"b', "\x01"]) | _NAMES
            value = draw(_json_text(draw(names)))
        else:
            value = draw(_gold_value())
        parts.append(f'"{key}"' + draw(st.sampled_from([": ", ":", " :\t"])) + value)
    return "{" + draw(st.sampled_from([", ", ","])).join(parts) + "}"


@st.composite
def _gold_text(draw: Any) -> str | None:
    """A sample's gold as stored: mostly a list of calls, sometimes none, other JSON, or
    text that is no JSON."""
    shape = draw(st.integers(0, 19))
    if shape == 0:
        return None
    if shape == 1:
        return draw(_json_text(draw(_VALUES)))  # no list: no calls
    if shape == 2:
        broken = ["", " ", "[", "[1 2]", '[{"name": "a"} x]', "[{]", "[1,,2]", '[{"name" "a"}]',
                  '{"a":1}{"b":2}', "[1,]", "[\n]"]  # fmt: skip
        return draw(st.sampled_from(broken))
    calls = draw(st.lists(_gold_call(), max_size=4))
    space = draw(st.sampled_from(["", " ", "\n  "]))
    return "[" + space + ("," + space).join(calls) + space + "]"


def _gold_sample(index: int, gold: str | None) -> dict[str, Any]:
    return {**sample(index, []), "gold": gold}


def _transformed(con: Any, sides: list[str]) -> list[tuple[Any, ...]]:
    rows = []
    for s, (calls,) in enumerate(con.sql(_GOLD_TRANSFORMED).fetchall()):
        for call in calls or []:
            call = call or dict.fromkeys(_GOLD_MEMBERS)
            if ("agent" if call["side"] is None else call["side"]) in sides:
                rows.append((s, call["name"], call["args"] or "{}",
                             *(call[k] for k in _RULES)))  # fmt: skip
    return rows


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_gold_text(), min_size=1, max_size=5), st.sampled_from(list(translate.SIDES)))
def test_gold_calls_read_as_json_transform_reads_them(texts, side):
    _check_gold(texts, side)


@pytest.mark.parametrize(
    "texts",
    [
        ['[{"name": "a", "args": {"x": 1.5}, "side": "user"}, {"name": "b"}]', None, "[]"],
        ['[{"name": "a", "name": "b", "args": {"x": 1}, "args": null, "side": null}]'],
        ['[{"args": null, "name": "a", "accept": [{"x": 2}], "compare": {"x": "exact"}}]'],
        ['[{"name": "a", "optional": ["x"], "group": 1, "side": ""}, {"name": 5}]'],
        ['[{"name": "caf\\u00e9", "args": {"k": "\\u00e9"}}]', '{"name": "a"}', "5"],
        ['[{"name": {"a": 1}, "args": {"x": 1e-05, "y": 2.50}}]', '[ {"name" : "a" } ]'],
        ['[{"name": "a", "n\\u0061me": "b"}, {"name": "c", "extra": [1, {"d": NaN}]}]'],
        ['[{"name": "a"}, ]'],
        ["[null]"],
        ['[{"name": "a"}'],
        ['[{"name": "a"} {"name": "b"}]'],
        [""],
    ],
)
@pytest.mark.parametrize("side", ["agent", "both"])
def test_gold_lists_read_as_json_transform_reads_them(texts, side):
    _check_gold(texts, side)


def _check_gold(texts: list[str | None], side: str) -> None:
    samples = [_gold_sample(k, text) for k, text in enumerate(texts)]
    con = connect_tables(
        pa.Table.from_pylist(samples, schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist([], schema=WRITTEN_MESSAGES_SCHEMA),
    )
    try:
        try:
            want = _transformed(con, translate.SIDES[side])
        except Exception as exc:  # DuckDB's error: some text is no JSON
            with pytest.raises(StoreError, match=r"cannot read the run's traces: samples\.parquet"):
                translate.load_flat(con, side=side)
            assert "JSON" in str(exc)
            return
        if any(row[1] is None for row in want):
            with pytest.raises(StoreError, match="has a gold call without a name"):
                translate.load_flat(con, side=side)
            return
        flat = translate.load_flat(con, side=side)
    finally:
        con.close()
    rules = flat.rules or {}
    got = list(zip(
        flat.gold.s.tolist(), flat.gold.name.to_pylist(), flat.gold.args.to_pylist(),
        *(rules[k].to_pylist() if k in rules else [None] * len(flat.gold.s) for k in _RULES),
        strict=True,
    ))  # fmt: skip
    assert got == want
    assert (
        flat.gold.first.tolist() == np.searchsorted(flat.gold.s, np.arange(len(texts) + 1)).tolist()
    )


@pytest.mark.parametrize(
    "text",
    [
        "1e-05", "1e+16", "1E5", "1.50", "2.0", "0.0", "-0.0", "-0", "0.0001", "0.00001",
        "123456789012345678", "1234567890123456789", "12345678901234567890", "0.1",
        "0.30000000000000004", "123456789012345.6", "1234567890123456.0", "1e400", "NaN",
        '"\\u00e9"', '"\\/"', '"a\\"b"', '"\\t"', '"é"', '"\\ud83d\\ude00"', "[1, 2]", '{"a" : 1}',
        "[1, ]", '{"a": 1, }', "true", "null",
    ],
)  # fmt: skip
def test_gold_args_are_written_as_duckdb_writes_them(text):
    gold = '[{"name": "f", "args": ' + text + '}, {"name": "g", "args": ' + text + "}]"
    con = connect_tables(
        pa.Table.from_pylist([_gold_sample(0, gold)], schema=SAMPLES_SCHEMA),
        pa.Table.from_pylist([], schema=WRITTEN_MESSAGES_SCHEMA),
    )
    try:
        want = _transformed(con, ["agent"])
        flat = translate.load_flat(con)
    finally:
        con.close()
    assert flat.gold.args.to_pylist() == [row[2] for row in want]
    assert flat.gold.name.to_pylist() == ["f", "g"]


def test_gold_lists_longer_than_the_tables_first_made_for_them():
    # 60 calls of 5 rules and sides each in one list: more calls and more members than
    # read_gold's tables first hold (4 calls and 1 member per list, 16 more)
    call = {"name": "f", "args": {"x": 1}, "accept": {"x": [1, 2]}, "optional": ["y"],
            "group": 0, "compare": {"x": "exact"}, "side": "agent"}  # fmt: skip
    texts = [json.dumps([{**call, "name": f"f{k}"} for k in range(60)]), json.dumps([call])]
    _check_gold(texts, "agent")
