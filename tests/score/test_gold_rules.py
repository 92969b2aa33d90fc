"""Gold rules (accept, optional, order-free groups, a sample's own tools) and the comparison
options (strings, types), held to the brute-force reference in ``tests/reference_metrics.py``:

1. the plain-Python pairing of ``tcbreplay._score.pairing`` against every pairing, with its
   subset tables and its Hungarian path (forced on small blocks) choosing the same pairs;
2. the compiled kernel's pairing (``choose_pairs``) and tp (``score_samples``) with blocks
   against the same brute force and the plain-Python pairing;
3. whole random runs with rules scored by ``score_tables`` against the reference;
4. the kernel's BFCL string comparison against ``metrics.normalized``.

Hand-computed cases of each rule are in ``tests/data/metric_cases.json``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import reference_metrics as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_tables import firsts, pairs_table
from metric_checks import (
    COUNT_FIELDS,
    FLOAT_FIELDS,
    NAMES,
    PARAMS,
    TOOLS,
    agent_calls,
    assert_metrics,
    json_values,
    keys_of,
    near,
    reference,
    score,
)

from tcbreplay._score import kernels
from tcbreplay._score.kernels import _compiled as kernel
from tcbreplay._score.kernels import number_locale, scratch_for
from tcbreplay._score.metrics import normalized, values_equal
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.pairing import align_one_pairs, align_pairs, blocks_of, edit_distance

# --- random pairing problems with blocks ------------------------------------------------------


@st.composite
def block_problems(draw, max_agent=5, max_gold=5):
    """One sample's pairing problem: name sequences over a small alphabet, gold groups (some
    calls in none), and counts for every same-name pair."""
    names = st.sampled_from("fgh"[: draw(st.integers(1, 3))])
    agent = draw(st.lists(names, max_size=max_agent))
    gold = draw(st.lists(names, max_size=max_gold))
    groups = draw(st.lists(st.sampled_from([None, 1, 1, 2, "x"]), min_size=len(gold),
                           max_size=len(gold)))  # fmt: skip
    counts = st.integers(0, draw(st.sampled_from([2, 5, 2**31 - 1])))
    stats = {
        (i, j): (draw(counts), draw(counts), draw(counts))
        for i in range(len(agent))
        for j in range(len(gold))
        if agent[i] == gold[j]
    }
    return agent, gold, groups, stats


def totals(pairs, stats):
    return (len(pairs), *(sum(stats[p][k] for p in pairs) for k in range(3)))


def check_pairing(pairs, blocks):
    """One-to-one, listed by agent call, never back to an earlier block."""
    assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == len(pairs)
    assert all(p[0] < q[0] and blocks[p[1]] <= blocks[q[1]] for p, q in itertools.pairwise(pairs))


@pytest.mark.slow  # brute force over hundreds of examples: make test-slow
@settings(max_examples=400, deadline=None)
@given(block_problems())
def test_python_pairing_is_the_brute_force_optimum(problem):
    agent, gold, groups, stats = problem
    blocks = blocks_of(groups)
    assert blocks == ref.blocks(groups)
    cands = [(i, j, *v) for (i, j), v in stats.items()]
    best = ref.best_counts(stats, len(agent), len(gold), blocks)
    chosen = align_pairs(cands, len(agent), blocks)
    check_pairing(chosen, blocks)
    assert totals(chosen, stats) == best
    # the Hungarian path (every block of two or more calls) chooses the same pairs
    for small in (0, 1, 2):
        assert align_pairs(cands, len(agent), blocks, small_block=small) == chosen


@pytest.mark.slow  # (about 3 s: 200 examples)
@settings(max_examples=200, deadline=None)
@given(block_problems())
def test_without_blocks_the_pairing_is_the_ordered_one(problem):
    agent, gold, _, stats = problem
    cands = [(i, j, *v) for (i, j), v in stats.items()]
    singles = list(range(len(gold)))
    assert align_pairs(cands, len(agent), singles) == align_one_pairs(cands, len(agent), len(gold))
    # a block per call, however written: the forward pass over blocks picks the same pairs
    assert align_pairs(cands, len(agent), singles, small_block=0) == align_one_pairs(
        cands, len(agent), len(gold)
    )


@pytest.mark.slow  # brute force over hundreds of examples: make test-slow
@settings(max_examples=300, deadline=None)
@given(block_problems(max_agent=6, max_gold=5))
def test_edit_distance_with_blocks_is_the_least_over_every_order(problem):
    agent, gold, groups, _ = problem
    blocks = blocks_of(groups)
    longest = max(len(agent), len(gold))
    want = ref.tp_blocks(agent, gold, blocks)
    assert (1.0 if longest == 0 else 1 - edit_distance(agent, gold, blocks) / longest) == want


def test_a_large_block_takes_the_hungarian_path():
    """Twelve calls of one name in one block, the agent's in reverse: each gold call's best
    match is found (subset tables stop at ten calls)."""
    n = 12
    agent = list(range(n))[::-1]
    # agent call i fits gold call n - 1 - i (0 invalid), every other pairing has 1 invalid
    cands = [(i, j, 0 if j == n - 1 - i else 1, 1, 0) for i in range(n) for j in range(n)]
    chosen = align_pairs(cands, len(agent), [0] * n)
    assert chosen == [(i, n - 1 - i) for i in range(n)]


# --- the kernel -------------------------------------------------------------------------------


@st.composite
def block_runs(draw):
    """Several samples' pairing problems, as the kernel takes them."""
    return [draw(block_problems()) for _ in range(draw(st.integers(1, 6)))]


