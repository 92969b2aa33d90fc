# Argument verdicts compiled: one candidate pair's arguments judged by the metric spec, with
# the tools' parameters (the run's, or a sample's own) and the gold call's rules (acceptable
# values, optional keys, the keys compared), over canonical JSON texts (part of _compiled.pyx;
# the spec in Python: tcbreplay._score.metrics.arg_verdicts).

# objects with more keys than this are judged in Python (which reads it as
# tcbreplay._score.kernels.MAX_KEYS: cpdef enums are declared here once)
cpdef enum:
    MAX_KEYS = 64
# blocks of gold calls up to this size are paired over subsets of their calls (blocks.pxi;
# tcbreplay._score.pairing pairs the same way in Python, with the same size)
cpdef enum:
    SMALL_BLOCK = 10


ctypedef struct Params:
    # tcbreplay._score.kernels.Params, and the number scratch: see value_equal_at
    const int64_t *first
    Py_ssize_t codes  # rows of first, less one
    const int64_t *key_offsets
    const uint8_t *key_data
    const cbool *has_default
    const int64_t *default_offsets
    const uint8_t *default_data
    const cbool *integer  # the parameter's schema says "type": "integer"
    double rel_tol
    double abs_tol
    uint8_t *scratch
    Py_ssize_t scratch_size
    int strings  # STRINGS_EXACT or STRINGS_BFCL
    bint strict  # types strict: a float for an integer parameter is invalid, but for gold's float
    # samples with tools of their own: set[s] (-1: the run's tools); set k's tools are rows
    # set_first[k]:set_first[k + 1] of set_code (a name code) and set_lo/set_hi (its
    # parameter rows); NULL: no sample has its own
    const int32_t *set
    const int64_t *set_first
    const int32_t *set_code
    const int64_t *set_lo
    const int64_t *set_hi
    # the gold calls' rules (canonical JSON texts; an empty text: none), their block numbers
    # within their sample, and the samples with a block of two or more calls; NULL: no rules
    const int64_t *accept_offsets
    const uint8_t *accept_data
    const int64_t *optional_offsets
    const uint8_t *optional_data
    const int64_t *compare_offsets
    const uint8_t *compare_data
    const int32_t *g_block
    const cbool *grouped


cdef inline void param_range(
    const Params *params, Py_ssize_t s, int32_t c, Py_ssize_t *lo, Py_ssize_t *hi
) noexcept nogil:
    """The parameter rows of the tool with name code c, as sample s sees the tools."""
    cdef Py_ssize_t k, r
    if params.set != NULL and params.set[s] >= 0:
        k = params.set[s]
        for r in range(params.set_first[k], params.set_first[k + 1]):
            if params.set_code[r] == c:
                lo[0], hi[0] = params.set_lo[r], params.set_hi[r]
                return
        lo[0], hi[0] = 0, 0
        return
    lo[0] = params.first[c] if c < params.codes else 0
    hi[0] = params.first[c + 1] if c < params.codes else 0


ctypedef struct Verdict:
    int64_t invalid, valid, missing, pending
    int repeated  # 1: the agent's object repeats a key, 2: gold's


cdef inline Py_ssize_t param_of(
    const uint8_t *data, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t p_lo, Py_ssize_t p_hi,
    const Params *params,
) noexcept nogil:
    """The parameter row (of p_lo:p_hi) named by the key text data[lo:hi], or -1."""
    cdef Py_ssize_t q
    for q in range(p_lo, p_hi):
        if same_bytes(data, lo, hi, params.key_data, params.key_offsets[q], params.key_offsets[q + 1]):
            return q
    return -1


cdef inline void counted(int equal, Verdict *v) noexcept nogil:
    """Count one argument's value_equal_at."""
    if equal == UNDECIDED:
        v.pending = 1
    elif equal == 1:
        v.valid += 1
    else:
        v.invalid += 1


cdef inline Py_ssize_t member_of(
    const uint8_t *data, const int64_t *spans, Py_ssize_t n,
    const uint8_t *key, Py_ssize_t lo, Py_ssize_t hi,
) noexcept nogil:
    """The member (of n in spans, over data) whose key text is key[lo:hi], or -1."""
    cdef Py_ssize_t m
    for m in range(n):
        if same_bytes(data, spans[4 * m], spans[4 * m + 1], key, lo, hi):
            return m
    return -1


