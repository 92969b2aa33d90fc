"""The langsmith dialect (``tcbreplay._importers.langsmith``): LangSmith's run trees as the
real ``langsmith`` SDK writes them, from a LangGraph agent on the sim model traced by
LangChain's own tracer (``tests/data/langsmith/generate.py`` wrote the files; one test here runs
it live)."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA, cli, load_script
from run_turns import turns

from tcbreplay._importers import langsmith
from tcbreplay._importers.dialect import TraceFile
from tcbreplay._importers.sniff import sniff
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay.errors import TcbReplayWarning, TraceError

DATA = TEST_DATA / "langsmith"
# the fixtures' generator: its agent, key and samples
generate = load_script("langsmith_fixtures", DATA / "generate.py")

TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
FORMS = {
    "runs.jsonl": "JSON Lines of LangSmith runs (run_type, trace_id)",
    "posted.multipart": "the langsmith SDK's multipart run payloads (/runs/multipart)",
    "posted-batch.jsonl": "JSON Lines of /runs/batch bodies of LangSmith runs (post, patch)",
    "runs.parquet": "a Parquet file of LangSmith runs (run_type, trace_id): a bulk export",
}


def expected() -> list[dict]:
    """What the agent returned for each question, in the order asked."""
    return [json.loads(line) for line in (DATA / "expected.jsonl").read_text().splitlines()]


def stored(line) -> list[dict]:
    return [json.loads(m["message"]) for m in line.messages]


def read(name: str, inputs=None):
    path = DATA / name
    return langsmith.read(TraceFile(path.name, data=path.read_bytes()), inputs)


def dataset_inputs():
    return load_inputs(None, DATA / "dataset.json", TOOLS, None, need_prompt=False)


# ---------------------------------------------------------------- telling and reading the forms


@pytest.mark.parametrize("name", FORMS)
def test_each_form_the_sdk_writes_is_told_by_its_marks(name):
    chosen = sniff(TraceFile.at(DATA / name))
    assert (chosen.dialect, chosen.reason) == ("langsmith", FORMS[name])


def test_other_files_are_not_its():
    for data in (b'[{"a": 1}]', b'{"runs": []}', b'{"messages": []}\n', b"PAR1 not parquet"):
        assert not langsmith.sniff(TraceFile("t", data=data)).fits, data
    import zstandard

    packed = zstandard.ZstdCompressor().compress(b"hello")
    verdict = langsmith.sniff(TraceFile("t.zst", data=packed))
    assert verdict.reason == "a zstd-compressed file, but not of LangSmith's multipart run payloads"


@pytest.mark.parametrize("name", FORMS)
def test_every_form_gives_what_the_agent_returned(name):
    """Each trace, read from list_runs' JSON Lines, the SDK's posted multipart and batch bodies
    or the bulk export's Parquet, holds the messages the agent itself returned: model turns
    (parallel calls in one), tool results for their calls' ids, the failed run's error."""
    source = read(name)
    agent = expected()
    assert len(source.lines) == len(agent) == 6
    for line, returned in zip(source.lines, agent, strict=True):
        if "error" in returned:
            assert (line.status, line.error, line.error_type) == (
                "error",
                returned["error"],
                "SimTransientError",
            )
            assert [m["type"] for m in stored(line)] == ["system", "human"]
        else:
            assert line.status == "ok"
            assert turns(stored(line)) == turns(returned["messages"])
        assert stored(line)[0]["data"]["content"].startswith("You are a shop's assistant.")
    parallel = turns(source.lines[1].messages and stored(source.lines[1]))[1]
    assert [call[0] for call in parallel[2]] == ["add_numbers", "multiply_numbers"]


def test_the_trace_is_the_trials_metadata():
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    roots = [r for r in runs if r["parent_run_id"] is None]
    source = read("runs.jsonl")
    assert [line.sample_id for line in source.lines] == [r["id"] for r in roots]
    meta = source.lines[1].metadata
    assert meta["trace_id"] == roots[1]["trace_id"]
    assert meta["run_name"] == "LangGraph"
    assert meta["reference_example_id"] == generate.EXAMPLE_ID
    assert meta["start_time"] == roots[1]["start_time"]


# ---------------------------------------------------------------- gold from a dataset


def test_a_dataset_gives_gold_by_example_id_or_by_input_text():
    """The run against a dataset example is its sample by reference_example_id; the others by
    their question; a question asked twice is two trials of its sample, in the order asked."""
    source = read("runs.jsonl", dataset_inputs())
    keys = [(line.sample_id, line.trial) for line in source.lines]
    assert sorted(keys) == sorted([
        ("price-3-notebooks", 0), (generate.EXAMPLE_ID, 0), ("sum-three-numbers", 0),
        ("hi-there", 0), ("sum-three-numbers", 1), ("mul-7-by-8", 0),
    ])  # fmt: skip


def test_import_with_a_dataset_scores(tmp_path):
    root = tmp_path / "traces"
    result = cli("import", "--dataset", DATA / "dataset.json", "--tools", TOOLS, "--traces",
                 DATA / "posted.multipart", "--run-id", "ls", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr == f"format: langsmith ({FORMS['posted.multipart']}); --format " \
        "chooses another\n"  # fmt: skip
    assert (
        "run ls: 5 samples, 2 trials each: 6/10 trials imported, 4 without a trace" in result.stdout
    )
    rows = json.loads(cli("sql", "select sample_id, trial, status from samples where status "
                          "!= 'missing' order by all", "--format", "json", "--store",
                          root).stdout)  # fmt: skip
    assert [(r["sample_id"], r["trial"], r["status"]) for r in rows] == sorted([
        (generate.EXAMPLE_ID, 0, "ok"), ("hi-there", 0, "ok"), ("mul-7-by-8", 0, "error"),
        ("price-3-notebooks", 0, "ok"), ("sum-three-numbers", 0, "ok"),
        ("sum-three-numbers", 1, "ok"),
    ])  # fmt: skip
    scored = cli("score", "ls", "--store", root, "--format", "json")
    assert scored.exit_code == 0, scored.output


def test_without_a_dataset_each_trace_is_a_sample_of_its_own(tmp_path):
    """No option beyond the file: each trace is a sample of its id, its question the input,
    without gold calls, the tools those its model called; scored against another import of
    the same traces (--gold-run), every trajectory is the gold one."""
    root = tmp_path / "traces"
    for name, run_id in (("runs.jsonl", "own"), ("posted.multipart", "posted")):
        result = cli("import", "--traces", DATA / name, "--run-id", run_id, "--store", root)
        assert result.exit_code == 0, result.output
        assert f"run {run_id}: 6/6 samples imported -> " in result.stdout
    rows = json.loads(cli("sql", "select sample_id, input, gold, status from samples where "
                          "run_id = 'own' order by sample_index", "--format", "json", "--store",
                          root).stdout)  # fmt: skip
    roots = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    roots = [r for r in roots if r["parent_run_id"] is None]
    assert [r["sample_id"] for r in rows] == [r["id"] for r in roots]
    asked = [next(m["data"]["content"] for m in stored(line) if m["type"] == "human")
             for line in read("runs.jsonl").lines]  # fmt: skip
    assert [r["input"] for r in rows] == asked and asked[3] == "Hi there!"
    assert {r["gold"] for r in rows} == {"[]"}
    assert [r["status"] for r in rows].count("error") == 1
    tools = json.loads(cli("sql", "select tool, list(param order by param) as params from "
                           "tools where run_id = 'own' group by tool order by tool", "--format",
                           "json", "--store", root).stdout)  # fmt: skip
    assert [(t["tool"], t["params"]) for t in tools] == [
        ("add_numbers", ["a", "b"]), ("list_items", [None]), ("multiply_numbers", ["a", "b"])
    ]  # fmt: skip
    scored = cli("score", "posted", "--gold-run", "own", "--store", root, "--format", "json")
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["exact"] == 1.0


def test_the_tools_an_llm_run_was_offered_are_the_runs_tools():
    """LangChain's invocation_params (a model bound to tools), else an OpenAI call's inputs."""
    offered = {"type": "function", "function": {
        "name": "add_numbers", "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                        "b": {"type": "number"}}}}}  # fmt: skip
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    for k, run in enumerate(r for r in runs if r["run_type"] == "llm"):
        if k % 2:
            run["extra"]["invocation_params"]["tools"] = [offered]
        else:
            run["inputs"]["tools"] = [offered]
    data = "".join(json.dumps(r) + "\n" for r in runs).encode()
    tools = langsmith.read(TraceFile("runs.jsonl", data=data), None).tools
    assert tools is not None and tools[0] == offered
    assert [t.get("name") for t in tools[1:]] == ["list_items", "multiply_numbers"]


def test_a_trace_no_sample_matches_is_refused_with_its_place(tmp_path):
    entries = json.loads((DATA / "dataset.json").read_text())
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([e for e in entries if e["id"] != "hi-there"]))
    inputs = load_inputs(None, dataset, TOOLS, None, need_prompt=False)
    with pytest.raises(TraceError, match=r"no sample of ds\.json has its id \(.*\) or its input "
                       r"'Hi there!'"):  # fmt: skip
        read("runs.jsonl", inputs)
    twice = [*entries, {**entries[0], "id": "again"}]  # two samples of one input
    dataset.write_text(json.dumps(twice))
    inputs = load_inputs(None, dataset, TOOLS, None, need_prompt=False)
    with pytest.raises(TraceError, match="is the input of samples 'price-3-notebooks', 'again'"):
        read("runs.jsonl", inputs)


# ---------------------------------------------------------------- what the reading gets right


@pytest.mark.parametrize("own", [True, False])
def test_a_root_run_whose_parent_is_in_the_trace_is_refused(own):
    """A root its own parent imported as if nothing were wrong; one whose parent is its
    child said that --tools is required."""
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    root = next(r for r in runs if not r.get("parent_run_id"))
    child = next(r for r in runs if r.get("parent_run_id") == root["id"])
    root["parent_run_id"] = root["id"] if own else child["id"]
    data = "".join(json.dumps(r) + "\n" for r in runs).encode()
    with pytest.raises(TraceError, match=r"its trace has a parent in the file .*go round"):
        langsmith.read(TraceFile("runs.jsonl", data=data), None)


@pytest.mark.parametrize("cut", ["cycle", "missing"])
def test_a_run_that_does_not_descend_from_its_root_is_refused(cut):
    """A model run and its LLM run made each other's parent (or the model run's parent not
    in the file) imported the trace without its question and first call, exit 0."""
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    root = next(r for r in runs if not r.get("parent_run_id"))
    model = next(r for r in runs if r.get("parent_run_id") == root["id"] and r["name"] == "model")
    llm = next(r for r in runs if r.get("parent_run_id") == model["id"])
    model["parent_run_id"] = llm["id"] if cut == "cycle" else "0" * 8 + model["id"][8:]
    data = "".join(json.dumps(r) + "\n" for r in runs).encode()
    said = "its parents go round in a cycle" if cut == "cycle" else "is not in the file"
    with pytest.raises(TraceError, match=f"does not descend from its trace's root run .*{said}"):
        langsmith.read(TraceFile("runs.jsonl", data=data), None)


def test_a_tool_result_without_its_call_id_answers_the_first_open_call_of_its_name(tmp_path):
    """A tool traced outside LangChain (``@traceable``) names no call id."""
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    for run in runs:
        if run["run_type"] == "tool":
            run["outputs"] = {"output": run["outputs"]["output"]["content"]}
    data = "".join(json.dumps(r) + "\n" for r in runs).encode()
    source = langsmith.read(TraceFile("runs.jsonl", data=data), None)
    for line, returned in zip(source.lines, expected(), strict=True):
        if "messages" in returned:
            assert turns(stored(line)) == turns(returned["messages"])


def test_results_of_tools_run_outside_the_tracing_come_from_the_next_model_call():
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    data = "".join(json.dumps(r) + "\n" for r in runs if r["run_type"] != "tool").encode()
    source = langsmith.read(TraceFile("runs.jsonl", data=data), None)
    for line, returned in zip(source.lines, expected(), strict=True):
        if "messages" in returned:
            assert turns(stored(line)) == turns(returned["messages"])


def test_a_patch_keeps_what_it_does_not_name():
    post = {"id": "r", "trace_id": "r", "run_type": "chain", "name": "agent",
            "inputs": {"question": "Hi!"}}  # fmt: skip
    patch = {"id": "r", "trace_id": "r", "inputs": None, "outputs": {"answer": "Hello"}}
    body = json.dumps({"post": [post], "patch": [patch]}).encode()
    (line,) = langsmith.read(TraceFile("b.json", data=body), None).lines
    assert [(m["type"], m["data"]["content"]) for m in stored(line)] == [("human", "Hi!")]


def test_openai_shaped_llm_runs_are_read_too():
    """As the SDK's ``wrap_openai`` traces a Chat Completions call."""
    llm = {
        "id": "l", "trace_id": "t", "parent_run_id": "t", "run_type": "llm",
        "dotted_order": "2.l", "name": "ChatOpenAI",
        "inputs": {"messages": [{"role": "user", "content": "2 plus 3?"}]},
        "outputs": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add_numbers", "arguments": '{"a": 3, "b": 2}'}}]}}]},
    }  # fmt: skip
    root = {"id": "t", "trace_id": "t", "run_type": "chain", "dotted_order": "2", "inputs": {}}
    data = json.dumps([root, llm]).encode()
    (line,) = langsmith.read(TraceFile("r.json", data=data), None).lines
    ai = stored(line)[1]["data"]
    assert [(c["name"], c["args"], c["id"]) for c in ai["tool_calls"]] == [
        ("add_numbers", {"a": 3, "b": 2}, "c1")
    ]


