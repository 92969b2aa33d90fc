"""The Cython kernels (``tcbreplay.kernels._compiled``) against the numba ones they replace,
on random inputs: every output of every kernel the same, byte for byte."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kernels_scoring import candidate_tables, firsts, pairs_table

from tcbreplay import kernels
from tcbreplay.kernels import _compiled as new
from tcbreplay.kernels import board, calls, jsontext, number_locale, scratch_for
from tcbreplay.kernels import scoring as old

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

# strings dense in what the kernels look for: quotes, backslashes, control characters, JSON
# punctuation, number letters; and any text at all
_TRICKY = st.text(alphabet=st.sampled_from('"\\\x00\x01\n\x1f !#,:[]{}abnuleé😀/'), max_size=20)
_TEXT = _TRICKY | st.text(max_size=20)
_NUMBERS = (
    st.integers(-5, 5)
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.1, 1.0, 1e17, -0.0, 1e-7, 2.5, 2.5000000001, 1e300])
)
_SCALARS = st.none() | st.booleans() | _NUMBERS | _TEXT
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
# number texts as DuckDB keeps them, which json.dumps does not write
_WORDS = st.sampled_from(["NaN", "-NaN", "nan", "Infinity", "-Infinity", "inf", "1e5", "-0"])


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _buffer(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and bytes, with zero bytes after the last text (both kernels may read a byte
    past a malformed text's end; they read the same bytes)."""
    raw = [t.encode() for t in texts]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in raw], out=offsets[1:])
    return offsets, np.frombuffer(b"".join(raw) + b"\0" * 16, dtype=np.uint8)


@st.composite
def call_lists(draw) -> str:
    """A tool-call list text: calls with names and arguments of any kind, other elements,
    keys repeated, or no list at all; canonical or with spaces, sometimes cut short."""
    element = st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "id": _TEXT,
                "name": _TEXT | _SCALARS,
                "args": st.dictionaries(_TEXT, _VALUES, max_size=3) | _VALUES,
                "type": st.just("tool_call"),
            },
        ),
        _VALUES,
    )
    value = draw(st.lists(element, max_size=4) | _VALUES)
    text = _json(value) if draw(st.booleans()) else json.dumps(value, ensure_ascii=False)
    if draw(st.integers(0, 9)) == 0:  # a repeated key, as text only can hold one
        text = text.replace('{"name":', '{"name":"x","name":', 1)
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@SETTINGS
@given(st.lists(call_lists(), max_size=5), st.integers(0, 12))
def test_split_calls(texts, room):
    offsets, data = _buffer(texts)
    outs = []
    for kernel in (calls.split_calls, new.split_calls):
        row = np.full(room, 7, dtype=np.int64)
        kind = np.full(room, 7, dtype=np.int8)
        spans = [np.full(room, 7, dtype=np.int64) for _ in range(4)]
        count = kernel(offsets, data, row, kind, *spans)
        outs.append((count, row.tolist(), kind.tolist(), [s.tolist() for s in spans]))
    assert outs[0] == outs[1]


@SETTINGS
@given(st.lists(_TEXT, max_size=6), st.data())
def test_span_texts(texts, data):
    offsets, buffer = _buffer(texts)
    n = len(texts)
    pick = data.draw(st.lists(st.integers(-1, max(n - 1, 0)), max_size=8))
    lo = np.array([offsets[k] if k >= 0 and n else -1 for k in pick], dtype=np.int64)
    hi = np.array([offsets[k + 1] if k >= 0 and n else -1 for k in pick], dtype=np.int64)
    fill = np.frombuffer(data.draw(st.binary(max_size=3)) + b"\0", dtype=np.uint8)[:-1]
    got = []
    for kernel in (calls.span_texts, new.span_texts):
        out_offsets = np.empty(len(pick) + 1, dtype=np.int64)
        out = kernel(buffer, lo, hi, np.ascontiguousarray(fill), out_offsets)
        got.append((out_offsets.tolist(), out[: out_offsets[-1]].tobytes()))
    assert got[0] == got[1]


_CALLS = st.lists(st.tuples(_TEXT, st.dictionaries(_TEXT, _VALUES, max_size=3)), max_size=4)


def _side(samples):
    first = np.cumsum([0] + [len(c) for c in samples]).astype(np.int64)
    names = pa.array([name for c in samples for name, _ in c], pa.string())
    args = pa.array([_json(a) for c in samples for _, a in c], pa.string())
    return (first, *kernels.text_buffers(names), *kernels.text_buffers(args))


