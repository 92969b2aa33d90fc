# The metric spec compiled: each sample's TSA and TP, its AHR candidate pairs with their
# argument verdicts, and the AHR pairing, in passes over flat call arrays (part of
# _compiled.pyx).
#
# The calls of a range of samples come flat, sorted by sample and call order: each sample's
# first call (a_first/g_first, one entry more than samples), each call's name as an integer
# code (encode_texts), and its arguments text as a byte range (canonical JSON, see
# jsontext.pxi). Tools' parameters come as tcbreplay._score.kernels.Params, by name code, and
# each pair's arguments are judged in verdicts.pxi.
#
# score_samples computes TSA and TP and judges every candidate pair: where a sample's name
# sequences are equal, the call-by-call pairs (the only pairing with the most pairs);
# elsewhere the same-name pairs on a longest common subsequence of the two sequences (a
# pairing with the most pairs uses no others). A pair whose verdict needs lists or objects
# compared, or an object of more than MAX_KEYS keys, is marked pending and judged in Python.
# choose_pairs then picks each sample's pairing by dynamic programming, preferring most
# pairs, fewest invalid, most valid, fewest missing, with the same walk back as
# tcbreplay._score.metrics.align_one_pairs.

# columns of the candidate table (tcbreplay._score.kernels.SAMPLE ...)
cpdef enum:
    SAMPLE, AGENT, GOLD, TOOL, INVALID, VALID, MISSING, PENDING, COLUMNS


# what score_all found: the candidate pairs written (-1: pairs has too few rows), and the
# first call whose arguments repeat a key (side 1 agent, 2 gold, 0 none)
ctypedef struct Candidates:
    Py_ssize_t found, side, call


cdef inline int64_t levenshtein(
    const int32_t *a_code, Py_ssize_t a, const int32_t *g_code, Py_ssize_t g,
    int64_t *row, int64_t *prev,
) noexcept nogil:
    """Edit distance of the name sequences a_code[:a] and g_code[:g]."""
    cdef Py_ssize_t r, c
    cdef int32_t x
    for c in range(g + 1):
        prev[c] = c
    for r in range(1, a + 1):
        row[0] = r
        x = a_code[r - 1]
        for c in range(1, g + 1):
            row[c] = min(prev[c] + 1, row[c - 1] + 1, prev[c - 1] + (0 if x == g_code[c - 1] else 1))
        memcpy(prev, row, (g + 1) * sizeof(int64_t))
    return prev[g]


cdef inline int32_t lcs_tables(
    const int32_t *a_code, Py_ssize_t a, const int32_t *g_code, Py_ssize_t g,
    int32_t *before, int32_t *after,
) noexcept nogil:
    """before[r * (g + 1) + c]: longest common subsequence of the first r agent and c gold
    names; after[...]: of the names from r and c on. Returns the LCS length."""
    cdef Py_ssize_t w = g + 1, r, c
    for r in range(a + 1):
        for c in range(g + 1):
            if r == 0 or c == 0:
                before[r * w + c] = 0
            elif a_code[r - 1] == g_code[c - 1]:
                before[r * w + c] = before[(r - 1) * w + c - 1] + 1
            else:
                before[r * w + c] = max(before[(r - 1) * w + c], before[r * w + c - 1])
    for r in range(a, -1, -1):
        for c in range(g, -1, -1):
            if r == a or c == g:
                after[r * w + c] = 0
            elif a_code[r] == g_code[c]:
                after[r * w + c] = after[(r + 1) * w + c + 1] + 1
            else:
                after[r * w + c] = max(after[(r + 1) * w + c], after[r * w + c + 1])
    return before[a * w + g]


cdef inline bint same_names(
    const int32_t *a_code, Py_ssize_t a, const int32_t *g_code, Py_ssize_t g
) noexcept nogil:
    """Whether a sample's agent and gold name sequences are equal."""
    return a == g and memcmp(a_code, g_code, a * sizeof(int32_t)) == 0


