"""The metric spec, tested three ways against the real scoring path (``score_tables``):

1. a table of hand-computed cases (``tests/data/metric_cases.json``), which also checks the
   brute-force reference in ``tests/reference_metrics.py``;
2. unit tests of ``values_equal``, ``align_one`` and ``summarize`` (the compiled pairing and
   sequence tables: ``tests/score/test_kernels_scoring.py``);
3. hypothesis properties: random runs scored by ``score_tables`` equal the reference, sample by
   sample and field by field, plus bounds, symmetry and determinism.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import signal
import threading
import time
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
import reference_metrics as ref
from helpers import TEST_DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metric_checks import (
    COUNT_FIELDS,
    FLOAT_FIELDS,
    NAMES,
    OUTCOME_FIELDS,
    TOOLS,
    agent_calls,
    assert_metrics,
    gold_calls,
    json_values,
    keys_of,
    reference,
    samples,
    score,
)
from polars.testing import assert_frame_equal

from tcbreplay._score import metrics
from tcbreplay._score import run as score_module
from tcbreplay._score.metrics import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
    align_one,
    summarize,
    values_equal,
)
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.run import compute_scores, score_tables
from tcbreplay._store.views import connect_tables
from tcbreplay.errors import StoreError
from traces import build_tables

CASES_FILE = TEST_DATA / "metric_cases.json"


EXPECT_FIELDS = ("tsa", "tp", "ahr", "args_invalid", "args_total", "args_missing")


def load_cases() -> list[dict[str, Any]]:
    return json.loads(CASES_FILE.read_text(encoding="utf-8"))["cases"]


CASES = load_cases()


def options_of(case: dict[str, Any]) -> ScoreOptions:
    return ScoreOptions(
        rel_tol=case.get("rel_tol", DEFAULT_REL_TOL),
        abs_tol=case.get("abs_tol", DEFAULT_ABS_TOL),
        strings=case.get("strings", "exact"),
        types=case.get("types", "lenient"),
    )


# --- the hand-computed table ------------------------------------------------------------------


def test_case_table_is_well_formed():
    allowed = {"name", "why", "tools", "gold", "turns", "status", "rel_tol", "abs_tol", "expect",
               "strings", "types", "sample_tools"}  # fmt: skip
    names = [case["name"] for case in CASES]
    assert len(CASES) >= 35
    assert len(set(names)) == len(names), "case names must be unique"
    for case in CASES:
        assert set(case) <= allowed, f"{case['name']}: unknown fields {set(case) - allowed}"
        assert case["why"].strip(), f"{case['name']}: say which rule it shows"
        assert set(EXPECT_FIELDS) <= set(case["expect"]), f"{case['name']}: incomplete expect"
        assert all(isinstance(turn, list) for turn in case["turns"])
        assert case.get("status", "ok") in ("ok", "error")


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case_scored(case):
    """The real scoring path reproduces the hand-computed numbers."""
    row = score([case], case.get("tools"), options_of(case)).row(0, named=True)
    assert_metrics(row, case["expect"], (*EXPECT_FIELDS, "pairs", *OUTCOME_FIELDS), "score_tables")
    assert row["status"] == case.get("status", "ok")
    assert row["n_gold"] == len(case["gold"])
    assert row["n_agent"] == len(agent_calls(case))


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case_reference(case):
    """The brute-force reference reproduces the hand-computed numbers too."""
    fields = (*EXPECT_FIELDS, "pairs", *OUTCOME_FIELDS)
    assert_metrics(reference(case), case["expect"], fields, "reference")


def default_cases() -> list[dict[str, Any]]:
    options = ("tools", "rel_tol", "abs_tol", "strings", "types")
    return [c for c in CASES if not any(option in c for option in options)]


def test_whole_table_as_one_run():
    """All default-universe cases scored together: no sample leaks into another, and the run
    summary is the aggregate of the hand-computed expectations."""
    cases = default_cases()
    scores = score(cases)
    for case, row in zip(cases, scores.iter_rows(named=True), strict=True):
        assert_metrics(row, case["expect"], (*EXPECT_FIELDS, "pairs"), case["name"])
    expects = [c["expect"] for c in cases]
    tsas = [e["tsa"] for e in expects if e["tsa"] is not None]
    invalid = sum(e["args_invalid"] for e in expects)
    total = sum(e["args_total"] for e in expects)
    summary = summarize(scores)
    assert summary["tsa"] == pytest.approx(sum(tsas) / len(tsas))
    assert summary["tp"] == pytest.approx(sum(e["tp"] for e in expects) / len(expects))
    assert summary["ahr"] == pytest.approx(invalid / total)
    assert summary["n_samples"] == summary["n_tp"] == len(cases)
    assert summary["n_tsa"] == len(tsas) < len(cases)
    assert summary["args_invalid"] == invalid
    assert summary["args_total"] == total
    assert summary["args_missing"] == sum(e["args_missing"] for e in expects)
    assert summary["n_errors"] == sum(c.get("status") == "error" for c in cases) >= 1


# --- run-level aggregation --------------------------------------------------------------------


def cases_named(*names: str) -> list[dict[str, Any]]:
    by_name = {c["name"]: c for c in CASES}
    return [by_name[n] for n in names]


def test_summarize_hand_computed_run():
    run = cases_named(
        "exact_match",  # tsa 1, tp 1, 0/3
        "empty_gold_with_agent_calls",  # tsa null, tp 0, 0/0
        "wrong_value_vs_gold",  # tsa 1, tp 1, 1/2
        "error_status_scored",  # tsa 0.5, tp 0.5, 1/2, status error
        "tiebreak_fewest_invalid",  # tsa 1, tp 0.5, 0/1, 2 missing
    )
    summary = summarize(score(run))
    assert summary["tsa"] == pytest.approx((1 + 1 + 0.5 + 1) / 4)  # 0.875, null left out
    assert summary["n_tsa"] == 4
    assert summary["tp"] == pytest.approx((1 + 0 + 1 + 0.5 + 0.5) / 5)  # 0.6 over all samples
    assert summary["n_tp"] == summary["n_samples"] == 5
    assert summary["ahr"] == pytest.approx(2 / 8)  # ratio of sums, not mean of ratios (0.25)
    assert (summary["args_invalid"], summary["args_total"], summary["args_missing"]) == (2, 8, 2)
    assert summary["n_errors"] == 1


def test_summarize_ratio_of_sums_differs_from_mean_of_ratios():
    run = cases_named(
        "invented_key", "default_value_valid", "abs_tol_default_zero"
    )  # 1/2, 0/4, 2/4
    summary = summarize(score(run))
    assert summary["ahr"] == pytest.approx(3 / 10)
    assert summary["ahr"] != pytest.approx((0.5 + 0 + 0.5) / 3)


def test_summarize_undefined_metrics():
    run = cases_named("empty_gold_no_calls", "empty_gold_with_agent_calls", "no_agent_calls")
    summary = summarize(score(run))
    assert summary["tsa"] == 0.0 and summary["n_tsa"] == 1
    assert summary["tp"] == pytest.approx(1 / 3)
    assert summary["ahr"] is None and summary["args_total"] == 0
    only_empty_gold = summarize(score(run[:2]))
    assert only_empty_gold["tsa"] is None and only_empty_gold["n_tsa"] == 0


def test_summarize_synthetic_frame():
    frame = pl.DataFrame(
        {
            "status": ["ok", "error", "ok", "error"],
            "tsa": [None, 0.25, 1.0, 0.5],
            "tp": [1.0, 0.0, 0.5, 0.5],
            "args_invalid": [0, 3, 1, 0],
            "args_total": [0, 4, 5, 3],
            "args_missing": [1, 0, 2, 0],
        },
        schema_overrides={"tsa": pl.Float64},
    )
    summary = summarize(frame)
    assert summary["tsa"] == pytest.approx(1.75 / 3)
    assert summary["tp"] == pytest.approx(0.5)
    assert summary["ahr"] == pytest.approx(4 / 12)
    assert (summary["n_samples"], summary["n_tsa"], summary["n_tp"]) == (4, 3, 4)
    assert (summary["args_invalid"], summary["args_total"], summary["args_missing"]) == (4, 12, 3)
    assert summary["n_errors"] == 2
    empty = summarize(frame.clear())
    assert (empty["tsa"], empty["tp"], empty["ahr"], empty["n_samples"]) == (None, None, None, 0)


def test_error_samples_are_never_dropped():
    case = cases_named("exact_match")[0]
    run = [dict(case, sample_id="ok"), dict(case, sample_id="err", status="error")]
    scores = score(run)
    assert scores["status"].to_list() == ["ok", "error"]
    ok, err = scores.row(0, named=True), scores.row(1, named=True)
    for field in (*EXPECT_FIELDS, "pairs"):
        assert ok[field] == err[field]
    assert summarize(scores)["n_errors"] == 1


# --- values_equal -----------------------------------------------------------------------------

EQUALITY = [
    (1, 1, True),
    (10**17, 10**17 + 1, False),
    (10**17, 1e17, True),
    (2**70, 2**70 + 1, False),
    (1, 1.0, True),
    (100, 100.00000001, True),
    (100, 100.000001, False),
    (0, 5e-10, False),  # abs_tol 0 by default: numbers this small are not noise
    (8.854e-12, 8.854e-11, False),
    (8.854e-12, 8.854e-12 * (1 + 1e-12), True),
    (0.1 + 0.2, 0.3, True),
    (True, 1, False),
    (1, True, False),
    (False, 0, False),
    (False, 0.0, False),
    (True, True, True),
    (False, True, False),
    ("a", "a", True),
    ("Café", "Cafe\u0301", False),
    ("1", 1, False),
    ("", None, False),
    (None, None, True),
    (None, 0, False),
    (None, "null", False),
    (None, False, False),
    ([], [], True),
    ([], {}, False),
    ([1, 2], [2, 1], False),
    ([1, 2], [1, 2, 2], False),
    ([1, [0.1, "x"]], [1.0, [0.1000000000001, "x"]], True),
    ([True], [1], False),
    ({"a": 1, "b": [0.5]}, {"b": [0.5], "a": 1}, True),
    ({"a": 1}, {"a": 1, "b": None}, False),
    ({"a": {"b": 0.1}}, {"a": {"b": 0.1001}}, False),
    ({"a": None}, {}, False),
]


@pytest.mark.parametrize(("a", "b", "equal"), EQUALITY)
def test_values_equal(a, b, equal):
    assert values_equal(a, b) is equal
    assert values_equal(b, a) is equal
    assert ref.values_equal(a, b) is equal


@pytest.mark.parametrize(
    ("a", "b", "rel_tol", "abs_tol", "equal"),
    [
        (100, 100.05, 1e-3, 0.0, True),
        (100, 100.05, 1e-4, 0.0, False),
        (0.1, 0.1000000000000001, 0.0, 0.0, False),
        (3, 3.0, 0.0, 0.0, True),
        (0, 0.005, 0.0, 0.01, True),
        (0, 0.02, 0.0, 0.01, False),
        (0, 5e-10, 1e-9, 1e-9, True),  # the former default abs_tol
        (0, 2e-9, 1e-9, 1e-9, False),
        ([0.5], [0.509], 0.0, 0.01, True),
        ({"x": [1.0]}, {"x": [1.5]}, 0.5, 0.0, True),
        (10**17, 10**17 + 1, 1.0, 1.0, False),  # ints never use the tolerances
    ],
)
def test_values_equal_tolerances(a, b, rel_tol, abs_tol, equal):
    assert values_equal(a, b, rel_tol, abs_tol) is equal
    assert ref.values_equal(a, b, rel_tol, abs_tol) is equal


# --- align_one ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cands", "a", "g", "expected"),
    [
        ([], 0, 0, (0, 0, 0, 0)),
        ([], 2, 3, (0, 0, 0, 0)),
        # most pairs beats fewer invalid
        ([(0, 0, 5, 0, 0), (1, 1, 5, 0, 0), (0, 1, 0, 3, 0)], 2, 2, (2, 10, 0, 0)),
        # crossing pairs are not order-preserving: one pair only, fewest invalid
        ([(0, 1, 1, 4, 0), (1, 0, 0, 1, 3)], 2, 2, (1, 0, 1, 3)),
        # fewest invalid beats most valid and fewest missing
        ([(0, 0, 1, 3, 0), (1, 0, 0, 1, 2)], 2, 1, (1, 0, 1, 2)),
        # most valid beats fewest missing
        ([(0, 0, 0, 2, 0), (1, 0, 0, 3, 1)], 2, 1, (1, 0, 3, 1)),
        # fewest missing decides the rest
        ([(0, 0, 0, 1, 1), (0, 1, 0, 1, 0)], 1, 2, (1, 0, 1, 0)),
        # one-to-one: a gold call is used once
        ([(0, 0, 0, 1, 0), (1, 0, 0, 1, 0)], 2, 1, (1, 0, 1, 0)),
    ],
)
def test_align_one(cands, a, g, expected):
    assert align_one(cands, a, g) == expected
    stats = {(i, j): (inv, val, mis) for i, j, inv, val, mis in cands}
    assert ref.best_counts(stats, a, g) == expected


# --- property tests: random runs against the reference ----------------------------------------


TOLERANCES = [(DEFAULT_REL_TOL, DEFAULT_ABS_TOL), (0.0, 0.0), (1e-6, 0.0), (0.0, 1e-3)]
runs = st.lists(samples(), min_size=1, max_size=5)


def as_dict(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in (*FLOAT_FIELDS, *COUNT_FIELDS)}


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs, tolerance=st.sampled_from(TOLERANCES))
def test_score_tables_equals_reference(run, tolerance):
    rel_tol, abs_tol = tolerance
    scores = score(run, options=ScoreOptions(rel_tol=rel_tol, abs_tol=abs_tol))
    for k, (case, row) in enumerate(zip(run, scores.iter_rows(named=True), strict=True)):
        expected = reference(case, TOOLS, rel_tol, abs_tol)
        assert_metrics(row, expected, (*FLOAT_FIELDS, *COUNT_FIELDS), f"sample {k}")
        # bounds
        for field in FLOAT_FIELDS:
            assert row[field] is None or 0.0 <= row[field] <= 1.0
        assert 0 <= row["args_invalid"] <= row["args_total"]
        assert row["pairs"] <= min(row["n_gold"], row["n_agent"])
        assert row["status"] == case["status"]
        names_a = [n for n, _ in agent_calls(case)]
        names_g = [n for n, _ in case["gold"]]
        assert (row["tp"] == 1.0) == (names_a == names_g)
        # exact is the clean sample of pass^k, and has no divergence
        assert row["exact"] == (row["first_divergence"] is None)
        clean = row["tp"] == 1.0 and row["ahr"] in (None, 0.0) and row["args_missing"] == 0
        assert row["exact"] == clean
    summary = summarize(scores)
    assert summary["n_samples"] == len(run)
    assert summary["n_errors"] == sum(c["status"] == "error" for c in run)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs)
def test_tp_symmetric_under_swap(run):
    swapped = [{"gold": agent_calls(c), "turns": [c["gold"]]} for c in run]
    tp = score(run + swapped)["tp"].to_list()  # one run: the originals, then the swapped ones
    forward, backward = tp[: len(run)], tp[len(run) :]
    assert forward == pytest.approx(backward, rel=1e-12, abs=1e-12)


@pytest.mark.slow  # 15 random runs, each scored twice in memory: make test-slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs)
def test_scoring_is_deterministic(run):
    assert_frame_equal(score(run), score(run))


@settings(max_examples=400, deadline=None)
@given(a=json_values, b=json_values, tolerance=st.sampled_from(TOLERANCES))
def test_values_equal_matches_reference(a, b, tolerance):
    assert values_equal(a, b, *tolerance) == ref.values_equal(a, b, *tolerance)
    assert values_equal(a, b, *tolerance) == values_equal(b, a, *tolerance)
    assert values_equal(a, a, *tolerance)


@settings(max_examples=200, deadline=None)
@given(
    a=st.lists(st.sampled_from(["x", "xy", "é", "e\u0301", "計", ""]), max_size=7),
    g=st.lists(st.sampled_from(["x", "xy", "é", "e\u0301", "計", ""]), max_size=7),
)
def test_reference_levenshtein_is_a_metric(a, g):
    d = ref.levenshtein(a, g)
    assert d == ref.levenshtein(g, a)
    assert (d == 0) == (a == g)
    assert abs(len(a) - len(g)) <= d <= max(len(a), len(g))


def test_large_run_equals_reference():
    """A few thousand samples in one run, sample ids in no particular order: every row is
    scored as its own sample (joins and buckets do not mix samples up)."""
    rnd = random.Random(11)
    pool = [1, 1.0, 10, "en", "a", None, True, False, [1, 2.5], {"a": 0.1}, 1.5, 1e17]

    def call():
        name = rnd.choice(NAMES)
        keys = rnd.sample(keys_of(name), k=min(len(keys_of(name)), rnd.randint(0, 3)))
        return name, {k: rnd.choice(pool) for k in keys}

    run = []
    for k in range(3000):
        gold = [call() for _ in range(rnd.randint(0, 4))]
        turns = [
            [rnd.choice(gold) if gold and rnd.random() < 0.6 else call() for _ in range(2)]
            for _ in range(rnd.randint(0, 3))
        ]
        status = "error" if rnd.random() < 0.1 else "ok"
        run.append(
            {
                "gold": gold,
                "turns": turns,
                "status": status,
                "sample_id": f"{k * 7919 % 3001:x}-{k}",
            }
        )
    scores = score(run)
    for case, row in zip(run, scores.iter_rows(named=True), strict=True):
        assert_metrics(
            row, reference(case, TOOLS), (*FLOAT_FIELDS, *COUNT_FIELDS), case["sample_id"]
        )
    summary = summarize(scores)
    assert summary["n_errors"] == sum(c["status"] == "error" for c in run)


# --- non-finite floats (Python's json writes them as Infinity / NaN) ---------------------------


@pytest.mark.parametrize(
    ("gold", "agent"),
    [
        (math.inf, math.inf),  # isclose: equal
        (-math.inf, math.inf),  # isclose: different
        (math.inf, 1e308),  # isclose: different
        (math.nan, math.nan),  # isclose: different
    ],
    ids=["inf-inf", "-inf-inf", "inf-1e308", "nan-nan"],
)
def test_non_finite_top_level_values(gold, agent):
    case = {"gold": [["convert", {"amount": gold}]], "turns": [[["convert", {"amount": agent}]]]}
    nested = {
        "gold": [["convert", {"amount": [gold]}]],
        "turns": [[["convert", {"amount": [agent]}]]],
    }
    expected = 0 if math.isclose(gold, agent, rel_tol=1e-9, abs_tol=1e-9) else 1
    assert values_equal(gold, agent) is (expected == 0)
    rows = score([case, nested]).rows(named=True)
    assert rows[1]["args_invalid"] == expected  # nested: decided by values_equal
    assert rows[0]["args_invalid"] == expected  # top level: decided by the SQL macro


@pytest.mark.parametrize(
    ("gold", "agent", "invalid"),
    [
        (10**400, math.inf, 0),  # beyond the float range: infinity of its sign
        (10**400, 1.5, 1),
        (-(10**400), -math.inf, 0),
        (-(10**400), math.inf, 1),
        (10**400, 10**400 + 1, 1),  # two integers: compared exactly
    ],
    ids=["big-inf", "big-float", "-big--inf", "-big-inf", "big-big"],
)
def test_an_integer_beyond_the_float_range(gold, agent, invalid):
    """An integer too large for a float, against a float, reads as infinity of its sign at the
    top level of the arguments (the compiled scorer) and inside a list (Python) alike."""
    case = {"gold": [["convert", {"amount": gold}]], "turns": [[["convert", {"amount": agent}]]]}
    nested = {
        "gold": [["convert", {"amount": [gold]}]],
        "turns": [[["convert", {"amount": [agent]}]]],
    }
    assert values_equal(gold, agent) is (invalid == 0)
    assert ref.values_equal(gold, agent) is (invalid == 0)
    rows = score([case, nested]).rows(named=True)
    assert [row["args_invalid"] for row in rows] == [invalid, invalid]


@pytest.mark.parametrize("parts", [1, 2])
def test_repeated_argument_key_is_a_clear_error(parts):
    """An arguments object repeating a key (no writer of tcbreplay stores one) is refused with
    the object named, not a database error, also when the run is scored in parts."""
    fine = {"gold": [("ping", {})], "turns": [[("ping", {})]]}
    samples, messages = build_tables(
        [fine, {"gold": [("search", {"q": "x"})], "turns": [[("search", {"q": "x"})]]}]
    )
    edited = [
        m.replace('{"q": "x"}', '{"q": "x", "q": "y"}') for m in messages["message"].to_pylist()
    ]
    messages = messages.set_column(
        messages.schema.get_field_index("message"), "message", pa.array(edited)
    )
    with pytest.raises(StoreError, match=r'repeats a key: \{"q":"x","q":"y"\}'):
        score_tables(samples, messages, TOOLS, parts=parts)


@pytest.mark.parametrize("args", ['"{\\"query\\": \\"x\\"}"', "[1, 2]", "7", "null"])
def test_arguments_that_are_not_an_object_read_as_no_arguments(args):
    """(as the metric spec says; only a store written by hand holds them: LangChain refuses them)"""
    case = {"gold": [("search", {"query": "x", "limit": 3})], "turns": [[("search", {"q": 1})]]}
    samples, messages = build_tables([case])
    edited = [m.replace('{"q": 1}', args) for m in messages["message"].to_pylist()]
    assert edited != messages["message"].to_pylist()
    messages = messages.set_column(
        messages.schema.get_field_index("message"), "message", pa.array(edited)
    )
    (row,) = score_tables(samples, messages, TOOLS).rows(named=True)
    assert (row["n_agent"], row["args_total"], row["args_missing"]) == (1, 0, 2)


@pytest.mark.parametrize(("agent", "invalid"), [('{"k": 1, "k": 2}', 0), ('{"k": 2, "k": 1}', 1)])
def test_a_key_repeated_inside_a_value_has_its_last_value(agent, invalid):
    case = {"gold": [("search", {"query": {"k": 2}})], "turns": [[("search", {"query": 0})]]}
    samples, messages = build_tables([case])
    edited = [
        m.replace('{"query": 0}', f'{{"query": {agent}}}') for m in messages["message"].to_pylist()
    ]
    assert edited != messages["message"].to_pylist()
    messages = messages.set_column(
        messages.schema.get_field_index("message"), "message", pa.array(edited)
    )
    (row,) = score_tables(samples, messages, TOOLS).rows(named=True)
    assert (row["args_total"], row["args_invalid"]) == (1, invalid)


def test_what_the_kernel_leaves_to_python_equals_reference():
    """Arguments objects of more than 64 keys, and lists or objects compared (equal ones in
    another order or with an int for a float, different ones, with a NaN inside), are judged
    in Python; the numbers equal the reference's."""
    wide_gold = {f"k{i}": i for i in range(70)} | {"query": "x", "limit": 10}
    wide_agent = {**{f"k{i}": i for i in range(0, 70, 2)}, "query": "x", "limit": 10.0, "zz": 1}
    options = {"remind": True, "offsets": [0.5, 1]}
    run = [
        {"gold": [("search", wide_gold)], "turns": [[("search", wide_agent)]]},
        {"gold": [("search", {"query": "x"})], "turns": [[("search", wide_gold)]]},
        {"gold": [("search", wide_agent)], "turns": [[("search", {"query": "x", "lang": "en"})]]},
        {
            "gold": [("schedule", {"people": [1, 2.0], "options": {"offsets": [0.5, 1]}})],
            "turns": [[("schedule", {"people": [1.0, 2], "options": {"offsets": [0.5, 1.0]}})]],
        },
        {
            "gold": [("schedule", {"people": [1, 2]}), ("schedule", {"people": [[math.nan]]})],
            "turns": [
                [
                    ("schedule", {"people": [2, 1], "options": dict(reversed(options.items()))}),
                    ("schedule", {"people": [[math.nan]]}),
                ]
            ],
        },
    ]
    scores = score(run)
    for k, case in enumerate(run):
        expected = reference(case)
        assert_metrics(scores.row(k, named=True), expected, EXPECT_FIELDS, f"sample {k}")
    assert scores["args_total"].to_list() == [38, 72, 2, 2, 3]


