"""The original benchmark: its dashboard files as imports, its evaluator as ``--scorer abet``."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA, cli

from tcbreplay._importers import abet as abet_file
from tcbreplay._importers.import_run import import_traces
from tcbreplay._inputs.benchmarks import get_benchmark, load_inputs
from tcbreplay._query.sql import run_sql
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.run import score_run, score_tables
from tcbreplay._score.scorers import abet
from tcbreplay._store.runs import Store
from tcbreplay.errors import TraceError
from traces import build_tables

DATA = TEST_DATA / "abet"
HAND_DATASET = DATA / "dataset.json"
HAND_EVALUATION = DATA / "evaluation.json"

L, M, A = "list_items", "multiply_numbers", "add_numbers"
NEAR_3_6 = 3 * 1.2  # 3.5999999999999996: what multiply_numbers(3, 1.2) returns

# The table of docs/abet.md: published (abet) numbers and the spec's numbers for the same traces.
PUBLISHED = {
    "gemini-2.5-flash": {
        "abet": {"tsa": 0.8888888888888888, "ahr": 0.2962962962962963, "tp": 0.9102564102564104},
        "abet_counts": {"hits": 40, "n_tsa": 45, "args_invalid": 16, "args_total": 54},
        "spec": {"tsa": 0.9102564102564104, "ahr": 0.27586206896551724, "tp": 0.9102564102564104},
        "spec_counts": {"n_tsa": 13, "args_invalid": 16, "args_total": 58},
    },
    "gemini-2.5-flash-lite": {
        "abet": {"tsa": 0.9777777777777777, "ahr": 0.3548387096774194, "tp": 0.9615384615384616},
        "abet_counts": {"hits": 44, "n_tsa": 45, "args_invalid": 22, "args_total": 62},
        "spec": {"tsa": 0.9615384615384616, "ahr": 0.3548387096774194, "tp": 0.9615384615384616},
        "spec_counts": {"n_tsa": 13, "args_invalid": 22, "args_total": 62},
    },
    "gemini-2.5-pro": {
        "abet": {"tsa": 0.9777777777777777, "ahr": 0.12903225806451613, "tp": 0.9615384615384616},
        "abet_counts": {"hits": 44, "n_tsa": 45, "args_invalid": 8, "args_total": 62},
        "spec": {"tsa": 0.9615384615384616, "ahr": 0.12903225806451613, "tp": 0.9615384615384616},
        "spec_counts": {"n_tsa": 13, "args_invalid": 8, "args_total": 62},
    },
}


def import_file(root: Path, dataset: Path, traces: Path, run_id: str):
    return cli(
        "import", "--format", "abet-evaluation", "--dataset", dataset, "--traces", traces,
        "--run-id", run_id, "--store", root,
    )  # fmt: skip


def score_json(root: Path, run_id: str, *extra: str) -> dict:
    result = cli("score", run_id, "--store", root, "--format", "json", *extra)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def evaluation_path(reference: Path, model: str) -> Path:
    return reference / "evaluations" / f"Tool Call Benchmark_{model}.json"


def stored_calls(root: Path, run_id: str, view: str) -> dict[str, list[tuple[str, object]]]:
    """Each sample's calls from the ``tool_calls`` or ``gold_calls`` view, args parsed."""
    rows = run_sql(
        Store(root),
        f"select sample_id, name, args::varchar from {view} "
        "where run_id = $run_id order by sample_id, call_index",
        {"run_id": run_id},
    ).rows
    out: dict[str, list[tuple[str, object]]] = {}
    for sid, name, args in rows:
        out.setdefault(sid, []).append((name, json.loads(args)))
    return out


# ---------------------------------------------------------------- the evaluator, hand cases