def score_samples(
    const int64_t[::1] a_first, const int32_t[::1] a_code, const int64_t[::1] a_offsets,
    const uint8_t[::1] a_data, const int64_t[::1] g_first, const int32_t[::1] g_code,
    const int64_t[::1] g_offsets, const uint8_t[::1] g_data, Py_ssize_t codes,
    const int64_t[::1] p_first, const int64_t[::1] key_offsets, const uint8_t[::1] key_data,
    const cbool[::1] has_default, const int64_t[::1] default_offsets,
    const uint8_t[::1] default_data, double rel_tol, double abs_tol, cbool[::1] a_checked,
    cbool[::1] g_checked, uint8_t[::1] scratch, intptr_t c_locale, int32_t[:, ::1] pairs,
    options=None,
):
    """Per sample: tsa (NaN without gold calls), tp, and whether the name sequences are
    equal; the candidate pairs, written into pairs (columns SAMPLE .. PENDING) in sample,
    agent call and gold call order, and how many there are (-1: pairs has too few rows); and
    the first call found whose arguments repeat a key, as (side, call): side 1 agent, 2 gold,
    0 none. Marks in a_checked and g_checked the calls whose arguments were split (and so
    checked for repeated keys). scratch: see scratch_for; c_locale: number_locale(); options:
    a tcbreplay._score.kernels.KernelOptions (how values compare, samples' own tools, gold
    rules), None for none."""
    cdef Py_ssize_t n = a_first.shape[0] - 1, s, a, g, longest_g = 0, longest_a = 0, cells = 1
    cdef Params params
    cdef Candidates result
    cdef const cbool[::1] integer_view, grouped_view
    cdef const int32_t[::1] set_view, set_code_view, block_view
    cdef const int64_t[::1] set_first_view, set_lo_view, set_hi_view
    cdef const int64_t[::1] accept_offsets_view, optional_offsets_view, compare_offsets_view
    cdef const uint8_t[::1] accept_data_view, optional_data_view, compare_data_view
    cdef int64_t[::1] counts_view
    cdef int64_t[:, ::1] block_rows_view
    check_locale(c_locale)
    if pairs.shape[1] != COLUMNS:
        raise ValueError(f"score_samples: pairs needs {COLUMNS} columns")
    params.integer = NULL
    params.strings = STRINGS_EXACT
    params.strict = False
    params.set = NULL
    params.accept_offsets = NULL
    params.compare_offsets = NULL
    params.g_block = NULL
    params.grouped = NULL
    if options is not None:
        params.strings = options.strings
        params.strict = options.strict
        if options.strict:
            integer_view = options.integer
            params.integer = &integer_view[0]
        if options.set is not None:
            set_view, set_first_view = options.set, options.set_first
            set_code_view, set_lo_view, set_hi_view = options.set_code, options.set_lo, options.set_hi
            params.set, params.set_first = &set_view[0], &set_first_view[0]
            params.set_code, params.set_lo = &set_code_view[0], &set_lo_view[0]
            params.set_hi = &set_hi_view[0]
        if options.accept_offsets is not None:
            accept_offsets_view, accept_data_view = options.accept_offsets, options.accept_data
            optional_offsets_view, optional_data_view = options.optional_offsets, options.optional_data
            block_view, grouped_view = options.g_block, options.grouped
            params.accept_offsets = &accept_offsets_view[0]
            params.accept_data = &accept_data_view[0]
            params.optional_offsets = &optional_offsets_view[0]
            params.optional_data = &optional_data_view[0]
            if options.compare_offsets is not None:
                compare_offsets_view = options.compare_offsets
                compare_data_view = options.compare_data
                params.compare_offsets = &compare_offsets_view[0]
                params.compare_data = &compare_data_view[0]
            params.g_block = &block_view[0]
            params.grouped = &grouped_view[0]
    with nogil:
        for s in range(n):
            a = a_first[s + 1] - a_first[s]
            g = g_first[s + 1] - g_first[s]
            longest_g = max(longest_g, g)
            longest_a = max(longest_a, a)
            if params.grouped != NULL and params.grouped[s]:
                continue  # no sequence tables
            if not same_names(&a_code[a_first[s]], a, &g_code[g_first[s]], g):
                cells = max(cells, (a + 1) * (g + 1))  # only these need the sequence tables
    tsa = np.empty(n)
    tp = np.empty(n)
    same = np.zeros(n, dtype=np.bool_)
    # work space: names seen per sample (gold, agent), the edit distance's rows, the
    # sequence tables, the members of three objects (agent, gold, gold's accept), and for
    # samples with blocks, a count per name and the block distance's rows
    seen = np.full((2, codes), -1, dtype=np.int64)
    rows = np.empty((2, longest_g + 1), dtype=np.int64)
    tables = np.empty((2, cells), dtype=np.int32)
    spans = np.empty((3, MAX_KEYS + 1, 4), dtype=np.int64)
    counts = np.zeros(max(codes, 1), dtype=np.int64)
    block_rows = np.empty((2, longest_a + 1), dtype=np.int64)
    cdef double[::1] tsa_view = tsa, tp_view = tp
    cdef cbool[::1] same_view = same
    cdef int64_t[:, ::1] seen_view = seen, rows_view = rows
    cdef int32_t[:, ::1] tables_view = tables
    cdef int64_t[:, :, ::1] spans_view = spans
    counts_view = counts
    block_rows_view = block_rows
    params.first = &p_first[0]
    params.codes = p_first.shape[0] - 1
    params.key_offsets = &key_offsets[0]
    params.key_data = &key_data[0]
    params.has_default = &has_default[0] if has_default.shape[0] else NULL
    params.default_offsets = &default_offsets[0]
    params.default_data = &default_data[0]
    params.rel_tol = rel_tol
    params.abs_tol = abs_tol
    params.scratch = &scratch[0]
    params.scratch_size = scratch.shape[0]
    with nogil:
        result = score_all(
            n, &a_first[0], &a_code[0], &a_offsets[0], &a_data[0], &g_first[0], &g_code[0],
            &g_offsets[0], &g_data[0], &params, &a_checked[0], &g_checked[0], &pairs[0, 0],
            pairs.shape[0], &tsa_view[0], &tp_view[0], &same_view[0], &seen_view[0, 0],
            &seen_view[1, 0], &rows_view[0, 0], &rows_view[1, 0], &tables_view[0, 0],
            &tables_view[1, 0], &spans_view[0, 0, 0], &spans_view[1, 0, 0],
            &spans_view[2, 0, 0], &counts_view[0], &block_rows_view[0, 0],
            &block_rows_view[1, 0],
        )
    return tsa, tp, same, result.found, result.side, result.call