def test_a_tool_declared_twice_has_the_parameters_of_both():
    """Parameters of every declaration of a name count (a parameter declared again: its last
    schema), in the kernel, in the Python fallback and in explain_sample alike."""
    tools = [
        {"name": "f", "parameters": {"properties": {"x": {}, "z": {"default": 1}}}},
        {"name": "f", "parameters": {"properties": {"y": {}, "z": {"default": 2}}}},
        {"name": "g", "parameters": {"properties": {"x": True}}},  # a schema may be a bool
    ]
    wide = {f"k{i}": i for i in range(70)}  # more than 64 keys: judged in Python
    run = [
        {"gold": [("f", {"x": 1, "y": 2})], "turns": [[("f", {"x": 1, "y": 2, "z": 2})]]},
        {"gold": [("f", {"x": 1, **wide})], "turns": [[("f", {"y": 3, "z": 1, **wide})]]},
        {"gold": [("g", {"y": 1})], "turns": [[("g", {"x": [1], "y": [1]})]]},
    ]
    scores = score(run, tools=tools)
    for k, case in enumerate(run):
        assert_metrics(scores.row(k, named=True), reference(case, tools), EXPECT_FIELDS, f"{k}")
    assert scores["args_invalid"].to_list() == [0, 72, 2]
    explained = metrics.explain_sample(agent_calls(run[0]), gold_calls(run[0]), tools)
    assert explained["pairs"][0]["args"] == {"x": "ok", "y": "ok", "z": "ok"}


