"""`tcbreplay import`: traces recorded elsewhere become a run that `score` treats like a recorded
one."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections import defaultdict
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, TEST_DATA, cli, snapshot
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from tcbreplay._importers.import_run import import_traces
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._store.runs import Store
from tcbreplay._store.writer import RunWriter
from tcbreplay.errors import InputError, TraceError

DATA = TEST_DATA
DATASET = DATA / "ds_shapes.json"
TOOLS_JSON = str(DATA / "tools_shop.json")
STATIC_TRACES = DATA / "import" / "traces_shapes.jsonl"
BUILT_IN_DATASET = ROOT / "tcbreplay/_inputs/benchmarks/tool_call/dataset.json"
BUILT_IN_TOOLS = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"

# ---------------------------------------------------------------- fixtures built with LangChain


def ai(calls, content="", msg_id=None, **kwargs):
    return AIMessage(
        content,
        id=msg_id,
        tool_calls=[{"name": n, "args": a, "id": cid} for cid, n, a in calls],
        **kwargs,
    )


def shapes_traces() -> list[dict]:
    """Traces for ds_shapes.json: unknown argument, unknown tool, parallel calls, an error;
    sample 3 has no trace."""
    return [
        {
            "sample_id": 0,
            "messages": messages_to_dict(
                [
                    SystemMessage("You are a shop assistant."),
                    HumanMessage("What is 2 plus 3?"),
                    ai([("c1", "add_numbers", {"a": 3, "b": 2, "c": 1})], msg_id="m1"),
                    ToolMessage('{"result": 5}', tool_call_id="c1", name="add_numbers"),
                    AIMessage("5", id="m2"),
                ]
            ),
        },
        {
            "sample_id": "catalog-then-multiply",
            "messages": messages_to_dict(
                [
                    HumanMessage("How much are 3 notebooks?"),
                    ai([("c1", "list_items", {})]),
                    ToolMessage('{"items": []}', tool_call_id="c1", name="list_items"),
                    ai(
                        [
                            ("c2", "subtract_numbers", {"a": 3, "b": 1}),
                            ("c3", "multiply_numbers", {"a": 3, "b": 2.5}),
                        ]
                    ),
                    ToolMessage(
                        "Error: subtract_numbers is not a valid tool",
                        tool_call_id="c2",
                        status="error",
                    ),
                    ToolMessage('{"result": 7.5}', tool_call_id="c3", name="multiply_numbers"),
                    AIMessage("7.5"),
                ]
            ),
        },
        {
            "sample_id": "7",
            "status": "error",
            "error": "429 rate limited",
            "error_type": "ResourceExhausted",
            "messages": messages_to_dict(
                [
                    HumanMessage("Add 1.5 and 2"),
                    ai([("c1", "add_numbers", {"a": 1.5, "b": 2})]),
                ]
            ),
        },
    ]


# sample_id -> (status, tsa, tp, ahr, args_invalid, args_total, args_missing, n_agent)
SHAPES_EXPECTED = {
    "0": ("ok", 1.0, 1.0, 1 / 3, 1, 3, 0, 1),
    "catalog-then-multiply": ("ok", 1.0, 2 / 3, 0.0, 0, 2, 0, 3),
    "7": ("error", 1.0, 1.0, 1.0, 2, 2, 0, 1),
    "3": ("missing", None, 1.0, None, 0, 0, 0, 0),
}


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def do_import(store: Store, traces: Path, run_id: str = "imp", dataset=DATASET, tools=TOOLS_JSON):
    return cli(
        "import", "--dataset", str(dataset), "--tools", tools, "--traces", str(traces),
        "--run-id", run_id, "--store", str(store.root), "--format", "langchain",
    )  # fmt: skip


def score_rows(store: Store, run_id: str) -> dict[str, tuple]:
    result = cli("score", run_id, "--store", str(store.root), "--format", "json")
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(store.run_dir(run_id) / "scores" / "spec" / "scores.parquet")
    return {
        r["sample_id"]: (
            r["status"], r["tsa"], r["tp"], r["ahr"], r["args_invalid"], r["args_total"],
            r["args_missing"], r["n_agent"],
        )
        for r in frame.iter_rows(named=True)
    }  # fmt: skip


def assert_rows_close(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for sid, row in expected.items():
        for got, want in zip(actual[sid], row, strict=True):
            if isinstance(want, float):
                assert got == pytest.approx(want), (sid, actual[sid], row)
            else:
                assert got == want, (sid, actual[sid], row)


# ---------------------------------------------------------------- a successful import


def test_import_stores_every_sample_and_scores_agent_mistakes(tmp_path, store):
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    result = do_import(store, traces)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"run imp: 3/4 samples imported, 1 without a trace (status missing) -> {store.root}/imp"
    )
    run = store.open_run("imp")
    manifest = run.manifest
    assert manifest["source"] == "import"
    assert manifest["status"] == "imported"
    assert manifest["traces"]["sha256"] == hashlib.sha256(traces.read_bytes()).hexdigest()
    stored = [json.loads(line) for line in (run.dir / "dataset.jsonl").read_text().splitlines()]
    assert (
        stored == load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False).dataset.entries()
    )
    assert manifest["dataset"]["n_entries"] == len(stored)
    assert [s["name"] for s in manifest["tools"]["specs"]] == [
        "list_items", "add_numbers", "multiply_numbers",
    ]  # fmt: skip
    assert manifest["totals"]["missing"] == 1

    samples = pq.read_table(run.samples_path).to_pylist()
    assert [(s["sample_id"], s["status"], s["n_messages"]) for s in samples] == [
        ("0", "ok", 5),
        ("catalog-then-multiply", "ok", 7),
        ("7", "error", 2),
        ("3", "missing", 0),
    ]
    assert samples[2]["error"] == "429 rate limited"
    assert samples[2]["error_type"] == "ResourceExhausted"

    assert_rows_close(score_rows(store, "imp"), SHAPES_EXPECTED)
    summary = json.loads((run.dir / "scores" / "spec" / "summary.json").read_text())
    assert summary["tsa"] == pytest.approx(1.0)
    assert summary["tp"] == pytest.approx((1 + 2 / 3 + 1 + 1) / 4)
    assert summary["ahr"] == pytest.approx(3 / 7)
    assert (summary["n_samples"], summary["n_tsa"], summary["n_errors"]) == (4, 3, 2)


def test_stored_messages_load_back_into_equal_langchain_messages(tmp_path, store):
    lines = shapes_traces()
    traces = write_jsonl(tmp_path / "traces.jsonl", lines)
    assert do_import(store, traces).exit_code == 0
    rows = pq.read_table(store.run_dir("imp") / "messages.parquet").to_pylist()
    stored = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r["sample_index"], r["position"])):
        stored[row["sample_id"]].append(row)
    for line in lines:
        got = stored[str(line["sample_id"])]
        assert [r["position"] for r in got] == list(range(len(line["messages"])))
        assert [r["type"] for r in got] == [m["type"] for m in line["messages"]]
        loaded = messages_from_dict([json.loads(r["message"]) for r in got])
        assert loaded == messages_from_dict(line["messages"])


def test_tool_calls_view_of_an_imported_run(tmp_path, store):
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    assert do_import(store, traces).exit_code == 0
    result = cli(
        "sql",
        "select sample_id, call_index, name, args, position from tool_calls "
        "where sample_id = 'catalog-then-multiply' order by call_index",
        "--store", str(store.root), "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["call_index"], r["name"], json.loads(r["args"]), r["position"]) for r in rows] == [
        (0, "list_items", {}, 1),
        (1, "subtract_numbers", {"a": 3, "b": 1}, 3),
        (2, "multiply_numbers", {"a": 3, "b": 2.5}, 3),
    ]


def test_static_traces_file_imports_like_freshly_built_messages(tmp_path, tmp_path_factory):
    """tests/data/import/traces_shapes.jsonl was written once with messages_to_dict; it must keep
    importing and score exactly like the same traces built with today's LangChain."""
    fresh_store = Store(tmp_path_factory.mktemp("fresh") / "traces")
    static_store = Store(tmp_path_factory.mktemp("static") / "traces")
    fresh = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    assert do_import(fresh_store, fresh).exit_code == 0
    assert do_import(static_store, STATIC_TRACES).exit_code == 0
    assert score_rows(static_store, "imp") == score_rows(fresh_store, "imp")


