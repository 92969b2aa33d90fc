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
from numba import types
from numba.extending import intrinsic

jit = numba.njit(cache=True, nogil=True)
inline = numba.njit(cache=True, nogil=True, inline="always")


@intrinsic
def _pointer(typingctx, address, dtype):  # type: ignore[no-untyped-def]
    """The integer ``address`` as a pointer to ``dtype`` values."""
    pointer = types.CPointer(dtype.dtype)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(types.intp, dtype), codegen


@jit
def borrowed(array: np.ndarray) -> np.ndarray:
    """The same memory as an array that compiled code does not reference-count (``array``
    must be C-contiguous: the view has no strides of its own)."""
    if not array.flags.c_contiguous:
        raise ValueError("borrowed() needs a C-contiguous array")
    return numba.carray(_pointer(array.ctypes.data, array.dtype), array.shape)
