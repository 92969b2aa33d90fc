"""The compiled writer of the dashboard file's samples (tcbreplay/_score/kernels/dashboard.pxi), on
its own: byte for byte what Python's ``json`` writes, whatever the inputs and names hold and
wherever their escapes fall against the eight-byte words the writer copies."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay._score import kernels
from tcbreplay._score.kernels._compiled import dashboard_samples

# text dense in what is escaped (quotes, backslashes, control characters) and in bytes next
# to them in value; one such character anywhere in plain text, so that it falls at every
# place of a word; and any text at all
_TRICKY = st.text(alphabet=st.sampled_from('"\\\x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f !#/[]ab é😀'))
_PLAIN = st.text(alphabet="abcdefgh", max_size=12)
_ONE = st.builds(
    lambda before, special, after: before + special + after,
    _PLAIN, st.sampled_from('"\\\x01\n\x1f'), _PLAIN,
)  # fmt: skip
_TEXT = _TRICKY | _ONE | st.text()
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_CALLS = st.lists(st.tuples(_TEXT, st.dictionaries(_TEXT, _VALUES, max_size=3)), max_size=4)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _side(samples: list[list[tuple[str, dict]]]) -> tuple[np.ndarray, ...]:
    """One side's calls as the writer takes them: each sample's first call, then the names'
    and the arguments' offsets and bytes (arguments as canonical JSON text)."""
    first = np.cumsum([0] + [len(calls) for calls in samples]).astype(np.int64)
    names = pa.array([name for calls in samples for name, _ in calls], pa.string())
    args = pa.array([_json(args) for calls in samples for _, args in calls], pa.string())
    return (first, *kernels.text_buffers(names), *kernels.text_buffers(args))


def _expected(text: str | None, agent: list, gold: list) -> str:
    def side(calls: list) -> str:
        names = _json([name for name, _ in calls])
        args = ",".join(_json(a) for _, a in calls)
        return f'{{"tool_call_names":{names},"tool_call_args":[{args}]}}'

    return f'{{"input":{_json(text)},"output":{side(agent)},"target":{side(gold)}}}'


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.none() | _TEXT, _CALLS, _CALLS), max_size=6),
    st.data(),
)
def test_listed_samples_are_written_as_python_writes_them(samples, data):
    n = len(samples)
    listed = sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n)) if n else [])
    # the inputs in another order, found through each listed sample's row
    order = data.draw(st.permutations(range(n)))
    inputs = pa.array([samples[k][0] for k in order], pa.string())
    row_of = {k: row for row, k in enumerate(order)}
    listing = (
        np.array(listed, dtype=np.int64),
        np.array([row_of[k] for k in listed], dtype=np.int64),
        *kernels.text_buffers(inputs),
        inputs.is_valid().to_numpy(zero_copy_only=False),
        *_side([s[1] for s in samples]),
        *_side([s[2] for s in samples]),
    )
    expected = ",\n\t".join(_expected(*samples[k]) for k in listed).encode()
    # a buffer a byte short gets nothing, only the length it needs
    short = np.zeros(max(len(expected) - 1, 0), dtype=np.uint8)
    assert dashboard_samples(*listing, short) == (-len(expected) if expected else 0)
    assert not short.any()
    out = np.zeros(len(expected) + 5, dtype=np.uint8)
    assert dashboard_samples(*listing, out) == len(expected)
    assert out[: len(expected)].tobytes() == expected
    assert not out[len(expected) :].any()


def test_a_sample_reads_back_to_its_input_names_and_arguments():
    text = 'say "hi"\\\n\x01\x7f é'
    agent = [("f\t", {"a": 1.5, "b": ["x"]}), ("", {})]
    out = np.empty(200, dtype=np.uint8)
    size = dashboard_samples(
        np.array([0], dtype=np.int64),
        np.array([0], dtype=np.int64),
        *kernels.text_buffers(pa.array([text])),
        np.array([True]),
        *_side([agent]),
        *_side([[]]),
        out,
    )
    assert json.loads(out[:size].tobytes()) == {
        "input": text,
        "output": {"tool_call_names": ["f\t", ""], "tool_call_args": [{"a": 1.5, "b": ["x"]}, {}]},
        "target": {"tool_call_names": [], "tool_call_args": []},
    }