cdef Candidates score_all(
    Py_ssize_t n, const int64_t *a_first, const int32_t *a_code, const int64_t *a_offsets,
    const uint8_t *a_data, const int64_t *g_first, const int32_t *g_code,
    const int64_t *g_offsets, const uint8_t *g_data, const Params *params, cbool *a_checked,
    cbool *g_checked, int32_t *pairs, Py_ssize_t room, double *tsa, double *tp, cbool *same,
    int64_t *gold_seen, int64_t *agent_seen, int64_t *row, int64_t *prev, int32_t *before,
    int32_t *after, int64_t *a_spans, int64_t *g_spans, int64_t *c_spans, int64_t *counts,
    int64_t *block_row, int64_t *block_prev,
) noexcept nogil:
    """score_samples into its outputs, with its work space."""
    cdef Candidates out
    cdef Py_ssize_t s, a0, g0, a, g, i, j, m = 0, distinct, hits, x, y, p_lo, p_hi
    cdef Py_ssize_t c_lo, c_hi, o_lo, o_hi, m_lo, m_hi
    cdef int32_t c, total
    cdef bint equal, grouped
    cdef Verdict v
    cdef int32_t *pair
    out.found, out.side, out.call = 0, 0, -1
    for s in range(n):
        a0, g0 = a_first[s], g_first[s]
        a, g = a_first[s + 1] - a0, g_first[s + 1] - g0
        # tsa: distinct gold names, and how many of them the agent called
        distinct, hits = 0, 0
        for j in range(g):
            if gold_seen[g_code[g0 + j]] != s:
                gold_seen[g_code[g0 + j]] = s
                distinct += 1
        for i in range(a):
            c = a_code[a0 + i]
            if gold_seen[c] == s and agent_seen[c] != s:
                agent_seen[c] = s
                hits += 1
        tsa[s] = hits / <double>distinct if distinct > 0 else NAN
        grouped = params.grouped != NULL and params.grouped[s]
        # with blocks, equal sequences still leave the pairing to choose
        equal = not grouped and same_names(a_code + a0, a, g_code + g0, g)
        same[s] = equal
        if a == 0 and g == 0:
            tp[s] = 1.0
        elif equal:
            tp[s] = 1.0 - 0 / <double>max(a, g)
        elif grouped:
            tp[s] = 1.0 - block_distance(
                a_code + a0, a, g_code + g0, g, params.g_block + g0, counts, block_prev,
                block_row,
            ) / <double>max(a, g)
        else:
            tp[s] = 1.0 - levenshtein(a_code + a0, a, g_code + g0, g, row, prev) / <double>max(a, g)
        if a == 0 or g == 0:
            continue
        total = 0
        if not equal and not grouped:
            total = lcs_tables(a_code + a0, a, g_code + g0, g, before, after)
        for i in range(a):
            c = a_code[a0 + i]
            for j in range(g):
                if equal:
                    if j != i:
                        continue
                elif c != g_code[g0 + j]:
                    continue
                elif not grouped and (
                    before[i * (g + 1) + j] + 1 + after[(i + 1) * (g + 1) + j + 1] != total
                ):
                    continue
                param_range(params, s, c, &p_lo, &p_hi)
                x, y = a0 + i, g0 + j
                c_lo = c_hi = o_lo = o_hi = m_lo = m_hi = 0
                if params.accept_offsets != NULL:
                    c_lo, c_hi = params.accept_offsets[y], params.accept_offsets[y + 1]
                    o_lo, o_hi = params.optional_offsets[y], params.optional_offsets[y + 1]
                    if params.compare_offsets != NULL:
                        m_lo, m_hi = params.compare_offsets[y], params.compare_offsets[y + 1]
                v = judge(
                    a_data, a_offsets[x], a_offsets[x + 1], g_data, g_offsets[y],
                    g_offsets[y + 1], p_lo, p_hi, params, a_spans, g_spans, c_spans, c_lo,
                    c_hi, o_lo, o_hi, m_lo, m_hi,
                )
                if v.repeated:
                    out.found, out.side, out.call = m, v.repeated, x if v.repeated == 1 else y
                    return out
                if not v.pending:
                    a_checked[x] = True
                    g_checked[y] = True
                if m == room:
                    out.found, out.side, out.call = -1, 0, -1
                    return out
                pair = pairs + m * COLUMNS
                pair[SAMPLE] = s
                pair[AGENT] = i
                pair[GOLD] = j
                pair[TOOL] = c
                pair[INVALID] = v.invalid
                pair[VALID] = v.valid
                pair[MISSING] = v.missing
                pair[PENDING] = v.pending
                m += 1
    out.found = m
    return out


