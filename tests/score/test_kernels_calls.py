"""The compiled splitter of tool-call lists (tcbreplay/_score/kernels/calls.pxi), on its own: every
call's name and arguments spans, whatever strings the lists hold and wherever their quotes
and escapes fall against the eight-byte words the kernel reads."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay._score import kernels
from tcbreplay._score.kernels._compiled import span_texts, split_calls

# strings dense in what the word-at-a-time scan looks for: quotes, backslashes, and bytes
# next to them in value (!, #, [, ]), at every length around a word
_TRICKY = st.text(alphabet=st.sampled_from('"\\!#[]ab é\x01/'), max_size=40)


def _canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _split(texts: list[str]) -> list[tuple[int, int, str, str | None]]:
    """(row, name kind, name span text, args span text or None) per call."""
    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in encoded], out=offsets[1:])
    data = np.frombuffer(b"".join(encoded) + b"\0", dtype=np.uint8)
    room = 64
    while True:  # more calls than room: started again with more, as translation does
        row = np.empty(room, dtype=np.int64)
        kind = np.empty(room, dtype=np.int8)
        spans = [np.empty(room, dtype=np.int64) for _ in range(4)]
        count = split_calls(offsets, data, row, kind, *spans)
        if count >= 0:
            break
        room *= 4
    raw = data.tobytes()
    return [
        (
            int(row[k]),
            int(kind[k]),
            raw[spans[0][k] : spans[1][k]].decode(),
            None if spans[2][k] < 0 else raw[spans[2][k] : spans[3][k]].decode(),
        )
        for k in range(count)
    ]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(_TRICKY, _TRICKY, st.dictionaries(_TRICKY, _TRICKY, max_size=2))),
        min_size=1,
        max_size=4,
    )
)
def test_names_and_arguments_are_found_whatever_the_strings_hold(lists):
    texts = [
        _canonical([{"id": pad, "name": name, "args": args, "type": "tool_call"}
                    for name, pad, args in calls])
        for calls in lists
    ]  # fmt: skip
    want = []
    for k, calls in enumerate(lists):
        for name, _, args in calls:
            escaped = "\\" in _canonical(name)[1:-1]
            want.append(
                (
                    k,
                    kernels.NAME_ESCAPED if escaped else kernels.NAME_TEXT,
                    _canonical(name) if escaped else name,
                    _canonical(args),
                )
            )
    assert _split(texts) == want


def test_shapes_of_lists_and_calls():
    texts = [
        "",  # no tool_calls at all
        "null",
        '{"name":"f"}',  # no list: no calls
        "[]",
        '[{"name":"f","args":{"a":1}},{"args":null},3,null,{"name":null,"name":"g"}]',
        '[{"args":[1,{"x":"]"}],"args":{},"name":5,"name":"h"}]',
    ]
    assert _split(texts) == [
        (4, kernels.NAME_TEXT, "f", '{"a":1}'),
        (4, kernels.NAME_NONE, "", None),  # arguments null read as none
        (4, kernels.NAME_NONE, "", None),  # no object: no name, no arguments
        (4, kernels.NAME_NONE, "", None),
        (4, kernels.NAME_NONE, "", None),  # the first name counts, and it is null
        (5, kernels.NAME_VALUE, "5", '[1,{"x":"]"}]'),  # the first of each
    ]


def test_too_little_room_is_said_not_overrun():
    offsets = np.array([0, 9], dtype=np.int64)
    data = np.frombuffer(b"[1,2,3,4]\0", dtype=np.uint8)
    row = np.empty(3, dtype=np.int64)
    kind = np.empty(3, dtype=np.int8)
    spans = [np.empty(3, dtype=np.int64) for _ in range(4)]
    assert split_calls(offsets, data, row, kind, *spans) == -1


def test_span_texts_fills_what_is_left_out():
    data = np.frombuffer(b"abcdef\0", dtype=np.uint8)
    offsets = np.empty(4, dtype=np.int64)
    out = span_texts(
        data,
        np.array([1, -1, 0], dtype=np.int64),
        np.array([3, -1, 0], dtype=np.int64),
        np.frombuffer(b"{}", dtype=np.uint8),
        offsets,
    )
    assert offsets.tolist() == [0, 2, 4, 4]
    assert out[:4].tobytes() == b"bc{}"


@pytest.mark.slow  # (3 s: 200 examples)
@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=6), max_size=6), st.binary(max_size=3), st.data())
def test_span_texts_are_the_spans_end_to_end(texts, fill, data):
    buffer = b"".join(texts)
    raw = np.frombuffer(buffer + b"\0", dtype=np.uint8)
    spans = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(buffer)), st.integers(0, len(buffer))).map(sorted)
            | st.just([-1, -1]),
            max_size=8,
        )
    )
    lo = np.array([a for a, _ in spans], dtype=np.int64)
    hi = np.array([b for _, b in spans], dtype=np.int64)
    offsets = np.empty(len(spans) + 1, dtype=np.int64)
    out = span_texts(raw, lo, hi, np.frombuffer(fill + b"\0", dtype=np.uint8)[: len(fill)], offsets)
    pieces = [fill if a < 0 else buffer[a:b] for a, b in spans]
    assert offsets.tolist() == np.cumsum([0] + [len(p) for p in pieces]).tolist()
    assert out[: offsets[-1]].tobytes() == b"".join(pieces)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_TRICKY, st.dictionaries(_TRICKY, _TRICKY, max_size=2)), max_size=3))
def test_a_cut_text_is_split_within_its_bytes(calls):
    """DuckDB writes whole lists, but a text cut anywhere (here followed by quotes, which a
    read past its end would take for a string) gives spans inside the text only."""
    whole = _canonical([{"name": name, "args": args} for name, args in calls])
    for cut in range(len(whole.encode()) + 1):
        text = whole.encode()[:cut]
        data = np.frombuffer(text + b'"' * 16, dtype=np.uint8)
        row, kind = np.empty(16, dtype=np.int64), np.empty(16, dtype=np.int8)
        spans = [np.empty(16, dtype=np.int64) for _ in range(4)]
        count = split_calls(np.array([0, cut], dtype=np.int64), data, row, kind, *spans)
        for k in range(count):
            named = kind[k] != kernels.NAME_NONE
            assert not named or 0 <= spans[0][k] <= spans[1][k] <= cut, (text, k)
            assert spans[2][k] < 0 or 0 <= spans[2][k] <= spans[3][k] <= cut, (text, k)
