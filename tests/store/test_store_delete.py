"""Deleting and creating runs under attack: `record --overwrite` killed while it deletes,
folders left without a manifest, two identical first records at once, a run deleted while it
is read. Nothing the store held comes back, and nothing it should keep is lost."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import cli, snapshot, unscored_copy

from tcbreplay._inputs.benchmarks import BENCHMARKS
from tcbreplay._record import runner as record_mod
from tcbreplay._store.locks import take_lock
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import LOCK, MANIFEST
from tcbreplay._store.writer import DELETED_PREFIX
from tcbreplay.errors import RunLockedError, StoreError

BUILTIN = BENCHMARKS["tool-call"]
N_SAMPLES = len(json.loads(BUILTIN.dataset.read_text()))
SIM = "sim:seed=7,error_rate=0.3"  # the model of the session's sim_run
KEEP = "keep"  # a run beside the one attacked, which must come through unchanged


@pytest.fixture
def other_dataset(tmp_path) -> Path:
    """Ten entries of the built-in dataset under other ids: a run of them shares no sample
    id with the built-in run, and its sample_index values 0-9 are that run's too."""
    entries = json.loads(BUILTIN.dataset.read_text())[:10]
    for entry in entries:
        entry["id"] = f"other-{entry['id']}"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(entries))
    return path


@pytest.fixture(scope="module")
def two_runs_once(sim_run, tmp_path_factory) -> tuple[Path, str]:
    """A store holding a copy of the session's run and a second run, KEEP (made once)."""
    root, run_id = unscored_copy(*sim_run, tmp_path_factory.mktemp("two") / "traces")
    shutil.copytree(root / run_id, root / KEEP)
    assert cli("score", KEEP, "--store", root).exit_code == 0
    return root, run_id


@pytest.fixture
def two_runs(two_runs_once, tmp_path) -> tuple[Path, str]:
    """A private copy of ``two_runs_once``: the session's run and KEEP."""
    root, run_id = two_runs_once
    shutil.copytree(root, tmp_path / "traces")
    return tmp_path / "traces", run_id


def without_lock(tree: dict[str, str]) -> dict[str, str]:
    """A snapshot without the lock files, which every writer stamps with its pid."""
    return {name: digest for name, digest in tree.items() if not name.endswith(LOCK)}


def record_again(root: Path, run_id: str, dataset: Path, *extra: str):
    return cli("record", "--dataset", dataset, "--model", "sim", "--run-id", run_id,
               "--store", root, "--quiet", *extra)  # fmt: skip


def assert_only_the_new_run(root: Path, run_id: str) -> None:
    """The run holds the ten samples of the other dataset and nothing of the old run, and
    scores; no folder of a deletion is left."""
    rows = pq.read_table(root / run_id / "samples.parquet").to_pylist()
    assert sorted(r["sample_id"] for r in rows) == sorted(
        f"other-{e['id']}" for e in json.loads(BUILTIN.dataset.read_text())[:10]
    )
    result = cli("score", run_id, "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_samples"] == 10
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


def assert_gone(root: Path, run_id: str) -> None:
    """No command sees the run, and none warns about what its deletion left."""
    assert not Store(root).exists(run_id)
    result = cli("runs", "--store", root)
    assert result.exit_code == 0, result.output
    assert run_id not in result.stdout and result.stderr == ""
    result = cli("sql", "select distinct run_id from samples", "--store", root, "--format", "csv")
    assert result.stdout.split() == ["run_id", KEEP] and result.stderr == ""
    result = cli("catalog", "-o", root.parent / "catalog.duckdb", "--store", root)
    assert result.stdout.endswith("over 1 run\n") and result.stderr == ""


# ---------------------------------------------------------------- record --overwrite cut short


def test_overwrite_killed_while_deleting_does_not_bring_the_old_run_back(two_runs, other_dataset,
                                                                      monkeypatch):  # fmt: skip
    """The reproduction: `record --overwrite` interrupted while it removed the old folder
    (its manifest gone first, its data files not yet), then the same command again. The old
    94 samples were merged into the new run ("104/10 ok") and score failed on repeated
    sample_index values."""
    root, run_id = two_runs
    real = shutil.rmtree

    def interrupted(path, *args, **kwargs):
        (Path(path) / MANIFEST).unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    result = record_again(root, run_id, other_dataset, "--overwrite")
    assert result.exit_code == 130, result.output
    monkeypatch.setattr(shutil, "rmtree", real)
    result = record_again(root, run_id, other_dataset, "--overwrite")
    assert result.exit_code == 0, result.output
    assert "10/10 ok" in result.stdout
    assert_only_the_new_run(root, run_id)


