"""Failures of the place written to or read from: a --store under a file, a read-only store, a
full disk, a manifest that is not UTF-8, an output path inside the store. Each is one `Error:`
line naming the path and the cause, and leaves nothing half-written behind."""

from __future__ import annotations

import errno
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import ROOT, TEST_DATA, cli, snapshot, unscored_copy
from journal_records import record as journal_record

from tcbreplay._score import run as score_module
from tcbreplay._score.run import score_run
from tcbreplay._store.journal import fold_journal
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import JOURNAL, MANIFEST
from tcbreplay.errors import StoreError

REPO = ROOT
DATA = TEST_DATA
SIM = "sim:seed=7,error_rate=0.3"  # the model of the session's sim_run
IMPORT = ("import", "--dataset", DATA / "ds_shapes.json", "--tools", DATA / "tools_shop.json",
          "--traces", DATA / "import" / "traces_shapes.jsonl", "--run-id", "imported",
          "--format", "langchain")  # fmt: skip


def tcbreplay(*args: object, fsize: int | None = None, read_only: tuple[Path, ...] = ()):
    """``python -m tcbreplay ARGS`` in a subprocess; ``fsize``: no file it writes may grow past
    that many bytes (as on a full disk, but as root too: EFBIG instead of ENOSPC);
    ``read_only``: folders mounted read-only for it (a mount namespace of its own)."""
    command = [sys.executable, "-m", "tcbreplay", *map(str, args)]
    if read_only:
        mounts = " && ".join(
            f"mount --bind -o ro {shlex.quote(str(d))} {shlex.quote(str(d))}" for d in read_only
        )
        command = ["unshare", "-rm", "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]

    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, resource.RLIM_INFINITY))

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, preexec_fn=limit)  # fmt: skip


def assert_one_error(proc, code: int, first: str) -> None:
    """Exit ``code``, no traceback, an `Error:` line that begins with ``first`` (and maybe a
    `Hint:` line)."""
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"Error: {first}"), proc.stderr
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("Hint: ")), proc.stderr


def leftovers(*roots: Path) -> list[str]:
    """Temporary files anywhere under ``roots``, and scores without their summary."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.name.endswith((".tmp", ".wal")):
                found.append(str(path))
            if path.name == "scores.parquet" and not (path.parent / "summary.json").exists():
                found.append(str(path))
    return found


@pytest.fixture(scope="module")
def scored_once(sim_run, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the session's run without its scores, scored by this module (once)."""
    root, run_id = unscored_copy(*sim_run, tmp_path_factory.mktemp("scored") / "traces")
    assert cli("score", run_id, "--store", root).exit_code == 0
    return root, run_id


@pytest.fixture
def scored(scored_once, tmp_path) -> tuple[Path, str]:
    """A private copy of the session's run, scored (a copy of ``scored_once``)."""
    root, run_id = scored_once
    shutil.copytree(root, tmp_path / "traces")
    return tmp_path / "traces", run_id


# ---------------------------------------------------------------- a --store under a file


@pytest.mark.parametrize(
    "command",
    [
        ("record", "--model", "sim", "--quiet"),
        IMPORT,
        ("score", "r"),
        ("runs",),
        ("sql", "select 1"),
        ("export", "r", "-o", "OUT"),
        ("report", "r", "-o", "OUT/report.html"),
        ("catalog", "-o", "OUT/c.duckdb"),
    ],
    ids=lambda c: c[0],
)
def test_a_store_under_a_file_is_a_usage_error(tmp_path, command):
    """It was a traceback (NotADirectoryError) from record and import, and an empty answer
    with a warning that the folder does not exist from the others."""
    (tmp_path / "somefile").write_text("")
    (tmp_path / "out").mkdir()
    args = [a.replace("OUT", str(tmp_path / "out")) for a in map(str, command)]
    before = snapshot(tmp_path)
    result = cli(*args, "--store", tmp_path / "somefile" / "x")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: Invalid value for '--store': '{tmp_path / 'somefile'}' is a file, not a folder"
    )
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- a read-only store


