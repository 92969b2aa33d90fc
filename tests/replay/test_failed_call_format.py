"""A model call of an agent of one's own that failed while recording (the provider's reply
unreadable): ``record`` keeps the answer format it asked for and the tools it was sent as it
keeps an answered call's, and ``replay`` and ``serve`` compare the request they are sent
there with them (the very request the recording failed at ends as recorded, in its error)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers import chat_answer as answer
from openai_server import Fault, OpenAIServer

from tcbreplay._replay.run import replay_run
from tcbreplay._replay.serve import serve_run

HELLO = "Hi there!"
ANSWER = '{"reply": "Hello!"}'


def record(
    folder: Path, retries: int, agent: str = "answers_in_a_schema", script: list | None = None,
    fault: tuple[Fault, int] | None = None,
) -> tuple[Path, list[dict]]:  # fmt: skip
    """A store holding ``failed``, a run of one sample recorded with ChatOpenAI by
    ``replay_fixtures:AGENT`` (by default: a first call with the run's tools; a last one with
    none and a response_format; ``script``: the server's turns before its answer) with
    ``retries``, the first reply at turn 1 an HTML page (``fault``: another reply, at another
    turn); and the bodies of its requests."""
    from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    dataset = folder / "dataset.json"
    dataset.write_text(json.dumps([{"id": "greet", "input": HELLO, "target": []}]))
    tools = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
    inputs = load_inputs(None, dataset, tools, BENCHMARKS["tool-call"].system_prompt)
    with (
        pytest.MonkeyPatch.context() as patch,
        OpenAIServer({HELLO: script or []}, answers={HELLO: ANSWER}) as server,
    ):
        patch.setenv("OPENAI_API_KEY", "sk-fake-recording-7f3a9c")
        reply, turn = fault or (Fault.not_json(), 1)
        server.inject(reply, turn=turn, times=1)
        record_run(
            inputs, parse_model("openai:gpt-4o-mini", {"base_url": server.url}),
            Store(folder / "traces"), run_id="failed", agent=f"replay_fixtures:{agent}",
            options=RecordOptions(workers=1, retries=retries, backoff=0),
        )  # fmt: skip
        bodies = list(server.requests)
    return folder / "traces", bodies


def kept(root: Path) -> dict:
    """The metadata of run ``failed``'s one sample."""
    import pyarrow.parquet as pq

    from tcbreplay._store.runs import Store

    run = Store(root).open_run("failed")
    (metadata,) = pq.read_table(run.samples_path, columns=["metadata"])["metadata"].to_pylist()
    return json.loads(metadata)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[dict]]:
    """:func:`record` without retries: the last call failed, and the sample with it."""
    root, bodies = record(tmp_path_factory.mktemp("failed-call"), retries=0)
    assert [len(b.get("tools") or []) for b in bodies] == [3, 0]
    assert "response_format" in bodies[1]
    return root, bodies


def test_record_keeps_the_format_and_tools_of_the_call_that_failed(recorded):
    """The store kept nothing of the failed call (the answered one asked no format and was
    sent the run's tools): the sample's metadata was empty."""
    root, (_, last) = recorded
    assert kept(root) == {"tcbreplay_format": [None, last["response_format"]],
                          "tcbreplay_tools": [None, []]}  # fmt: skip


def test_a_failed_call_answered_when_retried_is_kept_once(tmp_path):
    """The call the sample failed at is kept, not each attempt at a call that was answered."""
    root, bodies = record(tmp_path, retries=1)
    assert len(bodies) == 3
    assert kept(root) == {"tcbreplay_format": [None, bodies[2]["response_format"]],
                          "tcbreplay_tools": [None, []]}  # fmt: skip
    summary = replay_run(root, "failed", new_run_id="again")
    assert (summary.ok, summary.turns_served, summary.divergences) == (1, 2, [])


def test_replay_ends_at_the_failed_call_as_recorded(recorded):
    """The replayed agent's last request (no tools, a response_format) was compared with the
    run's tools and no format: it diverged at ``tools`` instead of ending in the recorded
    error."""
    summary = replay_run(recorded[0], "failed", new_run_id="again")
    assert summary.divergences == []
    assert (summary.recorded_errors, summary.error_types) == (1, {"UnreadableReply": 1})
    assert summary.turns_served == 1