cdef inline bint better(const int64_t *p, const int64_t *q) noexcept nogil:
    """Whether score row p beats row q (columns: pairs, -invalid, valid, -missing; compared
    in that order)."""
    cdef Py_ssize_t k
    for k in range(4):
        if p[k] != q[k]:
            return p[k] > q[k]
    return False


cdef inline void diagonal(const int64_t *cell, const int32_t *pair, int64_t *step) noexcept nogil:
    """step = the score at cell plus the candidate pair."""
    step[0] = cell[0] + 1
    step[1] = cell[1] - pair[INVALID]
    step[2] = cell[2] + pair[VALID]
    step[3] = cell[3] - pair[MISSING]


def choose_pairs(
    const int64_t[::1] a_first, const int64_t[::1] g_first, const cbool[::1] same,
    const int32_t[:, ::1] pairs, const int32_t[::1] g_block=None, const cbool[::1] grouped=None,
    Py_ssize_t small_block=SMALL_BLOCK,
):
    """Which candidate pairs (rows of pairs from score_samples, with their verdicts final)
    each sample's pairing chooses; g_block and grouped: the gold calls' block numbers and the
    samples with a block of two or more calls (see blocks.pxi), None for none; small_block:
    blocks of at most this many calls are solved over subsets of their calls."""
    cdef Py_ssize_t m = pairs.shape[0], cells = 1, r = 0, s, a, g, end
    cdef const int32_t *block_at = NULL
    cdef const cbool *grouped_at = NULL
    cdef int failed
    if pairs.shape[1] != COLUMNS:
        raise ValueError(f"choose_pairs: pairs needs {COLUMNS} columns")
    if not 0 <= small_block <= 20:
        raise ValueError("choose_pairs: small_block is 0 to 20")
    if grouped is not None and grouped.shape[0]:
        grouped_at = &grouped[0]
        block_at = &g_block[0]
    with nogil:
        while r < m:
            s = pairs[r, SAMPLE]
            a, g = a_first[s + 1] - a_first[s], g_first[s + 1] - g_first[s]
            if not same[s]:  # only these are aligned
                cells = max(cells, (a + 1) * (g + 1))
            while r < m and pairs[r, SAMPLE] == s:
                r += 1
    chosen = np.zeros(m, dtype=np.bool_)
    best = np.empty((cells, 4), dtype=np.int64)
    at = np.empty(cells, dtype=np.int64)
    cdef cbool[::1] chosen_view = chosen
    cdef int64_t[:, ::1] best_view = best
    cdef int64_t[::1] at_view = at
    with nogil:
        failed = choose_all(
            m, &a_first[0], &g_first[0], &same[0], &pairs[0, 0], &chosen_view[0],
            &best_view[0, 0], &at_view[0], block_at, grouped_at, small_block,
        )
    if failed:
        raise MemoryError()
    return chosen