def test_import_with_python_tools_scores_like_json_tools(tmp_path, tmp_path_factory):
    a = Store(tmp_path_factory.mktemp("json") / "traces")
    b = Store(tmp_path_factory.mktemp("module") / "traces")
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    assert do_import(a, traces).exit_code == 0
    assert do_import(b, traces, tools=BUILT_IN_TOOLS).exit_code == 0
    assert score_rows(a, "imp") == score_rows(b, "imp")


def test_import_library_call_and_model_label(tmp_path, store):
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces()[:1])
    inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)
    summary = import_traces(inputs, traces, store, "lib", model="openai:gpt-4o")
    assert (summary.samples, summary.imported, summary.missing) == (4, 1, 3)
    model = store.open_run("lib").manifest["model"]
    assert model["id"] == "openai:gpt-4o"
    assert model["simulated"] is False
    # samples without a trace are scored as making no calls
    rows = score_rows(store, "lib")
    assert rows["catalog-then-multiply"] == ("missing", 0.0, 0.0, None, 0, 0, 0, 0)
    assert rows["7"] == ("missing", 0.0, 0.0, None, 0, 0, 0, 0)
    assert rows["3"] == ("missing", None, 1.0, None, 0, 0, 0, 0)


def test_blank_lines_and_a_bom_are_accepted(tmp_path, store):
    lines = shapes_traces()
    text = "\n" + json.dumps(lines[0]) + "\n\n   \n" + json.dumps(lines[1]) + "\n"
    traces = tmp_path / "traces.jsonl"
    traces.write_bytes(b"\xef\xbb\xbf" + text.encode())
    result = do_import(store, traces)
    assert result.exit_code == 0, result.output
    assert "2/4 samples imported, 2 without a trace" in result.stdout


