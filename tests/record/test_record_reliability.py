"""Recording that survives crashes, rate limits and Ctrl-C: resume, retries, one writer.

Subprocess tests run ``python -m tcbreplay record`` and kill it for real.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from clocks import FakeClock
from gemini_server import Fault, GeminiServer
from helpers import cli_process, journal_lines, snapshot, wait_for

from tcbreplay._cli import main
from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.retry import RateLimiter, backoff_delay, is_transient, retry_after
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay.errors import RecordError

BUILTIN = BENCHMARKS["tool-call"]
N_SAMPLES = len(json.loads(BUILTIN.dataset.read_text()))


def _samples(run_dir: Path) -> list[dict]:
    return pq.read_table(run_dir / "samples.parquet").to_pylist()


def _scores(store: Store, run_id: str) -> list[tuple]:
    scores = score_run(store, run_id, write=False).scores
    return sorted(scores.drop("run_id", "scoring").rows())


# -- crash safety -------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_then_resume_loses_and_duplicates_nothing(tmp_path):
    store_dir = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=5,latency=0.02", "--run-id", "k", "--store",
            str(store_dir), "--workers", "4", "--quiet"]  # fmt: skip
    first = cli_process(*args)
    run_dir = store_dir / "k"
    wait_for(lambda: journal_lines(run_dir) >= 10)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    kept = journal_lines(run_dir)
    assert 10 <= kept < N_SAMPLES
    assert not (run_dir / "samples.parquet").exists()
    # scoring reads Parquet only, and says where the finished samples wait
    for extra in ([], ["--allow-incomplete"]):
        result = CliRunner().invoke(main, ["score", "k", "--store", str(store_dir), *extra])
        assert result.exit_code == 1
        assert result.stderr.splitlines() == [
            f"Error: run 'k' has no stored samples yet (status interrupted): {kept} finished "
            "samples wait in journal.jsonl, which `record --resume` folds into the Parquet "
            "files that scoring reads",
            f"Hint: finish it with: tcbreplay record --resume k --store {store_dir}",
        ]

    second = cli_process(*args)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{N_SAMPLES}/{N_SAMPLES} ok" in out
    assert f"recorded {N_SAMPLES - kept} in" in out
    rows = _samples(run_dir)
    ids = [r["sample_id"] for r in rows]
    assert len(ids) == len(set(ids)) == N_SAMPLES
    assert not (run_dir / "journal.jsonl").exists()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"

    # the same scores as an uninterrupted run with the same seed
    clean = Store(tmp_path / "clean")
    record_run(load_inputs("tool-call"), parse_model("sim:seed=5,latency=0.02"), clean,
               run_id="k", options=RecordOptions(workers=8))  # fmt: skip
    assert _scores(Store(store_dir), "k") == _scores(clean, "k")


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C, a job scheduler
def test_ctrl_c_stops_cleanly_and_keeps_finished_samples(tmp_path, stop):
    store_dir = tmp_path / "traces"
    # latency long enough that the run is still going when Ctrl-C comes on a loaded machine
    # (about 28 s of waiting in all); the resume makes up for it with more workers
    proc = cli_process("record", "--model", "sim:latency=0.2", "--run-id", "c", "--store",
                str(store_dir), "--workers", "2")  # fmt: skip
    run_dir = store_dir / "c"
    wait_for(lambda: journal_lines(run_dir) >= 5)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + stop  # 130 Ctrl-C, 143 SIGTERM: as a shell reports them
    assert "Interrupted: kept" in err
    assert "--resume c" in err
    assert "Traceback" not in err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    kept = _samples(run_dir)
    assert 5 <= len(kept) < N_SAMPLES
    assert {r["status"] for r in kept} == {"ok"}

    result = CliRunner().invoke(main, ["record", "--resume", "c", "--store", str(store_dir),
                                       "--workers", "32", "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(_samples(run_dir)) == N_SAMPLES


@pytest.mark.slow
def test_one_writer_per_run_and_takeover_after_death(tmp_path):
    store_dir = tmp_path / "traces"
    args = ["record", "--model", "sim:latency=0.2", "--run-id", "w", "--store", str(store_dir),
            "--workers", "1", "--quiet"]  # fmt: skip
    first = cli_process(*args)
    run_dir = store_dir / "w"
    wait_for(lambda: journal_lines(run_dir) >= 1)
    second = cli_process(*args)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 1
    assert "is being written by pid" in err
    assert "Traceback" not in err
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    # the dead writer's lock is gone: the next record takes the run over
    third = Store(store_dir).resume_run("w")
    third.close()


@pytest.mark.slow
def test_retry_errors_reruns_only_failed_samples(tmp_path):
    store = Store(tmp_path / "traces")
    inputs = load_inputs("tool-call")
    summary = record_run(inputs, parse_model("sim:fault_rate=0.5"), store, run_id="r",
                         options=RecordOptions(workers=4, retries=0))  # fmt: skip
    before = {r["sample_id"]: r for r in _samples(Path(summary.run_dir))}
    failed = {sid for sid, r in before.items() if r["status"] == "error"}
    assert 0 < len(failed) < N_SAMPLES
    assert summary.errors == len(failed)
    for sid in failed:  # errors are data: type, message, attempts kept
        assert before[sid]["error_type"] == "SimTransientError"
        assert "503" in before[sid]["error"]
        assert before[sid]["attempts"] == 1

    result = CliRunner().invoke(main, ["record", "--retry-errors", "r", "--store",
                                       str(store.root), "--retries", "30", "--backoff", "0",
                                       "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.output
    after = {r["sample_id"]: r for r in _samples(Path(summary.run_dir))}
    assert {r["status"] for r in after.values()} == {"ok"}
    assert len(after) == N_SAMPLES
    for sid, row in before.items():
        if sid not in failed:  # untouched
            assert after[sid]["finished_at"] == row["finished_at"]
        else:
            assert after[sid]["finished_at"] > row["finished_at"]


def test_resume_refuses_other_inputs(tmp_path):
    store = tmp_path / "traces"
    runner = CliRunner()
    first = runner.invoke(main, ["record", "--model", "sim:seed=1", "--run-id", "x", "--store",
                                 str(store), "--quiet"])  # fmt: skip
    assert first.exit_code == 0
    again = runner.invoke(main, ["record", "--model", "sim:seed=1", "--run-id", "x", "--store",
                                 str(store), "--quiet"])  # fmt: skip
    assert again.exit_code == 0
    assert "nothing to record" in again.output
    other = runner.invoke(main, ["record", "--model", "sim:seed=2", "--run-id", "x", "--store",
                                 str(store), "--quiet"])  # fmt: skip
    assert other.exit_code == 2
    assert "exists with other inputs" in other.output


@pytest.mark.parametrize(
    "again",
    [["--model", "sim:error_rate=0.15,seed=1"], ["--model", "sim", "--model-option", "seed=1"]],
)
def test_the_sim_model_spelled_another_way_is_the_same_run(tmp_path, again):
    """The same settings of the sim model, spelled otherwise, were other inputs: the default
    run id named another run, and a shard or a rerun given the run's id was refused."""
    store = tmp_path / "traces"
    runner = CliRunner()
    for run_id in ([], ["--run-id", "x"]):
        args = ["record", *run_id, "--store", str(store), "--quiet"]
        first = runner.invoke(main, [*args, "--model", "sim:seed=1", "--limit", "2"])
        assert first.exit_code == 0, first.output
        more = runner.invoke(main, [*args, *again, "--limit", "3"])
        assert more.exit_code == 0, more.output
    runs = sorted(p.name for p in store.iterdir())
    assert len(runs) == 2 and "x" in runs
    assert [len(_samples(store / run)) for run in runs] == [3, 3]


