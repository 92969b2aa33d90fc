"""Importing every trace dialect with one command (#20): OpenAI's and Anthropic's message forms
built from their SDKs' own types, LangChain's, τ-bench's results files; the format told from
the file when not given; unknown keys refused."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA, cli, snapshot

DATA = TEST_DATA
TAU = DATA / "tau-bench"
TOOLS_JSON = DATA / "tools_shop.json"
SCORE_COLUMNS = ["tsa", "tp", "ahr", "args_invalid", "args_total", "args_missing", "n_agent"]


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def scores(root: Path, run_id: str) -> pl.DataFrame:
    result = cli("score", run_id, "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    return pl.read_parquet(path).sort("sample_id", "trial")


def sql(root: Path, query: str) -> list[dict]:
    result = cli("sql", query, "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


SHOP_DATASET = [
    {"id": "add", "input": "What is 2 plus 3?",
     "target": [{"name": "add_numbers", "args": {"a": 3, "b": 2}}]},
    {"id": "items", "input": "How much are 3 notebooks?",
     "target": [{"name": "list_items", "args": {}},
                {"name": "multiply_numbers", "args": {"a": 3, "b": 2.5}}]},
]  # fmt: skip


@pytest.fixture
def shop_dataset(tmp_path) -> Path:
    path = tmp_path / "shop.json"
    path.write_text(json.dumps(SHOP_DATASET))
    return path


# ---------------------------------------------------------------- OpenAI


def openai_lines() -> list[dict]:
    """Two samples as the OpenAI SDK's own types dump them: an answer with parallel tool calls
    (one with arguments that are not JSON), tool results, content given as parts."""
    from openai.types.chat import (
        ChatCompletionMessage,
        ChatCompletionMessageFunctionToolCall,
        ChatCompletionSystemMessageParam,
        ChatCompletionToolMessageParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.chat.chat_completion_message_function_tool_call import Function

    def call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageFunctionToolCall:
        return ChatCompletionMessageFunctionToolCall(
            id=call_id, type="function", function=Function(name=name, arguments=arguments)
        )

    def answer(*calls, content=None) -> dict:
        return ChatCompletionMessage(
            role="assistant", content=content, tool_calls=list(calls) or None
        ).model_dump()

    def result(call_id: str, content: str) -> dict:
        return dict(ChatCompletionToolMessageParam(role="tool", tool_call_id=call_id,
                                                   content=content))  # fmt: skip

    system = dict(ChatCompletionSystemMessageParam(role="system", content="You are a shop."))
    return [
        {"sample_id": "add", "messages": [
            system,
            dict(ChatCompletionUserMessageParam(role="user", content="What is 2 plus 3?")),
            answer(call("c1", "add_numbers", '{"a": 3, "b": 2}')),
            result("c1", '{"result": 5}'),
            answer(content="5"),
        ]},
        {"sample_id": "items", "metadata": {"cost_usd": 0.002}, "messages": [
            dict(ChatCompletionUserMessageParam(
                role="user", content=[{"type": "text", "text": "How much are 3 notebooks?"}])),
            answer(call("c1", "list_items", ""), call("c2", "multiply_numbers", '{"a": 3, "b"')),
            result("c1", "[]"),
            result("c2", "error: bad arguments"),
            answer(content="7.50"),
        ]},
    ]  # fmt: skip


def test_an_openai_sdk_file_imports_with_one_command_and_scores(tmp_path, shop_dataset):
    traces = write_jsonl(tmp_path / "openai.jsonl", openai_lines())
    root = tmp_path / "traces"
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--traces", traces,
                 "--run-id", "oa", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: openai (")
    assert "--format chooses another" in result.stderr
    calls = sql(root, "select sample_id, call_index, name, args::varchar as args, call_id "
                "from tool_calls order by sample_id, call_index")  # fmt: skip
    assert calls == [
        {"sample_id": "add", "call_index": 0, "name": "add_numbers", "args": '{"a":3,"b":2}',
         "call_id": "c1"},
        {"sample_id": "items", "call_index": 0, "name": "list_items", "args": "{}",
         "call_id": "c1"},
        {"sample_id": "items", "call_index": 1, "name": "multiply_numbers",
         "args": '{"[tcbreplay: arguments not a JSON object]":"{\\"a\\": 3, \\"b\\""}',
         "call_id": "c2"},
    ]  # fmt: skip
    got = scores(root, "oa")
    # arguments that are not JSON are the agent's: one invalid argument, not a refused file
    assert got.select("sample_id", *SCORE_COLUMNS).rows() == [
        ("add", 1.0, 1.0, 0.0, 0, 2, 0, 1),
        ("items", 1.0, 1.0, 1.0, 1, 1, 2, 2),
    ]
    meta = sql(root, "select sample_id, metadata->>'cost_usd' as cost from samples order by 1")
    assert meta == [{"sample_id": "add", "cost": None}, {"sample_id": "items", "cost": "0.002"}]
    types = sql(root, "select type, count(*) as n from messages group by 1 order by 1")
    assert types == [{"type": "ai", "n": 4}, {"type": "human", "n": 2},
                     {"type": "system", "n": 1}, {"type": "tool", "n": 3}]  # fmt: skip


# ---------------------------------------------------------------- Anthropic


def anthropic_lines() -> list[dict]:
    """The same two samples as the Anthropic SDK's own types dump them."""
    from anthropic.types import (
        Message,
        SystemMessageParam,
        TextBlock,
        TextBlockParam,
        ToolResultBlockParam,
        ToolUseBlock,
        Usage,
        UserMessageParam,
    )

    def answer(*blocks) -> dict:
        return Message(
            id="msg", type="message", role="assistant", model="claude-test", content=list(blocks),
            stop_reason="tool_use", stop_sequence=None,
            usage=Usage(input_tokens=30, output_tokens=7),
        ).model_dump()  # fmt: skip

    def use(call_id, name, args) -> ToolUseBlock:
        return ToolUseBlock(type="tool_use", id=call_id, name=name, input=args)

    def results(*pairs) -> dict:
        return dict(UserMessageParam(role="user", content=[
            ToolResultBlockParam(type="tool_result", tool_use_id=i, content=c) for i, c in pairs
        ]))  # fmt: skip

    return [
        {"sample_id": "add", "system": "You are a shop.", "messages": [
            dict(UserMessageParam(role="user", content="What is 2 plus 3?")),
            answer(TextBlock(type="text", text="Adding."),
                   use("t1", "add_numbers", {"a": 3, "b": 2})),
            results(("t1", '{"result": 5}')),
            answer(TextBlock(type="text", text="5")),
        ]},
        {"sample_id": "items", "messages": [
            dict(SystemMessageParam(role="system", content="You are a shop.")),
            dict(UserMessageParam(role="user", content=[
                TextBlockParam(type="text", text="How much are 3 notebooks?")])),
            answer(use("t1", "list_items", {}), use("t2", "multiply_numbers", {"a": 3, "b": 2.5})),
            results(("t1", "[]"), ("t2", "7.5")),
            answer(TextBlock(type="text", text="7.50")),
        ]},
    ]  # fmt: skip


