"""A store on object storage (``--store s3://bucket/prefix``), against moto's S3 server on
loopback (the ``s3_server`` fixture): every command gives the numbers it gives on a local
store, and the store's guarantees hold there (whole files, the manifest last, one writer,
kill -9 safe)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs
from helpers import TAU_BENCH, ScorersHere, cli, cli_process, import_tau_bench, wait_for
from upath import UPath

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score import run as score_module
from tcbreplay._score.run import score_run
from tcbreplay._store import lock_clock, locks, objects, s3_limits
from tcbreplay._store.journal import ChunkJournal, chunk_name, chunk_numbers
from tcbreplay._store.locks import LeaseLock, lease_holder
from tcbreplay._store.objects import is_remote
from tcbreplay._store.runs import Store
from tcbreplay._words import count
from tcbreplay.errors import InputError, RunLockedError, StoreError

# Every test here but one talks to the local S3 server (a thread serving HTTP in this process,
# started once for the file): make test runs them, that every command works on s3:// as on a
# folder; those that kill a writer or wait out a lease are left to make test-slow.


# -- a local S3 server ---------------------------------------------------------------------

# what the cloud's library reads the server's credentials from (moto takes any); values that
# no other test prints, so that finding one in an output means it leaked
S3_SECRET = "moto-secret-Zq8vX3kP0w"
S3_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "moto-key-id-4Hn2",
    "AWS_SECRET_ACCESS_KEY": S3_SECRET,
    "AWS_DEFAULT_REGION": "us-east-1",
    # the user's own AWS files are not read
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on loopback, started once for this module and stopped at its end;
    while it runs, the environment points the AWS libraries at it (``AWS_ENDPOINT_URL_S3``,
    credentials): tcbreplay reads a store ``s3://...`` as it would a real one."""
    import logging

    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    environment = {**S3_ENVIRONMENT, "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}"}
    before = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        yield environment["AWS_ENDPOINT_URL_S3"]
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()
        # fsspec keeps each filesystem it made, with the endpoint and credentials the
        # environment held then: a later test's store would ask this stopped server
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()


def new_bucket() -> str:
    """A new, empty bucket on the local S3 server: its name."""
    import uuid

    import boto3

    name = f"tcbreplay-{uuid.uuid4().hex[:16]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_store(s3_server):
    """The URL of an empty store on the local S3 server (a bucket of its own)."""
    return f"s3://{new_bucket()}/traces"


@pytest.fixture(scope="module")
def s3_sim_copy(s3_server, sim_run):
    """``sim_run`` uploaded without its scores and its lock into a store on the local S3
    server, every other file as it is: (store URL, run_id). The same bytes as ``sim_copy``, so
    every command must give the same numbers on both."""
    import s3fs

    store, run_id = sim_run
    url = f"s3://{new_bucket()}/traces"
    fs = s3fs.S3FileSystem()
    for path in sorted(store.run_dir(run_id).rglob("*")):
        relative = path.relative_to(store.root)
        # not the local writer.lock either: a flock's file, which on S3 would be a live lease
        skip = relative.parts[1] in ("scores", "evaluations") or path.name == "writer.lock"
        if path.is_file() and not skip:
            fs.put_file(str(path), f"{url.removeprefix('s3://')}/{relative.as_posix()}")
    return url, run_id


N_SAMPLES = len(json.loads(BENCHMARKS["tool-call"].dataset.read_text()))


def _fs() -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(use_listings_cache=False)


def count_details_asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths s3fs asks an object's details of (a HEAD each), from here on in the test
    (filesystems made after this call)."""
    asked: list[str] = []
    real = s3fs.S3FileSystem._info

    async def counted(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(path)
        return await real(self, path, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_info", counted)
    return asked


def _keys(url: str) -> list[str]:
    """Every object under a store URL, relative to it."""
    root = url.removeprefix("s3://")
    return sorted(key.removeprefix(root + "/") for key in _fs().find(root))


def _same(local: str, remote: str, local_root: Path, url: str) -> None:
    """Two command outputs that differ only where they name their store."""
    assert local.replace(str(local_root), "STORE") == remote.replace(url, "STORE")


def _ok(*args: object) -> str:
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return result.output


# -- a URL is a URL --------------------------------------------------------------------------


def test_a_store_url_stays_a_url_and_makes_no_local_folder(s3_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store(s3_store)
    assert is_remote(store.root) and str(store.root) == s3_store
    assert str(store.run_dir("a")) == f"{s3_store}/a"
    result = cli("score", "nothing", "--store", s3_store)
    assert result.exit_code == 2
    assert f"the store {s3_store} holds no runs" in result.output
    assert list(tmp_path.iterdir()) == []  # no folder named "s3:"


def test_a_store_url_with_credentials_is_refused_without_showing_them():
    with pytest.raises(InputError) as caught:
        Store("s3://AKIAEXAMPLE:wJalrXUtnFEMIK7MDENGbPxRfiCY@bucket/traces")
    assert "wJalrXUtnFEMIK7MDENGbPxRfiCY" not in str(caught.value) + str(caught.value.hint)
    assert "AWS_PROFILE" in str(caught.value.hint)


# -- every command, the numbers of a local store --------------------------------------------


def test_score_gives_the_numbers_and_files_of_a_local_store(s3_sim_copy, sim_copy):
    url, run_id = s3_sim_copy
    root, _ = sim_copy
    local = _ok("score", run_id, "--format", "json", "--store", root)
    remote = _ok("score", run_id, "--format", "json", "--store", url)
    # (the audit record holds the files' versions, an object's ETag; the summary's sha256 is
    # of it too)
    drop = ("scored_at", "scores_file", "dashboard_file", "audit", "summary_sha256")
    strip = [{k: v for k, v in json.loads(out).items() if k not in drop} for out in (local, remote)]
    assert strip[0] == strip[1]
    assert (
        json.loads(remote)["audit"]["inputs_sha256"] == json.loads(local)["audit"]["inputs_sha256"]
    )
    keys = _keys(url)
    for name in ("scores.parquet", "pairs.parquet", "summary.json"):
        assert f"{run_id}/scores/spec/{name}" in keys
    assert not [key for key in keys if key.endswith(".tmp")]
    # the stored scores read back through the views, as locally
    query = "select count(*), sum(tsa), sum(args_invalid) from scores"
    _same(_ok("sql", query, "--store", root), _ok("sql", query, "--store", url), root, url)


@pytest.mark.slow  # (about 3 s under the suite's load)
def test_ray_tasks_find_a_run_on_s3_at_its_url(s3_sim_copy, sim_copy, monkeypatch):
    # a task was given the run's folder as a local path (s3:/bucket/...), and every scoring
    # with --engine ray of a store on object storage failed: "deleted by another process"
    url, run_id = s3_sim_copy
    root, _ = sim_copy

    @contextlib.contextmanager
    def joined(address: str | None) -> Iterator[Any]:
        yield ScorersHere()

    monkeypatch.setattr(score_module, "ray_session", joined)
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 3)
    on_ray = score_run(Store(url), run_id, engine="ray", write=False)
    here = score_run(Store(root), run_id, write=False)
    assert on_ray.summary["n_samples"] == here.summary["n_samples"] == N_SAMPLES
    assert on_ray.scores.equals(here.scores)


def test_sql_reads_the_views_and_the_run_files_and_nothing_else(s3_sim_copy, sim_copy):
    url, run_id = s3_sim_copy
    root, _ = sim_copy
    query = (
        "select (select count(*) from samples where status = 'ok') as ok, "
        "(select sum(length(message)) from messages where type = 'ai') as ai_text, "
        "(select count(*) from tool_calls where name = 'add_numbers') as adds, "
        "(select string_agg(status || recorded, ',') from runs) as runs, "
        f"(select count(*) from read_parquet('{run_id}/messages.parquet')) as messages"
    )
    _same(_ok("sql", query, "--store", root), _ok("sql", query, "--store", url), root, url)
    # the sandbox holds on object storage too: another object of the bucket is not read
    bucket = url.removeprefix("s3://").split("/")[0]
    _fs().pipe_file(f"{bucket}/elsewhere.csv", b"a\n1\n")
    result = cli("sql", f"select * from read_csv('s3://{bucket}/elsewhere.csv')", "--store", url)
    assert result.exit_code == 2
    assert "disabled by configuration" in result.output


def test_a_glob_in_sql_reads_a_runs_files_not_its_folders(s3_store):
    """fsspec's glob gave a run's scores/ and evaluations/ folders too, which DuckDB opened as
    files: `sql "select * from read_blob('r1/*')"` failed with "query failed: Traceback (most
    recent call last): ...". It reads the files, as on a folder."""
    _ok("record", "--model", "sim:seed=3,latency=0", "--run-id", "r1", "--limit", "2", "--quiet",
        "--store", s3_store)  # fmt: skip
    _ok("score", "r1", "--store", s3_store)

    def names(pattern: str) -> list[str]:
        query = f"select filename from read_blob('{pattern}') order by filename"
        rows = json.loads(_ok("sql", query, "--format", "json", "--store", s3_store))
        return [row["filename"].removeprefix(f"{s3_store}/r1/") for row in rows]

    assert names("r1/*") == ["dataset.jsonl", "manifest.json", "messages.parquet",
                             "samples.parquet"]  # fmt: skip
    assert {"scores/spec/summary.json", "scores/spec/scores.parquet"} <= set(names("r1/**"))
    assert not [name for name in names("r1/**") if name in ("scores", "evaluations")]
    # a folder named as a file: the exception the traceback ends in, not its first line
    result = cli("sql", "select * from read_blob('r1/scores')", "--store", s3_store)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        "Error: query failed: IsADirectoryError (raised in s3fs/core.py, modified)"
    )


