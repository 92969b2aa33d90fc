"""A failed recording must not look like a passed one (issue #22).

Errors that retrying cannot fix stop the recording at once, a run whose model calls are never
answered stops after its first wave of samples, and samples left in error make ``record`` exit
non-zero unless ``--max-errors`` allows them; the run is kept and can be resumed, with
corrected transport settings. Against the loopback Gemini server and a closed loopback port,
through the command line.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from gemini_server import Fault, GeminiServer
from helpers import cli

from tcbreplay._inputs.benchmarks import BENCHMARKS
from tcbreplay._words import count
from tcbreplay.errors import InputError

KEY = "fake-gemini-key-for-issue-22"
MODEL = "google_genai:gemini-2.5-flash"
TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
N = 20


def _text(i: int) -> str:
    return f"What is {i} times 3?"


SCRIPT = {_text(i): [[("multiply_numbers", {"a": i, "b": 3})]] for i in range(N)}


@pytest.fixture
def key(monkeypatch) -> str:
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    return KEY


@pytest.fixture
def dataset(tmp_path) -> Path:
    """N samples of one call each: two model requests per sample."""
    entries = [
        {"id": f"m{i}", "input": _text(i),
         "target": [{"name": "multiply_numbers", "args": {"a": i, "b": 3}}]}
        for i in range(N)
    ]  # fmt: skip
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(entries))
    return path


@pytest.fixture
def server():
    with GeminiServer(SCRIPT) as srv:
        yield srv


def _closed_port_url() -> str:
    """A loopback address nothing listens on: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _record(dataset: Path, store: Path, base_url: str | None, *args: object):
    options = ["--model-option", f"base_url={base_url}"] if base_url else []
    return cli(
        "record", "--dataset", dataset, "--tools", TOOLS, "--model", MODEL, *options,
        "--system-prompt", BENCHMARKS["tool-call"].system_prompt, "--store", store,
        "--run-id", "r", "--backoff", "0.01", "--quiet", *args,
    )  # fmt: skip


def _errors(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def _manifest(store: Path) -> dict:
    return json.loads((store / "r" / "manifest.json").read_text())


def _rows(store: Path, run_id: str = "r") -> list[dict]:
    return pq.read_table(store / run_id / "samples.parquet").to_pylist()


# -- errors retrying cannot fix stop the run at the first one --------------------------------


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (Fault.error(401, "Request had invalid authentication credentials."),
         "the provider refused the API key"),
        (Fault.bad_key(), "the provider refused the API key"),
        (Fault.error(403, "Permission denied on resource project."),
         f"the API key may not use {MODEL}"),
        (Fault.error(404, "models/gemini-2.5-flash is not found for API version v1beta"),
         "no model 'gemini-2.5-flash' at http://127.0.0.1:"),
    ],
    ids=["401", "google-bad-key-400", "403", "404"],
)  # fmt: skip
def test_an_error_retrying_cannot_fix_stops_the_recording_in_one_line(
    dataset, server, key, tmp_path, fault, says
):
    server.inject(fault)  # every request
    store = tmp_path / "traces"
    t0 = time.monotonic()
    result = _record(dataset, store, server.url, "--workers", "1", "--retries", "5")

    assert result.exit_code == 1, result.output
    (error,) = _errors(result)
    assert error.startswith(f"Error: recording of r stopped: {says}")
    fix = "set GOOGLE_API_KEY to" if fault.status in (400, 401, 403) else "check --model"
    assert fix in error
    assert "Traceback" not in result.output
    assert "next: tcbreplay score" not in result.output
    hint = result.stderr.splitlines()[-1]
    assert hint.startswith("Hint: the run keeps its 1 finished sample; once fixed, continue ")
    assert f"tcbreplay record --retry-errors r --store {store}" in hint
    # the first request told all: not retried, no other sample tried
    assert len(server.requests) == 1
    assert time.monotonic() - t0 < 10
    manifest = _manifest(store)
    assert manifest["status"] == "failed"
    assert manifest["stopped"].startswith(stop_reason_of(fault))
    (row,) = _rows(store)
    assert (row["status"], row["attempts"]) == ("error", 1)
    assert KEY not in result.output


def stop_reason_of(fault: Fault) -> str:
    return {401: "authentication", 400: "authentication", 403: "permission"}.get(
        fault.status, "unknown model"
    )