# ---------------------------------------------------------------- bad lines


def msgs_ok() -> list:
    return messages_to_dict([HumanMessage("hi"), AIMessage("hello")])


ERROR_LINE = {"sample_id": "catalog-then-multiply", "messages": [], "status": "error"}


def _args_line(value: str) -> str:
    """A trace line whose AI message calls add_numbers with ``a`` = ``value`` (JSON text)."""
    call = {"name": "add_numbers", "args": {"a": "VALUE", "b": 2}, "id": "c1"}
    message = {"type": "ai", "data": {"content": "", "tool_calls": [call]}}
    line = {"sample_id": "catalog-then-multiply", "messages": [message]}
    return json.dumps(line).replace('"VALUE"', value)


BAD_LINES = {
    "not-json": (["{not json"], "line 1: not valid JSON"),
    "not-an-object": ([[1, 2]], "line 1: expected an object with sample_id and messages"),
    "no-sample-id": ([{"messages": []}], "line 1: missing sample_id"),
    "sample-id-null": ([{"sample_id": None, "messages": []}], "line 1: sample_id must be"),
    "sample-id-float": ([{"sample_id": 0.0, "messages": []}], "line 1: sample_id must be"),
    "unknown-sample-id": (
        [{"sample_id": "0", "messages": []}, {"sample_id": "nope", "messages": []}],
        "line 2: sample_id 'nope' is not in the dataset",
    ),
    "duplicate-sample-id": (
        [{"sample_id": 7, "messages": []}, "", {"sample_id": "7", "messages": msgs_ok()}],
        "line 3: sample_id '7' appears twice",
    ),
    "messages-missing": ([{"sample_id": "0"}], "line 1: messages must be a list"),
    "messages-object": ([{"sample_id": "0", "messages": {"type": "human"}}], "messages must be"),
    "messages-string": ([{"sample_id": "0", "messages": "hi"}], "line 1: messages must be a list"),
    "unknown-message-type": (
        [{"sample_id": "0", "messages": [*msgs_ok(), {"type": "robot", "data": {"content": ""}}]}],
        "line 1: message 2: not a LangChain message dict",
    ),
    "message-without-type": (
        [{"sample_id": "0", "messages": [{"data": {"content": "hi"}}]}],
        "line 1: message 0: not a LangChain message dict",
    ),
    "message-a-string": (
        [{"sample_id": "0", "messages": ["hi"]}],
        "line 1: message 0: not a LangChain message dict",
    ),
    "tool-call-args-not-object": (
        [
            {
                "sample_id": "0",
                "messages": [
                    {
                        "type": "ai",
                        "data": {
                            "content": "",
                            "tool_calls": [{"name": "add_numbers", "args": "a=1", "id": "c"}],
                        },
                    }
                ],
            }
        ],
        "line 1: message 0: not a LangChain message dict",
    ),
    "bad-status": (
        [{"sample_id": "0", "messages": [], "status": "done"}],
        "line 1: status must be 'ok' or 'error'",
    ),
    "error-an-object": (
        [{"sample_id": "0", "messages": msgs_ok()}, {**ERROR_LINE, "error": {"x": 1}}],
        "line 2: error must be a string",
    ),
    "error-a-number": ([{**ERROR_LINE, "error": 42}], "line 1: error must be a string"),
    "error-type-a-list": ([{**ERROR_LINE, "error_type": ["X"]}], "line 1: error_type must be"),
    "lone-surrogate-in-a-message": (
        [{"sample_id": "0", "messages": messages_to_dict([HumanMessage("hi \ud800")])}],
        "line 1: holds a lone surrogate \\ud800, which is not valid Unicode",
    ),
    "lone-surrogate-in-the-error": (
        [{**ERROR_LINE, "error": "\udc80"}],
        "line 1: holds a lone surrogate \\udc80",
    ),
    "empty-file": ([], "no traces in the file"),
    # beyond the limits (#18): 600 levels imported and crashed score, 1,200 and 4,301 digits
    # gave tracebacks
    "args-600-deep": (
        [{"sample_id": "0", "messages": []}, "", _args_line("[" * 600 + "1" + "]" * 600)],
        "line 3: a value nested deeper than 100 levels of arrays and objects",
    ),
    "args-1200-deep": (
        [_args_line("[" * 1200 + "1" + "]" * 1200)],
        "line 1: a value nested deeper than 100 levels of arrays and objects",
    ),
    "int-4301-digits": (
        [{"sample_id": "0", "messages": []}, _args_line("9" * 4301)],
        "line 2: an integer of 4,301 digits (at most 640)",
    ),
    "int-641-digits": ([_args_line("9" * 641)], "line 1: an integer of 641 digits (at most 640)"),
    # a 60-byte line made a million trials of missing samples (#27): trials no trace holds
    # are refused, not made up
    "trial-far-beyond": (
        ['{"sample_id":"0","trial":1048575,"messages":[]}'],
        "line 1: trial 1048575, but no trace holds trial 0 (trials count from 0 without gaps)",
    ),
    "trial-after-a-gap": (
        [{"sample_id": "0", "messages": []}, {"sample_id": "7", "trial": 3, "messages": []}],
        "line 2: trial 3, but no trace holds trial 1 (trials count from 0 without gaps)",
    ),
    "usage-beyond-the-store": (
        [{"sample_id": "0", "messages": messages_to_dict([AIMessage("5", usage_metadata={
            "input_tokens": 10**19, "output_tokens": 1, "total_tokens": 10**19 + 1})])}],
        "line 1: a message's input_tokens is 10000000000000000000: a token count is an "
        "integer from 0 to 9223372036854775807",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD_LINES)
def test_bad_lines_are_refused_and_nothing_is_stored(tmp_path, store, case):
    lines, fragment = BAD_LINES[case]
    traces = write_jsonl(tmp_path / "traces_bad.jsonl", lines)
    # a run already in the store must be left alone
    good = write_jsonl(tmp_path / "good.jsonl", shapes_traces())
    assert do_import(store, good, run_id="before").exit_code == 0
    before = snapshot(store.root)
    result = do_import(store, traces)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    assert all(line.startswith(("Error: ", "Hint: ")) for line in result.stderr.splitlines())
    assert errors[0].startswith("Error: traces_bad.jsonl: ")
    assert fragment in errors[0]
    assert snapshot(store.root) == before
    assert [p.name for p in store.root.iterdir()] == ["before"]


def test_line_separators_inside_strings_do_not_split_lines(tmp_path, store):
    """JSON Lines end at "\\n" (or "\\r\\n") only: U+2028, U+2029 and U+0085 are text."""
    text = "a\u2028b\u2029c\x85d"
    line = {"sample_id": "0", "messages": messages_to_dict([HumanMessage(text)])}
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(line, ensure_ascii=False) + "\r\n", encoding="utf-8")
    result = do_import(store, traces)
    assert result.exit_code == 0, result.output
    (row,) = pq.read_table(store.run_dir("imp") / "messages.parquet").to_pylist()
    assert json.loads(row["message"])["data"]["content"] == text
    # a bad line after such a line is named by its own number
    bad = tmp_path / "traces_bad.jsonl"
    bad.write_text(json.dumps(line, ensure_ascii=False) + "\n{oops\n", encoding="utf-8")
    result = do_import(store, bad, run_id="imp2")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: traces_bad.jsonl: line 2: not valid JSON")


