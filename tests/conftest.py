"""Shared fixtures: a temporary store and a small recorded run of the built-in benchmark."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
DATA = TESTS / "data"
REFERENCE = TESTS.parent.parent / "shared" / "reference" / "abet"
sys.path.insert(0, str(TESTS))
# A table printed to a pipe is as wide as COLUMNS says, else 120 columns: the tests read them
# at that width (those about 80 columns set it themselves). pytest-xdist's workers inherit
# COLUMNS=80, which would cut the tables the others read.
os.environ.pop("COLUMNS", None)


@pytest.fixture
def store(tmp_path):
    from tcbreplay._store.runs import Store

    return Store(tmp_path / "traces")


@pytest.fixture(scope="session")
def sim_run(tmp_path_factory):
    """The built-in benchmark recorded once with ``sim:seed=7``: (store, run_id)."""
    from tcbreplay._inputs.benchmarks import load_inputs
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    store = Store(tmp_path_factory.mktemp("sim") / "traces")
    summary = record_run(
        load_inputs("tool-call"),
        parse_model("sim:seed=7,error_rate=0.3"),
        store,
        run_id="sim-seed7",
        options=RecordOptions(workers=8),
    )
    return store, summary.run_id


@pytest.fixture
def sim_copy(sim_run, tmp_path):
    """A private copy of ``sim_run``, without its scores: (store root, run_id)."""
    from helpers import unscored_copy

    return unscored_copy(*sim_run, tmp_path / "traces")


@pytest.fixture
def reference_dir():
    if not REFERENCE.is_dir():
        pytest.skip(f"reference data not found at {REFERENCE}")
    return REFERENCE


@pytest.fixture(scope="session")
def sim_runs_pair(sim_run, tmp_path_factory):
    """A store holding a copy of ``sim_run`` and the same benchmark recorded with ``sim:seed=11``:
    (store, [first_run_id, second_run_id])."""
    import shutil

    from tcbreplay._inputs.benchmarks import load_inputs
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    source, first = sim_run
    store = Store(tmp_path_factory.mktemp("pair") / "traces")
    shutil.copytree(source.run_dir(first), store.run_dir(first))
    summary = record_run(
        load_inputs("tool-call"),
        parse_model("sim:seed=11,error_rate=0.3"),
        store,
        run_id="sim-seed11",
        options=RecordOptions(workers=8),
    )
    return store, [first, summary.run_id]


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


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on loopback, one per test session (per xdist worker), stopped at its
    end; while it runs, the environment points the AWS libraries at it (``AWS_ENDPOINT_URL_S3``,
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


@pytest.fixture(scope="session")
def s3_sim_copy(s3_server, sim_run):
    """``sim_run`` uploaded without its scores into a store on the local S3 server, every file
    as it is: (store URL, run_id). The same bytes as ``sim_copy``, so every command must give
    the same numbers on both."""
    import s3fs

    store, run_id = sim_run
    url = f"s3://{new_bucket()}/traces"
    fs = s3fs.S3FileSystem()
    for path in sorted(store.run_dir(run_id).rglob("*")):
        relative = path.relative_to(store.root)
        if path.is_file() and relative.parts[1] not in ("scores", "evaluations"):
            fs.put_file(str(path), f"{url.removeprefix('s3://')}/{relative.as_posix()}")
    return url, run_id
