"""validity: AUC, correlation and their bootstrap intervals against independent computations."""

from __future__ import annotations

import json
import re
import statistics
import time

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import DATA
from helpers import TAU_WRITE, cli, import_tau_bench
from hypothesis import given, settings
from hypothesis import strategies as st

from tcbreplay._compare import validity as validity_module
from tcbreplay._compare.outcomes import Outcomes, check_expression
from tcbreplay._compare.validity import pass_hat_k, roc_points, scores_validity
from tcbreplay.errors import InputError

TAU = DATA / "tau-bench"


# ---------------------------------------------------------------- independent computations


def brute_auc(values: list[float], outcome: list[bool], lower_better: bool = False) -> float:
    """Over every pair of a success and a failure: 1 when the success scores better, 1/2 on a
    tie; their mean."""
    sign = -1 if lower_better else 1
    wins = pairs = 0.0
    for vs, ys in zip(values, outcome, strict=True):
        for vf, yf in zip(values, outcome, strict=True):
            if ys and not yf:
                pairs += 1
                wins += 1.0 if sign * vs > sign * vf else 0.5 if vs == vf else 0.0
    return wins / pairs


def pearson(values: list[float], outcome: list[bool], lower_better: bool = False) -> float:
    sign = -1 if lower_better else 1
    return float(np.corrcoef([sign * v for v in values], [float(y) for y in outcome])[0, 1])


def frame_of(rows: list[tuple[str, int, float | None, bool | None]], column: str = "tp"):
    """Scores of one metric and outcomes: (sample_id, trial, value, outcome) rows."""
    scores = pl.DataFrame(
        {
            "sample_id": [r[0] for r in rows],
            "trial": [r[1] for r in rows],
            column: [r[2] for r in rows],
        },
        schema={"sample_id": pl.String, "trial": pl.Int32, column: pl.Float64},
    )
    outcomes = pl.DataFrame(
        {
            "sample_id": [r[0] for r in rows],
            "trial": [r[1] for r in rows],
            "outcome": [r[3] for r in rows],
        },
        schema={"sample_id": pl.String, "trial": pl.Int64, "outcome": pl.Boolean},
    )
    return scores, Outcomes("test", outcomes)


# ---------------------------------------------------------------- the τ-bench sample


@pytest.fixture(scope="module")
def tau_store(tmp_path_factory):
    return import_tau_bench(tmp_path_factory.mktemp("tau") / "traces", roles=True)


# every metric of the spec scorer, as (column, lower is better)
METRICS = (("tsa", False), ("tp", False), ("ahr", True), ("exact", False),
           ("write_exact", False), ("first_divergence", False), ("covered", False))  # fmt: skip


def tau_rows(root) -> tuple[list[tuple], list[str]]:
    """(sample_id, trial, reward >= 1, then each of METRICS) of each trajectory: the reward
    read from τ-bench's own file, the metrics from the stored scores file (booleans as 0 and
    1; a null first_divergence, never off the gold path, as one past the latest one)."""
    reward = {
        (str(t["task_id"]), t["trial"]): t["reward"] >= 1
        for t in json.loads((TAU / "gpt-4o-airline-sample.json").read_text())
    }
    scores = pq.read_table(root / "tau" / "scores" / "spec" / "scores.parquet").to_pylist()
    never = 1 + max(s["first_divergence"] or 0 for s in scores)
    for s in scores:
        s["first_divergence"] = never if s["first_divergence"] is None else s["first_divergence"]
        for name in ("exact", "write_exact", "covered"):
            s[name] = None if s[name] is None else float(s[name])
    rows = [
        (s["sample_id"], s["trial"], reward[(s["sample_id"], s["trial"])],
         *(s[name] for name, _ in METRICS))
        for s in scores
    ]  # fmt: skip
    return rows, sorted({r[0] for r in rows})


def interval(draws: list[float]) -> list[float]:
    defined = [d for d in draws if not np.isnan(d)]
    return [float(v) for v in np.quantile(defined, [0.025, 0.975])]