def test_duckdb_reads_the_store_through_fsspec_and_installs_no_extension(s3_sim_copy):
    from tcbreplay._store.views import connect

    url, _ = s3_sim_copy
    con = connect(Store(url))
    try:
        assert con.execute("select count(*) from samples").fetchone() == (N_SAMPLES,)
        assert "s3" in con.list_filesystems()
        settings = con.execute(
            "select current_setting('autoinstall_known_extensions'), "
            "current_setting('autoload_known_extensions')"
        ).fetchone()
        assert settings == (False, False)
    finally:
        con.close()


def test_duckdb_reads_exactly_the_byte_ranges_it_asks_for(s3_sim_copy):
    url, run_id = s3_sim_copy
    fs = objects.reader_fs(objects.fs_path(Store(url).root)[0])
    fetched: list[int] = []
    with fs.open(f"{url.removeprefix('s3://')}/{run_id}/messages.parquet", "rb") as f:
        fetch = f.cache.fetcher
        f.cache.fetcher = lambda start, end: fetched.append(end - start) or fetch(start, end)
        f.seek(1000)
        assert len(f.read(100)) == 100
    assert fetched == [100]  # not a read-ahead block (50 MB, or the rest of the file)


@pytest.mark.slow  # (2 s)
def test_duckdb_asks_a_files_size_once_per_connection(s3_sim_copy, monkeypatch):
    """DuckDB opens a file again for every scan; the reader asks S3 for its details once (one
    HEAD), and a reader made later (the next connection) asks again."""
    url, run_id = s3_sim_copy
    asked = count_details_asked(monkeypatch)
    path = f"{url.removeprefix('s3://')}/{run_id}/messages.parquet"
    fs = objects.reader_fs(objects.fs_path(Store(url).root)[0])
    sizes = []
    for _ in range(3):
        with fs.open(path, "rb") as f:
            sizes.append(f.size)
    assert fs.exists(path) and fs.isfile(path) and fs.size(path) == sizes[0]
    assert len(asked) == 1 and sizes == [sizes[0]] * 3
    assert objects.reader_fs(objects.fs_path(Store(url).root)[0]).size(path) == sizes[0]
    assert len(asked) == 2
    with pytest.raises(FileNotFoundError):  # an absence is asked again
        fs.info(path + ".absent")


def test_the_age_of_a_lock_is_one_head_of_it(s3_store, monkeypatch):
    """written_ago asked the lock's details twice (its time, then its ETag): two HEADs where
    one answers both, on every look at a lease."""
    asked = count_details_asked(monkeypatch)
    s3fs.S3FileSystem.clear_instance_cache()  # (a filesystem made before binds the real one)
    path = Store(s3_store).root / "r" / "writer.lock"
    objects.put_bytes(path, b"{}")
    for store_clock, heads in ((False, 1), (True, 2)):  # (and the clock probe's, once)
        asked.clear()
        age, etag = lock_clock.written_ago(path, store_clock=store_clock)
        assert etag.strip('"') and -60 < age < 60
        assert len(asked) == heads, asked
        assert asked.count(asked[0]) == 1