@pytest.fixture(scope="module")
def can_mount_read_only(tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("ro")
    probe = ["unshare", "-rm", "sh", "-c", f"mount --bind -o ro {folder} {folder} && "
             f"! touch {folder}/x 2>/dev/null"]  # fmt: skip
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    if not ok:
        pytest.skip("cannot mount a folder read-only here (unshare -rm with mount --bind)")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "place"),
    [
        (("record", "--model", "sim", "--run-id", "new", "--quiet"), "new"),
        (
            ("record", "--model", SIM, "--run-id", "RUN", "--overwrite", "--quiet"),
            "RUN/writer.lock",
        ),
        (IMPORT, "imported"),
        # (other options than the stored scoring's: its results are not in the store, so
        # the refusal is the error; see test_a_read_only_store_says_a_scoring_it_holds)
        (("score", "RUN", "--rel-tol", "0.5"), "RUN/scores/spec_rel-0.5_abs-0"),
        (("score", "RUN", "--scorer", "abet"), "RUN/scores/abet"),
    ],
    ids=["record", "record --overwrite", "import", "score", "score --scorer abet"],
)
def test_a_read_only_store(can_mount_read_only, scored, command, place):
    """A store mounted read-only (chmod does not stop root): one line naming the path, exit 1,
    the store as it was. It was a traceback."""
    root, run_id = scored
    before = snapshot(root)
    args = [run_id if a == "RUN" else a for a in command]
    proc = tcbreplay(*args, "--store", root, read_only=(root,))
    where = root / place.replace("RUN", run_id)
    assert_one_error(proc, 1, f"{where}: cannot write: Read-only file system")
    assert proc.stderr.splitlines()[1] == (
        "Hint: the store must be writable: give another --store, or fix its permissions"
    )
    assert snapshot(root) == before


@pytest.mark.slow
def test_a_read_only_store_says_a_scoring_it_holds(can_mount_read_only, scored):
    """A scoring of the run as stored (same options, files, SQL and toolkit) failed on the
    read-only mount (it wrote the same files again): the stored one is said now, with the
    refusal, the store as it was."""
    root, run_id = scored
    before = snapshot(root)
    stored = json.loads((root / run_id / "scores" / "spec" / "summary.json").read_text())
    proc = tcbreplay("--format", "json", "score", run_id, "--store", root, read_only=(root,))
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert (said["scored_at"], said["tsa"]) == (stored["scored_at"], stored["tsa"])
    (warning,) = said["warnings"]
    assert "refuses this scoring's writes" in warning and "Read-only file system" in warning
    assert snapshot(root) == before


def changed_by_hand(folder: Path, name: str) -> None:
    """Change a stored scoring's file as a hand would, leaving it readable: a number of the
    summary, a row of a Parquet file (written again as Parquet)."""
    path = folder / name
    if name == "summary.json":
        summary = json.loads(path.read_text())
        summary["tsa"] = 1.0 if summary["tsa"] != 1.0 else 0.5
        path.write_text(json.dumps(summary, indent=2))
        return
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)  # (a row taken out)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["scores.parquet", "pairs.parquet", "summary.json"])
def test_a_read_only_store_refuses_a_stored_scoring_changed_by_hand(
    can_mount_read_only, scored, name
):
    """A stored file changed since its scoring wrote it (still readable, the same options)
    was printed as the stored scoring where the store refused writes: its sha256 is checked
    against the one the scoring recorded, and it is one Error naming it, the store as it
    was."""
    root, run_id = scored
    folder = root / run_id / "scores" / "spec"
    changed_by_hand(folder, name)
    before = snapshot(root)
    proc = tcbreplay("--format", "json", "score", run_id, "--store", root, read_only=(root,))
    assert_one_error(proc, 1, f"{folder / name}: not the file its scoring wrote")
    assert "Read-only file system" in proc.stderr.splitlines()[0]
    assert proc.stderr.splitlines()[1].startswith(
        "Hint: score it again where the store takes writes"
    )
    assert proc.stdout == ""
    assert snapshot(root) == before


