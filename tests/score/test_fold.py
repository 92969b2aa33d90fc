"""Scoring part by part: exact sums, the tally of a large run (any cut into parts, the same
bits), and parts held in memory a few at a time."""

from __future__ import annotations

import math
import random
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metric_checks import TOOLS, samples

from tcbreplay._machine import usable_cores
from tcbreplay._score import engines, fold, results_writer
from tcbreplay._score import parts as parts_module
from tcbreplay._score import run as score_module
from tcbreplay._score.exact_match import summarize_exact_match
from tcbreplay._score.fold import Tally, exact_mean, exact_sum
from tcbreplay._score.metrics import summarize
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.results import category_breakdown
from tcbreplay._score.run import compute_scores, score_run
from tcbreplay._store.runs import Store
from tcbreplay._store.views import connect_tables
from traces import build_tables

finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.lists(finite, max_size=60))
def test_an_exact_sum_is_the_sum_of_the_values_as_fractions(values):
    total = exact_sum(np.array(values, dtype=np.float64))
    expected = sum((Fraction(v) for v in values), Fraction(0))
    assert Fraction(total, 2**1126) == expected
    if values:  # the mean rounded once: the float nearest the exact mean
        assert exact_mean(total, len(values)) == float(expected / len(values))


@given(st.lists(st.floats(0, 1), min_size=1, max_size=40), st.randoms())
def test_exact_sums_add_up_in_any_cut_and_order(values, rng):
    cuts = sorted(rng.sample(range(len(values) + 1), k=min(3, len(values) + 1)))
    pieces = [values[a:b] for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]
    rng.shuffle(pieces)
    total = sum(exact_sum(np.array(p, dtype=np.float64)) for p in pieces)
    assert total == exact_sum(np.array(values, dtype=np.float64))


def test_an_exact_sum_is_not_fooled_by_cancellation():
    values = np.array([1e300, 1.0, -1e300, 2.0**-1074], dtype=np.float64)
    assert exact_mean(exact_sum(values), 1) == 1.0
    assert math.fsum(values) == exact_mean(exact_sum(values), 1)
    with pytest.raises(ValueError, match="finite"):
        exact_sum(np.array([1.0, math.nan]))


def _scores() -> pl.DataFrame:
    rng = random.Random(5)
    n = 40
    tsa = [None if rng.random() < 0.2 else rng.randint(0, 6) / 7 for _ in range(n)]
    return pl.DataFrame(
        {
            "category": [rng.choice(["a", "b", None]) for _ in range(n)],
            "status": [rng.choice(["ok", "ok", "error"]) for _ in range(n)],
            "tsa": tsa,
            "tp": [rng.randint(0, 9) / 9 for _ in range(n)],
            "args_invalid": [rng.randint(0, 2) for _ in range(n)],
            "args_total": [rng.randint(2, 4) for _ in range(n)],
            "args_missing": [rng.randint(0, 1) for _ in range(n)],
            "exact": [rng.random() < 0.5 for _ in range(n)],
            "write_exact": [None if k % 3 else rng.random() < 0.5 for k in range(n)],
            "first_divergence": [None if k % 2 else rng.randint(0, 5) for k in range(n)],
        },
        schema_overrides={"tsa": pl.Float64, "write_exact": pl.Boolean,
                          "first_divergence": pl.Int32},
    )  # fmt: skip


def test_a_tally_gives_the_numbers_of_the_whole_frame():
    """Counts exactly, means to the last bits of Polars' sums (and exactly to the fractions)."""
    scores = _scores()
    tally = Tally.of(scores[:13]).add(Tally.of(scores[13:30])).add(Tally.of(scores[30:]))
    metrics = tally.metrics()
    expected = {**summarize(scores), **summarize_exact_match(scores)}
    assert metrics.keys() == expected.keys()
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, rel=1e-15), key
        assert type(metrics[key]) is type(value), key
    assert metrics["tsa"] == float(
        sum(Fraction(v) for v in scores["tsa"].drop_nulls()) / scores["tsa"].drop_nulls().len()
    )
    by_category = category_breakdown(scores)
    assert [row["category"] for row in tally.by_category()] == ["a", "b", None]
    for mine, theirs in zip(tally.by_category(), by_category, strict=True):
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            assert mine[key] == (value if not isinstance(value, float) else pytest.approx(value))


