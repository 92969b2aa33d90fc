"""record's lines that count samples count those the recording asked for: an interrupted
--limit 40 run of a 94-entry dataset said "kept 6/94"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tcbreplay._cli.record import _kept


@pytest.mark.parametrize(
    ("selection", "trials", "said"),
    [
        ({"limit": None, "sample_ids": []}, 1, "6/94 samples"),
        ({"limit": 40, "sample_ids": []}, 1, "6/40 samples asked for (94 in the dataset)"),
        (
            {"limit": None, "sample_ids": list("abcdefghij")},
            1,
            "6/10 samples asked for (94 in the dataset)",
        ),
        (
            {"limit": 4, "sample_ids": list("abcdefghij")},
            3,
            "6/12 samples asked for (282 in the dataset)",
        ),
        ({"limit": 500, "sample_ids": []}, 1, "6/94 samples asked for (94 in the dataset)"),
    ],
)
def test_an_interruption_counts_the_samples_asked_for(selection, trials, said):
    summary = SimpleNamespace(recorded=6, total=94 * trials, trials=trials)
    assert _kept(summary, selection) == said
