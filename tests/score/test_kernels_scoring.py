"""The compiled kernels (``tcbreplay/_score/kernels/scoring.pxi``) against brute force:
the AHR pairing (``choose_pairs``) against ``align_one`` and an enumeration of every pairing,
and the name tables of ``score_samples`` (tsa, tp, candidate pairs) against the reference
Levenshtein, TSA and every maximum same-name pairing. Whole runs against the reference:
``tests/score/test_metrics.py``."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
import reference_metrics as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_tables import firsts, pairs_table

from tcbreplay._score import kernels
from tcbreplay._score.kernels import _compiled as kernel
from tcbreplay._score.kernels import number_locale, scratch_for
from tcbreplay._score.metrics import align_one, align_one_pairs


def chosen_by_sample(table: np.ndarray, chosen: np.ndarray) -> dict[int, list[tuple[int, ...]]]:
    out: dict[int, list[tuple[int, ...]]] = {}
    for row in table[chosen]:
        out.setdefault(int(row[kernels.SAMPLE]), []).append(
            tuple(int(row[c]) for c in (kernels.AGENT, kernels.GOLD, kernels.INVALID, kernels.VALID,
                                       kernels.MISSING))
        )  # fmt: skip
    return out


@st.composite
def candidate_tables(draw):
    """Random candidate tables: several samples, counts from tiny to large; some samples
    with equal name sequences, whose candidates are then exactly the diagonal."""
    scale = draw(st.sampled_from([2, 6, 9_000, 60_000, 10**6, 2**31 - 1]))
    counts = st.integers(0, scale)
    rows, n_agent, n_gold, same = [], [], [], []
    for s in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 4)) == 0:
            a = g = draw(st.integers(0, 4))
            cells = [(k, k) for k in range(a)]
            same.append(True)
        else:
            a, g = draw(st.integers(0, 5)), draw(st.integers(0, 5))
            every = [(i, j) for i in range(a) for j in range(g)]
            cells = draw(st.lists(st.sampled_from(every), unique=True)) if every else []
            same.append(False)
        n_agent.append(a)
        n_gold.append(g)
        rows += [(s, i, j, draw(counts), draw(counts), draw(counts)) for i, j in cells]
    return rows, n_agent, n_gold, np.array(same)


@pytest.mark.slow  # 300 examples against brute force (2-6 s under load)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(candidate_tables())
def test_choose_pairs_matches_align_one_and_brute_force(table):
    rows, n_agent, n_gold, same = table
    pairs = pairs_table(rows)
    chosen = kernel.choose_pairs(firsts(n_agent), firsts(n_gold), same, pairs)
    totals = kernel.sample_totals(len(n_agent), pairs, chosen)
    picked = chosen_by_sample(pairs, chosen)
    for s, (a, g) in enumerate(zip(n_agent, n_gold, strict=True)):
        cands = [r[1:] for r in rows if r[0] == s]
        stats = {(i, j): (inv, val, mis) for i, j, inv, val, mis in cands}
        best = ref.best_counts(stats, a, g)
        assert tuple(totals[:, s]) == align_one(cands, a, g) == best, f"sample {s}"
        mine = picked.get(s, [])
        # an order-preserving one-to-one pairing with those totals: the one align_one picks
        assert all(p[0] < q[0] and p[1] < q[1] for p, q in itertools.pairwise(mine))
        assert (len(mine), *(sum(p[k] for p in mine) for k in (2, 3, 4))) == best
        assert [p[:2] for p in mine] == align_one_pairs(cands, a, g)


def test_choose_pairs_sums_past_32_bits():
    """Per-pair counts fit the table's 32 bits; a pairing's sums are kept in 64."""
    big = 2**31 - 1
    rows = [(0, k, k, big, big, big) for k in range(5)] + [(0, 4, 0, 0, 0, 0)]
    pairs = pairs_table(rows)
    chosen = kernel.choose_pairs(firsts([5]), firsts([5]), np.array([False]), pairs)
    assert tuple(kernel.sample_totals(1, pairs, chosen)[:, 0]) == (5, 5 * big, 5 * big, 5 * big)


@st.composite
def name_runs(draw):
    """Samples of name codes from a small alphabet, each call with empty arguments."""
    alphabet = st.integers(0, draw(st.integers(0, 3)))
    return [
        (draw(st.lists(alphabet, max_size=6)), draw(st.lists(alphabet, max_size=6)))
        for _ in range(draw(st.integers(1, 6)))
    ]


def score_names(run: list[tuple[list[int], list[int]]]):
    """score_samples of name-code samples (no tools, every arguments text ``{}``)."""
    a_code = np.array([c for a, _ in run for c in a], dtype=np.int32)
    g_code = np.array([c for _, g in run for c in g], dtype=np.int32)
    a_offsets = np.arange(len(a_code) + 1, dtype=np.int64) * 2
    g_offsets = np.arange(len(g_code) + 1, dtype=np.int64) * 2
    a_data = np.frombuffer(b"{}" * len(a_code) + b"\0", dtype=np.uint8)
    g_data = np.frombuffer(b"{}" * len(g_code) + b"\0", dtype=np.uint8)
    codes = 4
    empty = np.zeros(1, dtype=np.int64)
    nothing = np.frombuffer(b"\0", dtype=np.uint8)
    pairs = np.empty((len(a_code) + len(g_code) + 16, 8), dtype=np.int32)
    while True:
        tsa, tp, same, found, side, _ = kernel.score_samples(
            firsts([len(a) for a, _ in run]), a_code, a_offsets, a_data,
            firsts([len(g) for _, g in run]), g_code, g_offsets, g_data, codes,
            np.zeros(codes + 1, dtype=np.int64), empty, nothing, np.zeros(0, dtype=np.bool_),
            empty, nothing, 1e-9, 1e-9, np.zeros(len(a_code), dtype=np.bool_),
            np.zeros(len(g_code), dtype=np.bool_), scratch_for(a_offsets, g_offsets),
            number_locale(), pairs,
        )  # fmt: skip
        if found >= 0:
            break
        pairs = np.empty((len(pairs) * 4, 8), dtype=np.int32)
    assert side == 0
    return tsa, tp, same, pairs[:found]


@pytest.mark.slow  # 300 examples against brute force (2-5 s under load)
@settings(max_examples=300, deadline=None)
@given(name_runs())
def test_name_tables_match_brute_force(run):
    """TSA, TP (edit distance), equal sequences, and the candidates: every same-name pair on
    some maximum order-preserving one-to-one pairing, each judged (here: no arguments)."""
    tsa, tp, same, pairs = score_names(run)
    for s, (a, g) in enumerate(run):
        x, y = [str(c) for c in a], [str(c) for c in g]
        assert tp[s] == ref.tp(x, y)
        want_tsa = ref.tsa(x, y)
        assert np.isnan(tsa[s]) if want_tsa is None else tsa[s] == want_tsa, f"sample {s}"
        assert same[s] == (x == y)
        allowed = {(i, j) for i in range(len(x)) for j in range(len(y)) if x[i] == y[j]}
        pairings = list(ref.candidate_pairings(allowed, len(x), len(y)))
        most = max(len(p) for p in pairings)
        used = {pair for p in pairings if len(p) == most for pair in p}
        mine = pairs[pairs[:, kernels.SAMPLE] == s]
        assert {(int(r[kernels.AGENT]), int(r[kernels.GOLD])) for r in mine} == used
        assert (
            mine[:, [kernels.INVALID, kernels.VALID, kernels.MISSING, kernels.PENDING]] == 0
        ).all()


def test_a_full_candidate_table_is_grown():
    """More candidates than the table's rows (one per call, and 16): score_samples says so,
    and a larger table holds them all. 10 agent calls of one name against 20 gold calls of
    it: each agent call pairs with 11 gold calls on some longest common subsequence."""
    _, _, _, pairs = score_names([([0] * 10, [0] * 20)])
    assert len(pairs) == 110 > 10 + 20 + 16
    assert {(int(r[kernels.AGENT]), int(r[kernels.GOLD])) for r in pairs} == {
        (i, j) for i in range(10) for j in range(i, i + 11)
    }


def test_encode_texts_gives_one_code_per_distinct_text():
    texts = [b"a", b"bb", b"a", b"", b"\xc3\xa9", b"bb", b""]
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in texts])]).astype(np.int64)
    data = np.frombuffer(b"".join(texts) + b"\0", dtype=np.uint8)
    for size in (4, 1024):  # too small first: refused, then started again larger
        slots = np.full(size, -1, dtype=np.int64)
        dict_offsets = np.zeros(size // 2 + 1, dtype=np.int64)
        dict_data = np.empty(size * 64, dtype=np.uint8)
        state = np.zeros(2, dtype=np.int64)
        codes = np.empty(len(texts), dtype=np.int32)
        done = kernel.encode_texts(offsets, data, slots, dict_offsets, dict_data, state, codes)
        if size == 4:
            assert not done
    assert done and list(codes) == [0, 1, 0, 2, 3, 1, 2] and state[0] == 4
    assert dict_data[: state[1]].tobytes() == b"abb\xc3\xa9"


@pytest.mark.slow  # 200 examples (2-4 s under load)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(candidate_tables(), st.integers(1, 5))
def test_picked_and_tool_totals_count_the_chosen_pairs(table, codes):
    """picked: the chosen rows' columns; tool_totals: per name code, calls of each side and
    the chosen pairs' sums (as numpy counts them)."""
    rows, n_agent, n_gold, same = table
    pairs = pairs_table(rows)
    pairs[:, kernels.TOOL] = np.arange(len(pairs)) % codes
    chosen = kernel.choose_pairs(firsts(n_agent), firsts(n_gold), same, pairs)
    picked = kernel.picked(pairs, chosen)
    assert picked.dtype == np.int64 and (picked == pairs[chosen].T).all()
    a_code = (np.arange(sum(n_agent)) % codes).astype(np.int32)
    g_code = (np.arange(sum(n_gold)) * 7 % codes).astype(np.int32)
    totals = kernel.tool_totals(codes, a_code, g_code, picked)
    tool, invalid, valid, missing = (
        picked[c] for c in (kernels.TOOL, kernels.INVALID, kernels.VALID, kernels.MISSING)
    )
    want = np.stack(
        [
            np.bincount(g_code, minlength=codes),
            np.bincount(a_code, minlength=codes),
            np.bincount(tool, minlength=codes),
            np.bincount(tool, weights=invalid, minlength=codes),
            np.bincount(tool, weights=invalid + valid, minlength=codes),
            np.bincount(tool, weights=missing, minlength=codes),
        ],
        axis=1,
    )
    assert (totals == want).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=5), max_size=20), min_size=1, max_size=3))
