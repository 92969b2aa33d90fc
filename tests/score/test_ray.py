"""Scoring and recording on Ray: a single-node Ray the tests start once (``ray_cluster``),
and the same files as on this machine alone."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pyarrow.parquet as pq
import pytest
from helpers import cli, wait_for

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._ray import _check_reachable, ray_session
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score import run as score_module
from tcbreplay._score import translate
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import row_index
from tcbreplay._store.shards import deal, select
from tcbreplay.errors import EngineError

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    # whichever test scores first on the tests' Ray starts the scorers, and is warned of it
    # (test_starting_scorers_is_said_once tests the warning)
    pytest.mark.filterwarnings("ignore:started .* on the Ray cluster"),
]


def _written(root, run_id, result) -> dict[str, bytes]:
    folder = root / run_id / "scores" / "spec"
    files = {name: (folder / name).read_bytes() for name in ("scores.parquet", "pairs.parquet")}
    files["dashboard"] = result.dashboard_path.read_bytes()
    summary = json.loads((folder / "summary.json").read_text())
    del summary["scored_at"], summary["summary_sha256"]  # (the time, and the sha256 of it)
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


def _scorer_names(ray) -> list[str]:
    """The names of the scorers of this code on the cluster (one leaving may be looked up no
    more a moment later: waiting for scorers to leave, ask this)."""
    from tcbreplay._score.on_ray import NAMESPACE, code_digest

    return [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == NAMESPACE and a["name"].startswith(f"scorer-{code_digest()}-")
    ]


def _scorer_pids(ray) -> dict[str, int]:
    """The scorers of this code on the cluster, by name: their processes."""
    from tcbreplay._score.on_ray import NAMESPACE

    names = _scorer_names(ray)
    return {n: ray.get(ray.get_actor(n, namespace=NAMESPACE).pid.remote()) for n in names}


def test_scorers_stay_on_the_cluster_for_the_next_scoring(ray_cluster, sim_copy, monkeypatch):
    """A scoring on Ray leaves its scorers on the cluster, one per CPU, named by the code
    that started them; the next scoring uses the same processes (their imports done), and
    gets the same results."""
    root, run_id = sim_copy
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 3)
    first = score_run(Store(root), run_id, engine="ray", write=False)
    before = _scorer_pids(ray_cluster)
    assert len(before) == 2
    second = score_run(Store(root), run_id, engine="ray", write=False)
    assert _scorer_pids(ray_cluster) == before
    here = score_run(Store(root), run_id, write=False)
    assert first.scores.equals(here.scores) and second.scores.equals(here.scores)


def test_scoring_on_ray_survives_a_scorer_killed(ray_cluster, sim_copy, monkeypatch):
    """A scorer killed (kill -9) as a scoring starts is started again by Ray, which gives it
    its parts again: the same results, from a new process under the same name."""
    root, run_id = sim_copy
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 6)
    here = score_run(Store(root), run_id, write=False)
    score_run(Store(root), run_id, engine="ray", write=False)  # the scorers started
    before = _scorer_pids(ray_cluster)
    killed = sorted(before)[0]
    os.kill(before[killed], signal.SIGKILL)
    on_ray = score_run(Store(root), run_id, engine="ray", write=False)
    assert on_ray.scores.equals(here.scores)
    after = _scorer_pids(ray_cluster)
    assert after.keys() == before.keys() and after[killed] != before[killed]


def test_a_scorer_gone_as_the_scoring_finds_it_is_started_anew(ray_cluster, sim_copy, monkeypatch):
    """A scorer may leave the cluster (idle too long) just as a command finds it: its parts
    fail as Ray says an actor died. The scoring starts it anew and gives it its parts
    again: the same results."""
    from tcbreplay._score import on_ray

    root, run_id = sim_copy
    monkeypatch.setattr(score_module, "_parts_for", lambda samples, cores=None: 4)
    here = score_run(Store(root), run_id, write=False)
    found = on_ray.scorers

    def gone_as_found(ray, count, keep_s):
        kept = found(ray, count, keep_s)
        for scorer in kept:
            ray.kill(scorer, no_restart=True)
        return kept

    monkeypatch.setattr(on_ray, "scorers", gone_as_found)
    on_ray_result = score_run(Store(root), run_id, engine="ray", write=False)
    assert on_ray_result.scores.equals(here.scores)
    assert len(_scorer_pids(ray_cluster)) == 2  # started anew


def test_starting_scorers_is_said_once(ray_cluster, sim_copy):
    """A scoring that starts scorers on a cluster it joined says so, where they stay and for
    how long; the next one, finding them, says nothing."""
    from tcbreplay._score.on_ray import NAMESPACE

    root, run_id = sim_copy
    for name in _scorer_names(ray_cluster):
        with contextlib.suppress(ValueError):  # (one that left meanwhile)
            ray_cluster.kill(ray_cluster.get_actor(name, namespace=NAMESPACE), no_restart=True)
    wait_for(lambda: not _scorer_names(ray_cluster), timeout=30)
    address = ray_cluster.get_runtime_context().gcs_address
    args = ("score", run_id, "--store", root, "--engine", "ray", "--ray-address", address)
    first = cli(*args)
    assert first.exit_code == 0, first.output
    assert (
        f"Warning: started 2 scorers on the Ray cluster at {address}: they stay there for the "
        "next scorings, and leave after 5 minutes idle (--ray-keep 0: as the scoring ends)"
    ) in first.stderr.splitlines()
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert "scorer" not in again.stderr


def _stop_scorers(ray) -> None:
    from tcbreplay._score.on_ray import NAMESPACE

    for name in _scorer_names(ray):
        with contextlib.suppress(ValueError):  # (one that left meanwhile)
            ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
    wait_for(lambda: not _scorer_names(ray), timeout=30)


def test_scorers_kept_for_no_time_stop_as_the_scoring_ends(ray_cluster, sim_copy):
    """--ray-keep 0: the scorers the scoring started are gone when the command ends, and
    nothing is said of them; the results are the same."""
    root, run_id = sim_copy
    _stop_scorers(ray_cluster)
    here = score_run(Store(root), run_id, write=False)
    address = ray_cluster.get_runtime_context().gcs_address
    result = cli("score", run_id, "--store", root, "--engine", "ray", "--ray-address", address,
                 "--ray-keep", "0", "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "scorer" not in result.stderr
    assert json.loads(result.stdout)["tsa"] == here.summary["tsa"]
    wait_for(lambda: not _scorer_names(ray_cluster), timeout=30)


def test_a_scoring_gives_the_scorers_it_finds_its_time_to_keep(ray_cluster, sim_copy,
                                                               monkeypatch):  # fmt: skip
    """Scorers started to stay 5 minutes take the next scoring's --ray-keep: kept for a
    second, they leave once idle that long."""
    from tcbreplay._score import on_ray

    root, run_id = sim_copy
    _stop_scorers(ray_cluster)
    monkeypatch.setattr(on_ray, "CLOSE_S", 0.5)  # (given to the scorers as they start)
    score_run(Store(root), run_id, engine="ray", write=False)
    assert len(_scorer_pids(ray_cluster)) == 2
    score_run(Store(root), run_id, engine="ray", write=False, ray_keep=1)
    wait_for(lambda: not _scorer_names(ray_cluster), timeout=30)


def test_a_scorer_leaves_the_cluster_once_idle(ray_cluster):
    from tcbreplay._score.on_ray import NAMESPACE, Scorer

    scorer = (
        ray_cluster.remote(Scorer)
        .options(name="scorer-idle", namespace=NAMESPACE, lifetime="detached", num_cpus=0)
        .remote(1.0, 0.5)
    )
    pid = ray_cluster.get(scorer.pid.remote())

    def named() -> bool:
        actors = ray_cluster.util.list_named_actors(all_namespaces=True)
        return any(a["name"] == "scorer-idle" for a in actors)

    assert named()
    wait_for(lambda: not named(), timeout=30)
    wait_for(lambda: not _alive(pid), timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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


def test_a_process_joined_to_ray_takes_no_other_address(ray_cluster):
    # a joined Ray was used whatever address was given: a refused address recorded locally
    # on the joined cluster when the tests ran in one process
    joined = ray_cluster.get_runtime_context().gcs_address
    with ray_session(joined) as ray:
        assert ray.is_initialized()
    assert ray_cluster.is_initialized()  # left joined
    with socket.socket() as bound:  # bound, never listening: a connection to it is refused
        bound.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{bound.getsockname()[1]}"
        refused = pytest.raises(EngineError, match=f"cannot join the Ray cluster at {address}: ")
        with refused, ray_session(address):
            pass
    other_cluster = pytest.raises(EngineError, match=f"this process has joined the one at {joined}")
    with other_cluster, _answering_as_a_gcs() as other, ray_session(other):
        pass


@contextlib.contextmanager
def _answering_as_a_gcs():
    """A loopback server that answers HTTP/2's preface as a GCS does (a SETTINGS frame)."""
    server = socket.create_server(("127.0.0.1", 0))
    settings = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(64)
            conn.sendall(settings)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        thread.join(5)


