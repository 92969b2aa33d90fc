"""The langfuse dialect (``tcbreplay._importers.langfuse``): Langfuse's observations exports.

``tests/data/langfuse/generate.py`` wrote the files: a LangGraph agent on the sim model traced
by the real ``langfuse`` SDK's LangChain handler, its OTLP spans made into observations by the
mapping of Langfuse's server and written in its exports' layouts (no Langfuse server runs here:
the rows are reconstructed, their contents are the SDK's). One test runs that live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli, load_script
from run_turns import turns

from tcbreplay._importers import langfuse
from tcbreplay._importers.dialect import TraceFile
from tcbreplay._importers.sniff import sniff
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay.errors import TcbReplayWarning, TraceError

DATA = TEST_DATA / "langfuse"
# the fixtures' generator: its agent, keys and the server's mapping of spans
generate_langfuse = load_script("langfuse_fixtures", DATA / "generate.py")

TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
FORMS = {
    "observations.jsonl": "JSON Lines of Langfuse observations (trace_id, type)",
    "observations.json": "a JSON list of Langfuse observations (trace_id, type)",
    "observations.parquet": "a Parquet file of Langfuse observations (trace_id, type, "
    "parent_observation_id): a blob storage export",
}


def expected(path: Path = DATA / "expected.jsonl") -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def stored(line) -> list[dict]:
    return [json.loads(m["message"]) for m in line.messages]


def read(name: str, inputs=None, data: bytes | None = None):
    return langfuse.read(TraceFile(name, data=data or (DATA / name).read_bytes()), inputs)


def rows() -> list[dict]:
    return [json.loads(line) for line in (DATA / "observations.jsonl").read_text().splitlines()]


def assert_as_returned(lines, returned: list[dict]) -> None:
    assert len(lines) == len(returned) == 6
    for line, agent in zip(lines, returned, strict=True):
        if "error" in agent:
            assert line.status == "error"
            assert line.error == "sim: injected transient fault (503 Service Unavailable)"
            assert [m["type"] for m in stored(line)] == ["system", "human"]
        else:
            assert line.status == "ok"
            assert turns(stored(line)) == turns(agent["messages"])


@pytest.mark.parametrize("name", FORMS)
def test_each_export_is_told_by_its_fields(name):
    chosen = sniff(TraceFile.at(DATA / name))
    assert (chosen.dialect, chosen.reason) == ("langfuse", FORMS[name])


def test_other_files_are_not_its():
    for data in (b'[{"a": 1}]', b'{"data": []}', b'{"id": 1, "type": "x"}\n'):
        assert not langfuse.sniff(TraceFile("t", data=data)).fits, data
    runs = TEST_DATA / "langsmith"
    for name in ("runs.jsonl", "runs.parquet"):
        assert not langfuse.sniff(TraceFile.at(runs / name)).fits


@pytest.mark.parametrize("name", FORMS)
def test_every_export_gives_what_the_agent_returned(name):
    source = read(name)
    assert_as_returned(source.lines, expected())
    assert source.lines[0].metadata["trace_id"] == source.lines[0].sample_id
    assert stored(source.lines[1])[2]["data"]["tool_calls"][1]["name"] == "multiply_numbers"


@pytest.mark.parametrize("name", FORMS)
def test_every_export_keeps_each_generations_token_counts(name):
    """usage_details were read nowhere: every sample's tokens were null (LangSmith's export of
    the same agent runs kept them)."""
    for line, agent in zip(read(name).lines, expected(), strict=True):
        made = [(m["input_tokens"], m["output_tokens"]) for m in line.messages if m["type"] == "ai"]
        said = [((m["data"].get("usage_metadata") or {}).get("input_tokens"),
                 (m["data"].get("usage_metadata") or {}).get("output_tokens"))
                for m in agent.get("messages", []) if m["type"] == "ai"]  # fmt: skip
        assert made == said
    assert any(m["input_tokens"] for m in read(name).lines[0].messages)


def test_the_public_apis_answer_reads_too():
    ui = json.loads((DATA / "observations.json").read_text())
    data = json.dumps({"data": ui, "meta": {"page": 1}}).encode()
    assert langfuse.sniff(TraceFile("api.json", data=data)).reason == (
        "Langfuse's API answer of observations (data)"
    )
    assert_as_returned(read("api.json", data=data).lines, expected())


def test_a_tool_whose_output_is_text_answers_the_call_its_metadata_names():
    changed = []
    for row in rows():
        if row["type"] == "TOOL":
            row["output"] = json.loads(row["output"])["content"]
        changed.append(row)
    data = "".join(json.dumps(r) + "\n" for r in changed).encode()
    assert_as_returned(read("o.jsonl", data=data).lines, expected())


def test_a_dataset_gives_gold_by_input_text_or_trace_id(tmp_path):
    inputs = load_inputs(None, DATA / "dataset.json", TOOLS, None, need_prompt=False)
    keys = sorted((line.sample_id, line.trial) for line in read("observations.jsonl", inputs).lines)
    assert keys == sorted([
        ("price-3-notebooks", 0), ("paren-3.5-plus-2-times-4", 0), ("sum-three-numbers", 0),
        ("hi-there", 0), ("sum-three-numbers", 1), ("mul-7-by-8", 0),
    ])  # fmt: skip
    entries = json.loads((DATA / "dataset.json").read_text())
    first_trace = read("observations.jsonl").lines[0].sample_id
    entries[0] = {**entries[0], "id": first_trace, "input": "asked otherwise"}
    (tmp_path / "ds.json").write_text(json.dumps(entries))
    inputs = load_inputs(None, tmp_path / "ds.json", TOOLS, None, need_prompt=False)
    keys = {line.sample_id for line in read("observations.jsonl", inputs).lines}
    assert first_trace in keys and "price-3-notebooks" not in keys


def test_import_and_score(tmp_path):
    root = tmp_path / "traces"
    result = cli("import", "--dataset", DATA / "dataset.json", "--tools", TOOLS, "--traces",
                 DATA / "observations.parquet", "--run-id", "lf", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: langfuse (a Parquet file of Langfuse observations")
    assert (
        "run lf: 5 samples, 2 trials each: 6/10 trials imported, 4 without a trace" in result.stdout
    )
    scored = cli("score", "lf", "--store", root, "--format", "json")
    assert scored.exit_code == 0, scored.output


def test_without_a_dataset_each_trace_is_a_sample_of_its_own(tmp_path):
    root = tmp_path / "traces"
    result = cli("import", "--traces", DATA / "observations.jsonl", "--run-id", "own",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "run own: 6/6 samples imported -> " in result.stdout
    rows = json.loads(cli("sql", "select sample_id, input, gold from samples order by "
                          "sample_index", "--format", "json", "--store", root).stdout)  # fmt: skip
    lines = read("observations.jsonl").lines
    assert [r["sample_id"] for r in rows] == [line.sample_id for line in lines]
    assert rows[3]["input"] == "Hi there!" and {r["gold"] for r in rows} == {"[]"}


ADD = {"type": "function", "function": {
    "name": "add_numbers", "description": "Add two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                    "b": {"type": "number"}}}}}  # fmt: skip


def test_tools_the_langchain_handler_lists_among_the_input_are_offered_not_messages():
    """Langfuse's LangChain handler appends a model's bound tools (its invocation_params) to
    a generation's input as {"role": "tool", "content": <tool>}, with no call id."""
    changed = []
    for row in rows():
        if row["type"] == "GENERATION":
            given = json.loads(row["input"])
            row["input"] = json.dumps([*given, {"role": "tool", "content": ADD}])
        changed.append(row)
    data = "".join(json.dumps(r) + "\n" for r in changed).encode()
    source = read("o.jsonl", data=data)
    assert_as_returned(source.lines, expected())
    assert source.tools is not None and source.tools[0] == ADD
    assert [t.get("name") for t in source.tools[1:]] == ["list_items", "multiply_numbers"]


