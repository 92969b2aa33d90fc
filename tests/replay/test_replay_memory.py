"""A recorded run's memory stays flat however long the run (#29): ``RecordedRun`` keeps where
each message text lies, not the texts; a sample is read when asked for, and at most
``CACHED`` samples are kept read.

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

    def read_all() -> RecordedRun:
        recording = RecordedRun.load(store.open_run(run_id))
        for key in list(recording.samples):
            assert recording.sample(key).texts
        return recording

    recording, held = held_after(read_all)
    assert len(recording.samples) > 40
    assert held < size / 10  # 4 samples of 94: under a tenth of the texts


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