def test_serve_answers_the_failed_request_with_its_error_and_409s_another(recorded):
    """The failed request was a 409 at ``tools`` (the run's recorded); another format, or
    the run's tools, which the recording did not send, are 409s saying so."""
    root, (first, last) = recorded
    other = copy.deepcopy(last)
    other["response_format"]["json_schema"]["name"] = "Other"
    with serve_run(root, "failed") as server:
        assert answer(server.url, first) == ANSWER
        status, message = answer(server.url, last)
        assert (status, message.split(": its")[0]) == (502, "sample 'greet' (trial 0)")
        assert "its recording ended here in an error (UnreadableReply: " in message
        changed = answer(server.url, other)
        with_tools = answer(server.url, {**last, "tools": first["tools"]})
    assert changed == (409, "no recorded turn answers this request: turn 1: params at "
                       'params.response_format.json_schema.name: "Reply" -> "Other" '
                       "(nearest: sample greet, trial 0, turn 1)")  # fmt: skip
    assert with_tools[0] == 409
    assert with_tools[1].startswith("no recorded turn answers this request: turn 1: tools at "
                                    "tools.add_numbers: (nothing) -> ")  # fmt: skip
    assert with_tools[1].endswith("(nearest: sample greet, trial 0, turn 1)")


def test_the_system_of_a_call_that_failed_is_kept(tmp_path):
    """An agent whose system message changes at each turn, whose second call failed: the
    recording kept the first call's only, and the replay's second request, compared with
    it, diverged at ``system``."""
    script = [[("add_numbers", {"a": 3, "b": 2})]]
    root, bodies = record(tmp_path, retries=0, agent="prompt_per_turn", script=script)
    sent = [[b["messages"][0]["content"]] for b in bodies]
    assert len(sent) == 2 and sent[0] != sent[1]
    assert kept(root) == {"tcbreplay_system": sent}
    summary = replay_run(root, "failed", new_run_id="again")
    assert (summary.divergences, summary.recorded_errors) == ([], 1)


def empty_reply() -> dict:
    """A Chat Completions body with no content and no tool calls, as the openai SDK types it."""
    from openai.types.chat import ChatCompletion

    body = ChatCompletion.model_validate({
        "id": "chatcmpl-empty", "object": "chat.completion", "created": 1,
        "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": ""}}],
    })  # fmt: skip
    return body.model_dump(mode="json", exclude_none=True)


def test_an_empty_reply_retried_is_no_call_of_its_own(tmp_path):
    """An agent whose system message changes at each turn, whose first reply was empty (no
    content, no tool call) and retried: the recording kept the empty reply as an answered
    call, its calls' system messages shifted by one, and the replay of the run diverged at
    ``system`` at turn 1."""
    script = [[("add_numbers", {"a": 3, "b": 2})]]
    empty = (Fault.json_body(empty_reply()), 0)
    root, bodies = record(tmp_path, retries=1, agent="prompt_per_turn", script=script,
                          fault=empty)  # fmt: skip
    sent = [[b["messages"][0]["content"]] for b in bodies]
    assert len(sent) == 3 and sent[0] == sent[1] != sent[2]
    assert kept(root) == {"tcbreplay_system": sent[1:]}
    summary = replay_run(root, "failed", new_run_id="again")
    assert (summary.ok, summary.divergences, summary.turns_served) == (1, [], 2)


def test_a_call_cut_at_the_token_limit_is_kept_as_the_one_it_failed_at(tmp_path):
    """A reply cut off at the token limit is no answer, not retried: the call is kept as the
    one the sample failed at, and the replay ends there in the recorded error."""
    script = [[("add_numbers", {"a": 3, "b": 2})]]
    cut = (Fault.at_token_limit(), 1)
    root, bodies = record(tmp_path, retries=1, agent="prompt_per_turn", script=script,
                          fault=cut)  # fmt: skip
    sent = [[b["messages"][0]["content"]] for b in bodies]
    assert len(sent) == 2 and sent[0] != sent[1]
    assert kept(root) == {"tcbreplay_system": sent}
    summary = replay_run(root, "failed", new_run_id="again")
    assert (summary.divergences, summary.error_types) == ([], {"TokenLimitReply": 1})
    assert (summary.recorded_errors, summary.turns_served) == (1, 1)