def test_a_sim_run_an_older_tcbreplay_recorded_is_resumed_as_before(tmp_path):
    """Its manifest holds the fingerprint of the model string as given."""
    from tcbreplay._record.runner import fingerprint

    store = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=1", "--run-id", "x", "--store", str(store), "--quiet"]
    runner = CliRunner()
    assert runner.invoke(main, [*args, "--limit", "2"]).exit_code == 0
    path = store / "x" / "manifest.json"
    manifest = json.loads(path.read_text())
    former = fingerprint(load_inputs("tool-call"), parse_model("sim:seed=1"), former=True)
    assert former != manifest["fingerprint"]
    path.write_text(json.dumps({**manifest, "fingerprint": former}))
    resumed = runner.invoke(main, [*args, "--limit", "3"])
    assert resumed.exit_code == 0, resumed.output
    assert len(_samples(store / "x")) == 3
    assert runner.invoke(main, ["record", "--resume", "x", "--store", str(store), "--limit", "4",
                                "--quiet"]).exit_code == 0  # fmt: skip
    assert len(_samples(store / "x")) == 4
    other = runner.invoke(main, [*args[:2], "sim:seed=2", *args[3:], "--limit", "5"])
    assert other.exit_code == 2 and "exists with other inputs" in other.output


# the user's code a recording runs: a module of an --agent factory, of --tools, and one that
# defines a tool's function for the module --tools names
AGENT_V1 = "from replay_fixtures import react_graph as build\n"
TOOL_V1 = '''
def multiply_numbers(a: float, b: float) -> dict:
    """Multiply two numbers and return their product."""
    return {"result": a * b}
'''
TOOLS_MODULE = """
from tcbreplay._inputs.benchmarks.tool_call.tools import add_numbers, list_items
from {impl} import multiply_numbers

TOOLS = [list_items, add_numbers, multiply_numbers]
"""


