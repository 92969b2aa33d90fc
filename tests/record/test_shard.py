"""Recording one run in shards (``record --shard I/N``): shards one after another or all at
once, one killed and run again, and the writers a sharded run refuses."""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import cli, cli_process, snapshot, wait_for

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record import runner
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run
from tcbreplay._store import writer
from tcbreplay._store.runs import Run, Store
from tcbreplay._store.writer import ShardWriter
from tcbreplay.errors import InputError, RunLockedError

N_SAMPLES = len(json.loads(BENCHMARKS["tool-call"].dataset.read_text()))
MODEL = "sim:seed=5"


def _scores(store: Store, run_id: str) -> list[tuple]:
    scores = score_run(store, run_id, write=False).scores
    return sorted(scores.drop("run_id", "scoring").rows())


def _record(store: Store, run_id: str, shard=None, model: str = MODEL, workers: int = 8,
            limit: int | None = None):  # fmt: skip
    return record_run(load_inputs("tool-call"), parse_model(model), store, run_id=run_id,
                      options=RecordOptions(workers=workers), shard=shard,
                      limit=limit)  # fmt: skip


def _keys(run_dir: Path) -> list[tuple[str, int]]:
    rows = pq.read_table(run_dir / "samples.parquet", columns=["sample_id", "trial"]).to_pylist()
    return [(r["sample_id"], r["trial"]) for r in rows]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The run recorded by one process: the scores every sharded recording must give."""
    store = Store(tmp_path_factory.mktemp("clean"))
    _record(store, "r")
    return _scores(store, "r")


@pytest.mark.slow
def test_shards_one_after_another_make_the_run_one_process_makes(tmp_path, clean):
    store = Store(tmp_path)
    first = _record(store, "r", shard=(1, 3))
    assert (first.attempted, first.status) == (32, "incomplete")  # rows 0, 3, 6, ...
    assert {i % 3 for i in pq.read_table(tmp_path / "r" / "samples.parquet")["sample_index"]
            .to_pylist()} == {0}  # fmt: skip
    assert _record(store, "r", shard=(3, 3)).attempted == 31
    last = _record(store, "r", shard=(2, 3))
    assert (last.attempted, last.status, last.recorded) == (31, "complete", N_SAMPLES)
    assert _record(store, "r", shard=(2, 3)).attempted == 0  # nothing left of that shard
    keys = _keys(tmp_path / "r")
    assert len(keys) == len(set(keys)) == N_SAMPLES
    assert not list((tmp_path / "r").glob("journal*"))
    assert _scores(store, "r") == clean


def test_a_sharded_run_refuses_other_writers_while_a_shard_records(tmp_path):
    store = Store(tmp_path)
    inputs = load_inputs("tool-call")
    record_run(inputs, parse_model(MODEL), store, run_id="r", limit=2, shard=(1, 2))
    run_dir = tmp_path / "r"
    with ShardWriter(run_dir, (1, 2)) as shard:
        shard.update_manifest(status="recording")
        assert _listed_status(tmp_path) == "recording"  # not interrupted: a shard records it
        with pytest.raises(RunLockedError, match=r"being recorded in shards \(shard-1-of-2"):
            store.resume_run("r")  # a writer of the whole run
        with pytest.raises(RunLockedError, match="being written by pid"):
            ShardWriter(run_dir, (1, 2))  # the same shard twice
        with pytest.raises(RunLockedError, match=r"other shards .* not in 3"):
            ShardWriter(run_dir, (2, 3))
        with pytest.raises(RunLockedError, match="being recorded in shards"):
            store.delete_run("r")  # record --overwrite
        args = ("record", "--model", MODEL, "--run-id", "r", "--store", tmp_path, "--shard",
                "2/2", "--limit", "2", "--quiet")  # fmt: skip
        assert cli(*args).exit_code == 0  # shard 2 beside shard 1
        again = cli(*args)
        assert again.exit_code == 0, again.output
        assert again.stdout.startswith(
            "run r: this shard has nothing left to record; other shards are still recording "
            "(2/94 samples so far)"
        )
        with ShardWriter(run_dir, (2, 2)) as other:  # the other shard records beside it
            assert other.fold() is False  # shard 1 still records: the fold is left to it
    assert Run(run_dir).status == "recording"
    assert _listed_status(tmp_path) == "interrupted"  # no process records it now
    with store.resume_run("r"):  # every shard done: the run is writable as a whole again
        pass


def _listed_status(root: Path) -> str:
    result = cli("runs", "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)[0]["status"]


@pytest.mark.parametrize(
    ("shard", "message"),
    [("3/2", "--shard 3/2: I must be from 1 to N"), ("2", "--shard '2': write it I/N"),
     ("0/4", "--shard 0/4: I must be"), (" 1/4", "--shard ' 1/4': write it I/N"),
     ("+1/4", "--shard '+1/4': write it"), ("1_0/20", "--shard '1_0/20': write it"),
     ("\uff11/4", "--shard '\uff11/4': write it")],
)  # fmt: skip
def test_a_shard_is_i_of_n(tmp_path, shard, message):
    result = cli("record", "--model", MODEL, "--store", tmp_path, "--shard", shard, "--quiet")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: {message}")
    result = cli("record", "--model", MODEL, "--store", tmp_path, "--shard", "1/2", "--engine",
                 "ray", "--quiet")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--shard and --engine ray cannot be combined" in result.stderr
    result = cli("record", "--model", MODEL, "--store", tmp_path, "--shard", "1/2",
                 "--overwrite", "--quiet")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--overwrite and --shard cannot be combined" in result.stderr
    assert not list(tmp_path.iterdir())


def _shard_lines(run_dir: Path, shard: str) -> int:
    path = run_dir / f"journal-{shard.replace('/', '-of-')}.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


@pytest.mark.slow
def test_shards_at_once_one_killed_then_run_again_lose_and_duplicate_nothing(tmp_path, clean):
    """A job array of three shards started together on one store; shard 2 is killed (kill
    -9) midway and run again: the run holds every sample once, as one process records it."""
    store_dir = tmp_path / "traces"
    run_dir = store_dir / "r"

    def shard(i: str, workers: int, latency: float):
        return cli_process("record", "--model", f"{MODEL},latency={latency}", "--run-id", "r",
                           "--store", str(store_dir), "--workers", str(workers), "--shard", i,
                           "--quiet")  # fmt: skip

    procs = {i: shard(i, 1 if i == "2/3" else 8, 0.02) for i in ("1/3", "2/3", "3/3")}
    wait_for(lambda: _shard_lines(run_dir, "2/3") >= 5)
    procs["2/3"].send_signal(signal.SIGKILL)
    procs["2/3"].wait(timeout=30)
    for i in ("1/3", "3/3"):
        out, err = procs[i].communicate(timeout=120)
        assert procs[i].returncode == 0, err
    kept = Run(run_dir).recorded_ids()
    assert 5 + 32 + 31 <= len(kept) < N_SAMPLES
    assert Run(run_dir).status != "complete"

    again = shard("2/3", 8, 0.02)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert f"{N_SAMPLES}/{N_SAMPLES} ok" in out
    keys = _keys(run_dir)
    assert len(keys) == len(set(keys)) == N_SAMPLES
    assert not list(run_dir.glob("journal*"))
    assert Run(run_dir).status == "complete"
    assert _scores(Store(store_dir), "r") == clean


def test_record_on_ray_without_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    result = cli("record", "--model", MODEL, "--store", tmp_path, "--engine", "ray", "--quiet")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --engine ray needs Ray, which is not installed")
    assert "Hint: pip install 'tcbreplay[ray]'" in result.stderr
    result = cli("record", "--model", MODEL, "--store", tmp_path, "--ray-address", "auto")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --ray-address applies to --engine ray")
    assert not list(tmp_path.iterdir())


def test_overwrite_on_a_ray_that_cannot_be_joined_keeps_the_run(tmp_path):
    # Ray is joined before anything is deleted
    store = Store(tmp_path)
    _record(store, "keep")
    before = sorted(p.name for p in (tmp_path / "keep").iterdir())
    with socket.socket() as s:  # bound, never listening: a connection to it is refused
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
        args = ["--engine", "ray", "--ray-address", address, "--overwrite", "--quiet"]
        result = cli("record", "--model", MODEL, "--store", tmp_path, "--run-id", "keep", *args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: cannot join the Ray cluster at {address}")
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == before
    assert Run(tmp_path / "keep").status == "complete"


def _shard_cli(tmp_path: Path, shard: str, *more: str):
    return cli("record", "--model", MODEL, "--store", tmp_path, "--run-id", "s", "--shard", shard,
               "--workers", "8", "--quiet", *more)  # fmt: skip


@pytest.mark.parametrize(
    ("first", "second", "says"),
    [
        (
            ["--trials", "2", "--limit", "10"],
            ["--trials", "1", "--limit", "10"],
            "--trials 1: run 's' holds trials 0 to 1",
        ),
        (
            ["--trials", "1", "--limit", "10"],
            ["--trials", "2", "--limit", "10"],
            "--trials 2: run 's' is being recorded in shards",
        ),
        ([], ["--limit", "10"], "--limit: run 's' is being recorded in shards with --limit none"),
        (
            ["--limit", "10"],
            ["--limit", "20"],
            "--limit: run 's' is being recorded in shards with --limit 10",
        ),
    ],
)
def test_the_shards_of_a_recording_ask_for_the_same_samples(tmp_path, first, second, says):
    # shards of other --trials or --limit made a run 'complete' with 188 of 94 samples, or
    # partial or incomplete by which shard finished last
    assert _shard_cli(tmp_path, "1/2", *first).exit_code == 0
    before = snapshot(tmp_path)
    result = _shard_cli(tmp_path, "2/2", *second)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: {says}"), result.stderr
    # no journal or lock of its own left behind, and the run's lock names its last writer
    assert snapshot(tmp_path) == before
    assert _shard_cli(tmp_path, "2/2", *first).exit_code == 0  # the same: the run completes
    keys = _keys(tmp_path / "s")
    assert len(keys) == len(set(keys))
    assert Run(tmp_path / "s").status in ("complete", "partial")


def test_a_resume_cannot_ask_for_fewer_trials_than_the_run_holds(tmp_path):
    args = ["record", "--model", MODEL, "--store", tmp_path, "--run-id", "t", "--quiet"]
    assert cli(*args, "--trials", "3", "--limit", "5").exit_code == 0
    result = cli(*args, "--trials", "1")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --trials 1: run 't' holds trials 0 to 2")
    assert cli(*args, "--trials", "4", "--limit", "5").exit_code == 0  # more trials: added
    assert len(_keys(tmp_path / "t")) == 20


def test_a_shard_that_leaves_the_run_incomplete_says_so(tmp_path):
    # it printed "next: tcbreplay score s", which score refuses, and when run again "already
    # holds all 47 samples; nothing to record (--overwrite records it again)"
    first = _shard_cli(tmp_path, "1/2")
    assert first.exit_code == 0, first.output
    assert "the run misses 47 samples (of shards not run, or stopped)" in first.stdout
    assert "next: tcbreplay score" not in first.stdout
    again = _shard_cli(tmp_path, "1/2")
    assert again.exit_code == 0, again.output
    assert "this shard has nothing left to record; the run holds 47/94 samples" in again.stdout
    assert "--overwrite" not in again.stdout
    last = _shard_cli(tmp_path, "2/2")
    assert "next: tcbreplay score s" in last.stdout


def test_a_shard_of_other_inputs_is_not_told_to_overwrite(tmp_path):
    assert _shard_cli(tmp_path, "1/2").exit_code == 0
    result = cli("record", "--model", "sim:seed=9", "--store", tmp_path, "--run-id", "s",
                 "--shard", "2/2", "--quiet")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: run 's' exists with other inputs")
    assert "Hint: give every shard the same inputs" in result.stderr
    assert "--overwrite" not in result.stderr


def _files(root: Path) -> dict[str, str]:
    """The store's files and their sha256, a lock's as "<lock>" (its text names whoever
    took it last, even for a moment), to show that a refused shard left the store as it was."""
    return {k: "<lock>" if k.endswith(".lock") else v for k, v in snapshot(root).items()}


def test_of_two_shards_starting_at_once_with_other_limits_one_is_refused(tmp_path, monkeypatch):
    """Shard 1 has checked the run's manifest and not yet written its selection into it when
    shard 2, asking for other samples, starts: both passed (the check read the manifest of
    the resume, the write came later). Checked and written in one step under the run's lock,
    shard 2 waits for that step, then is refused, and leaves nothing of its own."""
    store = Store(tmp_path)
    _record(store, "s", limit=3)  # partial: the next recording may ask for any samples
    first_checked = threading.Event()
    second_went_on = threading.Event()  # shard 2 waits for the run's lock, or has finished
    check = runner._check_selection
    acquire = writer.acquire_lock

    def slow_check(run_id, selection, manifest, shard):
        check(run_id, selection, manifest, shard)
        if shard == (1, 2):
            first_checked.set()
            assert second_went_on.wait(30)

    def acquire_lock(path):
        try:
            return acquire(path)
        except RunLockedError:
            if threading.current_thread().name == "shard 2":
                second_went_on.set()
            raise

    monkeypatch.setattr(runner, "_check_selection", slow_check)
    monkeypatch.setattr(writer, "acquire_lock", acquire_lock)
    outcomes: dict[int, object] = {}

    def shard(i: int, limit: int) -> None:
        try:
            outcomes[i] = _record(store, "s", shard=(i, 2), limit=limit)
        except BaseException as exc:
            outcomes[i] = exc
        finally:
            if i == 2:
                second_went_on.set()

    first = threading.Thread(target=shard, args=(1, 10), name="shard 1")
    first.start()
    assert first_checked.wait(30)
    second = threading.Thread(target=shard, args=(2, 20), name="shard 2")
    second.start()
    first.join(60)
    second.join(60)
    assert outcomes[1].attempted == 3  # rows 4, 6 and 8: 0 and 2 were recorded before
    assert isinstance(outcomes[2], InputError), outcomes[2]
    assert str(outcomes[2]).startswith(
        "--limit: run 's' is being recorded in shards with --limit 10; every shard"
    )
    run_dir = tmp_path / "s"
    assert Run(run_dir).manifest["shard_selection"]["limit"] == 10
    assert not list(run_dir.glob("*2-of-2*"))  # neither a journal nor a lock of shard 2
    monkeypatch.undo()
    assert _record(store, "s", shard=(2, 2), limit=10).status == "partial"
    assert len(Run(run_dir).recorded_ids()) == 10


def test_more_shards_than_the_recording_selects_are_refused(tmp_path):
    # --shard 1/999999999 was taken: shards of nothing, each with a billionth of --max-rpm
    for shard, more, says in [
        ("1/999999999", [], "--shard 1/999999999: N is more than the 94 samples"),
        ("1/95", [], "--shard 1/95: N is more than the 94 samples"),
        ("3/3", ["--limit", "2"], "--shard 3/3: N is more than the 2 samples"),
        ("1/5", ["--limit", "2", "--trials", "2"],
         "--shard 1/5: N is more than the 4 trials (2 samples x 2 trials)"),
        ("1/3", ["--sample-id", "thanks-bye", "--sample-id", "hi-there"],
         "--shard 1/3: N is more than the 2 samples"),
    ]:  # fmt: skip
        result = _shard_cli(tmp_path, shard, *more)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"Error: {says} this recording selects"), result.stderr
        assert len(result.stderr.splitlines()) == 2  # the error and its hint
        assert not list(tmp_path.iterdir())  # refused before the run was made
    assert _shard_cli(tmp_path, "4/4", "--limit", "2", "--trials", "2").exit_code == 0
    before = _files(tmp_path)
    # resumed without --trials: the run's 2 trials count
    assert _shard_cli(tmp_path, "3/4", "--limit", "2").exit_code == 0
    result = _shard_cli(tmp_path, "1/5", "--limit", "2")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --shard 1/5: N is more than the 4 trials")
    assert "Hint: give N from 1 to 4" in result.stderr
    assert _files(tmp_path).keys() == before.keys() | {"s/shard-3-of-4.lock"}


def test_more_shards_than_calls_a_minute_is_a_one_line_error(tmp_path):
    # (one-call samples: a recording that is not refused ends in a second, not in minutes)
    ids = ["hi-there", "thanks-bye", "good-morning", "tell-a-joke", "capital-of-france"]
    result = _shard_cli(tmp_path, "1/4", "--max-rpm", "2",
                        *[arg for i in ids for arg in ("--sample-id", i)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        "Error: --shard 1/4: --max-rpm 2 is fewer calls a minute than the 4 shards"
    ), result.stderr
    assert "Hint: give N from 1 to 2, or --max-rpm 4 or more" in result.stderr
    assert len(result.stderr.splitlines()) == 2
    assert not list(tmp_path.iterdir())  # refused before the run was made


def test_a_shard_of_n_greater_than_the_selection_is_refused_by_the_library(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(InputError, match=r"--shard 2/95: N is more than the 94 samples"):
        _record(store, "r", shard=(2, 95))
    with pytest.raises(InputError, match=r"--shard 1/6: N is more than the 5 samples"):
        _record(store, "r", shard=(1, 6), limit=5)
    with pytest.raises(InputError, match=r"--shard 2/2: N is more than the 1 sample this"):
        _record(store, "r", shard=(2, 2), limit=1)
    assert not list(tmp_path.iterdir())
    assert _record(store, "r", shard=(5, 5), limit=5).attempted == 1