def test_tau_bench_numbers_match_an_independent_computation(tau_store):
    result = cli("validity", "tau", "--store", tau_store, "--format", "json", "--bootstrap",
                 "300", "--seed", "5")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    rows, samples = tau_rows(tau_store)
    assert out["outcome"] == "abs(reward - 1) <= 1e-6"
    assert out["n"] == 20 and out["n_true"] == 7 and out["n_false"] == 13
    assert set(out["metrics"]) == {name for name, _ in METRICS}
    assert sum(r[3 + 4] for r in rows) == 7  # write_exact: 7 of the 20 trials
    # the bootstrap draws samples (with all their trials), in sample-id order, from the seed
    draws = np.random.default_rng(5).integers(0, len(samples), size=(300, len(samples)))
    for column, (name, lower) in enumerate(METRICS, start=3):
        defined = [r for r in rows if r[column] is not None]
        values, outcome = [r[column] for r in defined], [r[2] for r in defined]
        got = out["metrics"][name]
        assert got["n"] == len(defined)
        assert got["orientation"] == (
            "lower" if lower else "later" if name == "first_divergence" else "higher"
        )
        assert got["auc"] == pytest.approx(brute_auc(values, outcome, lower), abs=1e-12)
        assert got["r"] == pytest.approx(pearson(values, outcome, lower), abs=1e-12)
        assert got["mean_if_true"] == pytest.approx(
            statistics.mean(v for v, y in zip(values, outcome, strict=True) if y)
        )
        assert got["mean_if_false"] == pytest.approx(
            statistics.mean(v for v, y in zip(values, outcome, strict=True) if not y)
        )
        aucs, rs = [], []
        for draw in draws:
            picked = [r for k in draw for r in defined if r[0] == samples[k]]
            v, y = [r[column] for r in picked], [r[2] for r in picked]
            both = any(y) and not all(y)
            aucs.append(brute_auc(v, y, lower) if both else float("nan"))
            flat = len(set(v)) < 2 or not both
            rs.append(float("nan") if flat else pearson(v, y, lower))
        assert got["auc_ci"] == pytest.approx(interval(aucs), abs=1e-9)
        assert got["r_ci"] == pytest.approx(interval(rs), abs=1e-9)
    # pass^k of the outcome: per task, C(c, k) / C(4, k), averaged over the 5 tasks
    solved = {s: sum(r[2] for r in rows if r[0] == s) for s in samples}
    for row in out["pass_k"]:
        k = row["k"]
        expected = statistics.mean(
            np.prod([(c - i) / (4 - i) for i in range(k)]) for c in solved.values()
        )
        assert row["outcome"] == pytest.approx(expected)


def test_tau_bench_table_and_csv(tau_store):
    table = cli("validity", "tau", "--store", tau_store)
    assert table.exit_code == 0, table.output
    assert "tau: outcome abs(reward - 1) <= 1e-6  (scoring spec)" in table.stdout
    assert "20 trials with an outcome (7 true, 13 false), 0 without, of 5 samples" in table.stdout
    assert "pass^k outcome" in table.stdout
    csv = cli("validity", "tau", "--store", tau_store, "--format", "csv").stdout
    lines = csv.splitlines()
    assert lines[0].startswith("run_id,scoring,outcome,metric,orientation,n,")
    assert len(lines) == 1 + 7  # seven metrics
    one = json.loads(cli("validity", "tau", "--store", tau_store, "--format", "json").stdout)
    assert one["run_id"] == "tau"  # one run: its object
    twice = cli("validity", "tau", "tau", "--store", tau_store)  # printed twice, as report refuses
    assert twice.exit_code == 2 and twice.stderr.startswith("Error: run 'tau' is named twice")


