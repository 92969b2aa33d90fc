"""A resumed recording keeps to ``--max-rpm``/``--max-tpm`` across the minute its killed (or
interrupted) predecessor was sending in: its rate window starts with the model calls and
tokens of the samples the run stored in the last minute."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from clocks import FakeClock
from helpers import cli_process, journal_lines, wait_for

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.retry import RateLimiter, RecentUse
from tcbreplay._record.runner import record_run
from tcbreplay._store.recent import recent_samples
from tcbreplay._store.runs import Store

# samples the sim answers in one model turn (no gold calls): a sample's finished_at is then
# the time of its one model call, give or take its latency
ONE_TURN = ["hi-there", "what-can-you-do", "thanks-bye", "good-morning", "tell-a-joke",
            "capital-of-france"]  # fmt: skip


def _first_call_at(limiter: RateLimiter, clock: FakeClock) -> float:
    """Seconds the limiter's first call waited."""

    async def first() -> float:
        await limiter.acquire()
        return clock.monotonic() - clock.start

    return asyncio.run(first())


def test_a_limiter_started_on_calls_made_just_now_waits_before_its_first():
    clock = FakeClock()
    fresh = RateLimiter(rpm=4, clock=clock)
    assert _first_call_at(fresh, clock) == 0.0

    clock = FakeClock()
    resumed = RateLimiter(rpm=4, clock=clock)
    # four calls stored 10 s ago (wall clock): the window frees 50 s from now
    resumed.prefill(RecentUse(calls=[clock.now() - 10] * 4))
    assert _first_call_at(resumed, clock) == 50.0
    assert clock.sleeps == [50.0]

    clock = FakeClock()
    older = RateLimiter(rpm=4, clock=clock)
    older.prefill(RecentUse(calls=[clock.now() - 61] * 4))  # out of the window already
    assert _first_call_at(older, clock) == 0.0


def test_a_process_of_several_starts_with_its_share_of_the_recent_calls():
    """Two processes, each with 2 of --max-rpm 4, after three calls made 20 s ago: each
    counts half of each, 1.5, which leaves half a call, no whole one. Both wait for the three
    to leave the window (each sent one at once: 5 calls in a minute)."""
    clock = FakeClock()
    limiters = [RateLimiter(rpm=2, clock=clock) for _ in range(2)]
    for limiter in limiters:
        limiter.prefill(RecentUse(calls=[clock.now() - 20] * 3), calls=0.5)

    async def two_each() -> list[float]:
        starts = []
        for limiter in limiters:
            for _ in range(2):
                await limiter.acquire()
                starts.append(clock.monotonic() - clock.start)
        return starts

    assert asyncio.run(two_each()) == [40.0] * 4  # 4 in the minute from 40 s, none before


def test_a_limiter_started_on_recent_tokens_waits_for_them():
    clock = FakeClock()
    limiter = RateLimiter(tpm=100, clock=clock)
    limiter.prefill(RecentUse(tokens=[(clock.now() - 30, 60), (clock.now() - 5, 50)]))
    assert _first_call_at(limiter, clock) == 30.0  # 110 tokens, until the first 60 expire


def test_recent_use_counts_each_ai_message_retry_and_failure_as_a_call():
    samples = [
        # (finished_at, status, attempts, ai messages, tokens)
        (100.0, "ok", 1, 3, 90),
        (101.0, "ok", 3, 1, None),  # two retries: three calls for one answer
        (102.0, "error", 1, 0, None),  # its one call failed
    ]
    use = RecentUse.of(recent for recent in samples)
    assert use.calls == [100.0] * 3 + [101.0] * 3 + [102.0]
    assert use.tokens == [(100.0, 90)]


def _record(store: Store, **options) -> None:
    record_run(load_inputs("tool-call"), parse_model("sim:seed=5,error_rate=0"), store,
               run_id="r", options=RecordOptions(workers=4, **options))  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, float]:
    """The built-in benchmark recorded once: the store's folder, and a time just before."""
    root = tmp_path_factory.mktemp("recent")
    before = time.time()
    _record(Store(root))
    return root, before