def test_an_all_401_record_with_several_workers_stops_within_its_first_wave(
    dataset, server, key, tmp_path
):
    server.inject(Fault.error(401, "Request had invalid authentication credentials."))
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--workers", "4")

    assert result.exit_code == 1, result.output
    assert len(_errors(result)) == 1
    assert len(server.requests) <= 4  # one per worker at most, none retried
    assert 1 <= len(_rows(store)) <= 4
    assert result.stdout.startswith("run r: 0/20 ok (stopped), ")


# -- a run none of whose calls is answered stops after one retry cycle ------------------------


@pytest.mark.parametrize("processes", ["1", "2"])
def test_an_unreachable_host_stops_the_recording_within_one_retry_cycle(
    dataset, key, tmp_path, processes
):
    url = _closed_port_url()
    store = tmp_path / "traces"
    t0 = time.monotonic()
    result = _record(
        dataset, store, url, "--workers", "2", "--processes", processes, "--retries", "1"
    )

    assert result.exit_code == 1, result.output
    (error,) = _errors(result)
    assert error.startswith(
        "Error: recording of r stopped: no model call was answered: the first 2 samples failed "
        "after their retries ("
    )
    assert f"check that {url} can be reached (--model-option base_url=" in error
    assert time.monotonic() - t0 < 30
    rows = _rows(store)
    assert 2 <= len(rows) < N  # the first wave, and what was in flight when it ended
    assert {(r["status"], r["attempts"]) for r in rows} == {("error", 2)}  # retried once
    assert _manifest(store)["status"] == "failed"
    assert "next: tcbreplay score" not in result.output


def test_a_wave_refused_with_a_400_is_said_to_have_failed_not_after_retries(
    dataset, server, key, tmp_path
):
    """A 400 is not retried, yet the line said "the first 2 samples failed after their
    retries"."""
    server.inject(Fault.error(400, "Unsupported parameter: 'foo'"))  # every request
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--workers", "2", "--retries", "3")
    assert result.exit_code == 1, result.output
    (error,) = _errors(result)
    assert error.startswith(
        "Error: recording of r stopped: no model call was answered: the first 2 samples failed "
        "(GoogleInvalidRequestError: 400 INVALID_ARGUMENT: Unsupported parameter: 'foo'): "
    )
    assert error.endswith("the provider refuses the request: check --model and --model-option "
                          "settings")  # fmt: skip
    assert {r["attempts"] for r in _rows(store)} == {1}  # (not retried)


def test_a_stopped_run_is_completed_by_retry_errors_with_a_corrected_base_url(
    dataset, server, key, tmp_path
):
    store = tmp_path / "traces"
    first = _record(dataset, store, _closed_port_url(), "--workers", "2", "--retries", "0")
    assert first.exit_code == 1
    assert "--model-option base_url=" in first.stderr.splitlines()[-1]  # the hint says how

    args = ["record", "--retry-errors", "r", "--store", store, "--quiet"]
    wrong = cli(*args, "--model-option", "temperature=0.5")
    assert wrong.exit_code == 2
    assert _errors(wrong) == [
        "Error: --model-option temperature: a resumed run keeps its model settings; only how "
        "requests travel may change (additional_headers, base_url, client_args, max_retries, "
        "request_timeout, timeout)"
    ]
    fixed = cli(*args, "--model-option", f"base_url={server.url}")
    assert fixed.exit_code == 0, fixed.output
    assert f"run r: {N}/{N} ok, 0 errors" in fixed.stdout
    assert "next: tcbreplay score r" in fixed.stdout
    manifest = _manifest(store)
    assert manifest["status"] == "complete"
    assert "stopped" not in manifest or manifest["stopped"] is None
    assert manifest["model"]["settings"]["base_url"] == server.url  # kept for the next resume
    assert {r["status"] for r in _rows(store)} == {"ok"}
    assert len(_rows(store)) == N


def test_the_sim_failing_every_call_stops_after_its_first_wave(tmp_path):
    """Offline: the same rule with the sim model, in one process and in two."""
    for processes in ("1", "2"):
        store = tmp_path / f"traces{processes}"
        result = cli(
            "record", "--model", "sim:fault_rate=1", "--retries", "1", "--backoff", "0",
            "--workers", "4", "--processes", processes, "--run-id", "r", "--store", store,
            "--quiet",
        )  # fmt: skip
        assert result.exit_code == 1, result.output
        (error,) = _errors(result)
        # (the sim's fault is a 503: answered, with a server error)
        assert "no model call succeeded: the first 4 samples failed after their retries" in error
        assert "the provider answered with server errors: try again later" in error
        assert "SimTransientError" in error
        assert len(_rows(store)) < 94