def test_tool_definitions_name_the_tools_offered():
    """The export's tool_definitions: a map of a tool's name to its schema as JSON text."""
    spec = {k: v for k, v in ADD["function"].items() if k != "name"}
    changed = []
    for row in rows():
        if row["type"] == "GENERATION":
            row["tool_definitions"] = {"add_numbers": json.dumps(spec)}
        changed.append(row)
    data = "".join(json.dumps(r) + "\n" for r in changed).encode()
    tools = read("o.jsonl", data=data).tools
    assert tools is not None and tools[0] == {"name": "add_numbers", **spec}


def test_an_observation_without_a_trace_id_is_refused():
    data = json.dumps({"id": "o", "traceId": None, "type": "SPAN", "parentObservationId": None})
    with pytest.raises(TraceError, match=r"o\.jsonl: line 1: an observation needs trace_id"):
        read("o.jsonl", data=data.encode() + b"\n")


@pytest.mark.parametrize("own", [True, False])
def test_observations_whose_parents_go_round_are_refused(own):
    """A trace's root made its own parent, or a child of its child: a crash (no root)."""
    observations = rows()
    trace = observations[0]["trace_id"]
    mine = [o for o in observations if o["trace_id"] == trace]
    root = next(o for o in mine if not o.get("parent_observation_id"))
    child = next(o for o in mine if o.get("parent_observation_id") == root["id"])
    root["parent_observation_id"] = root["id"] if own else child["id"]
    data = "".join(json.dumps(o) + "\n" for o in observations).encode()
    with pytest.raises(TraceError, match=f"trace {trace}\\): the observations' parents go round"):
        read("o.jsonl", data=data)