def _stop_before_rename(monkeypatch):
    real = os.rename

    def stop(src, dst, *args, **kwargs):
        if Path(dst).name.startswith(DELETED_PREFIX):
            raise KeyboardInterrupt
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", stop)


def _rmtree_stopping(remove: tuple[str, ...], finish: bool = False):
    """An rmtree interrupted (once) after removing ``remove`` from the folder, or after
    removing it all (``finish``)."""
    real = shutil.rmtree
    done = []

    def rmtree(path, *args, **kwargs):
        if done:
            return real(path, *args, **kwargs)
        done.append(path)
        for name in remove:
            (Path(path) / name).unlink(missing_ok=True)
        if finish:
            real(path, *args, **kwargs)
        raise KeyboardInterrupt

    return rmtree


STEPS = {
    "before the rename": None,
    "after the rename": (),
    "manifest removed": (MANIFEST,),
    "manifest and samples removed": (MANIFEST, "samples.parquet"),
    "data removed, manifest left": ("samples.parquet", "messages.parquet", "dataset.jsonl"),
    "after the removal": ("<all>",),
}


@pytest.mark.slow
@pytest.mark.parametrize("step", list(STEPS))
def test_overwrite_interrupted_at_each_step_of_the_deletion(two_runs, other_dataset, monkeypatch,
                                                            step):  # fmt: skip
    """Interrupted anywhere, the deletion leaves the run whole or leaves nothing of it that
    any command reads; the other run is untouched; the command run again makes the new run
    of the new samples only."""
    root, run_id = two_runs
    before = without_lock(snapshot(root))
    keep = snapshot(root / KEEP)
    remove = STEPS[step]
    if remove is None:
        _stop_before_rename(monkeypatch)
    elif remove == ("<all>",):
        monkeypatch.setattr(shutil, "rmtree", _rmtree_stopping((), finish=True))
    else:
        monkeypatch.setattr(shutil, "rmtree", _rmtree_stopping(remove))
    result = record_again(root, run_id, other_dataset, "--overwrite")
    monkeypatch.undo()
    assert result.exit_code == 130, result.output
    assert snapshot(root / KEEP) == keep
    if remove is None:
        assert without_lock(snapshot(root)) == before  # the run as it was
    else:
        assert_gone(root, run_id)
        # a record without --overwrite makes the run anew too: nothing is there to merge
        result = record_again(root, run_id, other_dataset)
        assert result.exit_code == 0, result.output
        assert_only_the_new_run(root, run_id)
    result = record_again(root, run_id, other_dataset, "--overwrite")
    assert result.exit_code == 0, result.output
    assert_only_the_new_run(root, run_id)
    assert snapshot(root / KEEP) == keep