@pytest.mark.slow
def test_a_read_only_store_refuses_a_stored_scoring_that_recorded_no_sha256(
    can_mount_read_only, scored
):
    """A scoring stored by a version that recorded no sha256 of its files cannot be vouched
    for: it is refused naming its summary, with the command that scores it again."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    summary.pop("summary_sha256", None)  # (as a scoring before they were recorded)
    summary["audit"].pop("results_sha256", None)
    path.write_text(json.dumps(summary, indent=2))
    before = snapshot(root)
    proc = tcbreplay("score", run_id, "--store", root, read_only=(root,))
    assert_one_error(proc, 1, f"{path}: records no sha256 of the scoring's files")
    assert proc.stderr.splitlines()[1] == (
        "Hint: score it again where the store takes writes (write credentials, a writable "
        f"mount): tcbreplay score {run_id} --store {root}"
    )
    assert snapshot(root) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ("export", "RUN", "-o", "OUT/export"),
        ("report", "RUN", "-o", "OUT/report.html"),
        ("catalog", "-o", "OUT/c.duckdb"),
    ],
    ids=lambda c: c[0],
)
def test_an_output_folder_that_is_read_only(can_mount_read_only, scored, tmp_path, command):
    """The user's -o: exit 2, naming it."""
    root, run_id = scored
    out = tmp_path / "out"
    out.mkdir()
    args = [a.replace("RUN", run_id).replace("OUT", str(out)) for a in map(str, command)]
    proc = tcbreplay(*args, "--store", root, read_only=(out,))
    assert_one_error(proc, 2, str(out))
    assert "Read-only file system" in proc.stderr.splitlines()[0]
    assert list(out.iterdir()) == []


# ---------------------------------------------------------------- a full disk


@pytest.mark.slow
def test_record_on_a_full_disk_at_its_start_leaves_nothing(tmp_path):
    root = tmp_path / "traces"
    proc = tcbreplay("record", "--model", "sim", "--run-id", "r", "--store", root, "--quiet",
                     fsize=20_000)  # the dataset file is 30 kB  # fmt: skip
    assert_one_error(proc, 1, f"{root / 'r' / 'dataset.jsonl'}: cannot write: File too large")
    assert list(root.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [("record", "--model", "sim", "--run-id", "r", "--quiet"), IMPORT],
    ids=["record", "import"],
)
def test_a_run_whose_lock_cannot_be_written_leaves_no_folder(tmp_path, command):
    """Not one byte may be written (the lock's first): the run folder made for it goes too."""
    root = tmp_path / "traces"
    root.mkdir()
    proc = tcbreplay(*command, "--store", root, fsize=0)
    run_id = command[command.index("--run-id") + 1]
    assert_one_error(proc, 1, f"{root / run_id / 'writer.lock'}: cannot write: File too large")
    assert list(root.iterdir()) == []


def test_a_run_whose_journal_cannot_be_opened_leaves_no_folder(tmp_path, monkeypatch):
    """ENOSPC opening the journal: one error naming it (the writer and create_run both closed
    the lock, EBADF hid it) and no folder."""
    import tcbreplay._store.journal

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(tcbreplay._store.journal, "drop_torn_tail", full)
    store = Store(tmp_path / "traces")
    with pytest.raises(StoreError) as caught:
        store.create_run({"run_id": "r"})
    assert (
        str(caught.value) == f"{store.root / 'r' / JOURNAL}: cannot write: No space left on device"
    )
    assert list(store.root.iterdir()) == []


@pytest.mark.slow
def test_record_on_a_full_disk_midway_keeps_what_it_recorded(tmp_path):
    """The journal cannot grow: one line, the finished samples kept (no temporary file), and
    the same command, with space again, records the rest."""
    root = tmp_path / "traces"
    args = ("record", "--model", "sim", "--run-id", "r", "--store", root, "--quiet")
    proc = tcbreplay(*args, fsize=100_000)
    assert_one_error(proc, 1, f"{root / 'r' / JOURNAL}: cannot write: File too large")
    kept = pq.read_table(root / "r" / "samples.parquet").num_rows
    assert 0 < kept < 94
    assert json.loads((root / "r" / MANIFEST).read_text())["status"] == "failed"
    assert leftovers(root) == []
    proc = tcbreplay(*args)
    assert proc.returncode == 0, proc.stderr
    assert f"recorded {94 - kept} in" in proc.stdout
    ids = pq.read_table(root / "r" / "samples.parquet")["sample_id"].to_pylist()
    assert len(ids) == len(set(ids)) == 94