def test_a_run_whose_agent_or_tools_code_changed_is_refused_as_other_inputs(tmp_path, monkeypatch):
    """A run resumed after its --agent module or a tool's body was edited took the new code
    beside the samples of the old (exit 0, the manifest keeping the first module's sha256):
    the fingerprint hashed the MODULE:FACTORY string and the tool specs alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = {"agent": "agent_code_x", "tools": "tools_code_x", "impl": "tool_impl_x"}
    for name in names.values():
        monkeypatch.delitem(sys.modules, name, raising=False)
    files = {key: tmp_path / f"{name}.py" for key, name in names.items()}
    files["agent"].write_text(AGENT_V1)
    files["impl"].write_text(TOOL_V1)
    files["tools"].write_text(TOOLS_MODULE.format(impl=names["impl"]))
    runner = CliRunner()
    args = ["record", "--model", "sim:seed=1", "--agent", f"{names['agent']}:build", "--tools",
            f"{names['tools']}:TOOLS", "--store", str(tmp_path / "traces"), "--quiet"]  # fmt: skip

    def record(limit: int):
        return runner.invoke(main, [*args, "--limit", str(limit)])

    first = record(2)
    assert first.exit_code == 0, first.output
    (run_dir,) = (tmp_path / "traces").iterdir()
    for key, edit, says in [
        ("agent", "# another prompt\n", f"the module of --agent {names['agent']}:build changed"),
        ("tools", "# another tool\n", f"the module of --tools {names['tools']}:TOOLS changed"),
        ("impl", "# another body\n", "the code of --agent or --tools"),
    ]:
        before = files[key].read_text()
        files[key].write_text(before + edit)
        refused = record(4)
        assert refused.exit_code == 2, refused.output
        assert f"Error: run '{run_dir.name}' exists with other inputs (" in refused.stderr
        assert says in refused.stderr
        resumed = runner.invoke(main, ["record", "--resume", run_dir.name, "--store",
                                       str(tmp_path / "traces"), "--limit", "4"])  # fmt: skip
        assert resumed.exit_code == 2 and says in resumed.stderr, resumed.output
        assert len(_samples(run_dir)) == 2
        files[key].write_text(before)  # put back: the run goes on
    assert record(3).exit_code == 0
    assert len(_samples(run_dir)) == 3


def test_a_run_of_ones_own_agent_an_older_tcbreplay_recorded_is_resumed_as_before(
    tmp_path, monkeypatch
):
    """Its manifest holds the fingerprint of its inputs without the code's sha256."""
    from tcbreplay._record.runner import fingerprint

    store = tmp_path / "traces"
    agent = "replay_fixtures:react_graph"
    args = ["record", "--model", "sim:seed=1", "--agent", agent, "--run-id", "x", "--store",
            str(store), "--quiet"]  # fmt: skip
    runner = CliRunner()
    assert runner.invoke(main, [*args, "--limit", "2"]).exit_code == 0
    path = store / "x" / "manifest.json"
    manifest = json.loads(path.read_text())
    former = fingerprint(load_inputs("tool-call"), parse_model("sim:seed=1"), agent)
    assert former != manifest["fingerprint"]
    path.write_text(json.dumps({**manifest, "fingerprint": former}))
    resumed = runner.invoke(main, [*args, "--limit", "3"])
    assert resumed.exit_code == 0, resumed.output
    assert len(_samples(store / "x")) == 3


