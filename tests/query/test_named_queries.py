"""`tcbreplay query`: the named queries, each checked against a computation in plain Python."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers import TEST_DATA, cli

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._query.named import _parse_file, list_named, load_named, run_named
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.metrics import success
from tcbreplay._store.runs import Store
from tcbreplay._store.views import queries_dir
from tcbreplay.errors import QueryError

DATA = TEST_DATA
NAMES = [
    "cost_latency", "error_breakdown", "invented_keys", "per_sample", "tool_confusion",
    "worst_samples",
]  # fmt: skip
PARAMS = {
    "cost_latency": "run_id=null, limit=50",
    "error_breakdown": "run_id=null",
    "invented_keys": "run_id=null, limit=20",
    "per_sample": "run_id=null, limit=50",
    "tool_confusion": "run_id=null",
    "worst_samples": 'run_id=null, scoring="spec", limit=20',
}


def query_json(root: Path, name: str, *params: str) -> list[dict[str, Any]]:
    args = [x for p in params for x in ("-p", p)]
    result = cli("query", name, *args, "--store", root, "--format", "json")
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


@dataclass
class Traces:
    """Everything in the store, read straight from its files."""

    root: Path
    run_ids: list[str]
    samples: pl.DataFrame
    messages: pl.DataFrame
    scores: pl.DataFrame
    params: dict[tuple[str, str], set[str]]  # (run_id, tool) -> parameter names

    def agent_calls(self) -> dict[tuple[str, str, int], list[tuple[str, dict]]]:
        out: dict[tuple[str, str, int], list[tuple[str, dict]]] = defaultdict(list)
        for row in (
            self.messages.filter(pl.col("type") == "ai")
            .sort("run_id", "sample_id", "trial", "position")
            .iter_rows(named=True)
        ):
            for call in json.loads(row["message"])["data"].get("tool_calls") or []:
                key = row["run_id"], row["sample_id"], row["trial"]
                out[key].append((call["name"], call["args"]))
        return out

    def gold_calls(self) -> dict[tuple[str, str, int], list[tuple[str, dict]]]:
        return {
            (r["run_id"], r["sample_id"], r["trial"]): [
                (c["name"], c["args"]) for c in json.loads(r["gold"])
            ]
            for r in self.samples.iter_rows(named=True)
        }


@pytest.fixture(scope="module")
def traces(sim_run, tmp_path_factory) -> Traces:
    """A scored sim run, a sim run with failed samples in two trials and an imported run, in
    one store."""
    sim_store, sim_id = sim_run
    root = tmp_path_factory.mktemp("named") / "traces"
    shutil.copytree(sim_store.run_dir(sim_id), root / sim_id)
    for name in ("scores", "evaluations"):
        shutil.rmtree(root / sim_id / name, ignore_errors=True)
    record_run(
        load_inputs("tool-call"),
        parse_model("sim:seed=3,fault_rate=0.3"),
        Store(root),
        run_id="faulty",
        options=RecordOptions(workers=8, retries=0, trials=2),
    )
    imported = cli(
        "import", "--dataset", DATA / "ds_shapes.json", "--tools", DATA / "tools_shop.json",
        "--traces", DATA / "import" / "traces_shapes.jsonl", "--run-id", "shapes", "--store", root,
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    run_ids = [sim_id, "faulty", "shapes"]
    for run_id in run_ids:
        result = cli("score", run_id, "--store", root, "--allow-incomplete", "--dashboard", "none")
        assert result.exit_code == 0, result.output
    params = {}
    for run_id in run_ids:
        manifest = json.loads((root / run_id / "manifest.json").read_text())
        for spec in manifest["tools"]["specs"]:
            params[run_id, spec["name"]] = set(spec["parameters"].get("properties") or {})

    def read(name: str) -> pl.DataFrame:
        return pl.concat([pl.read_parquet(root / r / name) for r in run_ids], how="vertical")

    return Traces(
        root=root,
        run_ids=run_ids,
        samples=read("samples.parquet"),
        messages=read("messages.parquet"),
        scores=read("scores/spec/scores.parquet"),
        params=params,
    )


# ---------------------------------------------------------------- listing and showing


def test_list_shows_all_five_with_descriptions_and_params():
    result = cli("query", "--list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == NAMES
    for name in NAMES:
        first = (queries_dir() / "named" / f"{name}.sql").read_text().splitlines()[0]
        description = first.removeprefix("--").strip()
        assert description
        assert f"{name:<18} {description}" in lines
        assert f"{'':<18} params: {PARAMS[name]}" in lines
    assert cli("query").stdout == result.stdout  # no name: the same list


def test_library_lists_the_same():
    queries = list_named()
    assert [q.name for q in queries] == NAMES
    for q in queries:
        assert q.usage() == PARAMS[q.name]
        assert q.params["run_id"] is None
        assert q.description and not q.description.startswith("-")


@pytest.mark.parametrize("name", NAMES)
def test_show_prints_the_sql(name):
    result = cli("query", name, "--show")
    assert result.exit_code == 0
    assert result.stdout == (queries_dir() / "named" / f"{name}.sql").read_text()
    assert result.stdout == load_named(name).sql


# ---------------------------------------------------------------- each query, recomputed


def test_worst_samples(traces):
    inputs = {(r["run_id"], r["sample_id"]): r["input"] for r in traces.samples.to_dicts()}
    rows = traces.scores.to_dicts()

    def key(r):
        return (
            r["tp"], r["ahr"] is None, -(r["ahr"] or 0), r["run_id"], r["sample_id"], r["trial"]
        )  # fmt: skip

    expected = [
        {
            "run_id": r["run_id"], "sample_id": r["sample_id"], "trial": r["trial"],
            "tp": r["tp"], "tsa": r["tsa"], "ahr": r["ahr"], "n_gold": r["n_gold"],
            "n_agent": r["n_agent"], "status": r["status"],
            "input": inputs[r["run_id"], r["sample_id"]],
        }
        for r in sorted(rows, key=key)
    ]  # fmt: skip
    assert query_json(traces.root, "worst_samples") == expected[:20]
    assert query_json(traces.root, "worst_samples", "limit=1000") == expected
    one_run = query_json(traces.root, "worst_samples", "run_id=faulty", "limit=7")
    assert one_run == [r for r in expected if r["run_id"] == "faulty"][:7]
    tps = [r["tp"] for r in expected]
    assert tps == sorted(tps) and tps[0] < tps[-1]


def test_worst_samples_reads_one_scoring(traces, tmp_path):
    """The spec scoring by default, whichever scored last; -p scoring= picks another."""
    root = tmp_path / "traces"
    shutil.copytree(traces.root, root)
    run_id = traces.run_ids[0]
    before = query_json(root, "worst_samples", f"run_id={run_id}", "limit=1000")
    assert cli("score", run_id, "--store", root, "--scorer", "abet").exit_code == 0
    assert query_json(root, "worst_samples", f"run_id={run_id}", "limit=1000") == before
    abet = pl.read_parquet(root / run_id / "scores" / "abet" / "scores.parquet")
    got = query_json(root, "worst_samples", f"run_id={run_id}", "scoring=abet", "limit=1000")
    assert sorted((r["sample_id"], r["tsa"]) for r in got) == sorted(
        zip(abet["sample_id"], abet["tsa"], strict=True)
    )
    spec_tsa = {r["sample_id"]: r["tsa"] for r in before}
    assert {r["sample_id"]: r["tsa"] for r in got} != spec_tsa  # abet's tsa is positional


def test_tool_confusion(traces):
    agent, gold = traces.agent_calls(), traces.gold_calls()
    expected: Counter = Counter()
    positions = 0
    for key in set(agent) | set(gold):
        a = [n for n, _ in agent.get(key, [])]
        g = [n for n, _ in gold.get(key, [])]
        positions += max(len(a), len(g))
        for i in range(max(len(a), len(g))):
            expected[g[i] if i < len(g) else None, a[i] if i < len(a) else None] += 1
    rows = query_json(traces.root, "tool_confusion")
    assert Counter({(r["gold_tool"], r["agent_tool"]): r["calls"] for r in rows}) == expected
    assert sum(r["calls"] for r in rows) == positions
    assert positions == traces.scores.select(pl.max_horizontal("n_gold", "n_agent").sum()).item()
    assert "subtract_numbers" in {r["agent_tool"] for r in rows}  # a tool no run has
    gold_order = [r["gold_tool"] for r in rows]
    assert gold_order == sorted(gold_order, key=lambda t: (t is None, t or ""))


def test_tool_confusion_for_one_run(traces):
    agent, gold = traces.agent_calls(), traces.gold_calls()
    run_id = traces.run_ids[0]
    diagonal = sum(
        sum(1 for x, y in zip(agent.get(k, []), gold[k], strict=False) if x[0] == y[0])
        for k in gold
        if k[0] == run_id
    )
    rows = query_json(traces.root, "tool_confusion", f"run_id={run_id}")
    assert sum(r["calls"] for r in rows if r["gold_tool"] == r["agent_tool"]) == diagonal
    n = traces.scores.filter(pl.col("run_id") == run_id)
    assert (
        sum(r["calls"] for r in rows)
        == n.select(pl.max_horizontal("n_gold", "n_agent").sum()).item()
    )


def test_invented_keys(traces):
    times: Counter = Counter()
    samples: dict[tuple[str, str], set] = defaultdict(set)
    for (run_id, sid, _trial), calls in traces.agent_calls().items():
        for name, args in calls:
            for key in args:
                if key not in traces.params.get((run_id, name), set()):
                    times[name, key] += 1
                    samples[name, key].add((run_id, sid))
    expected = [
        {"tool": tool, "key": key, "times": n, "samples": len(samples[tool, key])}
        for (tool, key), n in sorted(times.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    assert len(expected) >= 3  # the sim invents keys; the import calls an unknown tool
    assert query_json(traces.root, "invented_keys", "limit=1000") == expected
    assert query_json(traces.root, "invented_keys", "limit=2") == expected[:2]
    shapes = query_json(traces.root, "invented_keys", "run_id=shapes")
    assert {(r["tool"], r["key"]) for r in shapes} == {
        ("add_numbers", "c"),
        ("subtract_numbers", "a"),
        ("subtract_numbers", "b"),
    }


def total_or_none(values: pl.Series) -> float | None:
    """SQL's sum: null when no value is present."""
    present = values.drop_nulls()
    return float(present.sum()) if present.len() else None