def test_a_files_footer_is_read_once_per_version(s3_store, monkeypatch):
    """A command asks a file's schema and row counts several times: its footer is read once
    per version of the object (one HEAD each time, to know the version), and a file put again
    at the same key is read anew."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tcbreplay._store import parquet

    def put(rows: int) -> None:
        sink = io.BytesIO()
        pq.write_table(pa.table({"x": list(range(rows))}), sink)
        objects.put_bytes(path, sink.getvalue())

    read: list[object] = []
    real = pq.read_metadata
    monkeypatch.setattr(pq, "read_metadata", lambda f, *a, **k: read.append(f) or real(f, *a, **k))
    asked = count_details_asked(monkeypatch)
    s3fs.S3FileSystem.clear_instance_cache()  # (a filesystem made before binds the real one)
    path = Store(s3_store).root / "r" / "samples.parquet"
    put(3)
    asked.clear()
    assert [parquet.read_metadata(path).num_rows for _ in range(3)] == [3, 3, 3]
    assert parquet.read_schema(path).names == ["x"]
    assert len(read) == 1 and len(asked) == 4
    put(5)  # another version, at the same key
    assert parquet.read_metadata(path).num_rows == 5 and len(read) == 2
    with pytest.raises(FileNotFoundError):
        parquet.read_metadata(path.parent / "messages.parquet")


@pytest.mark.slow  # (about 4 s under the suite's load)
def test_an_uploaded_run_is_read_whole_by_its_first_scoring_only(s3_sim_copy, monkeypatch):
    """Uploaded objects are newer than the manifest says: the first scoring hashes them
    (downloads them whole), the next takes the sha256 recorded for that version (ETag)."""
    from tcbreplay._score import audit_record

    url, run_id = s3_sim_copy
    hashed: list[str] = []
    real = audit_record.sha256_file
    monkeypatch.setattr(
        audit_record, "sha256_file", lambda path: hashed.append(path.name) or real(path)
    )
    first = json.loads(_ok("score", run_id, "--format", "json", "--store", url))["audit"]
    etag = _fs().info(f"{url.removeprefix('s3://')}/{run_id}/messages.parquet")["ETag"]
    assert first["inputs_seen"]["messages.parquet"]["etag"] == etag
    hashed.clear()
    again = json.loads(_ok("score", run_id, "--format", "json", "--store", url))["audit"]
    assert hashed == [] and again == first
    assert _ok("audit", "verify", run_id, "--store", url).startswith("verified")


# (four commands over S3, each as on a local store: about 10 s, in make test: every command
# works on s3:// there)
def test_report_diff_audit_and_export_as_on_a_local_store(s3_sim_copy, sim_copy, tmp_path):
    url, run_id = s3_sim_copy
    root, _ = sim_copy
    for store in (root, url):
        _ok("score", run_id, "--store", store)
    for args in (["diff", run_id, run_id], ["audit", "verify", run_id]):
        _same(_ok(*args, "--store", root), _ok(*args, "--store", url), root, url)
    for name, store in (("local", root), ("s3", url)):
        for fmt in ("langchain", "openai", "otlp", "tables"):  # (otlp crashed on s3)
            _ok("export", run_id, "-o", tmp_path / name / fmt, "--format", fmt, "--store", store)
        _ok("report", run_id, "-o", tmp_path / f"{name}.html", "--store", store)
    local = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.*"))
    assert len(local) == 15  # four files of each traces form, three of the tables
    for path in local:
        assert (tmp_path / "local" / path).read_bytes() == (tmp_path / "s3" / path).read_bytes()
    assert (tmp_path / "s3.html").stat().st_size > 10_000


def test_import_and_validity_as_on_a_local_store(s3_store, tmp_path):
    import_tau_bench(tmp_path / "traces")
    import_tau_bench(s3_store)  # type: ignore[arg-type]
    assert "tau/manifest.json" in _keys(s3_store)
    args = ["validity", "tau", "--bootstrap", "200"]
    _same(_ok(*args, "--store", tmp_path / "traces"), _ok(*args, "--store", s3_store),
          tmp_path / "traces", s3_store)  # fmt: skip


def test_record_and_replay_on_s3_score_as_locally(s3_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    local = tmp_path / "traces"
    for store in (local, s3_store):
        _ok("record", "--model", "sim:seed=3", "--run-id", "r", "--limit", "12", "--quiet",
            "--store", store)  # fmt: skip
        _ok("replay", "r", "--run-id", "again", "--quiet", "--store", store)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]  # nothing named "s3:"
    keys = _keys(s3_store)
    assert {"r/manifest.json", "r/samples.parquet", "r/messages.parquet", "r/dataset.jsonl",
            "again/manifest.json", "again/samples.parquet"} <= set(keys)  # fmt: skip
    assert not [k for k in keys if "/journal/" in k or k.endswith(("writer.lock", ".tmp"))]
    # the replay's dataset: its parent's file, copied on the store as it is
    bucket = s3_store.removeprefix("s3://")
    copied = _fs().cat_file(f"{bucket}/again/dataset.jsonl")
    assert copied == _fs().cat_file(f"{bucket}/r/dataset.jsonl")
    assert copied == (local / "again" / "dataset.jsonl").read_bytes()
    for run_id in ("r", "again"):
        scores = [
            score_run(Store(s), run_id, write=False).scores.drop("run_id").sort("sample_index")
            for s in (local, s3_store)
        ]
        assert scores[0].height == 12 and scores[0].equals(scores[1])
    manifest = json.loads(_fs().cat_file(f"{s3_store.removeprefix('s3://')}/r/manifest.json"))
    local_manifest = json.loads((local / "r" / "manifest.json").read_text())
    assert manifest["status"] == local_manifest["status"] == "partial"  # 12 of the dataset
    assert manifest["totals"]["recorded"] == local_manifest["totals"]["recorded"] == 12
    assert S3_SECRET not in json.dumps(manifest)


@pytest.mark.slow  # (about 3 s under the suite's load)
def test_record_overwrite_replaces_the_run_on_s3(s3_store):
    args = ["record", "--model", "sim:seed=3", "--run-id", "o", "--limit", "5", "--quiet"]
    _ok(*args, "--store", s3_store)
    _ok("score", "o", "--store", s3_store)
    assert "o/scores/spec/summary.json" in _keys(s3_store)
    _ok(*args, "--overwrite", "--store", s3_store)
    keys = _keys(s3_store)
    assert "o/manifest.json" in keys
    assert not [key for key in keys if "/scores/" in key]  # the old run's scores went with it


@pytest.mark.slow  # (about 4 s)
def test_a_journal_delete_refused_is_one_line_and_the_rerun_finishes(s3_store, monkeypatch):
    """A bucket that refuses DeleteObject (a policy, or S3's 503 SlowDown) made record's
    fold of the journal end in a traceback; the run, kept, is finished by a rerun."""
    remove = objects.remove_object

    def refused(path):
        if path.parent.name == "journal":  # (journal/<n>.jsonl)
            raise PermissionError("Access Denied")
        remove(path)

    args = ["record", "--model", "sim:seed=3,latency=0", "--run-id", "nd", "--limit", "6",
            "--quiet", "--store", s3_store]  # fmt: skip
    monkeypatch.setattr(objects, "remove_object", refused)
    result = cli(*args)
    assert result.exit_code == 1, result.output
    (error, hint) = result.output.strip().splitlines()[-2:]
    assert error.startswith(f"Error: {s3_store}/nd/journal") and "access denied" in error, error
    assert hint.startswith("Hint: ")
    assert "Traceback" not in result.output
    monkeypatch.setattr(objects, "remove_object", remove)
    _ok(*args)  # (the first released its lock as it failed: the rerun folds the journal)
    rows = json.loads(_ok("sql", "select count(*) as n, count(distinct sample_id) as d from "
                          "samples where run_id = 'nd'", "--format", "json", "--store",
                          s3_store))  # fmt: skip
    assert rows == [{"n": 6, "d": 6}]


def test_removing_a_run_removes_its_own_objects_and_no_others(s3_server):
    # fsspec's rm(recursive=True) took the run's place for a glob pattern: removing
    # zz*/victim removed zz1/victim and zz2/victim, other stores' runs
    bucket = new_bucket()
    others = ["zz1/victim/manifest.json", "zz2/victim/manifest.json",
              "zz*/victim2/manifest.json", "zz*/victimX"]  # fmt: skip
    keys = [*others, "zz*/victim/manifest.json", "zz*/victim/scores/spec/summary.json"]
    for key in keys:
        _fs().pipe_file(f"{bucket}/{key}", b"{}")
    run_dir = UPath(f"s3://{bucket}/zz*/victim", use_listings_cache=False)
    objects.remove_tree(run_dir)
    assert _keys(f"s3://{bucket}") == sorted(others)
    objects.remove_tree(run_dir)  # nothing left: nothing to do
    assert _keys(f"s3://{bucket}") == sorted(others)


@pytest.mark.slow  # (about 2 s under the suite's load)
def test_a_store_url_holding_a_wildcard_is_refused_and_other_stores_keep_their_runs(s3_server):
    # record --store 's3://b/zz*' --overwrite deleted the run in zz1 and in zz2
    bucket = new_bucket()
    record = ["record", "--model", "sim:seed=3,latency=0", "--run-id", "victim", "--limit", "3",
              "--quiet"]  # fmt: skip
    for store in ("zz1", "zz2"):
        _ok(*record, "--store", f"s3://{bucket}/{store}")
    before = {key: _fs().cat_file(f"{bucket}/{key}") for key in _keys(f"s3://{bucket}")}
    assert len(before) >= 8
    for store, char in (("zz*", "*"), ("zz?", "?"), ("zz[12]", "["), ("zz]", "]")):
        url = f"s3://{bucket}/{store}"
        for command in ([*record], [*record, "--overwrite"], ["runs"], ["score", "victim"]):
            result = cli(*command, "--store", url)
            assert result.exit_code == 2, result.output
            assert result.stderr.splitlines()[0] == (
                f"Error: --store {url}: {char!r} is a wildcard to the libraries that read and "
                "delete the store, which would take other stores' runs for its own"
            )
            assert "Traceback" not in result.output
    after = {key: _fs().cat_file(f"{bucket}/{key}") for key in _keys(f"s3://{bucket}")}
    assert after == before  # every object of zz1 and zz2 as it was, none under zz*


def test_record_shard_on_s3_is_refused_in_one_line(s3_store):
    result = cli("record", "--model", "sim", "--run-id", "sh", "--limit", "2", "--shard", "1/2",
                 "--store", s3_store, "--quiet")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--shard: a store on object storage takes one writer per run" in result.stderr
    assert "Traceback" not in result.output
    assert not [key for key in _keys(s3_store) if key.startswith("sh/")]


def test_shards_on_s3_are_refused_by_the_library_before_anything_is_written(s3_store):
    # record_run(shard=...) made the run, then its shard was refused: a run left
    # "recording" with a shard_selection that no shard could ever clear
    store = Store(s3_store)
    inputs, model = load_inputs("tool-call"), parse_model("sim")
    for how in ({"shard": (1, 2)}, {"engine": "ray"}):
        with pytest.raises(InputError, match="a store on object storage takes one writer per run"):
            record_run(inputs, model, store, run_id="sh", limit=2, **how)
        assert not _keys(s3_store)


@pytest.mark.slow  # (about 2 s under the suite's load)
def test_a_resume_refused_on_s3_leaves_the_run_as_it_was(s3_store):
    # the checks and the claim of the run are one step under its lock there too
    args = ["record", "--model", "sim", "--run-id", "t", "--quiet", "--store", s3_store]
    _ok(*args, "--trials", "2", "--limit", "3")
    before = {key: _fs().cat_file(f"{s3_store.removeprefix('s3://')}/{key}") for key in
              _keys(s3_store)}  # fmt: skip
    result = cli(*args, "--trials", "1")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: --trials 1: run 't' holds trials 0 to 1")
    after = {key: _fs().cat_file(f"{s3_store.removeprefix('s3://')}/{key}") for key in
             _keys(s3_store)}  # fmt: skip
    assert after == before


# -- the guarantees ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_scoring_cut_short_is_absent_never_mixed(s3_sim_copy, monkeypatch):
    url, run_id = s3_sim_copy
    store = Store(url)
    score_run(store, run_id)
    summary = f"{run_id}/scores/spec/summary.json"
    assert summary in _keys(url)
    upload = objects.upload

    def fails_at_pairs(local: Path, path: Path) -> None:
        if path.name == "pairs.parquet":
            raise OSError("connection reset by the store")
        upload(local, path)

    monkeypatch.setattr(objects, "upload", fails_at_pairs)
    # (written again, not read as stored: as a scoring of a run resumed since is)
    monkeypatch.setattr(score_module, "stored_scoring", lambda *args: None)
    with pytest.raises(StoreError, match=r"pairs\.parquet: cannot write: connection reset"):
        score_run(store, run_id)
    # no summary beside new scores: the scoring is absent (not one in a mix of two)
    assert summary not in _keys(url)
    assert cli("sql", "select count(*) from scores", "--store", url).output.count(" 0") == 1
    monkeypatch.setattr(objects, "upload", upload)
    score_run(store, run_id)
    assert summary in _keys(url)


def test_two_writers_of_a_run_are_refused(s3_sim_copy):
    url, run_id = s3_sim_copy
    store = Store(url)
    first = store.resume_run(run_id)
    try:
        with pytest.raises(RunLockedError, match=r"is being written by pid \d+ on "):
            store.resume_run(run_id)
        result = cli("record", "--resume", run_id, "--store", url)
        assert result.exit_code == 1
        assert "is being written by pid" in result.output
        rows = cli("sql", "select status from runs", "--format", "csv", "--store", url)
        assert rows.output.splitlines()[1] == "complete"
    finally:
        first.close()
    assert f"{run_id}/writer.lock" not in _keys(url)  # released: removed
    store.resume_run(run_id).close()


def test_of_two_writers_creating_the_lock_at_once_one_wins(s3_store):
    path = Store(s3_store).root / "race" / "writer.lock"
    results: list[object] = []
    barrier = threading.Barrier(4)

    def take() -> None:
        barrier.wait()
        try:
            results.append(LeaseLock.take(path, "run 'race'"))
        except RunLockedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = [r for r in results if isinstance(r, LeaseLock)]
    assert len(held) == 1 and len(results) == 4
    held[0].release()


def test_a_lock_released_and_taken_again_while_looked_at_is_refused_in_one_line(
    s3_store, monkeypatch
):
    """Between the taker's create refused (412) and its look at the holder, the lock was
    released (the look finds none) and taken again by a third process: its create again
    refused escaped as PreconditionFailed, a traceback."""
    path = Store(s3_store).root / "run" / "writer.lock"
    third = LeaseLock.take(path, "run 'run'")
    try:

        def released(*args, **kwargs):
            raise FileNotFoundError(str(path))

        monkeypatch.setattr(locks, "written_ago", released)
        with pytest.raises(RunLockedError, match="taken by another process at the same moment"):
            LeaseLock.take(path, "run 'run'")
    finally:
        third.release()


@pytest.mark.slow
def test_a_dead_writers_lock_is_taken_over_after_its_lease(s3_store, monkeypatch):
    monkeypatch.setattr(locks, "RENEW_S", 0.2)
    path = Store(s3_store).root / "run" / "writer.lock"
    dead = LeaseLock.take(path, "run 'run'")
    dead.forget()  # it renews no more, as if its process had died
    # within the default lease however slow the machine is (a 1 s lease raced the clock:
    # the object's time has whole seconds, and a loaded machine took longer than that)
    with pytest.raises(RunLockedError, match=r"renewed \d+ s ago"):
        LeaseLock.take(path, "run 'run'")
    monkeypatch.setattr(locks, "LEASE_S", 1.0)  # the lease is read at each use
    wait_for(lambda: lease_holder(path) is None, timeout=30)
    alive = LeaseLock.take(path, "run 'run'")
    # the first holder, back from its pause, finds its lock taken and writes nothing more
    journal = ChunkJournal(path.parent / "journal", dead)
    monkeypatch.setattr(dead, "lost", RunLockedError("taken over"))
    journal.write('{"line": 1}\n')
    with pytest.raises(RunLockedError, match="taken over"):
        journal.close()
    assert chunk_numbers(path.parent / "journal") == []
    wait_for(lambda: lease_holder(path) is not None, timeout=5)
    alive.release()
    assert lease_holder(path) is None


@pytest.mark.slow
def test_a_writer_back_from_a_pause_past_its_lease_writes_no_batch(s3_store, monkeypatch):
    """A writer paused (SIGSTOP) past its lease, its lock taken over meanwhile, wrote one more
    batch when it came back, before its renewal found the lock gone: the batch number the
    new holder wanted next was taken, and the rightful writer was the one stopped."""
    monkeypatch.setattr(locks, "RENEW_S", 0.2)
    path = Store(s3_store).root / "paused" / "writer.lock"
    paused = LeaseLock.take(path, "run 'paused'")
    paused.forget()  # its renewals stop, as a paused process's do
    monkeypatch.setattr(locks, "LEASE_S", 1.0)
    wait_for(lambda: lease_holder(path) is None, timeout=30)
    taker = LeaseLock.take(path, "run 'paused'")
    journal = ChunkJournal(path.parent / "journal", paused)  # back: its journal writes
    journal.write('{"line": 1}\n')
    with pytest.raises(RunLockedError, match="another process took this lock over"):
        journal.close()
    assert chunk_numbers(path.parent / "journal") == []
    taker.release()


@pytest.mark.slow  # (two recordings or a scoring on the local S3 server: 2-3 s)
def test_a_writer_that_lost_its_lock_during_its_fold_writes_no_data_file(s3_store, monkeypatch):
    """A writer paused inside its fold past its lease checked its lock as the fold began and
    at the manifest only: back, it wrote its samples and messages files over those of the
    writer that took the run over (whose complete run then read as A's rows, and was refused
    as damaged). It checks before each file now, and writes none."""
    from tcbreplay._store import journal

    store = Store(s3_store)
    model = parse_model("sim:seed=6")
    record_run(load_inputs("tool-call"), model, store, run_id="f", limit=6)  # fmt: skip
    run = store.run_dir("f")
    before = {name: objects.read_bytes(run / name) for name in ("samples.parquet",
                                                                "messages.parquet")}  # fmt: skip
    real = journal.sample_rows

    def taken_over(records):  # the fold has begun: another writer takes the lock meanwhile
        lock = run / "writer.lock"
        objects.replace_object(lock, b"pid 1 on elsewhere", lock_clock.written_ago(lock)[1])
        monkeypatch.setattr(locks, "RENEW_S", 0.0)  # as if paused: its renewal is overdue
        return real(records)

    monkeypatch.setattr(journal, "sample_rows", taken_over)
    with pytest.raises(RunLockedError, match="another process took this lock over"):
        record_run(load_inputs("tool-call"), model, store, run_id="f", limit=10)  # fmt: skip
    for name, data in before.items():
        assert objects.read_bytes(run / name) == data, name
    assert chunk_numbers(run / "journal")  # its four samples wait in the journal


@pytest.mark.slow  # (two recordings or a scoring on the local S3 server: 2-3 s)
def test_a_scoring_that_lost_its_lock_puts_no_file_in_place(s3_store, monkeypatch):
    """The scores' lock was checked as it was taken only: a scoring paused past its lease
    uploaded its files over those of the scoring that took the lock over."""
    store = Store(s3_store)
    record_run(load_inputs("tool-call"), parse_model("sim:seed=2"), store, run_id="sc", limit=5)
    folder = store.run_dir("sc") / "scores"
    real = score_module._summary

    def taken_over(*args, **kwargs):  # the files are staged: another scoring takes the lock
        lock = folder / "writer.lock"
        objects.replace_object(lock, b"pid 1 on elsewhere", lock_clock.written_ago(lock)[1])
        monkeypatch.setattr(locks, "RENEW_S", 0.0)  # as if paused: its renewal is overdue
        return real(*args, **kwargs)

    monkeypatch.setattr(score_module, "_summary", taken_over)
    with pytest.raises(RunLockedError, match="another process took this lock over"):
        score_run(store, "sc")
    assert not objects.exists(folder / "spec" / "summary.json")
    assert not objects.exists(folder / "spec" / "scores.parquet")


@pytest.mark.parametrize("skew", [45.0, -3600.0])
def test_a_lock_is_judged_by_the_stores_clock_not_this_machines(s3_store, monkeypatch, skew):
    """A lock's age was this machine's time less the store's time of its last renewal: a
    clock 45 s ahead took a live writer's lock over (and that writer lost its run), one an
    hour behind waited an hour for a dead writer's."""
    monkeypatch.setattr(locks, "RENEW_S", 0.2)
    path = Store(s3_store).root / f"skew{int(skew)}" / "writer.lock"
    alive = LeaseLock.take(path, "run 'skew'")
    real = lock_clock.time.time
    monkeypatch.setattr(lock_clock.time, "time", lambda: real() + skew)
    if skew > 0:
        with pytest.raises(RunLockedError, match=r"renewed \d+ s ago"):
            LeaseLock.take(path, "run 'skew'")
        alive.release()
        return
    alive.forget()  # it renews no more, as if its process had died
    monkeypatch.setattr(locks, "LEASE_S", 1.0)
    wait_for(lambda: _taken(path), timeout=30)


def _taken(path: Path) -> bool:
    try:
        LeaseLock.take(path, "run 'skew'").release()
        return True
    except RunLockedError:
        return False


def test_a_clock_probe_whose_removal_failed_is_removed_later_and_blocks_no_run(
    s3_store, monkeypatch
):
    """The object written beside a lock to read the store's clock, when its removal failed (a
    503, a policy refusing deletes), failed the lock's taking and was left for good: and a
    run folder holding one was refused by `record` as "not a run"."""
    path = Store(s3_store).root / "p" / "writer.lock"
    holder = LeaseLock.take(path, "run 'p'")
    remove = objects.remove_object

    def refused(place: Path) -> None:
        if ".clock-" in place.name:
            raise PermissionError("Access Denied")
        remove(place)

    monkeypatch.setattr(objects, "remove_object", refused)
    with pytest.raises(RunLockedError, match="is being written by"):  # (its clock was read)
        LeaseLock.take(path, "run 'p'")
    monkeypatch.setattr(objects, "remove_object", remove)
    holder.release()
    assert len([key for key in _keys(s3_store) if ".clock-" in key]) == 1
    _ok("record", "--model", "sim", "--run-id", "p", "--limit", "1", "--quiet",
        "--store", s3_store)  # fmt: skip
    # the next process that reads the store's clock beside the lock removes it, once old
    monkeypatch.setattr(lock_clock, "OLD_PROBE_S", 0.0)
    monkeypatch.setattr(lock_clock, "_looked_beside", set())
    holder = LeaseLock.take(path, "run 'p'")
    with pytest.raises(RunLockedError):
        LeaseLock.take(path, "run 'p'")
    holder.release()
    assert not [key for key in _keys(s3_store) if ".clock-" in key]


def test_journal_batches_are_created_only_if_absent(s3_store):
    folder = Store(s3_store).root / "run" / "journal"
    first, second = ChunkJournal(folder, None), ChunkJournal(folder, None)
    first.write('{"a": 1}\n')
    first.close()
    second.write('{"b": 2}\n')
    with pytest.raises(RunLockedError, match="two processes write this run"):
        second.close()
    assert chunk_numbers(folder) == [1]
    assert (folder / chunk_name(1)).read_text() == '{"a": 1}\n'


@pytest.mark.slow
def test_kill_9_leaves_the_run_readable_and_resume_loses_nothing(s3_store, monkeypatch):
    args = ["record", "--model", "sim:seed=5,latency=0.05", "--run-id", "k", "--store", s3_store,
            "--limit", "40", "--workers", "2", "--quiet"]  # fmt: skip
    first = cli_process(*args)
    run = Store(s3_store).run_dir("k")
    wait_for(lambda: chunk_numbers(run / "journal"), timeout=60)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    kept = Store(s3_store).open_run("k").unfolded_records()
    assert 0 < kept < 40
    # readable: listed, and scoring says where the finished samples wait
    result = cli("score", "k", "--store", s3_store)
    assert result.exit_code == 1
    assert f"{count(kept, 'finished sample')} wait" in result.output
    # its lock, no longer renewed, is taken over once its lease has run out
    monkeypatch.setattr(locks, "LEASE_S", 0.5)
    wait_for(lambda: lease_holder(run / "writer.lock") is None, timeout=30)
    model = parse_model("sim:seed=5,latency=0.05")
    summary = record_run(load_inputs("tool-call"), model, Store(s3_store), run_id="k", limit=40,
                         options=RecordOptions(workers=8))  # fmt: skip
    assert summary.recorded == 40 and summary.status == "partial"  # 40 of the dataset
    assert not chunk_numbers(run / "journal")
    clean = Store(s3_store)
    record_run(load_inputs("tool-call"), model, clean, run_id="clean", limit=40,
               options=RecordOptions(workers=8))  # fmt: skip
    scores = [score_run(clean, r, write=False).scores.drop("run_id") for r in ("k", "clean")]
    assert scores[0].sort("sample_index").equals(scores[1].sort("sample_index"))


class Killed(BaseException):
    """kill -9 at a step: nothing after it runs (no handler catches it as an error)."""


@pytest.mark.slow  # (about 4 s under the suite's load)
def test_a_fold_killed_before_removing_its_batches_leaves_none_said_to_wait(s3_store, monkeypatch):
    # killed once both Parquet files were written, before the journal's batches were
    # removed and the manifest updated: the batches hold samples the files hold already
    from tcbreplay._store import journal as journal_mod

    def killed(paths: list[Path]) -> None:
        raise Killed

    model = parse_model("sim:seed=5")
    monkeypatch.setattr(journal_mod, "_remove", killed)
    with pytest.raises(Killed):
        record_run(load_inputs("tool-call"), model, Store(s3_store), run_id="f", limit=6)
    run = Store(s3_store).open_run("f")
    assert run.has_data() and chunk_numbers(run.dir / "journal")
    assert run.unfolded_records() == 0
    result = cli("score", "f", "--store", s3_store, "--allow-incomplete")
    assert result.exit_code == 0, result.output
    assert "wait in" not in result.output
    # a resumed recording folds them again, each sample once
    monkeypatch.undo()
    summary = record_run(load_inputs("tool-call"), model, Store(s3_store), run_id="f", limit=6)
    assert summary.recorded == 6 and not chunk_numbers(run.dir / "journal")
    assert score_run(Store(s3_store), "f", write=False).scores.height == 6


# -- credentials -----------------------------------------------------------------------------


def test_a_failure_of_the_store_is_one_line_with_its_secret_redacted(s3_store, monkeypatch):
    async def leaky(*args: object, **kwargs: object) -> object:
        # a service quoting the secret it was sent (S3 does not; a proxy might)
        raise PermissionError(f"Access Denied for secret {os.environ['AWS_SECRET_ACCESS_KEY']}")

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", leaky)
    result = cli("score", "x", "--store", s3_store)
    assert result.exit_code == 1
    assert S3_SECRET not in result.output
    assert result.output.splitlines()[0].startswith(f"Error: {s3_store}: access denied")
    assert "[redacted]" in result.output and "AWS_PROFILE" in result.output


@pytest.mark.parametrize(
    ("script", "said"),
    [
        # all it wrote to stderr was echoed, where redaction knows only secrets' names and forms
        ("echo 'refresh failed: token=tok-Wq7Lm2Xp9Rb4Kd8N' >&2\n"
         "echo 'the password of the vault is Hq3Vn8Tz1Lc6' >&2\nexit 1\n",
         "failed (refresh failed: token=[redacted])"),
        # botocore's JSONDecodeError, reading what the process wrote, was a traceback
        ("echo 'key tok-Wq7Lm2Xp9Rb4Kd8N'\n",
         "wrote no JSON credentials (Expecting value: line 1 column 1 (char 0))"),
    ],
    ids=["failed", "no JSON"],
)  # fmt: skip
def test_a_failed_credential_process_is_one_line_quoting_nothing_secret(
    s3_server, tmp_path, monkeypatch, request, script, said
):
    process = tmp_path / "credentials.sh"
    process.write_text("#!/bin/sh\n" + script)
    process.chmod(0o755)
    config = tmp_path / "config"
    config.write_text(f"[profile team]\ncredential_process = {process}\n")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "team")
    s3fs.S3FileSystem.clear_instance_cache()  # (a client of its own, with that profile)
    request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)
    for command in (["runs"], ["record", "--model", "sim", "--limit", "1", "--quiet"]):
        result = cli(*command, "--store", "s3://bkt/team")
        assert result.exit_code == 1, result.output
        (error, hint) = result.stderr.strip().splitlines()
        assert error == f"Error: s3://bkt/team: the AWS profile's credential_process {said}"
        assert hint.startswith("Hint: run the profile's credential_process yourself")
        assert "Wq7Lm2Xp9Rb4Kd8N" not in result.output and "Hq3Vn8Tz1Lc6" not in result.output


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
@pytest.mark.parametrize("command", ["record", "import"])
def test_a_missing_bucket_is_one_line_naming_it(s3_server, command, scheme):
    # record and import said "cannot write: The specified bucket does not exist", with the
    # hint to fix the store's permissions; given s3a://, the hint said s3://
    url = f"{scheme}://tcbreplay-no-such-bucket/traces"
    if command == "record":
        args = ["record", "--model", "sim", "--run-id", "m", "--limit", "1", "--quiet"]
    else:
        args = ["import", "--format", "tau-bench", "--traces",
                TAU_BENCH / "gpt-4o-airline-sample.json", "--tools",
                TAU_BENCH / "airline-tools.json", "--run-id", "m"]  # fmt: skip
    result = cli(*args, "--store", url)
    assert result.exit_code == 1, result.output
    (error, hint) = result.stderr.strip().splitlines()
    assert error == (
        f"Error: {url}/m/writer.lock: cannot write: no such bucket (tcbreplay-no-such-bucket)"
    )
    assert hint == (
        "Hint: make it with the cloud's own tools, or give --store "
        f"{scheme}://BUCKET/PREFIX of one that exists"
    )