def test_a_recording_that_records_nothing_leaves_the_manifest_as_it_was(tmp_path):
    """A CI job's record step run again wrote a new finish time (and a duration of 0) into
    the manifest, which the scoring's audit record hashes: audit verify failed, exit 1. A
    resume adds its duration to the run's, as it adds its tokens."""
    store = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=1", "--run-id", "x", "--store", str(store), "--quiet"]
    runner = CliRunner()
    assert runner.invoke(main, [*args, "--limit", "3"]).exit_code == 0
    first = json.loads((store / "x" / "manifest.json").read_text())["totals"]["duration_s"]
    assert runner.invoke(main, [*args, "--limit", "6"]).exit_code == 0  # three more
    totals = json.loads((store / "x" / "manifest.json").read_text())["totals"]
    assert totals["recorded"] == 6 and totals["duration_s"] > first > 0
    assert runner.invoke(main, ["score", "x", "--store", str(store)]).exit_code == 0
    manifest = (store / "x" / "manifest.json").read_bytes()
    again = runner.invoke(main, [*args, "--limit", "6"])
    assert again.exit_code == 0 and "nothing to record" in again.output
    assert (store / "x" / "manifest.json").read_bytes() == manifest
    verified = runner.invoke(main, ["audit", "verify", "x", "--store", str(store)])
    assert verified.exit_code == 0, verified.output


@pytest.mark.parametrize(
    ("drop", "missing"),
    [("dataset", "dataset"),
     pytest.param("tools", "tools.source, tools.specs", marks=pytest.mark.slow)],  # (2.3 s)
)  # fmt: skip
def test_resume_names_what_its_manifest_lacks(tmp_path, drop, missing):
    """--resume rebuilds the inputs from the manifest: a manifest without them is one error
    naming what is missing, and the run's data files stay as they were."""
    store = tmp_path / "traces"
    args = ["record", "--model", "sim", "--run-id", "x", "--store", str(store), "--quiet"]
    assert CliRunner().invoke(main, args).exit_code == 0
    path = store / "x" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest[drop]
    manifest["status"] = "interrupted"
    path.write_text(json.dumps(manifest))
    before = {p.name: p.read_bytes() for p in (store / "x").glob("*.*") if p.name != "writer.lock"}
    result = CliRunner().invoke(main, ["record", "--resume", "x", "--store", str(store)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"Error: {path}: no {missing}, from which the run's inputs are rebuilt"
    ]
    after = {p.name: p.read_bytes() for p in (store / "x").glob("*.*") if p.name != "writer.lock"}
    assert after == before


# -- retries against the Gemini wire protocol -----------------------------------------------


@pytest.fixture
def gemini(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "fake-key-for-loopback")
    entries = [{"id": "mul", "input": "What is 2 times 3?",
                "target": [{"name": "multiply_numbers", "args": {"a": 3, "b": 2}}]}]  # fmt: skip
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(entries))
    inputs = load_inputs(None, path, BUILTIN.tools, BUILTIN.system_prompt)
    script = {"What is 2 times 3?": [[("multiply_numbers", {"a": 3, "b": 2})]]}
    with GeminiServer(script) as server:
        yield server, inputs, Store(tmp_path / "traces")


