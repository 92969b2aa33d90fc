"""The compiled hot loops of scoring, and what callers need beside them.

The kernels are a C extension built with the package from Cython (``_compiled.pyx``, which
includes ``jsontext.pxi``, ``calls.pxi``, ``gold.pxi``, ``dashboard.pxi``, ``verdicts.pxi``,
``scoring.pxi`` and ``blocks.pxi``; ``words.h`` holds the few lines of plain C). They take
numpy arrays and release the GIL. This module holds what callers need beside them: the
constants the kernels declare (``cpdef enum`` in the .pxi files, read here from the compiled
module: declared once), the tools' parameter table and the kernels' options, and
:func:`functions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa

# The constants the kernels declare, read from them: the candidate table's columns (SAMPLE,
# AGENT, GOLD, TOOL, INVALID, VALID, MISSING, PENDING: scoring.pxi); how a call's name is
# written (NAME_NONE: left out or null, NAME_TEXT: a string without escapes, NAME_ESCAPED: a
# string with escapes, NAME_VALUE: any other value; calls.pxi); the members of a gold call
# read_gold numbers (GOLD_KEYS) and the rows of its table of extra members (EXTRA_CALL,
# EXTRA_MEMBER, EXTRA_LO, EXTRA_HI: gold.pxi); objects with more keys than
# MAX_KEYS are judged in Python, blocks of gold calls up to SMALL_BLOCK calls are paired over
# subsets of their calls (verdicts.pxi); how strings compare (KernelOptions.strings:
# STRINGS_EXACT, STRINGS_BFCL; jsontext.pxi).
try:
    from tcbreplay._score.kernels import _compiled
except ImportError:  # a source tree nobody installed: say so, not a traceback
    from tcbreplay.errors import EngineError

    raise EngineError(
        "tcbreplay's compiled kernels are not built (tcbreplay/_score/kernels/_compiled.pyx)",
        hint="install the package, which builds them: make install, or pip install -e .",
    ) from None
from tcbreplay._score.kernels._compiled import (
    AGENT,
    EXTRA_CALL,
    EXTRA_HI,
    EXTRA_LO,
    EXTRA_MEMBER,
    GOLD,
    GOLD_KEYS,
    INVALID,
    MAX_KEYS,
    MISSING,
    NAME_ESCAPED,
    NAME_NONE,
    NAME_TEXT,
    NAME_VALUE,
    PENDING,
    SAMPLE,
    SMALL_BLOCK,
    STRINGS_BFCL,
    STRINGS_EXACT,
    TOOL,
    VALID,
)

__all__ = [
    "AGENT", "EXTRA_CALL", "EXTRA_HI", "EXTRA_LO", "EXTRA_MEMBER", "GOLD", "GOLD_KEYS",
    "INVALID", "MAX_KEYS", "MISSING", "NAME_ESCAPED", "NAME_NONE", "NAME_TEXT", "NAME_VALUE",
    "PENDING", "SAMPLE", "SMALL_BLOCK", "STRINGS_BFCL", "STRINGS_EXACT", "TOOL",
    "VALID", "KernelOptions", "Params", "functions", "number_locale", "scratch_for",
    "text_buffers",
]  # fmt: skip


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
    integer: np.ndarray | None = None  # bool: the schema says "type": "integer"


@dataclass
class KernelOptions:
    """What ``score_samples`` takes beside the calls and the run's tools (None: none).

    ``strings``: STRINGS_EXACT or STRINGS_BFCL (which also takes no declared default);
    ``strict``: a float for an integer parameter is invalid unless gold's value for it is a
    float (``integer``: per parameter row of Params). Samples with tools of their own:
    ``set`` (int32 per sample, -1: the run's tools), and set k's tools as rows
    ``set_first[k]:set_first[k + 1]`` of ``set_code`` (int32 name codes), ``set_lo`` and
    ``set_hi`` (their parameter rows in Params). Gold rules: per gold call its accept,
    optional and compare texts (canonical JSON; empty: none) as offsets and bytes, its block
    number in its sample (``g_block``, int32), and per sample whether a block holds two or
    more calls (``grouped``, bool).
    """

    strings: int = STRINGS_EXACT
    strict: bool = False
    integer: np.ndarray | None = None
    set: np.ndarray | None = None
    set_first: np.ndarray | None = None
    set_code: np.ndarray | None = None
    set_lo: np.ndarray | None = None
    set_hi: np.ndarray | None = None
    accept_offsets: np.ndarray | None = None
    accept_data: np.ndarray | None = None
    optional_offsets: np.ndarray | None = None
    optional_data: np.ndarray | None = None
    compare_offsets: np.ndarray | None = None
    compare_data: np.ndarray | None = None
    g_block: np.ndarray | None = None
    grouped: np.ndarray | None = None


def functions() -> ModuleType:
    """The kernels (``score_samples``, ``choose_pairs`` ...): the extension module."""
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