def test_a_slow_down_on_the_locks_clock_is_said_as_such_not_as_permissions(
    s3_store, monkeypatch, request
):
    """S3's 503 SlowDown, answered to the object that reads the store's clock beside a lock,
    said "cannot write: [Errno 16] Please reduce your request rate." with the hint to fix
    the store's permissions. Each request is tried again (botocore, then s3fs) before it is
    said, and the hint says so."""
    from aiobotocore.awsrequest import AioAWSResponse
    from aiobotocore.endpoint import AioEndpoint
    from botocore.awsrequest import HeadersDict

    bucket_prefix = s3_store.removeprefix("s3://")
    _fs().pipe_file(f"{bucket_prefix}/r/writer.lock", b"pid 1 on elsewhere")  # (not renewed)

    class Body:
        async def read(self) -> bytes:
            return (b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate."
                    b"</Message></Error>")  # fmt: skip

    sent: list[str] = []
    real = AioEndpoint._send

    async def slow_down(self: Any, sending: Any) -> Any:
        if sending.method == "PUT" and ".clock-" in sending.url:
            sent.append(sending.url)
            headers = HeadersDict({"Content-Type": "application/xml"})
            return AioAWSResponse(sending.url, 503, headers, Body())
        return await real(self, sending)

    monkeypatch.setattr(AioEndpoint, "_send", slow_down)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    monkeypatch.setattr(s3_limits, "S3FS_RETRIES", 1)
    s3fs.S3FileSystem.clear_instance_cache()  # (a client of its own, made with those)
    request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)
    result = cli("record", "--model", "sim", "--run-id", "r", "--limit", "1", "--quiet",
                 "--store", s3_store)  # fmt: skip
    assert result.exit_code == 1, result.output
    (error, hint) = result.stderr.strip().splitlines()
    assert error == (
        f"Error: {s3_store}/r/writer.lock: cannot write: the store asked to slow down: "
        "503 SlowDown (Please reduce your request rate.)"
    )
    assert hint == (
        "Hint: a passing failure: each request was tried 2 times (AWS_MAX_ATTEMPTS); run the "
        "command again in a moment"
    )
    assert len(sent) == 2  # botocore's two attempts, as the hint says