def _gemini_record(server, inputs, store, **options):
    spec = parse_model("google_genai:gemini-2.5-flash", {"base_url": server.url})
    return record_run(inputs, spec, store, run_id="g", options=RecordOptions(**options))


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_retry_after_is_honoured(gemini):
    server, inputs, store = gemini
    server.inject(Fault.rate_limit(retry_after=1), requests=[1])
    summary = _gemini_record(server, inputs, store, retries=2, backoff=0.01)
    assert summary.ok == 1 and summary.retries == 1
    first, second = server.requests[0], server.requests[1]
    assert first.status == 429
    assert second.at - first.at >= 0.95  # backoff alone would be ~0.01 s


def test_a_wait_longer_than_retries_wait_stops_the_run_without_retrying(gemini):
    """A used-up quota's 429 asks for an hour: a retry two minutes later would only be
    refused again, so the run stops at once and says when to run it again."""
    server, inputs, store = gemini
    server.inject(Fault.rate_limit(retry_after=3600))
    with pytest.raises(
        RecordError,
        match=r"asks to wait 3,600 s .* longer than retries wait "
        r"\(120 s\): a quota is used up .*429.*continue once it is over",
    ):
        _gemini_record(server, inputs, store, retries=5, backoff=0.01)
    assert len(server.requests) == 1  # not retried
    (row,) = _samples(store.run_dir("g"))
    assert row["status"] == "error" and row["attempts"] == 1


def test_hung_model_call_is_retried_after_call_timeout(gemini):
    server, inputs, store = gemini
    server.inject(Fault.hang(20), requests=[1])
    t0 = time.monotonic()
    summary = _gemini_record(server, inputs, store, retries=2, backoff=0.01, call_timeout=1)
    assert time.monotonic() - t0 < 15
    (row,) = _samples(Path(summary.run_dir))
    assert row["status"] == "ok"
    assert row["attempts"] == 2


def test_model_call_past_call_timeout_every_time_is_stored_as_such(gemini):
    """A call that hangs at every attempt is an error of its own kind (CallTimeout), not the
    sample's --timeout, which it did not reach."""
    server, inputs, store = gemini
    server.inject(Fault.hang(20), input="What is 2 times 3?")
    # no call of the run was ever answered: the recording stops (issue #22), the sample kept
    with pytest.raises(RecordError, match=r"no model call was answered.*--call-timeout"):
        _gemini_record(server, inputs, store, retries=1, backoff=0.01, call_timeout=0.5)
    (row,) = _samples(store.run_dir("g"))
    assert row["status"] == "error" and row["attempts"] == 2
    assert row["error_type"] == "CallTimeout"
    assert "within 300" not in row["error"]


def test_auth_failure_fails_fast(gemini):
    server, inputs, store = gemini
    server.inject(Fault.error(403, "API key not valid"), input="What is 2 times 3?")
    with pytest.raises(RecordError, match="the API key may not use"):
        _gemini_record(server, inputs, store, retries=5, backoff=0.01)
    (row,) = _samples(store.run_dir("g"))
    assert row["status"] == "error" and row["attempts"] == 1
    assert len(server.requests) == 1


def test_rate_limited_run_records_tokens_in_manifest(gemini):
    server, inputs, store = gemini
    summary = _gemini_record(server, inputs, store, max_rpm=600)
    manifest = json.loads((Path(summary.run_dir) / "manifest.json").read_text())
    messages = pq.read_table(Path(summary.run_dir) / "messages.parquet").to_pylist()
    assert manifest["totals"]["input_tokens"] == sum(m["input_tokens"] or 0 for m in messages) > 0
    assert manifest["totals"]["output_tokens"] == sum(m["output_tokens"] or 0 for m in messages)
    assert manifest["runner"]["max_rpm"] == 600


# -- the retry policy and the limiter -------------------------------------------------------


