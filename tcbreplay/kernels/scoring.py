"""The metric spec compiled: each sample's TSA and TP, its AHR candidate pairs with their
argument verdicts, and the AHR pairing, in passes over flat call arrays.

The calls of a range of samples come flat, sorted by sample and call order: each
sample's first call (``a_first``/``g_first``, one entry more than samples), each call's
name as an integer code (:func:`encode_texts`), and its arguments text as a byte range
(canonical JSON, see :mod:`tcbreplay.kernels.jsontext`). Tools' parameters come as
:class:`tcbreplay.kernels.Params`, by name code.

:func:`score_samples` computes TSA and TP and judges every candidate pair: where a
sample's name sequences are equal, the call-by-call pairs (the only pairing with the
most pairs); elsewhere the same-name pairs on a longest common subsequence of the two
sequences (a pairing with the most pairs uses no others). A pair whose verdict needs
lists or objects compared, or an object of more than 64 keys, is marked pending and
judged in Python. :func:`choose_pairs` then picks each sample's pairing by dynamic
programming, preferring most pairs, fewest invalid, most valid, fewest missing, with the
same walk back as :func:`tcbreplay._score.metrics.align_one_pairs`.
"""

from __future__ import annotations

import numpy as np

from tcbreplay.kernels import (
    AGENT,
    GOLD,
    INVALID,
    MAX_KEYS,
    MISSING,
    PENDING,
    SAMPLE,
    TOOL,
    VALID,
)
from tcbreplay.kernels.board import (  # noqa: F401  (kernels the dashboard file's writer calls)
    dashboard_samples,
)
from tcbreplay.kernels.calls import (  # noqa: F401  (kernels translation calls, named here too)
    span_texts,
    split_calls,
)
from tcbreplay.kernels.compiled import borrowed, inline, jit
from tcbreplay.kernels.jsontext import (
    UNDECIDED,
    first_repeated_key,  # noqa: F401  (one of the kernels scoring calls, named here with the rest)
    repeats_a_key,
    same_bytes,
    split_object,
    value_equal,
)


@jit
def _param_of(data, lo, hi, p_lo, p_hi, key_offsets, key_data):
    """The parameter row (of ``p_lo:p_hi``) named by the key text ``data[lo:hi]``, or -1."""
    for q in range(p_lo, p_hi):
        if same_bytes(data, lo, hi, key_data, key_offsets[q], key_offsets[q + 1]):
            return q
    return -1


@inline
def _judge(
    a_data, a_lo, a_hi, g_data, g_lo, g_hi, p_lo, p_hi, key_offsets, key_data, has_default,
    default_offsets, default_data, rel_tol, abs_tol, a_spans, g_spans, scratch, c_locale,
):  # fmt: skip
    """(invalid, valid, missing, pending, repeated) of one pair's arguments: the agent's
    object ``a_data[a_lo:a_hi]``, gold's ``g_data[g_lo:g_hi]``, the tool's parameter rows
    ``p_lo:p_hi``. pending: left to Python (which also looks for repeated keys); repeated:
    1 if the agent's object repeats a key, 2 if gold's does."""
    na = split_object(a_data, a_lo, a_hi, a_spans)
    if na < 0 or na > MAX_KEYS:
        return 0, 0, 0, 1, 0
    if na > 1 and repeats_a_key(a_data, a_spans, na):
        return 0, 0, 0, 0, 1
    if same_bytes(a_data, a_lo, a_hi, g_data, g_lo, g_hi):
        # the same arguments: every key is in gold with the same text
        invalid, valid, pending = 0, 0, 0
        for k in range(na):
            if _param_of(a_data, a_spans[k, 0], a_spans[k, 1], p_lo, p_hi, key_offsets,
                         key_data) < 0:  # fmt: skip
                invalid += 1
                continue
            lo, hi = a_spans[k, 2], a_spans[k, 3]
            equal = value_equal(a_data, lo, hi, a_data, lo, hi, rel_tol, abs_tol, scratch, c_locale)
            invalid, valid, pending = _counted(equal, invalid, valid, pending)
        return invalid, valid, 0, pending, 0
    ng = split_object(g_data, g_lo, g_hi, g_spans)
    if ng < 0 or ng > MAX_KEYS:
        return 0, 0, 0, 1, 0
    if ng > 1 and repeats_a_key(g_data, g_spans, ng):
        return 0, 0, 0, 0, 2
    invalid = 0
    valid = 0
    matched = 0
    pending = 0
    for k in range(na):
        k_lo, k_hi = a_spans[k, 0], a_spans[k, 1]
        param = _param_of(a_data, k_lo, k_hi, p_lo, p_hi, key_offsets, key_data)
        other = -1
        for m in range(ng):
            if same_bytes(a_data, k_lo, k_hi, g_data, g_spans[m, 0], g_spans[m, 1]):
                other = m
                break
        if other >= 0:
            matched += 1
        if param < 0:  # (a) no such parameter
            invalid += 1
            continue
        if other >= 0:  # (b) held against gold's value
            equal = value_equal(
                a_data, a_spans[k, 2], a_spans[k, 3], g_data, g_spans[other, 2],
                g_spans[other, 3], rel_tol, abs_tol, scratch, c_locale,
            )  # fmt: skip
        elif has_default[param]:  # (c) held against the declared default
            equal = value_equal(
                a_data, a_spans[k, 2], a_spans[k, 3], default_data, default_offsets[param],
                default_offsets[param + 1], rel_tol, abs_tol, scratch, c_locale,
            )  # fmt: skip
        else:  # (c) gold lacks it and there is no default
            invalid += 1
            continue
        invalid, valid, pending = _counted(equal, invalid, valid, pending)
    return invalid, valid, ng - matched, pending, 0