def test_a_head_answered_without_a_content_length_is_one_line(s3_store, monkeypatch):
    """An S3-compatible server (or a proxy) answering HEAD without Content-Length crashed every
    command that read the store: a traceback ending in "KeyError: 'ContentLength'"."""
    from aiobotocore.endpoint import AioEndpoint

    _ok("record", "--model", "sim:seed=3,latency=0", "--run-id", "h", "--limit", "2", "--quiet",
        "--store", s3_store)  # fmt: skip
    real = AioEndpoint._send

    async def without_length(self: Any, sending: Any) -> Any:
        answer = await real(self, sending)
        if sending.method == "HEAD":
            answer.headers.pop("Content-Length", None)
        return answer

    monkeypatch.setattr(AioEndpoint, "_send", without_length)
    said = (
        "the S3 server answered a HEAD request without a Content-Length (an object's size), "
        "which tcbreplay needs"
    )
    result = cli("score", "h", "--store", s3_store)
    assert result.exit_code == 1, result.output
    (error, hint) = result.stderr.strip().splitlines()
    assert error == f"Error: {s3_store}: {said}"
    assert hint.startswith("Hint: is AWS_ENDPOINT_URL_S3 an S3-compatible server")
    # a reader of every run leaves out the one it cannot read, saying why
    result = cli("runs", "--store", s3_store)
    assert result.exit_code == 0, result.output
    assert f"Warning: left out run 'h': {s3_store}/h: {said}" in result.stderr


