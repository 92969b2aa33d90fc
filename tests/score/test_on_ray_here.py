"""Scoring on Ray (tcbreplay/_score/on_ray.py): the scorers' parts, here run in
this process through Ray's API as the engine uses it (tests/score/test_ray.py runs them on
a real Ray)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest
from helpers import ScorersHere

from tcbreplay._score import on_ray
from tcbreplay._score import run as score_module
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store


@pytest.fixture
def tasks_here(monkeypatch) -> list[Any]:
    """Scorings with engine "ray" run their tasks in this process, in three parts; the
    connections the tasks opened, in order."""

    @contextlib.contextmanager
    def joined(address: str | None) -> Iterator[Any]:
        yield ScorersHere()

    opened: list[Any] = []
    real = on_ray.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(real(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(score_module, "ray_session", joined)
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 3)
    monkeypatch.setattr(on_ray, "connect", counted)
    monkeypatch.setattr(on_ray, "_TASK_CONNECTION", {}, raising=False)  # none kept before
    return opened


def test_the_parts_a_worker_scores_share_its_connection_to_the_run(sim_copy, tasks_here):
    root, run_id = sim_copy
    first = score_run(Store(root), run_id, engine="ray", write=False)
    assert len(tasks_here) == 1  # three parts, one worker process: one connection
    # another scoring (the run may have grown since) opens anew, and the former is closed
    second = score_run(Store(root), run_id, engine="ray", write=False)
    assert len(tasks_here) == 2
    with pytest.raises(duckdb.ConnectionException):
        tasks_here[0].execute("select 1")
    tasks_here[1].execute("select 1")
    here = score_run(Store(root), run_id, write=False)
    assert first.scores.equals(here.scores) and second.scores.equals(here.scores)
