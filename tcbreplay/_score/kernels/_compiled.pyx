# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
# cython: cdivision=True
"""The scoring kernels, compiled with the package (see tcbreplay._score.kernels).

Each kernel takes numpy arrays, C-contiguous and of the dtypes scoring makes (others are
refused), reads them as plain pointers, and runs without the GIL: scoring runs a part's
kernels in threads side by side. The kernels trust their caller
for sizes that agree (offsets one entry longer than their texts, codes below the count of
codes, a flag per call), and say so when a table they fill has too few rows.
"""

from libc.math cimport NAN, fabs, fmax, isinf, isnan
from libc.stdbool cimport bool as cbool
from libc.stdint cimport INT64_MAX, int8_t, int32_t, int64_t, intptr_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memchr, memcmp, memcpy, strlen

import numpy as np


cdef extern from "words.h" nogil:
    uint64_t QUOTES, BACKSLASHES
    uint64_t load_u64(const uint8_t *p)
    void store_u64(uint8_t *p, uint64_t word)
    uint64_t zero_bytes(uint64_t x)
    uint64_t control_bytes(uint64_t word)
    int lowest_flagged_byte(uint64_t flags)
    ctypedef void *locale_t
    locale_t c_numeric
    int make_c_numeric()
    double read_number(const char *text)


if not make_c_numeric():
    raise OSError("newlocale() could not make the C locale")


def number_locale():
    """The handle of the C locale's number format that the kernels read numbers in (made
    once, when this module loads); kernels that read numbers take it as c_locale."""
    return <intptr_t>c_numeric


cdef int check_locale(intptr_t c_locale) except -1:
    if c_locale != <intptr_t>c_numeric:
        raise ValueError("c_locale: pass tcbreplay._score.kernels.number_locale()")
    return 0


include "jsontext.pxi"
include "calls.pxi"
include "gold.pxi"
include "dashboard.pxi"
include "verdicts.pxi"
include "scoring.pxi"
include "blocks.pxi"