cdef int choose_all(
    Py_ssize_t m, const int64_t *a_first, const int64_t *g_first, const cbool *same,
    const int32_t *pairs, cbool *chosen, int64_t *best, int64_t *at, const int32_t *g_block,
    const cbool *grouped, Py_ssize_t small_block,
) noexcept nogil:
    """choose_pairs into chosen, with its work space (best: 4 per cell); -1 when the memory
    for a sample with blocks runs out."""
    cdef Py_ssize_t r = 0, end, k, s, a, g, w, x, y, c, here, up, left, src, room = 0
    cdef int64_t step[4]
    cdef int64_t *space = NULL
    cdef int failed = 0
    while r < m:
        s = pairs[r * COLUMNS + SAMPLE]
        end = r
        while end < m and pairs[end * COLUMNS + SAMPLE] == s:
            end += 1
        if same[s]:
            for k in range(r, end):
                chosen[k] = True
            r = end
            continue
        a, g = a_first[s + 1] - a_first[s], g_first[s + 1] - g_first[s]
        if grouped != NULL and grouped[s]:
            if choose_blocks(
                a, g, g_block + g_first[s], pairs, r, end, small_block, chosen, &space, &room
            ) < 0:
                failed = -1
                break
            r = end
            continue
        w = g + 1
        for k in range(a * g):
            at[k] = -1
        for k in range(r, end):
            at[pairs[k * COLUMNS + AGENT] * g + pairs[k * COLUMNS + GOLD]] = k
        for x in range(a + 1):
            for y in range(g + 1):
                here = x * w + y
                if x == 0 or y == 0:
                    for c in range(4):
                        best[4 * here + c] = 0
                    continue
                up, left = (x - 1) * w + y, x * w + y - 1
                src = left if better(best + 4 * left, best + 4 * up) else up
                for c in range(4):
                    best[4 * here + c] = best[4 * src + c]
                k = at[(x - 1) * g + y - 1]
                if k >= 0:
                    diagonal(best + 4 * ((x - 1) * w + y - 1), pairs + k * COLUMNS, step)
                    if better(step, best + 4 * here):
                        for c in range(4):
                            best[4 * here + c] = step[c]
        x, y = a, g
        while x > 0 and y > 0:
            here = x * w + y
            k = at[(x - 1) * g + y - 1]
            if k >= 0:
                diagonal(best + 4 * ((x - 1) * w + y - 1), pairs + k * COLUMNS, step)
                if not better(step, best + 4 * here) and not better(best + 4 * here, step):
                    chosen[k] = True
                    x -= 1
                    y -= 1
                    continue
            up = (x - 1) * w + y
            if not better(best + 4 * here, best + 4 * up) and not better(best + 4 * up, best + 4 * here):
                x -= 1
            else:
                y -= 1
        r = end
    free(space)
    return failed


def sample_totals(Py_ssize_t n, const int32_t[:, ::1] pairs, const cbool[::1] chosen):
    """Per sample, over its chosen pairs: pairs, invalid, valid, missing (4 × n, a row
    each)."""
    cdef Py_ssize_t k, s
    totals = np.zeros((4, n), dtype=np.int64)
    cdef int64_t[:, ::1] t = totals
    with nogil:
        for k in range(pairs.shape[0]):
            if chosen[k]:
                s = pairs[k, SAMPLE]
                t[0, s] += 1
                t[1, s] += pairs[k, INVALID]
                t[2, s] += pairs[k, VALID]
                t[3, s] += pairs[k, MISSING]
    return totals


def picked(const int32_t[:, ::1] pairs, const cbool[::1] chosen):
    """The columns of the rows of pairs that chosen marks (a row per column)."""
    cdef Py_ssize_t k, c, m = 0, count = 0
    with nogil:
        for k in range(chosen.shape[0]):
            if chosen[k]:
                count += 1
    out = np.empty((pairs.shape[1], count), dtype=np.int64)
    cdef int64_t[:, ::1] o = out
    with nogil:
        for k in range(chosen.shape[0]):
            if chosen[k]:
                for c in range(pairs.shape[1]):
                    o[c, m] = pairs[k, c]
                m += 1
    return out