# samples the sim answers in one model turn (no gold calls): a sample's finished_at is then
# the time of its one model call, give or take its latency
ONE_TURN = ["hi-there", "what-can-you-do", "thanks-bye", "good-morning", "tell-a-joke",
            "capital-of-france"]  # fmt: skip


def test_a_shard_run_again_by_ray_keeps_its_rate_window(ray_cluster, tmp_path):
    """--max-rpm 12 on two shards: 6 calls a minute each. Shard 1 makes its 6 and waits for
    its window; its worker is killed there, and Ray runs its task again, which must wait
    for the same window (it started a fresh one: 26 calls in 7 s under --max-rpm 20)."""
    store = Store(tmp_path)
    run_dir = tmp_path / "r"
    done: list = []
    options = RecordOptions(workers=1, max_rpm=12, trials=4)
    model = parse_model("sim:seed=5,error_rate=0,latency=0.05")

    def record() -> None:
        done.append(record_run(load_inputs("tool-call"), model, store, run_id="r",
                               options=options, sample_ids=ONE_TURN, engine="ray"))  # fmt: skip

    recording = threading.Thread(target=record)
    recording.start()
    journal = run_dir / "journal-1-of-2.jsonl"
    wait_for(lambda: journal.exists() and journal.read_text().count("\n") >= 6, timeout=60)
    pid = int((run_dir / "shard-1-of-2.lock").read_text().split()[1])
    os.kill(pid, signal.SIGKILL)  # waiting for its window: no call of its 7th sample made
    recording.join(timeout=400)
    assert done, "the recording did not finish"
    assert int((run_dir / "shard-1-of-2.lock").read_text().split()[1]) != pid  # run again
    assert (done[0].status, done[0].recorded) == ("partial", 24)
    samples = pq.read_table(run_dir / "samples.parquet").to_pylist()
    ai = pq.read_table(run_dir / "messages.parquet", filters=[("type", "==", "ai")])
    assert sorted(ai["sample_index"].to_pylist()) == sorted(s["sample_index"] for s in samples)
    ids = [s.sample_id for s in load_inputs("tool-call").dataset.samples]
    for shard in (1, 2):  # the rows of the selection's places shard - 1, shard + 1, ...
        rows = {row_index(k, t, len(ids)) for k, t in deal(select(ids, None, ONE_TURN), 4,
                                                             (shard, 2))}  # fmt: skip
        calls = sorted(s["finished_at"].timestamp() for s in samples if s["sample_index"] in rows)
        # at most 6 calls within any 55 s (a call's time is its sample's end, to 0.05 s)
        most = max(sum(1 for t in calls if start <= t < start + 55) for start in calls)
        assert most == 6, (shard, [round(t - calls[0], 2) for t in calls])


