"""How tcbreplay compiles its hot loops: numba, cached, without the GIL.

Compiled code is machine code for this machine, written once beside the sources (numba's
cache) and loaded by later processes. Two habits keep it fast:

- ``inline`` helpers are merged into their callers: a call between compiled functions
  that hands over arrays counts their references atomically, which costs more than the
  helper's own work when it runs once per call or per argument;
- arrays handed around inside a kernel are :func:`borrowed` (no reference counting at
  all); the kernel's caller keeps the memory alive for the call.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

jit = numba.njit(cache=True, nogil=True)
inline = numba.njit(cache=True, nogil=True, inline="always")

# eight bytes at once (see load_u64): a word's bytes equal to ``b`` are the zero bytes of
# ``word ^ (ONES * b)``, and ``(x - ONES) & ~x & HIGHS`` is not zero exactly when ``x`` has
# a zero byte
ONES = np.uint64(0x0101010101010101)
HIGHS = np.uint64(0x8080808080808080)
QUOTES = np.uint64(0x2222222222222222)
BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)


@intrinsic
def _pointer(typingctx, address, dtype):  # type: ignore[no-untyped-def]
    """The integer ``address`` as a pointer to ``dtype`` values."""
    pointer = types.CPointer(dtype.dtype)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(types.intp, dtype), codegen


@intrinsic
def load_u64(typingctx, address):  # type: ignore[no-untyped-def]
    """The 8 bytes at ``address`` (any alignment) as one little-endian integer."""
    signature = types.uint64(types.intp)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)

    return signature, codegen


@intrinsic
def store_u64(typingctx, address, word):  # type: ignore[no-untyped-def]
    """Write the integer ``word`` as the 8 bytes at ``address`` (any alignment)."""
    signature = types.void(types.intp, types.uint64)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.store(args[1], pointer, align=1)
        return context.get_dummy_value()

    return signature, codegen


@jit
def borrowed(array: np.ndarray) -> np.ndarray:
    """The same memory as an array that compiled code does not reference-count (``array``
    must be C-contiguous: the view has no strides of its own)."""
    if not array.flags.c_contiguous:
        raise ValueError("borrowed() needs a C-contiguous array")
    return numba.carray(_pointer(array.ctypes.data, array.dtype), array.shape)
