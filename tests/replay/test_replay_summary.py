"""What a replay says of itself, run from the command line: its summary's counts in the
words record uses (samples, trials), and its progress when it resumes."""

from __future__ import annotations

from pathlib import Path

from helpers import cli


def record(root: Path, run_id: str, *args: object) -> None:
    """``tcbreplay record --model sim ... --run-id RUN_ID`` into ``root``."""
    result = cli("record", *args, "--run-id", run_id, "--quiet", "--store", root)
    assert result.exit_code == 0, result.output


def test_trials_are_said_as_samples_with_trials_each_as_record_says_them(tmp_path):
    """A replay of 4 samples of 3 trials said "12 samples", where record said 12/12 ok
    (..., 3 trials each)."""
    record(tmp_path, "k", "--model", "sim:seed=9", "--limit", 4, "--trials", 3)
    result = cli("replay", "k", "--run-id", "r", "--quiet", "--store", tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("replay r of k: 4 samples, 3 trials each (12 trials), 0 ")


def test_a_replay_with_trials_counts_what_diverged_and_ended_ok_in_trials(tmp_path):
    """Its head said "4 samples, 3 trials each (12 trials), 0 diverged, 12 ok": counts of
    trials, said as if of samples."""
    record(tmp_path, "k", "--model", "sim:seed=9", "--limit", 4, "--trials", 3)
    result = cli("replay", "k", "--run-id", "r", "--quiet", "--store", tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "replay r of k: 4 samples, 3 trials each (12 trials), 0 trials diverged, 12 trials ok, "
    )
    moved = cli("replay", "k", "--run-id", "p", "--then", "sim", "--fork-at", 0, "--quiet",
                "--store", tmp_path)  # fmt: skip
    assert moved.exit_code == 0, moved.output
    assert "\n12 trials went on with the --then model at the --fork-at turn" in moved.stdout


def test_one_sample_ending_in_its_recordings_error_is_said_in_the_singular(tmp_path):
    """(It said "1 samples ended in the error their recording ended in".)"""
    record(tmp_path, "k", "--model", "sim:fault_rate=0.3,seed=1", "--retries", 0,
           "--limit", 4, "--max-errors", "100%")  # fmt: skip
    result = cli("replay", "k", "--run-id", "r", "--quiet", "--store", tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("replay r of k: 4 samples, 0 diverged, 3 ok")
    assert "\n1 sample ended in the error its recording ended in, where it did" in (result.stdout)


def test_a_resumed_replay_says_it_replays_the_rest(tmp_path):
    """It said "5 samples already recorded; recording 3 more" of a replay."""
    record(tmp_path, "k", "--model", "sim:seed=5", "--limit", 8)
    first = cli("replay", "k", "--run-id", "r", "--limit", 5, "--quiet", "--store", tmp_path)
    assert first.exit_code == 0, first.output
    rest = cli("replay", "k", "--run-id", "r", "--limit", 8, "--store", tmp_path)
    assert rest.exit_code == 0, rest.output
    assert rest.stderr.splitlines()[0] == "5 samples already replayed; replaying 3 more"


def test_a_replay_with_an_empty_system_prompt_file_is_warned_of_naming_it(tmp_path):
    """It replayed with an empty prompt in silence: every sample diverged at its system
    message, and nothing named the file."""
    record(tmp_path, "k", "--model", "sim:seed=5", "--limit", 2)
    prompt = tmp_path / "empty.txt"
    prompt.write_text("\n")
    result = cli("replay", "k", "--system-prompt", prompt, "--run-id", "r", "--quiet",
                 "--store", tmp_path)  # fmt: skip
    assert result.exit_code == 1, result.output  # (its samples diverged)
    assert result.stderr.splitlines()[0] == (
        f"Warning: {prompt}: the system prompt is empty (or whitespace only): the agent is "
        "sent no instructions"
    )


def test_one_forked_sample_one_live_call_are_said_in_the_singular(tmp_path):
    """It said "1 live calls" and "1 samples went on ... (their recordings served before
    it)"."""
    record(tmp_path, "k", "--model", "sim:seed=5", "--limit", 1)
    result = cli("replay", "k", "--run-id", "r", "--then", "sim", "--fork-at", 0, "--quiet",
                 "--store", tmp_path)  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(
        "replay r of k: 1 sample, 0 diverged, 1 ok, 0 turns served, 1 live call;"
    )
    assert lines[1] == (
        "1 sample went on with the --then model at the --fork-at turn (its recording served "
        "before it)"
    )
    served = cli("replay", "k", "--run-id", "r2", "--quiet", "--store", tmp_path)
    assert served.exit_code == 0, served.output
    assert ", 1 ok, 1 turn served, 0 live calls;" in served.stdout
