"""Recording in several processes (``--processes``): the same run as in one, one writer, no orphans.

Subprocess tests run ``python -m tcbreplay record`` and kill its main process for real.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import cli, cli_process, journal_lines, wait_for

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.loop import run_loop
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.processes import split_workers
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError

N_SAMPLES = len(json.loads(BENCHMARKS["tool-call"].dataset.read_text()))
MODEL = "sim:seed=7,error_rate=0.3,parallel=0.3,fault_rate=0.2"


class _Counts:
    """A progress callback that counts what it is told."""

    def __init__(self) -> None:
        self.statuses: list[str] = []
        self.retries = 0
        self.started: tuple[int, int] | None = None

    def start(self, total: int, already: int) -> None:
        self.started = (total, already)

    def retry(self, exc: BaseException) -> None:
        self.retries += 1

    def __call__(self, record: dict) -> None:
        self.statuses.append(record["status"])


def _record(store: Store, processes: int, progress=None, model: str = MODEL, **options):
    return record_run(
        load_inputs("tool-call"),
        parse_model(model),
        store,
        run_id="r",
        options=RecordOptions(
            **{"workers": 4, "processes": processes, "retries": 5, "backoff": 0.001, **options}
        ),
        progress=progress,
    )


def _stored(run_dir: Path) -> dict[str, dict]:
    """Each sample's status, attempts and messages, without the ids LangChain draws at random."""
    samples = pq.read_table(run_dir / "samples.parquet").to_pylist()
    messages = pq.read_table(run_dir / "messages.parquet").to_pylist()
    out = {
        s["sample_id"]: {"status": s["status"], "attempts": s["attempts"], "messages": []}
        for s in samples
    }
    for m in messages:
        body = json.loads(m["message"])
        if body["type"] in ("human", "tool"):
            body["data"].pop("id")
        out[m["sample_id"]]["messages"].append((m["position"], m["type"], body))
    return out


def _scores(store: Store, run_id: str = "r") -> list[tuple]:
    return sorted(score_run(store, run_id, write=False).scores.drop("run_id", "scoring").rows())


# -- the same run, one process or several -------------------------------------------------


@pytest.mark.slow
def test_two_processes_store_what_one_process_stores(tmp_path):
    one, two = Store(tmp_path / "one"), Store(tmp_path / "two")
    progress_one, progress_two = _Counts(), _Counts()
    a = _record(one, 1, progress_one)
    b = _record(two, 2, progress_two)
    assert (a.processes, b.processes) == (1, 2)
    assert _stored(Path(a.run_dir)) == _stored(Path(b.run_dir))
    assert _scores(one) == _scores(two)
    # the sim's faults made some calls retry, the same ones in both layouts
    assert b.retries == a.retries > 0
    assert (b.ok, b.errors, b.recorded) == (a.ok, a.errors, a.recorded) == (b.ok, b.errors, 94)
    # progress heard of every sample and every retry from the children
    assert progress_two.started == progress_one.started == (N_SAMPLES, 0)
    assert sorted(progress_two.statuses) == sorted(progress_one.statuses)
    assert len(progress_two.statuses) == N_SAMPLES
    assert progress_two.retries == progress_one.retries == b.retries
    manifest = json.loads((Path(b.run_dir) / "manifest.json").read_text())
    assert manifest["runner"]["processes"] == 2
    assert manifest["status"] == "complete"
    assert not (Path(b.run_dir) / "journal.jsonl").exists()


@pytest.mark.slow
def test_retry_errors_in_other_processes_records_only_the_failed_samples(tmp_path):
    """The sim's faults depend on (seed, sample, turn, call number in this process) only, so
    re-running the failed samples in three processes gives what one process stores at once."""
    store = Store(tmp_path / "traces")
    first = _record(store, 2, retries=0)
    assert 0 < first.errors < N_SAMPLES
    again = record_run(load_inputs("tool-call"), parse_model(MODEL), store, run_id="r",
                       options=RecordOptions(workers=6, processes=3, retries=5, backoff=0.001),
                       retry_errors=True)  # fmt: skip
    assert again.attempted == first.errors
    assert again.processes == 3
    clean = Store(tmp_path / "clean")
    _record(clean, 1)
    assert _stored(Path(again.run_dir)) == _stored(clean.run_dir("r"))


@pytest.mark.slow
def test_gc_and_thresholds_are_restored_after_a_run(tmp_path):
    before = gc.get_threshold()
    _record(Store(tmp_path / "a"), 2, model="sim")
    _record(Store(tmp_path / "b"), 1, model="sim")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_run_loop_uses_uvloop_when_installed():
    pytest.importorskip("uvloop")

    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run_loop(loop_module()).startswith("uvloop")


# -- options ---------------------------------------------------------------------------------