def kernel_choice(run, small_block=kernels.SMALL_BLOCK):
    rows, g_block, grouped = [], [], []
    for s, (_, _, groups, stats) in enumerate(run):
        rows += [(s, i, j, *v) for (i, j), v in stats.items()]
        blocks = blocks_of(groups)
        g_block += blocks
        grouped.append(len(set(blocks)) < len(blocks))
    pairs = pairs_table(rows)
    a_first = firsts([len(p[0]) for p in run])
    g_first = firsts([len(p[1]) for p in run])
    same = np.zeros(len(run), dtype=np.bool_)  # candidates here are every same-name pair
    chosen = kernel.choose_pairs(
        a_first, g_first, same, pairs, np.array([*g_block, 0], dtype=np.int32),
        np.array(grouped, dtype=np.bool_), small_block,
    )  # fmt: skip
    out: dict[int, list[tuple[int, int]]] = {s: [] for s in range(len(run))}
    for row in pairs[chosen]:
        out[int(row[kernels.SAMPLE])].append((int(row[kernels.AGENT]), int(row[kernels.GOLD])))
    return out


@pytest.mark.slow  # brute force over hundreds of examples: make test-slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_runs())
def test_kernel_pairing_is_the_brute_force_optimum(run):
    """choose_pairs with blocks: the brute-force counts and the pairs align_pairs picks, with
    subset tables and (small_block 0) the Hungarian algorithm alike."""
    chosen = kernel_choice(run)
    assert kernel_choice(run, small_block=0) == chosen
    for s, (agent, gold, groups, stats) in enumerate(run):
        blocks = blocks_of(groups)
        mine = sorted(chosen[s])
        check_pairing(mine, blocks)
        assert totals(mine, stats) == ref.best_counts(stats, len(agent), len(gold), blocks)
        cands = [(i, j, *v) for (i, j), v in stats.items()]
        assert mine == align_pairs(cands, len(agent), blocks)


def test_kernel_pairing_of_a_large_block():
    n = 14
    stats = {(i, j): (0 if j == n - 1 - i else 1, 1, 0) for i in range(n) for j in range(n)}
    chosen = kernel_choice([(["f"] * n, ["f"] * n, [7] * n, stats)])
    assert sorted(chosen[0]) == [(i, n - 1 - i) for i in range(n)]


def scored_names(run):
    """score_samples of name-code samples with gold blocks (every arguments text {})."""
    a_code = np.array([c for a, _, _ in run for c in a], dtype=np.int32)
    g_code = np.array([c for _, g, _ in run for c in g], dtype=np.int32)
    a_offsets = np.arange(len(a_code) + 1, dtype=np.int64) * 2
    g_offsets = np.arange(len(g_code) + 1, dtype=np.int64) * 2
    a_data = np.frombuffer(b"{}" * len(a_code) + b"\0", dtype=np.uint8)
    g_data = np.frombuffer(b"{}" * len(g_code) + b"\0", dtype=np.uint8)
    blocks = [blocks_of(groups) for _, _, groups in run]
    empty = np.zeros(1, dtype=np.int64)
    nothing = np.frombuffer(b"\0", dtype=np.uint8)
    options = kernels.KernelOptions(
        accept_offsets=np.zeros(len(g_code) + 1, dtype=np.int64),
        accept_data=nothing,
        optional_offsets=np.zeros(len(g_code) + 1, dtype=np.int64),
        optional_data=nothing,
        g_block=np.array([b for bs in blocks for b in bs] + [0], dtype=np.int32),
        grouped=np.array([len(set(b)) < len(b) for b in blocks], dtype=np.bool_),
    )
    pairs = np.empty((len(a_code) * len(g_code) + 16, 8), dtype=np.int32)
    _, tp, same, found, side, _ = kernel.score_samples(
        firsts([len(a) for a, _, _ in run]), a_code, a_offsets, a_data,
        firsts([len(g) for _, g, _ in run]), g_code, g_offsets, g_data, 4,
        np.zeros(5, dtype=np.int64), empty, nothing, np.zeros(0, dtype=np.bool_), empty,
        nothing, 1e-9, 0.0, np.zeros(len(a_code), dtype=np.bool_),
        np.zeros(len(g_code), dtype=np.bool_), scratch_for(a_offsets, g_offsets),
        number_locale(), pairs, options,
    )  # fmt: skip
    assert found >= 0 and side == 0
    return tp, same, pairs[:found]


