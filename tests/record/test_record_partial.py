"""Try cheaply (issue #22): ``record --limit N`` and ``--sample-id ID`` record a few samples, the
run says it is partial, and a later record of it completes it; a resumed run keeps the runner
settings it was recorded with unless new ones are given."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from gemini_server import Fault, GeminiServer
from helpers import cli, snapshot

from tcbreplay._inputs.benchmarks import BENCHMARKS
from tcbreplay._record.options import RecordOptions
from tcbreplay.errors import InputError

DATASET = json.loads(BENCHMARKS["tool-call"].dataset.read_text())
IDS = [str(e.get("id", k)) for k, e in enumerate(DATASET)]


def _manifest(store: Path, run_id: str) -> dict:
    return json.loads((store / run_id / "manifest.json").read_text())


def _ids(store: Path, run_id: str) -> list[str]:
    rows = pq.read_table(store / run_id / "samples.parquet").to_pylist()
    return [r["sample_id"] for r in sorted(rows, key=lambda r: r["sample_index"])]


@pytest.mark.slow  # (whole recordings and resumes: 7-18 s in `make test` on 2 cores)
def test_limit_records_a_partial_run_that_the_same_command_without_it_completes(tmp_path):
    store = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=3", "--run-id", "p", "--store", store, "--quiet"]
    first = cli(*args, "--limit", "5")

    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[:3] == [
        first.stdout.splitlines()[0],
        f"partial run: record the rest with: tcbreplay record --resume p --store {store}",
        f"next: tcbreplay score p --store {store}",
    ]
    assert first.stdout.startswith("run p (simulated model): 5/5 ok (partial: 94 in the dataset)")
    assert _ids(store, "p") == IDS[:5]  # the first five of the dataset
    manifest = _manifest(store, "p")
    assert manifest["status"] == "partial"
    assert (manifest["totals"]["samples"], manifest["totals"]["recorded"]) == (94, 5)

    runs = cli("sql", "select status, n_samples, recorded from runs", "--format", "json",
               "--store", store)  # fmt: skip
    assert json.loads(runs.stdout) == [{"status": "partial", "n_samples": 94, "recorded": 5}]
    assert " partial " in cli("runs", "--store", store).stdout

    score = cli("score", "p", "--store", store)  # a partial run scores as it is
    assert score.exit_code == 0, score.output
    assert score.stdout.splitlines()[0] == (
        "Warning: partial run: 5 of 94 samples recorded; the metrics cover only those (record "
        f"the rest with: tcbreplay record --resume p --store {store})"
    )
    data = json.loads(cli("score", "p", "--format", "json", "--store", store).stdout)
    assert data["warnings"] == [score.stdout.splitlines()[0].removeprefix("Warning: ")]
    assert data["n_samples"] == 5

    again = cli(*args, "--limit", "5")  # the same command: nothing left to do
    assert again.exit_code == 0
    assert "already holds all 5 samples asked for; nothing to record" in again.stdout
    # killed after its last sample (its status, or its fold, not written): the same command
    # finished it, and said "nothing to record" as if it had done nothing
    manifest = _manifest(store, "p")
    (store / "p" / "manifest.json").write_text(json.dumps({**manifest, "status": "recording"}))
    finished = cli(*args, "--limit", "5")
    assert finished.exit_code == 0, finished.output
    assert (
        "already holds all 5 samples asked for; the interrupted recording that left it "
        "unfinished is finished (its journal folded): the run is partial now; nothing to record"
    ) in finished.stdout
    assert _manifest(store, "p")["status"] == "partial"

    rest = cli(*args)
    assert rest.exit_code == 0, rest.output
    assert "recorded 89 in" in rest.stdout
    assert "(partial" not in rest.stdout and "partial run" not in rest.stdout
    assert _manifest(store, "p")["status"] == "complete"
    assert _ids(store, "p") == IDS
    assert "Warning" not in cli("score", "p", "--store", store).stdout


@pytest.mark.slow  # (whole recordings and resumes: 7-18 s in `make test` on 2 cores)
def test_sample_ids_record_those_samples_and_resume_completes_the_run(tmp_path):
    store = tmp_path / "traces"
    wanted = [IDS[40], IDS[3]]
    first = cli("record", "--model", "sim", "--run-id", "s", "--store", store, "--quiet",
                "--sample-id", wanted[0], "--sample-id", wanted[1])  # fmt: skip
    assert first.exit_code == 0, first.output
    assert _ids(store, "s") == [IDS[3], IDS[40]]  # in dataset order
    assert _manifest(store, "s")["status"] == "partial"

    limited = cli("record", "--model", "sim", "--run-id", "l", "--store", store, "--quiet",
                  "--sample-id", IDS[7], "--sample-id", IDS[2], "--limit", "1")  # fmt: skip
    assert limited.exit_code == 0, limited.output
    assert _ids(store, "l") == [IDS[2]]  # the first of those named, in dataset order

    rest = cli("record", "--resume", "s", "--store", store, "--quiet")
    assert rest.exit_code == 0, rest.output
    assert _manifest(store, "s")["status"] == "complete"
    assert _ids(store, "s") == IDS


def test_a_sample_id_given_twice_is_one_sample_asked_for(tmp_path):
    """A repeated --sample-id was counted twice: a stopped recording of two samples said
    "0/3 ok of those asked for", and the manifest's selection held the id twice."""
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=1,fault_rate=1", "--retries", "0", "--run-id",
                 "s", "--store", store, "--quiet", "--sample-id", IDS[3], "--sample-id",
                 IDS[3], "--sample-id", IDS[0])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("run s (simulated model): 0/2 ok of those asked for (")
    assert _manifest(store, "s")["selection"]["sample_ids"] == sorted([IDS[3], IDS[0]])
    assert sorted(_ids(store, "s")) == sorted([IDS[3], IDS[0]])