def test_process_count_and_worker_split(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    assert RecordOptions(workers=4).process_count() == 1
    assert RecordOptions(workers=64).process_count() == min(cores, 2)
    assert RecordOptions(workers=2, processes=2).process_count() == 2
    monkeypatch.setattr(sys, "platform", "darwin")  # forked children only by default on Linux
    assert RecordOptions(workers=64).process_count() == 1
    assert RecordOptions(workers=64, processes=2).process_count() == 2
    assert split_workers(64, 2) == [32, 32]
    assert split_workers(7, 3) == [3, 2, 2]
    assert sum(split_workers(5, 5)) == 5


def test_a_childs_workers_are_no_more_than_the_samples(tmp_path, monkeypatch):
    """--workers 20000 for 2 samples: each child started all its workers, each a few ms after
    the one before, and the recording ended 51 s after its samples (0.4 s in one process)."""
    from tcbreplay._record import processes

    shares = []
    real = processes.run_in_processes

    def noted(given, *args, **kwargs):
        shares.append(given)
        return real(given, *args, **kwargs)

    monkeypatch.setattr(processes, "run_in_processes", noted)
    record_run(load_inputs("tool-call"), parse_model("sim"), Store(tmp_path), run_id="r",
               options=RecordOptions(workers=20_000, processes=2), limit=3)  # fmt: skip
    assert shares == [[2, 1]]


def test_rate_limits_are_shared_out_between_processes():
    options = RecordOptions(workers=8, max_rpm=60, max_tpm=900)
    limiters = [options.rate_limiter(p, 3) for p in range(3)]
    assert [(limiter.rpm, limiter.tpm) for limiter in limiters] == [(20, 300)] * 3
    assert (options.rate_limiter().rpm, options.rate_limiter().tpm) == (60, 900)
    assert not RecordOptions(workers=8).rate_limiter(1, 2).active


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--processes", "0"], "Error: --processes must be at least 1"),
        (["--processes", "3", "--workers", "2"], "Error: --processes 3 is more than --workers 2"),
        (["--processes", "two"], "'two' is not a valid integer"),
    ],
)
def test_bad_processes_value_is_a_one_line_error(tmp_path, args, message):
    result = cli("record", "--model", "sim", "--store", tmp_path / "traces", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "traces").exists()
    with pytest.raises(InputError):
        RecordOptions(workers=2, processes=0)


# -- failures --------------------------------------------------------------------------------


