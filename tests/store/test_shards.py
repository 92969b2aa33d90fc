"""How a sharded recording deals its rows to its shards (``record --shard I/N``): by their
place in the selection, so that shards differ by one row at most and none is empty."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import row_index
from tcbreplay._store.shards import ShardProgress, _numbers, deal, select

IDS = [f"s{k}" for k in range(10)]


def test_the_selection_is_the_named_samples_in_dataset_order_the_first_limit_of_them():
    assert select(IDS, None, None) == list(range(10))
    assert select(IDS, 3, None) == [0, 1, 2]
    assert select(IDS, None, ["s7", "s2"]) == [2, 7]
    assert select(IDS, 1, ["s7", "s2", "s9"]) == [2]
    assert select(IDS, 99, None) == list(range(10))


def test_two_samples_named_over_two_shards_are_one_each():
    # --sample-id hi-there --sample-id thanks-bye --shard 2/2 recorded nothing: both rows were
    # of the dataset positions 0 and 2, even numbers, shard 1's
    chosen = select(["hi-there", "what-can-you-do", "thanks-bye"], None, ["hi-there", "thanks-bye"])
    assert deal(chosen, 1, (1, 2)) == [(0, 0)]
    assert deal(chosen, 1, (2, 2)) == [(2, 0)]


def test_two_samples_of_three_trials_over_five_shards_leave_none_empty():
    # --limit 2 --trials 3 --shard 3/5 recorded nothing (rows 0, 1, 94, 95, 188, 189 modulo 5)
    sizes = [len(deal([0, 1], 3, (i, 5))) for i in range(1, 6)]
    assert sizes == [2, 1, 1, 1, 1]
    assert deal([0, 1], 3, (3, 5)) == [(0, 1)]


@given(
    count=st.integers(1, 40),
    trials=st.integers(1, 4),
    data=st.data(),
)
def test_shards_split_the_selected_rows_evenly(count, trials, data):
    rows = count * trials
    n = data.draw(st.integers(1, rows))
    items = sorted(data.draw(st.sets(st.integers(0, 99), min_size=count, max_size=count)))
    shares = [deal(items, trials, (i, n)) for i in range(1, n + 1)]
    sizes = [len(share) for share in shares]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    every = [row for share in shares for row in share]
    assert sorted(every) == sorted(deal(items, trials, None))  # each row once
    assert len(set(every)) == rows


@given(entries=st.integers(1, 50), trials=st.integers(1, 3), data=st.data())
def test_a_whole_dataset_is_dealt_by_row_number_as_before(entries, trials, data):
    # runs recorded in shards by an earlier tcbreplay resume with the same rows per shard
    n = data.draw(st.integers(1, entries * trials))
    i = data.draw(st.integers(1, n))
    ours = [row_index(k, t, entries) for k, t in deal(range(entries), trials, (i, n))]
    assert ours == [r for r in range(entries * trials) if r % n == i - 1]


def test_the_shards_left_are_named_briefly_however_many(tmp_path):
    assert _numbers([2, 3, 4, 5, 7, 9, 10]) == "2 to 5, 7, 9, 10"
    many = ShardProgress(shards=100, asked=1000, missing=90, unfinished=list(range(3, 93)),
                         selection={"limit": 1000, "sample_ids": None})  # fmt: skip
    said = many.next_steps(Run(tmp_path / "r"))
    assert said == (
        "shards 3/100, 4/100, 5/100 and 87 more have not finished: run them (the same command "
        f"with --shard I/100, or: tcbreplay record --resume r --store {tmp_path} --shard I/100 "
        "--limit 1000, for I in 3 to 92)"
    )