# -- store URLs a user mistypes, and outputs that are no store ------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("s3://bucket//traces", "an empty folder name (//) in the prefix"),
        # at the end too (s3://b/p/${EMPTY}/): it was taken for s3://bucket/traces
        ("s3://bucket/traces//", "an empty folder name (//) in the prefix"),
        ("s3://bucket//", "an empty folder name (//) in the prefix"),
        ("s3://bucket/traces#frag", "the URL holds credentials or options"),
        ("s3://[bucket/traces", "not a URL tcbreplay can read"),
        # a secret holding a slash: the URL's host is then KEY:SEC
        ("s3://KEY:SEC/RET@bucket/traces", "not a URL tcbreplay can read"),
        ("s3://KEY:1234/RET@bucket/traces", "the URL holds credentials or options"),
        ("s3:/bucket/traces", "a URL of object storage takes two slashes"),
        ("S3:bucket", "a URL of object storage takes two slashes"),
        # written under keys holding "." and "..", which the readers resolved: never scored
        ("s3://bucket/x/./traces", "a '.' or '..' folder name in the prefix"),
        ("s3://bucket/a/../traces", "a '.' or '..' folder name in the prefix"),
        ("s3://bucket/..", "a '.' or '..' folder name in the prefix"),
        # percent-encoded: a key of its own to S3, decoded and resolved by DuckDB's readers
        ("s3://bucket/%2e%2e/x", "a '.' or '..' folder name in the prefix"),
        ("s3://bucket/%2E/x", "a '.' or '..' folder name in the prefix"),
        # a credential percent-encoded got past the check of one, and botocore quoted it
        ("s3://KEY%3ASEC%40bucket/traces", "its bucket name holds a character no bucket name"),
        ("s3://bucket/tab\tx", "the store's name holds a control character"),
        ("s3://bucket/new\nline", "the store's name holds a control character"),
    ],
)
def test_a_mistyped_store_url_is_refused_before_anything_is_written(
    url, says, tmp_path, monkeypatch
):
    # s3://b//p lost a recording's samples (its listing found nothing); s3:/b made a folder
    # named "s3:" here
    monkeypatch.chdir(tmp_path)
    for command in (["record", "--model", "sim", "--limit", "1", "--quiet"], ["runs"]):
        result = cli(*command, "--store", url)
        assert result.exit_code == 2, result.output
        assert says in result.stderr.splitlines()[0]
        assert not {"SEC", "RET", "1234"} & set(re.findall(r"\w+", result.output))
    assert list(tmp_path.iterdir()) == []