def test_an_outcome_expression_and_a_bare_field(tau_store):
    def auc(*extra):
        result = cli("validity", "tau", "--store", tau_store, "--format", "json", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    default, field, expr = auc(), auc("--outcome", "reward"), auc("--outcome", "reward > 0.5")
    assert field["outcome"] == "reward" and expr["outcome"] == "reward > 0.5"
    assert default["metrics"] == field["metrics"] == expr["metrics"]
    # a nested field: task 12's trial lacks reward_info.reward? counted, not dropped
    nested = auc("--outcome", "reward_info.reward = 1")
    assert nested["n"] + nested["no_outcome"] == 20


def test_the_default_outcome_is_the_benchmarks_success_within_a_millionth(tmp_path):
    """τ-bench and τ²-bench count a reward within 1e-6 of 1 as solved; the default outcome
    was reward >= 1, so a reward of 0.9999995 was a failure (pass^1 0.30, not τ-bench's 0.35)."""
    trajectories = json.loads((TAU / "gpt-4o-airline-sample.json").read_text())
    solved = [t for t in trajectories if t["reward"] == 1.0]
    solved[0]["reward"] = 0.9999995
    unsolved = next(t for t in trajectories if t["reward"] == 0.0)
    unsolved["reward"] = 0.999998  # (not within a millionth)
    traces = tmp_path / "tau.json"
    traces.write_text(json.dumps(trajectories))
    root = tmp_path / "traces"
    imported = cli("import", "--format", "tau-bench", "--traces", traces, "--tools",
                   TAU / "airline-tools.json", "--run-id", "t", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    out = json.loads(cli("validity", "t", "--format", "json", "--store", root).stdout)
    assert (out["n_true"], out["n_false"]) == (len(solved), 20 - len(solved))
    pass_1 = next(row for row in out["pass_k"] if row["k"] == 1)
    assert pass_1["outcome"] == len(solved) / 20


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others(tau_store):
    def run(seed):
        out = cli("validity", "tau", "--store", tau_store, "--format", "json", "--seed", seed)
        return json.loads(out.stdout)["metrics"]["tp"]["auc_ci"]

    assert run(1) == run(1)
    assert run(1) != run(2)


# ---------------------------------------------------------------- properties


values_strategy = st.lists(
    st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.booleans()), min_size=2, max_size=40
)


@settings(max_examples=150, deadline=None)
@given(values_strategy)
def test_auc_is_pair_counting_and_flips_for_lower_is_better(data):
    rows = [(f"s{i}", 0, v, y) for i, (v, y) in enumerate(data)]
    scores, outcomes = frame_of(rows)
    scores = scores.with_columns(pl.col("tp").alias("ahr"))  # the same values, lower better
    got = scores_validity(scores, outcomes, n_boot=5).metrics
    values, outcome = [v for v, _ in data], [y for _, y in data]
    if all(outcome) or not any(outcome):
        assert got["tp"]["auc"] is None and got["ahr"]["auc"] is None
        return
    expected = brute_auc(values, outcome)
    assert got["tp"]["auc"] == pytest.approx(expected, abs=1e-12)
    assert got["ahr"]["auc"] == pytest.approx(1 - expected, abs=1e-12)
    assert got["ahr"]["auc"] == pytest.approx(brute_auc(values, outcome, True), abs=1e-12)
    # the report's ROC curve, straight between thresholds, has the AUC as its area
    fpr, tpr = roc_points(scores["ahr"], "lower", outcomes.frame["outcome"])
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0, 0, 1, 1)
    assert np.trapezoid(tpr, fpr) == pytest.approx(1 - expected, abs=1e-12)
    if len(set(values)) > 1:
        assert got["tp"]["r"] == pytest.approx(pearson(values, outcome), abs=1e-9)
        assert got["ahr"]["r"] == pytest.approx(-got["tp"]["r"], abs=1e-12)
    else:
        assert got["tp"]["r"] is None


def test_undefined_values_and_missing_outcomes_are_counted_not_dropped_silently():
    rows = [("a", 0, 0.0, True), ("b", 0, None, False), ("c", 0, 0.5, None), ("d", 0, 1.0, False)]
    scores, outcomes = frame_of(rows, "ahr")
    result = scores_validity(scores, outcomes, n_boot=10)
    assert (result.n, result.no_outcome, result.no_outcome_samples) == (3, 1, ["c"])
    ahr = result.metrics["ahr"]
    assert (ahr["n"], ahr["n_true"], ahr["n_false"]) == (2, 1, 1)
    assert ahr["auc"] == 1.0  # lower ahr on the success