def test_plain_and_compressed_bodies_read_one_after_another():
    import zstandard

    plain = (DATA / "posted.multipart").read_bytes()
    mixed = plain + zstandard.ZstdCompressor().compress(plain)
    lines = langsmith.read(TraceFile("capture", data=mixed), None).lines
    assert lines == read("posted.multipart").lines


def test_a_body_that_unpacks_beyond_the_limits_is_refused(monkeypatch):
    import zstandard

    from tcbreplay._importers import archives

    monkeypatch.setattr(archives, "MAX_MEMBER_BYTES", 100_000)
    bomb = zstandard.ZstdCompressor().compress(b"--b\r\n" + b" " * 10**6)
    with pytest.raises(TraceError, match=r"capture: body 0: unpacks to more than 100000 bytes"):
        langsmith.read(TraceFile("capture", data=bomb), None)


def test_a_secret_in_an_error_is_redacted(monkeypatch):
    monkeypatch.setenv("LANGSMITH_API_KEY", generate.FAKE_KEY)
    root = {"id": "t", "trace_id": "t", "run_type": "chain", "inputs": {"q": "Hi"},
            "error": f"AuthError('bad key {generate.FAKE_KEY}')"}  # fmt: skip
    (line,) = langsmith.read(TraceFile("r.json", data=json.dumps(root).encode()), None).lines
    assert line.error == "AuthError('bad key [redacted]')"