def test_a_scheme_in_capitals_is_the_same_store(s3_sim_copy):
    url, run_id = s3_sim_copy
    assert str(Store("S3" + url[2:]).run_dir(run_id)) == f"{url}/{run_id}"


def test_one_slash_at_the_end_is_the_same_store(s3_sim_copy):
    url, run_id = s3_sim_copy
    assert str(Store(url + "/").run_dir(run_id)) == f"{url}/{run_id}"


def test_runs_of_an_empty_store_on_s3_is_an_empty_table(s3_store):
    result = cli("runs", "--store", s3_store, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    assert "no runs to list" in result.stderr


def test_record_on_s3_exports_and_names_its_store_as_a_url(s3_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("record", "--model", "sim:seed=3", "--run-id", "e", "--limit", "4",
                 "--export-jsonl", "--store", s3_store)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"record --resume e --store {s3_store}" in result.output  # not s3:/...
    assert {"e/jsonl/samples.jsonl", "e/jsonl/messages.jsonl"} <= set(_keys(s3_store))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["export", "report"])
def test_an_output_url_is_refused_without_showing_it(s3_sim_copy, command, tmp_path, monkeypatch):
    # it was written to a local folder named "s3:", credentials and all
    monkeypatch.chdir(tmp_path)
    url, run_id = s3_sim_copy
    result = cli(command, run_id, "-o", "s3://AKIAEXAMPLE:SECRETVALUE@bucket/out", "--store", url)
    assert result.exit_code == 2, result.output
    assert "a URL (such as s3://...) is no local path" in result.stderr
    assert "SECRETVALUE" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_collect_into_s3_is_refused_before_anything_is_written(s3_store):
    result = cli("collect", "--run-id", "c", "--port", "0", "--store", s3_store)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: collect: a store on object storage cannot take")
    assert _keys(s3_store) == []


def test_reading_a_store_in_a_missing_bucket_is_one_error(s3_server):
    # sql, catalog and runs warned "no such store folder" and exited 0 (runs crashed)
    url = "s3://tcbreplay-no-such-bucket/traces"
    for command in (["sql", "select 1"], ["runs"], ["catalog"], ["score", "x"]):
        result = cli(*command, "--store", url)
        assert result.exit_code == 1, (command, result.output)
        assert result.stderr.startswith(f"Error: {url}: no such bucket (tcbreplay-no-such-bucket)")
        assert "Traceback" not in result.output


def test_an_empty_prefix_of_a_bucket_is_a_store_without_runs(s3_store):
    result = cli("sql", "select count(*) as n from runs", "--store", s3_store, "--format", "json")
    assert result.exit_code == 0, result.output
    assert "nothing is stored under this prefix yet" in result.stderr


@pytest.fixture
def silent_endpoint(monkeypatch) -> Iterator[str]:
    """An endpoint on loopback that takes connections and never answers (a stopped server),
    with the S3 client's limits cut to a second and one try."""
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                taken.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    for name, value in (("S3_CONNECT_S", 1), ("S3_READ_S", 1), ("S3_ATTEMPTS", 1),
                        ("S3FS_RETRIES", 1)):  # fmt: skip
        monkeypatch.setattr(s3_limits, name, value)
    for key, value in S3_ENVIRONMENT.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{server.getsockname()[1]}")
    try:
        yield "s3://silent-bucket/team"
    finally:
        stop.set()
        thread.join()
        for connection in taken:
            connection.close()
        server.close()


@pytest.mark.slow  # (about 3 s under the suite's load)
def test_an_endpoint_that_never_answers_is_given_up_on_in_one_line(silent_endpoint):
    """Before, botocore's limits under s3fs's own tries held `runs` for about 25 minutes on
    such an endpoint, printing nothing."""
    import time

    started = time.monotonic()
    result = cli("runs", "--store", silent_endpoint)
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith(f"Error: {silent_endpoint}: Read timeout on endpoint URL")
    assert lines[1].startswith("Hint: the store did not answer within 1 s, 1 times")
    assert "Traceback" not in result.output
    assert took < 15  # one try of each request, a second each


@pytest.mark.slow  # (about 3 s)
def test_a_run_looked_for_on_a_silent_endpoint_is_given_up_on_at_once(silent_endpoint,
                                                                      monkeypatch):  # fmt: skip
    """The look for the run's manifest failed and was taken for "no such run": the store was
    then listed, and score waited out its tries twice (5.6 minutes, not 3)."""

    def listed(self):
        raise AssertionError("the store was listed after its first request failed")

    monkeypatch.setattr(Store, "runs", listed)
    with pytest.raises(StoreError, match=r"(on|to the) endpoint URL"):
        Store(silent_endpoint).open_run("r")  # (a read timeout, or the connect one)


@pytest.mark.parametrize(
    "endpoint",
    ["user:Pa55w0rdXYZ@127.0.0.1:1", "http://user:Pa55w0rdXYZ@exa mple",
     "http://user:Pa55w0rdXYZ@[::1", "nonsense"],
)  # fmt: skip
def test_an_endpoint_that_is_no_url_is_said_in_one_line_without_its_password(
    monkeypatch, request, endpoint
):
    """botocore's ValueError making the client came out as a traceback, ending in the URL as
    given: without a scheme, its password was not redacted."""
    import s3fs

    for key, value in S3_ENVIRONMENT.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    # (fsspec keeps a filesystem per set of options, its client made with the endpoint of its
    # time: a store's first use in this process makes its client with this one)
    s3fs.S3FileSystem.clear_instance_cache()
    request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)
    for command in (["runs"], ["record", "--model", "sim", "--limit", "1", "--quiet"]):
        result = cli(*command, "--store", "s3://bkt/team")
        assert result.exit_code == 1, result.output
        (error, hint) = result.output.strip().splitlines()
        assert error.startswith("Error: s3://bkt/team: the S3 endpoint is not a valid http:// "
                                "or https:// URL"), error  # fmt: skip
        assert hint.startswith("Hint: set AWS_ENDPOINT_URL_S3")
        assert "Pa55w0rdXYZ" not in result.output


@pytest.mark.slow  # (about 2 s each: a try of a second, on a silent endpoint)
@pytest.mark.parametrize("write", ["put_bytes", "create_object"])
def test_a_write_to_a_silent_endpoint_is_given_up_on_as_a_read_is(silent_endpoint, write):
    """botocore asked for '100 Continue' before each upload's body, and aiohttp waited for
    it with no limit: a write to an endpoint gone silent (a journal batch, the writer's
    lock) held `record` for 24 minutes, Ctrl-C or not. The body is now sent at once, and its
    answer waited for as a read's."""
    import time

    started = time.monotonic()
    with pytest.raises(Exception, match=r"(on|to the) endpoint URL"):  # (read, or connect)
        getattr(objects, write)(Store(silent_endpoint).root / "r" / "journal.jsonl", b"{}\n")
    assert time.monotonic() - started < 15  # one try, a second each (before: for ever)