def test_a_model_label_that_is_not_utf8_is_refused(tmp_path, store):
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)
    # how a non-UTF-8 byte of a command line reaches Python
    with pytest.raises(InputError, match=r"^--model 'x\\udcff': not valid UTF-8"):
        import_traces(inputs, traces, store, "lib", model="x\udcff")
    assert not store.root.exists()


@pytest.mark.parametrize("step", ["dataset", "fold"])
def test_a_failed_import_leaves_no_run_behind(tmp_path, store, monkeypatch, step):
    import tcbreplay._store.runs

    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    assert do_import(store, traces, run_id="before").exit_code == 0
    before = snapshot(store.root)
    inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if step == "dataset":  # inside create_run, after it made the folder and took the lock
        monkeypatch.setattr(tcbreplay._store.runs, "write_jsonl_atomic", fail)
    else:  # after the manifest and the journal are written
        monkeypatch.setattr(tcbreplay._store.writer.RunWriter, "fold", fail)
    with pytest.raises(OSError, match="No space left"):
        import_traces(inputs, traces, store, "lib")
    assert snapshot(store.root) == before
    monkeypatch.undo()
    # the same run id is free again
    assert import_traces(inputs, traces, store, "lib").imported == 3


def test_an_existing_run_is_not_removed_by_a_refused_import(tmp_path, store):
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    assert do_import(store, traces).exit_code == 0
    before = snapshot(store.root)
    result = do_import(store, traces)
    assert result.exit_code == 2
    assert "already exists" in result.stderr
    assert snapshot(store.root) == before