def test_a_failed_tool_runs_error_is_redacted_in_its_result():
    """The trial's error was redacted, the tool message holding a tool run's error was not."""
    key = "sk-abcdef1234567890abcdef"
    runs = [
        {"id": "t", "trace_id": "t", "run_type": "chain", "inputs": {"q": "Hi"}},
        {"id": "l", "trace_id": "t", "parent_run_id": "t", "run_type": "llm",
         "inputs": {"messages": [{"role": "user", "content": "Hi"}]},
         "outputs": {"choices": [{"message": {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "c1", "type": "function", "function": {
                         "name": "greet", "arguments": "{}"}}]}}]}},
        {"id": "g", "trace_id": "t", "parent_run_id": "t", "run_type": "tool",
         "name": "greet", "inputs": {}, "error": f"RuntimeError('kaboom api_key={key}')"},
    ]  # fmt: skip
    data = "".join(json.dumps(run) + "\n" for run in runs).encode()
    (line,) = langsmith.read(TraceFile("r.jsonl", data=data), None).lines
    stored = json.loads(line.messages[-1]["message"])
    assert stored["data"]["content"] == "RuntimeError('kaboom api_key=[redacted]')"


def test_a_run_of_a_trace_whose_root_is_missing_is_refused():
    child = {"id": "c", "trace_id": "t", "parent_run_id": "t", "run_type": "tool", "name": "x"}
    with pytest.raises(TraceError, match=r"its trace's root run \(t\) is not in the file"):
        langsmith.read(TraceFile("r.jsonl", data=json.dumps(child).encode() + b"\n"), None)