@pytest.mark.slow
def test_import_on_a_full_disk_leaves_nothing(tmp_path):
    root = tmp_path / "traces"
    root.mkdir()
    proc = tcbreplay(*IMPORT, "--store", root, fsize=3_000)
    assert_one_error(proc, 1, str(root / "imported"))
    assert "File too large" in proc.stderr
    assert list(root.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("fsize", [3_000, 6_000, 10_000])  # each stops at another file
def test_score_on_a_full_disk_keeps_the_scoring_before(scored, fsize):
    """It left scores.parquet without summary.json (or beside the summary of the scoring
    before) and temporary files."""
    root, run_id = scored
    before = snapshot(root)
    proc = tcbreplay("score", run_id, "--store", root, fsize=fsize)
    assert_one_error(proc, 1, str(root / run_id))
    assert "cannot write: File too large" in proc.stderr
    assert snapshot(root) == before


@pytest.mark.slow
def test_a_first_score_on_a_full_disk_writes_no_scores(sim_copy):
    root, run_id = sim_copy
    proc = tcbreplay("score", run_id, "--store", root, fsize=6_000)
    assert_one_error(proc, 1, str(root / run_id / "scores" / "spec" / "scores.parquet"))
    # neither files nor the folders made for them (scores/ stays: scorers take turns on it)
    assert list((root / run_id / "scores").rglob("*")) == []
    assert not (root / run_id / "evaluations").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "written", "fsize"),
    [
        (("export", "RUN", "-o", "OUT"), "OUT", 50_000),
        (("report", "RUN", "-o", "OUT/report.html"), "OUT/report.html", 100_000),
        (("catalog", "-o", "OUT/c.duckdb"), "OUT/c.duckdb", 5_000),
    ],
    ids=["export", "report", "catalog"],
)
def test_outputs_on_a_full_disk_keep_the_output_before(scored, tmp_path, command, written, fsize):
    root, run_id = scored
    out = tmp_path / "out"
    out.mkdir()
    args = [a.replace("RUN", run_id).replace("OUT", str(out)) for a in map(str, command)]
    assert tcbreplay(*args, "--store", root).returncode == 0
    before = snapshot(out)
    proc = tcbreplay(*args, "--store", root, fsize=fsize)
    assert_one_error(proc, 2, written.replace("OUT", str(out)))
    assert "File too large" in proc.stderr.splitlines()[0]
    assert snapshot(out) == before


def test_fold_on_a_full_disk_names_the_file(sim_copy, monkeypatch):
    """ENOSPC itself (the subprocess tests see EFBIG): the file, the cause, what to do; the
    journal is kept to be folded again."""
    root, run_id = sim_copy
    run_dir = root / run_id
    before = snapshot(root)
    real = pq.ParquetWriter.write_table

    def full(self, table, *args, **kwargs):
        real(self, table.slice(0, 1), *args, **kwargs)  # part of it written
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] ...")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    (run_dir / JOURNAL).write_text(json.dumps(journal_record("extra", 94, run_id=run_id)) + "\n")
    with pytest.raises(StoreError) as caught:
        fold_journal(run_dir)
    assert str(caught.value) == (
        f"{run_dir / 'messages.parquet'}: cannot write: No space left on device"
    )
    assert caught.value.hint == "free some disk space, then run the command again"
    (run_dir / JOURNAL).unlink()
    assert snapshot(root) == before


