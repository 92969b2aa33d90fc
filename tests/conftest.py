"""Shared fixtures: a temporary store and a small recorded run of the built-in benchmark."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).parent
DATA = TESTS / "data"
REFERENCE = TESTS.parent.parent / "shared" / "reference" / "abet"
sys.path.insert(0, str(TESTS))
# A table printed to a pipe is as wide as COLUMNS says, else 120 columns: the tests read them
# at that width (those about 80 columns set it themselves). pytest-xdist's workers inherit
# COLUMNS=80, which would cut the tables the others read.
os.environ.pop("COLUMNS", None)

# no property test has a time limit per example: a test run on two loaded cores stretches one
# example past hypothesis's 200 ms now and then (test_shards_split_the_selected_rows_evenly,
# 288 ms once under load, 29 ms again), which is the machine, not the property
settings.register_profile("tcbreplay", deadline=None)
settings.load_profile("tcbreplay")


def _one_share_of_the_cores() -> None:
    """Keep each pytest-xdist worker (and what it starts) to its share of the cores.

    tcbreplay sizes its thread pools and parts by the cores it may use (CPU affinity):
    without this, every worker would size them for the whole machine, and the workers'
    threads would spend their time taking turns (about a fifth of the suite's CPU time).
    Tests of what several cores do say so themselves (``several_cores``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    share = max(1, len(cores) // max(1, workers))
    first = (int(worker[2:]) * share) % len(cores)
    os.sched_setaffinity(0, cores[first : first + share])


_one_share_of_the_cores()

# A shell starts a command put in the background (``make test &``, a CI step run as a
# background job) with Ctrl-C ignored, and Python then keeps it ignored: the tests of what
# Ctrl-C does, in this process and in the processes they start, would wait for a signal that
# never comes. They test the handling a terminal's Ctrl-C meets, so the suite restores it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def several_cores(monkeypatch):
    """Scoring and recording size their parts and pools as if on two cores (the tests of
    what happens side by side), whatever share of the machine this worker has."""
    import tcbreplay._machine as machine

    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    for module in ("tcbreplay._score.run", "tcbreplay._record.options", "tcbreplay._store.views"):
        monkeypatch.setattr(f"{module}.usable_cores", lambda: 2)


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


@pytest.fixture(scope="session")
def ray_cluster():
    """A single-node Ray (two CPUs) for the tests marked ``ray``: started once per test run
    (they are in one file, which runs on one xdist worker: see pyproject.toml's addopts),
    stopped at its end."""
    ray = pytest.importorskip("ray")
    # a Ray of its own (address "local"), whatever other one runs on the machine
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": "WARNING"}
    ray.init(address="local", num_cpus=2, **options)
    yield ray
    ray.shutdown()


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
