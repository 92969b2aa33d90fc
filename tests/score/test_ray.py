"""Scoring and recording on Ray: a single-node Ray the tests start once (``ray_cluster``),
and the same files as on this machine alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading

import pyarrow.parquet as pq
import pytest
from helpers import cli, wait_for

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._ray import _check_reachable
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score import run as score_module
from tcbreplay._score import translate
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _written(root, run_id, result) -> dict[str, bytes]:
    folder = root / run_id / "scores" / "spec"
    files = {name: (folder / name).read_bytes() for name in ("scores.parquet", "pairs.parquet")}
    files["dashboard"] = result.dashboard_path.read_bytes()
    summary = json.loads((folder / "summary.json").read_text())
    del summary["scored_at"]
    files["summary"] = json.dumps(summary).encode()
    return files


def test_scoring_on_ray_writes_what_scoring_here_writes(ray_cluster, sim_copy, monkeypatch):
    """The run cut into three parts: scored by threads here, then as Ray tasks (--engine
    ray), every file holds the same bytes (the summary but its time)."""
    root, run_id = sim_copy
    cut = []
    split = translate.split_samples
    monkeypatch.setattr(
        translate, "split_samples", lambda *a: cut.append(len(split(*a))) or split(*a)
    )
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 3)
    here = _written(root, run_id, score_run(Store(root), run_id, dashboard="all"))
    shutil.rmtree(root / run_id / "scores")
    result = cli("score", run_id, "--store", root, "--engine", "ray", "--dashboard", "all",
                 "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_samples"] == 94
    on_ray = _written(root, run_id, score_run(Store(root), run_id, dashboard="all",
                                              engine="ray"))  # fmt: skip
    assert cut == [3, 3, 3]
    assert on_ray == here


def test_recording_on_ray_survives_a_worker_killed(ray_cluster, tmp_path):
    """record --engine ray: a shard per CPU (two), each a Ray task; the worker of shard 1 is
    killed (kill -9) midway, Ray runs its task again, which resumes the shard: the run holds
    every sample once, and scores as one process's recording."""
    model = "sim:seed=5,latency=0.02"
    inputs = load_inputs("tool-call")
    clean = Store(tmp_path / "clean")
    record_run(inputs, parse_model(model), clean, run_id="r", options=RecordOptions(workers=8))
    store = Store(tmp_path / "traces")
    run_dir = tmp_path / "traces" / "r"
    done: list = []
    recording = threading.Thread(
        target=lambda: done.append(
            record_run(
                inputs,
                parse_model(model),
                store,
                run_id="r",
                options=RecordOptions(workers=1),
                engine="ray",
            )
        )
    )
    recording.start()
    journal = run_dir / "journal-1-of-2.jsonl"
    wait_for(lambda: journal.exists() and journal.read_text().count("\n") >= 3)
    pid = int((run_dir / "shard-1-of-2.lock").read_text().split()[1])
    os.kill(pid, signal.SIGKILL)
    recording.join(timeout=300)
    assert done, "the recording did not finish"
    again = int((run_dir / "shard-1-of-2.lock").read_text().split()[1])
    assert again != pid  # shard 1 was recorded to its end by a task Ray ran again
    summary = done[0]
    assert (summary.status, summary.recorded) == ("complete", 94)
    assert summary.attempted < 94 + 47  # the killed shard's samples were not all recorded again
    ids = pq.read_table(run_dir / "samples.parquet", columns=["sample_id"])["sample_id"]
    assert len(ids) == len(set(ids.to_pylist())) == 94
    assert not list(run_dir.glob("journal*"))
    scores = [sorted(score_run(s, "r", write=False).scores.drop("run_id", "scoring").rows())
              for s in (store, clean)]  # fmt: skip
    assert scores[0] == scores[1]


def test_recording_on_ray_starts_no_more_tasks_than_the_recording_selects(ray_cluster, tmp_path):
    # two CPUs, one sample: one task (a second, shard 2/2, would be refused for having none)
    summary = record_run(load_inputs("tool-call"), parse_model("sim:seed=5"), Store(tmp_path),
                         run_id="r", limit=1, engine="ray")  # fmt: skip
    assert (summary.status, summary.recorded, summary.processes) == ("partial", 1, 1)
    assert [p.name for p in (tmp_path / "r").glob("shard-*")] == ["shard-1-of-1.lock"]


def test_the_ray_address_check_takes_a_real_gcs(ray_cluster):
    # the look before ray.init (an HTTP/2 preface answered by a SETTINGS frame) lets a GCS by
    address = ray_cluster.get_runtime_context().gcs_address
    _check_reachable(address, "--ray-address")
    _check_reachable(address, "RAY_ADDRESS")  # twice: the GCS is left serving
