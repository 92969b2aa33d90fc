"""The dashboard file's samples as JSON text, written by compiled code.

Each listed sample becomes one object, ``{"input": ..., "output": {"tool_call_names":
[...], "tool_call_args": [...]}, "target": {...}}``, minified, the samples joined by a
comma, a newline and a tab. Inputs and names are written as JSON strings the way
Python's ``json.dumps(..., ensure_ascii=False)`` writes them (a quote, a backslash and the
control characters escaped, every other character as its UTF-8 bytes); argument texts are
canonical JSON already and are copied as they are.
"""

from __future__ import annotations

import numpy as np

from tcbreplay.kernels.compiled import (
    BACKSLASHES,
    HIGHS,
    ONES,
    QUOTES,
    inline,
    jit,
    load_u64,
    store_u64,
)

_QUOTE, _BACKSLASH, _SPACE = 34, 92, 32
_SPACES = np.uint64(0x2020202020202020)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
# the pieces between the values of a sample, and between samples
_INPUT = np.frombuffer(b'{"input":', dtype=np.uint8)
_OUTPUT = np.frombuffer(b',"output":{"tool_call_names":[', dtype=np.uint8)
_ARGS = np.frombuffer(b'],"tool_call_args":[', dtype=np.uint8)
_TARGET = np.frombuffer(b']},"target":{"tool_call_names":[', dtype=np.uint8)
_END = np.frombuffer(b"]}}", dtype=np.uint8)
_NULL = np.frombuffer(b"null", dtype=np.uint8)
_BETWEEN = np.frombuffer(b",\n\t", dtype=np.uint8)


@inline
def _short_escape(b):
    """The letter of a control character's two-byte escape (``\\n``), or 0 if it has none."""
    if b == 8:
        return 98  # b
    if b == 9:
        return 116  # t
    if b == 10:
        return 110  # n
    if b == 12:
        return 102  # f
    if b == 13:
        return 114  # r
    return 0


@inline
def _plain(word):
    """Whether none of the 8 bytes of ``word`` is escaped in a JSON string (a quote, a
    backslash, a control character): the bit tricks' tests for a byte of each kind are
    exact for whether the word holds one."""
    quote = word ^ QUOTES
    slash = word ^ BACKSLASHES
    hits = (quote - ONES) & ~quote | (slash - ONES) & ~slash | (word - _SPACES) & ~word
    return hits & HIGHS == 0


@inline
def _extra(b):
    """The bytes the escape of ``b`` adds."""
    if b == _QUOTE or b == _BACKSLASH:
        return 1
    if b < _SPACE:
        return 1 if _short_escape(b) else 5
    return 0


@inline
def _string_width(data, lo, hi):
    """The bytes of ``data[lo:hi]`` written as a JSON string, quotes included; eight bytes
    at a time while eight remain."""
    width = hi - lo + 2
    base = data.ctypes.data
    p = lo
    while p < hi:
        if p + 8 <= hi and _plain(load_u64(base + p)):
            p += 8
            continue
        for q in range(p, min(p + 8, hi)):
            width += _extra(data[q])
        p += 8
    return width


@inline
def _put_escaped(out, o, b):
    """Write byte ``b`` of a string's text at ``out[o]``, escaped if it needs to be."""
    if b >= _SPACE and b != _QUOTE and b != _BACKSLASH:
        out[o] = b
        return o + 1
    out[o] = _BACKSLASH
    if b >= _SPACE:
        out[o + 1] = b
        return o + 2
    if _short_escape(b):
        out[o + 1] = _short_escape(b)
        return o + 2
    out[o + 1] = 117  # \u00XX
    out[o + 2] = 48
    out[o + 3] = 48
    out[o + 4] = _HEX[b >> 4]
    out[o + 5] = _HEX[b & 15]
    return o + 6


@inline
def _put_string(out, o, data, lo, hi):
    """Write ``data[lo:hi]`` at ``out[o]`` as a JSON string; returns the end. Words without
    a byte to escape are copied whole (inside the string's own bytes of ``out``)."""
    out[o] = _QUOTE
    o += 1
    source, target = data.ctypes.data, out.ctypes.data
    p = lo
    while p < hi:
        if p + 8 <= hi:
            word = load_u64(source + p)
            if _plain(word):
                store_u64(target + o, word)
                o += 8
                p += 8
                continue
        for q in range(p, min(p + 8, hi)):
            o = _put_escaped(out, o, data[q])
        p += 8
    out[o] = _QUOTE
    return o + 1