class _Status(Exception):
    def __init__(self, code: int, headers: dict | None = None):
        super().__init__(f"HTTP {code}")
        self.code = code
        self.response = type("R", (), {"headers": headers or {}, "status_code": code})()


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (_Status(429), True),
        (_Status(500), True),
        (_Status(503), True),
        (_Status(400), False),
        (_Status(401), False),
        (_Status(403), False),
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (ValueError("bug"), False),
    ],
)
def test_is_transient(exc, transient):
    assert is_transient(exc) is transient


def test_is_transient_follows_the_cause_chain():
    try:
        try:
            raise _Status(503)
        except _Status as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_transient(outer)


def test_retry_after_header_and_retry_info():
    assert retry_after(_Status(429, {"retry-after": "7"})) == 7.0
    exc = RuntimeError("x")
    exc.details = {"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                          "retryDelay": "12s"}]}}  # fmt: skip
    assert retry_after(exc) == 12.0
    assert retry_after(ValueError()) is None
    assert backoff_delay(0.01, 1, _Status(429, {"retry-after": "3"})) >= 3.0
    delays = [backoff_delay(1.0, attempt) for attempt in (1, 2, 3, 4)]
    assert all(0.5 * 2**k <= d <= 1.5 * 2**k for k, d in enumerate(delays))
    # a retry past the 1,024th (--retries has no cap) waits the longest, no OverflowError
    assert backoff_delay(1.0, 5000) == backoff_delay(0.001, 10**6) == 120.0


def test_rate_limiter_keeps_calls_per_window():
    clock = FakeClock()

    async def run() -> list[float]:
        limiter = RateLimiter(rpm=4, window=60, clock=clock)
        starts = []
        for _ in range(10):  # 4 + 4 + 2: two full windows of waiting
            await limiter.acquire()
            starts.append(clock.monotonic() - clock.start)
            clock.advance(1.0)  # each call takes a second
        return starts

    starts = asyncio.run(run())
    # calls 5 and 9 wait until the first of the window's calls is 60 s old
    assert starts == [0, 1, 2, 3, 60, 61, 62, 63, 120, 121]
    assert clock.sleeps == [56.0, 56.0]


def test_rate_limiter_waits_for_tokens():
    clock = FakeClock()

    async def run() -> float:
        limiter = RateLimiter(tpm=100, window=60, clock=clock)
        await limiter.acquire()
        clock.advance(5)
        limiter.record_tokens(150)  # over the limit: the next call waits for the window
        await limiter.acquire()
        return clock.monotonic() - clock.start

    assert asyncio.run(run()) == 65.0
    assert clock.sleeps == [60.0]


def test_rate_limiter_lets_tokens_below_the_limit_through_at_once():
    clock = FakeClock()

    async def run() -> None:
        limiter = RateLimiter(tpm=100, window=60, clock=clock)
        for _ in range(3):
            await limiter.acquire()
            limiter.record_tokens(30)

    asyncio.run(run())
    assert clock.sleeps == []


def test_retry_after_as_a_date_is_read_against_the_clock():
    from email.utils import formatdate

    clock = FakeClock()
    date = formatdate(clock.now() + 30, usegmt=True)
    assert retry_after(_Status(429, {"retry-after": date}), clock) == 30.0
    assert backoff_delay(0.01, 1, _Status(503, {"retry-after": date}), clock) == 30.0
    past = formatdate(clock.now() - 30, usegmt=True)
    assert retry_after(_Status(429, {"retry-after": past}), clock) == 0.0


# -- progress -------------------------------------------------------------------------------


@pytest.mark.slow
def test_progress_lines_when_not_a_terminal_and_quiet(tmp_path):
    runner = CliRunner()
    loud = runner.invoke(main, ["record", "--model", "sim", "--run-id", "p", "--store",
                                str(tmp_path / "a")])  # fmt: skip
    assert loud.exit_code == 0
    assert f"recorded {N_SAMPLES}/{N_SAMPLES}" in loud.output
    assert "errors 0" in loud.output and "retries 0" in loud.output
    quiet = runner.invoke(main, ["record", "--model", "sim", "--run-id", "p", "--store",
                                 str(tmp_path / "b"), "--quiet"])  # fmt: skip
    assert quiet.exit_code == 0
    assert "recorded 1/" not in quiet.output
    assert "(simulated model)" in quiet.output


# -- a run that cannot be resumed ------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "how", "code"),
    [
        ("samples.parquet", "--resume", 1),
        ("messages.parquet", "--resume", 1),
        ("samples.parquet", "same command", 1),
        ("other inputs", "same command", 2),
    ],
)
def test_a_run_that_cannot_be_resumed_is_left_as_it_was(sim_copy, case, how, code):
    """A truncated data file is one error naming it, found before the run is taken: no
    journal is started and the lock file is not rewritten (nor for other inputs)."""
    root, run_id = sim_copy
    if case.endswith(".parquet"):
        with (root / run_id / case).open("r+b") as f:
            f.truncate(500)
    seed = 8 if case == "other inputs" else 7  # the session's run has seed 7
    args = (
        ["--resume", run_id]
        if how == "--resume"
        else ["--model", f"sim:seed={seed},error_rate=0.3", "--run-id", run_id]
    )
    before = snapshot(root)
    result = CliRunner().invoke(main, ["record", *args, "--store", str(root), "--quiet"])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1
    where = f"{root / run_id / case}: " if case.endswith(".parquet") else f"run {run_id!r} "
    assert errors[0].startswith(f"Error: {where}"), errors
    assert snapshot(root) == before