@SETTINGS
@given(st.lists(st.tuples(st.none() | _TEXT, _CALLS, _CALLS), max_size=6), st.data())
def test_dashboard_samples(samples, data):
    n = len(samples)
    listed = sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)) if n else [])
    inputs = pa.array([s[0] for s in samples], pa.string())
    listing = (
        np.array(listed, dtype=np.int64),
        np.array(listed, dtype=np.int64),
        *kernels.text_buffers(inputs),
        inputs.is_valid().to_numpy(zero_copy_only=False),
        *_side([s[1] for s in samples]),
        *_side([s[2] for s in samples]),
    )
    size = data.draw(st.integers(0, 3000))
    got = []
    for kernel in (board.dashboard_samples, new.dashboard_samples):
        out = np.zeros(size, dtype=np.uint8)
        got.append((kernel(*listing, out), out.tobytes()))
    assert got[0] == got[1]


@st.composite
def objects(draw) -> str:
    """An arguments text: an object (keys from a small set, so that some repeat; sometimes
    more than 64 of them), or any other value."""
    if draw(st.integers(0, 5)) == 0:
        return _json(draw(_VALUES))
    keys = st.sampled_from(["a", "b", 'q"k', "", "ключ"]) | _TRICKY
    if draw(st.booleans()):
        count = draw(st.integers(60, 140))
        members = [(f"k{i}", i) for i in range(count)]
        if draw(st.booleans()):
            members.append((f"k{draw(st.integers(0, count - 1))}", 0))
    else:
        members = draw(st.lists(st.tuples(keys, _VALUES), max_size=6))
    spaced = draw(st.booleans())
    sep = ", " if spaced else ","
    colon = ": " if spaced else ":"
    return "{" + sep.join(f"{_json(k)}{colon}{_json(v)}" for k, v in members) + "}"


@SETTINGS
@given(st.lists(objects(), max_size=6), st.data())
def test_first_repeated_key(texts, data):
    offsets, buffer = _buffer(texts)
    checked = np.array(data.draw(st.lists(st.booleans(), min_size=len(texts),
                                          max_size=len(texts))), dtype=np.bool_)  # fmt: skip
    assert jsontext.first_repeated_key(offsets, buffer, checked) == new.first_repeated_key(
        offsets, buffer, checked
    )


@SETTINGS
@given(objects(), st.integers(1, 200))
def test_split_object(text, rows):
    offsets, buffer = _buffer([text])
    got = []
    for kernel in (jsontext.split_object, new.split_object):
        spans = np.full((rows, 4), 7, dtype=np.int64)
        got.append((kernel(buffer, 0, int(offsets[1]), spans), spans.tolist()))
    assert got[0] == got[1]


_VALUE_TEXTS = st.builds(_json, _VALUES) | _WORDS


@SETTINGS
@given(
    _VALUE_TEXTS,
    _VALUE_TEXTS | st.builds(lambda x: x + "0", _WORDS),
    st.sampled_from([(1e-9, 1e-9), (0.0, 0.0), (1e-6, 0.0), (0.0, 1e-3), (0.5, 0.5)]),
)
def test_value_equal(x, y, tolerance):
    offsets, buffer = _buffer([x, y])
    lo, mid, hi = (int(o) for o in offsets)
    scratch = scratch_for(offsets)
    assert jsontext.value_equal(
        buffer, lo, mid, buffer, mid, hi, *tolerance, scratch, number_locale()
    ) == new.value_equal(buffer, lo, mid, buffer, mid, hi, *tolerance, scratch, number_locale())


@st.composite
def runs(draw):
    """A range of samples as score_samples takes it: name codes, arguments objects, tools'
    parameters with and without defaults."""
    codes = draw(st.integers(1, 5))
    tools = draw(st.integers(0, codes))
    keys = ["a", "b", "c", 'q"k']
    params = [
        [(k, draw(st.none() | st.builds(_json, _VALUES))) for k in draw(st.permutations(keys))[
            : draw(st.integers(0, 4))]]
        for _ in range(tools)
    ]  # fmt: skip
    value = st.sampled_from([1, 1.0, 2, 2.5, "x", None, True, [1], {"z": 1}]) | _VALUES
    args = st.dictionaries(st.sampled_from([*keys, "zz"]), value, max_size=4).map(_json) | (
        objects()
    )
    call = st.tuples(st.integers(0, codes - 1), args)
    samples = draw(st.lists(st.tuples(st.lists(call, max_size=5), st.lists(call, max_size=5)),
                            min_size=1, max_size=6))  # fmt: skip
    for a, g in samples:  # some samples whose name sequences are equal
        if draw(st.integers(0, 3)) == 0:
            g[:] = [(c, draw(args)) for c, _ in a]
    return codes, params, samples