def test_missing_traces_file(tmp_path, store):
    result = do_import(store, tmp_path / "absent.jsonl")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ")
    assert "absent.jsonl" in result.stderr
    assert not store.root.exists()


def test_library_refuses_bad_lines_with_trace_error(tmp_path, store):
    traces = write_jsonl(tmp_path / "t.jsonl", [{"sample_id": "0", "messages": []}, "oops"])
    inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)
    with pytest.raises(TraceError, match=r"^t\.jsonl: line 2: not valid JSON"):
        import_traces(inputs, traces, store, "lib")
    assert not store.root.exists()


# ---------------------------------------------------------------- a recorded run, re-imported


def export_as_traces(run_dir: Path, path: Path) -> Path:
    """Group a run's messages.parquet per sample into import lines (sample order kept)."""
    samples = pq.read_table(run_dir / "samples.parquet").to_pylist()
    grouped = defaultdict(list)
    for row in pq.read_table(run_dir / "messages.parquet").to_pylist():
        grouped[row["sample_id"]].append((row["position"], json.loads(row["message"])))
    lines = []
    for s in samples:
        line = {
            "sample_id": s["sample_id"],
            "messages": [m for _, m in sorted(grouped[s["sample_id"]], key=lambda x: x[0])],
        }
        if s["status"] == "error":
            line.update(status="error", error=s["error"], error_type=s["error_type"])
        lines.append(line)
    return write_jsonl(path, lines)