def test_cost_latency(traces):
    by_sample = {(r["run_id"], r["sample_id"], r["trial"]): r for r in traces.samples.to_dicts()}
    expected = []
    groups = traces.messages.group_by(["run_id", "sample_id", "trial"])
    for (run_id, sid, trial), group in groups:
        ai = group.filter(pl.col("type") == "ai")
        tool = group.filter(pl.col("type") == "tool")
        inp = group["input_tokens"].drop_nulls()
        out = group["output_tokens"].drop_nulls()
        sample = by_sample[run_id, sid, trial]
        expected.append(
            {
                "run_id": run_id, "sample_id": sid, "trial": trial, "status": sample["status"],
                "attempts": sample["attempts"], "messages": group.height,
                "model_turns": ai.height,
                "input_tokens": int(inp.sum()) if inp.len() else None,
                "output_tokens": int(out.sum()) if out.len() else None,
                # (none when neither count is known)
                "total_tokens": int(inp.sum()) + int(out.sum()) if inp.len() or out.len() else None,
                "model_s": total_or_none(ai["latency_s"]),
                "tool_s": total_or_none(tool["latency_s"]),
                "duration_s": sample["duration_s"],
            }
        )  # fmt: skip
    expected.sort(key=lambda r: (r["total_tokens"] is None, -(r["total_tokens"] or 0),
                                 r["run_id"], r["sample_id"], r["trial"]))  # fmt: skip
    rows = query_json(traces.root, "cost_latency", "limit=100000")
    assert query_json(traces.root, "cost_latency") == rows[:50]
    assert len(rows) == len(expected)
    assert expected[0]["total_tokens"] > 0  # the sim model reports usage
    for got, want in zip(rows, expected, strict=True):
        for column in ("model_s", "tool_s", "duration_s"):
            if want[column] is None:
                assert got.pop(column) is None
            else:
                assert got.pop(column) == pytest.approx(want[column], abs=6e-5)
            want.pop(column)
        assert got == want


