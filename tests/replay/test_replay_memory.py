"""A recorded run's memory stays flat however long the run (#29): ``RecordedRun`` keeps the
samples' keys, not their texts; a sample is read when asked for (with its slice of samples),
at most ``CACHED`` samples and ``CACHE_BYTES`` of text are kept read; and a replay of a few
samples reads only the row groups that hold them.

The run is the sim run with every stored message padded to about 20 kB (a key beside
``type`` and ``data``, which the fingerprint does not read): about 16 MB of text, so that
holding the texts shows plainly beside what indexing them takes."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tcbreplay._replay import messages as messages_module
from tcbreplay._replay import recording as recording_module
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._store.runs import Store

PAD = 20_000


@pytest.fixture(scope="module")
def padded(sim_run, tmp_path_factory) -> tuple[Store, str, int]:
    """(store, run id, bytes of message text) of the padded copy of the sim run."""
    store, run_id = sim_run
    root = tmp_path_factory.mktemp("memory") / "traces"
    shutil.copytree(store.run_dir(run_id), root / run_id)
    path = root / run_id / "messages.parquet"
    table = pq.read_table(path)
    texts = table.column("message").to_pylist()
    padded = [t.rstrip()[:-1] + f', "pad": "{"x" * PAD}"}}' for t in texts]
    column = table.schema.get_field_index("message")
    table = table.set_column(column, table.schema.field(column), pa.array(padded, pa.string()))
    pq.write_table(table, path)
    return Store(root), run_id, sum(len(t) for t in padded)


def held_after(build) -> tuple[object, int]:
    """What ``build()`` returns, and the bytes Python still holds of what it allocated."""
    tracemalloc.start()
    try:
        built = build()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return built, held


def test_the_padding_changes_no_fingerprint(padded, sim_run):
    store, run_id, size = padded
    assert size > 8 * 2**20
    plain = RecordedRun.load(sim_run[0].open_run(run_id))
    recording = RecordedRun.load(store.open_run(run_id))
    assert recording.index().keys() == plain.index().keys()


def test_loading_a_run_holds_none_of_its_message_texts(padded):
    store, run_id, size = padded
    recording, held = held_after(lambda: RecordedRun.load(store.open_run(run_id)))
    assert held < size / 20
    # nor does indexing every turn (serve's lookups), which reads each sample once
    assert isinstance(recording, RecordedRun)
    _, held = held_after(recording.index)
    assert held < size / 20


def test_reading_every_sample_keeps_only_the_last_ones_read(padded, monkeypatch):
    store, run_id, size = padded
    monkeypatch.setattr(recording_module, "CACHED", 4)
    monkeypatch.setattr(messages_module, "SLICE_SAMPLES", 4)
    monkeypatch.setattr(messages_module, "CACHE_BYTES", size // 50)

    def read_all() -> RecordedRun:
        recording = RecordedRun.load(store.open_run(run_id))
        for key in list(recording.samples):
            assert recording.sample(key).texts
        return recording

    recording, held = held_after(read_all)
    assert len(recording.samples) > 40
    assert held < size / 10  # a few samples of 94: under a tenth of the texts


def test_a_sample_is_read_back_as_stored(padded):
    store, run_id, _ = padded
    recording = RecordedRun.load(store.open_run(run_id))
    table = pq.read_table(Path(store.root) / run_id / "messages.parquet")
    key = next(iter(recording.samples))
    stored = [
        r["message"]
        for r in sorted(table.to_pylist(), key=lambda r: r["position"])
        if (r["sample_id"], r["trial"]) == key
    ]
    assert recording.sample(key).texts == stored


# -- what is read ----------------------------------------------------------------------------

ROWS_PER_GROUP = 16


@pytest.fixture(scope="module")
def grouped(sim_run, tmp_path_factory, request) -> tuple[Store, str]:
    """A copy of the sim run whose messages lie in row groups of 16 rows, each of one type
    (as the store lays them out): (store, run id)."""
    from tcbreplay._store import parquet as store_parquet

    store, run_id = sim_run
    root = tmp_path_factory.mktemp("grouped") / "traces"
    shutil.copytree(store.run_dir(run_id), root / run_id)
    path = root / run_id / "messages.parquet"
    table = pq.read_table(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_parquet, "ROW_GROUP_ROWS", ROWS_PER_GROUP)
        store_parquet.write_messages(table, path)
    assert pq.read_metadata(path).num_row_groups > 30
    return Store(root), run_id


@pytest.fixture
def groups_read(monkeypatch) -> list[int]:
    """Each row group of messages.parquet read with its texts, in order (a whole read of it
    fails)."""
    read: list[int] = []
    original = pq.ParquetFile.read_row_group

    def counting(self, i, columns=None, **kwargs):
        if columns is None or "message" in columns:
            read.append(i)
        return original(self, i, columns=columns, **kwargs)

    def whole(*args, **kwargs):
        raise AssertionError("messages.parquet read whole")

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", whole)
    return read


def _holding(path: Path, lo: int, hi: int) -> set[int]:
    """The row groups whose sample_index statistics reach into [lo, hi)."""
    meta = pq.read_metadata(path)
    column = meta.schema.to_arrow_schema().get_field_index("sample_index")
    out = set()
    for k in range(meta.num_row_groups):
        stats = meta.row_group(k).column(column).statistics
        if not (stats.max < lo or stats.min >= hi):
            out.add(k)
    return out


def test_a_sample_is_read_from_the_row_groups_of_its_slice_only(grouped, groups_read,
                                                                  monkeypatch):  # fmt: skip
    store, run_id = grouped
    monkeypatch.setattr(messages_module, "SLICE_SAMPLES", 2)
    recording = RecordedRun.load(store.open_run(run_id))
    path = Path(store.root) / run_id / "messages.parquet"
    key = list(recording.samples)[41]
    index = recording._rows[key].index
    assert index is not None
    texts = recording.sample(key).texts
    lo = index - index % 2
    wanted = _holding(path, lo, lo + 2)
    assert set(groups_read) == wanted
    assert len(wanted) < pq.read_metadata(path).num_row_groups / 5
    table = pq.read_table(path).to_pylist()
    assert texts == [r["message"] for r in sorted(table, key=lambda r: r["position"])
                     if (r["sample_id"], r["trial"]) == key]  # fmt: skip


def test_matching_by_first_message_finds_what_the_whole_index_finds(grouped, groups_read):
    from tcbreplay._replay.fingerprint import canonical_json

    store, run_id = grouped
    recording = RecordedRun.load(store.open_run(run_id))
    starting = recording.starting()
    # the messages up to each first answer are read: no row group of tool outputs
    kinds = pq.read_table(Path(store.root) / run_id / "messages.parquet", columns=["type"])
    types = {t for k in groups_read for t in _group_types(store, run_id, k)}
    assert types == {"human", "ai"} and "tool" in set(kinds["type"].to_pylist())
    assert recording._index is None and len(starting) > 40
    index = RecordedRun.load(store.open_run(run_id)).index()
    checked = 0
    for key in recording.samples:
        for turn, request in zip(recording.sample(key).turns, recording.requests(key),
                                 strict=True):  # fmt: skip
            messages = request["messages"]
            first = canonical_json(messages[0]) if messages else ""
            expected = index[turn.fingerprint]
            assert recording.matches(turn.fingerprint, first, turn.turn) == expected
            assert recording.matches(turn.fingerprint, first) == expected
            checked += 1
    assert checked == recording.turn_count() == sum(len(v) for v in index.values())
    assert recording.matches("0" * 64, "") == []


def _group_types(store: Store, run_id: str, k: int) -> set[str]:
    path = Path(store.root) / run_id / "messages.parquet"
    return set(pq.ParquetFile(path).read_row_group(k, columns=["type"])["type"].to_pylist())


def test_a_slice_larger_than_the_cache_is_read_once_for_all_its_samples(grouped, groups_read,
                                                                         monkeypatch):  # fmt: skip
    store, run_id = grouped
    monkeypatch.setattr(messages_module, "SLICE_SAMPLES", 8)
    monkeypatch.setattr(messages_module, "CACHE_BYTES", 1)
    recording = RecordedRun.load(store.open_run(run_id))
    path = Path(store.root) / run_id / "messages.parquet"
    keys = sorted(recording.samples, key=lambda k: recording._rows[k].index or 0)
    for key in keys:
        assert recording.sample(key).texts
    last = max(recording._rows[k].index or 0 for k in keys)
    once = sum(len(_holding(path, lo, lo + 8)) for lo in range(0, last + 1, 8))
    assert 0 < len(groups_read) <= once


def test_first_answers_are_served_from_the_startup_read(grouped, groups_read):
    """serve answers a conversation's first request with the sample's first answer, which
    the startup read (messages up to each first answer) holds: no slice is read for it."""
    store, run_id = grouped
    recording = RecordedRun.load(store.open_run(run_id))
    recording.starting()
    firsts = {}
    del groups_read[:]
    assert recording._openings is not None
    for hits in recording._openings.values():
        for key, turn in hits:
            firsts[key] = recording.message(key, turn.position)
    assert len(firsts) > 40 and groups_read == []
    fresh = RecordedRun.load(store.open_run(run_id))
    for key, message in firsts.items():
        position = fresh.sample(key).turns[0].position
        assert message == fresh.sample(key).message(position)
        assert message["type"] == "ai"
