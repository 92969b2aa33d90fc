"""Canonical JSON text read by compiled code: objects split into members, the spec's value
equality on texts (against ``values_equal`` on the parsed values), repeated keys."""

from __future__ import annotations

import json
import math
import random
import time

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay.jsontext import (
    UNDECIDED,
    first_repeated_key,
    scratch_for,
    split_object,
    value_equal,
)
from tcbreplay.metrics import values_equal

NASTY_KEYS = [
    "",
    "/",
    "~",
    "~0",
    "~1",
    "a/b~c",
    'q"k',
    "back\\slash",
    "$.x[0]",
    "0",
    "ключ",
    "\x1f",
]
TOLERANCES = [(1e-9, 1e-9), (0.0, 0.0), (1e-6, 0.0), (0.0, 1e-3)]


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    yield con
    con.close()


def canonical(con: duckdb.DuckDBPyConnection, value) -> str:
    """The text DuckDB's JSON writer makes of a value, as scoring reads arguments."""
    return con.execute("select json(?)::varchar", [json.dumps(value)]).fetchone()[0]


def buffer(*texts: str) -> tuple[np.ndarray, np.ndarray]:
    raw = [t.encode() for t in texts]
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in raw])]).astype(np.int64)
    return offsets, np.frombuffer(b"".join(raw) + b"\0", dtype=np.uint8)


def members(text: str, rows: int = 200) -> list[tuple[str, object]] | int:
    offsets, data = buffer(text)
    spans = np.zeros((rows, 4), dtype=np.int64)
    n = split_object(data, 0, int(offsets[1]), spans)
    if n <= 0:
        return n
    raw = data.tobytes()
    return [
        (
            json.loads(b'"' + raw[spans[k, 0] : spans[k, 1]] + b'"'),
            json.loads(raw[spans[k, 2] : spans[k, 3]]),
        )
        for k in range(n)
    ]


def test_split_object_reads_every_member_back(con):
    """Keys in order (JSON pointer characters, quotes, escapes, empty), values of every kind,
    nested ones included; more members than rows is -1; anything but an object has none."""
    rnd = random.Random(3)
    values = [None, 1, -0.0, 1e300, 2**70, 'x"y\\z\u00e9', [1, {"a": None}], {"b": [True]}, ""]
    keys = NASTY_KEYS + [f"k{i}" for i in range(90)]
    whole = {key: rnd.choice(values) for key in keys}
    text = canonical(con, whole)
    assert members(text) == [(k, json.loads(json.dumps(v))) for k, v in whole.items()]
    assert members(text, rows=len(keys) - 1) == -1
    for other in ("[1, 2]", '"s"', "null", "{}", "3"):
        assert members(canonical(con, json.loads(other))) == 0
    # whitespace between tokens (text not written by DuckDB) is read too
    assert members('{ "a" : 1 , "b" :[ 1, 2 ] }') == [("a", 1), ("b", [1, 2])]


def test_a_large_object_is_split_in_one_pass(con):
    """20,000 keys in one arguments object (a garbled call): split, and looked at for a
    repeated key, in well under a second."""
    text = canonical(con, {f"key{i}": i for i in range(20_000)})
    members('{"a":1}')  # compiled (or loaded from the cache) before the clock starts
    first_repeated_key(*buffer("{}"), np.zeros(1, dtype=np.bool_))
    started = time.perf_counter()
    assert len(members(text, rows=20_001)) == 20_000
    offsets, data = buffer(text)
    assert first_repeated_key(offsets, data, np.zeros(1, dtype=np.bool_)) == -1
    assert time.perf_counter() - started < 1


@pytest.mark.parametrize("n_keys", [3, 100], ids=["small", "large"])
def test_first_repeated_key_names_the_object(n_keys):
    """An object repeating one of its own keys is found; a repeat inside a nested value (the
    first text) is the value's business, and texts already checked are skipped."""
    fill = ",".join(f'"k{i}":{i}' for i in range(n_keys - 2))
    nested = '{"a":{"b":1,"b":2}}'
    repeated = '{"q":"x",' + fill + ',"q":"y"}'
    offsets, data = buffer(nested, repeated, "[1,1]")
    assert first_repeated_key(offsets, data, np.zeros(3, dtype=np.bool_)) == 1
    assert first_repeated_key(offsets, data, np.array([False, True, False])) == -1


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.1, 1.0, 1, 1e17, 10**17, -0.0, 0, 1e-7, 2.5, 2.5000000001]),
    st.text(alphabet='ab é計\u0301"\\\x01', max_size=3),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=4,
)


def near(value):
    """Values equal or close to ``value`` as numbers."""
    if isinstance(value, float) and math.isfinite(value):
        return st.sampled_from([value, value * (1 + 1e-12), value + 1e-10, value + 0.5])
    if isinstance(value, int) and not isinstance(value, bool):
        return st.sampled_from([value, float(value), value + 1])
    return st.just(value)


@settings(max_examples=500, deadline=None)
@given(data=st.data(), tolerance=st.sampled_from(TOLERANCES))
def test_value_equal_is_the_spec_on_the_parsed_values(con, data, tolerance):
    """value_equal on two canonical texts answers as ``values_equal`` on what they parse to,
    but for two different lists or objects, which it leaves to Python."""
    a = data.draw(json_values)
    b = data.draw(st.one_of(json_values, near(a)))
    x, y = canonical(con, a), canonical(con, b)
    offsets, text = buffer(x, y)
    scratch = scratch_for(offsets)
    got = value_equal(text, 0, int(offsets[1]), text, int(offsets[1]), int(offsets[2]), *tolerance,
                      scratch)  # fmt: skip
    want = values_equal(json.loads(x), json.loads(y), *tolerance)
    if got == UNDECIDED:
        assert x[0] in "[{" and y[0] in "[{"
        assert x != y or "NaN" in x
    else:
        assert bool(got) == want, (x, y)