KILLED_DELETION = """
import os, shutil, signal, sys
from pathlib import Path
from tcbreplay._store.runs import Store

def killed(path, *args, **kwargs):
    for name in sys.argv[3:]:
        (Path(path) / name).unlink()
    os.kill(os.getpid(), signal.SIGKILL)

shutil.rmtree = killed
Store(sys.argv[1]).delete_run(sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.parametrize("removed", [(), (MANIFEST,), (MANIFEST, "samples.parquet")])
def test_deletion_killed_for_real_leaves_nothing_of_the_run(two_runs, other_dataset, removed):
    """kill -9 in the middle of the removal (no cleanup runs): the same checks."""
    root, run_id = two_runs
    keep = snapshot(root / KEEP)
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_DELETION, str(root), run_id, *removed],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert_gone(root, run_id)
    assert [p.name.startswith(DELETED_PREFIX) for p in root.iterdir()].count(True) == 1
    result = record_again(root, run_id, other_dataset)
    assert result.exit_code == 0, result.output
    assert_only_the_new_run(root, run_id)
    assert snapshot(root / KEEP) == keep


def test_folders_of_deletions_are_read_by_no_view_and_removed_later(two_runs, tmp_path):
    """A whole run renamed away (a deletion killed right after its rename): runs, sql,
    catalog and score leave it out without a warning, and the next deletion removes it."""
    root, run_id = two_runs
    away = root / f"{DELETED_PREFIX}{run_id}-0badf00d"
    (root / run_id).rename(away)
    assert (away / MANIFEST).is_file()
    assert_gone(root, run_id)
    assert cli("score", away.name, "--store", root).exit_code == 2  # no run id names it
    Store(root).delete_run(KEEP)
    assert list(root.iterdir()) == []


def test_a_deletion_asks_its_condition_under_the_writers_lock(two_runs):
    """``only_if`` is asked with the run's writer lock held (no writer can come between its
    answer and the deletion); False keeps the run as it was, True deletes it."""
    root, run_id = two_runs
    store = Store(root)
    before = without_lock(snapshot(root))
    asked = []

    def holding(answer: bool):
        def only_if(run) -> bool:
            with pytest.raises(RunLockedError):  # (what a writer starting now meets)
                take_lock(run.dir / LOCK)
            asked.append(run.run_id)
            return answer

        return only_if

    assert store.delete_run(run_id, only_if=holding(False)) is False
    assert without_lock(snapshot(root)) == before
    assert store.delete_run(run_id, only_if=holding(True)) is True
    assert asked == [run_id, run_id] and not store.exists(run_id)


def test_overwrite_of_a_run_folder_linked_from_outside_removes_the_link_only(
    two_runs, other_dataset, tmp_path
):
    """No command reads such a run; replacing it removes the link, and writes nothing (not
    even a lock) in the folder it points to, outside the store."""
    root, run_id = two_runs
    elsewhere = tmp_path / "elsewhere" / "linked"
    shutil.copytree(root / run_id, elsewhere)
    before = snapshot(elsewhere)
    (root / "linked").symlink_to(elsewhere)
    result = record_again(root, "linked", other_dataset, "--overwrite")
    assert result.exit_code == 0, result.output
    assert not (root / "linked").is_symlink()
    assert_only_the_new_run(root, "linked")
    assert snapshot(elsewhere) == before


# ---------------------------------------------------------------- folders without a manifest


def test_a_folder_with_samples_but_no_manifest_is_refused_never_merged(two_runs, other_dataset):
    """What a deletion cut short by an older tcbreplay left (its manifest removed first): a
    new run of that id would have taken its samples for its own."""
    root, run_id = two_runs
    (root / run_id / MANIFEST).unlink()
    before = without_lock(snapshot(root))
    traces = root.parent / "traces.jsonl"
    traces.write_text(json.dumps({"sample_id": "other-hi-there", "messages": []}) + "\n")
    for result in (
        record_again(root, run_id, other_dataset),
        cli("import", "--dataset", other_dataset, "--tools", BUILTIN.tools, "--format",
            "langchain", "--traces", traces, "--run-id", run_id, "--store", root),
    ):  # fmt: skip
        assert result.exit_code == 1, result.output
        error, hint = result.stderr.splitlines()
        assert error == (
            f"Error: {root / run_id}: holds messages.parquet, samples.parquet but no {MANIFEST}: "
            "not a run, and not to be taken for a new one (left by a deletion cut short?)"
        )
        assert hint.startswith("Hint: remove the folder if its files are not needed")
        assert without_lock(snapshot(root)) == before
    # --overwrite replaces whatever holds the run's name
    result = record_again(root, run_id, other_dataset, "--overwrite")
    assert result.exit_code == 0, result.output
    assert_only_the_new_run(root, run_id)


def test_a_folder_a_killed_creation_left_is_taken(store):
    """A creation killed before its manifest leaves its lock, an empty journal and the
    dataset: that folder is no run, and the next creation takes it."""
    folder = store.run_dir("r")
    folder.mkdir(parents=True)
    for name in (LOCK, "journal.jsonl", "dataset.jsonl", "manifest.json.tmp"):
        (folder / name).write_text("")
    store.create_run({"run_id": "r"}).close()
    assert store.exists("r")
    (store.run_dir("s") / "journal.jsonl").parent.mkdir()
    (store.run_dir("s") / "journal.jsonl").write_text('{"sample_id": "a"}\n')
    with pytest.raises(StoreError, match=r"holds journal\.jsonl but no manifest\.json"):
        store.create_run({"run_id": "s"})


# ---------------------------------------------------------------- two identical first records


def _made_meanwhile(monkeypatch, source: Path, target: Path, hold: bool) -> list[int]:
    """Make the run ``target`` (a copy of ``source``) appear after record looked for it and
    before it creates it, as another `record` of the same inputs would; ``hold``: that
    other record is still writing it (its lock held, its pid written)."""
    held: list[int] = []
    real = record_mod._library_versions

    def meanwhile():
        shutil.copytree(source, target)
        if hold:
            fd = os.open(target / LOCK, os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.write(fd, b"pid 4242 since 2024-01-01T00:00:00+00:00")
            held.append(fd)
        return real()

    monkeypatch.setattr(record_mod, "_library_versions", meanwhile)
    return held


@pytest.mark.parametrize("hold", [True, False])
def test_identical_first_records_at_once_name_the_other_writer(sim_run, tmp_path, monkeypatch,
                                                               hold):  # fmt: skip
    """The loser of two identical first records is told who writes the run (while it does)
    or finds the run the winner finished, as the same command run again would; it was told
    the run "already exists, choose another --run-id" (exit 2)."""
    source, run_id = sim_run
    store = Store(tmp_path / "traces")
    store.root.mkdir()
    held = _made_meanwhile(monkeypatch, source.run_dir(run_id), store.run_dir(run_id), hold)
    try:
        args = ("record", "--model", SIM, "--run-id", run_id, "--store", store.root, "--quiet")
        result = cli(*args)
    finally:
        for fd in held:
            os.close(fd)
    if hold:
        assert result.exit_code == 1, result.output
        assert result.stderr.splitlines()[0] == (
            f"Error: run {run_id!r} is being written by pid 4242 since 2024-01-01T00:00:00+00:00"
        )
    else:
        assert result.exit_code == 0, result.output
        assert f"already holds all {N_SAMPLES} samples" in result.stdout


def test_a_writer_is_named_even_before_it_wrote_its_pid(store):
    """A writer that has just taken the lock writes its pid a moment later: the loser waits
    for it instead of saying "another process"."""
    store.create_run({"run_id": "r"}).close()
    lock = store.run_dir("r") / LOCK
    lock.write_text("")
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    stamp = threading.Timer(0.05, lambda: os.write(fd, b"pid 4242 since now"))
    stamp.start()
    try:
        with pytest.raises(RunLockedError, match="being written by pid 4242 since now"):
            take_lock(lock)
    finally:
        stamp.join()
        os.close(fd)


# ---------------------------------------------------------------- deleted while it is read


def _delete_during(monkeypatch, module, name: str, store: Store, run_id: str) -> list:
    """Try to delete the run when ``module.name`` is called, then call it; the outcomes."""
    tried: list = []
    real = getattr(module, name)

    def meanwhile(*args, **kwargs):
        if not tried:
            try:
                store.delete_run(run_id)
                tried.append("deleted")
            except RunLockedError as exc:
                tried.append(exc)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, meanwhile)
    return tried


@pytest.mark.slow  # (about 3 s under load)
def test_report_holds_its_runs_until_the_page_is_written(two_runs, tmp_path, monkeypatch):
    """`record --overwrite` while report read the run: the report came out with the
    transcripts missing, or died with FileNotFoundError. The deletion is refused now."""
    import tcbreplay._report
    from tcbreplay._report import write_report

    root, run_id = two_runs
    store = Store(root)
    before = without_lock(snapshot(root))
    # the page reads every transcript as it is rendered, after the scores
    tried = _delete_during(monkeypatch, tcbreplay._report, "render_page", store, run_id)
    out = write_report(store, [KEEP, run_id], tmp_path / "report.html")
    (refused,) = tried
    assert isinstance(refused, RunLockedError)
    assert str(refused) == (
        f"run {run_id!r} is being read (scored, reported, audited, diffed, exported or served) "
        "by another process"
    )
    assert without_lock(snapshot(root)) == before
    assert out.read_text().count("Hi there!") >= 2  # a transcript of each run


@pytest.mark.parametrize(
    ("module", "name", "command"),
    [
        ("tcbreplay._compare.audit", "read_summary", ("audit", "verify", KEEP)),
        ("tcbreplay._compare.diff", "load_scores", ("diff", "RUN", KEEP)),
        ("pyarrow.parquet", "read_table", ("export", KEEP, "-o", "OUT")),
    ],
    ids=["audit", "diff", "export"],
)
def test_audit_diff_and_export_hold_their_runs(two_runs, monkeypatch, module, name, command):
    import importlib

    root, run_id = two_runs
    store = Store(root)
    tried = _delete_during(monkeypatch, importlib.import_module(module), name, store, KEEP)
    where = {"RUN": run_id, "OUT": str(root.parent / "export")}
    args = [where.get(a, a) for a in command]
    result = cli(*args, "--store", root)
    assert result.exit_code == 0, result.output
    (refused,) = tried
    assert isinstance(refused, RunLockedError)
    assert store.exists(KEEP)