def test_an_unknown_sample_id_is_refused_before_anything_is_written(tmp_path):
    store = tmp_path / "traces"
    assert cli("record", "--model", "sim", "--run-id", "x", "--store", store, "--quiet",
               "--limit", "2").exit_code == 0  # fmt: skip
    before = snapshot(store)
    for args in (["--model", "sim", "--run-id", "x"], ["--resume", "x"]):
        result = cli("record", *args, "--sample-id", "no-such-id", "--store", store)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines()[0] == (
            "Error: --sample-id 'no-such-id': the dataset has no sample of that id"
        )
        assert snapshot(store) == before
    bad = cli("record", "--model", "sim", "--limit", "0", "--store", store)
    assert bad.exit_code == 2
    assert "--limit" in bad.stderr


# -- a resumed run keeps its runner settings -------------------------------------------------


N = 12


def _text(i: int) -> str:
    return f"What is {i} times 3?"


@pytest.fixture
def slow_server(tmp_path, monkeypatch):
    """A Gemini server that takes 0.3 s per answer (so workers overlap), and a dataset of N
    one-call samples for it."""
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-resume-settings")
    entries = [
        {"id": f"m{i}", "input": _text(i),
         "target": [{"name": "multiply_numbers", "args": {"a": i, "b": 3}}]}
        for i in range(N)
    ]  # fmt: skip
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(entries))
    script = {_text(i): [[("multiply_numbers", {"a": i, "b": 3})]] for i in range(N)}
    with GeminiServer(script) as server:
        server.inject(Fault.hang(0.3))
        yield server, path


def _gemini(path: Path, server: GeminiServer, store: Path, *args: object):
    prompt = BENCHMARKS["tool-call"].system_prompt
    tools = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
    return cli(
        "record", "--dataset", path, "--tools", tools, "--system-prompt", prompt,
        "--model", "google_genai:gemini-2.5-flash", "--model-option", f"base_url={server.url}",
        "--run-id", "w", "--store", store, "--quiet", *args,
    )  # fmt: skip


@pytest.mark.slow  # (two recordings against a slow server: 4-5 s each)
@pytest.mark.parametrize("how", ["--resume", "the same command"])
def test_a_resumed_run_keeps_its_workers_and_rate_limits(slow_server, tmp_path, how):
    server, path = slow_server
    store = tmp_path / "traces"
    first = _gemini(path, server, store, "--workers", "8", "--processes", "1",
                    "--max-rpm", "6000", "--limit", "1")  # fmt: skip
    assert first.exit_code == 0, first.output

    server.max_in_flight = 0
    if how == "--resume":
        again = cli("record", "--resume", "w", "--store", store, "--quiet")
    else:
        again = _gemini(path, server, store)
    assert again.exit_code == 0, again.output
    assert f"recorded {N - 1} in" in again.stdout
    # more than the default 4 workers' worth at once (all 8 but on a loaded machine, where
    # the first answers can come before the last worker starts)
    assert 4 < server.max_in_flight <= 8
    runner = _manifest(store, "w")["runner"]
    assert (runner["workers"], runner["processes"], runner["max_rpm"]) == (8, 1, 6000)