def test_recent_samples_are_the_rows_stored_since_a_time(recorded):
    root, before = recorded
    run_dir = root / "r"
    rows = pq.read_table(run_dir / "samples.parquet").to_pylist()
    ai = pq.read_table(run_dir / "messages.parquet", filters=[("type", "==", "ai")])
    counts: dict[int, int] = {}
    for index in ai["sample_index"].to_pylist():
        counts[index] = counts.get(index, 0) + 1

    recent = recent_samples(run_dir, since=before - 1)
    assert len(recent) == len(rows)
    assert sorted(r.ai_messages for r in recent) == sorted(counts.values())
    assert sum(r.tokens or 0 for r in recent) == sum(
        (r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in rows
    )
    assert all(before - 1 <= r.finished_at <= time.time() for r in recent)
    assert recent_samples(run_dir, since=time.time() + 1) == []
    # shard 2 of 3 of the whole dataset stored the rows whose number is 1 modulo 3
    ours = {r["sample_index"] for r in rows if r["sample_index"] % 3 == 1}
    shard = recent_samples(run_dir, since=before - 1, rows=ours)
    assert sorted(r.finished_at for r in shard) == sorted(
        r["finished_at"].timestamp() for r in rows if r["sample_index"] % 3 == 1
    )


def test_recent_samples_of_a_journal_not_folded_yet(recorded, tmp_path):
    """A killed recording leaves its samples in its journal: read from its end."""
    root, before = recorded
    run_dir = tmp_path / "r"
    shutil.copytree(root / "r", run_dir)
    folded = recent_samples(run_dir, since=before - 1)
    # the run's rows as the journal of a recording killed before it folded them
    rows = _journal_of(run_dir)
    (run_dir / "samples.parquet").unlink()
    (run_dir / "messages.parquet").unlink()
    (run_dir / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"to')
    assert sorted(recent_samples(run_dir, since=before - 1)) == sorted(folded)
    assert recent_samples(run_dir, since=time.time() + 1) == []


SAMPLE_KEYS = ("run_id", "sample_id", "trial", "sample_index", "input", "status", "attempts")
MESSAGE_KEYS = ("type", "message", "input_tokens", "output_tokens", "total_tokens")


def _journal_of(run_dir: Path) -> list[dict]:
    """Journal records rebuilt from a run's files (what its recording appended)."""
    samples = pq.read_table(run_dir / "samples.parquet").to_pylist()
    messages = pq.read_table(run_dir / "messages.parquet").to_pylist()
    records = []
    for s in sorted(samples, key=lambda s: s["finished_at"]):
        own = [m for m in messages if m["sample_index"] == s["sample_index"]]
        records.append(
            {
                **{k: s[k] for k in SAMPLE_KEYS},
                "gold": json.loads(s["gold"]),
                "started_at": s["started_at"].isoformat(),
                "finished_at": s["finished_at"].isoformat(),
                "messages": [
                    {k: m[k] for k in MESSAGE_KEYS}
                    for m in sorted(own, key=lambda m: m["position"])
                ],
            }
        )
    return records


def _most_in_a_window(run_dir: Path, seconds: float = 55.0) -> int:
    """The most samples (each one model call) stored within any ``seconds``."""
    finished = sorted(
        r["finished_at"].timestamp()
        for r in pq.read_table(run_dir / "samples.parquet", columns=["finished_at"]).to_pylist()
    )
    return max(sum(1 for t in finished if start <= t < start + seconds) for start in finished)


def _resume_for(store_dir: Path, seconds: float) -> tuple[int, str]:
    """``record --resume r`` interrupted (Ctrl-C) ``seconds`` after it took the run: its exit
    code and stderr."""
    proc = cli_process("record", "--resume", "r", "--store", str(store_dir), "--quiet")
    lock = store_dir / "r" / "writer.lock"
    wait_for(lambda: lock.exists() and str(proc.pid) in lock.read_text().split(), timeout=30)
    time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


# about 20 s of waiting on real minutes (the library-level tests above cover the counting)
@pytest.mark.slow
def test_a_killed_recording_resumed_keeps_to_max_rpm(tmp_path):
    """--max-rpm 6 on one-call samples: the recording makes its 6 calls and waits for its
    window; it is killed there (kill -9) and resumed at once, twice (the journal of the
    killed one read, then the rows the interrupted resume folded): neither may send a call
    before the minute of the first 6 is over (a resume that started an empty window sent
    6 more at once)."""
    store_dir = tmp_path / "traces"
    run_dir = store_dir / "r"
    ids = [arg for sample_id in ONE_TURN for arg in ("--sample-id", sample_id)]
    proc = cli_process("record", "--model", "sim:seed=5,error_rate=0,latency=0.05",
                       "--run-id", "r", "--store", str(store_dir), "--workers", "1",
                       "--max-rpm", "6", "--trials", "3", *ids, "--quiet")  # fmt: skip
    wait_for(lambda: journal_lines(run_dir) >= 6, timeout=30)
    time.sleep(0.3)  # waiting for its window: no 7th call
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert journal_lines(run_dir) == 6

    for _ in range(2):
        code, err = _resume_for(store_dir, 2.5)
        assert code == 130, err
        assert "Traceback" not in err
        assert not (run_dir / "journal.jsonl").exists()  # folded on Ctrl-C
        assert _most_in_a_window(run_dir) == 6
    stored = pq.read_table(run_dir / "samples.parquet", columns=["sample_id"]).num_rows
    assert stored == 6
