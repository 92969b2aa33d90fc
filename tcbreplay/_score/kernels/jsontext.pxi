# Canonical JSON text read as bytes: arguments objects and their values (part of _compiled.pyx).
#
# Scoring reads every arguments text through DuckDB's JSON writer, which writes a value one
# way only: minified, each string escaped the same way, an integer as its digits. So two
# strings (or keys) are equal exactly when their escaped bytes are, and two integers when
# their texts are. The functions here split an object into its members and apply the spec's
# equality to two member values, over data[lo:hi] byte ranges (no Python object per value).
# Numbers that are not both integers are read with the C library's strtod_l in the C locale
# (words.h), which rounds correctly, as Python's float() does.

# kinds of values as the spec sees them
cdef enum:
    K_INT, K_FLOAT, K_BOOL, K_STR, K_NULL, K_NESTED
# value_equal's third answer: both values are lists or objects that are not the same text
cdef enum:
    UNDECIDED = 2

cdef enum:
    QUOTE = 34
    BACKSLASH = 92
    COMMA = 44
    COLON = 58
    OPEN_OBJECT = 123
    CLOSE_OBJECT = 125
    OPEN_LIST = 91
    CLOSE_LIST = 93
    MINUS = 45
    ZERO = 48
    NINE = 57


cdef inline bint is_space(uint8_t c) noexcept nogil:
    return c == 32 or c == 9 or c == 10 or c == 13