@inline
def _counted(equal, invalid, valid, pending):
    """The counts (invalid, valid, pending) after one argument's value_equal."""
    if equal == UNDECIDED:
        return invalid, valid, 1
    if equal == 1:
        return invalid, valid + 1, pending
    return invalid + 1, valid, pending


@jit
def _levenshtein(a_code, a0, a, g_code, g0, g, row, prev):
    """Edit distance of the name sequences ``a_code[a0:a0 + a]`` and ``g_code[g0:g0 + g]``."""
    for c in range(g + 1):
        prev[c] = c
    for r in range(1, a + 1):
        row[0] = r
        x = a_code[a0 + r - 1]
        for c in range(1, g + 1):
            cost = 0 if x == g_code[g0 + c - 1] else 1
            row[c] = min(prev[c] + 1, row[c - 1] + 1, prev[c - 1] + cost)
        for c in range(g + 1):
            prev[c] = row[c]
    return prev[g]


@jit
def _lcs_tables(a_code, a0, a, g_code, g0, g, before, after):
    """``before[r * (g + 1) + c]``: longest common subsequence of the first r agent and c
    gold names; ``after[...]``: of the names from r and c on. Returns the LCS length."""
    w = g + 1
    for r in range(a + 1):
        for c in range(g + 1):
            if r == 0 or c == 0:
                before[r * w + c] = 0
            elif a_code[a0 + r - 1] == g_code[g0 + c - 1]:
                before[r * w + c] = before[(r - 1) * w + c - 1] + 1
            else:
                before[r * w + c] = max(before[(r - 1) * w + c], before[r * w + c - 1])
    for r in range(a, -1, -1):
        for c in range(g, -1, -1):
            if r == a or c == g:
                after[r * w + c] = 0
            elif a_code[a0 + r] == g_code[g0 + c]:
                after[r * w + c] = after[(r + 1) * w + c + 1] + 1
            else:
                after[r * w + c] = max(after[(r + 1) * w + c], after[r * w + c + 1])
    return before[a * w + g]


@inline
def _same_names(a_code, a0, a, g_code, g0, g):
    """Whether a sample's agent and gold name sequences are equal."""
    if a != g:
        return False
    for k in range(a):
        if a_code[a0 + k] != g_code[g0 + k]:
            return False
    return True


