"""The compiled hot loops of scoring, and what callers need beside them.

The kernels are a C extension built with the package from Cython (``_compiled.pyx``, which
includes ``jsontext.pxi``, ``calls.pxi``, ``board.pxi`` and ``scoring.pxi``; ``words.h``
holds the few lines of plain C). They take numpy arrays and release the GIL. This module
holds what callers need without loading them: the candidate table's columns, the tools'
parameter table, and :func:`functions`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa

# columns of the candidate table
SAMPLE, AGENT, GOLD, TOOL, INVALID, VALID, MISSING, PENDING = range(8)
# how a call's name is written (see calls.pxi): left out or null, a string without escapes,
# a string with escapes, any other value
NAME_NONE, NAME_TEXT, NAME_ESCAPED, NAME_VALUE = range(4)
# objects with more keys than this are judged in Python (keys are matched pairwise there)
MAX_KEYS = 64


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


@functools.cache
def functions() -> ModuleType:
    """The kernels (``score_samples``, ``choose_pairs`` ...): the extension module."""
    from tcbreplay._score.kernels import _compiled  # type: ignore[attr-defined]

    return _compiled


def number_locale() -> int:
    """The handle of the C locale's number format, which kernels that read numbers take as
    ``c_locale``: ``strtod`` would follow the process's locale, where a program that embeds
    tcbreplay may have set one that writes 1.5 as "1,5"."""
    return functions().number_locale()


def scratch_for(*offsets: np.ndarray) -> np.ndarray:
    """A buffer for reading numbers that holds any text of these offset tables, and a zero
    byte (see ``number_of`` in ``jsontext.pxi``)."""
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
