# Order-free gold blocks compiled: TP's edit distance and the AHR pairing of a sample whose gold
# calls come in blocks (part of _compiled.pyx; tcbreplay._score.pairing is the same in Python).
#
# A sample's gold calls carry block numbers 0, 1, ... (g_block; consecutive calls with one
# group share a block, every other call has its own). The edit distance lets each block's
# calls come in any order: a block of k calls against a run of L agent calls costs max(L, k)
# less the names they share. The pairing never goes back to an earlier block (listed by
# agent call); its counts (pairs, -invalid, valid, -missing) are best[b][x] over the first
# b blocks and x agent calls, a block of up to small_block calls solved over the subsets of
# its calls, a larger one as the best start of its agent calls plus an optimal assignment
# (the Hungarian algorithm, on these counts as a vector). The walk back is align_pairs'.

cdef int64_t block_distance(
    const int32_t *a_code, Py_ssize_t a, const int32_t *g_code, Py_ssize_t g,
    const int32_t *g_block, int64_t *counts, int64_t *prev, int64_t *row,
) noexcept nogil:
    """Edit distance of a_code[:a] and g_code[:g], each block of gold calls in any order.
    counts: zeros, one per name code (left zeros); prev, row: a + 1 each."""
    cdef Py_ssize_t x, x0, j = 0, j1, t, k
    cdef int64_t shared, cost
    cdef int32_t c
    for x in range(a + 1):
        prev[x] = x
    while j < g:
        j1 = j
        while j1 < g and g_block[j1] == g_block[j]:
            j1 += 1
        k = j1 - j
        for x in range(a + 1):
            row[x] = INT64_MAX
        for x0 in range(a + 1):
            for t in range(j, j1):
                counts[g_code[t]] += 1
            shared = 0
            for x in range(x0, a + 1):
                if x > x0:
                    c = a_code[x - 1]
                    if counts[c] > 0:
                        counts[c] -= 1
                        shared += 1
                cost = prev[x0] + max(x - x0, k) - shared
                if cost < row[x]:
                    row[x] = cost
            for t in range(j, j1):
                counts[g_code[t]] = 0
        memcpy(prev, row, (a + 1) * sizeof(int64_t))
        j = j1
    return prev[a]


# -- the counts of a pairing as 4-vectors (pairs, -invalid, valid, -missing) --------------------


cdef inline void v_zero(int64_t *d) noexcept nogil:
    d[0] = 0
    d[1] = 0
    d[2] = 0
    d[3] = 0


cdef inline void v_copy(int64_t *d, const int64_t *x) noexcept nogil:
    memcpy(d, x, 4 * sizeof(int64_t))


cdef inline void v_add(int64_t *d, const int64_t *x, const int64_t *y) noexcept nogil:
    cdef int c
    for c in range(4):
        d[c] = x[c] + y[c]


cdef inline void v_sub(int64_t *d, const int64_t *x, const int64_t *y) noexcept nogil:
    cdef int c
    for c in range(4):
        d[c] = x[c] - y[c]


cdef inline bint v_equal(const int64_t *x, const int64_t *y) noexcept nogil:
    return memcmp(x, y, 4 * sizeof(int64_t)) == 0


cdef inline void v_max(int64_t *d, const int64_t *x) noexcept nogil:
    """d = the better of d and x."""
    if better(x, d):
        v_copy(d, x)


cdef inline void v_weight(int64_t *d, const int32_t *pair) noexcept nogil:
    """The counts of one candidate pair."""
    d[0] = 1
    d[1] = -pair[INVALID]
    d[2] = pair[VALID]
    d[3] = -pair[MISSING]


ctypedef struct Blocks:
    # one sample's pairing problem and its work space (see choose_blocks)
    Py_ssize_t a, g, m, small
    const int64_t *at  # at[i * g + j]: the candidate row of agent call i and gold call j, or -1
    const int32_t *pairs
    int64_t *start  # the first gold call of each block (m + 1 entries)
    int64_t *best  # best[(b * (a + 1) + x) * 4 ...]
    int64_t *table  # subset tables, each (a + 1) * 2**k * 4, at table_at[b]
    int64_t *table_at  # per block: offset into table, or -1
    int64_t *hung  # the Hungarian algorithm's work space
    int64_t *rows  # open gold calls (g), agent calls (a)
    int64_t *cols