@pytest.mark.parametrize(
    ("token", "said"),
    [
        (None, "it takes only callers with its token ("),
        ("not-its-token", "it refused this machine's token"),
    ],
)
def test_a_cluster_taking_tokens_refuses_a_wrong_caller_at_once(ray_cluster, sim_copy, token, said):
    # Ray retried such a cluster for 20 s, printing a warning a second, and then said only
    # that it could not connect; a cluster `ray start` starts takes tokens by default
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        pytest.skip("this Ray was started without token authentication (RAY_AUTH_MODE)")
    root, run_id = sim_copy
    address = ray_cluster.get_runtime_context().gcs_address
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    if token is not None:
        env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tcbreplay", "score", run_id, "--store", root,
                           "--engine", "ray", "--ray-address", address],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert time.monotonic() - started < 15
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"Error: cannot join the Ray cluster at {address}: {said}")
    assert len(lines) == 2 and lines[1].startswith("Hint: "), done.stderr
    assert "RAY_AUTH_TOKEN" in lines[1]
    assert not (root / run_id / "scores").exists()


def test_a_ray_of_the_commands_own_starts_without_a_word(tmp_path):
    # Ray announced on stderr that the Ray it started takes tokens, a warning nobody using
    # tcbreplay has anything to do about
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    done = subprocess.run([sys.executable, "-m", "tcbreplay", "record", "--model",
                           "sim:seed=3,latency=0", "--store", tmp_path, "--run-id", "r",
                           "--limit", "2", "--engine", "ray", "--quiet"],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("run r (simulated model): 2/2 ok")


def test_recording_on_ray_reports_the_run_as_every_shard_left_it(ray_cluster, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    """Shard 1's task finishes before shard 2's starts recording (made to: shard 2 waits for
    it), so shard 1 writes the run's manifest first, incomplete. record printed shard 1's
    summary ("10/94 ok ... recorded 20 ... the run misses 84 samples") where the run was
    partial with 20 of 20; the summary is the run's once both have finished."""
    from tcbreplay._record import on_ray

    record_on_ray = on_ray.record_on_ray
    flag = str(tmp_path / "shard-1-finished")

    def in_order(record_shard, tasks, address=None):
        def shard(which, windows):  # (in a Ray worker: imports its own)
            import time
            from pathlib import Path

            deadline = time.monotonic() + 120
            while which[0] == 2 and not Path(flag).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            summary = record_shard(which, windows)
            if which[0] == 1:
                Path(flag).touch()
            return summary

        return record_on_ray(shard, tasks, address)

    monkeypatch.setattr(on_ray, "record_on_ray", in_order)
    result = cli("record", "--model", "sim:seed=5", "--store", tmp_path, "--run-id", "r",
                 "--engine", "ray", "--limit", "20", "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("run r (simulated model): 20/20 ok (partial: 94 in the dataset)")
    assert "; recorded 20 in" in lines[0]
    assert lines[1].startswith("partial run: record the rest with")
    assert (tmp_path / "shard-1-finished").exists()  # shard 1 did finish first


_OWN_RAY = """
import time
from tcbreplay._ray import ray_session
started = time.monotonic()
with ray_session(None) as ray:
    print(ray.get_runtime_context().gcs_address, round(time.monotonic() - started, 1))
"""


def test_without_an_address_a_command_starts_a_ray_of_its_own(ray_cluster):
    """Given no address, Ray joins the cluster started last on the machine (named in its
    temporary folder): someone else's, or a dead one it retries for minutes. A command
    without --ray-address or RAY_ADDRESS starts its own instead, even with one running (the
    tests' own) and a dead one named last."""
    import tempfile
    from pathlib import Path

    running = ray_cluster.get_runtime_context().gcs_address
    with socket.socket() as bound, tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        bound.bind(("127.0.0.1", 0))  # never listening: a dead cluster's address
        dead = f"127.0.0.1:{bound.getsockname()[1]}"
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "ray_current_cluster").write_text(dead)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env["RAY_TMPDIR"] = tmp
        done = subprocess.run([sys.executable, "-c", _OWN_RAY], env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    address, _ = done.stdout.split()
    assert address not in (dead, running)