def _scored(run, parts):
    samples_, messages = build_tables(run)
    con = connect_tables(samples_, messages)
    try:
        return compute_scores(con, TOOLS, ScoreOptions(), parts)
    finally:
        con.close()


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=st.lists(samples(), min_size=1, max_size=12), parts=st.integers(2, 5))
def test_a_large_run_tallied_in_parts_gives_the_one_part_numbers_to_the_bit(
    run, parts, monkeypatch_module
):
    """(the tally of a large run, forced on small ones)"""
    whole, split = _scored(run, 1), _scored(run, parts)
    assert whole.metrics == split.metrics
    assert whole.by_category == split.by_category
    assert whole.by_tool == split.by_tool


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fold, "EXACT_FROM_ROWS", 0)
        yield patch


def test_a_run_is_scored_a_few_parts_at_a_time(monkeypatch):
    """However many parts, at most AHEAD parts per worker are scored (or wait to be written)
    ahead of the one awaited: memory holds a few parts, whatever the run's size."""
    run = [{"gold": [("ping", {})], "turns": [[("ping", {})]]} for _ in range(40)]
    samples_, messages = build_tables(run)
    score_range = parts_module.score_range
    lock = threading.Lock()
    live, most = [0], [0]

    def counted(*args, **kwargs):
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        return score_range(*args, **kwargs)

    def consumed(source):
        for part in source:
            with lock:
                live[0] -= 1
            yield part

    monkeypatch.setattr(engines, "score_range", counted)
    local_parts = engines.local_parts
    monkeypatch.setattr("tcbreplay._score.run.local_parts", lambda *a: consumed(local_parts(*a)))
    con = connect_tables(samples_, messages)
    try:
        scored = compute_scores(con, TOOLS, ScoreOptions(), parts=20)
    finally:
        con.close()
    assert scored.scores.height == 40
    assert 1 < most[0] <= engines.AHEAD * min(20, usable_cores())


def test_the_dashboard_file_is_the_same_held_in_memory_or_streamed(sim_copy, monkeypatch):
    """A small run's listed samples are held in memory until its scores files are written; a
    large run's (past BODY_BUFFER) go to a body file part by part: the same file either way."""
    root, run_id = sim_copy
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 3)
    held = score_run(Store(root), run_id, dashboard="all").dashboard_path.read_bytes()
    bodies = []
    real_open = Path.open

    def seen(path, *args, **kwargs):
        if path.suffix == ".body":
            bodies.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", seen)
    monkeypatch.setattr(results_writer, "BODY_BUFFER", 100)
    monkeypatch.setattr(score_module, "stored_scoring", lambda *args: None)  # (written again)
    streamed = score_run(Store(root), run_id, dashboard="all").dashboard_path.read_bytes()
    assert bodies  # the body file was written
    assert streamed == held
    assert not list(root.rglob("*.body"))


@pytest.mark.parametrize("scorer", ["spec", "abet"])
def test_the_dashboard_files_sha256_is_taken_as_it_is_written(sim_copy, monkeypatch, scorer):
    """The audit record's sha256 of the dashboard file was read back from the file once it
    was written (0.19 s at 1M samples): it is taken from the bytes as they are written now,
    and is the file's. (A large run's body file is copied in: BODY_BUFFER.)"""
    import hashlib
    import json

    root, run_id = sim_copy
    monkeypatch.setattr(results_writer, "BODY_BUFFER", 100)
    read_back = []
    real_open = Path.open

    def seen(path, mode="r", *args, **kwargs):
        if "r" in mode and path.parent.name == "evaluations" and path.suffix != ".body":
            read_back.append(path.name)
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", seen)
    result = score_run(Store(root), run_id, ScoreOptions(scorer=scorer), dashboard="all")
    monkeypatch.setattr(Path, "open", real_open)
    assert read_back == []
    summary = json.loads((result.scores_path.parent / "summary.json").read_text())
    written = hashlib.sha256(result.dashboard_path.read_bytes()).hexdigest()
    assert summary["audit"]["dashboard"]["sha256"] == written