@pytest.mark.parametrize("scorer", ["spec", "abet"])
def test_number_words_python_cannot_read_are_a_clear_error(scorer):
    """DuckDB reads `nan` (no writer of tcbreplay stores it): where the arguments must be read
    by Python (a list compared, or the abet scorer) that is an error naming them."""
    samples, messages = build_tables(
        [{"gold": [("schedule", {"people": [1]})], "turns": [[("schedule", {"people": [2]})]]}]
    )
    edited = [
        m.replace('"people": [2]', '"people": [nan]') for m in messages["message"].to_pylist()
    ]
    messages = messages.set_column(
        messages.schema.get_field_index("message"), "message", pa.array(edited)
    )
    with pytest.raises(StoreError, match=r"not JSON that Python reads: \{\"people\":\[nan\]\}"):
        score_tables(samples, messages, TOOLS, ScoreOptions(scorer=scorer))


@pytest.mark.slow  # (about 2 s under load)
def test_a_long_sample_with_equal_sequences_needs_no_table():
    """Sequence tables are only made for samples whose name sequences differ: 30,000 equal
    calls on each side would need 3.6 GB of them."""
    calls = [("ping", {})] * 30_000
    scores = score([{"gold": calls, "turns": [calls]}], tools=TOOLS)
    assert scores.row(0, named=True)["pairs"] == 30_000