@jit
def score_samples(
    a_first, a_code, a_offsets, a_data, g_first, g_code, g_offsets, g_data, codes,
    p_first, key_offsets, key_data, has_default, default_offsets, default_data,
    rel_tol, abs_tol, a_checked, g_checked, scratch, c_locale, pairs,
):  # fmt: skip
    """Per sample: tsa (NaN without gold calls), tp, and whether the name sequences are
    equal; the candidate pairs, written into ``pairs`` (columns ``SAMPLE`` .. ``PENDING``) in
    sample, agent call and gold call order, and how many there are (-1: ``pairs`` has too
    few rows); and the first call found whose arguments repeat a key, as (side, call):
    side 1 agent, 2 gold, 0 none. Marks in ``a_checked`` and ``g_checked`` the calls whose
    arguments were split (and so checked for repeated keys). ``scratch`` and ``c_locale``:
    see :func:`tcbreplay.kernels.jsontext.number_of`."""
    n = a_first.shape[0] - 1
    longest_g, cells = 0, 1
    for s in range(n):
        a = a_first[s + 1] - a_first[s]
        g = g_first[s + 1] - g_first[s]
        longest_g = max(longest_g, g)
        if not _same_names(a_code, a_first[s], a, g_code, g_first[s], g):
            cells = max(cells, (a + 1) * (g + 1))  # only these need the sequence tables
    tsa = np.empty(n)
    tp = np.empty(n)
    same = np.zeros(n, dtype=np.bool_)
    # work space, held here for the whole call: _score_samples borrows it
    seen = np.full((2, codes), -1, dtype=np.int64)
    rows = np.empty((2, longest_g + 1), dtype=np.int64)
    tables = np.empty((2, cells), dtype=np.int32)
    spans = np.empty((2, MAX_KEYS + 1, 4), dtype=np.int64)
    found, side, call = _score_samples(
        a_first, a_code, a_offsets, a_data, g_first, g_code, g_offsets, g_data,
        p_first, key_offsets, key_data, has_default, default_offsets, default_data,
        rel_tol, abs_tol, a_checked, g_checked, scratch, c_locale, pairs, tsa, tp, same,
        seen, rows, tables, spans,
    )  # fmt: skip
    return tsa, tp, same, found, side, call


@jit
def _score_samples(
    a_first, a_code, a_offsets, a_data, g_first, g_code, g_offsets, g_data,
    p_first, key_offsets, key_data, has_default, default_offsets, default_data,
    rel_tol, abs_tol, a_checked, g_checked, scratch, c_locale, pairs, tsa, tp, same,
    seen, rows, tables, spans,
):  # fmt: skip
    """:func:`score_samples` into its outputs, with its work space; every array is its
    caller's, alive for the whole call, so all are borrowed (no reference counting)."""
    a_data, g_data, scratch = borrowed(a_data), borrowed(g_data), borrowed(scratch)
    key_offsets, key_data = borrowed(key_offsets), borrowed(key_data)
    default_offsets, default_data = borrowed(default_offsets), borrowed(default_data)
    has_default, a_code, g_code = borrowed(has_default), borrowed(a_code), borrowed(g_code)
    gold_seen, agent_seen = borrowed(seen[0]), borrowed(seen[1])
    row, prev = borrowed(rows[0]), borrowed(rows[1])
    before, after = borrowed(tables[0]), borrowed(tables[1])
    a_spans, g_spans = borrowed(spans[0]), borrowed(spans[1])
    n = a_first.shape[0] - 1
    m = 0
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
        tsa[s] = hits / distinct if distinct > 0 else np.nan
        equal = _same_names(a_code, a0, a, g_code, g0, g)
        same[s] = equal
        if a == 0 and g == 0:
            tp[s] = 1.0
        elif equal:
            tp[s] = 1.0 - 0 / max(a, g)
        else:
            tp[s] = 1.0 - _levenshtein(a_code, a0, a, g_code, g0, g, row, prev) / max(a, g)
        if a == 0 or g == 0:
            continue
        total = 0
        if not equal:
            total = _lcs_tables(a_code, a0, a, g_code, g0, g, before, after)
        for i in range(a):
            c = a_code[a0 + i]
            for j in range(g):
                if equal:
                    if j != i:
                        continue
                elif c != g_code[g0 + j] or (
                    before[i * (g + 1) + j] + 1 + after[(i + 1) * (g + 1) + j + 1] != total
                ):
                    continue
                p_lo = p_first[c] if c < p_first.shape[0] - 1 else 0
                p_hi = p_first[c + 1] if c < p_first.shape[0] - 1 else 0
                x, y = a0 + i, g0 + j
                invalid, valid, missing, pending, repeated = _judge(
                    a_data, a_offsets[x], a_offsets[x + 1], g_data, g_offsets[y],
                    g_offsets[y + 1], p_lo, p_hi, key_offsets, key_data, has_default,
                    default_offsets, default_data, rel_tol, abs_tol, a_spans, g_spans, scratch,
                    c_locale,
                )  # fmt: skip
                if repeated:
                    return m, repeated, x if repeated == 1 else y
                if not pending:
                    a_checked[x] = True
                    g_checked[y] = True
                if m == pairs.shape[0]:
                    return -1, 0, -1
                pairs[m, SAMPLE] = s
                pairs[m, AGENT] = i
                pairs[m, GOLD] = j
                pairs[m, TOOL] = c
                pairs[m, INVALID] = invalid
                pairs[m, VALID] = valid
                pairs[m, MISSING] = missing
                pairs[m, PENDING] = pending
                m += 1
    return m, 0, -1