cdef inline int64_t *best_at(const Blocks *B, Py_ssize_t b, Py_ssize_t x) noexcept nogil:
    return B.best + (b * (B.a + 1) + x) * 4


cdef void assignment(const Blocks *B, Py_ssize_t n, Py_ssize_t k, int64_t *out) noexcept nogil:
    """out = the best counts of a one-to-one pairing of the gold calls B.rows[:n] with the
    agent calls B.cols[:k] (each may stay unpaired): the Hungarian algorithm on costs =
    -counts, with a column per row for staying unpaired."""
    cdef Py_ssize_t m = k + n, r, c, c0, c1, r0, kk
    cdef int64_t *u = B.hung
    cdef int64_t *v = u + 4 * (n + 1)
    cdef int64_t *minv = v + 4 * (m + 1)
    cdef int64_t *p = minv + 4 * (m + 1)
    cdef int64_t *way = p + (m + 1)
    cdef int64_t *used = way + (m + 1)
    cdef int64_t *cur = used + (m + 1)
    cdef int64_t *delta = cur + 4
    cdef int64_t *inf = delta + 4  # and delta + 8: a pair's counts
    inf[0], inf[1], inf[2], inf[3] = INT64_MAX // 4, 0, 0, 0
    for r in range(4 * (n + 1)):
        u[r] = 0
    for c in range(4 * (m + 1)):
        v[c] = 0
    for c in range(m + 1):
        p[c] = 0
        way[c] = 0
    for r in range(1, n + 1):
        p[0] = r
        c0 = 0
        for c in range(m + 1):
            v_copy(minv + 4 * c, inf)
            used[c] = 0
        while True:
            used[c0] = 1
            r0 = p[c0]
            v_copy(delta, inf)
            c1 = 0
            for c in range(1, m + 1):
                if used[c]:
                    continue
                kk = B.at[B.cols[c - 1] * B.g + B.rows[r0 - 1]] if c <= k else -1
                v_zero(cur)
                if kk >= 0:  # the cost of the pair: minus its counts
                    v_weight(delta + 8, B.pairs + kk * COLUMNS)
                    v_sub(cur, cur, delta + 8)
                v_sub(cur, cur, u + 4 * r0)
                v_sub(cur, cur, v + 4 * c)
                if better(minv + 4 * c, cur):  # cur < minv[c]
                    v_copy(minv + 4 * c, cur)
                    way[c] = c0
                if better(delta, minv + 4 * c):
                    v_copy(delta, minv + 4 * c)
                    c1 = c
            for c in range(m + 1):
                if used[c]:
                    v_add(u + 4 * p[c], u + 4 * p[c], delta)
                    v_sub(v + 4 * c, v + 4 * c, delta)
                else:
                    v_sub(minv + 4 * c, minv + 4 * c, delta)
            c0 = c1
            if p[c0] == 0:
                break
        while c0:
            c1 = way[c0]
            p[c0] = p[c1]
            c0 = c1
    v_zero(out)
    for c in range(1, k + 1):
        if p[c]:
            kk = B.at[B.cols[c - 1] * B.g + B.rows[p[c] - 1]]
            if kk >= 0:
                v_weight(cur, B.pairs + kk * COLUMNS)
                v_add(out, out, cur)


cdef void open_value(
    const Blocks *B, Py_ssize_t x, Py_ssize_t b, const int64_t *open_, Py_ssize_t n_open,
    int64_t *out,
) noexcept nogil:
    """out = the best counts with the first x agent calls, the blocks before b (1-based) in
    full and the calls of block b whose open_ flag (one per call of the block) is set."""
    cdef Py_ssize_t j0 = B.start[b - 1], k = B.start[b] - j0, t
    cdef int64_t mask = 0
    if n_open == 0:
        v_copy(out, best_at(B, b - 1, x))
        return
    if n_open == k:
        v_copy(out, best_at(B, b, x))
        return
    if B.table_at[b - 1] >= 0:
        for t in range(k):
            if open_[t]:
                mask |= (<int64_t>1) << t
        v_copy(out, B.table + B.table_at[b - 1] + (x * ((<int64_t>1) << k) + mask) * 4)
        return
    assigned(B, x, b, open_, out)