cdef inline int any_acceptable(
    const uint8_t *a_data, Py_ssize_t v_lo, Py_ssize_t v_hi,
    const uint8_t *data, Py_ssize_t l_lo, Py_ssize_t l_hi, int known, const Params *params,
    const uint8_t *seen, Py_ssize_t s_lo, Py_ssize_t s_hi,
) noexcept nogil:
    """Whether the value a_data[v_lo:v_hi] equals an element of the list text data[l_lo:l_hi]:
    1 when one is equal, else UNDECIDED when known or a comparison is, else 0. An element
    whose text is seen[s_lo:s_hi] (gold's own value, compared already) is skipped."""
    cdef Py_ssize_t p = list_start(data, l_lo, l_hi), end
    cdef int equal, out = known
    while p < l_hi:
        end = skip_value(data, p, l_hi)
        if seen != NULL and same_bytes(data, p, end, seen, s_lo, s_hi):
            p = list_next(data, end, l_hi)
            continue
        equal = value_equal_at(
            a_data, v_lo, v_hi, data, p, end, params.rel_tol, params.abs_tol, params.scratch,
            params.scratch_size, params.strings,
        )
        if equal == 1:
            return 1
        if equal == UNDECIDED:
            out = UNDECIDED
        p = list_next(data, end, l_hi)
    return out


cdef inline bint listed(
    const uint8_t *data, Py_ssize_t l_lo, Py_ssize_t l_hi,
    const uint8_t *key, Py_ssize_t lo, Py_ssize_t hi,
) noexcept nogil:
    """Whether the list of strings data[l_lo:l_hi] holds the string whose text (escaped,
    without quotes) is key[lo:hi]."""
    cdef Py_ssize_t p = list_start(data, l_lo, l_hi), end
    while p < l_hi:
        end = skip_value(data, p, l_hi)
        if data[p] == QUOTE and same_bytes(data, p + 1, end - 1, key, lo, hi):
            return True
        p = list_next(data, end, l_hi)
    return False