# --- the name metrics at scale ----------------------------------------------------------------


@pytest.mark.slow  # (about 2 s under load)
def test_tp_with_more_than_60k_distinct_names():
    """Each name is one symbol however many distinct names a run has (past the UTF-16
    surrogate range of code points) and whatever their script or prefixes."""
    filler = {"gold": [(f"tool_{k}", {}) for k in range(70_000)], "turns": []}
    run = [
        filler,
        {
            "gold": [("tool_60000", {}), ("tool_6", {})],
            "turns": [[("tool_6", {})], [("tool_60000", {})]],
        },
        {"gold": [("tool_69999", {})], "turns": [[("tool_6999", {})]]},
        {
            "gold": [("tool_55296", {}), ("tool_1", {})],
            "turns": [[("tool_55296", {}), ("tool_1", {})]],
        },
        {"gold": [("計算", {}), ("tool_1", {})], "turns": [[("計算", {}), ("計算機", {})]]},
    ]
    scores = score(run, tools=[])
    for k, case in enumerate(run):
        expected = reference(case, tools=[])
        assert_metrics(scores.row(k, named=True), expected, FLOAT_FIELDS, f"sample {k}")
    assert scores["tp"].to_list() == pytest.approx([0.0, 0.0, 0.0, 1.0, 0.5])
    assert scores["tsa"].to_list() == pytest.approx([0.0, 1.0, 0.0, 1.0, 0.5])


