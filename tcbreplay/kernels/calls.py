"""Tool-call lists in canonical JSON text, split into each call's name and arguments.

Scoring has DuckDB write each AI message's ``data.tool_calls`` as JSON text (its writer
writes a value one way only: minified, every string escaped the same way) and splits the
lists here, reading each call as ``json_transform(..., '[{"name": "VARCHAR", "args":
"JSON"}]')`` would, without DuckDB building a value per call:

- a list's elements are its calls; text that is no list holds none;
- a call's name is its first ``name`` member: a string's characters, any other value's
  text (``5``, ``true``), nothing when it is ``null`` or left out; an element that is no
  object is a call without name or arguments;
- its arguments are the text of its first ``args`` member, none when ``null`` or left out.

A name string with escapes (``"a\\"b"``) is marked for its caller to read with DuckDB.
"""

from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from tcbreplay.kernels import NAME_ESCAPED, NAME_NONE, NAME_TEXT, NAME_VALUE
from tcbreplay.kernels.compiled import BACKSLASHES, HIGHS, ONES, QUOTES, jit, load_u64
from tcbreplay.kernels.jsontext import skip_space, skip_string, skip_value

_QUOTE, _BACKSLASH, _COMMA = 34, 92, 44
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_LIST, _CLOSE_LIST = 123, 125, 91, 93


@jit
def _skip_string(data: np.ndarray, p: int, end: int) -> int:
    """Past the string that opens at ``p`` (its closing quote included), eight bytes at a
    time while eight remain: a word's first quote or backslash is the lowest byte whose
    XOR with it is zero (the bit trick's false hits only follow a true one)."""
    base = data.ctypes.data
    p += 1
    while p + 8 <= end:
        word = load_u64(base + p)
        quote = word ^ QUOTES
        slash = word ^ BACKSLASHES
        hits = ((quote - ONES) & ~quote | (slash - ONES) & ~slash) & HIGHS
        if hits == 0:
            p += 8
            continue
        p += np.int64(trailing_zeros(hits) >> np.uint64(3))
        if data[p] == _QUOTE:
            return p + 1
        p += 2  # an escape: the backslash and the character it escapes
    return skip_string(data, p - 1, end) if p < end else end


@jit
def _is_null(data: np.ndarray, lo: int, hi: int) -> bool:
    return (
        hi - lo == 4
        and data[lo] == 110
        and data[lo + 1] == 117
        and data[lo + 2] == 108
        and data[lo + 3] == 108
    )


@jit
def _is_key(data: np.ndarray, lo: int, hi: int, first: int, rest: int) -> bool:
    """Whether the key text ``data[lo:hi]`` is ``name`` (``first`` n, ``rest`` 0) or ``args``
    (``first`` a, ``rest`` 1)."""
    if hi - lo != 4 or data[lo] != first:
        return False
    if rest == 0:
        return data[lo + 1] == 97 and data[lo + 2] == 109 and data[lo + 3] == 101  # "ame"
    return data[lo + 1] == 114 and data[lo + 2] == 103 and data[lo + 3] == 115  # "rgs"


@jit
def _has_escape(data: np.ndarray, lo: int, hi: int) -> bool:
    for p in range(lo, hi):
        if data[p] == _BACKSLASH:
            return True
    return False


@jit
def split_calls(offsets, data, row, name_kind, name_lo, name_hi, args_lo, args_hi):
    """Split the list texts ``data[offsets[k]:offsets[k + 1]]``; for each call in order,
    write its text's ``row`` k, its name (``name_kind``, span ``name_lo:name_hi``: the
    characters of a string without escapes, else the value's text) and its arguments'
    span ``args_lo:args_hi`` (-1: none). Returns how many calls there are, or -1
    when the output arrays are too short for them."""
    n = 0
    room = row.shape[0]
    for k in range(offsets.shape[0] - 1):
        end = offsets[k + 1]
        p = skip_space(data, offsets[k], end)
        if p >= end or data[p] != _OPEN_LIST:
            continue
        p = skip_space(data, p + 1, end)
        if p < end and data[p] == _CLOSE_LIST:
            continue
        while p < end:
            if n == room:
                return -1
            row[n] = k
            name_kind[n] = NAME_NONE
            name_lo[n] = 0
            name_hi[n] = 0
            args_lo[n] = -1
            args_hi[n] = -1
            if data[p] == _OPEN_OBJECT:
                seen_name = False
                seen_args = False
                p = skip_space(data, p + 1, end)
                while p < end and data[p] == _QUOTE:
                    key_end = _skip_string(data, p, end)
                    key_lo, key_hi = p + 1, key_end - 1
                    p = skip_space(data, key_end, end)
                    p = skip_space(data, p + 1, end)  # past the colon
                    if data[p] == _QUOTE:
                        value_end = _skip_string(data, p, end)
                    else:
                        value_end = skip_value(data, p, end)
                    if not seen_name and _is_key(data, key_lo, key_hi, 110, 0):
                        seen_name = True
                        if data[p] == _QUOTE:
                            if _has_escape(data, p + 1, value_end - 1):
                                name_kind[n] = NAME_ESCAPED
                                name_lo[n] = p
                                name_hi[n] = value_end
                            else:
                                name_kind[n] = NAME_TEXT
                                name_lo[n] = p + 1
                                name_hi[n] = value_end - 1
                        elif not _is_null(data, p, value_end):
                            name_kind[n] = NAME_VALUE
                            name_lo[n] = p
                            name_hi[n] = value_end
                    elif not seen_args and _is_key(data, key_lo, key_hi, 97, 1):
                        seen_args = True
                        if not _is_null(data, p, value_end):
                            args_lo[n] = p
                            args_hi[n] = value_end
                    p = skip_space(data, value_end, end)
                    if p < end and data[p] == _COMMA:
                        p = skip_space(data, p + 1, end)
                p += 1  # past the object's closing brace
            else:
                p = skip_value(data, p, end)
            n += 1
            p = skip_space(data, p, end)
            if p < end and data[p] == _COMMA:
                p = skip_space(data, p + 1, end)
            else:
                break
    return n


@jit
def span_texts(data, lo, hi, fill, offsets):
    """The texts ``data[lo[k]:hi[k]]`` end to end (``fill`` where ``lo[k]`` is -1), their
    starts written into ``offsets`` (one entry more than texts)."""
    size = 0
    for k in range(lo.shape[0]):
        offsets[k] = size
        size += fill.shape[0] if lo[k] < 0 else hi[k] - lo[k]
    offsets[lo.shape[0]] = size
    out = np.empty(max(size, 1), dtype=np.uint8)
    for k in range(lo.shape[0]):
        at = offsets[k]
        if lo[k] < 0:
            for b in range(fill.shape[0]):
                out[at + b] = fill[b]
        else:
            for b in range(hi[k] - lo[k]):
                out[at + b] = data[lo[k] + b]
    return out
