"""The trace store: journal folding, run locks, run ids, manifests and JSONL export."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonlines
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from journal_records import RUN, record

from tcbreplay._store import export as export_mod
from tcbreplay._store import journal as journal_mod
from tcbreplay._store import parquet as parquet_mod
from tcbreplay._store import runs as store_mod
from tcbreplay._store.export import export_jsonl
from tcbreplay._store.files import file_record
from tcbreplay._store.journal import fold_journal, read_journal
from tcbreplay._store.manifest import read_manifest
from tcbreplay._store.parquet import MessagesWriter
from tcbreplay._store.run_dir import Run, validate_run_id
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import (
    JOURNAL,
    MANIFEST,
    MESSAGES,
    SAMPLES,
    SCHEMA_VERSION,
    WRITTEN_MESSAGES_SCHEMA,
)
from tcbreplay._store.writer import RunWriter
from tcbreplay.errors import (
    InputError,
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    StoreError,
)


def new_run(store: Store, run_id: str = RUN) -> RunWriter:
    return store.create_run({"run_id": run_id, "created_at": "2024-01-01T00:00:00+00:00"})


def journal_line(rec: dict) -> str:
    return json.dumps(rec) + "\n"


def samples_of(run_dir: Path) -> list[dict]:
    return pq.read_table(run_dir / SAMPLES).to_pylist()


def messages_of(run_dir: Path) -> list[dict]:
    return pq.read_table(run_dir / MESSAGES).to_pylist()


def row_group_types(path: Path) -> list[set[str | None]]:
    """The message types in each row group of a messages file, in file order."""
    file = pq.ParquetFile(path)
    return [
        set(file.read_row_group(k, columns=["type"])["type"].to_pylist())
        for k in range(file.num_row_groups)
    ]


# ---------------------------------------------------------------- folding the journal


def test_fold_writes_samples_in_dataset_order_and_messages_grouped(store):
    writer = new_run(store)
    for sid, index in [("c", 2), ("a", 0), ("b", 1)]:
        writer.append(record(sid, index, n_ai=index + 1))
    writer.fold()
    writer.close()
    run_dir = store.run_dir(RUN)
    assert not (run_dir / JOURNAL).exists()
    rows = samples_of(run_dir)
    assert [r["sample_id"] for r in rows] == ["a", "b", "c"]
    assert [r["n_messages"] for r in rows] == [2, 3, 4]
    assert [r["input_tokens"] for r in rows] == [10, 20, 30]
    assert rows[0]["started_at"].isoformat() == "2024-01-01T00:00:00+00:00"
    msgs = messages_of(run_dir)
    # one type after the other, each in sample order and position
    assert [(m["type"], m["sample_id"], m["position"]) for m in msgs] == [
        ("ai", "a", 1),
        ("ai", "b", 1), ("ai", "b", 2),
        ("ai", "c", 1), ("ai", "c", 2), ("ai", "c", 3),
        ("human", "a", 0), ("human", "b", 0), ("human", "c", 0),
    ]  # fmt: skip
    assert row_group_types(run_dir / MESSAGES) == [{"ai"}, {"human"}]


# message types as they come: the common ones, one the store does not know, and none
_TYPES = st.sampled_from(["ai", "human", "tool", "system", "other", None])


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.lists(_TYPES, max_size=12), max_size=6))
def test_messages_writer_keeps_every_row_in_row_groups_of_one_type(tmp_path_factory, chunks):
    path = tmp_path_factory.mktemp("layout") / MESSAGES
    rows = [
        {"sample_id": f"s{k}", "sample_index": k, "position": k % 5, "type": kind}
        for k, kind in enumerate(kind for chunk in chunks for kind in chunk)
    ]
    limit = 3
    original = parquet_mod.ROW_GROUP_ROWS
    parquet_mod.ROW_GROUP_ROWS = limit  # small row groups: several per type
    try:
        writer = MessagesWriter(path)
        start = 0
        for chunk in chunks:  # streamed a chunk at a time, as the generator writes
            part = rows[start : start + len(chunk)]
            start += len(chunk)
            writer.write(pa.Table.from_pylist(part, schema=WRITTEN_MESSAGES_SCHEMA))
        writer.close()
    finally:
        parquet_mod.ROW_GROUP_ROWS = original
    file = pq.ParquetFile(path)
    groups = [file.read_row_group(k).to_pylist() for k in range(file.num_row_groups)]
    assert all(0 < len(group) <= limit for group in groups)
    assert all(len({row["type"] for row in group}) == 1 for group in groups)
    stored = [row for group in groups for row in group]
    for kind in {row["type"] for row in rows}:  # each type's rows, in the order given
        assert [r["sample_index"] for r in stored if r["type"] == kind] == [
            r["sample_index"] for r in rows if r["type"] == kind
        ]
    assert len(stored) == len(rows)


def test_torn_last_journal_line_is_ignored(store):
    run_dir = store.run_dir(RUN)
    new_run(store).close()
    torn = journal_line(record("c", 2))[:57]  # a crash in the middle of an append
    (run_dir / JOURNAL).write_text(
        journal_line(record("a", 0)) + journal_line(record("b", 1)) + torn
    )
    assert [r["sample_id"] for r in read_journal(run_dir / JOURNAL)] == ["a", "b"]
    fold_journal(run_dir)
    assert [r["sample_id"] for r in samples_of(run_dir)] == ["a", "b"]
    assert {m["sample_id"] for m in messages_of(run_dir)} == {"a", "b"}
    assert not (run_dir / JOURNAL).exists()


def test_torn_line_is_complete_json_without_newline_still_ignored(store):
    run_dir = store.run_dir(RUN)
    new_run(store).close()
    # The whole object made it to disk but not its newline: the append did not finish.
    (run_dir / JOURNAL).write_text(journal_line(record("a", 0)) + json.dumps(record("b", 1)))
    fold_journal(run_dir)
    assert [r["sample_id"] for r in samples_of(run_dir)] == ["a"]


@pytest.mark.parametrize(
    ("line", "complaint"),
    [("garbage\n", "line 2: not valid JSON"),
     ('{"sample_id": "x"}\n', "line 2: not a sample record (needs run_id, sample_id, "),
     ("[1, 2]\n", "line 2: not a sample record")],
)  # fmt: skip
def test_a_damaged_journal_line_is_named_and_nothing_is_folded(store, line, complaint):
    """Only the last line may be torn (a crash mid-append); any other line that is not a
    sample record is damage, named by its line, and the fold leaves every file as it was."""
    run_dir = store.run_dir(RUN)
    new_run(store).close()
    (run_dir / JOURNAL).write_text(journal_line(record("a", 0)) + line)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(StoreError, match=re.escape(f"{run_dir / JOURNAL}: {complaint}")):
        fold_journal(run_dir)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_appends_after_a_torn_line_survive_the_fold(store):
    """A crash leaves a torn line; the writer that resumes the run must not glue onto it."""
    run_dir = store.run_dir(RUN)
    new_run(store).close()
    torn = journal_line(record("b", 1))[:40]
    (run_dir / JOURNAL).write_text(journal_line(record("a", 0)) + torn)
    writer = store.resume_run(RUN)
    writer.append(record("b", 1))
    writer.append(record("c", 2))
    writer.fold()
    writer.close()
    assert [r["sample_id"] for r in samples_of(run_dir)] == ["a", "b", "c"]


def test_folding_twice_is_idempotent(store):
    writer = new_run(store)
    for sid, index in [("a", 0), ("b", 1)]:
        writer.append(record(sid, index))
    writer.fold()
    writer.close()
    run_dir = store.run_dir(RUN)
    first = (pq.read_table(run_dir / SAMPLES), pq.read_table(run_dir / MESSAGES))
    fold_journal(run_dir)  # no journal left
    (run_dir / JOURNAL).write_text("")  # an empty journal, as a writer that appended nothing leaves
    fold_journal(run_dir)
    assert pq.read_table(run_dir / SAMPLES).equals(first[0])
    assert pq.read_table(run_dir / MESSAGES).equals(first[1])
    assert not (run_dir / JOURNAL).exists()


def test_fold_interrupted_between_the_two_files_can_be_folded_again(store, monkeypatch):
    run_dir = store.run_dir(RUN)
    writer = new_run(store)
    writer.append(record("a", 0))
    writer.fold()
    writer.close()
    writer = store.resume_run(RUN)
    writer.append(record("b", 1, n_ai=2))
    writer.append(record("a", 0, status="error", n_ai=0))
    writer.close()
    real = journal_mod.write_parquet

    def crash_on_samples(table, path, **options):
        if path.name == SAMPLES:
            raise OSError("disk full")
        real(table, path, **options)

    monkeypatch.setattr(journal_mod, "write_parquet", crash_on_samples)
    with pytest.raises(OSError):
        fold_journal(run_dir)
    assert (run_dir / JOURNAL).exists()  # the journal is removed only after both files
    # the new messages beside the old samples: read, a's row (ok) came with no messages and
    # b's messages with no row, every reader's numbers wrong; only a writer may open it
    two = r"^run 'run-1': its data files are of two versions \(messages.parquet, samples.parquet\)"
    with pytest.raises(StoreError, match=two + ": a fold of its journal"):
        store.open_run(RUN)
    store.open_run(RUN, writing=True)
    monkeypatch.setattr(journal_mod, "write_parquet", real)
    fold_journal(run_dir)
    store.open_run(RUN)
    rows = samples_of(run_dir)
    assert [(r["sample_id"], r["status"], r["n_messages"]) for r in rows] == [
        ("a", "error", 1),
        ("b", "ok", 3),
    ]
    msgs = messages_of(run_dir)
    assert sorted((m["sample_id"], m["position"]) for m in msgs) == [
        ("a", 0), ("b", 0), ("b", 1), ("b", 2),
    ]  # fmt: skip


def fold_killed_before_removing_the_journal(writer: RunWriter, monkeypatch) -> None:
    """``writer``'s fold killed once its Parquet files are written (kill -9: nothing after
    it runs), then the writer let go of."""

    def killed(paths):
        raise KeyboardInterrupt

    monkeypatch.setattr(journal_mod, "_remove", killed)
    with pytest.raises(KeyboardInterrupt):
        writer.fold()
    writer.close()
    monkeypatch.undo()


def test_a_second_fold_killed_before_it_records_its_files_is_folded_again(store, monkeypatch):
    """A resumed run's fold killed after its Parquet writes (the journal kept, its files not yet
    recorded in the manifest) was refused ever after as files the run did not write: resume
    and score both failed, and only --overwrite (every sample lost) was left."""
    run_dir = store.run_dir(RUN)
    writer = new_run(store)
    writer.append(record("a", 0))
    writer.fold()  # the first fold records its files
    writer.close()
    writer = store.resume_run(RUN)
    writer.append(record("b", 1))
    fold_killed_before_removing_the_journal(writer, monkeypatch)
    assert Run(run_dir).unfolded_records() == 0  # b is in the files already
    writer = store.resume_run(RUN)  # refused before: not the file the run wrote
    writer.append(record("c", 2))
    writer.fold()
    writer.close()
    manifest = Run(run_dir).manifest
    assert "folding" not in manifest
    assert (
        manifest["files"]["samples.parquet"]["sha256"] == file_record(run_dir / SAMPLES)["sha256"]
    )
    assert [r["sample_id"] for r in samples_of(run_dir)] == ["a", "b", "c"]


def test_a_first_fold_killed_between_its_two_files_is_folded_again(store, monkeypatch):
    """A run's first fold killed once its messages file was in place, not yet its samples
    file (kill -9, or a disk full): every command refused the run as damaged, and the hint
    (--overwrite) would have deleted the journal, every finished sample in it."""
    run_dir = store.run_dir(RUN)
    writer = new_run(store)
    writer.append(record("a", 0, status="error", n_ai=0))
    writer.append(record("b", 1))
    real = journal_mod.write_parquet

    def killed_on_samples(table, path, **options):
        if path.name == SAMPLES:
            raise KeyboardInterrupt  # (kill -9: nothing after it runs)
        real(table, path, **options)

    monkeypatch.setattr(journal_mod, "write_parquet", killed_on_samples)
    with pytest.raises(KeyboardInterrupt):
        writer.fold()
    writer.close()
    monkeypatch.undo()
    assert (run_dir / "messages.parquet").exists() and not (run_dir / SAMPLES).exists()
    assert not Run(run_dir).has_data() and Run(run_dir).unfolded_records() == 2
    Run(run_dir).check()  # readable: the journal holds its samples (it was refused)
    writer = store.resume_run(RUN)
    writer.append(record("c", 2))
    writer.fold()
    writer.close()
    assert [(r["sample_id"], r["status"]) for r in samples_of(run_dir)] == [
        ("a", "error"), ("b", "ok"), ("c", "ok")]  # fmt: skip
    assert sorted({m["sample_id"] for m in messages_of(run_dir)}) == ["a", "b", "c"]
    assert "folding" not in Run(run_dir).manifest


def test_a_fold_killed_before_removing_the_journal_counts_only_what_waits(store, monkeypatch):
    """The journal a fold killed after its Parquet writes leaves holds samples the files hold
    already: the samples said to wait are those appended since, a retried one included."""
    run_dir = store.run_dir(RUN)
    writer = new_run(store)
    writer.append(record("a", 0, status="error", n_ai=0))
    writer.append(record("b", 1))
    assert Run(run_dir).unfolded_records() == 2  # no Parquet files yet
    fold_killed_before_removing_the_journal(writer, monkeypatch)
    assert (run_dir / JOURNAL).exists() and len(samples_of(run_dir)) == 2
    assert Run(run_dir).unfolded_records() == 0
    writer = store.resume_run(RUN)
    retried = {**record("a", 0), "finished_at": "2024-01-01T00:05:00+00:00"}
    writer.append(retried)
    writer.append(record("c", 2))
    writer.close()
    assert Run(run_dir).unfolded_records() == 2  # a's retry and c, not a's error nor b
    fold_journal(run_dir)
    assert Run(run_dir).unfolded_records() == 0
    assert [(r["sample_id"], r["status"]) for r in samples_of(run_dir)] == [
        ("a", "ok"), ("b", "ok"), ("c", "ok"),
    ]  # fmt: skip


def test_later_journal_record_replaces_earlier_one(store):
    writer = new_run(store)
    writer.append(record("a", 0, status="error", n_ai=0))
    writer.append(record("b", 1))
    writer.append(record("a", 0, status="ok", n_ai=3))
    writer.fold()
    writer.close()
    run_dir = store.run_dir(RUN)
    rows = samples_of(run_dir)
    assert [(r["sample_id"], r["status"], r["n_messages"]) for r in rows] == [
        ("a", "ok", 4),
        ("b", "ok", 2),
    ]
    assert sorted(m["position"] for m in messages_of(run_dir) if m["sample_id"] == "a") == [
        0, 1, 2, 3,
    ]  # fmt: skip
    assert Run(run_dir).recorded_ids() == {("a", 0): "ok", ("b", 0): "ok"}


def test_later_journal_record_replaces_a_folded_sample(store):
    writer = new_run(store)
    writer.append(record("a", 0, status="error", n_ai=2))
    writer.append(record("b", 1))
    writer.fold()
    writer.close()
    run_dir = store.run_dir(RUN)
    writer = store.resume_run(RUN)
    writer.append(record("a", 0, status="ok", n_ai=1))
    assert Run(run_dir).recorded_ids() == {
        ("a", 0): "ok",
        ("b", 0): "ok",
    }  # the journal overrides Parquet
    writer.fold()
    writer.close()
    rows = samples_of(run_dir)
    assert [(r["sample_id"], r["status"], r["n_messages"]) for r in rows] == [
        ("a", "ok", 2),
        ("b", "ok", 2),
    ]
    assert len(messages_of(run_dir)) == 4


# ---------------------------------------------------------------- the writer lock


def test_second_writer_is_refused_while_the_first_is_open(store):
    first = new_run(store)
    with pytest.raises(RunLockedError) as info:
        RunWriter(store.run_dir(RUN))
    assert RUN in str(info.value)
    assert info.value.hint
    with pytest.raises(RunLockedError):
        store.resume_run(RUN)
    first.append(record("a", 0))  # the refused writer did not disturb the first one
    first.fold()
    first.close()
    with RunWriter(store.run_dir(RUN)) as second:
        second.append(record("b", 1))
        second.fold()
    assert [r["sample_id"] for r in samples_of(store.run_dir(RUN))] == ["a", "b"]
    store.resume_run(RUN).close()  # and the context manager released it


def test_a_writer_that_died_releases_the_run(store):
    new_run(store).close()
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tcbreplay._store.writer import RunWriter\n"
        "w = RunWriter(Path(sys.argv[1]))\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(store.run_dir(RUN))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"pid {proc.pid}"):
            store.resume_run(RUN)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while True:
        try:
            store.resume_run(RUN).close()
            break
        except RunLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_creating_an_existing_run_is_refused(store):
    new_run(store).close()
    with pytest.raises(InputError, match="already exists"):
        new_run(store)


# ---------------------------------------------------------------- run ids


BAD_RUN_IDS = [
    "a/b",
    "../evil",
    "..",
    ".",
    "a/../b",
    "/abs",
    "run 1",
    " run",
    "run\t1",
    "",
    ".hidden",
    "a\\b",
    "x" * 129,
    # wildcards, which fsspec and DuckDB would expand in the run's path
    "zz*",
    "q[1]",
    "a?",
]


@pytest.mark.parametrize("run_id", BAD_RUN_IDS)
def test_bad_run_ids_are_refused(store, tmp_path, run_id):
    with pytest.raises(InputError, match="run id"):
        validate_run_id(run_id)
    with pytest.raises(InputError, match="run id"):
        store.create_run({"run_id": run_id})
    with pytest.raises(InputError, match="run id"):
        store.open_run(run_id)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing created anywhere


def test_run_id_with_trailing_newline_is_refused():
    with pytest.raises(InputError):
        validate_run_id("run\n")


@pytest.mark.parametrize("run_id", ["a", "run-1", "gemini-2.5-flash_2024.01", "A" * 128])
def test_good_run_ids_are_accepted(store, run_id):
    assert validate_run_id(run_id) == run_id
    new_run(store, run_id).close()
    assert store.exists(run_id)
    assert [r.run_id for r in store.runs()] == [run_id]


# ---------------------------------------------------------------- manifests


@pytest.mark.parametrize("version", [0, SCHEMA_VERSION + 1, "2", None])
def test_manifest_with_another_schema_version_raises(store, version):
    new_run(store).close()
    path = store.run_dir(RUN) / MANIFEST
    manifest = json.loads(path.read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    if version is None:
        del manifest["schema_version"]
    else:
        manifest["schema_version"] = version
    path.write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="schema_version"):
        read_manifest(store.run_dir(RUN))
    with pytest.raises(StoreError, match="schema_version"):
        _ = store.open_run(RUN).manifest


def test_unreadable_manifest_raises_store_error(store):
    new_run(store).close()
    (store.run_dir(RUN) / MANIFEST).write_text("{not json")
    with pytest.raises(StoreError, match="unreadable manifest"):
        _ = store.open_run(RUN).manifest


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda m: [m], "not a manifest: a list, not an object"),
        (lambda m: {**m, "status": 5}, "status is a number, not a string"),
        (lambda m: {k: v for k, v in m.items() if k != "status"}, "no status"),
        (lambda m: {**m, "model": "sim"}, "model is a string, not an object"),
        (lambda m: {**m, "totals": [1]}, "totals is a list, not an object"),
        (lambda m: {**m, "tools": {"specs": {"a": 1}}}, "tools.specs is not a list of tool"),
        (lambda m: {**m, "tools": {"specs": [{"description": "no name"}]}},
         "tools.specs is not a list of tool schemas, each with a name"),
        (lambda m: {**m, "tools": {"specs": [{"name": "add", "parameters": 7}]}},
         "tools.specs: tool 'add': parameters is a number, not an object"),
        (lambda m: {**m, "tools": {"specs": [{"name": "add", "parameters": {"properties": []}}]}},
         "tools.specs: tool 'add': parameters.properties is a list, not an object"),
    ],
)  # fmt: skip
def test_a_manifest_of_the_wrong_shape_is_named(store, change, complaint):
    """Readers rely on the manifest's fields having their JSON types: a manifest that does
    not is one error naming the field, not an AttributeError somewhere later."""
    new_run(store).close()
    path = store.run_dir(RUN) / MANIFEST
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(StoreError, match=f"^{re.escape(str(path))}: {re.escape(complaint)}"):
        _ = store.open_run(RUN).manifest


def test_unknown_run_lists_the_runs_in_a_hint(store):
    new_run(store).close()
    with pytest.raises(RunNotFoundError) as info:
        store.open_run("nope")
    assert "nope" in str(info.value)
    assert RUN in info.value.hint


def test_a_run_id_close_to_one_in_the_store_gets_did_you_mean(store):
    new_run(store).close()
    for typo in (RUN[:-1], RUN + "x", RUN.upper()):
        with pytest.raises(RunNotFoundError) as info:
            store.open_run(typo)
        assert info.value.hint == f"did you mean {RUN!r}? (tcbreplay runs lists them)", typo


def test_runs_skips_directories_without_a_manifest(store):
    new_run(store).close()
    (store.root / "stray").mkdir()
    (store.root / "notes.txt").write_text("x")
    assert [r.run_id for r in store.runs()] == [RUN]


# ---------------------------------------------------------------- JSONL export


def test_export_jsonl_matches_the_parquet_files(sim_run, tmp_path):
    sim_store, run_id = sim_run
    run = sim_store.open_run(run_id)
    written = export_jsonl(run, tmp_path / "out")
    assert [p.name for p in written] == ["samples.jsonl", "messages.jsonl", MANIFEST]
    for name, parquet in (
        ("samples.jsonl", run.samples_path),
        ("messages.jsonl", run.messages_path),
    ):
        with jsonlines.open(tmp_path / "out" / name) as reader:
            rows = list(reader)
        # each file's rows in sample order (messages: and position, whatever the row groups)
        table = pq.read_table(parquet).sort_by(
            [("sample_index", "ascending")]
            + ([("position", "ascending")] if "position" in pq.read_schema(parquet).names else [])
        )
        assert len(rows) == table.num_rows > 0
        assert set(rows[0]) == set(table.column_names)
        assert [r["sample_id"] for r in rows] == table["sample_id"].to_pylist()
        if "position" in table.column_names:
            assert [(r["sample_id"], r["position"], r["message"]) for r in rows] == list(
                zip(
                    *(table[c].to_pylist() for c in ("sample_id", "position", "message")),
                    strict=True,
                )
            )
    samples = list(jsonlines.open(tmp_path / "out" / "samples.jsonl"))
    assert isinstance(samples[0]["started_at"], str)
    assert json.loads((tmp_path / "out" / MANIFEST).read_text()) == run.manifest
    messages = list(jsonlines.open(tmp_path / "out" / "messages.jsonl"))
    assert json.loads(messages[0]["message"])["type"] == messages[0]["type"]


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_export_of_unreadable_parquet_is_a_one_line_error(sim_run, tmp_path, damage):
    """A run whose messages.parquet is gone or cut short is refused with the file named, and
    nothing is written (from the CLI: one Error line, exit 1, no traceback)."""
    from click.testing import CliRunner

    from tcbreplay._cli import main

    sim_store, run_id = sim_run
    store = tmp_path / "traces"
    shutil.copytree(sim_store.run_dir(run_id), store / run_id)
    path = store / run_id / "messages.parquet"
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:1000])
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", run_id, "-o", str(out), "--store", str(store)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert str(path) in lines[0]
    assert not out.exists()


def _arrow_out_of_memory(monkeypatch) -> None:
    """Every Parquet row group read fails in pyarrow's own allocator, as when memory runs
    out (a buffer grown past what any machine has: ``ArrowMemoryError: realloc of size ...
    failed``)."""
    import pyarrow as pa

    def read_row_group(self, *args, **kwargs):
        pa.allocate_buffer(16, resizable=True).resize(1 << 62)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)


def test_memory_running_out_in_an_export_says_so(sim_run, tmp_path, monkeypatch):
    """Reported: "cannot read it: realloc of size ... failed" did not say out of memory."""
    from click.testing import CliRunner

    from tcbreplay._cli import main
    from tcbreplay.errors import StoreError

    sim_store, run_id = sim_run
    run = sim_store.open_run(run_id)
    _arrow_out_of_memory(monkeypatch)
    with pytest.raises(StoreError) as raised:
        export_jsonl(run, tmp_path / "lib")
    path = run.dir / "samples.parquet"
    assert re.fullmatch(
        rf"out of memory while reading {re.escape(str(path))} \(\d+\.\d GB free\); "
        r"realloc of size \d+ failed",
        str(raised.value),
    ), raised.value
    assert "--memory-limit" in raised.value.hint
    assert type(raised.value.__cause__).__name__ == "ArrowMemoryError"
    result = CliRunner().invoke(
        main, ["export", run_id, "-o", str(tmp_path / "cli"), "--store", str(sim_store.root)]
    )
    assert result.exit_code == 1
    error, hint = result.stderr.splitlines()
    assert error.startswith(f"Error: out of memory while reading {path} (") and "realloc" in error
    assert hint.startswith("Hint: close what else holds memory")


def test_resume_hints_name_a_store_that_is_not_the_default(tmp_path):
    assert Run(Path("traces") / "r1").resume_command() == "tcbreplay record --resume r1"
    assert (
        Run(tmp_path / "my store" / "r1").resume_command()
        == f"tcbreplay record --resume r1 --store '{tmp_path / 'my store'}'"
    )


def test_create_run_releases_the_run_when_it_fails(store, monkeypatch):
    """A failure while the run's first files are written leaves no lock held on it, and no
    folder it made."""
    import tcbreplay._store.runs

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tcbreplay._store.runs, "write_jsonl_atomic", full)
    with pytest.raises(OSError, match="No space left on device"):
        store.create_run({"run_id": RUN}, dataset=[{"input": "x"}])
    monkeypatch.undo()
    assert list(store.root.iterdir()) == []
    store.run_dir(RUN).mkdir()  # a folder that was there before is left, its lock free
    monkeypatch.setattr(tcbreplay._store.runs, "write_jsonl_atomic", full)
    with pytest.raises(OSError, match="No space left on device"):
        store.create_run({"run_id": RUN}, dataset=[{"input": "x"}])
    monkeypatch.undo()
    RunWriter(store.run_dir(RUN)).close()  # no RunLockedError


def test_create_run_refuses_a_run_made_meanwhile_by_another_writer(store, monkeypatch):
    """Between the look for the run and taking its lock, another writer may finish making
    it: the run is not taken over."""
    new_run(store, "other").close()
    made = (store.run_dir("other") / MANIFEST).read_text()
    locked = store_mod.acquire_lock

    def meanwhile(path):
        (path.parent / MANIFEST).write_text(made)
        return locked(path)

    monkeypatch.setattr(store_mod, "acquire_lock", meanwhile)
    with pytest.raises(RunExistsError, match=f"run {RUN!r} was made by another process"):
        new_run(store)
    monkeypatch.undo()
    assert (store.run_dir(RUN) / MANIFEST).read_text() == made
    RunWriter(store.run_dir(RUN)).close()


def test_a_run_being_read_is_not_deleted(store):
    """record --overwrite deletes the run: not while a scorer reads it, whose results would
    land in the run recorded anew."""
    new_run(store).close()
    run = store.open_run(RUN)
    with (
        run.reading(),
        run.reading(),  # readers share
        pytest.raises(RunLockedError, match=f"run {RUN!r} is being read"),
    ):
        store.delete_run(RUN)
    assert store.exists(RUN)
    store.delete_run(RUN)
    assert not store.exists(RUN)


def test_a_run_being_deleted_is_not_read(store):
    new_run(store).close()
    run = store.open_run(RUN)
    fd = os.open(run.dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as delete_run holds it
        with (
            pytest.raises(RunLockedError, match="is being deleted to be recorded anew"),
            run.reading(),
        ):
            pass
    finally:
        os.close(fd)
    with run.reading():
        pass


def test_results_are_written_by_one_process_at_a_time(store):
    new_run(store).close()
    run = store.open_run(RUN)
    order = []

    def second() -> None:
        with run.writing_results():
            order.append("second")

    with run.writing_results():
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=0.3)
        assert thread.is_alive()  # waiting for its turn
        order.append("first")
    thread.join(timeout=10)
    assert order == ["first", "second"]


def test_an_interrupted_export_leaves_no_file_that_looks_whole(sim_run, tmp_path, monkeypatch):
    """Ctrl-C while the messages are written: the files of an earlier export stay as they
    were and nothing half-written takes their names."""
    store, run_id = sim_run
    out = tmp_path / "export"
    export_jsonl(store.open_run(run_id), out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = 0
    real = export_mod._jsonable

    def interrupted(row):
        nonlocal calls
        calls += 1
        if calls > 150:  # into the messages, after every sample
            raise KeyboardInterrupt
        return real(row)

    monkeypatch.setattr(export_mod, "_jsonable", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_jsonl(store.open_run(run_id), out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_lock_files_text_is_quoted_on_one_line_cut_short(tmp_path):
    # anyone who can write the store can write the lock: a line of its own in the error would
    # read as tcbreplay's ("Error: Hint: run rm -rf ~")
    from tcbreplay._store.locks import SHOWN_CHARS, lock_holder

    path = tmp_path / "writer.lock"
    path.write_text("pid 1\nHint: run rm -rf ~ to fix" + " x" * 2000)
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        shown = lock_holder(path)
    finally:
        os.close(fd)
    assert shown is not None and "\n" not in shown and len(shown) <= SHOWN_CHARS
    assert shown.startswith("pid 1 Hint: run rm -rf ~ to fix")


def test_export_of_a_run_killed_before_its_first_fold_says_so_in_one_line(store, tmp_path):
    """score and report said the run has no stored samples yet and how to finish it; export
    said only that samples.parquet could not be read (a raw read error)."""
    from helpers import cli

    writer = new_run(store)
    writer.append(record("s1", 0))
    writer.close()  # killed: the journal holds a sample, no Parquet file is written
    for fmt in ("tables", "langchain"):
        result = cli("export", RUN, "-o", tmp_path / fmt, "--format", fmt, "--store", store.root)
        assert result.exit_code == 1, result.output
        error, hint = result.stderr.splitlines()
        assert error == f"Error: run '{RUN}' has no stored samples yet (status interrupted)"
        assert hint.startswith("Hint: ")
    assert not (tmp_path / "tables").exists()


def test_an_unfinished_run_is_exported_with_a_warning(store):
    """An interrupted recording's export held the samples of its Parquet files, said nothing
    of the finished samples waiting in its journal, and imported as a complete run."""
    from helpers import cli

    writer = new_run(store)
    writer.append(record("a", 0))
    writer.fold()
    writer.close()
    writer = store.resume_run(RUN)  # a sample finished, then the recording killed: no fold
    writer.append(record("b", 1))
    writer.close()
    for fmt in ("langchain", "tables"):  # (this run has no dataset file: langchain fails after)
        out = store.root.parent / fmt
        result = cli("export", RUN, "-o", out, "--format", fmt, "--store", store.root)
        assert result.exit_code == (0 if fmt == "tables" else 1), result.output
        assert result.stderr.startswith(
            f"Warning: run {RUN!r} is interrupted: 1 finished sample in its journal, not "
            f"in this export; finish it with: tcbreplay record --resume {RUN} --store "
        ), result.stderr