def test_an_observation_whose_parent_is_not_in_the_file_is_refused():
    """A generation whose parent was not exported came after the whole trace: the trace
    imported without its question, exit 0."""
    observations = rows()
    generation = next(o for o in observations if o["type"] == "GENERATION")
    generation["parent_observation_id"] = "ffffffffffffffff"
    data = "".join(json.dumps(o) + "\n" for o in observations).encode()
    with pytest.raises(TraceError, match="parent ffffffffffffffff is not in the file"):
        read("o.jsonl", data=data)


def test_an_observation_exported_twice_is_read_once_and_refused_when_it_differs():
    """An export repeated in one file gave a trace its messages twice."""
    observations = rows()
    again = "".join(json.dumps(o) + "\n" for o in [*observations, observations[2]]).encode()
    once = read("observations.jsonl")
    assert [stored(x) for x in read("o.jsonl", data=again).lines] == [stored(x) for x in once.lines]
    changed = observations[2] | {"name": "another"}
    data = "".join(json.dumps(o) + "\n" for o in [*observations, changed]).encode()
    where = rf"o\.jsonl: line {len(observations) + 1}: observation '{changed['id']}' is in the file"
    with pytest.raises(
        TraceError, match=where + r" again with other values than at o\.jsonl: line 3"
    ):
        read("o.jsonl", data=data)


@pytest.mark.slow  # the agent runs in a process of its own, traced by the SDK
def test_the_real_sdk_traces_as_the_agent_returned(tmp_path):
    """The agent traced anew by Langfuse's handler: its spans, made observations as Langfuse's
    server makes them, import as what the agent returned; the secret key is in no span, and
    neither key is in the store."""
    with generate_langfuse.OtlpCapture() as capture:
        generate_langfuse.run_agent(capture.url, tmp_path / "returned.jsonl")
        spans = capture.spans()
    assert all(generate_langfuse.SECRET_KEY.encode() not in body for body in capture.bodies)
    spans.sort(key=lambda found: found[2].start_time_unix_nano)
    observations = [generate_langfuse.observation(*found) for found in spans]
    live = tmp_path / "live.jsonl"
    live.write_text("".join(json.dumps(o) + "\n" for o in observations))
    assert_as_returned(read("live.jsonl", data=live.read_bytes()).lines,
                       expected(tmp_path / "returned.jsonl"))  # fmt: skip
    root = tmp_path / "traces"
    result = cli("import", "--dataset", DATA / "dataset.json", "--tools", TOOLS, "--traces", live,
                 "--run-id", "live", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert generate_langfuse.PUBLIC_KEY.encode() not in data, path
            assert generate_langfuse.SECRET_KEY.encode() not in data, path


def _killed_in_its_tool(*, later: bool) -> bytes:
    """The fixture's first trace as an export shows it when its agent was killed while its
    tool ran: the tool observation without output or end; with ``later``, the observations
    after it kept (only the tool's end was lost: the next generation was given its result)."""
    trace = rows()[0]["trace_id"]
    mine = [r for r in rows() if r["trace_id"] == trace]
    at = next(k for k, r in enumerate(mine) if r["type"] == "TOOL")
    kept = mine if later else mine[: at + 1]
    kept[at].update(output=None, end_time=None)
    return "".join(json.dumps(r) + "\n" for r in kept).encode()


def test_a_tool_observation_without_output_gives_no_result_and_is_said():
    """A tool still running (or killed) became an empty "success" result, in silence."""
    with pytest.warns(TcbReplayWarning) as said:
        source = read("o.jsonl", data=_killed_in_its_tool(later=False))
    assert [str(w.message) for w in said] == [
        "o.jsonl: 1 tool observations have no output and no error (still running when "
        "exported, or killed): no result of theirs is stored (a later generation gives one it "
        "was given), the first at line 5 (tool 'list_items')"
    ]
    (line,) = source.lines
    told = [(m["type"], m["data"].get("tool_calls")) for m in stored(line)]
    assert [kind for kind, _ in told] == ["system", "human", "ai"]  # the call, no tool message
    assert [c["name"] for c in told[2][1]] == ["list_items"]


def test_a_tool_observation_without_output_takes_the_result_a_later_generation_was_given():
    with pytest.warns(TcbReplayWarning, match="1 tool observations have no output"):
        source = read("o.jsonl", data=_killed_in_its_tool(later=True))
    assert turns(stored(source.lines[0])) == turns(expected()[0]["messages"])