@jit
def _better(p, q, x, y):
    """Whether score row ``x`` of ``p`` beats row ``y`` of ``q`` (columns: pairs, -invalid,
    valid, -missing; compared in that order)."""
    for k in range(4):
        if p[x, k] != q[y, k]:
            return p[x, k] > q[y, k]
    return False


@jit
def choose_pairs(a_first, g_first, same, pairs):
    """Which candidate pairs (rows of ``pairs`` from :func:`score_samples`, with their
    verdicts final) each sample's pairing chooses."""
    m = pairs.shape[0]
    chosen = np.zeros(m, dtype=np.bool_)
    cells = 1
    r = 0
    while r < m:
        s = pairs[r, SAMPLE]
        a, g = a_first[s + 1] - a_first[s], g_first[s + 1] - g_first[s]
        if not same[s]:  # only these are aligned
            cells = max(cells, (a + 1) * (g + 1))
        while r < m and pairs[r, SAMPLE] == s:
            r += 1
    best = np.empty((cells, 4), dtype=np.int64)
    step = np.empty((1, 4), dtype=np.int64)
    at = np.empty(cells, dtype=np.int64)
    r = 0
    while r < m:
        s = pairs[r, SAMPLE]
        end = r
        while end < m and pairs[end, SAMPLE] == s:
            end += 1
        if same[s]:
            for k in range(r, end):
                chosen[k] = True
            r = end
            continue
        a, g = a_first[s + 1] - a_first[s], g_first[s + 1] - g_first[s]
        w = g + 1
        for k in range(a * g):
            at[k] = -1
        for k in range(r, end):
            at[pairs[k, AGENT] * g + pairs[k, GOLD]] = k
        for x in range(a + 1):
            for y in range(g + 1):
                here = x * w + y
                if x == 0 or y == 0:
                    for c in range(4):
                        best[here, c] = 0
                    continue
                up, left = (x - 1) * w + y, x * w + y - 1
                src = left if _better(best, best, left, up) else up
                for c in range(4):
                    best[here, c] = best[src, c]
                k = at[(x - 1) * g + y - 1]
                if k >= 0:
                    _diagonal(best, (x - 1) * w + y - 1, pairs, k, step)
                    if _better(step, best, 0, here):
                        for c in range(4):
                            best[here, c] = step[0, c]
        x, y = a, g
        while x > 0 and y > 0:
            here = x * w + y
            k = at[(x - 1) * g + y - 1]
            if k >= 0:
                _diagonal(best, (x - 1) * w + y - 1, pairs, k, step)
                if not _better(step, best, 0, here) and not _better(best, step, here, 0):
                    chosen[k] = True
                    x -= 1
                    y -= 1
                    continue
            up = (x - 1) * w + y
            if not _better(best, best, here, up) and not _better(best, best, up, here):
                x -= 1
            else:
                y -= 1
        r = end
    return chosen


@jit
def _diagonal(best, cell, pairs, k, step):
    """``step[0]`` = the score at ``cell`` plus candidate ``k``'s pair."""
    step[0, 0] = best[cell, 0] + 1
    step[0, 1] = best[cell, 1] - pairs[k, INVALID]
    step[0, 2] = best[cell, 2] + pairs[k, VALID]
    step[0, 3] = best[cell, 3] - pairs[k, MISSING]


