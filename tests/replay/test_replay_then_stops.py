"""A replay going on live (``--then``) stops as ``record`` stops when its live model cannot be
reached: once a first wave of samples has failed with no answer of the live model (the
recording's turns served answer whatever the live model does), with a hint that works for a
replay."""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path

import openai_server
import pytest
from helpers import cli

from tcbreplay._replay.run import replay_run
from tcbreplay._store.runs import Store
from tcbreplay.errors import RecordError, TcbReplayError

TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
ADD = {"id": "add", "input": "What is 25 plus 4.5?",
       "target": [{"name": "add_numbers", "args": {"a": 25, "b": 4.5}}]}  # fmt: skip
GREET = {"id": "greet", "input": "Hi there!", "target": []}
ADD_MORE = {"id": "add-more", "input": "What is 2 plus 3?",
            "target": [{"name": "add_numbers", "args": {"a": 2, "b": 3}}]}  # fmt: skip
GREET_MORE = {"id": "greet-more", "input": "Hello!", "target": []}
# what the loopback OpenAI server answers the samples that call a tool
SCRIPT = {ADD["input"]: [[("add_numbers", {"a": 25, "b": 4.5})]],
          ADD_MORE["input"]: [[("add_numbers", {"a": 2, "b": 3})]]}  # fmt: skip