cdef inline Py_ssize_t skip_space(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    while p < end and is_space(data[p]):
        p += 1
    return p


cdef inline Py_ssize_t skip_string(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """Past the string that opens at p (its closing quote included)."""
    cdef uint8_t c
    p += 1
    while p < end:
        c = data[p]
        if c == BACKSLASH:
            p += 2
        elif c == QUOTE:
            return p + 1
        else:
            p += 1
    return end


cdef inline Py_ssize_t skip_value(const uint8_t *data, Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """Past the value that starts at p."""
    cdef uint8_t c = data[p]
    cdef Py_ssize_t depth = 0
    if c == QUOTE:
        return skip_string(data, p, end)
    if c == OPEN_OBJECT or c == OPEN_LIST:
        while p < end:
            c = data[p]
            if c == QUOTE:
                p = skip_string(data, p, end)
                continue
            if c == OPEN_OBJECT or c == OPEN_LIST:
                depth += 1
            elif c == CLOSE_OBJECT or c == CLOSE_LIST:
                depth -= 1
                if depth == 0:
                    return p + 1
            p += 1
        return end
    while p < end:
        c = data[p]
        if c == COMMA or c == CLOSE_OBJECT or c == CLOSE_LIST or is_space(c):
            break
        p += 1
    return p


cdef inline Py_ssize_t split_object_at(
    const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi, int64_t *spans, Py_ssize_t rows
) noexcept nogil:
    """Write the members of the object text data[lo:hi] into spans (rows of 4: key start and
    end without its quotes, value start and end) and return how many there are: 0 for
    anything but an object, -1 when spans has too few rows."""
    cdef Py_ssize_t p = skip_space(data, lo, hi)
    cdef Py_ssize_t n = 0, key_end, value_end
    if p >= hi or data[p] != OPEN_OBJECT:
        return 0
    p = skip_space(data, p + 1, hi)
    while p < hi and data[p] == QUOTE:
        if n == rows:
            return -1
        key_end = skip_string(data, p, hi)
        spans[4 * n] = p + 1
        spans[4 * n + 1] = key_end - 1
        p = skip_space(data, key_end, hi)
        if p < hi and data[p] == COLON:
            p = skip_space(data, p + 1, hi)
        if p >= hi:
            break
        value_end = skip_value(data, p, hi)
        spans[4 * n + 2] = p
        spans[4 * n + 3] = value_end
        n += 1
        p = skip_space(data, value_end, hi)
        if p < hi and data[p] == COMMA:
            p = skip_space(data, p + 1, hi)
    return n


cdef inline bint same_bytes(
    const uint8_t *x, Py_ssize_t x_lo, Py_ssize_t x_hi,
    const uint8_t *y, Py_ssize_t y_lo, Py_ssize_t y_hi,
) noexcept nogil:
    if x_hi - x_lo != y_hi - y_lo:
        return False
    return memcmp(x + x_lo, y + y_lo, x_hi - x_lo) == 0


cdef inline int kind_of(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """The kind of the value text data[lo:hi]: an integer is -?[0-9]+, any other number (NaN
    and the infinities, in any spelling DuckDB keeps) a float."""
    cdef uint8_t c = data[lo], second
    cdef Py_ssize_t p
    if c == QUOTE:
        return K_STR
    if c == OPEN_OBJECT or c == OPEN_LIST:
        return K_NESTED
    if hi - lo >= 2:
        second = data[lo + 1]
        if (c == 116 and second == 114) or (c == 102 and second == 97):  # true, false
            return K_BOOL
        if c == 110 and second == 117:  # null (not nan)
            return K_NULL
    p = lo + 1 if c == MINUS else lo
    if p >= hi:
        return K_FLOAT
    while p < hi:
        if data[p] < ZERO or data[p] > NINE:
            return K_FLOAT
        p += 1
    return K_INT


cdef inline bint has_nan(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Whether data[lo:hi] may hold a NaN: the letters n, a, n in any case (which a NaN in
    any spelling has, and no other number word)."""
    cdef Py_ssize_t p
    for p in range(lo, hi - 2):
        if data[p] | 32 == 110 and data[p + 1] | 32 == 97 and data[p + 2] | 32 == 110:
            return True
    return False


cdef inline bint is_nan_text(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Whether the number text data[lo:hi] is a NaN (of the number words, only a NaN has an
    a, in either case)."""
    cdef Py_ssize_t p
    for p in range(lo, hi):
        if data[p] | 32 == 97:
            return True
    return False


# powers of ten a double holds exactly, for number_of's fast path
cdef double POW10[16]
for _k in range(16):
    POW10[_k] = 10.0 ** _k


cdef inline double number_of(
    const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi, uint8_t *scratch
) noexcept nogil:
    """The number text data[lo:hi] as a double, through scratch (room for the text and a
    terminating zero byte). A plain decimal of at most 15 digits (-?digits[.digits]) is its
    digits as an integer over a power of ten: both exact in a double, so the division
    rounds correctly, as strtod does (Clinger's fast path); anything else goes to strtod."""
    cdef Py_ssize_t p = lo, digits = 0, frac = -1
    cdef uint64_t mantissa = 0
    cdef uint8_t c
    cdef bint negative = p < hi and data[p] == MINUS
    cdef double value
    if negative:
        p += 1
    if hi - p <= 16:
        while p < hi:
            c = data[p]
            if ZERO <= c <= NINE:
                mantissa = mantissa * 10 + (c - ZERO)
                digits += 1
                if frac >= 0:
                    frac += 1
            elif c == 46 and frac < 0 and digits > 0:  # the decimal point
                frac = 0
            else:
                break
            p += 1
        if p == hi and 0 < digits <= 15 and frac != 0:
            value = mantissa / POW10[frac if frac > 0 else 0]
            return -value if negative else value
    memcpy(scratch, data + lo, hi - lo)
    scratch[hi - lo] = 0
    return read_number(<const char *>scratch)


def read_number_text(const uint8_t[::1] data, Py_ssize_t lo, Py_ssize_t hi, uint8_t[::1] scratch):
    """number_of of data[lo:hi] (for tests)."""
    return number_of(&data[0], lo, hi, &scratch[0])


# how strings compare (tcbreplay._score.kernels.STRINGS_BFCL): exactly, or as BFCL does
cpdef enum:
    STRINGS_EXACT = 0
    STRINGS_BFCL = 1


cdef inline bint bfcl_dropped(uint8_t c) noexcept nogil:
    """A character BFCL drops from strings before comparing: space and ,./-_*^"""
    return (c == 32 or c == 44 or c == 46 or c == 47 or c == 45 or c == 95 or c == 42
            or c == 94)


cdef inline uint8_t bfcl_folded(uint8_t c) noexcept nogil:
    """An ASCII character as BFCL compares it: lowercased, ' read as "."""
    if 65 <= c <= 90:
        return c + 32
    return QUOTE if c == 39 else c


cdef inline int bfcl_strings_equal(
    const uint8_t *x, Py_ssize_t x_lo, Py_ssize_t x_hi,
    const uint8_t *y, Py_ssize_t y_lo, Py_ssize_t y_hi,
) noexcept nogil:
    """Two string texts (quotes included) compared as tcbreplay._score.metrics.normalized
    compares them with strings "bfcl", left to right: UNDECIDED at the first escape or
    non-ASCII byte met before they differ (Python lowercases those)."""
    cdef Py_ssize_t p = x_lo + 1, q = y_lo + 1, p_end = x_hi - 1, q_end = y_hi - 1
    cdef uint8_t c, d
    while True:
        while p < p_end and bfcl_dropped(x[p]):
            p += 1
        while q < q_end and bfcl_dropped(y[q]):
            q += 1
        if (p < p_end and (x[p] == BACKSLASH or x[p] >= 128)) or (
            q < q_end and (y[q] == BACKSLASH or y[q] >= 128)
        ):
            return UNDECIDED
        if p == p_end or q == q_end:
            return 1 if p == p_end and q == q_end else 0
        c, d = bfcl_folded(x[p]), bfcl_folded(y[q])
        if c != d:
            return 0
        p += 1
        q += 1


cdef inline Py_ssize_t list_start(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Where the first element of the list text data[lo:hi] starts; hi when the list is
    empty or the text no list."""
    cdef Py_ssize_t p = skip_space(data, lo, hi)
    if p >= hi or data[p] != OPEN_LIST:
        return hi
    p = skip_space(data, p + 1, hi)
    return hi if p >= hi or data[p] == CLOSE_LIST else p


cdef inline Py_ssize_t list_next(const uint8_t *data, Py_ssize_t end, Py_ssize_t hi) noexcept nogil:
    """Where the element after the one that ends at end starts; hi after the last."""
    cdef Py_ssize_t p = skip_space(data, end, hi)
    if p < hi and data[p] == COMMA:
        return skip_space(data, p + 1, hi)
    return hi


cdef inline int value_equal_at(
    const uint8_t *x, Py_ssize_t x_lo, Py_ssize_t x_hi,
    const uint8_t *y, Py_ssize_t y_lo, Py_ssize_t y_hi,
    double rel_tol, double abs_tol, uint8_t *scratch, Py_ssize_t scratch_size, int strings,
) noexcept nogil:
    """The spec's equality of two value texts: 1 equal, 0 not, UNDECIDED when both are lists
    or objects and their texts differ (or may hold a NaN). scratch: scratch_size bytes,
    which scratch_for sizes for any text; a number too long for it is left UNDECIDED, to
    Python. strings: STRINGS_EXACT or STRINGS_BFCL."""
    cdef int xk = kind_of(x, x_lo, x_hi), yk
    cdef double a, b
    if same_bytes(x, x_lo, x_hi, y, y_lo, y_hi):
        # the same text is the same value, which equals itself unless it is or holds a NaN
        if xk == K_NESTED:
            return UNDECIDED if has_nan(x, x_lo, x_hi) else 1
        if xk == K_FLOAT:
            return 0 if is_nan_text(x, x_lo, x_hi) else 1
        return 1
    yk = kind_of(y, y_lo, y_hi)
    if xk == K_NESTED and yk == K_NESTED:
        return UNDECIDED
    if (xk == K_INT or xk == K_FLOAT) and (yk == K_INT or yk == K_FLOAT) and not (
        xk == K_INT and yk == K_INT
    ):
        if x_hi - x_lo >= scratch_size or y_hi - y_lo >= scratch_size:
            return UNDECIDED
        a = number_of(x, x_lo, x_hi, scratch)
        b = number_of(y, y_lo, y_hi, scratch)
        if isnan(a) or isnan(b):
            return 0
        if isinf(a) or isinf(b):
            return 1 if a == b else 0
        return 1 if fabs(a - b) <= fmax(rel_tol * fmax(fabs(a), fabs(b)), abs_tol) else 0
    if strings == STRINGS_BFCL and xk == K_STR and yk == K_STR:
        return bfcl_strings_equal(x, x_lo, x_hi, y, y_lo, y_hi)
    # two different integer, string, bool or null texts, or values of different kinds
    return 0


cdef inline uint64_t key_hash(const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL  # FNV-1a
    cdef Py_ssize_t p
    for p in range(lo, hi):
        h = (h ^ data[p]) * 1099511628211ULL
    return h


ctypedef struct KeyHash:
    uint64_t hash
    Py_ssize_t member


cdef int by_hash(const void *x, const void *y) noexcept nogil:
    cdef uint64_t a = (<const KeyHash *>x).hash, b = (<const KeyHash *>y).hash
    return (a > b) - (a < b)


cdef inline bint repeats_a_key(const uint8_t *data, const int64_t *spans, Py_ssize_t n) noexcept nogil:
    """Whether the first n members in spans repeat a key."""
    cdef Py_ssize_t a, b
    cdef KeyHash *hashes
    if n > 64:
        hashes = <KeyHash *>malloc(n * sizeof(KeyHash))
        if hashes != NULL:
            return repeats_among_many(data, spans, n, hashes)
        # no memory for the hashes: compare pairwise, slowly
    for a in range(n):
        for b in range(a):
            if same_bytes(data, spans[4 * a], spans[4 * a + 1], data, spans[4 * b], spans[4 * b + 1]):
                return True
    return False


cdef bint repeats_among_many(
    const uint8_t *data, const int64_t *spans, Py_ssize_t n, KeyHash *hashes
) noexcept nogil:
    """repeats_a_key by sorting the keys' hashes (no pairwise comparison); frees hashes."""
    cdef Py_ssize_t k, m, a, b
    cdef bint found = False
    for k in range(n):
        hashes[k].hash = key_hash(data, spans[4 * k], spans[4 * k + 1])
        hashes[k].member = k
    qsort(hashes, n, sizeof(KeyHash), by_hash)
    for k in range(1, n):
        a = hashes[k].member
        # a run of equal hashes: compare this key with every one before it in the run
        m = k - 1
        while m >= 0 and hashes[m].hash == hashes[k].hash and not found:
            b = hashes[m].member
            found = same_bytes(data, spans[4 * a], spans[4 * a + 1], data, spans[4 * b], spans[4 * b + 1])
            m -= 1
        if found:
            break
    free(hashes)
    return found


def first_repeated_key(const int64_t[::1] offsets, const uint8_t[::1] data, const cbool[::1] checked):
    """The index of the first text not checked (data[offsets[k]:offsets[k + 1]]) that is an
    object repeating one of its own keys, or -1."""
    cdef Py_ssize_t k, n, rows, longest = 0, found = -1
    cdef int64_t *spans
    with nogil:
        for k in range(offsets.shape[0] - 1):
            if not checked[k]:
                longest = max(longest, offsets[k + 1] - offsets[k])
        rows = longest // 4 + 2  # a member takes 4 bytes or more
        spans = <int64_t *>malloc(rows * 4 * sizeof(int64_t))
        if spans != NULL:
            for k in range(offsets.shape[0] - 1):
                if checked[k]:
                    continue
                n = split_object_at(&data[0], offsets[k], offsets[k + 1], spans, rows)
                if n > 1 and repeats_a_key(&data[0], spans, n):
                    found = k
                    break
            free(spans)
    if spans == NULL:
        raise MemoryError()
    return found


# -- for tests: the helpers above on arrays ---------------------------------------------------


def split_object(const uint8_t[::1] data, Py_ssize_t lo, Py_ssize_t hi, int64_t[:, ::1] spans):
    """split_object_at, into spans (a row per member)."""
    if spans.shape[1] != 4:
        raise ValueError("spans needs 4 columns")
    return split_object_at(&data[0], lo, hi, &spans[0, 0], spans.shape[0])


def value_equal(
    const uint8_t[::1] x, Py_ssize_t x_lo, Py_ssize_t x_hi,
    const uint8_t[::1] y, Py_ssize_t y_lo, Py_ssize_t y_hi,
    double rel_tol, double abs_tol, uint8_t[::1] scratch, intptr_t c_locale, int strings=0,
):
    """value_equal_at of two value texts (c_locale: number_locale(); strings: 0 exact, 1
    bfcl)."""
    check_locale(c_locale)
    return value_equal_at(
        &x[0], x_lo, x_hi, &y[0], y_lo, y_hi, rel_tol, abs_tol, &scratch[0], scratch.shape[0],
        strings,
    )