cdef void assigned(
    const Blocks *B, Py_ssize_t x, Py_ssize_t b, const int64_t *open_, int64_t *out
) noexcept nogil:
    """open_value of a large block: the best, over where its agent calls start (x0), of the
    counts before x0 and an optimal assignment of agent calls x0..x-1 to the open calls."""
    cdef Py_ssize_t j0 = B.start[b - 1], k = B.start[b] - j0, t, i, x0, n = 0, cols
    cdef int64_t found[8]
    cdef bint any_pair
    for t in range(k):
        if open_[t]:
            B.rows[n] = j0 + t
            n += 1
    v_copy(out, best_at(B, b - 1, x))
    for x0 in range(x):
        # an earlier start with the same counts before it is never worse
        if x0 and v_equal(best_at(B, b - 1, x0), best_at(B, b - 1, x0 - 1)):
            continue
        cols = 0
        for i in range(x0, x):
            any_pair = False
            for t in range(n):
                if B.at[i * B.g + B.rows[t]] >= 0:
                    any_pair = True
                    break
            if any_pair:
                B.cols[cols] = i
                cols += 1
        if cols == 0:
            continue
        assignment(B, n, cols, found)
        v_add(found + 4, found, best_at(B, b - 1, x0))
        v_max(out, found + 4)


cdef void forward(Blocks *B) noexcept nogil:
    """best[b][x] for every block b and agent prefix x (and the subset tables)."""
    cdef Py_ssize_t a = B.a, b, x, j0, k, t, kk, size
    cdef int64_t mask, full, bit
    cdef int64_t step[4]
    cdef int64_t *T
    cdef int64_t *cell
    cdef int64_t *open_ = B.rows + B.g  # all open: ones (in the space after rows)
    for x in range(a + 1):
        v_zero(best_at(B, 0, x))
    for b in range(1, B.m + 1):
        j0, k = B.start[b - 1], B.start[b] - B.start[b - 1]
        v_zero(best_at(B, b, 0))
        if k == 1:
            for x in range(1, a + 1):
                cell = best_at(B, b, x)
                v_copy(cell, best_at(B, b, x - 1))
                v_max(cell, best_at(B, b - 1, x))
                kk = B.at[(x - 1) * B.g + j0]
                if kk >= 0:
                    v_weight(step, B.pairs + kk * COLUMNS)
                    v_add(step, step, best_at(B, b - 1, x - 1))
                    v_max(cell, step)
        elif B.table_at[b - 1] >= 0:
            T = B.table + B.table_at[b - 1]
            size = (<Py_ssize_t>1) << k
            full = size - 1
            for mask in range(size):
                v_zero(T + mask * 4)
            for x in range(1, a + 1):
                for mask in range(size):
                    cell = T + (x * size + mask) * 4
                    v_copy(cell, best_at(B, b - 1, x))
                    v_max(cell, T + ((x - 1) * size + mask) * 4)
                    for t in range(k):
                        bit = (<int64_t>1) << t
                        kk = B.at[(x - 1) * B.g + j0 + t]
                        if mask & bit and kk >= 0:
                            v_weight(step, B.pairs + kk * COLUMNS)
                            v_add(step, step, T + ((x - 1) * size + (mask ^ bit)) * 4)
                            v_max(cell, step)
                v_copy(best_at(B, b, x), T + (x * size + full) * 4)
        else:
            for t in range(k):
                open_[t] = 1
            for x in range(1, a + 1):
                assigned(B, x, b, open_, best_at(B, b, x))