def test_first_divergence_never_is_best_and_write_exact_without_roles_says_so():
    scores = pl.DataFrame(
        {
            "sample_id": ["a", "b", "c", "d"],
            "trial": [0, 0, 0, 0],
            "first_divergence": [None, 3, 0, None],
            "write_exact": [None, None, None, None],
        },
        schema={
            "sample_id": pl.String,
            "trial": pl.Int32,
            "first_divergence": pl.Int64,
            "write_exact": pl.Boolean,
        },
    )
    outcomes = pl.DataFrame({"sample_id": ["a", "b", "c", "d"], "trial": [0] * 4,
                             "outcome": [True, True, False, False]})  # fmt: skip
    result = scores_validity(scores, Outcomes("x", outcomes), n_boot=10).metrics
    # a (never) > b (3) > c (0), d never: success never/3 vs failure 0/never
    assert result["first_divergence"]["auc"] == pytest.approx(
        brute_auc([99, 3, 0, 99], [True, True, False, False])
    )
    assert "counts as 4" in result["first_divergence"]["note"]
    assert result["write_exact"]["n"] == 0 and result["write_exact"]["auc"] is None
    assert "no tool roles declared" in result["write_exact"]["note"]


def test_outcomes_all_alike_are_said_to_leave_auc_undefined():
    """Every outcome true: AUC and r undefined, the ROC panel an empty curve, and no word why."""
    scores = pl.DataFrame({"sample_id": ["a", "b", "c"], "trial": [0, 0, 0],
                           "tp": [1.0, 0.5, 0.0], "first_divergence": [None, 1, 0]},
                          schema_overrides={"trial": pl.Int32})  # fmt: skip
    outcomes = pl.DataFrame({"sample_id": ["a", "b", "c"], "trial": [0] * 3,
                             "outcome": [True] * 3})  # fmt: skip
    result = scores_validity(scores, Outcomes("x", outcomes), n_boot=10).metrics
    said = "every sample it is defined for has outcome True: AUC and r need samples of both"
    assert result["tp"]["auc"] is None and result["tp"]["note"].startswith(said)
    assert result["first_divergence"]["note"].endswith(said + " outcomes")
    assert "counts as 2" in result["first_divergence"]["note"]


def test_first_divergence_with_none_seen_is_undefined_not_made_up():
    """A scoring without it (abet) or a run that never left the gold path: 'one past the
    latest seen' has no value, and 0 made an AUC of 0.5 over n of every sample."""
    scores = pl.DataFrame(
        {"sample_id": ["a", "b", "c"], "trial": [0, 0, 0], "first_divergence": [None] * 3},
        schema={"sample_id": pl.String, "trial": pl.Int32, "first_divergence": pl.Int64},
    )
    outcomes = pl.DataFrame({"sample_id": ["a", "b", "c"], "trial": [0] * 3,
                             "outcome": [True, False, True]})  # fmt: skip
    row = scores_validity(scores, Outcomes("x", outcomes), n_boot=10).metrics["first_divergence"]
    assert row["n"] == 0 and row["auc"] is None and row["r"] is None


def test_pass_k_of_true_false_metrics_beside_the_outcome():
    frame = pl.DataFrame(
        {
            "sample_id": ["a"] * 3 + ["b"] * 3,
            "outcome": [True, True, False, True, True, True],
            "exact": [True, False, False, None, True, True],
        }
    )
    rows = pass_hat_k(frame, ["exact"])
    assert [r["k"] for r in rows] == [1, 2]  # b has 2 defined exact trials
    assert rows[0]["outcome"] == pytest.approx((2 / 3 + 1) / 2)
    assert rows[0]["exact"] == pytest.approx((1 / 3 + 1) / 2)
    assert rows[1]["outcome"] == pytest.approx((1 / 3 + 1) / 2)


def test_two_hundred_samples_and_two_thousand_resamples_take_well_under_seconds():
    rng = np.random.default_rng(0)
    rows = [
        (f"s{i}", t, float(rng.integers(0, 5)) / 4, bool(rng.integers(0, 2)))
        for i in range(200)
        for t in range(4)
    ]
    scores, outcomes = frame_of(rows)
    scores = scores.with_columns(pl.col("tp").alias("tsa"), pl.col("tp").alias("ahr"))
    # CPU time of the process (every thread's), which other processes do not stretch
    start = time.process_time()
    scores_validity(scores, outcomes, n_boot=2000)
    assert time.process_time() - start < 2.0