@pytest.mark.slow  # (the anthropic SDK's types take seconds to import: 4-12 s under load)
def test_an_anthropic_sdk_file_imports_with_one_command_and_scores(tmp_path, shop_dataset):
    traces = write_jsonl(tmp_path / "anthropic.jsonl", anthropic_lines())
    root = tmp_path / "traces"
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--traces", traces,
                 "--run-id", "an", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: anthropic (")
    got = scores(root, "an")
    assert got.select("sample_id", *SCORE_COLUMNS).rows() == [
        ("add", 1.0, 1.0, 0.0, 0, 2, 0, 1),
        ("items", 1.0, 1.0, 0.0, 0, 2, 0, 2),
    ]
    tools = sql(root, "select sample_id, type, message->'data'->>'tool_call_id' as call_id, "
                "output_tokens from messages order by sample_id, position")  # fmt: skip
    assert [(r["sample_id"], r["type"], r["call_id"]) for r in tools] == [
        ("add", "system", None), ("add", "human", None), ("add", "ai", None),
        ("add", "tool", "t1"), ("add", "ai", None),
        ("items", "system", None), ("items", "human", None), ("items", "ai", None),
        ("items", "tool", "t1"),
        ("items", "tool", "t2"), ("items", "ai", None),
    ]  # fmt: skip
    assert {r["output_tokens"] for r in tools if r["type"] == "ai"} == {7}  # usage kept


# ---------------------------------------------------------------- LangChain, sniffing, keys


def test_a_langchain_tool_call_without_an_id_imports(tmp_path, shop_dataset):
    """Such a call ended in a TypeError from LangChain (#20)."""
    line = {"sample_id": "add", "messages": [
        {"type": "human", "data": {"content": "What is 2 plus 3?"}},
        {"type": "ai", "data": {"content": "", "tool_calls": [
            {"name": "add_numbers", "args": {"a": 3, "b": 2}}]}},
    ]}  # fmt: skip
    root = tmp_path / "traces"
    traces = write_jsonl(tmp_path / "t.jsonl", [line])
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--traces",
                 traces, "--run-id", "lc", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: langchain (")
    assert sql(root, "select name, call_id from tool_calls") == [
        {"name": "add_numbers", "call_id": None}
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"sample_id": "add", "messages": [], "reward": 1}, "unknown key 'reward' in the line "
         "(a line has sample_id, trial, messages, status, error, error_type, metadata; put "
         "other fields in metadata)"),
        ({"sample_id": "add", "messages": [], "epoch": 1}, "unknown key 'epoch' in the line "
         "(did you mean trial?)"),
        ({"sample_id": "add", "messages": [], "trial": -1}, "trial must be an integer from 0 "
         "to 1048575"),
        ({"sample_id": "add", "messages": [], "metadata": [1]}, "metadata must be an object"),
    ],
)  # fmt: skip
def test_an_unknown_or_bad_key_in_a_line_is_refused(tmp_path, shop_dataset, line, message):
    root = tmp_path / "traces"
    before = snapshot(root)
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--format",
                 "openai", "--traces", write_jsonl(tmp_path / "t.jsonl", [line]),
                 "--run-id", "x", "--store", root)  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"Error: t.jsonl: line 1: {message}"
    assert snapshot(root) == before


