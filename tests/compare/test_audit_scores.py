"""Stored scores compared with a re-score part by part: the same differences however the
fresh scores are cut into parts and the stored file into batches."""

from __future__ import annotations

import polars as pl
import pytest

from tcbreplay._compare.audit_scores import PAIRS_SHOWN, PairsCheck, ScoresCheck


def fresh_scores(n: int = 40) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": ["r"] * n,
            "scoring": ["spec"] * n,
            "sample_id": [f"s{i:03d}" for i in range(n)],
            "trial": pl.Series([0] * n, dtype=pl.Int32),
            "sample_index": pl.Series(range(n), dtype=pl.Int32),
            "tp": [i / n for i in range(n)],
            "n_gold": pl.Series([i % 3 for i in range(n)], dtype=pl.Int32),
        }
    )


def tampered(fresh: pl.DataFrame) -> pl.DataFrame:
    """The stored file of a run whose scores were edited: values changed early and late, a
    row removed, a row of a sample the run does not have, a row moved far from its place."""
    stored = fresh.drop("run_id", "scoring").with_columns(
        pl.when(pl.col("sample_index").is_in([1, 25, 39]))
        .then(pl.col("tp") + 1)
        .otherwise(pl.col("tp"))
        .alias("tp"),
        pl.when(pl.col("sample_index") == 30)
        .then(None)
        .otherwise(pl.col("n_gold"))
        .alias("n_gold"),
    )
    moved = stored.filter(pl.col("sample_index") == 33).with_columns(n_gold=pl.lit(9, pl.Int32))
    extra = stored.head(1).with_columns(sample_id=pl.lit("zz"), sample_index=pl.lit(7, pl.Int32))
    rest = stored.filter(~pl.col("sample_index").is_in([12, 33]))
    return pl.concat([moved, rest.head(20), extra, rest.slice(20)])


def check(fresh: pl.DataFrame, stored: pl.DataFrame, part: int, batch: int) -> list[tuple]:
    batches = (stored.slice(at, batch) for at in range(0, stored.height, batch))
    scores = ScoresCheck("spec", stored.clear(), batches)
    for at in range(0, fresh.height, part):
        scores.add(fresh.slice(at, part))
    assert scores.rows == fresh.height
    return [(d.sample_id, d.field, d.stored, d.recomputed) for d in scores.finish()]


def test_differences_in_every_part_are_found_in_the_order_of_the_whole():
    """Samples on one side only, sorted, then per column (the fresh scores' order) by sample."""
    fresh = fresh_scores()
    assert check(fresh, tampered(fresh), part=40, batch=40) == [
        ("s012", "sample", None, "present"),
        ("zz", "sample", "present", None),
        ("s001", "tp", 1.025, 0.025),
        ("s025", "tp", 1.625, 0.625),
        ("s039", "tp", 1.975, 0.975),
        ("s030", "n_gold", None, 0),
        ("s033", "n_gold", 9, 0),
    ]


@pytest.mark.parametrize(("part", "batch"), [(1, 1), (7, 3), (10, 40), (40, 6), (13, 64)])
def test_cut_into_parts_and_batches_the_same_differences(part, batch):
    fresh = fresh_scores()
    stored = tampered(fresh)
    assert check(fresh, stored, part, batch) == check(fresh, stored, 40, 40)


def test_stored_rows_are_read_as_the_parts_need_them():
    fresh = fresh_scores()
    read = []

    def batches():
        for at in range(0, fresh.height, 4):
            read.append(at)
            yield fresh.slice(at, 4)

    scores = ScoresCheck("spec", fresh.clear(), batches())
    for at in range(0, fresh.height, 10):
        scores.add(fresh.slice(at, 10))
        # the batches of this part's rows, and one past them at most
        assert len(read) <= (at + 10) // 4 + 1
    assert scores.finish() == []
    assert read == list(range(0, 40, 4))


def test_identical_files_and_a_file_in_another_order_have_no_differences():
    fresh = fresh_scores()
    stored = fresh.sample(fraction=1.0, shuffle=True, seed=3)
    assert check(fresh, fresh, 10, 4) == []
    assert check(fresh, stored, 10, 4) == []


def fresh_pairs(n: int = 30) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "sample_id": [f"s{i // 3:03d}" for i in range(n)],
            "trial": pl.Series([0] * n, dtype=pl.Int32),
            "agent_index": [i % 3 for i in range(n)],
            "tool": ["add"] * n,
            "args_invalid": [i % 2 for i in range(n)],
        }
    )


def pairs_check(fresh: pl.DataFrame, stored: pl.DataFrame | None, part: int, batch: int):
    batches = None
    if stored is not None:
        batches = (stored.slice(at, batch) for at in range(0, stored.height, batch))
    pairs = PairsCheck("spec", batches)
    for at in range(0, fresh.height, part):
        pairs.add(fresh.slice(at, part))
    return [(d.sample_id, d.field, d.stored, d.recomputed) for d in pairs.finish()]


@pytest.mark.parametrize(("part", "batch"), [(30, 30), (1, 1), (7, 4), (4, 7), (30, 2)])
def test_pairs_that_differ_are_found_however_cut(part, batch):
    fresh = fresh_pairs()
    edited = fresh.with_columns(
        pl.when(pl.int_range(pl.len()).is_in([2, 29]))
        .then(9)
        .otherwise(pl.col("args_invalid"))
        .alias("args_invalid")
    )
    assert pairs_check(fresh, fresh, part, batch) == []
    assert pairs_check(fresh, edited, part, batch) == [
        ("s000", "pairs row 2: args_invalid", 9, 0),
        ("s009", "pairs row 29: args_invalid", 9, 1),
    ]
    assert pairs_check(fresh, edited.head(20), part, batch)[-1] == (None, "pairs rows", 20, 30)
    assert pairs_check(fresh, fresh.clear(), part, batch) == [(None, "pairs rows", 0, 30)]
    assert pairs_check(fresh, None, part, batch) == [(None, "pairs.parquet", None, "present")]


def test_pairs_past_the_first_few_are_counted():
    fresh = fresh_pairs()
    edited = fresh.with_columns(args_invalid=pl.col("args_invalid") + 1)
    found = pairs_check(fresh, edited, 7, 4)
    assert len(found) == PAIRS_SHOWN + 1
    assert found[-1] == (None, "pairs", f"{30 - PAIRS_SHOWN} more pairs", "differ")