@pytest.mark.slow  # (two recordings and a replay: 3 s)
def test_an_agent_of_ones_own_whose_samples_fail_after_answers_is_not_stopped(tmp_path):
    """Only the built-in agent counted answered model calls: an agent of one's own failing
    its first wave of samples was stopped as if no call had been answered (\"check that the
    provider can be reached\"), --max-errors ignored; and its replay likewise."""
    store = tmp_path / "traces"
    agent = "replay_fixtures:crash_on_answers"
    result = cli("record", "--model", "sim:seed=3", "--agent", agent, "--run-id", "crash",
                 "--limit", "12", "--workers", "2", "--max-errors", "100%", "--quiet",
                 "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = _rows(store, "crash")
    assert len(rows) == 12 and {r["status"] for r in rows} == {"error"}
    assert cli("record", "--model", "sim:seed=3", "--agent", "replay_fixtures:react_graph",
               "--run-id", "base", "--limit", "12", "--workers", "2", "--quiet",
               "--store", store).exit_code == 0  # fmt: skip
    replayed = cli("replay", "base", "--agent", agent, "--run-id", "again", "--workers", "2",
                   "--store", store)  # fmt: skip
    assert "stopped" not in replayed.output, replayed.output
    assert len(_rows(store, "again")) == 12


# -- an agent of one's own keeps to the same rules --------------------------------------------

# a graph whose model node is a coroutine, and one whose node is a plain function (run by
# LangGraph in a thread), calling the model they are given
AGENTS = ["replay_fixtures:react_graph", "replay_fixtures:sync_graph"]


@pytest.mark.parametrize("agent", AGENTS, ids=["async", "sync"])
def test_an_agent_of_ones_own_retries_a_rate_limit_as_the_built_in_one(
    dataset, server, key, tmp_path, agent
):
    """--agent's model was the run's with its SDK's retries off (for tcbreplay's own, which
    only the built-in agent had): one 429 failed its sample at attempts 1, --retries 5 or
    not, while the manifest said retries 5."""
    server.inject(Fault.rate_limit(retry_after=0), input=_text(3), times=1)
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--agent", agent, "--retries", "5",
                     "--workers", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["sample_id"]: r for r in _rows(store)}
    assert len(rows) == N and {r["status"] for r in rows.values()} == {"ok"}
    assert rows["m3"]["attempts"] == 2
    assert {r["attempts"] for k, r in rows.items() if k != "m3"} == {1}
    assert _manifest(store)["totals"]["retries"] == 1
    assert sum(r.status == 429 for r in server.requests) == 1


@pytest.mark.parametrize("agent", AGENTS, ids=["async", "sync"])
@pytest.mark.parametrize("first", [1, 5], ids=["refused-at-once", "revoked-later"])
def test_an_agent_of_ones_own_stops_at_the_first_refused_key(
    dataset, server, key, tmp_path, agent, first
):
    """A key refused from the first request was said as "no model call was answered ...
    check that http://... can be reached"; one revoked after 4 requests failed every sample
    after it (18 of 20) where the built-in agent stops at the first."""
    refused = Fault.error(401, "Request had invalid authentication credentials.")
    server.inject(refused, requests=range(first, 1000))
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--agent", agent, "--retries", "5",
                     "--workers", "1")  # fmt: skip
    assert result.exit_code == 1, result.output
    (error,) = _errors(result)
    assert error.startswith("Error: recording of r stopped: the provider refused the API key")
    assert "set GOOGLE_API_KEY to a valid key" in error
    assert len(server.requests) == first  # the 401 not retried, no sample after it
    assert _manifest(store)["stopped"].startswith("authentication")
    rows = _rows(store)
    assert [r["status"] for r in rows] == ["ok"] * ((first - 1) // 2) + ["error"]
    assert KEY not in result.output


def test_an_agent_calling_a_model_it_made_itself_is_warned_of_once(tmp_path):
    """The recording's retries and rate limits hold the model a factory is given: a graph
    that calls another is said, once."""
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=3", "--agent", "replay_fixtures:own_model",
                 "--limit", "4", "--workers", "2", "--quiet", "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "Warning: --agent replay_fixtures:own_model: its graph calls a model it was not given "
        "(SimChatModel): --retries, --max-rpm, --max-tpm and --call-timeout do not apply to "
        "its calls (build the graph with the model it is given)"
    ]
    quiet = cli("record", "--model", "sim:seed=3", "--agent", "replay_fixtures:react_graph",
                "--limit", "4", "--quiet", "--store", store)  # fmt: skip
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output