@inline
def _put(out, o, piece):
    for k in range(piece.shape[0]):
        out[o + k] = piece[k]
    return o + piece.shape[0]


@inline
def _put_bytes(out, o, data, lo, hi):
    """Copy ``data[lo:hi]`` to ``out[o]``, eight bytes at a time while eight remain."""
    source, target = data.ctypes.data, out.ctypes.data
    p = lo
    while p + 8 <= hi:
        store_u64(target + o, load_u64(source + p))
        o += 8
        p += 8
    for q in range(p, hi):
        out[o] = data[q]
        o += 1
    return o


@inline
def _calls_width(s, first, name_offsets, names, args_offsets):
    """The bytes of sample ``s``'s names and arguments lists, without their brackets."""
    width = 0
    lo, hi = first[s], first[s + 1]
    for c in range(lo, hi):
        width += _string_width(names, name_offsets[c], name_offsets[c + 1])
        width += args_offsets[c + 1] - args_offsets[c]
    if hi > lo:
        width += 2 * (hi - lo - 1)  # the commas
    return width


@inline
def _put_calls(out, o, s, first, name_offsets, names, args_offsets, args):
    """Write sample ``s``'s names list, the piece between, and its arguments list."""
    lo, hi = first[s], first[s + 1]
    for c in range(lo, hi):
        if c > lo:
            out[o] = 44
            o += 1
        o = _put_string(out, o, names, name_offsets[c], name_offsets[c + 1])
    o = _put(out, o, _ARGS)
    for c in range(lo, hi):
        if c > lo:
            out[o] = 44
            o += 1
        o = _put_bytes(out, o, args, args_offsets[c], args_offsets[c + 1])
    return o


@jit
def dashboard_samples(
    listed, input_rows, input_offsets, inputs, has_input,
    a_first, a_name_offsets, a_names, a_args_offsets, a_args,
    g_first, g_name_offsets, g_names, g_args_offsets, g_args, out,
):  # fmt: skip
    """The samples ``listed`` (positions in a range of samples, ascending) as dashboard
    JSON text, joined by ``,\\n\\t``. The input of ``listed[k]`` is text ``input_rows[k]``
    of ``input_offsets`` and ``inputs`` (null where ``has_input`` is false); each side's
    calls are flat in sample and call order, sample ``s``'s calls ``first[s]:first[s + 1]``,
    with name and argument texts."""
    fixed = _INPUT.shape[0] + _OUTPUT.shape[0] + 2 * _ARGS.shape[0] + _TARGET.shape[0]
    fixed += _END.shape[0] + _BETWEEN.shape[0]
    size = 0
    for k in range(listed.shape[0]):
        s = listed[k]
        size += fixed
        row = input_rows[k]
        if has_input[row]:
            size += _string_width(inputs, input_offsets[row], input_offsets[row + 1])
        else:
            size += _NULL.shape[0]
        size += _calls_width(s, a_first, a_name_offsets, a_names, a_args_offsets)
        size += _calls_width(s, g_first, g_name_offsets, g_names, g_args_offsets)
    if size:
        size -= _BETWEEN.shape[0]  # none after the last sample
    if size > out.shape[0]:
        return -size
    o = 0
    for k in range(listed.shape[0]):
        s = listed[k]
        if k:
            o = _put(out, o, _BETWEEN)
        o = _put(out, o, _INPUT)
        row = input_rows[k]
        if has_input[row]:
            o = _put_string(out, o, inputs, input_offsets[row], input_offsets[row + 1])
        else:
            o = _put(out, o, _NULL)
        o = _put(out, o, _OUTPUT)
        o = _put_calls(out, o, s, a_first, a_name_offsets, a_names, a_args_offsets, a_args)
        o = _put(out, o, _TARGET)
        o = _put_calls(out, o, s, g_first, g_name_offsets, g_names, g_args_offsets, g_args)
        o = _put(out, o, _END)
    return size
