"""Canonical JSON text read by compiled code: objects split into members, the spec's value
equality on texts (against ``values_equal`` on the parsed values), repeated keys."""

from __future__ import annotations

import json
import math
import os
import random
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay._score.kernels import _compiled as kernel
from tcbreplay._score.kernels import number_locale, scratch_for
from tcbreplay._score.kernels._compiled import first_repeated_key, split_object, value_equal
from tcbreplay._score.metrics import values_equal

UNDECIDED = 2  # value_equal's third answer (jsontext.pxi)

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


def equal_texts(x: str, y: str, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> int:
    """value_equal of two value texts."""
    offsets, text = buffer(x, y)
    lo, mid, hi = (int(o) for o in offsets)
    return value_equal(
        text, lo, mid, text, mid, hi, rel_tol, abs_tol, scratch_for(offsets), number_locale()
    )


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
    repeated key, in seconds of this thread's CPU time at most (about half a second on a quiet
    machine; 1.03 s on a busy one, where even CPU time stretches), not the minutes of CPU a
    quadratic pass would take. CPU time, not the wall clock, which other processes stretch."""
    text = canonical(con, {f"key{i}": i for i in range(20_000)})
    started = time.thread_time()
    assert len(members(text, rows=20_001)) == 20_000
    offsets, data = buffer(text)
    assert first_repeated_key(offsets, data, np.zeros(1, dtype=np.bool_)) == -1
    assert time.thread_time() - started < 10


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


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(data=st.data(), tolerance=st.sampled_from(TOLERANCES))
def test_value_equal_is_the_spec_on_the_parsed_values(con, data, tolerance):
    """value_equal on two canonical texts answers as ``values_equal`` on what they parse to,
    but for two different lists or objects, which it leaves to Python."""
    a = data.draw(json_values)
    b = data.draw(st.one_of(json_values, near(a)))
    x, y = canonical(con, a), canonical(con, b)
    got = equal_texts(x, y, *tolerance)
    want = values_equal(json.loads(x), json.loads(y), *tolerance)
    if got == UNDECIDED:
        assert x[0] in "[{" and y[0] in "[{"
        assert x != y or "NaN" in x
    else:
        assert bool(got) == want, (x, y)


@pytest.mark.parametrize("word", ["NaN", "-NaN", "nan", "-nan", "NAN", "Nan"])
def test_a_nan_in_any_spelling_is_unequal_to_itself(word):
    """DuckDB keeps the number words it reads as written; a NaN equals nothing (math.isclose),
    however it is spelled, and one inside a list leaves the comparison to Python."""
    assert equal_texts(word, word) == 0
    assert equal_texts(f"[{word}]", f"[{word}]") == UNDECIDED
    assert equal_texts("Infinity", "Infinity") == 1 and equal_texts("inf", "Infinity") == 1
    assert equal_texts("null", "null") == 1 and equal_texts("null", "nan") == 0


LOCALE_SCRIPT = """
import locale, sys
from tests_jsontext_probe import equal_texts
locale.setlocale(locale.LC_NUMERIC, "de_DE.UTF-8")
assert locale.localeconv()["decimal_point"] == ","
print(equal_texts("1.5", "1"), equal_texts("1.0", "1.4"), equal_texts("2.5", "2.50000000001"))
"""


@pytest.mark.slow
def test_numbers_read_the_same_in_a_comma_locale(tmp_path):
    """A program that embeds tcbreplay may set a locale that writes 1.5 as "1,5"; numbers in
    arguments are still read in the C locale (strtod alone would read "1.5" as 1)."""
    import shutil
    import subprocess
    import sys

    source = Path("/usr/share/i18n/locales/de_DE")
    if not shutil.which("localedef") or not source.exists():
        pytest.skip("no localedef or no de_DE locale source on this machine")
    locales = tmp_path / "locales"
    locales.mkdir()
    made = subprocess.run(
        ["localedef", "-i", "de_DE", "-f", "UTF-8", str(locales / "de_DE.UTF-8")],
        capture_output=True, text=True,
    )  # fmt: skip
    if not (locales / "de_DE.UTF-8").exists():
        pytest.skip(f"localedef could not build de_DE.UTF-8: {made.stderr[:200]}")
    (tmp_path / "tests_jsontext_probe.py").write_text(
        "from test_kernels_jsontext import equal_texts\n"
    )
    env = {
        **os.environ,
        "LOCPATH": str(locales),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parent)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", LOCALE_SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0", "1"]


def _repeats(text: str) -> bool:
    """Whether the text is an object that repeats one of its own keys (Python's reading)."""
    found = []

    def pairs(items: list) -> dict:
        keys = [k for k, _ in items]
        found.append(len(set(keys)) < len(keys))
        return dict(items)

    value = json.loads(text, object_pairs_hook=pairs)
    return isinstance(value, dict) and found[-1]


_KEYS = st.sampled_from(["a", "b", 'q"k', "", "ключ", "\x1f"])
_OBJECTS = st.lists(st.tuples(_KEYS, json_values), max_size=6) | st.builds(
    lambda n, again: [(f"k{i}", i) for i in range(n)] + [(f"k{again % n}", 0)] * (again > n),
    st.integers(60, 130),
    st.integers(0, 260),
)


@pytest.mark.slow  # 300 examples, each read by json.loads and the kernel: seconds
@settings(max_examples=300, deadline=None)
@given(st.lists(_OBJECTS, max_size=5), st.data())
def test_first_repeated_key_is_pythons_reading(objects, data):
    """The first text not checked whose object repeats a key, as json.loads sees the keys
    (canonical texts: a key is written one way), small objects and ones past 64 keys."""
    texts = [
        "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}"
        for members in objects
    ]
    checked = data.draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)))
    offsets, text = buffer(*texts)
    want = next((k for k, t in enumerate(texts) if not checked[k] and _repeats(t)), -1)
    assert first_repeated_key(offsets, text, np.array(checked, dtype=np.bool_)) == want


def _read(text: str) -> float:
    data = np.frombuffer(text.encode() + b"\0", dtype=np.uint8)
    return kernel.read_number_text(data, 0, len(text), np.empty(len(text) + 1, dtype=np.uint8))


@pytest.mark.slow  # brute force over hundreds of examples: make test-slow
@settings(max_examples=2000, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.builds(
        lambda sign, whole, frac: f"{sign}{whole}{'.' + frac if frac else ''}",
        st.sampled_from(["", "-"]),
        st.from_regex(r"[0-9]{1,17}", fullmatch=True),
        st.from_regex(r"[0-9]{0,17}", fullmatch=True),
    )
)
def test_numbers_are_read_as_python_reads_them(text):
    """The kernel's fast path for plain decimals (at most 15 digits) and strtod for the rest
    give Python's float(), bit for bit."""
    want = float(text)
    got = _read(text)
    assert got == want and math.copysign(1, got) == math.copysign(1, want), text