def test_a_repeated_sample_and_trial_is_refused_but_trials_are_kept(tmp_path, shop_dataset):
    lines = [{"sample_id": "add", "trial": t, "messages": []} for t in (0, 1, 1)]
    root = tmp_path / "traces"
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--format",
                 "openai", "--traces", write_jsonl(tmp_path / "t.jsonl", lines),
                 "--run-id", "x", "--store", root)  # fmt: skip
    assert result.exit_code == 2
    assert "line 3: sample_id 'add', trial 1 appears twice (also line 2)" in result.stderr
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--format",
                 "openai", "--traces", write_jsonl(tmp_path / "t.jsonl", lines[:2]),
                 "--run-id", "x", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 trials each: 2/4 trials imported, 2 without a trace (status missing)" in result.stdout
    rows = sql(root, "select sample_id, trial, status from samples order by sample_index")
    assert [(r["sample_id"], r["trial"], r["status"]) for r in rows] == [
        ("add", 0, "ok"),
        ("items", 0, "missing"),
        ("add", 1, "ok"),
        ("items", 1, "missing"),
    ]


def test_an_import_of_one_sample_in_trials_says_the_sample_in_the_singular(tmp_path):
    """It said "run x: 1 samples, 2 trials each: 2/2 trials imported"."""
    dataset = tmp_path / "one.json"
    dataset.write_text(json.dumps(SHOP_DATASET[:1]))
    lines = [{"sample_id": "add", "trial": t, "messages": []} for t in (0, 1)]
    result = cli("import", "--dataset", dataset, "--tools", TOOLS_JSON, "--format", "openai",
                 "--traces", write_jsonl(tmp_path / "t.jsonl", lines), "--run-id", "x",
                 "--store", tmp_path / "traces")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("run x: 1 sample, 2 trials each: 2/2 trials imported -> ")