def test_error_breakdown(traces):
    failed = traces.samples.filter(pl.col("status") != "ok")
    expected = sorted(
        (
            {
                "run_id": run_id, "status": status, "error_type": error_type or "",
                "samples": group.height, "attempts": int(group["attempts"].sum()),
                "example_error": group["error"].drop_nulls().min(),
            }
            for (run_id, status, error_type), group in failed.group_by(
                ["run_id", "status", "error_type"]
            )
        ),
        key=lambda r: (r["run_id"], -r["samples"], r["error_type"]),
    )  # fmt: skip
    rows = query_json(traces.root, "error_breakdown")
    assert rows == expected
    assert sum(r["samples"] for r in rows) == failed.height
    faulty = traces.samples.filter(pl.col("run_id") == "faulty")
    assert 0 < (faulty["status"] != "ok").sum() < faulty.height  # some failed, some did not
    assert {r["status"] for r in rows if r["run_id"] == "shapes"} == {"error", "missing"}
    one = query_json(traces.root, "error_breakdown", "run_id=faulty")
    assert one == [r for r in expected if r["run_id"] == "faulty"]
    assert query_json(traces.root, "error_breakdown", f"run_id={traces.run_ids[0]}") == []


# ---------------------------------------------------------------- formats and the library


def test_json_and_csv_match_the_library(traces):
    result = run_named(Store(traces.root), "worst_samples", {"limit": "5"})
    as_json = query_json(traces.root, "worst_samples", "limit=5")
    assert as_json == result.records()
    csv_result = cli(
        "query", "worst_samples", "-p", "limit=5", "--store", traces.root, "--format", "csv"
    )
    assert csv_result.exit_code == 0
    reader = csv.DictReader(io.StringIO(csv_result.stdout))
    assert reader.fieldnames == result.columns
    rows = list(reader)
    assert [r["sample_id"] for r in rows] == [r["sample_id"] for r in as_json]
    assert [float(r["tp"]) for r in rows] == [r["tp"] for r in as_json]
    table = cli("query", "worst_samples", "-p", "limit=5", "--store", traces.root)
    assert table.exit_code == 0 and "5 rows" in table.stdout


