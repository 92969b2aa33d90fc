"""The compiled hot loops of scoring, and how they are loaded.

The kernels are Python functions compiled by numba (``scoring.py``, ``jsontext.py``,
``calls.py``, ``board.py``):

- ``make install`` compiles them ahead of time into an extension module beside them
  (``python -m tcbreplay.kernels.build``, numba's ``pycc``), which loads in a millisecond
  and without numba;
- otherwise, or when that module was built from other sources, they are compiled just in
  time by numba on first use and cached beside the sources; numba's import and first call
  then cost about 0.3 s of each process.

Either way the same source runs. This module holds what callers need without loading
either: the candidate table's columns, the tools' parameter table, and :func:`functions`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import locale
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow as pa

# columns of the candidate table
SAMPLE, AGENT, GOLD, TOOL, INVALID, VALID, MISSING, PENDING = range(8)
# how a call's name is written (see calls.py): left out or null, a string without escapes,
# a string with escapes, any other value
NAME_NONE, NAME_TEXT, NAME_ESCAPED, NAME_VALUE = range(4)
# objects with more keys than this are judged in Python (keys are matched pairwise there)
MAX_KEYS = 64
# the sources compiled, in the order they are hashed (see source_sha)
SOURCES = ("compiled.py", "jsontext.py", "calls.py", "board.py", "scoring.py")


@dataclass
class Params:
    """Every tool's parameters by name code: code ``t`` has rows ``first[t]:first[t + 1]``,
    each a parameter name (escaped JSON string text, without quotes) and its default
    (canonical JSON text) where ``has_default``."""

    first: np.ndarray  # int64, codes + 1
    key_offsets: np.ndarray
    key_data: np.ndarray
    has_default: np.ndarray  # bool
    default_offsets: np.ndarray
    default_data: np.ndarray


def source_sha() -> int:
    """A fingerprint of the kernels' sources (a signed 64-bit integer, which the
    ahead-of-time module returns from ``source_sha()``)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((Path(__file__).parent / name).read_bytes())
    return int.from_bytes(digest.digest()[:8], "little", signed=True)


@functools.cache
def functions() -> ModuleType:
    """The kernels (``score_samples``, ``choose_pairs`` ...): the ahead-of-time module when
    it was built from these sources, else the just-in-time ones."""
    try:
        from tcbreplay.kernels import _aot  # type: ignore[attr-defined]
    except ImportError:
        _aot = None
    if _aot is not None and _aot.source_sha() == source_sha():
        return _aot
    from tcbreplay.kernels import scoring

    return scoring


def ahead_of_time() -> bool:
    """Whether :func:`functions` are the ahead-of-time module."""
    return functions().__name__.endswith("_aot")


@functools.cache
def number_locale() -> int:
    """A handle of the C locale's number format, for reading numbers with ``strtod_l``:
    ``strtod`` would follow the process's locale, where a program that embeds tcbreplay may
    have set one that writes 1.5 as "1,5"."""
    libc = ctypes.CDLL(None)
    libc.newlocale.restype = ctypes.c_void_p
    libc.newlocale.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    handle = libc.newlocale(1 << locale.LC_NUMERIC, b"C", None)
    if not handle:
        raise OSError(ctypes.get_errno(), "newlocale() could not make the C locale")
    return int(handle)


def scratch_for(*offsets: np.ndarray) -> np.ndarray:
    """A buffer for reading numbers that holds any text of these offset tables, and a zero
    byte (see ``jsontext.number_of``)."""
    longest = max((int(np.diff(o).max(initial=0)) for o in offsets), default=0)
    return np.empty(longest + 1, dtype=np.uint8)


def text_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each text's first byte (one entry more than texts) and the bytes, without copying
    the bytes where the array allows."""
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = texts.cast(pa.large_string())
    _, offsets_buffer, data_buffer = texts.buffers()
    width = 4 if pa.types.is_string(texts.type) else 8
    offsets = np.frombuffer(
        offsets_buffer, dtype=np.int32 if width == 4 else np.int64,
        count=len(texts) + 1, offset=texts.offset * width,
    ).astype(np.int64)  # fmt: skip
    if data_buffer is None or data_buffer.size == 0:
        data_buffer = b"\0"  # compiled code needs an address, even for no bytes
    return offsets, np.frombuffer(data_buffer, dtype=np.uint8)