# -- samples left in error: --max-errors -----------------------------------------------------


FAULTS = range(20, 1000, 20)  # every 20th request: 5% transient faults


def test_five_percent_transient_faults_are_retried_and_exit_0(dataset, server, key, tmp_path):
    server.inject(Fault.error(503), requests=FAULTS)
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--workers", "4")

    assert result.exit_code == 0, result.output
    rows = _rows(store)
    assert {r["status"] for r in rows} == {"ok"}
    assert sum(r["attempts"] - 1 for r in rows) == sum(
        1 for r in server.requests if r.status == 503
    )
    assert "next: tcbreplay score r" in result.stdout


def test_samples_left_in_error_exit_non_zero_with_an_end_line_saying_what_failed(
    dataset, server, key, tmp_path
):
    server.inject(Fault.error(503), requests=FAULTS)
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--workers", "4", "--retries", "0")

    failed = sum(1 for r in server.requests if r.status == 503)
    assert failed >= 1
    assert result.exit_code == 1, result.output
    assert _errors(result) == [
        f"Error: {failed} of {N} samples of run r ended in error (GoogleAPIError x{failed}); "
        "--max-errors allows 0"
    ]
    assert result.stderr.splitlines()[-1].startswith(
        f"Hint: once fixed, continue with: tcbreplay record --retry-errors r --store {store}"
    )
    assert "next: tcbreplay score" not in result.output
    assert result.stdout.startswith(f"run r: {N - failed}/{N} ok, {count(failed, 'error')}")
    # the run is complete, its errors stored as rows, and it scores
    assert _manifest(store)["status"] == "complete"
    assert sum(r["status"] == "error" for r in _rows(store)) == failed
    assert cli("score", "r", "--store", store).exit_code == 0


@pytest.mark.parametrize("allowed", ["10%", "0.1", "2"])
def test_max_errors_allows_some_samples_in_error(dataset, server, key, tmp_path, allowed):
    server.inject(Fault.error(503), requests=FAULTS)
    store = tmp_path / "traces"
    result = _record(
        dataset, store, server.url, "--workers", "4", "--retries", "0", "--max-errors", allowed
    )

    assert result.exit_code == 0, result.output
    failed = sum(r["status"] == "error" for r in _rows(store))
    assert 1 <= failed <= 2
    assert f"errors: GoogleAPIError x{failed} (within --max-errors" in result.stdout
    assert "next: tcbreplay score r" in result.stdout


@pytest.mark.slow  # (about 3 s under load)
def test_a_400_of_one_sample_in_a_run_that_answers_is_that_samples_error(
    dataset, server, key, tmp_path
):
    """A request the provider refuses for one sample only does not stop the run."""
    server.inject(Fault.error(400, "Invalid JSON payload received."), input=_text(7))
    store = tmp_path / "traces"
    result = _record(dataset, store, server.url, "--workers", "1", "--max-errors", "1")

    assert result.exit_code == 0, result.output
    rows = {r["sample_id"]: r for r in _rows(store)}
    assert len(rows) == N
    assert rows["m7"]["status"] == "error"


@pytest.mark.parametrize(
    ("text", "count", "fraction"),
    [("0", 0, None), ("5", 5, None), ("0.05", None, 0.05), ("5%", None, 0.05), ("1.0", None, 1.0)],
)
def test_max_errors_parses_a_count_or_a_fraction(text, count, fraction):
    from tcbreplay._record.failures import MaxErrors

    assert MaxErrors.parse(text) == MaxErrors(count=count, fraction=fraction)


def test_max_errors_counts_and_fractions():
    from tcbreplay._record.failures import MaxErrors

    assert MaxErrors.parse("0").allows(0, 10) and not MaxErrors.parse("0").allows(1, 10)
    assert MaxErrors.parse("10%").allows(1, 10) and not MaxErrors.parse("10%").allows(2, 10)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("-1", "--max-errors -1: must not be negative"),  # (was "a fraction must be ...")
        ("abc", "--max-errors abc: expected a number"),
        ("150%", "a fraction must be between"),
        ("1.5", "a fraction must be between"),
        ("nan", "a fraction must be between"),
    ],
)
def test_a_bad_max_errors_is_refused_before_anything_is_written(tmp_path, text, said):
    from tcbreplay._record.failures import MaxErrors

    with pytest.raises(InputError, match=re.escape(said)):
        MaxErrors.parse(text)
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim", "--max-errors", text, "--store", store)
    assert result.exit_code == 2
    assert _errors(result)[0].startswith(f"Error: --max-errors {text}")
    assert not store.exists()


