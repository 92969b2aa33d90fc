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


def test_a_stopped_recording_counts_the_samples_asked_for():
    """A --limit 5 run stopped on a 401 said "0/94 ok (stopped)"."""
    from tcbreplay._cli.record import _summary_line

    summary = SimpleNamespace(
        run_id="r", simulated=False, input_tokens=None, output_tokens=None, ok=0, total=94,
        status="failed", trials=1, recorded=3, sharding=None, errors=3, retries=0, attempted=3,
        duration_s=0.4, run_dir="traces/r",
    )  # fmt: skip
    line = _summary_line(summary, {"limit": 5, "sample_ids": []})
    assert line.startswith(
        "run r: 0/5 ok of those asked for (stopped; 94 in the dataset), 3 errors"
    )
    assert _summary_line(summary, {"limit": None, "sample_ids": []}).startswith(
        "run r: 0/94 ok (stopped), "
    )
