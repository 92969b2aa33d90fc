"""Arrow text arrays as scoring makes and reshapes them, by the kernels and NumPy.

Scoring does not import ``pyarrow.compute`` at the top of any of its modules: its import
takes about 45 ms, more than the whole work of scoring a 1,000-sample run, and scoring needs
it only for inputs out of the usual order (a run's messages unsorted, gold calls of a side,
a ``--tools`` focus), where it is imported in the function that uses it. Arrow's own
``filter``, ``take``, ``cast`` and ``fill_null`` import it too, so the reshaping the usual
path needs is here instead: :func:`filter_texts`, :func:`filled_texts`,
:func:`same_as_previous`, :func:`valid_mask`. ``tests/score/test_texts.py`` holds them to Arrow's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tcbreplay._score import kernels

# no bytes, at an address compiled code can take
_EMPTY = np.frombuffer(b"\0", np.uint8)[:0]


def texts_of(
    data: np.ndarray, lo: np.ndarray, hi: np.ndarray, fill: np.ndarray,
    valid: np.ndarray | None = None,
) -> pa.Array:  # fmt: skip
    """The byte ranges ``data[lo:hi]`` (``fill`` where ``lo`` is -1) as Arrow large strings,
    null where ``valid`` is False."""
    offsets = np.empty(len(lo) + 1, dtype=np.int64)
    out = kernels.functions().span_texts(data, lo, hi, fill, offsets)
    bitmap, nulls = validity(valid)
    return pa.Array.from_buffers(
        pa.large_string(), len(lo), [bitmap, pa.py_buffer(offsets), pa.py_buffer(out)], nulls
    )


def validity(valid: np.ndarray | None) -> tuple[pa.Buffer | None, int]:
    """Arrow's validity bitmap of ``valid`` (None when every entry is valid), and the nulls."""
    if valid is None:
        return None, 0
    nulls = len(valid) - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def valid_mask(texts: pa.Array) -> np.ndarray | None:
    """A bool per text of ``texts``, False where it is null; None when none is."""
    if not texts.null_count:
        return None
    bits = np.unpackbits(np.frombuffer(texts.buffers()[0], np.uint8), bitorder="little")
    return bits[texts.offset : texts.offset + len(texts)].astype(np.bool_)


def filter_texts(texts: pa.Array | pa.ChunkedArray, keep: np.ndarray) -> pa.Array:
    """The texts (strings or large strings) where ``keep`` (a bool per text) is True, nulls
    kept, as large strings: Arrow's ``texts.filter(keep)``."""
    texts = one_array(texts)
    offsets, data = kernels.text_buffers(texts)
    keep = np.ascontiguousarray(keep, dtype=np.bool_)
    if len(keep) != len(texts):
        raise ValueError(f"filter_texts: {len(keep)} flags for {len(texts)} texts")
    count = int(np.count_nonzero(keep))
    out_offsets = np.empty(count + 1, dtype=np.int64)
    out = kernels.functions().kept_texts(offsets, data, keep.view(np.uint8), out_offsets)
    valid = valid_mask(texts)
    bitmap, nulls = validity(None if valid is None else valid[keep])
    return pa.Array.from_buffers(
        pa.large_string(), count, [bitmap, pa.py_buffer(out_offsets), pa.py_buffer(out)], nulls
    )


def filled_texts(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kernels.text_buffers` of the texts with each null read as an empty text: of
    Arrow's ``texts.fill_null("")``."""
    texts = one_array(texts)
    offsets, data = kernels.text_buffers(texts)
    valid = valid_mask(texts)
    if valid is None:
        return offsets, data
    # a null's bytes may be any (Arrow does not say they are none)
    return kernels.text_buffers(
        texts_of(data, np.where(valid, offsets[:-1], -1), offsets[1:], _EMPTY)
    )


def same_as_previous(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A bool per text after the first: it equals the one before it, both not null (Arrow's
    ``equal(texts[1:], texts[:-1])`` with nulls as False)."""
    texts = one_array(texts)
    offsets, data = kernels.text_buffers(texts)
    valid = valid_mask(texts)
    out = np.zeros(max(len(texts) - 1, 0), dtype=np.uint8)
    kernels.functions().same_as_previous(
        offsets, data, np.ones(len(texts), np.uint8) if valid is None else valid.view(np.uint8), out
    )
    return out.view(np.bool_)


def one_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``texts`` as one array (its chunks put together)."""
    if isinstance(texts, pa.Array):
        return texts
    return texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