def test_importing_a_recorded_run_scores_identically(sim_run, tmp_path):
    sim_store, run_id = sim_run
    store = Store(tmp_path / "traces")
    shutil.copytree(sim_store.run_dir(run_id), store.root / run_id)  # never score the shared run
    for name in ("scores", "evaluations"):
        shutil.rmtree(store.root / run_id / name, ignore_errors=True)
    traces = export_as_traces(store.run_dir(run_id), tmp_path / "traces_sim.jsonl")
    tools_json = tmp_path / "tools_from_manifest.json"
    tools_json.write_text(json.dumps(store.open_run(run_id).manifest["tools"]["specs"]))
    for imported, tools in (("re-imported", BUILT_IN_TOOLS), ("re-imported-json", str(tools_json))):
        result = do_import(store, traces, imported, dataset=BUILT_IN_DATASET, tools=tools)
        assert result.exit_code == 0, result.output
        assert "94/94 samples imported" in result.stdout

    recorded = score_rows(store, run_id)
    assert len(recorded) == 94
    assert any(row[3] not in (None, 0.0) for row in recorded.values())  # the sim made mistakes
    for imported in ("re-imported", "re-imported-json"):
        assert score_rows(store, imported) == recorded
        scores = {
            name: pl.read_parquet(store.run_dir(name) / "scores/spec/scores.parquet").drop("run_id")
            for name in (run_id, imported)
        }
        assert scores[imported].equals(scores[run_id])
        summaries = {
            name: json.loads((store.run_dir(name) / "scores/spec/summary.json").read_text())
            for name in (run_id, imported)
        }
        for key in ("tsa", "tp", "ahr", "n_samples", "n_tsa", "args_invalid", "args_total"):
            assert summaries[imported][key] == summaries[run_id][key]
        dashboards = [
            json.loads(next((store.run_dir(name) / "evaluations").glob("*.json")).read_text())
            for name in (run_id, imported)
        ]
        assert dashboards[0]["samples"] == dashboards[1]["samples"]
        assert dashboards[0]["results"] == dashboards[1]["results"]
        assert not math.isnan(dashboards[1]["results"]["tp"])


# ---------------------------------------------------------------- --format abet-evaluation


def test_dashboard_file_listing_an_input_twice_is_refused(tmp_path, store):
    # the JSONL import refuses a sample_id given twice; a dashboard file names samples by input
    listed = [
        {"input": "Hello!", "output": {"tool_call_names": [], "tool_call_args": []}},
        {"input": "What is 2 plus 3?", "output": {"tool_call_names": [], "tool_call_args": []}},
        {"input": "Hello!", "output": {"tool_call_names": ["list_items"], "tool_call_args": [{}]}},
    ]
    traces = tmp_path / "evaluation.json"
    traces.write_text(json.dumps({"samples": listed}))
    result = cli(
        "import", "--format", "abet-evaluation", "--dataset", DATASET, "--tools", TOOLS_JSON,
        "--traces", traces, "--run-id", "abet", "--store", store.root,
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        "Error: evaluation.json: samples[2]: input 'Hello!' appears twice (also samples[0])",
        "Hint: list each sample once",
    ]
    assert not store.root.exists()


def test_dashboard_file_with_a_lone_surrogate_is_refused(tmp_path, store):
    output = {"tool_call_names": ["list_items"], "tool_call_args": [{"q": "\ud800"}]}
    traces = tmp_path / "evaluation.json"
    traces.write_text(json.dumps({"samples": [{"input": "Hello!", "output": output}]}))
    inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)
    with pytest.raises(
        TraceError, match=r"^evaluation\.json: samples\[0\]: holds a lone surrogate"
    ):
        import_traces(inputs, traces, store, "abet", fmt="abet-evaluation")
    assert not store.root.exists()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            "[" * 1000 + "1" + "]" * 1000,
            "a value nested deeper than 100 levels of arrays and objects",
        ),
        ("9" * 4301, "an integer of 4,301 digits (at most 640)"),
    ],
)
def test_dashboard_file_with_deep_or_huge_values_is_refused(tmp_path, store, value, problem):
    traces = tmp_path / "evaluation.json"
    output = {"tool_call_names": ["add_numbers"], "tool_call_args": [{"a": "VALUE"}]}
    sample = json.dumps({"input": "Hello!", "output": output}).replace('"VALUE"', value)
    traces.write_text('{"samples": [\n' + sample + "\n]}")
    inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)
    with pytest.raises(TraceError) as info:
        import_traces(inputs, traces, store, "abet", fmt="abet-evaluation")
    assert str(info.value) == f"evaluation.json: line 2: {problem}"
    assert not store.root.exists()