# -- the breaker, alone ----------------------------------------------------------------------


def test_the_breaker_stops_on_a_whole_unanswered_wave_and_never_once_answered():
    from tcbreplay._record.failures import AUTHENTICATION, Breaker, Outcome, RecordStop

    failed = Outcome("error", answered=False, error="ConnectError: refused")
    breaker = Breaker(wave=3)
    breaker.see(failed)
    breaker.see(failed)
    with pytest.raises(RecordStop) as stop:
        breaker.see(failed)
    assert (stop.value.reason, stop.value.failed) == ("unanswered", 3)
    breaker.see(failed)  # tripped once only

    answered = Breaker(wave=2)
    answered.see(Outcome("ok", answered=True))
    for _ in range(10):
        answered.see(failed)
    with pytest.raises(RecordStop):  # but an error no retry fixes stops it all the same
        answered.see(Outcome("error", answered=True, stop=AUTHENTICATION, error="x"))


def test_the_stop_line_says_after_retries_of_the_samples_that_were_retried():
    """It said "after their retries" of every wave, a 400 (never retried) too."""
    from tcbreplay._record.failures import Breaker, Outcome, RecordStop, stop_message

    def said(*attempts: int) -> str:
        breaker = Breaker(wave=len(attempts))
        with pytest.raises(RecordStop) as stop:
            for n in attempts:
                breaker.see(Outcome("error", False, error="ConnectError: refused", attempts=n))
        return stop_message(stop.value, None).partition(" (")[0]

    assert said(1, 1) == "no model call was answered: the first 2 samples failed"
    assert said(3) == "no model call was answered: the first sample failed after its retries"
    assert said(3, 1, 2) == (
        "no model call was answered: the first 3 samples failed, 2 of them after their retries"
    )


def test_stop_reasons_follow_langchains_error_types_and_status_codes():
    from langchain_core.exceptions import ModelAuthenticationError, ModelNotFoundError

    from tcbreplay._record.failures import (
        AUTHENTICATION,
        PERMISSION,
        UNKNOWN_MODEL,
        stop_reason,
    )

    class Status(Exception):
        def __init__(self, code: int, text: str = "") -> None:
            super().__init__(text or f"HTTP {code}")
            self.status_code = code

    assert stop_reason(ModelAuthenticationError("no")) == AUTHENTICATION
    assert stop_reason(ModelNotFoundError("no")) == UNKNOWN_MODEL
    assert stop_reason(Status(401)) == AUTHENTICATION
    assert stop_reason(Status(403)) == PERMISSION
    assert stop_reason(Status(404)) == UNKNOWN_MODEL
    assert stop_reason(Status(400, "API key not valid. Please pass a valid API key.")) == (
        AUTHENTICATION
    )
    for transient_or_own in (Status(400, "Invalid JSON payload"), Status(429), Status(503)):
        assert stop_reason(transient_or_own) is None
    assert stop_reason(ValueError("a bug")) is None


# -- score and report of a run with errors ---------------------------------------------------


@pytest.fixture(scope="module")
def runs_with_and_without_errors(tmp_path_factory):
    """A store with a clean run of many mistakes (``clean``) and a run of few mistakes whose
    transient faults, not retried, left samples in error (``errors``): the latter's tp is
    higher all the same."""
    store = tmp_path_factory.mktemp("errors") / "traces"
    clean = cli("record", "--model", "sim:seed=1,error_rate=0.6", "--run-id", "clean",
                "--store", store, "--quiet")  # fmt: skip
    errors = cli("record", "--model", "sim:seed=1,error_rate=0,fault_rate=0.03",
                 "--retries", "0", "--run-id", "errors", "--max-errors", "50%", "--store", store,
                 "--quiet")  # fmt: skip
    assert clean.exit_code == 0 and errors.exit_code == 0, (clean.output, errors.output)
    assert "errors: SimTransientError x" in errors.stdout
    return store


