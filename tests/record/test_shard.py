"""Recording one run in shards (``record --shard I/N``): shards one after another or all at
once, one killed and run again, and the writers a sharded run refuses."""

from __future__ import annotations

import json
import shlex
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
from tcbreplay._record.on_ray import settling
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run
from tcbreplay._store import writer
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.shards import finish_hint
from tcbreplay._store.writer import ShardWriter
from tcbreplay.errors import InputError, RunLockedError

N_SAMPLES = len(json.loads(BENCHMARKS["tool-call"].dataset.read_text()))
MODEL = "sim:seed=5"


def _scores(store: Store, run_id: str) -> list[tuple]:
    scores = score_run(store, run_id, write=False).scores
    return sorted(scores.drop("run_id", "scoring").rows())


def _record(store: Store, run_id: str, shard=None, model: str = MODEL, workers: int = 8,
            limit: int | None = None, trials: int | None = None):  # fmt: skip
    return record_run(load_inputs("tool-call"), parse_model(model), store, run_id=run_id,
                      options=RecordOptions(workers=workers, trials=trials), shard=shard,
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
        assert again.stdout.splitlines()[:2] == [
            "run r: this shard has nothing left to record",
            "the run holds 2 of the 2 samples asked for so far: shard 1/2 is still recording; "
            f"next, once every shard has finished: tcbreplay score r --store {tmp_path}",
        ]
        with ShardWriter(run_dir, (2, 2)) as other:  # the other shard records beside it
            assert other.fold() is False  # shard 1 still records: the fold is left to it
    assert Run(run_dir).status == "recording"
    assert _listed_status(tmp_path) == "interrupted"  # no process records it now
    # and score says the same of it (it said "run recording")
    scored = cli("score", "r", "--store", tmp_path, "--allow-incomplete", "--format", "json")
    assert json.loads(scored.stdout)["warnings"][0].startswith("run interrupted: "), scored.stdout
    with store.resume_run("r"):  # every shard done: the run is writable as a whole again
        pass


def test_a_shard_run_again_beside_the_last_one_folding_says_it_is_folding(tmp_path, monkeypatch):
    """Reported: a killed shard run again beside the last one said "run any shard again"
    while that one folded the run, which then ended complete."""
    store, run_dir = Store(tmp_path), tmp_path / "r"
    record_run(load_inputs("tool-call"), parse_model(MODEL), store, run_id="r", limit=2,
               shard=(1, 2))  # fmt: skip
    with ShardWriter(run_dir, (1, 2)) as shard:  # shard 1 run again, beside shard 2
        shard.update_manifest(status="recording")
        args = ("record", "--model", MODEL, "--run-id", "r", "--store", tmp_path, "--shard",
                "2/2", "--limit", "2", "--quiet")  # fmt: skip
        assert cli(*args).exit_code == 0  # the fold left to shard 1, which then stops
    # every row stored, none folding: the last shard was killed folding
    assert "did not fold: run any shard again" in finish_hint(Run(run_dir))
    said = []
    fold = writer.RunWriter._fold

    def folding(self, records=None):  # what the other shard, and score, say meanwhile
        said.append(finish_hint(Run(run_dir)))
        said.append(cli("score", "r", "--store", tmp_path).stderr)
        fold(self, records)

    monkeypatch.setattr(writer.RunWriter, "_fold", folding)
    with ShardWriter(run_dir, (2, 2)) as last:
        assert last.fold() is True
    waiting = "shard 2/2 is folding every shard's samples into the run: wait for it to finish"
    assert said[0] == waiting
    assert (
        f"Hint: {waiting}; or score what is there with: tcbreplay score r --store {tmp_path} "
        "--allow-incomplete" in said[1]
    )
    assert len(_keys(run_dir)) == 2  # both shards' rows folded


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


@pytest.mark.slow
def test_a_shard_of_a_selection_killed_and_run_again_records_only_its_own_rows(tmp_path):
    """Shard 1 of --limit 30 --trials 2 killed (kill -9) midway, shard 2 run to its end, then
    shard 1 again: it deals the selection's rows as its first run did, and records only those
    of its 30 that it misses; the run holds each of the 60 once."""
    store_dir = tmp_path / "traces"
    run_dir = store_dir / "r"

    def shard(i: str, workers: int):
        return cli_process("record", "--model", f"{MODEL},latency=0.05", "--run-id", "r",
                           "--store", str(store_dir), "--workers", str(workers), "--shard", i,
                           "--limit", "30", "--trials", "2", "--quiet")  # fmt: skip

    first = shard("1/2", 1)
    wait_for(lambda: _shard_lines(run_dir, "1/2") >= 5)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    kept = _shard_lines(run_dir, "1/2")
    assert kept < 30
    other = shard("2/2", 8)
    out, err = other.communicate(timeout=120)
    assert other.returncode == 0, err
    assert "; recorded 30 in" in out
    assert f"the run misses {30 - kept} of the 60 trials (30 samples x 2 trials) asked for: " \
        "shard 1/2 has not finished" in out  # fmt: skip
    again = shard("1/2", 8)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert f"; recorded {30 - kept} in" in out
    keys = _keys(run_dir)
    assert len(keys) == len(set(keys)) == 60
    assert Run(run_dir).status == "partial"


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


@pytest.mark.slow  # (about 2.5 s)
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


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_a_shard_that_leaves_the_run_incomplete_says_so(tmp_path):
    # it printed "next: tcbreplay score s", which score refuses, and when run again "already
    # holds all 47 samples; nothing to record (--overwrite records it again)"
    first = _shard_cli(tmp_path, "1/2")
    assert first.exit_code == 0, first.output
    missing = (
        "the run misses 47 of the 94 samples: shard 2/2 has not finished: run it (the same "
        f"command with --shard 2/2, or: tcbreplay record --resume s --store {tmp_path} --shard "
        f"2/2); then: tcbreplay score s --store {tmp_path}"
    )
    assert first.stdout.splitlines()[1] == missing
    assert "next: tcbreplay score" not in first.stdout
    again = _shard_cli(tmp_path, "1/2")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines() == ["run s: this shard has nothing left to record", missing]
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


def test_two_samples_named_over_two_shards_are_recorded_one_by_each(tmp_path):
    # shards took the rows of their dataset positions: shard 2/2 said "this shard has nothing
    # left to record; the run holds 0/94 samples" (hi-there and thanks-bye are entries 0 and
    # 2), and shard 1/2 recorded both
    named = ["--sample-id", "hi-there", "--sample-id", "thanks-bye"]
    second = _shard_cli(tmp_path, "2/2", *named)
    assert second.exit_code == 0, second.output
    assert "recorded 1 in" in second.stdout
    assert _keys(tmp_path / "s") == [("thanks-bye", 0)]
    assert Run(tmp_path / "s").status == "incomplete"
    first = _shard_cli(tmp_path, "1/2", *named)
    assert first.exit_code == 0, first.output
    assert "recorded 1 in" in first.stdout
    assert sorted(_keys(tmp_path / "s")) == [("hi-there", 0), ("thanks-bye", 0)]
    assert Run(tmp_path / "s").status == "partial"


@pytest.mark.parametrize(
    ("limit", "trials", "shards", "sizes"),
    [(2, 3, 5, [2, 1, 1, 1, 1]), (3, 2, 2, [3, 3]), (5, 1, 5, [1] * 5), (20, 1, 3, [7, 7, 6])],
)
def test_the_shards_of_a_selection_differ_by_one_row_at_most(tmp_path, limit, trials, shards,
                                                              sizes):  # fmt: skip
    # --limit 2 --trials 3: shard 3/5 recorded nothing; --limit 3 --trials 2: 4 rows and 2
    store = Store(tmp_path)
    done = [_record(store, "r", shard=(i, shards), limit=limit, trials=trials)
            for i in range(1, shards + 1)]  # fmt: skip
    assert [s.attempted for s in done] == sizes
    assert [s.status for s in done] == ["incomplete"] * (shards - 1) + ["partial"]
    keys = _keys(tmp_path / "r")
    assert len(keys) == len(set(keys)) == limit * trials
    assert {trial for _, trial in keys} == set(range(trials))


def test_an_unfinished_sharded_run_names_the_shards_to_run_and_their_command(tmp_path):
    """After shard 1/2 of --limit 20 alone, the run was said to miss 84 samples, and the
    resume it suggested (record --resume s) recorded all 84: the selection misses 10, of
    shard 2/2, whose command the hint gives; run, it records those 10."""
    first = _shard_cli(tmp_path, "1/2", "--limit", "20")
    assert first.exit_code == 0, first.output
    lines = first.stdout.splitlines()
    assert lines[0].startswith("run s (simulated model): 10 ok, 0 errors")
    command = f"tcbreplay record --resume s --store {tmp_path} --shard 2/2 --limit 20"
    assert lines[1:] == [
        "the run misses 10 of the 20 samples asked for: shard 2/2 has not finished: run it "
        f"(the same command with --shard 2/2, or: {command}); then: tcbreplay score s --store "
        f"{tmp_path}"
    ]
    refused = cli("score", "s", "--store", tmp_path)
    assert refused.exit_code == 1
    assert refused.stderr.splitlines()[1] == (
        f"Hint: shard 2/2 has not finished: run it (the same command with --shard 2/2, or: "
        f"{command}); or score what is there with: tcbreplay score s --store {tmp_path} "
        "--allow-incomplete"
    )
    scored = cli("score", "s", "--store", tmp_path, "--allow-incomplete", "--format", "json")
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["warnings"] == [
        "run incomplete: 10 of the 20 samples asked for recorded, scored as they are; shard "
        f"2/2 has not finished: run it (the same command with --shard 2/2, or: {command})"
    ]
    rest = cli(*shlex.split(command)[1:], "--quiet")
    assert rest.exit_code == 0, rest.output
    assert "recorded 10 in" in rest.stdout
    assert len(_keys(tmp_path / "s")) == 20
    assert Run(tmp_path / "s").status == "partial"


def test_score_while_a_shard_records_says_so_and_suggests_no_writer_it_refuses(tmp_path):
    # `score --allow-incomplete` and `score` suggested `record --resume s`, which a shard
    # recording refuses, and which records outside the selection
    assert _shard_cli(tmp_path, "2/2", "--limit", "4").exit_code == 0
    with ShardWriter(tmp_path / "s", (1, 2)) as shard:  # shard 1 records
        shard.update_manifest(status="recording")
        refused = cli("score", "s", "--store", tmp_path)
        assert refused.exit_code == 1
        assert refused.stderr.splitlines()[1] == (
            "Hint: shard 1/2 is still recording; or score what is there with: tcbreplay score s "
            f"--store {tmp_path} --allow-incomplete"
        )
        scored = cli("score", "s", "--store", tmp_path, "--allow-incomplete", "--format", "json")
        assert scored.exit_code == 0, scored.output
        assert json.loads(scored.stdout)["warnings"] == [
            "run recording: 2 of the 4 samples asked for recorded, scored as they are; shard "
            "1/2 is still recording"
        ]
        assert "--resume" not in refused.stderr + scored.stdout


def test_a_shard_stopped_or_interrupted_is_continued_with_its_shard_and_selection(
    tmp_path, monkeypatch
):
    # the hints named the whole run's commands (record --retry-errors r, record --resume r):
    # refused while other shards record, and recording outside the selection
    store = Store(tmp_path)
    _record(store, "r", shard=(1, 3), limit=6, trials=2)
    run = Run(tmp_path / "r")
    assert runner.retry_hint(run, (2, 3), {"limit": 6, "sample_ids": None}).startswith(
        f"once fixed, continue with: tcbreplay record --retry-errors r --store {tmp_path} "
        "--shard 2/3 --limit 6 ("
    )

    def interrupted(*args, **kwargs):  # Ctrl-C midway
        raise runner.RecordInterrupted(runner.RecordSummary(
            run_id="r", run_dir=str(tmp_path / "r"), status="recording", total=188, recorded=5,
            ok=5, errors=0, retries=0, duration_s=1.0,
        ))  # fmt: skip

    monkeypatch.setattr(runner, "record_run", interrupted)
    result = cli("record", "--model", MODEL, "--store", tmp_path, "--run-id", "r", "--shard",
                 "2/3", "--limit", "6", "--trials", "2", "--quiet")  # fmt: skip
    assert result.exit_code == 130, result.output
    assert result.stderr.splitlines()[1] == (
        f"Hint: continue with: tcbreplay record --resume r --store {tmp_path} --shard 2/3 --limit 6"
    )


def test_the_summary_of_shards_is_the_one_that_settled_the_run(tmp_path):
    """A shard that finishes before another starts writes the run's manifest, incomplete;
    record --engine ray reported that shard's summary ("10/94 ok ... the run misses 84
    samples") when it came first, where the run was partial with 20 of 20."""
    store = Store(tmp_path)
    first = _record(store, "r", shard=(1, 2), limit=20)
    second = _record(store, "r", shard=(2, 2), limit=20)
    assert (first.status, first.recorded, second.status, second.recorded) == (
        "incomplete", 10, "partial", 20,
    )  # fmt: skip
    assert settling([first, second]) is second
    assert settling([second, first]) is second


def test_a_shard_of_one_sample_in_trials_says_the_sample_in_the_singular(tmp_path):
    """It said "the run misses 1 of the 2 trials (1 samples x 2 trials) asked for"."""
    result = _shard_cli(tmp_path, "1/2", "--sample-id", "hi-there", "--trials", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith(
        "the run misses 1 of the 2 trials (1 sample x 2 trials) asked for: shard 2/2 has not "
        "finished"
    )