def test_scores_on_a_full_disk_are_one_line(scored, monkeypatch):
    """ENOSPC from Arrow's writer (the scores files are written part by part with it, no
    longer by Polars: its "(os error 28)" text is read below): still the one line, and
    nothing left behind."""
    root, run_id = scored
    before = snapshot(root)

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] ...")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    monkeypatch.setattr(score_module, "stored_scoring", lambda *args: None)  # (written again)
    with pytest.raises(StoreError, match=r"scores\.parquet: cannot write: No space left on device"):
        score_run(Store(root), run_id)
    assert snapshot(root) == before


def test_a_full_disk_while_the_pairs_file_is_written_is_the_one_line(scored, monkeypatch):
    """The pairs file is written beside the scores file, in another thread: its failure is
    still the one line naming it, raised where scoring stops, and nothing is left behind."""
    root, run_id = scored
    before = snapshot(root)
    real = pq.ParquetWriter.write_table
    failed = []

    def full_for_pairs(self, table, *args, **kwargs):
        if "pairs" not in str(getattr(self.where, "name", self.where)):  # (a file object)
            return real(self, table, *args, **kwargs)
        failed.append(threading.current_thread().name)
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] ...")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_for_pairs)
    monkeypatch.setattr(score_module, "stored_scoring", lambda *args: None)  # (written again)
    with pytest.raises(StoreError, match=r"pairs\.parquet: cannot write: No space left on device"):
        score_run(Store(root), run_id)
    assert failed and failed[0].startswith("tcbreplay-write")
    assert snapshot(root) == before


def test_a_failure_polars_reports_as_text_is_the_one_line(tmp_path):
    """Polars says "(os error 28)" in a ComputeError: still the one line."""
    import polars as pl

    from tcbreplay._store.files import writing

    path = tmp_path / "scores.parquet"
    failure = pl.exceptions.ComputeError("parquet: underlying IO error: No space (os error 28)")
    expected = r"scores\.parquet: cannot write: No space left on device"
    with pytest.raises(StoreError, match=expected), writing(path):
        raise failure


def test_an_os_error_the_library_did_not_name_is_still_one_line(scored, monkeypatch):
    """The CLI's last line of defence: a failure of the place, from anywhere, is one line."""
    import tcbreplay._query.sql

    root, _ = scored

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "/some/where")

    monkeypatch.setattr(tcbreplay._query.sql, "run_sql", full)
    result = cli("sql", "select 1", "--store", root)
    assert result.exit_code == 1
    assert result.stderr == "Error: /some/where: No space left on device\n"


# ---------------------------------------------------------------- files that are not UTF-8


def test_a_manifest_that_is_not_utf8_is_left_out_or_named(scored, tmp_path):
    """It was a traceback (UnicodeDecodeError) from runs, sql and catalog."""
    root, run_id = scored
    shutil.copytree(root / run_id, root / "latin")
    (root / "latin" / MANIFEST).write_bytes(b'{"comment": "caf\xe9"}')
    warning = (
        f"Warning: left out run 'latin': {root / 'latin' / MANIFEST}: unreadable manifest: "
        "not UTF-8 text (byte 16: invalid continuation byte)"
    )
    for command in (["runs"], ["sql", "select distinct run_id from samples"],
                    ["catalog", "-o", tmp_path / "c.duckdb"]):  # fmt: skip
        result = cli(*command, "--store", root)
        assert result.exit_code == 0, (command, result.output)
        assert result.stderr == warning + "\n"
        assert "latin" not in result.stdout
    result = cli("score", "latin", "--store", root)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {warning.split(': ', 2)[2]}\n"