def tool_totals(
    Py_ssize_t codes, const int32_t[::1] a_code, const int32_t[::1] g_code,
    const int64_t[:, ::1] chosen_pairs,
):
    """Per name code: gold calls, agent calls, chosen pairs (columns of picked), and their
    invalid, total and missing arguments (codes × 6)."""
    cdef Py_ssize_t k, t
    totals = np.zeros((codes, 6), dtype=np.int64)
    cdef int64_t[:, ::1] o = totals
    with nogil:
        for k in range(g_code.shape[0]):
            o[g_code[k], 0] += 1
        for k in range(a_code.shape[0]):
            o[a_code[k], 1] += 1
        for k in range(chosen_pairs.shape[1]):
            t = chosen_pairs[TOOL, k]
            o[t, 2] += 1
            o[t, 3] += chosen_pairs[INVALID, k]
            o[t, 4] += chosen_pairs[INVALID, k] + chosen_pairs[VALID, k]
            o[t, 5] += chosen_pairs[MISSING, k]
    return totals


def encode_texts(
    const int64_t[::1] offsets, const uint8_t[::1] data, int64_t[::1] slots,
    int64_t[::1] dict_offsets, uint8_t[::1] dict_data, int64_t[::1] state, int32_t[::1] codes,
):
    """Give each text data[offsets[k]:offsets[k + 1]] an integer code in codes, the same for
    the same bytes, new codes numbered on from state[0]; each code's text is kept in
    dict_offsets/dict_data (state[1] bytes used). slots: an open addressing table (a power
    of two long, -1 where empty) shared between calls. Returns False, having coded only some
    texts, when slots would be more than half full or the dictionary out of room."""
    cdef Py_ssize_t k, lo, hi, slot, mask = slots.shape[0] - 1
    cdef int64_t c, used, n
    cdef bint done = True
    with nogil:
        for k in range(offsets.shape[0] - 1):
            lo, hi = offsets[k], offsets[k + 1]
            slot = <Py_ssize_t>(key_hash(&data[0], lo, hi) & <uint64_t>mask)
            while True:
                c = slots[slot]
                if c < 0:
                    n, used = state[0], state[1]
                    if 2 * (n + 1) > slots.shape[0] or n + 2 > dict_offsets.shape[0]:
                        done = False
                        break
                    if used + hi - lo > dict_data.shape[0]:
                        done = False
                        break
                    memcpy(&dict_data[used], &data[lo], hi - lo)
                    dict_offsets[n + 1] = used + hi - lo
                    state[0], state[1] = n + 1, used + hi - lo
                    slots[slot] = n
                    codes[k] = n
                    break
                if same_bytes(&dict_data[0], dict_offsets[c], dict_offsets[c + 1], &data[0], lo, hi):
                    codes[k] = c
                    break
                slot = (slot + 1) & mask
            if not done:
                break
    return done


def positions(const int64_t[::1] order, const int64_t[::1] index):
    """Each index's position in the sorted, unique order, and whether it is there."""
    cdef Py_ssize_t n = order.shape[0], k, at, lo, hi, mid
    cdef bint consecutive
    s = np.zeros(index.shape[0], dtype=np.int64)
    known = np.zeros(index.shape[0], dtype=np.bool_)
    if n == 0:
        return s, known
    cdef int64_t[::1] s_view = s
    cdef cbool[::1] known_view = known
    with nogil:
        consecutive = order[n - 1] - order[0] == n - 1  # then a position is an offset
        for k in range(index.shape[0]):
            if consecutive:
                at = index[k] - order[0]
            else:  # numpy's searchsorted, side left: the first position not below it
                lo, hi = 0, n
                while lo < hi:
                    mid = (lo + hi) // 2
                    if order[mid] < index[k]:
                        lo = mid + 1
                    else:
                        hi = mid
                at = lo
            s_view[k] = at
            known_view[k] = 0 <= at < n and order[min(max(at, 0), n - 1)] == index[k]
    return s, known


def in_call_order(const int64_t[::1] s, const int64_t[::1] position):
    """Whether call rows are in sample and message order (the calls of one message share its
    position)."""
    cdef Py_ssize_t k
    cdef bint ordered = True
    with nogil:
        for k in range(1, s.shape[0]):
            if s[k] < s[k - 1] or (s[k] == s[k - 1] and position[k] < position[k - 1]):
                ordered = False
                break
    return ordered