def _score(kernel, run, room, rel_tol, abs_tol):
    codes, params, samples = run
    a_code = np.array([c for a, _ in samples for c, _ in a], dtype=np.int32)
    g_code = np.array([c for _, g in samples for c, _ in g], dtype=np.int32)
    a_offsets, a_data = _buffer([t for a, _ in samples for _, t in a])
    g_offsets, g_data = _buffer([t for _, g in samples for _, t in g])
    p_first = np.zeros(codes + 1, dtype=np.int64)
    np.cumsum([len(p) for p in params] + [0] * (codes - len(params)), out=p_first[1:])
    rows = [row for p in params for row in p]
    key_offsets, key_data = _buffer([_json(k)[1:-1] for k, _ in rows])
    default_offsets, default_data = _buffer([d or "" for _, d in rows])
    has_default = np.array([d is not None for _, d in rows], dtype=np.bool_)
    a_checked = np.zeros(len(a_code), dtype=np.bool_)
    g_checked = np.zeros(len(g_code), dtype=np.bool_)
    pairs = np.full((room, 8), 7, dtype=np.int32)
    out = kernel(
        firsts([len(a) for a, _ in samples]), a_code, a_offsets, a_data,
        firsts([len(g) for _, g in samples]), g_code, g_offsets, g_data, codes, p_first,
        key_offsets, key_data, has_default, default_offsets, default_data, rel_tol, abs_tol,
        a_checked, g_checked, scratch_for(a_offsets, g_offsets, default_offsets),
        number_locale(), pairs,
    )  # fmt: skip
    tsa, tp, same, found, side, call = out
    # a call that stops early (too few rows, a repeated key) leaves later samples unwritten
    per_sample = (
        (np.nan_to_num(tsa, nan=-1).tolist(), tp.tolist(), same.tolist())
        if found >= 0 and not side
        else None
    )
    return (
        per_sample, int(found), int(side), int(call), pairs.tolist(), a_checked.tolist(),
        g_checked.tolist(),
    )  # fmt: skip


@SETTINGS
@given(runs(), st.integers(0, 40), st.sampled_from([(1e-9, 1e-9), (0.0, 0.0), (0.1, 0.5)]))
def test_score_samples(run, room, tolerance):
    assert _score(old.score_samples, run, room, *tolerance) == _score(
        new.score_samples, run, room, *tolerance
    )


@SETTINGS
@given(candidate_tables(), st.integers(1, 6))
def test_choose_pairs_and_totals(table, codes):
    rows, n_agent, n_gold, same = table
    pairs = pairs_table(rows)
    pairs[:, kernels.TOOL] = np.arange(len(pairs)) % codes
    a_first, g_first = firsts(n_agent), firsts(n_gold)
    a_code = (np.arange(a_first[-1]) % codes).astype(np.int32)
    g_code = (np.arange(g_first[-1]) % codes).astype(np.int32)
    got = []
    for k in (old, new):
        chosen = k.choose_pairs(a_first, g_first, same, pairs)
        totals = k.sample_totals(len(n_agent), pairs, chosen)
        chosen_pairs = k.picked(pairs, chosen)
        tools = k.tool_totals(codes, a_code, g_code, chosen_pairs)
        got.append([x.tolist() for x in (chosen, totals, chosen_pairs, tools)])
    assert got[0] == got[1]


@SETTINGS
@given(st.lists(st.lists(st.binary(max_size=4), max_size=12), min_size=1, max_size=3),
       st.sampled_from([1, 2, 4, 8, 64]), st.integers(1, 40))  # fmt: skip
def test_encode_texts(sides, size, dict_bytes):
    got = []
    for k in (old, new):
        slots = np.full(size, -1, dtype=np.int64)
        dict_offsets = np.zeros(size // 2 + 1, dtype=np.int64)
        dict_data = np.zeros(dict_bytes, dtype=np.uint8)
        state = np.zeros(2, dtype=np.int64)
        results = []
        for texts in sides:
            offsets = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum([len(t) for t in texts], out=offsets[1:])
            data = np.frombuffer(b"".join(texts) + b"\0", dtype=np.uint8)
            codes = np.full(len(texts), -7, dtype=np.int32)
            done = k.encode_texts(offsets, data, slots, dict_offsets, dict_data, state, codes)
            results.append((bool(done), codes.tolist()))
        got.append((results, slots.tolist(), dict_offsets.tolist(), dict_data.tolist(),
                    state.tolist()))  # fmt: skip
    assert got[0] == got[1]


@SETTINGS
@given(
    st.sets(st.integers(-50, 50), max_size=10) | st.builds(lambda a, n: set(range(a, a + n)),
                                                          st.integers(-5, 5), st.integers(0, 8)),
    st.lists(st.integers(-60, 60), max_size=12),
)  # fmt: skip
def test_positions_and_order(order, index):
    order = np.array(sorted(order), dtype=np.int64)
    index = np.array(index, dtype=np.int64)
    got = []
    for k in (old, new):
        s, known = k.positions(order, index)
        position = np.array(sorted(index) if len(index) % 2 else index, dtype=np.int64)
        got.append((s.tolist(), known.tolist(), bool(k.in_call_order(s, position)),
                    bool(k.in_call_order(np.sort(s), position))))  # fmt: skip
    assert got[0] == got[1]