@pytest.mark.parametrize("flipped", [False, True])
@pytest.mark.parametrize("samples, trials, levels", [(60, 1, 5), (40, 3, 50), (7, 2, 1), (0, 1, 3)])
def test_resampled_statistics_by_group_are_those_of_the_weighted_observations(
    samples, trials, levels, flipped
):
    """The statistics of each resample, from its counts of the groups (value and outcome),
    are those the observations weighted by how often their sample was drawn give: AUC to
    the bit (sums of whole counts), the means and r to rounding."""
    rng = np.random.default_rng(samples + levels)
    cluster = np.repeat(np.arange(samples), trials)
    x = rng.integers(0, levels, len(cluster)) / max(levels - 1, 1)
    y = rng.integers(0, 2, len(cluster)).astype(bool)
    oriented = -x if flipped else x
    counts = np.concatenate(list(validity_module._counts(max(samples, 1), 300, seed=2)))
    by_group = validity_module._Groups(oriented, y, flipped).stats(counts, cluster)
    weighted = validity_module._stats(counts[:, cluster].astype(float), x, oriented, y)
    assert by_group.keys() == weighted.keys()
    np.testing.assert_array_equal(by_group["auc"], weighted["auc"])
    for key in ("mean_if_true", "mean_if_false", "r"):
        np.testing.assert_allclose(by_group[key], weighted[key], rtol=1e-9, atol=1e-12)
    if samples and levels > 1:
        assert not np.isnan(by_group["auc"]).all()
    if trials == 1:  # the samples themselves: drawn as they are, unindexed
        alone = validity_module._Groups(oriented, y, flipped).stats(counts.astype(float), None)
        for key, value in by_group.items():
            np.testing.assert_array_equal(alone[key], value)


@pytest.mark.parametrize(
    "expression",
    ["(select 1)", "reward; select 1", "read_csv('/etc/passwd')", "reward -- x",
     "getenv('HOME') = ''", "exists (select 1)", " ", "reward) or (1 = 1"],
)  # fmt: skip
def test_outcome_expressions_that_are_not_one_plain_expression_are_refused(expression):
    with pytest.raises(InputError):
        check_expression(expression)


@pytest.mark.parametrize(
    "expression",
    [f"{name}(reward) = 1" for name in ("abs", "round", "floor", "ceil", "lower", "upper",
                                         "length", "trim")]
    + ["least(reward, 1) = greatest(reward, 0)", "coalesce(reward, 0) = 1",
       "nullif(reward, 0) = 1", "reward in (0, 1)", "reward not in (2)", "not (reward = 1)",
       "reward between 0 and (1)", "reward is not null and (reward = 1 or (reward > 1))",
       "try_cast(reward as integer) = 1", "case when (reward > 0) then true else false end"],
)  # fmt: skip
def test_the_functions_and_keywords_the_readme_lists_pass_the_check(expression):
    check_expression(expression)


def test_the_report_shows_the_outcome_metrics_beside_the_three(tau_store, tmp_path):
    """Each run's card and the leaderboard give exact and write_exact beside tsa, tp and ahr
    (the card first_divergence too), with the numbers of the stored scoring."""
    summary = json.loads(cli("score", "tau", "--role", TAU_WRITE, "--store", tau_store,
                             "--format", "json").stdout)  # fmt: skip
    out = tmp_path / "r.html"
    assert cli("report", "tau", "-o", out, "--store", tau_store).exit_code == 0
    page = out.read_text()
    for key in ("exact", "write_exact", "first_divergence"):
        card = page[page.index(f'data-metric="{key}"') :]
        value = re.search(r'<div class="value">([^<]*)</div>', card)[1]
        assert value == f"{summary[key]:.3f}", key
    board = page[page.index('id="leaderboard"') :]
    board = board[: board.index("</table>")]
    assert "exact ↑" in board and "write exact ↑" in board
    assert f'<td class="num">{summary["exact"]:.3f}</td>' in board
    assert f'<td class="num">{summary["write_exact"]:.3f}</td>' in board