@pytest.mark.slow  # brute force over hundreds of examples: make test-slow
@settings(max_examples=300, deadline=None)
@given(st.lists(block_problems(max_agent=6), min_size=1, max_size=6))
def test_kernel_tp_with_blocks_is_the_least_over_every_order(problems):
    run = [([ord(c) - ord("f") for c in a], [ord(c) - ord("f") for c in g], groups)
           for a, g, groups, _ in problems]  # fmt: skip
    tp, same, pairs = scored_names(run)
    for s, (a, g, groups) in enumerate(run):
        blocks = blocks_of(groups)
        assert tp[s] == ref.tp_blocks(a, g, blocks), f"sample {s}"
        if len(set(blocks)) < len(blocks):  # with blocks: every same-name pair a candidate
            assert not same[s]
            mine = {(int(r[kernels.AGENT]), int(r[kernels.GOLD]))
                    for r in pairs[pairs[:, kernels.SAMPLE] == s]}  # fmt: skip
            want = {(i, j) for i in range(len(a)) for j in range(len(g)) if a[i] == g[j]}
            assert mine == want


# --- whole runs with rules against the reference ---------------------------------------------

STRING_VARIANTS = ["San Francisco, CA", "san francisco ca", "SAN-FRANCISCO_CA", "O'Brien",
                   'o"brien', "José", "jose", "a.b/c*d^e"]  # fmt: skip
rule_values = json_values | st.sampled_from(STRING_VARIANTS)


@st.composite
def gold_with_rules(draw):
    """Gold calls with random accept lists (gold's value among them), optional keys (given
    or not), keys compared (every key of accept among them) and groups of consecutive calls."""
    calls = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(NAMES))
        keys = draw(st.lists(st.sampled_from(keys_of(name)), unique=True, max_size=3))
        args = {key: draw(rule_values) for key in keys}
        rules: dict = {}
        accept = {}
        for key in args:
            if draw(st.booleans()):
                accept[key] = [args[key], *draw(st.lists(rule_values, max_size=2))]
        absent = [k for k in PARAMS.get(name, {}) if k not in args]
        optional = draw(st.lists(st.sampled_from(list(args) + absent), unique=True, max_size=2)
                        if args or absent else st.just([]))  # fmt: skip
        for key in optional:
            if key not in args and draw(st.booleans()):
                accept[key] = draw(st.lists(rule_values, min_size=1, max_size=2))
        if accept:
            rules["accept"] = accept
        if optional:
            rules["optional"] = optional
        if draw(st.integers(0, 3)) == 0:  # compare some keys only, or none ([])
            keys = sorted(set(keys_of(name)) | set(args))
            chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=2))
            rules["compare"] = sorted(set(chosen) | set(accept))
        calls.append([name, args, rules])
    # groups: consecutive runs share one value, a new value per run
    k = 0
    while k < len(calls):
        size = draw(st.integers(1, 3))
        value = draw(st.sampled_from([None, k, f"g{k}"]))
        for call in calls[k : k + size]:
            if value is not None:
                call[2]["group"] = value
        k += size
    return [tuple(call) if call[2] else (call[0], call[1]) for call in calls]


@st.composite
def agent_for(draw, gold):
    """An agent call like a gold call: gold's values, accepted ones, near or new ones,
    optional keys left out or given."""
    name, args, *rest = draw(st.sampled_from(gold))
    rules = rest[0] if rest else {}
    accept = rules.get("accept", {})
    out = {}
    for key in draw(st.permutations(sorted(set(args) | set(accept)))):
        how = draw(st.sampled_from(["gold", "accept", "near", "new", "drop"]))
        if how == "gold" and key in args:
            out[key] = args[key]
        elif how == "accept" and key in accept:
            out[key] = draw(st.sampled_from(accept[key]))
        elif how == "near" and key in args:
            out[key] = draw(near(args[key]))
        elif how == "new":
            out[key] = draw(rule_values)
    return name, out


