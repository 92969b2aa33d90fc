"""The text reshaping of tcbreplay._score.texts, held to Arrow's own compute functions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tcbreplay._score import kernels
from tcbreplay._score.texts import filled_texts, filter_texts, same_as_previous, valid_mask

VALUES = ["a", None, "", "bb", "bb", None, None, '{"x": 1}', "é", "é", "", "", "z" * 40]


def _arrays():
    """Arrays of many layouts: plain and large strings, sliced, chunked, all null, empty."""
    for kind in (pa.string(), pa.large_string()):
        whole = pa.array(VALUES, kind)
        yield whole
        yield whole.slice(3, 7)  # an offset into the buffers, and a bitmap not at bit 0
        yield pa.chunked_array([whole.slice(0, 5), whole.slice(5)])
        yield pa.array([None, None, None], kind)
        yield pa.nulls(4, kind)
        yield pa.array([], kind)
        yield pa.array(["only"], kind)


ARRAYS = list(_arrays())


@pytest.mark.parametrize("texts", ARRAYS, ids=range(len(ARRAYS)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_filter_texts_is_arrows_filter(texts, seed):
    keep = np.random.default_rng(seed).random(len(texts)) < 0.5
    got = filter_texts(texts, keep)
    want = texts.filter(pa.array(keep, pa.bool_()))
    if isinstance(want, pa.ChunkedArray):
        want = want.combine_chunks()
    assert got.type == pa.large_string()
    assert got.to_pylist() == want.to_pylist()
    assert got.null_count == want.null_count


@pytest.mark.parametrize("texts", ARRAYS, ids=range(len(ARRAYS)))
def test_filled_texts_is_arrows_fill_null(texts):
    want = pc.fill_null(texts, "")
    if isinstance(want, pa.ChunkedArray):
        want = want.combine_chunks()
    want_offsets, want_data = kernels.text_buffers(want.cast(pa.large_string()))
    offsets, data = filled_texts(texts)
    assert offsets.tolist() == want_offsets.tolist()
    assert data[: offsets[-1]].tobytes() == want_data[: want_offsets[-1]].tobytes()


def test_filled_texts_skips_a_nulls_bytes():
    # Arrow lets a null slot span bytes; read as empty all the same
    offsets = pa.py_buffer(np.array([0, 3, 6], np.int32))
    bitmap = pa.py_buffer(np.packbits([True, False], bitorder="little"))
    texts = pa.Array.from_buffers(pa.string(), 2, [bitmap, offsets, pa.py_buffer(b"abcxyz")], 1)
    offsets_out, data = filled_texts(texts)
    assert offsets_out.tolist() == [0, 3, 3]
    assert data[:3].tobytes() == b"abc"


@pytest.mark.parametrize("texts", ARRAYS, ids=range(len(ARRAYS)))
def test_same_as_previous_is_arrows_equal(texts):
    whole = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    want = pc.fill_null(pc.equal(whole[1:], whole[:-1]), False).to_numpy(zero_copy_only=False)
    assert same_as_previous(texts).tolist() == want.tolist()


@pytest.mark.parametrize("texts", ARRAYS, ids=range(len(ARRAYS)))
def test_valid_mask_is_arrows_is_valid(texts):
    whole = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    mask = valid_mask(whole)
    want = whole.is_valid().to_numpy(zero_copy_only=False)
    assert (np.ones(len(whole), np.bool_) if mask is None else mask).tolist() == want.tolist()


@pytest.mark.parametrize("flags", [2, 4])
def test_filter_texts_refuses_flags_not_one_per_text(flags):
    # as Arrow's filter does: a longer mask read memory past the texts
    texts = pa.array(["a", "b", "c"])
    with pytest.raises(ValueError, match="flags for 3 texts"):
        filter_texts(texts, np.ones(flags, np.bool_))
    with pytest.raises(ValueError, match="not a flag per text"):
        kernels.functions().kept_texts(
            *kernels.text_buffers(texts), np.ones(flags, np.uint8), np.empty(4, np.int64)
        )