# ---------------------------------------------------------------- live: the SDK sends, compressed


@pytest.mark.slow  # the agent runs in a process of its own, traced by the SDK
def test_the_real_sdk_posting_zstd_multipart_imports_as_the_agent_returned(tmp_path):
    """The agent traced anew into a server that asks for compression: the SDK's multipart
    bodies, zstd-compressed once it knows the server takes them, one after another as posted,
    import as what the agent returned; the made-up API key it was given is in no body it sent
    nor in the store."""
    from langsmith_server import LangSmithServer

    with LangSmithServer("zstd") as server:
        generate.run_agent(server.url, tmp_path / "returned.jsonl")
        posted = list(server.posted)
        runs = server.runs()
    assert {p.encoding for p in posted} <= {"zstd", None} and posted[-1].encoding == "zstd"
    assert all(generate.FAKE_KEY.encode() not in p.decoded() for p in posted)
    capture = tmp_path / "posted.multipart.zst"
    capture.write_bytes(b"".join(p.body for p in posted))
    source = langsmith.read(TraceFile.at(capture), None)
    assert len(source.lines) == len({r["trace_id"] for r in runs}) == 6
    returned = [json.loads(line) for line in (tmp_path / "returned.jsonl").read_text().splitlines()]
    for line, agent in zip(source.lines, returned, strict=True):
        if "messages" in agent:
            assert turns(stored(line)) == turns(agent["messages"])
    root = tmp_path / "traces"
    result = cli("import", "--dataset", DATA / "dataset.json", "--tools", TOOLS, "--traces",
                 capture, "--run-id", "live", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: langsmith (")
    for path in root.rglob("*"):
        if path.is_file():
            assert generate.FAKE_KEY.encode() not in path.read_bytes(), path


def test_a_run_posted_again_is_read_once_and_refused_when_its_values_differ():
    """A client's retry posts a run again as it was; one posted again with other values
    would lose one of them."""
    lines = (DATA / "runs.jsonl").read_text().splitlines()
    retried = "\n".join([*lines, lines[1]]) + "\n"
    source = langsmith.read(TraceFile("runs.jsonl", data=retried.encode()), None)
    assert [stored(x) for x in source.lines] == [stored(x) for x in read("runs.jsonl").lines]
    changed = json.loads(lines[1]) | {"name": "another"}
    data = "\n".join([*lines, json.dumps(changed)]) + "\n"
    with pytest.raises(TraceError, match=rf"line {len(lines) + 1}: run '{changed['id']}' is posted "
                       r"again with other values than at runs.jsonl: line 2"):  # fmt: skip
        langsmith.read(TraceFile("runs.jsonl", data=data.encode()), None)


def test_an_openai_turn_dumped_whole_reads_and_a_result_finds_its_call_by_arguments():
    """The OpenAI SDK's message dump names every field ("tool_calls": null on a text turn,
    which was refused); a tool run that names no call id answers the call of its name made
    with its inputs (parallel calls of one tool end in any order), else the first open one."""
    from langchain_core.messages import AIMessage

    from tcbreplay._importers.trees import Conversation, message

    turn = message({"role": "assistant", "content": "done", "tool_calls": None,
                    "function_call": None, "refusal": None, "audio": None}, "x")  # fmt: skip
    assert isinstance(turn, AIMessage) and turn.content == "done" and turn.tool_calls == []
    told = Conversation()
    calls = [{"id": f"c{k}", "name": "greet", "args": {"name": who}}
             for k, who in ((1, "Zoë"), (2, "Ünal"))]  # fmt: skip
    told.model_call([message("hi", "x")], AIMessage("", tool_calls=calls))
    told.tool_call("greet", "hello Ünal", None, args={"name": "Ünal"})
    told.tool_call("greet", "hello Zoë", None, args={"name": "Zoë"})
    assert [(m.tool_call_id, m.content) for m in told.messages[2:]] == [
        ("c1", "hello Zoë"), ("c2", "hello Ünal")]  # fmt: skip


@pytest.mark.slow  # (the SDK's tracing in this process, flushed: 5 s)
def test_wrap_openai_traces_import_with_their_results_paired_and_their_tokens(
    tmp_path, monkeypatch
):
    """The real SDK tracing the real OpenAI client (``wrap_openai``), answers served by a
    mock transport: a plain text answer carries ``"tool_calls": null``, which was refused;
    the OpenAI runs' token counts were dropped; and two calls of one tool whose runs ended
    in the other order got each other's results (the tool runs name no call id: their
    inputs are the calls' arguments)."""
    import httpx
    import openai
    from langsmith import Client, traceable, tracing_context
    from langsmith.wrappers import wrap_openai
    from langsmith_server import SESSION_ID, LangSmithServer

    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    calls = [
        {"id": f"c{k}", "type": "function",
         "function": {"name": "greet", "arguments": json.dumps({"name": who})}}
        for k, who in ((1, "Zoë"), (2, "Ünal"))
    ]  # fmt: skip
    answers = iter([
        {"id": "x1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
             "role": "assistant", "content": None, "tool_calls": calls}}],
         "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}},
        {"id": "x2", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {
             "role": "assistant", "content": "done"}}],
         "usage": {"prompt_tokens": 30, "completion_tokens": 2, "total_tokens": 32}},
    ])  # fmt: skip
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=next(answers)))
    tools = [{"type": "function", "function": {"name": "greet", "parameters": {
        "type": "object", "properties": {"name": {"type": "string"}}}}}]  # fmt: skip
    with LangSmithServer("multipart") as server:
        client = Client(api_url=server.url, api_key="lsv2_pt_" + "0" * 32 + "_0000000000")
        model = wrap_openai(
            openai.OpenAI(api_key="not-needed", base_url="http://model.invalid/v1",
                          http_client=httpx.Client(transport=transport)),
            tracing_extra={"client": client},
        )  # fmt: skip

        @traceable(run_type="tool", client=client)
        def greet(name):
            return "hello " + name

        @traceable(run_type="chain", client=client, name="agent")
        def agent(question):
            messages = [{"role": "user", "content": question}]
            turn = model.chat.completions.create(model="m", messages=messages, tools=tools)
            made = turn.choices[0].message
            messages.append(made.model_dump(exclude_none=True))
            results = {
                c.id: greet(**json.loads(c.function.arguments)) for c in reversed(made.tool_calls)
            }  # (the second call ends first)
            messages += [{"role": "tool", "tool_call_id": c.id, "content": results[c.id]}
                         for c in made.tool_calls]  # fmt: skip
            model.chat.completions.create(model="m", messages=messages, tools=tools)

        # on whatever an earlier test of this process made of the SDK's tracing switch
        with tracing_context(enabled=True, client=client):
            agent("Greet Zoë and Ünal")
        client.flush()
        listed = Client(api_url=server.url, api_key="x", auto_batch_tracing=False)
        runs = [r.model_dump(mode="json") for r in listed.list_runs(project_id=SESSION_ID)]
    traces = tmp_path / "runs.jsonl"
    traces.write_text("".join(json.dumps(run) + "\n" for run in runs))
    root = tmp_path / "traces"
    result = cli("import", "--traces", traces, "--run-id", "w", "--store", root)
    assert result.exit_code == 0, result.output
    rows = cli("sql", "--store", root, "--format", "json", "select type, message->>'$.data."
               "content' content, message->>'$.data.tool_call_id' call, input_tokens, "
               "output_tokens from messages order by position")  # fmt: skip
    found = [(r["type"], r["content"], r["call"], r["input_tokens"], r["output_tokens"])
             for r in json.loads(rows.stdout)]  # fmt: skip
    assert found == [
        ("human", "Greet Zoë and Ünal", None, None, None),
        ("ai", "", None, 11, 7),
        ("tool", "hello Zoë", "c1", None, None),
        ("tool", "hello Ünal", "c2", None, None),
        ("ai", "done", None, 30, 2),
    ]