def _listed_status(store) -> str:
    result = cli("runs", "--store", str(store.root), "--format", "json")
    (row,) = json.loads(result.stdout)
    return row["status"]


def test_an_import_killed_midway_is_replaced_by_the_same_import(tmp_path, store):
    """A killed import leaves its run 'recording' (no exception handler ran): score points at
    the import, not at record --resume, and the same import replaces it, unless it still runs."""
    traces = write_jsonl(tmp_path / "traces.jsonl", shapes_traces())
    assert do_import(store, traces).exit_code == 0
    manifest_path = store.run_dir("imp") / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "status": "recording"}))
    (store.run_dir("imp") / "samples.parquet").unlink()  # killed before the fold
    (store.run_dir("imp") / "messages.parquet").unlink()
    result = cli("score", "imp", "--store", str(store.root))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1] == (
        f"Hint: finish it with: the same tcbreplay import again (with --store {store.root}): it "
        "replaces the unfinished run"
    )
    # no process writes it: runs says interrupted, not recording (until one does)
    assert _listed_status(store) == "interrupted"
    writer = RunWriter(store.run_dir("imp"))  # the import still running
    try:
        assert _listed_status(store) == "recording"
        result = do_import(store, traces)
        assert result.exit_code == 1 and "is being written by" in result.stderr
    finally:
        writer.close()
    result = do_import(store, traces)
    assert result.exit_code == 0, result.output
    assert store.open_run("imp").status == "imported"
    assert len(score_rows(store, "imp")) == 4  # the dataset's samples


# ---------------------------------------------------------------- folded without the journal


@pytest.mark.parametrize(
    "traces",
    [
        "otel/openai_v2_latest.otlp.jsonl",
        "langsmith/runs.jsonl",
        "langfuse/observations.json",
        "tau2/gpt-4.1_telecom_sample.json",
        "import/traces_shapes.jsonl",
    ],
)
def test_an_import_folds_its_records_as_the_journal_would(tmp_path, monkeypatch, traces):
    """An import (all or nothing) folds the records it holds without writing them to the
    journal first: the run's files are byte for byte those a fold of the same records
    through the journal writes."""
    folded: list[list[dict]] = []
    fold = RunWriter.fold

    def keeping(self, records=None):
        folded.append(records)
        return fold(self, records)

    monkeypatch.setattr(RunWriter, "fold", keeping)
    inputs = None
    if traces.startswith("import/"):
        inputs = load_inputs(None, DATASET, TOOLS_JSON, None, need_prompt=False)
    store = Store(tmp_path / "memory")
    import_traces(inputs, DATA / traces, store, "run")
    (records,) = folded
    assert records, "the import handed its records to the fold"
    run = store.run_dir("run")
    manifest = json.loads((run / "manifest.json").read_text())
    dataset = [json.loads(line) for line in (run / "dataset.jsonl").read_text().splitlines()]
    journaled = Store(tmp_path / "journal").create_run(manifest, dataset)
    for record in records:
        journaled.append(record)
    fold(journaled)
    journaled.close()
    for name in ("samples.parquet", "messages.parquet"):  # (each fold marks its files apart)
        assert pq.read_table(journaled.dir / name).equals(pq.read_table(run / name)), name
        layout = [
            pq.ParquetFile(path / name).metadata.num_row_groups for path in (journaled.dir, run)
        ]
        assert layout[0] == layout[1], name
