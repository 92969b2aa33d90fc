"""Metrics over trials (#20): per trial, per sample and per run; pass^k and pass@k of clean
samples, printed by score when there are several trials; diff by sample over trials."""

from __future__ import annotations

import json
from math import comb

import polars as pl
import pytest
from helpers import cli

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.metrics import success, trial_summary
from tcbreplay._store.runs import Store


def rows(*cases) -> pl.DataFrame:
    """Score rows from (sample_id, trial, tsa, tp, ahr, args_missing)."""
    out = []
    for sid, trial, tsa, tp, ahr, missing in cases:
        total = 0 if ahr is None else 4
        out.append({"sample_id": sid, "trial": trial, "tsa": tsa, "tp": tp, "ahr": ahr,
                    "args_invalid": int((ahr or 0) * total), "args_total": total,
                    "args_missing": missing, "n_gold": 2, "status": "ok"})  # fmt: skip
    return pl.DataFrame(out, schema_overrides={"tsa": pl.Float64, "ahr": pl.Float64})


CLEAN = (1.0, 1.0, 0.0, 0)


@pytest.mark.parametrize(
    ("case", "clean"),
    [
        ((1.0, 1.0, 0.0, 0), True),
        ((None, 1.0, None, 0), True),  # no gold calls, none made
        ((1.0, 1.0, None, 0), True),  # no argument judged
        ((0.5, 1.0, 0.0, 0), False),
        ((1.0, 0.75, 0.0, 0), False),
        ((1.0, 1.0, 0.25, 0), False),
        ((1.0, 1.0, 0.0, 1), False),  # a gold argument left out
    ],
)
def test_a_clean_sample_is_what_the_readme_says(case, clean):
    frame = rows(("s", 0, *case))
    assert frame.select(success()).item() is clean


def test_pass_at_1_is_pass_hat_1_to_the_bit():
    """pass@1 (1 - C(n-c, 1)/C(n, 1)) and pass^1 (C(c, 1)/C(n, 1)) differed in the last digit
    (0.5555555555555557 against 0.5555555555555555), so a check of their equality failed;
    with unequal trials both are the mean of the samples' shares, not the rows' share."""
    bad = (1.0, 0.5, 0.0, 0)
    trials = [("a", [CLEAN, bad, bad]), ("b", [CLEAN, CLEAN, bad]), ("c", [CLEAN, bad, CLEAN]),
              ("d", [CLEAN, CLEAN]), ("e", [bad, bad, bad, CLEAN])]  # fmt: skip
    frame = rows(*((sid, t, *case) for sid, cases in trials for t, case in enumerate(cases)))
    first = trial_summary(frame)["pass_k"][0]
    assert first["pass_at_k"] == first["pass_hat_k"]
    assert first["pass_hat_k"] == pytest.approx((1 / 3 + 2 / 3 + 2 / 3 + 1 + 1 / 4) / 5)


def test_pass_hat_k_and_pass_at_k_by_hand():
    """Three trials: a succeeds in all, b in one, c in none."""
    bad = (1.0, 0.5, 0.0, 0)
    frame = rows(
        ("a", 0, *CLEAN), ("a", 1, *CLEAN), ("a", 2, *CLEAN),
        ("b", 0, *bad), ("b", 1, *CLEAN), ("b", 2, *bad),
        ("c", 0, *bad), ("c", 1, *bad), ("c", 2, *bad),
    )  # fmt: skip
    summary = trial_summary(frame)
    assert summary["trials"] == 3
    hat = [(1 + comb(1, k) / comb(3, k) + 0) / 3 for k in (1, 2, 3)]
    at = [(1 + (1 - comb(2, k) / comb(3, k)) + 0) / 3 for k in (1, 2, 3)]
    assert [r["k"] for r in summary["pass_k"]] == [1, 2, 3]
    assert [r["pass_hat_k"] for r in summary["pass_k"]] == pytest.approx(hat)
    assert [r["pass_at_k"] for r in summary["pass_k"]] == pytest.approx(at)
    assert hat == pytest.approx([4 / 9, 1 / 3, 1 / 3])
    assert at == pytest.approx([4 / 9, 5 / 9, 2 / 3])
    assert [(r["trial"], r["success"]) for r in summary["by_trial"]] == [
        (0, 1 / 3), (1, 2 / 3), (2, 1 / 3)
    ]  # fmt: skip
    assert summary["by_sample"]["success"] == pytest.approx(4 / 9)
    assert summary["by_sample"]["tp"] == pytest.approx((1 + 2 / 3 + 0.5) / 3)


def test_k_runs_to_the_fewest_trials_of_any_sample():
    frame = rows(("a", 0, *CLEAN), ("a", 1, *CLEAN), ("a", 2, *CLEAN), ("b", 0, *CLEAN))
    summary = trial_summary(frame)
    assert summary["trials"] == 3
    assert [r["k"] for r in summary["pass_k"]] == [1]
    assert trial_summary(rows(("a", 0, *CLEAN))) == {"trials": 1}


# the built-in benchmark's first entries, recorded in 1, 2 and 3 trials
SAMPLES = 20