def test_reference_guards():
    """The reference itself: the generated pairings are exactly the order-preserving,
    one-to-one, same-name ones (checked by counting on a small example)."""
    names_a, names_g = ["s", "s", "p"], ["s", "p", "s"]
    allowed = {(i, j) for i, x in enumerate(names_a) for j, y in enumerate(names_g) if x == y}
    found = list(ref.candidate_pairings(allowed, 3, 3))
    # {} ; 5 singles ; pairs: (0,0)(1,2) (0,0)(2,1) (1,0)(2,1) ; none of size 3
    assert len(found) == 1 + 5 + 3
    for chosen in found:
        assert all(a < b for (a, _), (b, _) in itertools.pairwise(chosen))
        assert all(a < b for (_, a), (_, b) in itertools.pairwise(chosen))


def scored_in_parts(run: list[dict[str, Any]], parts: int):
    samples, messages = build_tables(run)
    con = connect_tables(samples, messages)
    try:
        return compute_scores(con, TOOLS, ScoreOptions(), parts)
    finally:
        con.close()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=st.lists(samples(), min_size=1, max_size=12), parts=st.integers(2, 5))
def test_scoring_in_parts_equals_one_part(run, parts):
    whole, split = scored_in_parts(run, 1), scored_in_parts(run, parts)
    assert_frame_equal(whole.scores, split.scores)
    assert_frame_equal(whole.pairs, split.pairs)
    assert whole.metrics == split.metrics
    assert whole.by_tool == split.by_tool
    assert whole.by_category == split.by_category
    for side in ("samples", "agent", "gold"):
        assert_frame_equal(getattr(whole.tables, side), getattr(split.tables, side))