@pytest.mark.slow  # (whole recordings and resumes: 7-18 s in `make test` on 2 cores)
def test_settings_given_to_a_resumed_run_replace_the_stored_ones(slow_server, tmp_path):
    server, path = slow_server
    store = tmp_path / "traces"
    first = _gemini(path, server, store, "--workers", "8", "--max-rpm", "6000", "--limit", "1")
    assert first.exit_code == 0, first.output
    server.max_in_flight = 0
    again = cli("record", "--resume", "w", "--workers", "2", "--store", store, "--quiet")
    assert again.exit_code == 0, again.output
    assert server.max_in_flight == 2
    runner = _manifest(store, "w")["runner"]
    assert (runner["workers"], runner["max_rpm"]) == (2, 6000)  # the rate limit kept


def test_runner_settings_resolve_given_then_stored_then_defaults():
    stored = RecordOptions(workers=64, processes=2, max_rpm=100, retries=5, trials=3).to_dict()
    assert RecordOptions.resolve({}, stored) == RecordOptions(
        workers=64, processes=2, max_rpm=100, retries=5, trials=3
    )
    # new workers: the stored process count, made for the old ones, is not kept
    assert RecordOptions.resolve({"workers": 1}, stored) == RecordOptions(
        workers=1, max_rpm=100, retries=5, trials=3
    )
    assert RecordOptions.resolve({"max_rpm": 10}, None) == RecordOptions(max_rpm=10)
    with pytest.raises(InputError, match="--workers"):
        RecordOptions.resolve({"workers": 0}, stored)


def test_a_setting_that_contradicts_the_stored_ones_is_refused_before_the_run_is_taken(tmp_path):
    store = tmp_path / "traces"
    first = cli("record", "--model", "sim", "--workers", "2", "--limit", "1", "--run-id", "x",
                "--store", store, "--quiet")  # fmt: skip
    assert first.exit_code == 0, first.output
    before = snapshot(store)
    result = cli("record", "--resume", "x", "--processes", "3", "--store", store)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "Error: --processes 3 is more than --workers 2: each process runs at least one worker"
    )
    assert snapshot(store) == before


@pytest.mark.slow  # (whole recordings and resumes: 7-18 s in `make test` on 2 cores)
def test_a_scoring_made_before_a_resume_is_shown_stale_and_diffed_anew(tmp_path):
    # the scores of the first 5 samples stayed the run's numbers in `runs` (beside its 94
    # samples) and in `diff` (5 common samples) once the run was resumed to its end
    store = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=3", "--store", store, "--quiet"]
    assert cli(*args, "--run-id", "p", "--limit", "5").exit_code == 0
    assert cli(*args, "--run-id", "q").exit_code == 0
    for run_id in ("p", "q"):
        assert cli("score", run_id, "--store", store).exit_code == 0
    query = ["sql", "select run_id, stale, n_samples from scorings order by run_id",
             "--format", "json", "--store", store]  # fmt: skip
    assert json.loads(cli(*query).stdout) == [
        {"run_id": "p", "stale": False, "n_samples": 5},
        {"run_id": "q", "stale": False, "n_samples": 94},
    ]

    assert cli(*args, "--run-id", "p").exit_code == 0  # the rest: its files are rewritten
    assert json.loads(cli(*query).stdout)[0] == {"run_id": "p", "stale": True, "n_samples": 5}
    runs = json.loads(cli("runs", "--format", "json", "--store", store).stdout)
    by_id = {row["run_id"]: row for row in runs}
    assert by_id["p"]["scoring"] == "spec (stale)"
    assert (by_id["p"]["tsa"], by_id["p"]["tp"], by_id["p"]["ahr"]) == (None, None, None)
    assert by_id["q"]["scoring"] == "spec" and by_id["q"]["tsa"] is not None
    diff = cli("diff", "p", "q", "--store", store)
    assert diff.exit_code == 0, diff.output
    assert "(94 common samples" in diff.stdout  # p scored anew, in memory
    # the views hold the stale scoring as it was: a query of them says so (it said nothing)
    said = "Warning: run 'p': its spec scoring is of its files before they changed"
    worst = cli("query", "worst_samples", "-p", "run_id=p", "--store", store)
    assert worst.exit_code == 0 and said in worst.stderr, worst.stderr
    assert f"tcbreplay score p --store {store} scores it again" in worst.stderr
    assert said not in cli("query", "worst_samples", "-p", "run_id=q", "--store", store).stderr
    assert said in cli("sql", "select count(*) from Scores_All", "--store", store).stderr
    assert said not in cli("sql", "select count(*) from samples", "--store", store).stderr

    assert cli("score", "p", "--store", store).exit_code == 0
    assert json.loads(cli(*query).stdout)[0] == {"run_id": "p", "stale": False, "n_samples": 94}
    assert said not in cli("query", "worst_samples", "-p", "run_id=p", "--store", store).stderr