@pytest.mark.slow  # (about 3 s)
def test_the_hint_counts_the_attempts_the_environment_asked_for(silent_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # (the fixture's own setting: 1)
    result = cli("runs", "--store", silent_endpoint)
    assert result.exit_code == 1, result.output
    hint = result.output.strip().splitlines()[1]
    assert hint.startswith("Hint: the store did not answer within 1 s, 2 times (AWS_MAX_ATTEMPTS)")


def _lost(kind: str) -> Exception:
    """What a command met when the network to its store went in its middle (as a hostile
    review saw each, killing a proxy in front of the S3 server under `score`)."""
    import botocore.exceptions
    import duckdb

    url = "http://127.0.0.1:5057/bkt/big"
    if kind == "refused":
        return ConnectionRefusedError(111, "Connection refused")
    if kind == "botocore":
        return botocore.exceptions.EndpointConnectionError(endpoint_url=url)
    return duckdb.IOException(  # DuckDB's read through fsspec, the traceback in its text
        'Traceback (most recent call last):\n  File "s3fs/core.py", line 114, in _call_s3\n'
        "botocore.exceptions.EndpointConnectionError: "
        f'Could not connect to the endpoint URL: "{url}"'
    )


@pytest.mark.parametrize(
    "kind, where",
    # (botocore's error at the release is tried again for half a minute first: the same edge)
    [("refused", "reading"), ("botocore", "reading"), ("duckdb", "reading"),
     ("refused", "releasing")],
)  # fmt: skip
def test_the_network_lost_mid_command_is_one_line_naming_the_store(
    s3_sim_copy, sim_copy, monkeypatch, kind, where
):
    url, run_id = s3_sim_copy
    root, _ = sim_copy
    from tcbreplay._store.run_dir import Run

    def lost(*args: Any) -> bool:
        raise _lost(kind)

    if where == "reading":  # (a step that says a failure of the store in its own words)
        monkeypatch.setattr(Run, "has_data", lost)
    else:  # the scores' lock given back once they are written: no step's words but the edge's
        monkeypatch.setattr(locks, "delete_object", lost)
        monkeypatch.setattr(score_module, "stored_scoring", lambda *args: None)  # (written)
    result = cli("score", run_id, "--store", url)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"Error: {url}"), result.output
    assert ("Connection refused" if kind == "refused" else "Could not connect") in lines[0]
    assert lines[1].startswith("Hint: is the network up"), result.output
    if where == "reading":  # on a folder the same exception is no failure of object storage
        crashed = cli("score", run_id, "--store", root, crash_ok=True)
        assert crashed.exception is not None and not isinstance(crashed.exception, SystemExit)


def test_a_closed_output_pipe_is_no_failure_of_the_store(s3_sim_copy, monkeypatch):
    """`score ... | head -1` (`runs`, `sql`) on an s3:// store said "Error: s3://...: [Errno 32]
    Broken pipe", naming the bucket for the reader that went away (a BrokenPipeError is a
    ConnectionError)."""
    from tcbreplay._cli import render

    url, _ = s3_sim_copy

    def closed(*args: Any, **kwargs: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(render, "emit", closed)
    # (a command that writes nothing: the store is shared with tests that leave locks)
    result = cli("runs", "--store", url, crash_ok=True)
    assert url not in result.output and "Hint: is the network up" not in result.output


def test_a_recording_on_s3_is_read_as_a_local_one(s3_sim_copy, sim_copy):
    from tcbreplay._replay.recording import RecordedRun

    url, run_id = s3_sim_copy
    remote = RecordedRun.load(Store(url).open_run(run_id))
    local = RecordedRun.load(Store(sim_copy[0]).open_run(sim_copy[1]))
    keys = list(local.samples)
    remote.prefetch(keys[:3])  # a selection's samples at once
    for key in (keys[0], keys[17], keys[-1]):  # and others a slice at a time
        assert remote.sample(key).texts == local.sample(key).texts
        assert remote.sample(key).turns == local.sample(key).turns
    assert remote.starting() == local.starting()
    assert remote.turn_count() == local.turn_count() > 0


# -- read-only credentials -------------------------------------------------------------------


def _uploaded(sim_run) -> tuple[str, str]:
    """``sim_run`` without its scores uploaded into a new bucket (as ``s3_sim_copy``, but a
    copy of the test's own): (store URL, run_id)."""
    store, run_id = sim_run
    url = f"s3://{new_bucket()}/traces"
    fs = _fs()
    for path in sorted(store.run_dir(run_id).rglob("*")):
        relative = path.relative_to(store.root)
        skip = relative.parts[1] in ("scores", "evaluations") or path.name == "writer.lock"
        if path.is_file() and not skip:
            fs.put_file(str(path), f"{url.removeprefix('s3://')}/{relative.as_posix()}")
    return url, run_id


@contextlib.contextmanager
def read_only(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The AWS libraries given the keys of an IAM user that may read the buckets (GetObject,
    ListBucket) and nothing else, moto holding every request to its IAM policy meanwhile."""
    import boto3
    from moto.core.authorization import enable_iam_authentication

    iam = boto3.client("iam", endpoint_url=s3_server)
    user = f"reader-{len(iam.list_users()['Users'])}"
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"},
    ]}  # fmt: skip
    iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    with monkeypatch.context() as patched:
        patched.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        patched.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            with enable_iam_authentication():
                yield
        finally:
            s3fs.S3FileSystem.clear_instance_cache()


def _objects(url: str) -> dict[str, str]:
    """Every object under a store URL and its ETag (another for each write of it)."""
    root = url.removeprefix("s3://")
    return {key: str(info.get("ETag")) for key, info in _fs().find(root, detail=True).items()}


def test_a_scored_run_scored_again_with_read_only_credentials_says_its_stored_scoring(
    s3_server, sim_run, monkeypatch
):
    """A scoring of the run with the same options, inputs and toolkit as the stored one would
    write the same results: it tried to (its lock first) and failed on read-only credentials.
    It says the stored scoring now, and why, writing nothing; one that would write others is
    refused in one line."""
    url, run_id = _uploaded(sim_run)
    stored = _ok("score", run_id, "--format", "json", "--store", url)
    before = _objects(url)
    with read_only(s3_server, monkeypatch):
        again = cli("score", run_id, "--format", "json", "--store", url)
        other = cli("score", run_id, "--rel-tol", "0.5", "--store", url)
    assert again.exit_code == 0, again.output
    said, before_said = json.loads(again.output), json.loads(stored)
    (warning,) = said.pop("warnings")
    assert "the store refuses this scoring's writes" in warning
    assert before_said["scored_at"] in warning and S3_SECRET not in warning
    before_said.pop("warnings")
    assert said.pop("dashboard_file") is None  # (left as it is: it may be an earlier one's)
    before_said.pop("dashboard_file")
    assert said == before_said  # (its scored_at too: read back)
    assert _objects(url) == before
    assert other.exit_code == 1, other.output
    assert other.output.startswith("Error: ") and S3_SECRET not in other.output
    assert _objects(url) == before


def test_a_stored_scoring_changed_on_s3_is_refused_with_read_only_credentials(
    s3_server, sim_run, monkeypatch
):
    """A stored scores file replaced since its scoring wrote it (still Parquet, the same
    options) was printed as the stored scoring where the credentials may only read: it is
    one Error naming the file now, writing nothing."""
    import io

    import pyarrow.parquet as pq

    url, run_id = _uploaded(sim_run)
    _ok("score", run_id, "--store", url)
    key = f"{url.removeprefix('s3://')}/{run_id}/scores/spec/scores.parquet"
    table = pq.read_table(io.BytesIO(_fs().cat_file(key)))
    changed = io.BytesIO()
    pq.write_table(table.slice(1), changed)  # (a row taken out)
    _fs().pipe_file(key, changed.getvalue())
    before = _objects(url)
    with read_only(s3_server, monkeypatch):
        again = cli("score", run_id, "--format", "json", "--store", url)
    assert again.exit_code == 1, again.output
    first = again.stderr.splitlines()[0]
    assert first.startswith(f"Error: {url}/{run_id}/scores/spec/scores.parquet: not the file its")
    assert "Traceback" not in again.output and S3_SECRET not in again.output
    assert _objects(url) == before