def test_encode_texts_numbers_texts_in_order_of_first_sight(sides):
    """Across calls sharing a table: the same bytes, the same code; new texts numbered on in
    the order first met; each code's text kept in the dictionary."""
    size = 256  # room for every text
    slots = np.full(size, -1, dtype=np.int64)
    dict_offsets = np.zeros(size // 2 + 1, dtype=np.int64)
    dict_data = np.empty(size * 64, dtype=np.uint8)
    state = np.zeros(2, dtype=np.int64)
    known: dict[bytes, int] = {}
    for texts in sides:
        offsets = firsts([len(t) for t in texts])
        data = np.frombuffer(b"".join(texts) + b"\0", dtype=np.uint8)
        codes = np.empty(len(texts), dtype=np.int32)
        assert kernel.encode_texts(offsets, data, slots, dict_offsets, dict_data, state, codes)
        assert codes.tolist() == [known.setdefault(t, len(known)) for t in texts]
    assert state[0] == len(known)
    stored = [dict_data[dict_offsets[k] : dict_offsets[k + 1]].tobytes() for k in range(len(known))]
    assert stored == list(known)


@pytest.mark.slow  # (a property test of 300 examples: 3-4 s)
@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.integers(-50, 50), max_size=12)
    | st.builds(lambda a, n: set(range(a, a + n)), st.integers(-5, 5), st.integers(0, 8)),
    st.lists(st.integers(-60, 60), max_size=12),
)
def test_positions_and_call_order_are_numpys(order, index):
    """positions: numpy's searchsorted (an offset where the order is consecutive) and whether
    the index is there; in_call_order: sorted by sample, then by position."""
    order = np.array(sorted(order), dtype=np.int64)
    index = np.array(index, dtype=np.int64)
    s, known = kernel.positions(order, index)
    assert known.tolist() == [x in order for x in index.tolist()]
    assert s[known].tolist() == np.searchsorted(order, index[known]).tolist()
    position = index[::-1].copy()
    pairs = list(zip(s.tolist(), position.tolist(), strict=True))
    assert kernel.in_call_order(s, position) == (pairs == sorted(pairs))
    ordered = np.sort(s)
    assert kernel.in_call_order(ordered, np.zeros(len(s), dtype=np.int64))


def test_positions_and_call_order_read_arrow_buffers_uncopied():
    """translate hands them Arrow's own buffers, which numpy sees as read-only."""
    order = pa.chunked_array([pa.array([2, 5, 9], pa.int64())]).to_numpy()
    index = pa.chunked_array([pa.array([5, 9, 3, 2], pa.int64())]).to_numpy()
    assert not order.flags.writeable and not index.flags.writeable
    s, known = kernel.positions(order, index)
    assert known.tolist() == [True, True, False, True]
    assert s[known].tolist() == [1, 2, 0]
    assert kernel.in_call_order(order, order)