def test_a_scores_summary_that_is_not_utf8_is_not_read(scored, tmp_path):
    root, run_id = scored
    (root / run_id / "scores" / "spec" / "summary.json").write_bytes(b'{"scored_at": "\xe9"}')
    result = cli("sql", "select count(*) as n from scores", "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 0}]
    result = cli("report", run_id, "-o", tmp_path / "r.html", "--store", root)
    assert result.exit_code == 0, result.output  # scored in memory instead


def test_a_journal_line_that_is_not_utf8_is_named(sim_copy):
    root, run_id = sim_copy
    (root / run_id / JOURNAL).write_bytes(b'{"sample_id": "\xe9"}\n')
    result = cli("record", "--resume", run_id, "--store", root, "--quiet")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {root / run_id / JOURNAL}: line 1: not UTF-8 text\n"


# ---------------------------------------------------------------- a run that cannot be read


def break_run(root: Path, run_id: str, how: str, elsewhere: Path) -> str:
    """Copy run ``run_id`` as ``broken``, broken ``how``; the error every command gives."""
    broken = root / "broken"
    if how == "linked":  # a folder outside the store, linked from it
        shutil.copytree(root / run_id, elsewhere)
        broken.symlink_to(elsewhere)
        return (
            f"{broken}: a symbolic link to {elsewhere}; tcbreplay reads only run folders that "
            "are in the store folder itself (copy the run into it)"
        )
    shutil.copytree(root / run_id, broken)
    if how == "manifest":
        (broken / MANIFEST).write_text("{")
        return f"{broken / MANIFEST}: unreadable manifest: "
    (broken / "samples.parquet").write_bytes(b"garbage")
    return f"{broken / 'samples.parquet'}: not a readable Parquet file ("


@pytest.mark.parametrize("how", ["manifest", "samples", "linked"])
@pytest.mark.parametrize(
    "command",
    [("score", "broken"), ("diff", "RUN", "broken"), ("diff", "broken", "RUN"),
     ("report", "broken", "-o", "OUT/r.html"), ("audit", "verify", "broken"),
     ("export", "broken", "-o", "OUT/e"), ("validity", "broken"),
     ("query", "error_breakdown", "--param", "run_id=broken"),
     ("record", "--resume", "broken", "--quiet")],
    ids=lambda c: "-".join(c[:2]),
)  # fmt: skip
def test_a_run_that_cannot_be_read_is_refused_alike_by_every_command(scored, tmp_path, how,
                                                                     command):  # fmt: skip
    """`runs` and `sql` leave such a run out with a warning; naming it is its error, the same
    from every command (diff read a linked run, and compared stale scores of a broken one)."""
    root, run_id = scored
    (tmp_path / "out").mkdir()
    error = break_run(root, run_id, how, tmp_path / "elsewhere" / "broken")
    runs = cli("runs", "--store", root)
    assert runs.stderr.startswith(f"Warning: left out run 'broken': {error}")
    before = snapshot(root)
    args = [a.replace("RUN", run_id).replace("OUT", str(tmp_path / "out")) for a in command]
    result = cli(*args, "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: {error}"), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""
    assert snapshot(root) == before
    assert list((tmp_path / "out").iterdir()) == []


# ---------------------------------------------------------------- outputs inside the store


@pytest.mark.parametrize(
    ("command", "output"),
    [
        (("catalog", "-o"), "RUN/manifest.json"),
        (("catalog", "-o"), "c.duckdb"),
        (("report", "RUN", "-o"), "RUN/report.html"),
        (("export", "RUN", "-o"), "RUN"),
        (("export", "RUN", "-o"), "."),
        (("report", "RUN", "-o"), "LINK/report.html"),
    ],
)
def test_an_output_inside_the_store_is_refused(scored, tmp_path, command, output):
    """`catalog -o RUN/manifest.json` replaced the run's manifest with a DuckDB file."""
    root, run_id = scored
    (tmp_path / "link").symlink_to(root / run_id)
    path = output.replace("LINK", str(tmp_path / "link"))
    path = str(root / path.replace("RUN", run_id)) if not path.startswith("/") else path
    before = snapshot(root)
    args = [a.replace("RUN", run_id) for a in command]
    result = cli(*args, path, "--store", root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"Error: -o {path}: inside the store {root}, which holds runs only",
        f"Hint: give -o a path outside {root}",
    ]
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "command", [("export", "RUN"), ("report", "RUN"), ("catalog",)], ids=lambda c: c[0]
)
def test_an_empty_output_path_is_refused(scored, tmp_path, monkeypatch, command):
    """Reported: `export -o ''` wrote into the working folder (`report -o ''` was refused)."""
    root, run_id = scored
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = [a.replace("RUN", run_id) for a in command]
    result = cli(*args, "-o", "", "--store", root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "Error: Invalid value for '-o' / '--output': an empty path names no file or folder",
        f"Hint: see main {command[0]} --help",  # the test runner calls the program main
    ]
    assert list(work.iterdir()) == []