@pytest.fixture(scope="module")
def trial_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("passk")
    dataset = folder / "dataset.json"
    entries = json.loads(BENCHMARKS["tool-call"].dataset.read_text())[:SAMPLES]
    dataset.write_text(json.dumps(entries))
    store = Store(folder / "traces")
    for run_id, seed, trials in (("k3", 7, 3), ("k2", 8, 2), ("k1", 7, 1)):
        model = parse_model(f"sim:seed={seed},error_rate=0.3")
        options = RecordOptions(workers=8, trials=trials)
        inputs = load_inputs("tool-call", dataset=dataset)
        record_run(inputs, model, store, run_id=run_id, options=options)
    return store


def test_score_prints_pass_k_with_several_trials(trial_store):
    root = trial_store.root
    result = cli("score", "k3", "--store", root)
    assert result.exit_code == 0, result.output
    assert "per trial" in result.stdout and "pass^k and pass@k" in result.stdout
    assert "success: a clean sample (tsa 1 or no gold calls, tp 1" in result.stdout
    summary = json.loads(cli("score", "k3", "--store", root, "--format", "json").stdout)
    assert summary["trials"] == 3 and [r["k"] for r in summary["pass_k"]] == [1, 2, 3]
    # pass^1 = pass@1 = the share of clean rows; pass^k falls and pass@k rises with k
    frame = pl.read_parquet(root / "k3" / "scores" / "spec" / "scores.parquet")
    clean = frame.select(success().mean()).item()
    first = summary["pass_k"][0]
    assert first["pass_hat_k"] == pytest.approx(clean) == first["pass_at_k"]
    hats = [r["pass_hat_k"] for r in summary["pass_k"]]
    ats = [r["pass_at_k"] for r in summary["pass_k"]]
    assert hats == sorted(hats, reverse=True) and ats == sorted(ats) and hats[-1] < ats[-1]
    # the same grids in markdown, with the note on success; csv: the run-level rows
    markdown = cli("score", "k3", "--store", root, "--format", "markdown").stdout
    assert "**per trial**" in markdown and "**pass^k and pass@k**" in markdown
    assert "| per sample |" in markdown and "success: a clean sample" in markdown
    csv_lines = cli("score", "k3", "--store", root, "--format", "csv").stdout.splitlines()
    # tsa, tp, ahr, exact, write_exact, first_divergence, covered
    assert csv_lines[0] == "run_id,scoring,metric,value,count,n,unit" and len(csv_lines) == 8
    assert csv_lines[-1].startswith("k3,spec,covered,")
    assert cli("audit", "verify", "k3", "--store", root).exit_code == 0
    one = cli("score", "k1", "--store", root)
    assert "pass^k" not in one.stdout
    assert json.loads(cli("score", "k1", "--store", root, "--format", "json").stdout)["trials"] == 1


@pytest.mark.slow  # (about 3 s: a report)
def test_counts_of_a_run_of_trials_say_trials_not_samples(trial_store, tmp_path):
    """A sample has trials (glossary): a run of 3 trials of each of SAMPLES samples said
    '3 x SAMPLES samples' in score's table and the report's header and card."""
    root = trial_store.root
    n = 3 * SAMPLES
    table = cli("score", "k3", "--store", root).stdout
    assert f"│ {n} trials" in table and f"{n} trials, " in table, table
    assert f"{SAMPLES} samples" not in table and f"{n} samples" not in table
    one = cli("score", "k1", "--store", root).stdout
    assert f"{SAMPLES} samples, " in one and "trials" not in one.split("per tool")[0]
    csv_units = {
        line.rsplit(",", 1)[1]
        for line in cli("score", "k3", "--store", root, "--format", "csv").stdout.splitlines()[1:]
    }
    assert csv_units <= {"trials", "args", "diverging", "no write role"}, csv_units  # fmt: skip
    page = cli("report", "k1", "k3", "-o", tmp_path / "r.html", "--store", root)
    assert page.exit_code == 0, page.output
    text = (tmp_path / "r.html").read_text("utf-8")
    assert f"2 runs · {n} trials of {SAMPLES} samples · " in text
    assert f"{n} trials · " in text and f"{SAMPLES} samples · " in text  # the two cards
    assert '"rows": "trials"' in text or '"rows":"trials"' in text


@pytest.mark.slow  # (2 s)
def test_diff_pairs_by_sample_over_trials_and_says_so(trial_store):
    root = trial_store.root
    # the scores file read below, made here (diff alone does not write one): the test does
    # not depend on another having scored k3 before it in the same worker
    assert cli("score", "k3", "--store", root).exit_code == 0
    result = cli("diff", "k3", "k2", "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    assert diff["n_common"] == SAMPLES
    assert diff["trials"]["a"] == 3 and diff["trials"]["b"] == 2
    assert diff["trials"]["paired_by"] == "sample"
    a = pl.read_parquet(root / "k3" / "scores" / "spec" / "scores.parquet")
    means = a.group_by("sample_id").agg(pl.col("tp").mean())
    assert diff["metrics"]["tp"]["a"] == pytest.approx(means["tp"].mean())
    invalid, total = a["args_invalid"].sum(), a["args_total"].sum()
    assert diff["metrics"]["ahr"]["a"] == pytest.approx(invalid / total)
    table = cli("diff", "k3", "k2", "--store", root)
    assert "trials: A 3, B 2; each sample's tsa and tp are the means" in " ".join(
        table.stdout.split()
    )
    # one trial each: as before, and nothing said about trials
    plain = json.loads(cli("diff", "k1", "k1", "--store", root, "--format", "json").stdout)
    assert plain["trials"]["note"] is None