@st.composite
def rule_samples(draw):
    gold = draw(gold_with_rules())
    turns = []
    for _ in range(draw(st.integers(0, 3))):
        turn = []
        for _ in range(draw(st.integers(0, 3))):
            if gold and draw(st.integers(0, 3)) > 0:
                turn.append(draw(agent_for(gold)))
            else:
                name = draw(st.sampled_from(NAMES))
                turn.append((name, {}))
        turns.append(turn)
    case = {"gold": gold, "turns": turns}
    if draw(st.integers(0, 3)) == 0:  # its own tools: some of the run's, one changed
        own = [t for t in TOOLS if draw(st.booleans())]
        if own:
            changed = dict(own[0])
            changed["parameters"] = {"properties": {"query": {"type": "integer"},
                                                    "zz": {"default": 1}}}  # fmt: skip
            own[0] = changed
        case["sample_tools"] = own
    return case


@pytest.mark.slow  # 150 runs scored twice: 30 s, an eighth of make test's budget on 2 cores
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    run=st.lists(rule_samples(), min_size=1, max_size=4),
    strings=st.sampled_from(["exact", "bfcl"]),
    types=st.sampled_from(["lenient", "strict"]),
)
def test_scoring_with_rules_equals_reference(run, strings, types):
    for case in run:
        case.update(strings=strings, types=types)
    scores = score(run, options=ScoreOptions(strings=strings, types=types))
    for k, (case, row) in enumerate(zip(run, scores.iter_rows(named=True), strict=True)):
        assert_metrics(row, reference(case), (*FLOAT_FIELDS, *COUNT_FIELDS), f"sample {k}")
        assert row["n_agent"] == len(agent_calls(case))


# --- BFCL's string comparison in the kernel ---------------------------------------------------


def kernel_equal(a: str, b: str) -> int:
    import json

    x = np.frombuffer(json.dumps(a).encode() + b"\0", dtype=np.uint8)
    y = np.frombuffer(json.dumps(b).encode() + b"\0", dtype=np.uint8)
    return kernel.value_equal(x, 0, len(x) - 1, y, 0, len(y) - 1, 1e-9, 0.0,
                              scratch_for(np.array([0, len(x)]), np.array([0, len(y)])),
                              number_locale(), kernels.STRINGS_BFCL)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet="aAbB ,./-_*^'\"\\éÉK\u212a", max_size=6),
    st.text(alphabet="aAbB ,./-_*^'\"\\éÉK\u212a", max_size=6),
)
def test_kernel_bfcl_strings_are_pythons(a, b):
    """The kernel decides ASCII strings without escapes itself and leaves the rest to Python
    (UNDECIDED), never deciding otherwise than metrics.normalized."""
    got = kernel_equal(a, b)
    want = normalized(a, "bfcl") == normalized(b, "bfcl")
    assert got == 2 or got == int(want), (a, b, got)
    assert values_equal(a, b, strings="bfcl") == want == ref.values_equal(a, b, strings="bfcl")
    if all(" " <= c < "\x7f" and c not in '\\"' for c in a + b):
        assert got == int(want)  # decided, not left to Python


def test_first_divergence_of_many_order_free_samples_takes_linear_time():
    """Each grouped sample's accepted pairs are found once: looking them up per sample in
    the whole pairs array (numpy's searchsorted converting the kernel's int32 column for
    each int64 lookup) took the 1M-sample run with groups (make bench-rules) from 7 s to
    more than ten minutes. 120,000 samples of one two-call group, paired crosswise (the
    first agent call with the second gold call, and back), and one sample that diverges."""
    import time

    import numpy as np

    from tcbreplay._score import kernels
    from tcbreplay._score.exact_match import first_divergence

    n = 120_000
    rows = np.zeros((2 * n, 8), dtype=np.int32)  # as the kernel gives them
    rows[:, kernels.SAMPLE] = np.repeat(np.arange(n), 2)
    rows[:, kernels.AGENT] = np.tile([0, 1], n)
    rows[:, kernels.GOLD] = np.tile([1, 0], n)
    rows[-1, kernels.INVALID] = 1  # the last sample's second agent call is not accepted
    firsts = np.arange(0, 2 * n + 1, 2)
    started = time.process_time()  # CPU time: other processes do not stretch it
    got = first_divergence(rows, firsts, firsts, np.ones(n, dtype=np.bool_), np.repeat(
        np.arange(n), 2))  # fmt: skip
    took = time.process_time() - started
    assert got.null_count() == n - 1 and got[n - 1] == 1
    assert took < 5.0, took  # about 0.3 s here; before, 16 s (120,000 scans of 240,000 rows)
