"""What record says of one sample, one error, one retry: in the singular."""

from __future__ import annotations

from helpers import cli


def test_a_run_of_one_error_and_one_retry_says_them_in_the_singular(tmp_path):
    """It said "1 errors, 1 retries" and "the run keeps its 1 finished samples"."""
    result = cli("record", "--model", "sim:fault_rate=0.5,seed=7", "--retries", 1, "--backoff",
                 0, "--limit", 1, "--max-errors", "100%", "--run-id", "s", "--quiet",
                 "--store", tmp_path)  # fmt: skip
    assert result.exit_code == 1, result.output  # (no model call answered: it stops)
    assert result.stdout.startswith(
        "run s (simulated model): 0/1 ok of those asked for (stopped; 94 in the dataset), "
        "1 error, 1 retry; recorded 1 in "
    )
    hint = result.stderr.splitlines()[-1]
    assert hint.startswith("Hint: the run keeps its 1 finished sample; once fixed, continue ")


def test_a_run_that_already_holds_its_one_sample_says_so(tmp_path):
    """It said "already holds all 1 samples"."""
    args = ("record", "--model", "sim", "--limit", 1, "--run-id", "s", "--quiet", "--store",
            tmp_path)  # fmt: skip
    assert cli(*args).exit_code == 0
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(
        "run s (simulated model) already holds its 1 sample asked for; nothing to record"
    )


def test_a_resumed_recording_of_one_sample_says_it_in_the_singular(tmp_path):
    """It said "1 samples already recorded; recording 1 more"."""
    first = cli("record", "--model", "sim", "--limit", 1, "--run-id", "s", "--quiet",
                "--store", tmp_path)  # fmt: skip
    assert first.exit_code == 0, first.output
    rest = cli("record", "--model", "sim", "--limit", 2, "--run-id", "s", "--store", tmp_path)
    assert rest.exit_code == 0, rest.output
    assert rest.stderr.splitlines()[0] == "1 sample already recorded; recording 1 more"