@jit
def sample_totals(n, pairs, chosen):
    """Per sample, over its chosen pairs: pairs, invalid, valid, missing (4 × n, a row
    each)."""
    totals = np.zeros((4, n), dtype=np.int64)
    for k in range(pairs.shape[0]):
        if chosen[k]:
            s = pairs[k, SAMPLE]
            totals[0, s] += 1
            totals[1, s] += pairs[k, INVALID]
            totals[2, s] += pairs[k, VALID]
            totals[3, s] += pairs[k, MISSING]
    return totals


@jit
def picked(pairs, chosen):
    """The columns of the rows of ``pairs`` that ``chosen`` marks (a row per column)."""
    count = 0
    for k in range(chosen.shape[0]):
        if chosen[k]:
            count += 1
    out = np.empty((pairs.shape[1], count), dtype=np.int64)
    m = 0
    for k in range(chosen.shape[0]):
        if chosen[k]:
            for c in range(pairs.shape[1]):
                out[c, m] = pairs[k, c]
            m += 1
    return out


@jit
def tool_totals(codes, a_code, g_code, chosen_pairs):
    """Per name code: gold calls, agent calls, chosen pairs (columns of :func:`picked`), and
    their invalid, total and missing arguments (codes × 6)."""
    totals = np.zeros((codes, 6), dtype=np.int64)
    for k in range(g_code.shape[0]):
        totals[g_code[k], 0] += 1
    for k in range(a_code.shape[0]):
        totals[a_code[k], 1] += 1
    for k in range(chosen_pairs.shape[1]):
        t = chosen_pairs[TOOL, k]
        totals[t, 2] += 1
        totals[t, 3] += chosen_pairs[INVALID, k]
        totals[t, 4] += chosen_pairs[INVALID, k] + chosen_pairs[VALID, k]
        totals[t, 5] += chosen_pairs[MISSING, k]
    return totals


@jit
def encode_texts(offsets, data, slots, dict_offsets, dict_data, state, codes):
    """Give each text ``data[offsets[k]:offsets[k + 1]]`` an integer code in ``codes``, the
    same for the same bytes, new codes numbered on from ``state[0]``; each code's text is
    kept in ``dict_offsets``/``dict_data`` (``state[1]`` bytes used). ``slots``: an open
    addressing table (a power of two long, -1 where empty) shared between calls. Returns
    False, having coded only some texts, when ``slots`` would be more than half full or the
    dictionary out of room."""
    mask = slots.shape[0] - 1
    for k in range(offsets.shape[0] - 1):
        lo, hi = offsets[k], offsets[k + 1]
        h = np.uint64(14695981039346656037)  # FNV-1a
        for p in range(lo, hi):
            h = (h ^ np.uint64(data[p])) * np.uint64(1099511628211)
        slot = np.int64(h & np.uint64(mask))
        while True:
            c = slots[slot]
            if c < 0:
                n, used = state[0], state[1]
                if 2 * (n + 1) > slots.shape[0] or n + 2 > dict_offsets.shape[0]:
                    return False
                if used + hi - lo > dict_data.shape[0]:
                    return False
                for p in range(hi - lo):
                    dict_data[used + p] = data[lo + p]
                dict_offsets[n + 1] = used + hi - lo
                state[0], state[1] = n + 1, used + hi - lo
                slots[slot] = n
                codes[k] = n
                break
            if same_bytes(dict_data, dict_offsets[c], dict_offsets[c + 1], data, lo, hi):
                codes[k] = c
                break
            slot = (slot + 1) & mask
    return True


@jit
def positions(order: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each ``index``'s position in the sorted, unique ``order``, and whether it is there."""
    n = order.shape[0]
    s = np.zeros(index.shape[0], dtype=np.int64)
    known = np.zeros(index.shape[0], dtype=np.bool_)
    if n == 0:
        return s, known
    consecutive = order[n - 1] - order[0] == n - 1  # then a position is an offset
    for k in range(index.shape[0]):
        at = index[k] - order[0] if consecutive else np.searchsorted(order, index[k])
        s[k] = at
        known[k] = 0 <= at < n and order[min(max(at, 0), n - 1)] == index[k]
    return s, known


@jit
def in_call_order(s: np.ndarray, position: np.ndarray) -> bool:
    """Whether call rows are in sample and message order (the calls of one message share
    its position)."""
    for k in range(1, s.shape[0]):
        if s[k] < s[k - 1] or (s[k] == s[k - 1] and position[k] < position[k - 1]):
            return False
    return True