@pytest.mark.slow  # (a few seconds under the suite's load: make test's budget)
def test_rewards_written_as_integers_take_the_default_outcome(tmp_path):
    """Rewards 0 and 1 as JSON integers read as unsigned (UBIGINT): reward - 1 overflowed
    on 0, validity exited 2 and the report left its panel out in silence."""
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([
        {"id": f"s{k}", "input": "hi", "target": [{"name": "list_items", "args": {}}]}
        for k in range(2)
    ]))  # fmt: skip
    call = {"id": "c1", "type": "function", "function": {"name": "list_items", "arguments": "{}"}}
    called = {"role": "assistant", "content": None, "tool_calls": [call]}
    traces = tmp_path / "tr.jsonl"
    traces.write_text(
        json.dumps({"sample_id": "s0", "messages": [{"role": "user", "content": "hi"}, called],
                    "metadata": {"reward": 1}}) + "\n"
        + json.dumps({"sample_id": "s1", "messages": [{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": "no"}], "metadata": {"reward": 0}}) + "\n"
    )  # fmt: skip
    store = tmp_path / "st"
    imported = cli("import", "--store", store, "--format", "openai", "--dataset", dataset,
                   "--tools", "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS",
                   "--traces", traces, "--run-id", "r")  # fmt: skip
    assert imported.exit_code == 0, imported.output
    result = cli("validity", "r", "--format", "json", "--store", store)
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["outcome"] == "abs(reward - 1) <= 1e-6" and (
        found["n_true"],
        found["n_false"],
    ) == (1, 1)
    assert (found["metrics"]["tp"]["auc"], found["metrics"]["tp"]["r"]) == (1.0, 1.0)
    report = cli("report", "r", "-o", tmp_path / "r.html", "--store", store)
    assert report.exit_code == 0, report.output
    assert "Does a metric track success" in (tmp_path / "r.html").read_text()


def test_a_reward_of_several_types_is_one_line_naming_the_field_and_its_samples(tmp_path):
    """Rewards 1, "1" and true across samples are JSON to DuckDB: validity and report --outcome
    failed with DuckDB's error listing every overload of '-' (a paragraph), and validity
    without one said the run had no numeric reward. One line names the field and where each
    type is, and the hint's conversion is read."""
    dataset = tmp_path / "ds.json"
    rewards = [1, "1", True, 0]
    dataset.write_text(json.dumps([
        {"id": f"s{k}", "input": "hi", "target": [{"name": "list_items", "args": {}}]}
        for k in range(len(rewards))
    ]))  # fmt: skip
    call = {"id": "c1", "type": "function", "function": {"name": "list_items", "arguments": "{}"}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
                "tool_calls": [call]}]  # fmt: skip
    traces = tmp_path / "tr.jsonl"
    traces.write_text("".join(
        json.dumps({"sample_id": f"s{k}", "messages": messages, "metadata": {"reward": r}}) + "\n"
        for k, r in enumerate(rewards)
    ))  # fmt: skip
    store = tmp_path / "st"
    imported = cli("import", "--store", store, "--format", "openai", "--dataset", dataset,
                   "--tools", "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS",
                   "--traces", traces, "--run-id", "r")  # fmt: skip
    assert imported.exit_code == 0, imported.output
    said = (
        "the metadata field 'reward' is a number in sample 's0' trial 0, text in sample 's1' "
        "trial 0, true/false in sample 's2' trial 0; an outcome reads a field of one type"
    )
    for args in ([], ["--outcome", "abs(reward - 1) <= 1e-6"], ["--outcome", "reward = true"]):
        result = cli("validity", "r", *args, "--store", store)
        assert result.exit_code == 2, result.output
        error, hint = result.output.splitlines()
        assert error.startswith("Error: --outcome ") and error.endswith(said), error
        assert hint.startswith("Hint: ") and "try_cast(reward as double) >= 1" in hint
    converted = cli("validity", "r", "--outcome", "try_cast(reward as double) >= 1",
                    "--format", "json", "--store", store)  # fmt: skip
    assert converted.exit_code == 0, converted.output
    found = json.loads(converted.stdout)
    assert (found["n_true"], found["n_false"]) == (3, 1)
    out = tmp_path / "r.html"
    given = cli("report", "r", "-o", out, "--outcome", "abs(reward - 1) <= 1e-6", "--store", store)
    assert given.exit_code == 2 and said in given.output and len(given.output) < 400
    default = cli("report", "r", "-o", out, "--store", store)
    assert default.exit_code == 0 and "Warning: no validity panel for run 'r': " in default.output
    assert said in default.output


def test_one_trial_without_an_outcome_is_said_in_the_singular(tmp_path):
    """It said "no outcome for 1 trials of samples 2"."""
    root = import_tau_bench(tmp_path / "traces")
    result = cli("validity", "tau", "--outcome", "reward_info.reward = 1", "--store", root)
    assert result.exit_code == 0, result.output
    assert "tau: no outcome for 1 trial of sample 2" in result.stdout.splitlines()