def test_query_on_an_empty_store(tmp_path):
    for name in NAMES:
        assert query_json(tmp_path / "empty", name) == []


# ---------------------------------------------------------------- refused


def test_unknown_parameter_exits_2(traces):
    result = cli("query", "worst_samples", "-p", "colour=red", "--store", traces.root)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.splitlines() == [
        "Error: query worst_samples: unknown parameter 'colour' (takes run_id, scoring, limit)"
    ]


def test_malformed_parameter_exits_2(traces):
    result = cli("query", "worst_samples", "-p", "limit", "--store", traces.root)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: -p 'limit': expected KEY=VALUE")


def test_unknown_query_exits_2_with_the_list():
    result = cli("query", "best_samples")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: no named query 'best_samples'",
        f"Hint: named queries: {', '.join(NAMES)}",
    ]
    bad = cli("query", "../sql")
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: query name '../sql'")


@pytest.mark.parametrize("run_id", ["123", "true", "null", "1.50"])
def test_a_run_id_that_reads_as_json_selects_that_run(traces, tmp_path, run_id):
    """true was bound as a boolean (a conversion error), null as null (every run's rows)."""
    root = tmp_path / "traces"
    shutil.copytree(traces.root / "shapes", root / run_id)
    shutil.copytree(traces.root / "faulty", root / "faulty")
    result = cli("query", "error_breakdown", "-p", f"run_id={run_id}", "--store", root,
                 "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert {r["run_id"] for r in json.loads(result.stdout)} == {run_id}
    quoted = cli("query", "error_breakdown", "-p", f'run_id="{run_id}"', "--store", root,
                 "--format", "json")  # fmt: skip
    assert {r["run_id"] for r in json.loads(quoted.stdout)} == {run_id}


# ---------------------------------------------------------------- parameters, unit level

QUERY = """-- Things of one kind.
-- params: kind, limit = 5, label = "all", since = null
select $kind as kind limit $limit
"""


def test_parse_file_reads_description_and_params():
    q = _parse_file("things", QUERY)
    assert q.name == "things" and q.description == "Things of one kind."
    assert list(q.params) == ["kind", "limit", "label", "since"]
    assert q.params["limit"] == 5 and q.params["label"] == "all" and q.params["since"] is None
    assert q.usage() == 'kind, limit=5, label="all", since=null'
    assert q.sql == QUERY


def test_bind_required_defaults_and_json_values():
    q = _parse_file("things", QUERY)
    with pytest.raises(QueryError, match=r"parameter 'kind' is required \(-p kind=\.\.\.\)"):
        q.bind({})
    assert q.bind({"kind": "tool"}) == {"kind": "tool", "limit": 5, "label": "all", "since": None}
    bound = q.bind({"kind": "[1, 2]", "limit": "7", "label": '"7"', "since": "2024-01-01"})
    assert bound == {"kind": [1, 2], "limit": 7, "label": "7", "since": "2024-01-01"}
    # a text parameter (default text or null) takes the text given: a run named true
    assert q.bind({"kind": "null", "label": "true", "since": "null"}) == {
        "kind": None, "limit": 5, "label": "true", "since": "null"}  # fmt: skip
    with pytest.raises(QueryError, match="unknown parameter 'lmit' \\(takes kind, limit"):
        q.bind({"kind": "x", "lmit": "3"})


def test_query_without_params():
    q = _parse_file("plain", "-- Just rows.\nselect 1\n")
    assert q.params == {} and q.usage() == "" and q.bind({}) == {}
    with pytest.raises(QueryError, match=r"unknown parameter 'x' \(takes none\)"):
        q.bind({"x": "1"})
    assert _parse_file("bare", "select 1\n").description == ""


def test_run_named_refuses_unknown_and_badly_named(traces):
    store = Store(traces.root)
    with pytest.raises(QueryError, match="no named query 'nope'"):
        run_named(store, "nope")
    with pytest.raises(QueryError, match="lower-case"):
        run_named(store, "Worst_Samples")
    with pytest.raises(QueryError, match="unknown parameter"):
        run_named(store, "tool_confusion", {"limit": "3"})


@pytest.mark.parametrize("name", ["worst_samples", "error_breakdown"])
def test_a_run_id_the_store_lacks_is_an_error_not_an_empty_table(traces, name):
    result = cli("query", name, "-p", "run_id=no-such-run", "--store", traces.root)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: run 'no-such-run' not found in store")
    assert result.stdout == ""


def test_per_sample(traces):
    """Each sample over its trials (the faulty run has two), with its clean trials."""
    frame = traces.scores.with_columns(success().alias("success"))
    expected = {
        (run_id, sid): (
            group.height, int(group["success"].sum()), group["tsa"].mean(), group["tp"].mean(),
            group["args_invalid"].sum() / group["args_total"].sum()
            if group["args_total"].sum() else None,
        )
        for (run_id, sid), group in frame.group_by(["run_id", "sample_id"])
    }  # fmt: skip
    rows = query_json(traces.root, "per_sample", "limit=100000")
    assert len(rows) == len(expected)
    assert {r["trials"] for r in rows if r["run_id"] == "faulty"} == {2}
    for r in rows:
        n, c, tsa, tp, ahr = expected[r["run_id"], r["sample_id"]]
        assert (r["trials"], r["successes"]) == (n, c)
        assert r["tp"] == pytest.approx(tp)
        assert r["tsa"] == pytest.approx(tsa) if tsa is not None else r["tsa"] is None
        assert r["ahr"] == pytest.approx(ahr) if ahr is not None else r["ahr"] is None
    shares = [r["successes"] / r["trials"] for r in rows]
    assert shares == sorted(shares)


@pytest.mark.parametrize("value", ["abc", "2.5", "-1", "true"])
def test_a_limit_that_is_no_whole_number_is_refused_in_one_line(traces, value):
    result = cli("query", "worst_samples", "-p", f"limit={value}", "--store", traces.root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"Error: query worst_samples: parameter 'limit' takes a whole number of 0 or more, "
        f"not '{value}' (-p limit=20)"
    ]


def test_a_scoring_no_run_holds_is_an_error_not_an_empty_table(traces):
    result = cli("query", "worst_samples", "-p", "scoring=nosuch", "--store", traces.root)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        "Error: query worst_samples: no run in the store holds a scoring named 'nosuch' (stored: "
    )
    run_id = traces.run_ids[0]
    one = cli("query", "worst_samples", "-p", "scoring=nosuch", "-p", f"run_id={run_id}",
              "--store", traces.root)  # fmt: skip
    assert one.exit_code == 2 and f"run '{run_id}' holds no scoring named 'nosuch'" in one.stderr