def _sdk_error(kind: str, status: int) -> Exception:
    """An exception of a provider SDK's own type for an HTTP status, as its client raises it."""
    import httpx

    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1:1/v1"))
    if kind == "openai":
        import openai

        return openai.APIStatusError(f"Error code: {status}", response=response, body=None)
    import anthropic

    return anthropic.APIStatusError(f"Error code: {status}", response=response, body=None)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("status", "transient"),
    [(529, True), (520, True), (522, True), (524, True), (501, False), (400, False)],
)
def test_every_5xx_but_501_and_505_is_transient(kind, status, transient):
    """Anthropic's 529 (overloaded) and Cloudflare's 52x failed a sample at once."""
    assert is_transient(_sdk_error(kind, status)) is transient


def test_a_200_whose_body_is_no_json_is_transient():
    """langchain-openai gives the 200 response with the JSONDecodeError: the status was
    taken for the verdict (not transient), and one proxy blip failed the sample."""
    import json

    import httpx

    try:
        json.loads("<html>502 Bad Gateway</html>")
    except json.JSONDecodeError as exc:
        exc.response = httpx.Response(200, request=httpx.Request("POST", "http://127.0.0.1:1"))
        assert is_transient(exc)
    assert not is_transient(_sdk_error("openai", 404))


def test_a_stop_on_server_errors_does_not_blame_reaching_the_server():
    """Every first call answered 503: the stop said to check the endpoint could be reached."""
    from tcbreplay._record.failures import _unanswered_fix

    answered = _unanswered_fix("OpenAIAPIError: Error code: 503 - overloaded", "http://h/v1")
    assert answered.startswith("the provider answered with server errors: try again later")
    overloaded = _unanswered_fix("AnthropicOverloadedError: Overloaded", None)
    assert "can be reached" not in overloaded
    unreached = _unanswered_fix("APIConnectionError: Connection error.", "http://h/v1")
    assert unreached.startswith("check that http://h/v1 can be reached")


@pytest.mark.parametrize("call_timeout", [None, 30.0])
def test_a_timeout_of_the_clients_own_is_not_said_as_call_timeouts(call_timeout):
    """A TimeoutError the provider's client raised itself (aiohttp's read timeout) was said as
    --call-timeout's "did not answer within ... s", and without a --call-timeout it raised
    TypeError (None formatted as a number)."""
    import asyncio
    from types import SimpleNamespace

    from tcbreplay._record.agent import CallPolicy, _middleware

    async def handler(_request):
        raise TimeoutError("Timeout on reading data from socket")

    recording = _middleware(CallPolicy(retries=0, call_timeout=call_timeout))
    with pytest.raises(TimeoutError, match=r"^Timeout on reading data from socket$"):
        asyncio.run(recording.awrap_model_call(SimpleNamespace(model=None), handler))