def test_a_child_that_dies_fails_the_run_and_keeps_what_was_finished(tmp_path, monkeypatch):
    import tcbreplay._record.processes

    real = tcbreplay._record.processes.run_sample

    async def dies_on_one_sample(agent, sample, run_id, options, *trial):
        if sample.index == 40:
            os._exit(3)
        return await real(agent, sample, run_id, options, *trial)

    monkeypatch.setattr(tcbreplay._record.processes, "run_sample", dies_on_one_sample)
    store = Store(tmp_path / "traces")
    # (a traceback of ChildFailed before, from the command line too)
    result = cli("record", "--model", "sim:latency=0.01", "--run-id", "r", "--workers", 4,
                 "--processes", 2, "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 1, result.output
    error, hint = result.stderr.splitlines()[-2:]
    said = (r"Error: recording of r stopped: recording process \d+ exited \(code 3\) "
            r"with \d+ samples? of its own unfinished")  # fmt: skip
    assert re.fullmatch(said, error), result.stderr
    assert hint.startswith(
        "Hint: the run keeps the samples its processes finished; once "
        "fixed, continue with: tcbreplay record --retry-errors r --store "
    )
    assert "Traceback" not in result.output
    run_dir = store.run_dir("r")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    kept = pq.read_table(run_dir / "samples.parquet").to_pylist()
    assert 0 < len(kept) < N_SAMPLES
    assert 40 not in {r["sample_index"] for r in kept}
    store.resume_run("r").close()  # the run is not left locked


def test_a_child_killed_with_sigkill_is_said_in_the_manifest(tmp_path, monkeypatch):
    """A recording process killed with ``kill -9`` (the out-of-memory killer's signal) left
    the manifest's ``stopped`` null, the run ``failed`` with no word why, and the line said
    "exited (code -9)"."""
    import tcbreplay._record.processes

    real = tcbreplay._record.processes.run_sample

    async def killed_on_one_sample(agent, sample, run_id, options, *trial):
        if sample.index == 40:
            os.kill(os.getpid(), signal.SIGKILL)
        return await real(agent, sample, run_id, options, *trial)

    monkeypatch.setattr(tcbreplay._record.processes, "run_sample", killed_on_one_sample)
    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:latency=0.01", "--run-id", "r", "--workers", 4,
                 "--processes", 2, "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 1, result.output
    error = result.stderr.splitlines()[-2]
    said = r"recording process \d+ was killed by SIGKILL with \d+ samples? of its own unfinished"
    assert re.fullmatch(rf"Error: recording of r stopped: {said}", error), result.stderr
    manifest = json.loads((store.run_dir("r") / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert re.fullmatch(rf"process died: {said}", manifest["stopped"]), manifest["stopped"]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited and waits to be reaped


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.mark.slow
@needs_proc
def test_kill_9_of_the_parent_kills_the_children_and_resume_loses_nothing(tmp_path):
    store_dir = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=5,latency=0.02", "--run-id", "k", "--store",
            str(store_dir), "--workers", "4", "--processes", "2", "--quiet"]  # fmt: skip
    first = cli_process(*args)
    run_dir = store_dir / "k"
    wait_for(lambda: journal_lines(run_dir) >= 10)
    children = _children(first.pid)
    assert len(children) == 2
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    wait_for(lambda: not any(_alive(pid) for pid in children), timeout=10)
    kept = journal_lines(run_dir)
    assert 10 <= kept < N_SAMPLES

    second = cli_process(*args)  # takes the run over at once: no child kept the lock
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{N_SAMPLES}/{N_SAMPLES} ok" in out
    rows = pq.read_table(run_dir / "samples.parquet").to_pylist()
    ids = [r["sample_id"] for r in rows]
    assert len(ids) == len(set(ids)) == N_SAMPLES

    clean = Store(tmp_path / "clean")
    record_run(load_inputs("tool-call"), parse_model("sim:seed=5,latency=0.02"), clean,
               run_id="k", options=RecordOptions(workers=8))  # fmt: skip
    assert _scores(Store(store_dir), "k") == _scores(clean, "k")


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C, a job scheduler
def test_ctrl_c_stops_the_children_and_keeps_what_they_finished(tmp_path, stop):
    store_dir = tmp_path / "traces"
    # still going when Ctrl-C comes on a loaded machine (about 14 s of waiting in all)
    proc = cli_process("record", "--model", "sim:latency=0.4", "--run-id", "c", "--store",
                str(store_dir), "--workers", "4", "--processes", "2")  # fmt: skip
    run_dir = store_dir / "c"
    wait_for(lambda: journal_lines(run_dir) >= 5)
    children = _children(proc.pid)
    assert len(children) == 2
    proc.send_signal(stop)  # to the parent alone
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + stop  # 130 Ctrl-C, 143 SIGTERM: as a shell reports them
    assert "Interrupted: kept" in err
    assert "Traceback" not in err
    assert not any(_alive(pid) for pid in children)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    kept = pq.read_table(run_dir / "samples.parquet").to_pylist()
    assert 5 <= len(kept) < N_SAMPLES
    assert f"kept {len(kept)}/{N_SAMPLES}" in err

    resumed = cli("record", "--resume", "c", "--store", store_dir, "--workers", "32",
                  "--processes", "2", "--quiet")  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert len(pq.read_table(run_dir / "samples.parquet")) == N_SAMPLES


# -- rate limits -----------------------------------------------------------------------------

# samples the sim answers in one model turn (no gold calls): a sample's finished_at is then
# the time of its one model call, give or take its latency
ONE_TURN = ["hi-there", "what-can-you-do", "thanks-bye", "good-morning", "tell-a-joke",
            "capital-of-france"]  # fmt: skip


# real minutes: the shares' arithmetic is tested in test_rate_shares.py
@pytest.mark.slow
def test_a_recording_in_four_processes_keeps_to_max_rpm(tmp_path):
    """--max-rpm 6 --processes 4 on one-call samples: the run sends its 6 calls of the
    minute and waits; interrupted then, it holds 6 samples (equal shares of 1.5 let each
    process send 2: 8 at once). A minute is not waited for: the 7th call would come 60 s on."""
    store_dir = tmp_path / "traces"
    run_dir = store_dir / "r"
    ids = [arg for sample_id in ONE_TURN for arg in ("--sample-id", sample_id)]
    proc = cli_process("record", "--model", "sim:seed=5,error_rate=0,latency=0.05",
                       "--run-id", "r", "--store", str(store_dir), "--workers", "4",
                       "--processes", "4", "--max-rpm", "6", "--trials", "2", *ids,
                       "--quiet")  # fmt: skip
    try:
        wait_for(lambda: journal_lines(run_dir) >= 6, timeout=60)
        time.sleep(1.5)  # each process has had its turn: none sends another for a minute
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _calls_in_a_minute(run_dir) == 6


def _calls_in_a_minute(run_dir: Path) -> int:
    """The most model calls the stored run made in any 60 s: a sample's one AI message at
    its finished_at (the call's end, within the sim's latency), each retry one more."""
    samples = pq.read_table(run_dir / "samples.parquet").to_pylist()
    ai = pq.read_table(run_dir / "messages.parquet", filters=[("type", "==", "ai")])
    assert sorted(ai["sample_index"].to_pylist()) == sorted(s["sample_index"] for s in samples)
    calls = [s["finished_at"].timestamp() for s in samples for _ in range(s["attempts"] or 1)]
    return max(sum(1 for t in calls if start <= t < start + 60) for start in calls)
