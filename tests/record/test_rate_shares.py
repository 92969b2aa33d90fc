"""--max-rpm R split over K processes, shards or Ray tasks keeps the run to R calls a minute:
the shares are whole calls that sum to R (equal shares of 1.5 let each of 4 processes send 2,
8 a minute under --max-rpm 6), and no share is 0; shards resumed with another N (or a run
resumed as shards) count the calls every shard stored in the last minute. The recordings
themselves: in test_record_processes.py and test_shard.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from pathlib import Path

import pytest
from clocks import FakeClock
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay._record.options import RecordOptions, whole_shares
from tcbreplay._record.retry import RecentUse, recent_use
from tcbreplay._record.runner import check_shard_rate
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError


def _admitted(
    options: RecordOptions,
    processes: int,
    shard: tuple[int, int] | None = None,
    calls: int = 12,
    recent: RecentUse | None = None,
) -> list[list[float]]:
    """Each process's limiter asked for ``calls`` calls one after another, on a clock of its
    own that its waits move (processes do not share one): the seconds each call was let
    through, from the start."""

    async def run(process: int) -> list[float]:
        clock = FakeClock()
        limiter = options.rate_limiter(process, processes, shard, recent, clock=clock)
        starts = []
        for _ in range(calls):
            await limiter.acquire()
            starts.append(clock.monotonic() - clock.start)
        return starts

    return [asyncio.run(run(p)) for p in range(processes)]


def _most_in_a_minute(times: list[float]) -> int:
    """The most of ``times`` in any 60 s (a call counts in a window from its time on for
    60 s, as the limiter counts it)."""
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + 60) for start in times)


@given(total=st.integers(0, 500), parts=st.integers(1, 64))
def test_whole_shares_sum_to_the_total_and_differ_by_one_at_most(total, parts):
    shares = whole_shares(total, parts)
    assert (len(shares), sum(shares)) == (parts, total)
    assert shares == sorted(shares, reverse=True) and shares[0] - shares[-1] <= 1


def test_six_calls_a_minute_over_four_processes_are_shares_of_2_2_1_1():
    options = RecordOptions(workers=4, processes=4, max_rpm=6)
    assert [options.rate_limiter(p, 4).rpm for p in range(4)] == [2, 2, 1, 1]
    admitted = _admitted(options, 4)
    assert [sum(1 for t in own if t < 60) for own in admitted] == [2, 2, 1, 1]
    calls = [t for own in admitted for t in own]
    assert _most_in_a_minute(calls) == 6  # (equal shares of 1.5: 2 each, 8)
    assert sum(1 for t in calls if t < 60) == 6  # and the minute is used in full


def test_two_calls_a_minute_run_two_processes_of_the_four_asked_for():
    options = RecordOptions(workers=4, processes=4, max_rpm=2)
    assert options.processes_for(samples=100) == 2  # a share of none would never send
    assert options.processes_for(samples=1) == 1
    assert [options.rate_limiter(p, 2).rpm for p in range(2)] == [1, 1]
    assert _most_in_a_minute([t for own in _admitted(options, 2) for t in own]) == 2
    with pytest.raises(ValueError, match="no share"):  # (0 would be taken as no limit)
        options.rate_limiter(3, 4)
    assert RecordOptions(workers=4, processes=4).processes_for(100) == 4  # no limit: as asked


def test_shards_share_whole_calls_whatever_processes_each_runs():
    """Shard by shard, then process by process: a shard resumed with few samples left runs
    fewer processes than the others, and both keep to their shares. (One split over N x P,
    each shard with its own P, does not: shard 1 of 2 in 4 processes takes 1 of 8 parts each,
    shard 2 in one process 1 of 2, 3: 7 calls under --max-rpm 6.)"""
    options = RecordOptions(workers=4, processes=4, max_rpm=6)
    assert [options.shard_calls((i, 4)) for i in range(1, 5)] == [2, 2, 1, 1]
    first = options.processes_for(samples=50, shard=(1, 2))  # 3 calls: 3 processes
    second = options.processes_for(samples=1, shard=(2, 2))  # 1 sample left: 1 process
    assert (first, second) == (3, 1)
    calls = [t for own in _admitted(options, first, (1, 2)) for t in own]
    calls += [t for own in _admitted(options, second, (2, 2)) for t in own]
    assert _most_in_a_minute(calls) == 6


def test_fractional_limits_allow_the_whole_calls_below_them():
    assert RecordOptions(max_rpm=6.5).calls_per_minute() == 6
    assert _most_in_a_minute(_admitted(RecordOptions(max_rpm=6.5), 1)[0]) == 6  # it sent 7
    with pytest.raises(InputError, match=r"--max-rpm 0.5: must be at least 1"):
        RecordOptions(max_rpm=0.5)


def test_token_shares_sum_to_max_tpm():
    options = RecordOptions(workers=8, max_tpm=1000)
    for shards, processes in [(1, 3), (3, 1), (2, 3), (7, 4)]:
        tpm = [
            options.rate_limiter(p, processes, (i, shards)).tpm
            for i in range(1, shards + 1)
            for p in range(processes)
        ]
        assert math.isclose(sum(tpm), 1000), (shards, processes)
    assert options.rate_limiter().tpm == 1000


def test_more_shards_than_calls_a_minute_are_refused_alike():
    options = RecordOptions(max_rpm=2)
    for i in (1, 2, 3, 4):  # every shard, not only those left without a call
        with pytest.raises(InputError, match=r"--shard \d/4: --max-rpm 2 is fewer calls"):
            check_shard_rate((i, 4), options)
    check_shard_rate((2, 2), options)
    check_shard_rate((4, 4), RecordOptions())


@settings(max_examples=60, deadline=None)
@given(
    calls=st.integers(1, 40),
    shards=st.integers(1, 4),
    processes=st.integers(1, 6),
    # quarter seconds, which the wall clock's float holds exactly
    recent=st.lists(st.integers(0, 59 * 4).map(lambda q: q / 4), max_size=50),
)
def test_a_resumed_recording_never_goes_over_its_share_on_top_of_its_last_minute(
    calls, shards, processes, recent
):
    """Whatever the shares and the calls a shard stored in the last minute (``recent``:
    seconds before the start, every N-th one each shard's), no minute holds more of the
    shard's new calls than its share allows on top of its stored ones: each process counts
    its share's fraction of each, and takes a call only while a whole one fits."""
    if shards > calls:
        return  # refused (check_shard_rate)
    options = RecordOptions(workers=8, processes=processes, max_rpm=calls)
    for i in range(1, shards + 1):
        stored = [-ago for k, ago in enumerate(recent) if k % shards == i - 1]
        use = RecentUse(calls=[FakeClock().now() + t for t in stored])
        p = options.processes_for(samples=100, shard=(i, shards))
        own = [t for times in _admitted(options, p, (i, shards), 3, use) for t in times]
        share = options.shard_calls((i, shards))
        for start in sorted(own + stored):
            made = sum(1 for t in own if start <= t < start + 60)
            before = sum(1 for t in stored if start <= t < start + 60)
            assert made <= max(0, share - before), (i, start, made, before)


def test_recording_on_ray_starts_no_more_tasks_than_calls_a_minute(tmp_path, monkeypatch):
    """Ray's tasks are shards the recording chooses: it starts fewer (a resumed run's
    --max-rpm as it stored it), not shards with no call to send."""
    from contextlib import nullcontext

    import tcbreplay._record.on_ray
    from tcbreplay._inputs.benchmarks import load_inputs
    from tcbreplay._record import runner
    from tcbreplay._record.models import parse_model
    from tcbreplay._store.runs import Store

    pytest.importorskip("ray")
    started: list[int] = []
    monkeypatch.setattr(runner, "ray_session", lambda address=None: nullcontext())
    monkeypatch.setattr(
        tcbreplay._record.on_ray,
        "record_on_ray",
        lambda shard, tasks, at=None: started.append(tasks),
    )
    store, model = Store(tmp_path), parse_model("sim:seed=5,error_rate=0")
    ids = ["hi-there", "thanks-bye", "good-morning", "tell-a-joke", "capital-of-france"]

    def on_ray(options, **more) -> None:
        runner.record_run(load_inputs("tool-call"), model, store, run_id="r", options=options,
                          sample_ids=ids, engine="ray", **more)  # fmt: skip

    on_ray(RecordOptions(max_rpm=2.5))
    on_ray({})
    runner.record_run(load_inputs("tool-call"), model, store, run_id="r", sample_ids=ids[:1],
                      options=RecordOptions(max_rpm=3))  # fmt: skip
    on_ray({})  # resumed: the run's --max-rpm 3
    on_ray({"max_rpm": 4})
    on_ray({}, overwrite=True)  # the run deleted: its settings no more
    assert started == [2, 5, 3, 4, 5]


def _killed_run(root: Path, calls: dict[int, int], ago: float) -> Path:
    """A run whose recording was killed with ``calls`` in its journal (row: the model calls
    its sample made, an AI message each), every sample finished ``ago`` seconds before the
    tests' clocks start: the run's folder."""
    writer = Store(root).create_run({"run_id": "r", "created_at": "2027-01-01T00:00:00+00:00"})
    finished = dt.datetime.fromtimestamp(FakeClock().now() - ago, dt.UTC).isoformat()
    for row, made in calls.items():
        writer.append({"run_id": "r", "sample_id": f"s{row}", "sample_index": row, "input": "q",
                       "gold": [], "status": "ok", "attempts": 1, "finished_at": finished,
                       "messages": [{"type": "ai", "message": {}}] * made})  # fmt: skip
    writer.close()
    return writer.dir


def _rows(shard: tuple[int, int], rows: int = 12) -> set[int]:
    """Shard I of N's rows of a whole dataset: those whose number is I-1 modulo N."""
    return {row for row in range(rows) if row % shard[1] == shard[0] - 1}


@pytest.mark.parametrize(
    ("stored", "shards"),
    [
        # a whole recording's 6 calls, all in the rows of shard 1 of 2: shard 2 started
        # an empty window and sent 3 at once (9 in the minute)
        ({0: 2, 2: 2, 4: 2}, 2),
        # shards 1/2 and 2/2 killed (3 calls each), resumed as 3 shards: shard 3/3, whose
        # rows hold none of those calls, sent 2 at once (8)
        ({0: 1, 1: 1, 3: 1, 4: 1, 6: 1, 7: 1}, 3),
    ],
)
def test_shards_resumed_with_another_n_count_every_shards_last_minute(tmp_path, stored, shards):
    """--max-rpm 6, 6 calls stored 10 s ago: shards resumed with another N than the
    recording that stored them send nothing until those calls leave the window, whichever
    shard's rows they are in."""
    run_dir = _killed_run(tmp_path, stored, ago=10)
    options = RecordOptions(workers=4, processes=2, max_rpm=6)
    made = []
    for i in range(1, shards + 1):
        shard = (i, shards)
        use = recent_use(run_dir, _rows(shard), clock=FakeClock())
        processes = options.processes_for(samples=6, shard=shard)
        made += [t for own in _admitted(options, processes, shard, 3, use) for t in own]
    assert min(made) >= 50  # (the stored calls leave the window 50 s from the start)
    assert _most_in_a_minute(made + [-10.0] * 6) == 6


@settings(max_examples=60, deadline=None)
@given(
    calls=st.integers(1, 12),
    shards=st.integers(1, 4),
    processes=st.integers(1, 3),
    # the last minute of the recording before: (its row, seconds before the start)
    stored=st.lists(st.tuples(st.integers(0, 11), st.integers(1, 59 * 4).map(lambda q: q / 4))),
)
def test_shards_resumed_at_once_keep_the_run_and_each_shard_to_its_minute(
    calls, shards, processes, stored
):
    """Whatever rows the last minute's calls are in (a recording with another N stored them):
    the run's minute holds at most --max-rpm calls, and no shard's new calls more than its
    share less the calls stored in its own rows (which a shard resumed alone, beside shards
    that run on, must keep to: they count none of its rows)."""
    if shards > calls:
        return  # refused (check_shard_rate)
    stored = stored[:calls]  # (the recording before kept to --max-rpm)
    options = RecordOptions(workers=8, processes=processes, max_rpm=calls)
    made: list[float] = []
    for i in range(1, shards + 1):
        rows = _rows((i, shards))
        ours = [-ago for row, ago in stored if row in rows]
        theirs = [-ago for row, ago in stored if row not in rows]
        clock = FakeClock()
        use = RecentUse(calls=[clock.now() + t for t in ours],
                        others=RecentUse(calls=[clock.now() + t for t in theirs]))  # fmt: skip
        p = options.processes_for(samples=100, shard=(i, shards))
        own = [t for times in _admitted(options, p, (i, shards), 3, use) for t in times]
        share = options.shard_calls((i, shards))
        for start in sorted(own + ours):
            after = sum(1 for t in own if start <= t < start + 60)
            before = sum(1 for t in ours if start <= t < start + 60)
            assert after <= max(0, share - before), (i, start)
        made += own
    assert _most_in_a_minute(made + [-ago for _, ago in stored]) <= calls