def test_a_file_in_no_known_shape_asks_for_the_format(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"a": 1}]))
    result = cli("import", "--traces", path, "--run-id", "x", "--store", tmp_path / "s")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: t.json: cannot tell its format: it is a JSON list, but not of τ-bench results",
        "Hint: give --format (langchain, openai, anthropic, tau-bench, tau2, inspect, langsmith, "
        "langfuse, abet-evaluation, otlp, jaeger, bfcl)",
    ]


# ---------------------------------------------------------------- τ-bench


def by_hand_in_langchain_form(results: list[dict], tmp_path: Path) -> tuple[Path, Path, Path]:
    """τ-bench's trajectories converted by hand into today's files (a dataset, LangChain
    message dicts, bare tool schemas), without tcbreplay's importers: (dataset, traces,
    tools)."""
    tasks = {}
    lines = []
    for r in results:
        task = r["info"]["task"]
        tasks[r["task_id"]] = {
            "id": r["task_id"], "input": task["instruction"],
            "target": [{"name": a["name"], "args": a["kwargs"]} for a in task["actions"]],
        }  # fmt: skip
        messages = []
        for m in r["traj"]:
            if m["role"] == "system":
                messages.append({"type": "system", "data": {"content": m["content"]}})
            elif m["role"] == "user":
                messages.append({"type": "human", "data": {"content": m["content"]}})
            elif m["role"] == "tool":
                messages.append({"type": "tool", "data": {
                    "content": m["content"], "tool_call_id": m["tool_call_id"]}})  # fmt: skip
            else:
                calls = [
                    {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"]),
                     "id": c["id"]}
                    for c in m.get("tool_calls") or []
                ]  # fmt: skip
                messages.append({"type": "ai", "data": {
                    "content": m["content"] or "", "tool_calls": calls}})  # fmt: skip
        lines.append({"sample_id": r["task_id"], "trial": r["trial"], "messages": messages})
    dataset = tmp_path / "tau_dataset.json"
    dataset.write_text(json.dumps(sorted(tasks.values(), key=lambda t: t["id"])))
    tools = tmp_path / "tau_tools.json"
    wrapped = json.loads((TAU / "airline-tools.json").read_text())
    tools.write_text(json.dumps([t["function"] for t in wrapped]))
    return dataset, write_jsonl(tmp_path / "tau_lc.jsonl", lines), tools