def test_score_of_a_run_with_errors_says_so_above_the_metrics(runs_with_and_without_errors):
    store = runs_with_and_without_errors
    table = cli("score", "errors", "--store", store)
    assert table.exit_code == 0, table.output
    first, second = table.stdout.splitlines()[:2]
    n_errors = int(first.split()[1])
    assert n_errors >= 1
    assert first == (
        f"Warning: {n_errors} of 94 samples ended in error while recording and score with the "
        "calls made before the error: these metrics do not measure the model alone; re-run "
        "them with: "
        f"tcbreplay record --retry-errors errors --store {store}"
    )
    assert second.startswith("errors  (sim:seed=1,error_rate=0,fault_rate=0.03)")  # the table
    data = json.loads(cli("score", "errors", "--format", "json", "--store", store).stdout)
    assert next(iter(data)) == "warnings"  # first, before the metrics
    assert data["warnings"] == [first.removeprefix("Warning: ")]
    assert data["n_errors"] == n_errors
    clean = cli("score", "clean", "--store", store)
    assert "Warning" not in clean.output
    assert (
        json.loads(cli("score", "clean", "--format", "json", "--store", store).stdout)["warnings"]
        == []
    )


def test_the_report_shows_a_banner_and_does_not_rank_a_run_with_errors_first(
    runs_with_and_without_errors, tmp_path
):
    store = runs_with_and_without_errors
    summaries = {
        run: json.loads(cli("score", run, "--format", "json", "--store", store).stdout)
        for run in ("clean", "errors")
    }
    assert summaries["errors"]["tp"] > summaries["clean"]["tp"]  # it would rank first
    out = tmp_path / "r.html"
    result = cli("report", "errors", "clean", "-o", out, "--store", store)
    assert result.exit_code == 0, result.output
    page = out.read_text()
    board = page[page.index('id="leaderboard"') :]
    board = board[: board.index("</table>")]
    assert board.index('"swatch"></span>clean') < board.index('"swatch"></span>errors')
    assert '<td>1</td><td><span class="swatch"></span>clean</td>' in board
    assert '<td>—</td><td><span class="swatch"></span>errors <span class="tag errors">' in board
    n_errors = summaries["errors"]["n_errors"]
    assert page.count('class="banner"') == 1
    assert f'<div class="banner" role="alert">{n_errors} of 94 samples ended in error' in page


# -- other providers' real clients ------------------------------------------------------------

# What each provider answers to a key it does not accept (the bodies their APIs document).
_REFUSALS = {
    "openai": {
        "error": {"message": "Incorrect API key provided: sk-fake***.", "type":
                  "invalid_request_error", "param": None, "code": "invalid_api_key"}
    },
    "anthropic": {
        "type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}
    },
}  # fmt: skip


@contextlib.contextmanager
def _refusing_server(body: dict):
    """A loopback server answering 401 with ``body`` to every request; yields its URL and the
    number of requests so far (a list of one)."""
    seen = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen[0] += 1
            payload = json.dumps(body).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    ("model", "variable", "path"),
    [("openai:gpt-4o-mini", "OPENAI_API_KEY", "/v1"),
     pytest.param("anthropic:claude-opus-4-7", "ANTHROPIC_API_KEY", "",
                  marks=pytest.mark.slow)],  # (about 3.5 s: OpenAI's path is the same code)
)  # fmt: skip
def test_a_refused_key_stops_openai_and_anthropic_recordings_too(
    tmp_path, monkeypatch, model, variable, path
):
    pytest.importorskip(f"langchain_{model.split(':')[0]}")
    monkeypatch.setenv(variable, "fake-key-for-a-loopback-server")
    store = tmp_path / "traces"
    with _refusing_server(_REFUSALS[model.split(":")[0]]) as (url, seen):
        result = cli("record", "--model", model, "--model-option", f"base_url={url}{path}",
                     "--workers", "1", "--run-id", "r", "--store", store, "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    (error,) = _errors(result)
    assert error.startswith("Error: recording of r stopped: the provider refused the API key (")
    assert error.endswith(f"set {variable} to a valid key")
    assert seen[0] == 1  # neither the SDK nor tcbreplay tried again


@pytest.mark.parametrize(
    "model",
    ["openai:gpt-4o-mini",
     pytest.param("anthropic:claude-opus-4-7", marks=pytest.mark.slow)],  # (4 s; the same code)
)  # fmt: skip
def test_the_sdks_own_retries_are_off(monkeypatch, model):
    """tcbreplay retries and counts each attempt; an SDK retrying too would multiply them."""
    from tcbreplay._record.models import build_chat_model, parse_model

    provider = model.split(":")[0]
    pytest.importorskip(f"langchain_{provider}")
    monkeypatch.setenv(f"{provider.upper()}_API_KEY", "fake-key-for-a-loopback-server")
    assert build_chat_model(parse_model(model)).max_retries == 0
    assert build_chat_model(parse_model(model, {"max_retries": "3"})).max_retries == 3
