"""Scoring and recording on Ray: a single-node Ray the tests start once (``ray_cluster``),
and the same files as on this machine alone."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import cli

from tcbreplay._score import run as score_module
from tcbreplay._score import translate
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]


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