def test_tau_bench_results_import_with_nothing_else(tmp_path, monkeypatch):
    """The issue's "done when": the command alone keeps 5 samples x 4 trials and every reward,
    and its per-sample scores equal those of the same data converted by hand."""
    results = json.loads((TAU / "gpt-4o-airline-sample.json").read_text())
    monkeypatch.chdir(TAU)
    root = tmp_path / "traces"
    result = cli("import", "--format", "tau-bench", "--traces", "gpt-4o-airline-sample.json",
                 "--tools", "airline-tools.json", "--run-id", "tau", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "run tau: 5 samples, 4 trials each: 20/20 trials imported" in result.stdout
    rows = sql(
        root,
        "select sample_id, trial, metadata->>'reward' as reward, "
        "(metadata->'user_cost')::double as cost from samples order by sample_index",
    )
    assert len(rows) == 20
    assert {r["sample_id"] for r in rows} == {"0", "1", "2", "5", "12"}
    assert {r["trial"] for r in rows} == {0, 1, 2, 3}
    expected = {(str(r["task_id"]), r["trial"]): (r["reward"], r["info"]["user_cost"])
                for r in results}  # fmt: skip
    assert {(r["sample_id"], r["trial"]): (float(r["reward"]), r["cost"]) for r in rows} == expected
    task = sql(root, "select input, metadata->'outputs' as outputs, gold from samples "
               "where sample_id = '12' and trial = 0")[0]  # fmt: skip
    assert (
        task["input"].startswith("You amelia_sanchez_4739 ") and json.loads(task["gold"]) == []
    )  # no actions

    dataset, traces, tools = by_hand_in_langchain_form(results, tmp_path)
    by_hand = cli("import", "--dataset", dataset, "--tools", tools, "--traces", traces,
                  "--run-id", "hand", "--store", root)  # fmt: skip
    assert by_hand.exit_code == 0, by_hand.output
    ours, theirs = scores(root, "tau"), scores(root, "hand")
    columns = ["sample_id", "trial", "n_gold", *SCORE_COLUMNS, "pairs", "status"]
    assert ours.select(columns).equals(theirs.select(columns))
    assert ours["n_gold"].sum() > 0 and ours["n_agent"].sum() > 0


def test_an_import_with_trials_counts_samples_and_trials_apart(tmp_path):
    """Reported: 5 samples x 4 trials printed as "20/20 samples imported (4 trials each)"."""
    from tcbreplay import import_traces
    from tcbreplay._store.runs import Store

    traces, tools = TAU / "gpt-4o-airline-sample.json", TAU / "airline-tools.json"
    summary = import_traces(
        None, traces, Store(tmp_path / "lib"), "tau", fmt="tau-bench", tools=str(tools)
    )
    assert (summary.samples, summary.trials, summary.imported, summary.missing) == (5, 4, 20, 0)
    result = cli("--format", "json", "import", "--format", "tau-bench", "--traces", traces,
                 "--tools", tools, "--run-id", "tau", "--store", tmp_path / "cli")  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["samples"], data["trials"], data["imported"]) == (5, 4, 20)


