"""A recording of some samples (--limit, --sample-id) cut short (kill -9) is finished by the
command its hints give, which asks for the same samples: it recorded the whole dataset (54
paid calls nobody asked for, of a --limit 40 run of 94)."""

from __future__ import annotations

import json

from helpers import cli


def test_the_finish_hint_of_a_cut_short_recording_asks_for_its_samples_again(tmp_path):
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim", "--limit", "5", "--sample-id", "tell-a-joke",
                 "--run-id", "k", "--quiet", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest_path = root / "k" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["selection"] == {"limit": 5, "sample_ids": ["tell-a-joke"]}
    # settled (partial): the hint records the rest of the dataset
    partial = cli("score", "k", "--store", root)
    assert partial.exit_code == 0
    assert f"record the rest with: tcbreplay record --resume k --store {root})" in partial.output
    manifest["status"] = "recording"  # as a kill -9 leaves it
    manifest_path.write_text(json.dumps(manifest))
    scored = cli("score", "k", "--store", root)
    assert scored.exit_code == 1
    hint = (
        f"finish it with: tcbreplay record --resume k --store {root} --sample-id tell-a-joke "
        "--limit 5"
    )
    assert hint in scored.output, scored.output


def test_score_says_a_run_is_being_recorded_or_interrupted_as_runs_does(tmp_path):
    """It said "(status recording)" of a killed run that runs called interrupted, and told to
    resume a run another process was recording (a resume it would refuse)."""
    from tcbreplay._store.locks import acquire_lock, release_lock

    root = tmp_path / "traces"
    assert cli("record", "--model", "sim", "--limit", "3", "--run-id", "k", "--quiet",
               "--store", root).exit_code == 0  # fmt: skip
    manifest_path = root / "k" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["status"] = "recording"
    manifest_path.write_text(json.dumps(manifest))
    lock = acquire_lock(root / "k" / "writer.lock")  # as a live recording holds it
    try:
        live = cli("score", "k", "--store", root)
        assert live.exit_code == 1
        assert live.stderr.splitlines() == [
            "Error: run 'k' is recording: not every sample was recorded",
            "Hint: a process is recording it: wait for that recording to end; or score what "
            f"is there with: tcbreplay score k --store {root} --allow-incomplete",
        ]
    finally:
        release_lock(lock)
    killed = cli("score", "k", "--store", root)
    assert killed.exit_code == 1
    assert killed.stderr.splitlines()[0] == (
        "Error: run 'k' is interrupted: not every sample was recorded"
    )
    assert "--resume k" in killed.stderr and "--limit 3" in killed.stderr


def test_the_hints_for_samples_in_error_retry_them_with_the_samples_asked_for(tmp_path):
    """score's "re-run them with" gave a bare --retry-errors, which records the whole dataset
    (74 samples nobody asked for, of a --limit 20 run); and a run stopped with samples in
    error was to be finished with --resume, which leaves them in error."""
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim:fault_rate=0.3,seed=1", "--retries", "0",
                 "--limit", "20", "--max-errors", "100%", "--run-id", "k", "--quiet",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    scored = cli("score", "k", "--store", root)
    assert scored.exit_code == 0
    assert f"re-run them with: tcbreplay record --retry-errors k --store {root} --limit 20" in (
        " ".join(scored.output.split())
    )
    manifest_path = root / "k" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["totals"]["errors"] > 0
    manifest["status"] = "failed"  # as a recording that stopped leaves it
    manifest_path.write_text(json.dumps(manifest))
    stopped = cli("score", "k", "--store", root)
    assert stopped.exit_code == 1
    assert f"finish it with: tcbreplay record --retry-errors k --store {root} --limit 20" in (
        stopped.output
    )