cdef void walk(Blocks *B, cbool *chosen) noexcept nogil:
    """Mark the chosen candidate rows: walked back from the last agent call and block, with
    the block's open calls, as align_pairs walks."""
    cdef Py_ssize_t x = B.a, b = B.m, k = 0, n_open = 0, t, kk, j0 = 0
    cdef int64_t here[4]
    cdef int64_t other[4]
    cdef int64_t step[4]
    cdef int64_t *open_ = B.rows + B.g  # one flag per call of the block (after rows)
    cdef bint took
    if b > 0:
        j0, k = B.start[b - 1], B.start[b] - B.start[b - 1]
        for t in range(k):
            open_[t] = 1
        n_open = k
    while x > 0 and b > 0:
        if n_open == 0:
            b -= 1
            if b > 0:
                j0, k = B.start[b - 1], B.start[b] - B.start[b - 1]
                for t in range(k):
                    open_[t] = 1
                n_open = k
            continue
        open_value(B, x, b, open_, n_open, here)
        took = False
        for t in range(k - 1, -1, -1):
            kk = B.at[(x - 1) * B.g + j0 + t]
            if not open_[t] or kk < 0:
                continue
            open_[t] = 0
            open_value(B, x - 1, b, open_, n_open - 1, other)
            v_weight(step, B.pairs + kk * COLUMNS)
            v_add(step, step, other)
            if v_equal(step, here):
                chosen[kk] = True
                x -= 1
                n_open -= 1
                took = True
                break
            open_[t] = 1
        if took:
            continue
        open_value(B, x - 1, b, open_, n_open, other)
        if v_equal(other, here):
            x -= 1
        else:  # the open calls stay unpaired
            n_open = 0


cdef int choose_blocks(
    Py_ssize_t a, Py_ssize_t g, const int32_t *g_block, const int32_t *pairs, Py_ssize_t r,
    Py_ssize_t end, Py_ssize_t small, cbool *chosen, int64_t **space, Py_ssize_t *room,
) noexcept nogil:
    """Mark in chosen the pairing of one sample whose candidates are the rows r:end of pairs
    and whose gold calls have the block numbers g_block[:g] (from 0). space/room: a buffer
    grown as needed (realloc). Returns -1 when memory runs out."""
    cdef Blocks B
    cdef Py_ssize_t m = g_block[g - 1] + 1, b, j, k, largest = 0, need, at_size, tables = 0
    cdef Py_ssize_t q
    cdef int64_t *buf
    # sizes: the blocks' starts, the candidate grid, best, the subset tables, the open calls
    j = 0
    for b in range(m):
        k = 0
        while j + k < g and g_block[j + k] == b:
            k += 1
        if k > small:
            largest = max(largest, k)
        elif k > 1:
            tables += (a + 1) * ((<Py_ssize_t>1) << k) * 4
        j += k
    at_size = a * g
    need = (m + 1) + at_size + (m + 1) * (a + 1) * 4 + tables + m + (2 * g + a + 8)
    need += 4 * (largest + 1) + 8 * (a + largest + 1) + 4 * (a + largest + 1) + 16
    if need > room[0]:
        buf = <int64_t *>realloc(space[0], need * sizeof(int64_t))
        if buf == NULL:
            return -1
        space[0] = buf
        room[0] = need
    buf = space[0]
    B.a, B.g, B.m, B.small, B.pairs = a, g, m, small, pairs
    B.start = buf
    q = m + 1
    B.at = buf + q
    for j in range(at_size):
        buf[q + j] = -1
    for j in range(r, end):
        buf[q + pairs[j * COLUMNS + AGENT] * g + pairs[j * COLUMNS + GOLD]] = j
    q += at_size
    B.best = buf + q
    q += (m + 1) * (a + 1) * 4
    B.table = buf + q
    B.table_at = buf + q + tables
    j = 0
    tables = 0
    for b in range(m):
        B.start[b] = j
        k = 0
        while j + k < g and g_block[j + k] == b:
            k += 1
        if 1 < k <= small:
            B.table_at[b] = tables
            tables += (a + 1) * ((<Py_ssize_t>1) << k) * 4
        else:
            B.table_at[b] = -1
        j += k
    B.start[m] = g
    q += tables + m
    B.rows = buf + q  # g open gold calls, then g + a + 8 for open flags and agent calls
    B.cols = B.rows + 2 * g + 8
    q += 2 * g + a + 8
    B.hung = buf + q
    forward(&B)
    walk(&B, chosen)
    return 0