@pytest.mark.parametrize("failure", [StoreError, KeyboardInterrupt])
def test_a_failed_or_interrupted_part_stops_the_others(monkeypatch, failure, several_cores):
    """Scoring in parts: when one part fails (or Ctrl-C reaches it), the other parts are
    interrupted instead of run to the end, and the failure is what the caller sees."""
    run = [{"gold": [("ping", {})], "turns": [[("ping", {})]]} for _ in range(4)]
    samples, messages = build_tables(run)
    load_flat = score_module.translate.load_flat
    seen = []

    def load(cursor, samples_range, *side):
        seen.append(samples_range)
        if samples_range[0] > 0:
            time.sleep(0.3)  # the first part is in its long query by now
            raise failure("part failed")
        # a query of a minute or more unless interrupted
        cursor.execute("select sum(i) from range(60_000_000_000) t(i)").fetchall()
        return load_flat(cursor, samples_range, *side)

    monkeypatch.setattr(score_module.translate, "load_flat", load)
    con = connect_tables(samples, messages)
    started = time.perf_counter()
    try:
        with pytest.raises(failure, match="part failed"):
            compute_scores(con, TOOLS, ScoreOptions(), parts=2)
    finally:
        con.close()
    assert len(seen) == 2
    assert time.perf_counter() - started < 10