@pytest.fixture(autouse=True)
def keys(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def parent(tmp_path) -> Path:
    """A store holding run ``r``: four samples recorded with the sim model, two of them
    calling a tool (two turns), two answering at once."""
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps([ADD, GREET, ADD_MORE, GREET_MORE]))
    (tmp_path / "prompt.txt").write_text("Use the tools.")
    store = tmp_path / "traces"
    result = cli("record", "--model", "sim", "--dataset", dataset, "--tools", TOOLS,
                 "--system-prompt", tmp_path / "prompt.txt", "--run-id", "r", "--store", store,
                 "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    return store


@pytest.fixture
def dead_url() -> str:
    """A loopback base URL nothing listens at (its connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(
    "change",
    [{"system_prompt": "terse"}, {"fork_at": 1}],
    ids=["diverged at turn 0", "recorded turn served, then live"],
)
def test_a_replay_whose_live_model_cannot_be_reached_stops_after_its_first_wave(
    parent, tmp_path, dead_url, change
):
    """Every sample went on live to a base URL nothing listens at, yet the replay ran them
    all (each with its retries) and ended "errors: OpenAIConnectionError x4": a sample that
    diverged, or was served a recorded turn, counted as answered."""
    if "system_prompt" in change:
        (tmp_path / "terse.txt").write_text("Be terse.")
        change = {"system_prompt": tmp_path / "terse.txt"}
    with pytest.raises(RecordError) as stop:
        replay_run(Store(parent), "r", new_run_id="again", then="openai:gpt-4o-mini",
                   then_options={"base_url": dead_url}, options={"workers": 2, "backoff": 0.01},
                   **change)  # fmt: skip
    assert str(stop.value) == (
        "replay of again stopped: no live model call was answered: the first 2 samples "
        "failed after their retries (OpenAIConnectionError: Connection error.): check that "
        f"{dead_url} can be reached (--model-option base_url=... for a proxy or a compatible "
        "endpoint) and the network"
    )
    summary = stop.value.summary
    assert summary.errors == 2
    assert summary.recorded < 4  # stopped: the rest not replayed


def test_a_stopped_replay_says_what_it_replayed_before_its_error(parent, dead_url, monkeypatch):
    """A replay its live model stopped printed its error and hint only, where record prints
    its summary line first: what was replayed, and in which errors."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-for-a-dead-url")
    result = cli("replay", "r", "--then", "openai:gpt-4o-mini", "--fork-at", "0",
                 "--model-option", f"base_url={dead_url}", "--workers", "2", "--run-id",
                 "again", "--store", parent, "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    out = result.stdout.splitlines()
    assert out[0].startswith("replay again of r: 2 samples, "), result.stdout
    assert "errors: OpenAIConnectionError x2" in out
    assert result.stderr.startswith("Error: replay of again stopped: "), result.stderr


def test_a_replay_with_no_sample_ok_does_not_say_to_score_it(parent):
    """Every sample's live call refused (--offline), the replay still said "next: tcbreplay
    score ... --gold-run r", to score a run of errors alone."""
    result = cli("replay", "r", "--then", "sim", "--fork-at", "0", "--offline",
                 "--run-id", "again", "--store", parent, "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "errors: LiveCallRefused x4" in result.output
    assert "next:" not in result.output
    # diverged samples score with the calls they made until then: said for them
    (parent.parent / "other.txt").write_text("Be terse.")
    result = cli("replay", "r", "--system-prompt", parent.parent / "other.txt",
                 "--run-id", "diverged", "--store", parent, "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "next: tcbreplay score diverged --gold-run r" in result.output


def test_a_stopped_replays_hint_is_a_command_that_replays_it(parent, tmp_path, dead_url):
    """The hint was record's: "continue with: tcbreplay replay ... (it takes --model-option
    base_url=... or timeout=..., --call-timeout, --max-rpm and --max-tpm anew)": the replay
    takes none of the three options, the command with the base URL corrected is refused (a
    run of other inputs), and unchanged it leaves the samples stored in error as they are."""
    (tmp_path / "terse.txt").write_text("Be terse.")
    prompt = tmp_path / "terse.txt"
    with pytest.raises(RecordError) as stop:
        replay_run(Store(parent), "r", new_run_id="again", system_prompt=prompt,
                   then="openai:gpt-4o-mini", then_options={"base_url": dead_url},
                   options={"workers": 2, "backoff": 0.01})  # fmt: skip
    command = shlex.join(["tcbreplay", "replay", "r", "--run-id", "again", "--system-prompt",
                          str(prompt), "--then", "openai:gpt-4o-mini", "--model-option",
                          f"base_url={dead_url}", "--store", str(parent)])  # fmt: skip
    assert stop.value.hint == (
        "the run keeps its 2 finished samples, all in error, which the same command does not "
        "replay again: once fixed (--then or its --model-option settings corrected in it, where "
        f"they were at fault), replay them anew with: {command} --overwrite"
    )
    with openai_server.OpenAIServer(SCRIPT) as server:
        words = shlex.split(command.replace(dead_url, server.url))[1:]
        result = cli(*words, "--overwrite", "--quiet")  # as the hint says
    assert result.exit_code == 1, result.output  # (the prompt changed: each sample diverged)
    assert "4 samples, 4 diverged (system x4), 4 ok" in result.output


def test_a_stopped_replay_run_again_with_its_live_model_corrected_replaces_it(
    parent, tmp_path, dead_url
):
    """A replay its live model never answered, run again with the base URL corrected (the
    fix a user makes first), was refused: "run 'again' exists with other inputs", though
    the run held nothing of the live model's to keep."""
    (tmp_path / "terse.txt").write_text("Be terse.")
    words = ["replay", "r", "--run-id", "again", "--system-prompt", tmp_path / "terse.txt",
             "--then", "openai:gpt-4o-mini", "--workers", "2", "--store", parent,
             "--quiet"]  # fmt: skip
    stopped = cli(*words, "--model-option", f"base_url={dead_url}")
    assert stopped.exit_code == 1, stopped.output
    assert "replay of again stopped: no live model call was answered" in stopped.stderr
    with openai_server.OpenAIServer(SCRIPT) as server:
        result = cli(*words, "--model-option", f"base_url={server.url}")
    assert result.exit_code == 1, result.output  # (the prompt changed: each sample diverged)
    assert "4 samples, 4 diverged (system x4), 4 ok" in result.stdout
    assert result.stderr.splitlines() == [
        "Warning: run 'again' exists with other inputs, but its live model stopped it "
        "(unanswered) before answering any call: its 2 samples (all in error), replaced by "
        "this replay"
    ]
    manifest = json.loads((parent / "again" / "manifest.json").read_text())
    assert f"base_url={server.url}" in manifest["replay"]["command"]
    assert manifest["status"] == "complete" and manifest.get("stopped") is None


def test_a_stopped_replay_holding_a_live_answer_is_not_replaced(parent):
    """What a replay's live model answered is kept: a run stopped after an earlier replay
    into it was answered live is refused, as any run of other inputs is."""
    words = ["replay", "r", "--run-id", "again", "--then", "openai:gpt-4o-mini", "--fork-at",
             "0", "--workers", "2", "--store", parent, "--quiet"]  # fmt: skip
    with openai_server.OpenAIServer(SCRIPT) as gone:
        first = cli(*words, "--model-option", f"base_url={gone.url}", "--sample-id", "add")
    assert first.exit_code == 0, first.output
    stopped = cli(*words, "--model-option", f"base_url={gone.url}")  # (now nothing listens)
    assert stopped.exit_code == 1, stopped.output
    assert "replay of again stopped: no live model call was answered" in stopped.stderr
    with openai_server.OpenAIServer(SCRIPT) as server:
        refused = cli(*words, "--model-option", f"base_url={server.url}")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith("Error: run 'again' exists with other inputs"), refused.stderr
    assert "Warning" not in refused.stderr


def test_a_stopped_replay_answered_live_by_a_rerun_before_its_deletion_is_kept(
    parent, tmp_path, monkeypatch
):
    """Reported: the replacement of a stopped replay checked the run, then deleted it in a
    later step; a rerun of the stopped command that began and ended between the two (its
    live model answering now) was deleted with the answers it got. The check is made again
    under the lock that deletes the run: the rerun's run is kept, and the replacement is
    refused as a run of other inputs is, without saying it replaced anything."""
    import warnings

    import tcbreplay._replay.run as replay_run_module

    (tmp_path / "terse.txt").write_text("Be terse.")
    no_model = {"type": "invalid_request_error", "code": "model_not_found", "message": "No model"}

    def replay(url: str):
        return replay_run(Store(parent), "r", new_run_id="again",
                          system_prompt=tmp_path / "terse.txt", then="openai:gpt-4o-mini",
                          then_options={"base_url": url}, options={"workers": 1})  # fmt: skip

    with openai_server.OpenAIServer(SCRIPT) as old, openai_server.OpenAIServer(SCRIPT) as fixed:
        old.inject(openai_server.Fault.error_body(no_model))
        with pytest.raises(RecordError):
            replay(old.url)  # stopped: its live model answered nothing
        old._rules.clear()  # (the model is there now)
        check = replay_run_module.replaced_stop
        reruns = []

        def then_a_rerun(*args):
            said = check(*args)
            if not reruns:  # the stopped command, run again in between (once: it checks too)
                reruns.append(None)
                reruns[0] = replay(old.url)
            return said

        monkeypatch.setattr(replay_run_module, "replaced_stop", then_a_rerun)
        with warnings.catch_warnings(record=True) as seen, pytest.raises(TcbReplayError) as no:
            warnings.simplefilter("always")
            replay(fixed.url)
    assert reruns and reruns[0].run_id == "again", no.value
    assert str(no.value).startswith("run 'again' exists with other inputs"), no.value
    assert not [w for w in seen if "replaced by this replay" in str(w.message)]
    assert fixed.requests == []
    manifest = json.loads((parent / "again" / "manifest.json").read_text())
    assert f"base_url={old.url}" in manifest["replay"]["command"]
    samples = Store(parent).open_run("again").recorded_ids()
    assert sorted(samples.values()) == ["error", "ok", "ok", "ok"]


def test_a_replay_whose_process_died_says_to_run_it_again(parent, monkeypatch):
    """The hint was record's "continue with: tcbreplay replay ... (it takes --model-option
    base_url=... or timeout=..., --call-timeout, --max-rpm and --max-tpm anew)"."""
    import os

    import tcbreplay._replay.sample as replay_module

    real = replay_module.run_sample

    async def dies_on_one_sample(agent, sample, *args):
        if sample.sample_id == ADD_MORE["id"]:
            os._exit(3)
        return await real(agent, sample, *args)

    with monkeypatch.context() as dying:
        dying.setattr(replay_module, "run_sample", dies_on_one_sample)
        result = cli("replay", "r", "--run-id", "again", "--workers", 2, "--processes", 2,
                     "--store", parent, "--quiet")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == (
        "Hint: the run keeps the samples its processes finished; continue with: tcbreplay "
        f"replay r --run-id again --store {parent}"
    )
    result = cli("replay", "r", "--run-id", "again", "--store", parent, "--quiet")
    assert result.exit_code == 0, result.output
    assert "replay again of r: 4 samples, 0 diverged" in result.output