def test_an_output_beside_the_store_is_written(scored, tmp_path):
    """A folder whose name begins with the store's is not inside it."""
    root, run_id = scored
    beside = Path(str(root) + "-out")
    beside.mkdir()
    for args in (("catalog", "-o", beside / "c.duckdb"), ("export", run_id, "-o", beside / "e"),
                 ("report", run_id, "-o", beside / "r.html")):  # fmt: skip
        result = cli(*args, "--store", root)
        assert result.exit_code == 0, (args, result.output)


def test_a_file_copied_that_cannot_be_read_is_the_one_named(tmp_path):
    """A run's dataset copied from its parent's (replay): a parent's file gone is named, and
    nothing is left in its place."""
    from tcbreplay._store.files import copy_atomic

    source, target = tmp_path / "parent" / "dataset.jsonl", tmp_path / "child" / "dataset.jsonl"
    target.parent.mkdir()
    with pytest.raises(StoreError, match=rf"^{source}: cannot be read \("):
        copy_atomic(source, target)
    assert list(target.parent.iterdir()) == []
    source.parent.mkdir()
    source.write_bytes(b'{"id": "a"}\n')
    copy_atomic(source, target)
    assert target.read_bytes() == source.read_bytes()


def test_a_manifest_value_of_another_type_is_null_in_runs_with_a_warning(scored):
    """totals.ok "x" (a manifest edited by hand) made runs, sql and query of every run of the
    store end in a traceback (ArrowInvalid), 10**30 in an OverflowError."""
    root, run_id = scored
    shutil.copytree(root / run_id, root / "edited")
    path = root / "edited" / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["run_id"] = "edited"
    manifest["totals"].update(ok="x", recorded=10**30)
    path.write_text(json.dumps(manifest))
    counted = cli("sql", f"select count(*) as n from samples where run_id = '{run_id}'",
                  "--format", "json", "--store", root)  # fmt: skip
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)[0]["n"] > 0
    assert "Warning: run 'edited': its manifest's totals.ok 'x' is not a int64: shown as " in (
        counted.stderr
    )
    runs = cli("runs", "--format", "json", "--store", root)
    assert runs.exit_code == 0, runs.output
    row = next(r for r in json.loads(runs.stdout) if r["run_id"] == "edited")
    assert row["ok"] is None


def test_export_of_a_damaged_dataset_file_is_one_line(scored, tmp_path):
    """A cut dataset.jsonl ended export in a JSONDecodeError traceback. It is not the file
    the run wrote (its manifest's stored_sha256); of a run whose manifest has none (an older
    tcbreplay's), it is unreadable."""
    root, run_id = scored
    path = root / run_id / "dataset.jsonl"
    path.write_bytes(path.read_bytes()[:1000])
    result = cli("export", run_id, "-o", tmp_path / "ex", "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: {path}: not the file the run wrote")
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "ex").exists()
    manifest = root / run_id / "manifest.json"
    fields = json.loads(manifest.read_text())
    del fields["dataset"]["stored_sha256"]
    manifest.write_text(json.dumps(fields))
    result = cli("export", run_id, "-o", tmp_path / "ex", "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: {path}: unreadable dataset file: ")
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "ex").exists()


def test_a_scoring_whose_summary_cannot_be_read_is_left_out_with_a_warning(scored):
    """It was left out of runs and sql in silence (a cut scores file had its warning)."""
    root, run_id = scored
    summary = root / run_id / "scores" / "spec" / "summary.json"
    summary.write_text("{")
    listed = cli("runs", "--store", root)
    assert listed.exit_code == 0, listed.output
    said = f"Warning: left out the spec scoring of run {run_id!r}: {summary}: unreadable summary"
    assert said in listed.stderr
    assert said in cli("sql", "select * from scorings", "--store", root).stderr