@pytest.mark.slow  # (a few seconds under the suite's load: make test's budget)
def test_a_query_of_the_scores_view_on_a_run_never_scored_is_an_error(tmp_path):
    """per_sample reads the default scoring's view: a run never scored answered 0 rows."""
    root = tmp_path / "traces"
    telecom = TEST_DATA / "tau2" / "gpt-4.1_telecom_sample.json"
    assert cli("import", "--traces", telecom, "--run-id", "tel", "--store", root).exit_code == 0
    result = cli("query", "per_sample", "-p", "run_id=tel", "--store", root)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: query per_sample: run 'tel' holds no scoring named")
    assert cli("score", "tel", "--store", root).exit_code == 0
    scored = cli("query", "per_sample", "-p", "run_id=tel", "--format", "json", "--store", root)
    assert scored.exit_code == 0 and json.loads(scored.stdout)


def test_tool_confusion_pairs_the_agents_calls_with_the_agents_gold(tmp_path):
    """τ²-bench's gold holds the user's calls too (dual control), numbered among the agent's:
    the agent's calls were set against the user's gold (toggle -> ping), and the positions
    did not add up to the scoring's."""
    root = tmp_path / "traces"
    telecom = TEST_DATA / "tau2" / "gpt-4.1_telecom_sample.json"
    assert cli("import", "--traces", telecom, "--run-id", "tel", "--store", root).exit_code == 0
    assert cli("score", "tel", "--store", root).exit_code == 0
    rows = query_json(root, "tool_confusion", "run_id=tel")
    user = cli("sql", "--store", root, "--format", "json",
               "select distinct name from gold_calls where side = 'user'")  # fmt: skip
    user_tools = {r["name"] for r in json.loads(user.stdout)}
    assert user_tools and not user_tools & {r["gold_tool"] for r in rows}
    stored = pl.read_parquet(root / "tel" / "scores" / "spec" / "scores.parquet")
    positions = stored.select(pl.max_horizontal("n_gold", "n_agent").sum()).item()
    assert sum(r["calls"] for r in rows) == positions
