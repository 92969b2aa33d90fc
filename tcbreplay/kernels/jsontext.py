"""Canonical JSON text read as bytes by compiled code: arguments objects and their values.

Scoring reads every arguments text through DuckDB's JSON writer, which writes a value one
way only: minified, each string escaped the same way, an integer as its digits. So two
strings (or keys) are equal exactly when their escaped bytes are, and two integers when
their texts are. The functions here split an object into its members and apply the
spec's equality to two member values, over ``data[lo:hi]`` byte ranges, compiled with
numba (no Python object per value). Numbers that are not both integers are read with the
C library's ``strtod_l`` in the C locale, which rounds correctly, as Python's ``float()``
does.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from tcbreplay.kernels.compiled import inline, jit

# kinds of values as the spec sees them
INT, FLOAT, BOOL, STR, NULL, NESTED = range(6)
# value_equal's third answer: both values are lists or objects that are not the same text
UNDECIDED = 2

_QUOTE, _BACKSLASH, _COMMA, _COLON = 34, 92, 44, 58
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_LIST, _CLOSE_LIST = 123, 125, 91, 93
_MINUS, _ZERO, _NINE = 45, 48, 57


@intrinsic
def _strtod_l(typingctx, address, locale):  # type: ignore[no-untyped-def]
    """``strtod_l(address, NULL, locale)``: the C library's reading of the number text at
    ``address`` in ``locale`` (see :func:`tcbreplay.kernels.number_locale`)."""
    signature = types.float64(types.intp, types.intp)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        char_p = ir.IntType(8).as_pointer()
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.DoubleType(), [char_p, char_p.as_pointer(), char_p]),
            "strtod_l",
        )
        text = builder.inttoptr(args[0], char_p)
        handle = builder.inttoptr(args[1], char_p)
        return builder.call(function, [text, ir.Constant(char_p.as_pointer(), None), handle])

    return signature, codegen


@jit
def _is_space(c: int) -> bool:
    return c == 32 or c == 9 or c == 10 or c == 13


@jit
def skip_space(data: np.ndarray, p: int, end: int) -> int:
    while p < end and _is_space(data[p]):
        p += 1
    return p


@jit
def skip_string(data: np.ndarray, p: int, end: int) -> int:
    """Past the string that opens at ``p`` (its closing quote included)."""
    p += 1
    while p < end:
        c = data[p]
        if c == _BACKSLASH:
            p += 2
        elif c == _QUOTE:
            return p + 1
        else:
            p += 1
    return end


@inline
def skip_value(data: np.ndarray, p: int, end: int) -> int:
    """Past the value that starts at ``p``."""
    c = data[p]
    if c == _QUOTE:
        return skip_string(data, p, end)
    if c == _OPEN_OBJECT or c == _OPEN_LIST:
        depth = 0
        while p < end:
            c = data[p]
            if c == _QUOTE:
                p = skip_string(data, p, end)
                continue
            if c == _OPEN_OBJECT or c == _OPEN_LIST:
                depth += 1
            elif c == _CLOSE_OBJECT or c == _CLOSE_LIST:
                depth -= 1
                if depth == 0:
                    return p + 1
            p += 1
        return end
    while p < end:
        c = data[p]
        if c == _COMMA or c == _CLOSE_OBJECT or c == _CLOSE_LIST or _is_space(c):
            break
        p += 1
    return p


@inline
def split_object(data: np.ndarray, lo: int, hi: int, spans: np.ndarray) -> int:
    """Write the members of the object text ``data[lo:hi]`` into ``spans`` (one row per
    member: key start and end without its quotes, value start and end) and return how many
    there are: 0 for anything but an object, -1 when ``spans`` has too few rows."""
    p = skip_space(data, lo, hi)
    if p >= hi or data[p] != _OPEN_OBJECT:
        return 0
    p = skip_space(data, p + 1, hi)
    n = 0
    while p < hi and data[p] == _QUOTE:
        if n == spans.shape[0]:
            return -1
        key_end = skip_string(data, p, hi)
        spans[n, 0] = p + 1
        spans[n, 1] = key_end - 1
        p = skip_space(data, key_end, hi)
        if p < hi and data[p] == _COLON:
            p = skip_space(data, p + 1, hi)
        if p >= hi:
            break
        value_end = skip_value(data, p, hi)
        spans[n, 2] = p
        spans[n, 3] = value_end
        n += 1
        p = skip_space(data, value_end, hi)
        if p < hi and data[p] == _COMMA:
            p = skip_space(data, p + 1, hi)
    return n


@jit
def same_bytes(x: np.ndarray, x_lo: int, x_hi: int, y: np.ndarray, y_lo: int, y_hi: int) -> bool:
    if x_hi - x_lo != y_hi - y_lo:
        return False
    for k in range(x_hi - x_lo):
        if x[x_lo + k] != y[y_lo + k]:
            return False
    return True


@jit
def kind_of(data: np.ndarray, lo: int, hi: int) -> int:
    """The kind of the value text ``data[lo:hi]``: an integer is ``-?[0-9]+``, any other
    number (``NaN`` and the infinities, in any spelling DuckDB keeps) a float."""
    c = data[lo]
    if c == _QUOTE:
        return STR
    if c == _OPEN_OBJECT or c == _OPEN_LIST:
        return NESTED
    if hi - lo >= 2:
        second = data[lo + 1]
        if (c == 116 and second == 114) or (c == 102 and second == 97):  # true, false
            return BOOL
        if c == 110 and second == 117:  # null (not nan)
            return NULL
    p = lo + 1 if c == _MINUS else lo
    if p >= hi:
        return FLOAT
    while p < hi:
        if data[p] < _ZERO or data[p] > _NINE:
            return FLOAT
        p += 1
    return INT


@jit
def _has_nan(data: np.ndarray, lo: int, hi: int) -> bool:
    """Whether ``data[lo:hi]`` may hold a NaN: the letters n, a, n in any case (which a NaN
    in any spelling has, and no other number word)."""
    for p in range(lo, hi - 2):
        if data[p] | 32 == 110 and data[p + 1] | 32 == 97 and data[p + 2] | 32 == 110:
            return True
    return False


@inline
def number_of(data: np.ndarray, lo: int, hi: int, scratch: np.ndarray, c_locale: int) -> float:
    """The number text ``data[lo:hi]`` as a double (``scratch``: room for the text and a
    terminating zero byte, which :func:`tcbreplay.kernels.scratch_for` sizes; ``c_locale``:
    :func:`tcbreplay.kernels.number_locale`)."""
    size = hi - lo
    for k in range(size):
        scratch[k] = data[lo + k]
    scratch[size] = 0
    return _strtod_l(scratch.ctypes.data, c_locale)


@jit
def _is_nan_text(data: np.ndarray, lo: int, hi: int) -> bool:
    """Whether the number text ``data[lo:hi]`` is a NaN (of the number words, only a NaN
    has an a, in either case)."""
    for p in range(lo, hi):
        if data[p] | 32 == 97:
            return True
    return False


@inline
def value_equal(
    x: np.ndarray, x_lo: int, x_hi: int, y: np.ndarray, y_lo: int, y_hi: int,
    rel_tol: float, abs_tol: float, scratch: np.ndarray, c_locale: int,
) -> int:  # fmt: skip
    """The spec's equality of two value texts: 1 equal, 0 not, ``UNDECIDED`` when both are
    lists or objects and their texts differ (or may hold a NaN). ``scratch`` and
    ``c_locale``: see :func:`number_of`."""
    xk = kind_of(x, x_lo, x_hi)
    if same_bytes(x, x_lo, x_hi, y, y_lo, y_hi):
        # the same text is the same value, which equals itself unless it is or holds a NaN
        if xk == NESTED:
            return UNDECIDED if _has_nan(x, x_lo, x_hi) else 1
        if xk == FLOAT:
            return 0 if _is_nan_text(x, x_lo, x_hi) else 1
        return 1
    yk = kind_of(y, y_lo, y_hi)
    if xk == NESTED and yk == NESTED:
        return UNDECIDED
    if (xk == INT or xk == FLOAT) and (yk == INT or yk == FLOAT) and not (xk == INT and yk == INT):
        a = number_of(x, x_lo, x_hi, scratch, c_locale)
        b = number_of(y, y_lo, y_hi, scratch, c_locale)
        if np.isnan(a) or np.isnan(b):
            return 0
        if np.isinf(a) or np.isinf(b):
            return 1 if a == b else 0
        return 1 if abs(a - b) <= max(rel_tol * max(abs(a), abs(b)), abs_tol) else 0
    # two different integer, string, bool or null texts, or values of different kinds
    return 0


@jit
def _key_hash(data: np.ndarray, lo: int, hi: int) -> np.uint64:
    h = np.uint64(14695981039346656037)  # FNV-1a
    for p in range(lo, hi):
        h = (h ^ np.uint64(data[p])) * np.uint64(1099511628211)
    return h


@inline
def repeats_a_key(data: np.ndarray, spans: np.ndarray, n: int) -> bool:
    """Whether the first ``n`` members in ``spans`` repeat a key."""
    if n > 64:
        return _repeats_among_many(data, spans, n)
    for a in range(n):
        for b in range(a):
            if same_bytes(data, spans[a, 0], spans[a, 1], data, spans[b, 0], spans[b, 1]):
                return True
    return False


@jit
def _repeats_among_many(data: np.ndarray, spans: np.ndarray, n: int) -> bool:
    """:func:`repeats_a_key` by sorting the keys' hashes (no pairwise comparison)."""
    hashes = np.empty(n, dtype=np.uint64)
    for a in range(n):
        hashes[a] = _key_hash(data, spans[a, 0], spans[a, 1])
    order = np.argsort(hashes)
    for k in range(1, n):
        a = order[k]
        # a run of equal hashes: compare this key with every one before it in the run
        m = k - 1
        while m >= 0 and hashes[order[m]] == hashes[a]:
            if same_bytes(data, spans[a, 0], spans[a, 1], data, spans[order[m], 0],
                          spans[order[m], 1]):  # fmt: skip
                return True
            m -= 1
    return False


@jit
def first_repeated_key(offsets: np.ndarray, data: np.ndarray, checked: np.ndarray) -> int:
    """The index of the first text not ``checked`` (``data[offsets[k]:offsets[k + 1]]``) that
    is an object repeating one of its own keys, or -1."""
    longest = 0
    for k in range(offsets.shape[0] - 1):
        if not checked[k]:
            longest = max(longest, offsets[k + 1] - offsets[k])
    spans = np.empty((longest // 4 + 2, 4), dtype=np.int64)  # a member takes 4 bytes or more
    for k in range(offsets.shape[0] - 1):
        if checked[k]:
            continue
        n = split_object(data, offsets[k], offsets[k + 1], spans)
        if n > 1 and repeats_a_key(data, spans, n):
            return k
    return -1