def _reused_ids_told(*, mul_traced: bool):
    """A conversation whose server numbers each turn's calls from ``call_0``: add, then mul,
    both ``call_0``; the mul tool run traced or not (then its result is in the last model
    call's messages only)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from tcbreplay._importers.trees import Conversation

    asked = HumanMessage("What is 2 plus 3, times 2?")
    add = AIMessage("", tool_calls=[{"id": "call_0", "name": "add", "args": {"a": 2, "b": 3}}])
    mul = AIMessage("", tool_calls=[{"id": "call_0", "name": "mul", "args": {"a": 5, "b": 2}}])
    five = ToolMessage("5", tool_call_id="call_0", name="add")
    ten = ToolMessage("10", tool_call_id="call_0", name="mul")
    told = Conversation()
    told.model_call([asked], add)
    told.tool_call("add", "5", "call_0")
    told.model_call([asked, add, five], mul)
    if mul_traced:
        told.tool_call("mul", "10", "call_0")
    told.model_call([asked, add, five, mul, ten], AIMessage("10"))
    return [(m.type, m.content) for m in told.messages]


@pytest.mark.parametrize("mul_traced", [True, False])
def test_a_call_id_made_again_in_a_later_turn_gets_its_own_result(mul_traced):
    """The second call_0's result was taken for one already among the messages and left
    out (or, its tool run untraced, the first call_0's result taken for it)."""
    assert _reused_ids_told(mul_traced=mul_traced) == [
        ("human", "What is 2 plus 3, times 2?"),
        ("ai", ""),
        ("tool", "5"),
        ("ai", ""),
        ("tool", "10"),
        ("ai", "10"),
    ]


@pytest.mark.slow  # (LangGraph, LangChain's OpenAI client and tracer imported, run: 3 s)
def test_a_real_trace_whose_server_reuses_call_ids_keeps_every_result(tmp_path):
    """A LangGraph agent (``create_agent``) on LangChain's real ``ChatOpenAI``, against a
    server that numbers each turn's calls from ``call_0`` (as several OpenAI-compatible
    servers do; answers served by a mock transport), traced by LangChain's own LangSmith
    tracer into the loopback LangSmith: the second turn's result, ``10``, was missing from
    the stored messages."""
    import httpx
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_core.tracers.langchain import LangChainTracer
    from langchain_openai import ChatOpenAI
    from langsmith import Client
    from langsmith_server import SESSION_ID, LangSmithServer

    def answer(content, call=None):
        calls = None if call is None else [{"id": "call_0", "type": "function", "function": {
            "name": call[0], "arguments": json.dumps(call[1])}}]  # fmt: skip
        return {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                             "message": {"role": "assistant", "content": content,
                                         "tool_calls": calls}}]}  # fmt: skip

    answers = iter([answer(None, ("add", {"a": 2, "b": 3})),
                    answer(None, ("mul", {"a": 5, "b": 2})), answer("10")])  # fmt: skip
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=next(answers)))

    @tool
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    @tool
    def mul(a: int, b: int) -> str:
        """Multiply two numbers."""
        return str(a * b)

    model = ChatOpenAI(model="m", api_key="not-needed", base_url="http://model.invalid/v1",
                       http_client=httpx.Client(transport=transport))  # fmt: skip
    agent = create_agent(model, tools=[add, mul])
    with LangSmithServer("multipart") as server:
        client = Client(api_url=server.url, api_key="lsv2_pt_" + "0" * 32 + "_0000000000")
        tracer = LangChainTracer(client=client, project_name="p")
        agent.invoke({"messages": [{"role": "user", "content": "What is 2 plus 3, times 2?"}]},
                     {"callbacks": [tracer]})  # fmt: skip
        tracer.wait_for_futures()
        client.flush()
        listed = Client(api_url=server.url, api_key="x", auto_batch_tracing=False)
        runs = [r.model_dump(mode="json") for r in listed.list_runs(project_id=SESSION_ID)]
    tool_runs = [r for r in runs if r["run_type"] == "tool"]
    assert [r["outputs"]["output"]["tool_call_id"] for r in tool_runs] == ["call_0"] * 2
    traces = tmp_path / "runs.jsonl"
    traces.write_text("".join(json.dumps(run) + "\n" for run in runs))
    root = tmp_path / "traces"
    result = cli("import", "--traces", traces, "--run-id", "w", "--store", root)
    assert result.exit_code == 0, result.output
    rows = cli("sql", "--store", root, "--format", "json", "select type, message->>'$.data."
               "content' content, message->>'$.data.tool_call_id' call from messages "
               "order by position")  # fmt: skip
    assert [(r["type"], r["content"], r["call"]) for r in json.loads(rows.stdout)] == [
        ("human", "What is 2 plus 3, times 2?", None),
        ("ai", "", None),
        ("tool", "5", "call_0"),
        ("ai", "", None),
        ("tool", "10", "call_0"),
        ("ai", "10", None),
    ]


