"""Counts in the lines users read: one of a thing in the singular."""

from __future__ import annotations

from tcbreplay._words import count, noun_for


def test_one_is_said_in_the_singular_and_other_counts_in_the_plural() -> None:
    assert [count(n, "sample") for n in (0, 1, 2)] == ["0 samples", "1 sample", "2 samples"]
    assert [count(n, "retry", "retries") for n in (0, 1, 2)] == [
        "0 retries",
        "1 retry",
        "2 retries",
    ]
    assert noun_for(1, "trial") == "trial"
    assert noun_for(3, "trial") == "trials"