def test_tau_bench_is_told_from_the_file(tmp_path):
    root = tmp_path / "traces"
    result = cli("import", "--traces", TAU / "gpt-4o-airline-sample.json", "--tools",
                 TAU / "airline-tools.json", "--run-id", "tau", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: tau-bench (a JSON list of τ-bench results")


def test_a_tau_bench_action_with_an_unknown_key_is_refused(tmp_path):
    results = json.loads((TAU / "gpt-4o-airline-sample.json").read_text())
    results[3]["info"]["task"]["actions"][0]["args"] = {}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(results))
    root = tmp_path / "traces"
    result = cli("import", "--traces", path, "--tools", TAU / "airline-tools.json",
                 "--run-id", "tau", "--store", root)  # fmt: skip
    assert result.exit_code == 2
    assert "Error: bad.json: entry 3 (task 0, trial 3): info.task.actions[0] must be " in (
        result.stderr
    )
    assert "(unknown key 'args')" in result.stderr
    assert not root.exists()


# ---------------------------------------------------------------- refused, the store untouched


def refusal(tmp_path: Path, dataset: Path, traces: Path) -> list[str]:
    """Import ``traces``, which must be refused as bad input with the store untouched: the
    lines of stderr."""
    root = tmp_path / "traces"
    before = snapshot(root)
    result = cli("import", "--dataset", dataset, "--tools", TOOLS_JSON, "--traces", traces,
                 "--run-id", "x", "--store", root)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert snapshot(root) == before
    return result.stderr.splitlines()


def with_args_text(line: dict, old: str, new: str) -> str:
    """A line as JSON text with the arguments ``old`` written as ``new`` (JSON with a repeated
    key, which no JSON writer makes)."""
    text = json.dumps(line)
    assert text.count(old) == 1
    return text.replace(old, new)


def repeated_key_files(tmp_path: Path) -> dict[str, Path]:
    """One sample whose call to add_numbers repeats the argument a, in each dialect."""
    from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

    openai_line = openai_lines()[0]
    openai_line["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"a":3,"a":4,"b":2}'
    anthropic_line = anthropic_lines()[0]
    langchain_line = {"sample_id": "add", "messages": messages_to_dict([
        HumanMessage("What is 2 plus 3?"),
        AIMessage("", tool_calls=[{"name": "add_numbers", "args": {"a": 3, "b": 2}, "id": "c1"}]),
    ])}  # fmt: skip
    texts = {
        "openai": json.dumps(openai_line),
        "anthropic": with_args_text(anthropic_line, '"input": {"a": 3, "b": 2}',
                                    '"input": {"a": 3, "a": 4, "b": 2}'),
        "langchain": with_args_text(langchain_line, '"args": {"a": 3, "b": 2}',
                                    '"args": {"a": 3, "a": 4, "b": 2}'),
    }  # fmt: skip
    for name, text in texts.items():
        (tmp_path / f"{name}.jsonl").write_text(text + "\n")
    return {name: tmp_path / f"{name}.jsonl" for name in texts}


@pytest.mark.parametrize(
    ("dialect", "message"),
    [
        ("openai", "message 2: tool_calls[0].function.arguments repeats the key 'a'"),
        ("anthropic", "message 1: a tool_use block's input repeats the key 'a'"),
        ("langchain", "message 1: tool_calls[0].args repeats the key 'a'"),
    ],
)
def test_arguments_that_repeat_a_key_are_refused_naming_it(
    tmp_path, shop_dataset, dialect, message
):
    """Read silently, the last value would be stored (#27): the README says a repeated key is
    an error naming it."""
    traces = repeated_key_files(tmp_path)[dialect]
    assert refusal(tmp_path, shop_dataset, traces)[0] == (
        f"Error: {dialect}.jsonl: line 1: {message}"
    )


def test_a_key_repeated_inside_an_argument_value_keeps_its_last_value(tmp_path, shop_dataset):
    """As the README says: only the arguments object itself may not repeat a key."""
    line = openai_lines()[0]
    line["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"a":{"x":1,"x":2},"b":2}'
    root = tmp_path / "traces"
    result = cli("import", "--dataset", shop_dataset, "--tools", TOOLS_JSON, "--traces",
                 write_jsonl(tmp_path / "t.jsonl", [line]), "--run-id", "oa",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = sql(root, "select args::varchar as args from tool_calls")
    assert rows == [{"args": '{"a":{"x":2},"b":2}'}]


def anthropic_usage(line: dict, **usage: int) -> dict:
    """A line whose answers (as the SDK's Message dumps them) report ``usage``."""
    from anthropic.types import Usage

    for m in line["messages"]:
        if m["role"] == "assistant":
            m["usage"] = Usage(**{"output_tokens": 7, **usage}).model_dump()
    return line


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        ({"input_tokens": 10**23}, "a message's input_tokens is 100000000000000000000000: a "
         "token count is an integer from 0 to 9223372036854775807"),
        ({"input_tokens": 2**62}, "its messages' input_tokens add up to 9223372036854775808, "
         "more than 9223372036854775807"),
        ({"input_tokens": 2**63 - 1}, "a message's total_tokens is 9223372036854775814: a "
         "token count is an integer from 0 to 9223372036854775807"),
    ],
)  # fmt: skip
def test_token_counts_beyond_the_store_are_refused(tmp_path, shop_dataset, usage, message):
    """An OverflowError from pyarrow while folding (#27): token counts are int64 columns."""
    line = anthropic_usage(anthropic_lines()[0], **usage)
    traces = write_jsonl(tmp_path / "anthropic.jsonl", [line])
    assert refusal(tmp_path, shop_dataset, traces)[0] == (
        f"Error: anthropic.jsonl: line 1: {message}"
    )


def test_an_anthropic_tool_use_without_a_name_is_refused(tmp_path, shop_dataset):
    """It became a call named "" (#27); OpenAI's importer refuses a call without a name."""
    line = anthropic_lines()[0]
    del line["messages"][1]["content"][1]["name"]
    traces = write_jsonl(tmp_path / "anthropic.jsonl", [line])
    assert refusal(tmp_path, shop_dataset, traces)[0] == (
        "Error: anthropic.jsonl: line 1: message 1: a tool_use block needs a name"
    )