cdef inline Verdict judge(
    const uint8_t *a_data, Py_ssize_t a_lo, Py_ssize_t a_hi,
    const uint8_t *g_data, Py_ssize_t g_lo, Py_ssize_t g_hi,
    Py_ssize_t p_lo, Py_ssize_t p_hi, const Params *params, int64_t *a_spans, int64_t *g_spans,
    int64_t *c_spans, Py_ssize_t c_lo, Py_ssize_t c_hi, Py_ssize_t o_lo, Py_ssize_t o_hi,
    Py_ssize_t m_lo, Py_ssize_t m_hi,
) noexcept nogil:
    """The verdict of one pair's arguments: the agent's object a_data[a_lo:a_hi], gold's
    g_data[g_lo:g_hi], the tool's parameter rows p_lo:p_hi, gold's acceptable values (the
    object params.accept_data[c_lo:c_hi]), optional keys (the list
    params.optional_data[o_lo:o_hi]) and the keys compared (the list
    params.compare_data[m_lo:m_hi]; empty texts: none, and every key compared). A key not
    compared is valid when the tool takes it, and never missing. pending: left to Python
    (which also looks for repeated keys)."""
    cdef Verdict v
    cdef Py_ssize_t na, ng, nc = 0, k, m, k_lo, k_hi, param, other, accepted, matched = 0
    cdef int equal, fallback
    cdef bint compares = m_hi > m_lo
    cdef uint64_t unmatched = 0
    v.invalid = v.valid = v.missing = v.pending = 0
    v.repeated = 0
    na = split_object_at(a_data, a_lo, a_hi, a_spans, MAX_KEYS + 1)
    if na < 0 or na > MAX_KEYS:
        v.pending = 1
        return v
    if na > 1 and repeats_a_key(a_data, a_spans, na):
        v.repeated = 1
        return v
    if same_bytes(a_data, a_lo, a_hi, g_data, g_lo, g_hi):
        # the same arguments: every key is in gold with the same text
        for k in range(na):
            param = param_of(a_data, a_spans[4 * k], a_spans[4 * k + 1], p_lo, p_hi, params)
            if param < 0:
                v.invalid += 1
                continue
            k_lo, k_hi = a_spans[4 * k + 2], a_spans[4 * k + 3]
            # (types strict holds nothing here: a float is gold's own value, so it passes)
            if compares and not listed(
                params.compare_data, m_lo, m_hi, a_data, a_spans[4 * k], a_spans[4 * k + 1]
            ):
                v.valid += 1
                continue
            equal = value_equal_at(
                a_data, k_lo, k_hi, a_data, k_lo, k_hi, params.rel_tol, params.abs_tol,
                params.scratch, params.scratch_size, params.strings,
            )
            counted(equal, &v)
        return v
    ng = split_object_at(g_data, g_lo, g_hi, g_spans, MAX_KEYS + 1)
    if ng < 0 or ng > MAX_KEYS:
        v.pending = 1
        return v
    if ng > 1 and repeats_a_key(g_data, g_spans, ng):
        v.repeated = 2
        return v
    if c_hi > c_lo:
        nc = split_object_at(params.accept_data, c_lo, c_hi, c_spans, MAX_KEYS + 1)
        if nc < 0 or nc > MAX_KEYS:
            v.pending = 1
            return v
    unmatched = (~(<uint64_t>0)) >> (64 - ng) if ng > 0 else 0
    for k in range(na):
        k_lo, k_hi = a_spans[4 * k], a_spans[4 * k + 1]
        param = param_of(a_data, k_lo, k_hi, p_lo, p_hi, params)
        other = member_of(g_data, g_spans, ng, a_data, k_lo, k_hi)
        if other >= 0:
            matched += 1
            unmatched &= ~((<uint64_t>1) << other)
        if param < 0:  # (a) no such parameter
            v.invalid += 1
            continue
        k_lo, k_hi = a_spans[4 * k + 2], a_spans[4 * k + 3]  # now the value
        if (
            params.strict and params.integer[param] and kind_of(a_data, k_lo, k_hi) == K_FLOAT
            and not (
                other >= 0
                and kind_of(g_data, g_spans[4 * other + 2], g_spans[4 * other + 3]) == K_FLOAT
            )
        ):  # a float for an integer parameter, unless gold's own value is a float
            v.invalid += 1
            continue
        if compares and not listed(
            params.compare_data, m_lo, m_hi, a_data, a_spans[4 * k], a_spans[4 * k + 1]
        ):
            v.valid += 1  # any value of a key not compared
            continue
        accepted = -1
        if nc > 0:
            accepted = member_of(
                params.accept_data, c_spans, nc, a_data, a_spans[4 * k], a_spans[4 * k + 1]
            )
        if other >= 0:  # (b) held against gold's value, then its other acceptable values
            equal = value_equal_at(
                a_data, k_lo, k_hi, g_data, g_spans[4 * other + 2], g_spans[4 * other + 3],
                params.rel_tol, params.abs_tol, params.scratch, params.scratch_size,
                params.strings,
            )
            if equal != 1 and accepted >= 0:
                equal = any_acceptable(
                    a_data, k_lo, k_hi, params.accept_data, c_spans[4 * accepted + 2],
                    c_spans[4 * accepted + 3], equal, params, g_data, g_spans[4 * other + 2],
                    g_spans[4 * other + 3],
                )
        else:  # (c) gold lacks the key: its acceptable values, then the declared default
            equal = 0
            if accepted >= 0:
                equal = any_acceptable(
                    a_data, k_lo, k_hi, params.accept_data, c_spans[4 * accepted + 2],
                    c_spans[4 * accepted + 3], 0, params, NULL, 0, 0,
                )
            # (BFCL's comparisons take no declared default: only its answer's values)
            if equal != 1 and params.has_default[param] and params.strings != STRINGS_BFCL:
                fallback = value_equal_at(
                    a_data, k_lo, k_hi, params.default_data, params.default_offsets[param],
                    params.default_offsets[param + 1], params.rel_tol, params.abs_tol,
                    params.scratch, params.scratch_size, params.strings,
                )
                if fallback == 1 or fallback == UNDECIDED:
                    equal = fallback
        counted(equal, &v)
    if o_hi > o_lo or compares:  # optional keys and keys not compared left out: not missing
        for m in range(ng):
            if not unmatched & ((<uint64_t>1) << m):
                continue
            if o_hi > o_lo and listed(
                params.optional_data, o_lo, o_hi, g_data, g_spans[4 * m], g_spans[4 * m + 1]
            ):
                matched += 1
            elif compares and not listed(
                params.compare_data, m_lo, m_hi, g_data, g_spans[4 * m], g_spans[4 * m + 1]
            ):
                matched += 1
    v.missing = ng - matched
    return v