def test_ctrl_c_that_reaches_a_part_thread_stops_scoring(monkeypatch, several_cores):
    """The kernel may hand Ctrl-C to any thread: one that reaches a part's thread still stops
    scoring in parts within moments (the main thread, which alone raises KeyboardInterrupt,
    does not sleep through it)."""
    run = [{"gold": [("ping", {})], "turns": [[("ping", {})]]} for _ in range(4)]
    samples, messages = build_tables(run)
    load_flat = score_module.translate.load_flat
    threads = []
    loading = threading.Event()
    sent = []

    def load(cursor, samples_range, *side):
        threads.append(threading.get_ident())
        loading.set()
        cursor.execute("select sum(i) from range(60_000_000_000) t(i)").fetchall()
        return load_flat(cursor, samples_range, *side)

    def interrupt() -> None:
        # once a part's thread is in its query, however long a loaded machine takes to get there
        if loading.wait(60):
            time.sleep(0.2)
            sent.append(time.perf_counter())
            signal.pthread_kill(threads[0], signal.SIGINT)

    monkeypatch.setattr(score_module.translate, "load_flat", load)
    con = connect_tables(samples, messages)
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            compute_scores(con, TOOLS, ScoreOptions(), parts=2)
    finally:
        con.close()
    assert time.perf_counter() - sent[0] < 10