# (agent calls, gold calls, expected counts). Extend freely.
SAMPLE_CASES = [
    pytest.param(
        [(L, {}), (M, {"a": 3, "b": 2.5})],
        [(L, {}), (M, {"a": 3, "b": 2.5})],
        {"hits": 2, "n_gold": 2, "n_agent": 2, "tp": 1.0, "args_invalid": 0, "args_total": 2,
         "pairs": 2},
        id="identical",
    ),
    pytest.param(
        # An early extra call shifts every later position: only position 0 hits.
        [(L, {}), (L, {}), (M, {"a": 3, "b": 1.2}), (A, {"a": 3.6, "b": 1})],
        [(L, {}), (M, {"a": 3, "b": 1.2}), (A, {"a": 3.6, "b": 1})],
        {"hits": 1, "n_gold": 3, "n_agent": 4, "tp": 0.75, "args_invalid": 0, "args_total": 0,
         "pairs": 1},
        id="early-extra-call-shifts-positions",
    ),
    pytest.param(
        # Stops at the first gold index the agent has no call for.
        [(L, {})],
        [(L, {}), (M, {"a": 3, "b": 1.2}), (A, {"a": 3.6, "b": 1})],
        {"hits": 1, "n_gold": 3, "n_agent": 1, "tp": 1 - 2 / 3, "args_invalid": 0,
         "args_total": 0, "pairs": 1},
        id="stops-at-first-missing-agent-index",
    ),
    pytest.param(
        # A skipped call: position 1 compares add with multiply; the addition is never checked.
        [(L, {}), (A, {"a": 90, "b": 8})],
        [(L, {}), (M, {"a": 45.0, "b": 2}), (A, {"a": 90.0, "b": 8.0})],
        {"hits": 1, "n_gold": 3, "n_agent": 2, "tp": 1 - 1 / 3, "args_invalid": 0,
         "args_total": 0, "pairs": 1},
        id="skipped-call",
    ),
    pytest.param(
        # Gold keys only: the invented key c is never looked at.
        [(A, {"a": 5, "b": 2, "c": 99})],
        [(A, {"a": 5, "b": 2})],
        {"hits": 1, "n_gold": 1, "n_agent": 1, "tp": 1.0, "args_invalid": 0, "args_total": 2,
         "pairs": 1},
        id="invented-key-ignored",
    ),
    pytest.param(
        # A gold key left out counts as incorrect; the extra key does not count at all.
        [(A, {"a": 5, "c": 2})],
        [(A, {"a": 5, "b": 2})],
        {"hits": 1, "n_gold": 1, "n_agent": 1, "tp": 1.0, "args_invalid": 1, "args_total": 2,
         "pairs": 1},
        id="missing-gold-key-is-incorrect",
    ),
    pytest.param(
        # Python ==: 90 == 90.0 counts correct, 3.5999999999999996 != 3.6 does not.
        [(A, {"a": 90, "b": 3.5999999999999996})],
        [(A, {"a": 90.0, "b": 3.6})],
        {"hits": 1, "n_gold": 1, "n_agent": 1, "tp": 1.0, "args_invalid": 1, "args_total": 2,
         "pairs": 1},
        id="python-equality",
    ),
    pytest.param(
        [(M, {"a": 3, "b": 2})],
        [(A, {"a": 3, "b": 2})],
        {"hits": 0, "n_gold": 1, "n_agent": 1, "tp": 0.0, "args_invalid": 0, "args_total": 0,
         "pairs": 0},
        id="wrong-tool-no-args-checked",
    ),
    pytest.param(
        [],
        [],
        {"hits": 0, "n_gold": 0, "n_agent": 0, "tp": 1.0, "args_invalid": 0, "args_total": 0,
         "pairs": 0},
        id="both-empty",
    ),
    pytest.param(
        [(L, {})],
        [],
        {"hits": 0, "n_gold": 0, "n_agent": 1, "tp": 0.0, "args_invalid": 0, "args_total": 0,
         "pairs": 0},
        id="call-for-a-greeting",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("agent", "gold", "expected"), SAMPLE_CASES)
def test_sample_counts(agent, gold, expected):
    assert abet.sample_counts(agent, gold) == expected


def test_sample_counts_float_equality_is_exact_python_equality():
    assert NEAR_3_6 == 3.5999999999999996 != 3.6
    gold = [(A, {"a": 3.6, "b": 90.0})]
    assert abet.sample_counts([(A, {"a": 3.6, "b": 90})], gold)["args_invalid"] == 0
    near = abet.sample_counts([(A, {"a": 3.5999999999999996, "b": 90})], gold)
    assert (near["args_invalid"], near["args_total"]) == (1, 2)


def test_summarize_is_micro_averaged():
    one = abet.sample_counts([(L, {})], [(L, {}), (A, {"a": 1, "b": 2})])  # 1 of 2 calls
    many = abet.sample_counts(
        [(L, {}), (A, {"a": 1, "b": 2}), (A, {"a": 3, "b": 9})],
        [(L, {}), (A, {"a": 1, "b": 2}), (A, {"a": 3, "b": 4})],
    )
    out = abet.summarize([one, many])
    assert out["tsa"] == 4 / 5  # hits over all gold calls, not the mean of 1/2 and 3/3
    assert out["n_tsa"] == 5
    assert (out["args_invalid"], out["args_total"]) == (1, 4)
    assert out["ahr"] == 1 / 4
    assert out["tp"] == (one["tp"] + many["tp"]) / 2
    assert abet.summarize([])["tsa"] is None
    assert abet.summarize([abet.sample_counts([(L, {})], [(L, {})])])["ahr"] is None


def test_abet_scorer_reads_values_as_stored_json():
    """3.5999999999999996 must survive the trip through DuckDB's JSON to the evaluator."""
    specs = load_inputs("tool-call").manifest_fields()["tools"]["specs"]
    cases = [
        {"gold": [(A, {"a": 32.0, "b": 3.6})], "turns": [[(A, {"a": 32, "b": NEAR_3_6})]]},
        {"gold": [(A, {"a": 32.0, "b": 3.6})], "turns": [[(A, {"a": 32, "b": 3.6, "c": 1})]]},
    ]  # fmt: skip
    samples, messages = build_tables(cases)
    got = score_tables(samples, messages, specs, ScoreOptions(scorer="abet"))
    assert got["args_invalid"].to_list() == [1, 0]
    assert got["args_total"].to_list() == [2, 2]
    spec = score_tables(samples, messages, specs)
    assert spec["args_invalid"].to_list() == [0, 1]  # isclose; the invented key counts
    assert spec["args_total"].to_list() == [2, 3]


# ---------------------------------------------------------------- a hand-made dashboard file


def test_hand_made_file_through_the_cli(tmp_path):
    root = tmp_path / "traces"
    result = import_file(root, HAND_DATASET, HAND_EVALUATION, "hand")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "run hand: 4/4 samples imported" in result.stdout

    got = score_json(root, "hand", "--scorer", "abet")
    published = json.loads(HAND_EVALUATION.read_text())["results"]
    assert {k: got[k] for k in ("tsa", "ahr", "tp")} == published
    assert got["tsa"] == 7 / 9 and got["n_tsa"] == 9
    assert (got["args_invalid"], got["args_total"]) == (1, 8)
    assert got["scoring"] == "abet" and got["n_samples"] == 4

    spec = score_json(root, "hand")
    assert spec["tsa"] == pytest.approx((1 + 1 + 2 / 3) / 3, abs=1e-15)
    assert spec["n_tsa"] == 3  # the greeting has no gold calls
    assert (spec["args_invalid"], spec["args_total"]) == (1, 11)
    assert spec["tp"] == pytest.approx(published["tp"], abs=1e-15)


def test_categories_pool_tsa_as_the_run_does(sim_copy):
    """Under the abet scorer a category's tsa is its hits over its gold calls, so the
    categories' hits add up to the run's (a mean of samples per category would not)."""
    root, run_id = sim_copy
    got = score_json(root, run_id, "--scorer", "abet")
    gold = pl.read_parquet(root / run_id / "scores" / "abet" / "scores.parquet")
    gold_by = dict(gold.group_by("category").agg(pl.col("n_gold").sum()).iter_rows())
    hits = sum((c["tsa"] or 0) * gold_by[c["category"]] for c in got["by_category"])
    assert hits == pytest.approx(got["tsa"] * got["n_tsa"], abs=1e-9)
    assert round(hits) == pytest.approx(hits, abs=1e-9)


def test_hand_made_file_through_the_library(store):
    inputs = load_inputs(None, HAND_DATASET, get_benchmark("tool-call").tools, None,
                         need_prompt=False)  # fmt: skip
    summary = import_traces(inputs, HAND_EVALUATION, store, "hand", fmt="abet-evaluation")
    assert (summary.samples, summary.imported, summary.missing) == (4, 4, 0)
    result = score_run(store, "hand", ScoreOptions(scorer="abet"))
    per = {r["sample_id"]: r for r in result.scores.to_dicts()}
    assert per["0"]["tsa"] == 1.0 and per["0"]["args_invalid"] == 0  # left out: output = target
    assert (per["1"]["args_invalid"], per["1"]["args_total"]) == (1, 6)
    assert (per["2"]["tsa"], per["2"]["args_total"], per["2"]["pairs"]) == (1 / 3, 0, 1)
    assert per["3"]["tsa"] is None and per["3"]["tp"] == 1.0
    assert result.summary["tsa"] == 7 / 9
    assert result.summary["ahr"] == 1 / 8


def test_left_out_samples_call_exactly_their_target(tmp_path):
    root = tmp_path / "traces"
    assert import_file(root, HAND_DATASET, HAND_EVALUATION, "hand").exit_code == 0
    agent = stored_calls(root, "hand", "tool_calls")
    gold = stored_calls(root, "hand", "gold_calls")
    assert (
        json.dumps(agent["0"])
        == json.dumps(gold["0"])
        == json.dumps([(L, {}), (M, {"a": 3, "b": 1.2})])
    )
    assert "3" not in agent and "3" not in gold  # the greeting: no calls either way
    listed = json.loads(HAND_EVALUATION.read_text())["samples"]
    assert agent["1"] == list(zip(*listed[0]["output"].values(), strict=True))
    assert agent["2"] == [(L, {}), (A, {"a": 90, "b": 8, "note": "skipped the multiplication"})]


def test_each_sample_is_a_human_and_one_synthesized_ai_message(tmp_path):
    root = tmp_path / "traces"
    assert import_file(root, HAND_DATASET, HAND_EVALUATION, "hand").exit_code == 0
    messages = pl.read_parquet(root / "hand" / "messages.parquet").sort("sample_index", "position")
    assert (
        messages.group_by("sample_id").agg(pl.col("type")).sort("sample_id")["type"].to_list()
        == [["human", "ai"]] * 4
    )
    ai = [json.loads(m) for m in messages.filter(pl.col("type") == "ai")["message"]]
    assert all(m["data"]["response_metadata"]["synthesized_from"] == "abet-evaluation" for m in ai)
    samples = pl.read_parquet(root / "hand" / "samples.parquet")
    assert samples["status"].to_list() == ["ok"] * 4


# ---------------------------------------------------------------- malformed dashboard files


def _listed(**output) -> dict:
    return {
        "samples": [
            {
                "input": "What do 3 Pens cost?",
                "output": {"tool_call_names": [L, M], "tool_call_args": [{}, {"a": 3, "b": 1.2}]}
                | output,
            }
        ]
    }


MALFORMED = [
    pytest.param("{not json", "cannot read dashboard file", id="not-json"),
    pytest.param(json.dumps({"samples": {"input": "x"}}), "samples list", id="samples-not-a-list"),
    pytest.param(json.dumps([{"input": "x"}]), "samples list", id="top-level-list"),
    pytest.param(
        json.dumps({"samples": [{"input": "What does a unicorn cost?", "output": {}}]}),
        "matches no dataset entry",
        id="unknown-input",
    ),
    pytest.param(json.dumps(_listed(tool_call_args=[{}])), "of equal length", id="lengths-differ"),
    pytest.param(
        json.dumps(_listed(tool_call_args=[{}, [3, 1.2]])), "args objects", id="args-not-object"
    ),
    pytest.param(json.dumps({"samples": ["just a string"]}), "samples[0]", id="sample-not-object"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_file_exits_2_with_one_line_and_stores_nothing(tmp_path, text, message):
    bad = tmp_path / "Tool Call Benchmark_bad.json"
    bad.write_text(text)
    root = tmp_path / "traces"
    result = import_file(root, HAND_DATASET, bad, "bad")
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {bad.name}: ")
    assert message in lines[0]
    assert "Traceback" not in result.output
    assert not (root / "bad").exists()
    assert Store(root).runs() == []


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_file_raises_trace_error(tmp_path, text, message):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    dataset = load_inputs(None, HAND_DATASET, get_benchmark("tool-call").tools, None,
                          need_prompt=False).dataset  # fmt: skip
    with pytest.raises(TraceError, match=message.replace("[", r"\[")):
        abet_file.read_dashboard_calls(bad, dataset)


# ---------------------------------------------------------------- the published files


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_published_numbers_exactly(tmp_path, reference_dir, model):
    root = tmp_path / "traces"
    path = evaluation_path(reference_dir, model)
    result = import_file(root, reference_dir / "dataset.json", path, model)
    assert result.exit_code == 0, (result.output, result.exception)
    assert f"run {model}: 13/13 samples imported" in result.stdout

    got = score_json(root, model, "--scorer", "abet")
    expected = PUBLISHED[model]["abet"]
    assert {k: got[k] for k in ("tsa", "ahr", "tp")} == expected
    assert json.loads(path.read_text())["results"] == expected  # the file says the same
    counts = PUBLISHED[model]["abet_counts"]
    assert got["n_tsa"] == counts["n_tsa"]
    assert got["tsa"] == counts["hits"] / counts["n_tsa"]
    assert (got["args_invalid"], got["args_total"]) == (counts["args_invalid"],
                                                        counts["args_total"])  # fmt: skip
    assert got["ahr"] == counts["args_invalid"] / counts["args_total"]
    hits = pl.read_parquet(root / model / "scores" / "abet" / "scores.parquet").select(
        (pl.col("tsa") * pl.col("n_gold")).round(0).sum()
    )
    assert hits.item() == counts["hits"]


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_spec_numbers_of_the_published_files(tmp_path, reference_dir, model):
    root = tmp_path / "traces"
    result = import_file(
        root, reference_dir / "dataset.json", evaluation_path(reference_dir, model), model
    )
    assert result.exit_code == 0, (result.output, result.exception)
    got = score_json(root, model)
    assert {k: got[k] for k in ("tsa", "ahr", "tp")} == PUBLISHED[model]["spec"]
    counts = PUBLISHED[model]["spec_counts"]
    assert {k: got[k] for k in counts} == counts
    assert (got["n_samples"], got["n_errors"]) == (13, 0)
    assert got["ahr"] == counts["args_invalid"] / counts["args_total"]


def test_published_file_through_the_library(store, reference_dir):
    inputs = load_inputs(None, reference_dir / "dataset.json", get_benchmark("tool-call").tools,
                         None, need_prompt=False)  # fmt: skip
    path = evaluation_path(reference_dir, "gemini-2.5-flash")
    import_traces(inputs, path, store, "flash", fmt="abet-evaluation")
    result = score_run(store, "flash", ScoreOptions(scorer="abet"), write=False)
    assert {k: result.summary[k] for k in ("tsa", "ahr", "tp")} == json.loads(path.read_text())[
        "results"
    ]
    assert result.scores_path is None
    assert not (store.root / "flash" / "scores").exists()


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_samples_left_out_of_published_files_equal_their_target(tmp_path, reference_dir, model):
    root = tmp_path / "traces"
    path = evaluation_path(reference_dir, model)
    assert import_file(root, reference_dir / "dataset.json", path, model).exit_code == 0
    dataset = json.loads((reference_dir / "dataset.json").read_text())
    listed = {s["input"]: s["output"] for s in json.loads(path.read_text())["samples"]}
    agent = stored_calls(root, model, "tool_calls")
    left_out = 0
    for index, entry in enumerate(dataset):
        source = listed.get(entry["input"], entry)
        left_out += entry["input"] not in listed
        expected = list(zip(source["tool_call_names"], source["tool_call_args"], strict=True))
        # json.dumps tells 25 from 25.0, which == does not
        assert json.dumps(agent.get(str(index), [])) == json.dumps(expected), index
    assert left_out == 13 - len(listed) > 0