def _killed_in_its_tool(*, later_runs: bool) -> bytes:
    """The fixture's first trace as ``list_runs()`` shows a run killed while its tool ran:
    the tool run and its parents pending (no outputs, no end); with ``later_runs``, the
    runs after it kept (only the tool run's end was lost: the next LLM run was given its
    result)."""
    runs = [json.loads(line) for line in (DATA / "runs.jsonl").read_text().splitlines()]
    trace = runs[0]["trace_id"]
    ordered = sorted((r for r in runs if r["trace_id"] == trace), key=lambda r: r["dotted_order"])
    at = next(k for k, r in enumerate(ordered) if r["run_type"] == "tool")
    tool = ordered[at]
    pending = {tool["id"]} | ({tool["parent_run_id"], trace} if not later_runs else set())
    kept = ordered if later_runs else ordered[: at + 1]
    for run in kept:
        if run["id"] in pending:
            run.update(outputs=None, end_time=None, status="pending")
    return "".join(json.dumps(r) + "\n" for r in kept).encode()


def test_a_tool_run_without_outputs_gives_no_result_and_is_said():
    """A tool run still running (or killed) became an empty "success" result, in silence."""
    data = _killed_in_its_tool(later_runs=False)
    with pytest.warns(TcbReplayWarning) as said:
        source = langsmith.read(TraceFile("runs.jsonl", data=data), None)
    assert [str(w.message) for w in said] == [
        "runs.jsonl: 1 tool runs have no outputs and no error (still running when exported, "
        "or killed): no result of theirs is stored (a later LLM run gives one it was given), "
        "the first at line 5 (tool run 'list_items')"
    ]
    (line,) = source.lines
    told = [(m["type"], m["data"].get("tool_calls")) for m in stored(line)]
    assert [kind for kind, _ in told] == ["system", "human", "ai"]  # the call, no tool message
    assert [c["name"] for c in told[2][1]] == ["list_items"]


def test_a_tool_run_without_outputs_takes_the_result_a_later_llm_run_was_given():
    data = _killed_in_its_tool(later_runs=True)
    with pytest.warns(TcbReplayWarning, match="1 tool runs have no outputs"):
        source = langsmith.read(TraceFile("runs.jsonl", data=data), None)
    assert turns(stored(source.lines[0])) == turns(expected()[0]["messages"])
