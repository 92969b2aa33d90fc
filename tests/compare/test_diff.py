"""`tcbreplay diff`: paired deltas of two runs, bootstrap intervals, and the samples that moved."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, cli, import_tau_bench, snapshot

from tcbreplay._compare import deltas, scored_runs
from tcbreplay._compare.diff import MAX_BOOT, diff_runs
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score import run as score_module
from tcbreplay._score.run import score_tables
from tcbreplay._store.files import write_json_atomic
from tcbreplay._store.parquet import write_table
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCHEMA_VERSION, SCORES_SCHEMA
from tcbreplay.errors import InputError
from traces import build_tables

DATA = TEST_DATA
METRICS = ("tsa", "tp", "ahr")
TOOLS = {"list_items", "add_numbers", "multiply_numbers"}
L, M, A = "list_items", "multiply_numbers", "add_numbers"
REL_FOLDER = "spec_rel-0.001_abs-0"


def diff_json(root: Path, a: str, b: str, *extra: str) -> dict:
    result = cli("diff", a, b, "--store", root, "--format", "json", *extra)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


@dataclass
class Pair:
    root: Path
    a: str
    b: str
    unscored_diff: dict  # diff JSON computed before either run was scored
    score_a: dict  # `score --format json` of each run
    score_b: dict
    scored_files: dict  # scores/ tree right before the unscored diff (must be empty)


@pytest.fixture(scope="module")
def pair(sim_run, tmp_path_factory) -> Pair:
    """Two sim runs of the built-in benchmark (seeds 7 and 8) in one store, then scored."""
    sim_store, run_a = sim_run
    root = tmp_path_factory.mktemp("diff") / "traces"
    shutil.copytree(sim_store.run_dir(run_a), root / run_a)
    for name in ("scores", "evaluations"):
        shutil.rmtree(root / run_a / name, ignore_errors=True)
    run_b = record_run(
        load_inputs("tool-call"),
        parse_model("sim:seed=8,error_rate=0.3"),
        Store(root),
        run_id="sim-seed8",
        options=RecordOptions(workers=8),
    ).run_id
    unscored = diff_json(root, run_a, run_b)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("scores*"))
    scores = {}
    for run_id in (run_a, run_b):
        result = cli("score", run_id, "--store", root, "--format", "json")
        assert result.exit_code == 0, result.output
        scores[run_id] = json.loads(result.stdout)
    return Pair(root, run_a, run_b, unscored, scores[run_a], scores[run_b], files)


def read_scores(root: Path, run_id: str) -> pl.DataFrame:
    return pl.read_parquet(root / run_id / "scores" / "spec" / "scores.parquet")


def synthetic_run(root: Path, run_id: str, scores: pl.DataFrame) -> None:
    """A run directory holding only a manifest and stored per-sample scores."""
    (root / run_id).mkdir(parents=True)
    write_json_atomic(
        root / run_id / "manifest.json",
        {"run_id": run_id, "schema_version": SCHEMA_VERSION, "status": "complete"},
    )
    full = scores.with_columns(
        pl.lit(run_id).alias("run_id"), pl.lit("spec").alias("scoring")
    ).with_columns(*(pl.lit(None).alias(c) for c in SCORES_SCHEMA.names if c not in scores.columns))
    write_table(
        full.select(SCORES_SCHEMA.names).to_arrow().cast(SCORES_SCHEMA),
        root / run_id / "scores" / "spec" / "scores.parquet",
    )
    # the summary a scoring writes last (scores without one are no finished scoring)
    options = {"scorer": "spec", "rel_tol": 1e-9, "abs_tol": 0.0, "strings": "exact",
               "types": "lenient"}  # fmt: skip
    write_json_atomic(root / run_id / "scores" / "spec" / "summary.json",
                      {"run_id": run_id, "scoring": "spec", "options": options})  # fmt: skip


def metric_frame(tp, tsa=None, inv=None, tot=None) -> pl.DataFrame:
    n = len(tp)
    inv = [0] * n if inv is None else inv
    tot = [0] * n if tot is None else tot
    return pl.DataFrame(
        {
            "sample_id": [f"s{k:04d}" for k in range(n)],
            "sample_index": list(range(n)),
            "tsa": tp if tsa is None else tsa,
            "tp": tp,
            "ahr": [i / t if t else None for i, t in zip(inv, tot, strict=True)],
            "args_invalid": inv,
            "args_total": tot,
        },
        schema_overrides={"tsa": pl.Float64, "tp": pl.Float64, "ahr": pl.Float64},
    )


def moved(a: pl.DataFrame, b: pl.DataFrame) -> tuple[list[str], list[str]]:
    """Regressed and improved samples, straightforwardly: None compares with nothing, except
    that ahr going from undefined to above 0 is worse (and back, better)."""
    by_b = {r["sample_id"]: r for r in b.to_dicts()}
    regressed, improved = [], []
    for row in a.sort("sample_index").to_dicts():
        other = by_b.get(row["sample_id"])
        if other is None:
            continue
        worse = better = False
        for metric, sign in (("tsa", 1), ("tp", 1), ("ahr", -1)):
            x, y = row[metric], other[metric]
            if metric == "ahr" and (x is None) != (y is None):
                worse |= x is None and y > 0
                better |= y is None and x > 0
                continue
            if x is None or y is None:
                continue
            worse |= sign * (y - x) < 0
            better |= sign * (y - x) > 0
        if worse:
            regressed.append(row["sample_id"])
        elif better:
            improved.append(row["sample_id"])
    return regressed, improved


# ---------------------------------------------------------------- two sim runs


def test_json_output_of_two_seeds(pair):
    out = diff_json(pair.root, pair.a, pair.b)
    assert out["run_a"] == pair.a and out["run_b"] == pair.b
    assert out["scoring"] == "spec"
    assert out["n_common"] == 94 and out["only_a"] == [] and out["only_b"] == []
    assert out["bootstrap"] == {"n_boot": 2000, "seed": 0, "confidence": 0.95}
    # exact beside the three (write_exact: no run has roles)
    assert set(out["metrics"]) == {*METRICS, "exact"}
    for run, side in ((pair.a, "a"), (pair.b, "b")):
        stored = pl.read_parquet(pair.root / run / "scores" / "spec" / "scores.parquet")
        assert out["metrics"]["exact"][side] == stored["exact"].mean()
    for metric, m in out["metrics"].items():
        assert set(m) == {"a", "b", "delta", "ci_low", "ci_high"}, metric
        assert m["delta"] == m["b"] - m["a"]
        assert -1 <= m["ci_low"] <= m["ci_high"] <= 1
        assert m["ci_low"] <= m["delta"] <= m["ci_high"]  # true for these seeds
        assert m["ci_low"] < m["ci_high"]  # the runs differ: the interval is not a point
    assert len(out["samples"]) == 94
    assert set(out["samples"][0]) == {
        "sample_id", "tsa_a", "tp_a", "ahr_a", "tsa_b", "tp_b", "ahr_b",
        "d_tsa", "d_tp", "d_ahr", "change", "exact_a", "exact_b", "write_exact_a",
        "write_exact_b", "first_divergence_a", "first_divergence_b",
    }  # fmt: skip


def test_same_seed_same_output_other_seed_other_intervals(pair):
    args = ("diff", pair.a, pair.b, "--store", pair.root, "--format", "json")
    first, second = cli(*args), cli(*args)
    assert first.exit_code == second.exit_code == 0
    assert first.stdout == second.stdout
    other = diff_json(pair.root, pair.a, pair.b, "--seed", "1")
    base = json.loads(first.stdout)
    for metric in METRICS:
        x, y = base["metrics"][metric], other["metrics"][metric]
        assert (x["a"], x["b"], x["delta"]) == (y["a"], y["b"], y["delta"])
    assert [base["metrics"][m]["ci_low"] for m in METRICS] != [
        other["metrics"][m]["ci_low"] for m in METRICS
    ]
    assert other["bootstrap"]["seed"] == 1
    assert base["samples"] == other["samples"]


def test_values_are_the_score_numbers(pair):
    out = diff_json(pair.root, pair.a, pair.b)
    for metric in METRICS:
        m = out["metrics"][metric]
        assert m["a"] == pytest.approx(pair.score_a[metric], rel=1e-14, abs=0)
        assert m["b"] == pytest.approx(pair.score_b[metric], rel=1e-14, abs=0)
        expected = pair.score_b[metric] - pair.score_a[metric]
        assert m["delta"] == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert out["metrics"]["ahr"]["a"] == pair.score_a["ahr"]  # a ratio of integer sums: exact


def test_values_are_exactly_the_score_numbers(pair):
    out = diff_json(pair.root, pair.a, pair.b)
    for metric in METRICS:
        m = out["metrics"][metric]
        assert (m["a"], m["b"]) == (pair.score_a[metric], pair.score_b[metric]), metric
        assert m["delta"] == pair.score_b[metric] - pair.score_a[metric], metric


def test_unscored_runs_are_scored_in_memory_without_writing(pair):
    assert pair.scored_files == []  # the diff before scoring wrote no scores folder
    assert pair.unscored_diff == diff_json(pair.root, pair.a, pair.b)


def test_run_against_itself(pair):
    out = diff_json(pair.root, pair.a, pair.a)
    for metric in METRICS:
        m = out["metrics"][metric]
        assert m["a"] == m["b"]
        assert (m["delta"], m["ci_low"], m["ci_high"]) == (0.0, 0.0, 0.0)
    assert out["regressed"] == [] and out["improved"] == []
    assert out["warnings"] == []
    assert {s["change"] for s in out["samples"]} == {"same"}
    for tool in out["tools"]:
        assert tool["paired_a"] == tool["paired_b"]
        assert tool["ahr_delta"] in (0.0, None)
        assert (tool["ahr_ci_low"], tool["ahr_ci_high"]) in ((0.0, 0.0), (None, None))


def test_moved_samples_match_a_recomputation(pair):
    out = diff_json(pair.root, pair.a, pair.b)
    a, b = read_scores(pair.root, pair.a), read_scores(pair.root, pair.b)
    regressed, improved = moved(a, b)
    assert out["regressed"] == regressed
    assert out["improved"] == improved
    assert regressed and improved  # both directions happen between these seeds
    by_id = {s["sample_id"]: s for s in out["samples"]}
    rows_a = {r["sample_id"]: r for r in a.to_dicts()}
    rows_b = {r["sample_id"]: r for r in b.to_dicts()}
    for sid, s in by_id.items():
        for metric in METRICS:
            x, y = rows_a[sid][metric], rows_b[sid][metric]
            assert (s[f"{metric}_a"], s[f"{metric}_b"]) == (x, y)
            assert s[f"d_{metric}"] == (None if x is None or y is None else y - x)
        expected = "regressed" if sid in regressed else "improved" if sid in improved else "same"
        assert s["change"] == expected


def test_tool_entries_match_each_runs_breakdown(pair):
    out = diff_json(pair.root, pair.a, pair.b)
    assert {t["tool"] for t in out["tools"]} == TOOLS
    per_a = {t["tool"]: t for t in pair.score_a["by_tool"]}
    per_b = {t["tool"]: t for t in pair.score_b["by_tool"]}
    for t in out["tools"]:
        assert set(t) == {
            "tool", "paired_a", "paired_b", "ahr_a", "ahr_b", "ahr_delta", "ahr_ci_low",
            "ahr_ci_high",
        }  # fmt: skip
        assert (t["paired_a"], t["paired_b"]) == (per_a[t["tool"]]["paired"],
                                                  per_b[t["tool"]]["paired"])  # fmt: skip
        assert (t["ahr_a"], t["ahr_b"]) == (per_a[t["tool"]]["ahr"], per_b[t["tool"]]["ahr"])
        if t["ahr_delta"] is not None:
            assert t["ahr_delta"] == t["ahr_b"] - t["ahr_a"]
            assert -1 <= t["ahr_ci_low"] <= t["ahr_ci_high"] <= 1


def test_table_output(pair):
    result = cli("diff", pair.a, pair.b, "--store", pair.root, "--limit", "3")
    assert result.exit_code == 0, result.output
    out = diff_json(pair.root, pair.a, pair.b)
    text = result.stdout
    assert f"{pair.b} vs {pair.a}" in text and "94 common samples" in text
    caption = " ".join(text.split())  # the caption may wrap
    regressed = len(out["regressed"])
    said = f"{regressed} sample{'' if regressed == 1 else 's'} regressed"
    assert f"{said}, {len(out['improved'])} improved" in caption
    for name in ("tsa", "tp", "ahr", *sorted(TOOLS)):
        assert name in text
    assert out["regressed"][0] in text


def test_library_matches_cli(pair):
    result = diff_runs(Store(pair.root), pair.a, pair.b, n_boot=500, seed=3, confidence=0.9)
    cli_out = diff_json(
        pair.root, pair.a, pair.b, "--bootstrap", "500", "--seed", "3", "--confidence", "0.9"
    )
    assert json.loads(json.dumps(result.to_dict(), default=str)) == cli_out
    assert "samples" not in result.to_dict(samples=False)


def test_json_and_jsonl_are_the_text_of_the_python_writer(pair):
    """The samples are written by orjson, the text Python's writer gives the same object."""
    from tcbreplay._cli.serialize import to_json

    result = diff_runs(Store(pair.root), pair.a, pair.b, n_boot=50)
    assert result.samples.height == 94 and result.samples["d_tp"].drop_nulls().abs().max() > 0
    for fmt, indent in (("json", 2), ("jsonl", None)):
        printed = cli("diff", pair.a, pair.b, "--store", pair.root, "--format", fmt,
                      "--bootstrap", "50")  # fmt: skip
        assert printed.exit_code == 0, (printed.output, printed.exception)
        assert printed.stdout == to_json(result.to_dict(), indent) + "\n"


def test_only_the_columns_compared_are_read(pair, monkeypatch):
    """Of the stored files, diff reads the columns it compares, a batch at a time: not the
    texts it does not show (run_id, scoring, category, status), nor the whole file at once."""
    from tcbreplay._score import read_results

    read = {}
    real = read_results.parquet_file

    def recorded(path, **options):
        source = real(path, **options)

        class Batches:
            schema_arrow = source.schema_arrow

            def iter_batches(self, **asked):
                read.setdefault(path.name, []).append((asked["columns"], options))
                return source.iter_batches(**asked)

        return Batches()

    def whole(*args, **options):
        raise AssertionError("read whole")

    monkeypatch.setattr(read_results, "parquet_file", recorded)
    monkeypatch.setattr(read_results, "read_table", whole)
    out = diff_json(pair.root, pair.a, pair.b, "--bootstrap", "40")
    assert out["n_common"] == 94 and len(out["tools"]) == 3
    # each run's pairs: the numbers kept, then the ids only checked (a batch at a time)
    scores = (scored_runs.DIFF_COLUMNS, {"read_dictionary": []})
    pairs = [(scored_runs.PAIR_COLUMNS[1:], {"read_dictionary": ["tool"]}),
             (["sample_id"], {"read_dictionary": []})]  # fmt: skip
    assert read == {"scores.parquet": [scores] * 2, "pairs.parquet": pairs * 2}


def test_pairs_are_matched_by_the_rows_they_are_of(pair, monkeypatch):
    """Stored pairs list each scores row's pairs in the rows' order: diff matches them to
    samples by row, with the same result as matching them by sample id."""
    found = []
    real = scored_runs.pair_rows

    def spied(scores, n_pairs, batches):
        found.append(real(scores, n_pairs, batches))
        return found[-1]

    monkeypatch.setattr(scored_runs, "pair_rows", spied)
    by_row = diff_json(pair.root, pair.a, pair.b, "--bootstrap", "200")
    assert len(found) == 2 and all(rows is not None for rows in found)
    pairs = pl.read_parquet(pair.root / pair.a / "scores" / "spec" / "pairs.parquet")
    scores = read_scores(pair.root, pair.a)
    assert (scores["sample_id"].gather(found[0]) == pairs["sample_id"]).all()
    monkeypatch.setattr(scored_runs, "pair_rows", lambda *given: None)
    assert diff_json(pair.root, pair.a, pair.b, "--bootstrap", "200") == by_row


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_pair_rows_are_checked_a_batch_at_a_time(pair, size):
    """The pairs' ids in batches of any size (a run of one id across two batches) give the
    rows they give whole; pairs out of the rows' order, or more or fewer, give none."""
    scores = read_scores(pair.root, pair.a)
    ids = pl.read_parquet(pair.root / pair.a / "scores" / "spec" / "pairs.parquet")["sample_id"]

    def batches(series):
        return (series.slice(k, size) for k in range(0, len(series), size))

    whole = scored_runs.pair_rows(scores, len(ids), [ids])
    assert whole is not None and (scores["sample_id"].gather(whole) == ids).all()
    assert (scored_runs.pair_rows(scores, len(ids), batches(ids)) == whole).all()
    assert scored_runs.pair_rows(scores, len(ids), batches(ids.reverse())) is None
    assert scored_runs.pair_rows(scores, len(ids) - 1, batches(ids[1:])) is None
    moved = pl.concat([ids[1:2], ids[:1], ids[2:]])  # two samples' first pairs swapped
    if moved[0] != ids[0]:
        assert scored_runs.pair_rows(scores, len(ids), batches(moved)) is None


def test_a_run_listing_its_samples_in_another_order_compares_the_same(pair, pair_copy):
    """B's scores rows reversed (its pairs not): its samples are found by id, and its pairs
    by sample id; the comparison is the one of the runs as scored."""
    before = diff_json(pair.root, pair.a, pair.b, "--bootstrap", "200")
    path = pair_copy / pair.b / "scores" / "spec" / "scores.parquet"
    write_table(pl.read_parquet(path).reverse().to_arrow(), path)
    ids = pl.read_parquet(path.with_name("pairs.parquet"))["sample_id"]
    assert scored_runs.pair_rows(pl.read_parquet(path), len(ids), [ids]) is None
    assert diff_json(pair_copy, pair.a, pair.b, "--bootstrap", "200") == before


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_pair_counts_are_summed_per_sample(order):
    rng = np.random.default_rng(9)
    k = np.sort(rng.integers(0, 40, 300))
    if order == "shuffled":
        k = rng.permutation(k)
    inv, valid = rng.integers(0, 3, 300), rng.integers(0, 5, 300)
    at, (inv_at, valid_at, count) = deltas._summed_by(k, inv, valid)
    expected = sorted(set(k.tolist()))
    assert at.tolist() == expected
    assert inv_at.tolist() == [int(inv[k == x].sum()) for x in expected]
    assert valid_at.tolist() == [int(valid[k == x].sum()) for x in expected]
    assert count.tolist() == [int((k == x).sum()) for x in expected]
    empty = deltas._summed_by(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert [len(a) for a in (empty[0], *empty[1])] == [0, 0, 0]


def test_progress_is_told_the_resamples_drawn(pair):
    told = []
    diff_runs(Store(pair.root), pair.a, pair.b, n_boot=300, progress=lambda *n: told.append(n))
    assert told and told[-1] == (300, 300)
    assert all(total == 300 for _, total in told)
    assert [done for done, _ in told] == sorted({done for done, _ in told})


def test_abet_scoring_is_compared_without_tools(pair):
    out = diff_json(pair.root, pair.a, pair.b, "--scoring", "abet")
    assert out["scoring"] == "abet" and out["tools"] == []
    assert not (pair.root / pair.a / "scores" / "abet").exists()


# ---------------------------------------------------------------- refused


def test_runs_without_common_samples_exit_2(pair, tmp_path):
    root = tmp_path / "traces"
    shutil.copytree(pair.root / pair.a, root / pair.a)
    imported = cli(
        "import", "--dataset", DATA / "ds_shapes.json", "--tools", DATA / "tools_shop.json",
        "--traces", DATA / "import" / "traces_shapes.jsonl", "--run-id", "shapes", "--store", root,
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    result = cli("diff", pair.a, "shapes", "--store", root)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.splitlines()[0] == (
        f"Error: runs {pair.a!r} and 'shapes' have no sample ids in common"
    )
    with pytest.raises(InputError):
        diff_runs(Store(root), pair.a, "shapes")


@pytest.mark.parametrize(
    ("given", "said"),
    [({"n_boot": 10.5}, "--bootstrap 10.5: a whole number"),
     ({"n_boot": True}, "--bootstrap True: a whole number"),
     ({"seed": "1"}, "--seed '1': a whole number"),
     ({"confidence": "0.9"}, "--confidence '0.9': a number between 0 and 1")],
)  # fmt: skip
def test_the_python_api_refuses_settings_of_another_type_in_one_line(pair, given, said):
    """diff_runs(n_boot=10.5) raised a bare TypeError from deep in the bootstrap."""
    with pytest.raises(InputError, match=re.escape(said)):
        diff_runs(Store(pair.root), pair.a, pair.b, **given)


def test_too_few_resamples_for_the_interval_are_refused_naming_the_least(pair):
    """--bootstrap 1 gave an "interval" of its one resample, which need not hold the estimate
    (τ-bench's tsa: +0.0625 in [+0.1250, +0.1250]). A percentile interval needs each tail
    outside it to hold a resample: 40 at 95%, 200 at 99%; at the least, it holds the estimate."""
    for args, said in (
        (["--bootstrap", "1"], "--bootstrap 1: a 95% interval needs at least 40 resamples, so "
         "that each 2.5% tail outside it holds one (with fewer its ends are the most extreme "
         "resamples, which need not enclose the estimate)"),
        (["--bootstrap", "39"], "--bootstrap 39: a 95% interval needs at least 40 resamples"),
        (["--bootstrap", "199", "--confidence", "0.99"],
         "--bootstrap 199: a 99% interval needs at least 200 resamples, so that each 0.5% tail"),
    ):  # fmt: skip
        result = cli("diff", pair.a, pair.b, *args, "--store", pair.root)
        assert result.exit_code == 2 and result.stderr.startswith(f"Error: {said}"), result.output
        assert result.stderr.splitlines()[1] == "Hint: leave --bootstrap out for 2,000 resamples"
    with pytest.raises(InputError, match="needs at least 200 resamples"):
        diff_runs(Store(pair.root), pair.a, pair.b, n_boot=100, confidence=0.99)
    for args in (["--bootstrap", "40"], ["--bootstrap", "20", "--confidence", "0.9"]):
        metrics = diff_json(pair.root, pair.a, pair.b, *args)["metrics"]
        for m in metrics.values():
            assert m["ci_low"] <= m["delta"] <= m["ci_high"], (args, m)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--bootstrap", "0", "Error: --bootstrap 0: a 95% interval needs at least 40 resamples"),
        ("--bootstrap", "-5", "Error: --bootstrap -5: a 95% interval needs at least 40"),
        ("--confidence", "1.5", "Error: --confidence must be between 0 and 1"),
        ("--confidence", "1", "Error: --confidence must be between 0 and 1"),
        ("--confidence", "0", "Error: --confidence must be between 0 and 1"),
        ("--bootstrap", str(MAX_BOOT + 1), f"Error: --bootstrap {MAX_BOOT + 1}: at most"),
        ("--bootstrap", "99999999999", "Error: --bootstrap 99999999999: at most"),
        ("--seed", "-1", "Error: --seed -1: must be 0 or more"),
        ("--limit", "-1", "Error: Invalid value for '--limit': -1 is not in the range x>=1"),
        # (it printed an "improved (first 0)" heading over no rows; record's and replay's
        # --limit start at 1 too)
        ("--limit", "0", "Error: Invalid value for '--limit': 0 is not in the range x>=1"),
        ("--scoring", "nonesuch", "Error: run"),
        ("--scoring", "spec_rel-1e-09_abs-0", "Error: run"),  # the defaults are "spec"
        ("--scoring", "../../sim-seed8/scores/spec", "Error: --scoring '../../sim-seed8/"),
        ("--scoring", "..", "Error: --scoring '..': not a scoring name"),
    ],
)
def test_bad_options_exit_2(pair, option, value, message):
    before = snapshot(pair.root)
    result = cli("diff", pair.a, pair.b, "--store", pair.root, option, value)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.startswith(message)
    assert all(line.startswith("Hint: ") for line in result.stderr.splitlines()[1:2])
    assert len(result.stderr.splitlines()) <= 2
    assert snapshot(pair.root) == before


# ---------------------------------------------------------------- scorings by name


@pytest.fixture
def pair_copy(pair, tmp_path) -> Path:
    """A private copy of the pair's store, to score or break."""
    root = tmp_path / "traces"
    shutil.copytree(pair.root, root)
    return root


def test_a_run_whose_writer_was_killed_is_said_interrupted_not_recording(pair, pair_copy):
    """diff called it "recording" (its manifest's word), as if a process still wrote it,
    where runs and score say interrupted."""
    root = pair_copy
    manifest_path = root / pair.b / "manifest.json"
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()),
                                         "status": "recording"}))  # fmt: skip
    result = cli("diff", pair.a, pair.b, "--bootstrap", 40, "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    said = f"B ({pair.b}) is interrupted: not every sample was recorded"
    assert said in json.loads(result.stdout)["warnings"]
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()),
                                         "status": "complete"}))  # fmt: skip


def test_errors_a_run_that_did_not_finish_and_samples_left_out_are_said(pair, pair_copy):
    """(A run whose every sample crashed compared as unchanged, in silence; the samples of
    one run only were named in json alone.)"""
    root = pair_copy
    manifest_path = root / pair.b / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["status"] = "failed"
    manifest["totals"] = {**manifest["totals"], "errors": 4}
    manifest_path.write_text(json.dumps(manifest))
    result = cli("diff", pair.a, pair.b, "--bootstrap", 40, "--store", root)
    assert result.exit_code == 0, result.output
    said = [
        f"Warning: B ({pair.b}): 4 of its 94 samples and trials ended in error; they score "
        "with the calls made before the error",
        f"Warning: B ({pair.b}) is failed: not every sample was recorded",
    ]
    assert result.stdout.splitlines()[:2] == said
    as_csv = cli("diff", pair.a, pair.b, "--bootstrap", 40, "--format", "csv", "--store", root)
    assert as_csv.stderr.splitlines() == said
    out = diff_json(root, pair.a, pair.b, "--bootstrap", 40)
    assert out["warnings"] == [line.removeprefix("Warning: ") for line in said]
    few = cli("record", "--model", "sim:seed=8,latency=0", "--limit", 5, "--run-id", "few",
              "--quiet", "--store", root)  # fmt: skip
    assert few.exit_code == 0, few.output
    out = diff_json(root, pair.a, "few", "--bootstrap", 40)
    assert out["warnings"] == [
        "5 samples in common are compared; 89 of A only and 0 of B only are left out "
        "(--format json lists them: only_a, only_b)"
    ]


def test_named_tolerances_are_scored_in_memory(pair, pair_copy):
    root = pair_copy
    assert cli("score", pair.b, "--store", root, "--rel-tol", "1e-3").exit_code == 0
    before = snapshot(root)
    in_memory = diff_json(root, pair.a, pair.b, "--scoring", REL_FOLDER)
    assert snapshot(root) == before  # nothing written
    assert in_memory["scoring"] == REL_FOLDER
    assert cli("score", pair.a, "--store", root, "--rel-tol", "1e-3").exit_code == 0
    assert diff_json(root, pair.a, pair.b, "--scoring", REL_FOLDER) == in_memory
    neither = root.parent / "neither"
    shutil.copytree(pair.root, neither)  # no run scored with these tolerances
    assert diff_json(neither, pair.a, pair.b, "--scoring", REL_FOLDER) == in_memory


def test_in_memory_scoring_takes_the_other_runs_exact_options(pair, pair_copy, monkeypatch):
    """A folder name rounds the tolerances to 6 digits; the stored summary has them exactly."""
    root = pair_copy
    assert cli("score", pair.b, "--store", root, "--rel-tol", "0.00123456789").exit_code == 0
    seen = []
    real = score_module.score_run

    def spy(store, run_id, options=None, **kwargs):
        seen.append(options)
        return real(store, run_id, options, **kwargs)

    monkeypatch.setattr(score_module, "score_run", spy)
    result = diff_runs(Store(root), pair.a, pair.b, scoring="spec_rel-0.00123457_abs-0")
    assert [(o.rel_tol, o.abs_tol) for o in seen] == [(0.00123456789, 0.0)]
    assert result.n_common == 94


@pytest.mark.parametrize("name", ["scores.parquet", "pairs.parquet"])
def test_corrupt_stored_scores_exit_1_naming_the_file(pair, pair_copy, name):
    root = pair_copy
    path = root / pair.b / "scores" / "spec" / name
    with path.open("r+b") as f:
        f.truncate(10)
    for args in ((pair.a, pair.b), (pair.b, pair.b)):
        result = cli("diff", *args, "--store", root)
        assert result.exit_code == 1, (result.output, result.exception)
        error, hint = result.stderr.splitlines()
        assert error.startswith(f"Error: {path}: not a readable Parquet file (")
        assert hint == f"Hint: score it again: tcbreplay score {pair.b} --store {root}"
        assert result.stdout == ""


def test_stored_scores_without_a_column_exit_1(pair, pair_copy):
    root = pair_copy
    path = root / pair.a / "scores" / "spec" / "scores.parquet"
    pl.read_parquet(path).drop("tp").write_parquet(path)
    result = cli("diff", pair.a, pair.b, "--store", root)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.splitlines()[0] == f"Error: {path}: no column tp"


def test_stored_scores_with_a_row_given_twice_exit_1(pair, pair_copy):
    """A scores file holding a sample's row twice (written so by hand) was compared as if the
    run had the sample twice (95 common samples of 94); the report counted it twice too."""
    root = pair_copy
    path = root / pair.a / "scores" / "spec" / "scores.parquet"
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table, table.slice(3, 1)]), path)
    twice = table["sample_id"][3].as_py()
    hint = f"Hint: tcbreplay audit verify {pair.a} --store {root} lists what changed; score it "
    for command in (("diff", pair.a, pair.b), ("report", pair.a, "-o", root.parent / "r.html")):
        result = cli(*command, "--store", root)
        assert result.exit_code == 1, (result.output, result.exception)
        assert result.stderr.splitlines() == [
            f"Error: {path}: sample {twice} has more than one row (not as scoring wrote it)",
            hint + "again to replace the file",
        ]


@pytest.mark.parametrize(
    ("edit", "problem"),
    [({"n_tsa": "abc"}, "n_tsa is 'abc', not a number"),
     ({"tsa": True}, "tsa is True, not a number"),
     ({"by_tool": [{"tool": 3}]}, "by_tool is not a list of objects naming their tool")],
)  # fmt: skip
def test_a_summary_of_another_shape_is_an_error_not_a_traceback(pair, pair_copy, edit, problem):
    """A summary whose numbers are text, or whose breakdown names no tool, crashed report
    (a KeyError, a ValueError: 46 lines of traceback); diff and runs went on with it."""
    root = pair_copy
    path = root / pair.a / "scores" / "spec" / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    result = cli("diff", pair.a, pair.b, "--store", root)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.splitlines()[0] == f"Error: {path}: {problem}"
    page = root.parent / "r.html"
    shown = cli("report", pair.a, "-o", page, "--store", root)  # (scored anew, in memory)
    assert shown.exit_code == 0, (shown.output, shown.exception)


def test_corrupt_summary_of_the_scoring_taken_in_memory_exits_1(pair, pair_copy):
    root = pair_copy
    assert cli("score", pair.b, "--store", root, "--rel-tol", "1e-3").exit_code == 0
    path = root / pair.b / "scores" / REL_FOLDER / "summary.json"
    path.write_text("{")
    result = cli("diff", pair.a, pair.b, "--store", root, "--scoring", REL_FOLDER)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.splitlines()[0].startswith(f"Error: {path}: unreadable summary (")


def test_unknown_run_exits_2(pair):
    result = cli("diff", pair.a, "no-such-run", "--store", pair.root)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: run 'no-such-run' not found")


# ---------------------------------------------------------------- the bootstrap itself


def test_large_true_difference_excludes_zero(tmp_path):
    """Scored from hand-built traces: B calls the wrong tool in 40 of 60 samples."""
    specs = load_inputs("tool-call").manifest_fields()["tools"]["specs"]
    gold = [(L, {}), (A, {"a": 2.5, "b": 1.2})]
    good = {"gold": gold, "turns": [[(L, {})], [(A, {"a": 2.5, "b": 1.2})]]}
    bad = {"gold": gold, "turns": [[(M, {"a": 2.5, "b": 1.2, "c": 1})]]}
    runs = {"good": [good] * 60, "bad": [bad if k % 3 else good for k in range(60)]}
    root = tmp_path / "traces"
    for run_id, cases in runs.items():
        samples, messages = build_tables(cases, run_id=run_id)
        scores = score_tables(samples, messages, specs)
        synthetic_run(root, run_id, scores)
    result = diff_runs(Store(root), "good", "bad", n_boot=1000)
    tp, tsa, ahr = (result.runs[m] for m in ("tp", "tsa", "ahr"))
    assert tp["a"] == 1.0 and tp["delta"] == pytest.approx(-40 / 60)
    assert tp["ci_high"] < 0 and tsa["ci_high"] < 0
    assert ahr["a"] == 0.0 and ahr["b"] == 0.0  # the bad samples pair nothing with arguments
    assert len(result.regressed) == 40 and result.improved == []
    assert result.tools == []  # no pairs.parquet stored


def test_identical_scores_give_a_point_interval(tmp_path):
    rng = np.random.default_rng(11)
    tp = rng.uniform(0, 1, 80).round(3).tolist()
    tot = rng.integers(0, 5, 80).tolist()
    inv = [int(rng.integers(0, t + 1)) for t in tot]
    root = tmp_path / "traces"
    for run_id in ("x", "y"):
        synthetic_run(root, run_id, metric_frame(tp, inv=inv, tot=tot))
    result = diff_runs(Store(root), "x", "y")
    for metric in METRICS:
        m = result.runs[metric]
        assert (m["delta"], m["ci_low"], m["ci_high"]) == (0.0, 0.0, 0.0), metric
    assert result.runs["ahr"]["a"] == sum(inv) / sum(tot)


def test_interval_is_paired(tmp_path):
    """B is A shifted down by 0.1 on every sample: a paired interval has no width at all,
    while A's own spread would give an unpaired interval about ±0.07 wide."""
    tp_a = np.linspace(0.2, 1.0, 100)
    root = tmp_path / "traces"
    synthetic_run(root, "a", metric_frame(tp_a.tolist()))
    synthetic_run(root, "b", metric_frame((tp_a - 0.1).tolist()))
    m = diff_runs(Store(root), "a", "b").runs["tp"]
    assert m["delta"] == pytest.approx(-0.1)
    assert m["ci_low"] == pytest.approx(-0.1, abs=1e-9)
    assert m["ci_high"] == pytest.approx(-0.1, abs=1e-9)


def test_interval_width_matches_normal_theory(tmp_path):
    rng = np.random.default_rng(5)
    n = 400
    tp_a = rng.uniform(0.3, 0.7, n)
    tp_b = np.clip(tp_a + rng.normal(0.05, 0.2, n), 0, 1)
    root = tmp_path / "traces"
    synthetic_run(root, "a", metric_frame(tp_a.tolist()))
    synthetic_run(root, "b", metric_frame(tp_b.tolist()))
    d = tp_b - tp_a
    half = 1.96 * d.std(ddof=1) / math.sqrt(n)
    m = diff_runs(Store(root), "a", "b", n_boot=4000).runs["tp"]
    assert m["delta"] == pytest.approx(d.mean(), abs=1e-12)
    assert (m["ci_high"] - m["ci_low"]) / 2 == pytest.approx(half, rel=0.12)
    assert (m["ci_low"] + m["ci_high"]) / 2 == pytest.approx(d.mean(), abs=0.25 * half)
    narrow = diff_runs(Store(root), "a", "b", n_boot=4000, confidence=0.5).runs["tp"]
    wide = diff_runs(Store(root), "a", "b", n_boot=4000, confidence=0.99).runs["tp"]
    assert wide["ci_low"] < m["ci_low"] < narrow["ci_low"] < d.mean()
    assert d.mean() < narrow["ci_high"] < m["ci_high"] < wide["ci_high"]


def test_tsa_mean_skips_undefined_samples_and_ahr_without_arguments_is_null(tmp_path):
    tp = [1.0, 0.5, 1.0, 0.0]
    root = tmp_path / "traces"
    synthetic_run(root, "a", metric_frame(tp, tsa=[None, 0.5, 1.0, 0.0]))
    synthetic_run(root, "b", metric_frame(tp, tsa=[None, 1.0, 1.0, 1.0]))
    result = diff_runs(Store(root), "a", "b")
    assert result.runs["tsa"]["a"] == pytest.approx(0.5)
    assert result.runs["tsa"]["b"] == 1.0
    assert result.runs["ahr"] == dict.fromkeys(("a", "b", "delta", "ci_low", "ci_high"))
    assert result.improved == ["s0001", "s0003"] and result.regressed == []


def test_partial_overlap_compares_common_samples(tmp_path):
    root = tmp_path / "traces"
    synthetic_run(root, "a", metric_frame([1.0, 0.0, 1.0]))
    frame = metric_frame([1.0, 1.0, 1.0, 0.5]).filter(pl.col("sample_id") != "s0000")
    synthetic_run(root, "b", frame)
    result = diff_runs(Store(root), "a", "b")
    assert result.n_common == 2
    assert (result.only_a, result.only_b) == (["s0000"], ["s0003"])
    assert result.runs["tp"]["a"] == 0.5 and result.runs["tp"]["b"] == 1.0
    assert result.improved == ["s0001"]


def test_invented_argument_where_there_were_none_is_a_regression(tmp_path):
    specs = load_inputs("tool-call").manifest_fields()["tools"]["specs"]
    clean = {"gold": [(L, {})], "turns": [[(L, {})]]}
    invented = {"gold": [(L, {})], "turns": [[(L, {"unit": "usd"})]]}
    root = tmp_path / "traces"
    for run_id, case in (("clean", clean), ("invented", invented)):
        samples, messages = build_tables([case], run_id=run_id)
        synthetic_run(root, run_id, score_tables(samples, messages, specs))
    result = diff_runs(Store(root), "clean", "invented")
    assert result.regressed == ["0"]


def test_under_the_abet_scorer_tsa_is_pooled_as_score_pools_it(pair, pair_copy):
    """The abet scorer's tsa is hits over all gold calls, not a mean of samples: diff's
    values are score's, to the last bit."""
    root = pair_copy
    scored = {}
    for run_id in (pair.a, pair.b):
        result = cli("score", run_id, "--store", root, "--scorer", "abet", "--format", "json")
        assert result.exit_code == 0, result.output
        scored[run_id] = json.loads(result.stdout)
    out = diff_json(root, pair.a, pair.b, "--scoring", "abet")
    for metric in ("tsa", "ahr"):
        assert out["metrics"][metric]["a"] == scored[pair.a][metric], metric
        assert out["metrics"][metric]["b"] == scored[pair.b][metric], metric
    for side, run_id in (("a", pair.a), ("b", pair.b)):  # a mean, summed in another order
        assert out["metrics"]["tp"][side] == pytest.approx(scored[run_id]["tp"], rel=1e-14)
    means = [
        pl.read_parquet(root / r / "scores" / "abet" / "scores.parquet")["tsa"].mean()
        for r in (pair.a, pair.b)
    ]
    assert means != [scored[pair.a]["tsa"], scored[pair.b]["tsa"]]  # the check can tell


def test_a_sample_regressed_by_an_ahr_from_undefined_shows_both_values():
    """Its row said "+0.0000 +0.0000 —", which shows no reason for it to be listed."""
    from tcbreplay._cli.grids import _ahr_change

    assert _ahr_change({"ahr_a": None, "ahr_b": 1.0, "d_ahr": None}) == "none→1.0000"
    assert _ahr_change({"ahr_a": 0.5, "ahr_b": None, "d_ahr": None}) == "0.5000→none"
    assert _ahr_change({"ahr_a": 0.25, "ahr_b": 0.5, "d_ahr": 0.25}) == "+0.2500"
    assert _ahr_change({"ahr_a": None, "ahr_b": None, "d_ahr": None}) == "—"


def test_two_imported_runs_are_not_said_to_be_unfinished(tmp_path):
    """Every import was warned of as "imported: not every sample was recorded"."""
    data = TEST_DATA / "report"
    root = tmp_path / "s"
    for run_id, traces in (("a", "traces_a.jsonl"), ("b", "traces_b.jsonl")):
        made = cli("import", "--dataset", data / "dataset.json", "--tools",
                   TEST_DATA / "tools_shop.json", "--traces", data / traces, "--run-id", run_id,
                   "--store", root)  # fmt: skip
        assert made.exit_code == 0, made.output
    result = cli("diff", "a", "b", "--store", root)
    assert result.exit_code == 0, result.output
    assert "not every sample was recorded" not in result.output


def test_stored_scorings_of_one_name_with_other_roles_are_made_alike(tmp_path):
    """A scoring's name leaves out its roles: two runs of the same traces, focused on their
    write tools with book_reservation made a read tool in one, were compared as they were
    stored (tsa, tp and exact moved, 3 samples 'regressed'), without a word."""
    store = tmp_path / "traces"
    traces = TEST_DATA / "tau2" / "gpt-4.1_airline_sample.json"
    for run_id in ("a", "b"):
        made = cli("import", "--traces", traces, "--run-id", run_id, "--store", store)
        assert made.exit_code == 0, made.output
    scored = [cli("score", "a", "--only", "write", "--role", "read=book_reservation",
                  "--store", store),
              cli("score", "b", "--only", "write", "--store", store)]  # fmt: skip
    assert all(s.exit_code == 0 for s in scored), [s.output for s in scored]
    result = cli("diff", "a", "b", "--scoring", "spec_only-write", "--format", "json",
                 "--store", store)  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["warnings"][0] == (
        "B (b) was scored spec_only-write with other options than A (a) (roles none (A: "
        "book_reservation=read)): B is scored in memory with A's"
    )
    assert all(d["delta"] == 0 for d in out["metrics"].values() if d["delta"] is not None)
    assert out["regressed"] == out["improved"] == []
    # the report's comparison says it too, on B's card
    page = cli("report", "a", "b", "--scoring", "spec_only-write", "-o", tmp_path / "r.html",
               "--store", store)  # fmt: skip
    assert page.exit_code == 0, page.output
    assert "B is scored in memory with A&#x27;s" in (tmp_path / "r.html").read_text("utf-8")


def test_runs_of_two_benchmarks_are_paired_by_id_with_a_warning(tmp_path):
    """tau-bench's sample '2' and tau2's '2' are other tasks: they were paired without a word."""
    store = import_tau_bench(tmp_path / "traces")
    traces = TEST_DATA / "tau2" / "gpt-4.1_airline_sample.json"
    made = cli("import", "--traces", traces, "--run-id", "t2", "--store", store)
    assert made.exit_code == 0, made.output
    result = cli("diff", "tau", "t2", "--format", "json", "--store", store)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"][0] == (
        "A (tau) is a run of tau-bench, B (t2) of tau2: samples are paired by id alone, and an "
        "id may be another task in each"
    )


def test_imports_of_other_datasets_are_paired_by_id_with_a_warning(tmp_path):
    """Two imports are both of benchmark 'custom': a sample of one id and another input or
    gold in each was paired without a word (and the report's comparison with it)."""
    tools = TEST_DATA / "tools_shop.json"
    gold = [{"name": "list_items", "args": {}}]
    tasks = {"one": ["what is sold?", "q1"], "two": ["something else entirely", "q1"],
             "same": ["what is sold?", "q1"]}  # fmt: skip
    store = tmp_path / "traces"
    for run_id, inputs in tasks.items():
        entries = [{"id": f"s{k}", "input": text, "target": gold} for k, text in enumerate(inputs)]
        (tmp_path / f"{run_id}.json").write_text(json.dumps(entries))
        lines = [{"sample_id": f"s{k}", "messages": [{"role": "user", "content": text},
                                                     {"role": "assistant", "content": "hi"}]}
                 for k, text in enumerate(inputs)]  # fmt: skip
        (tmp_path / f"{run_id}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        made = cli("import", "--format", "openai", "--traces", tmp_path / f"{run_id}.jsonl",
                   "--dataset", tmp_path / f"{run_id}.json", "--tools", tools, "--run-id",
                   run_id, "--store", store)  # fmt: skip
        assert made.exit_code == 0, made.output
    result = cli("diff", "one", "two", "--format", "json", "--store", store)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "1 of the 2 samples in common are another task in A (one) and B (two), their input or "
        "gold calls not the same (the first: 's0'): samples are paired by id alone"
    ]
    same = cli("diff", "one", "same", "--format", "json", "--store", store)
    assert same.exit_code == 0 and json.loads(same.stdout)["warnings"] == [], same.output
    page = cli("report", "one", "two", "-o", tmp_path / "r.html", "--store", store)
    assert page.exit_code == 0, page.output
    assert "another task in A (one) and B (two)" in (tmp_path / "r.html").read_text("utf-8")


def test_a_replay_of_an_import_is_the_same_tasks_as_its_parent(tmp_path):
    """A replay of a τ-bench import (its dataset file the parent's, byte for byte, no source
    file's sha256) holds each conversation's first user message as its input, not the task's
    instruction: diff warned that every sample was another task in A and B."""
    store = import_tau_bench(tmp_path / "traces")
    made = cli("replay", "tau", "--run-id", "again", "--recorded-tools", "--allow-divergence",
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    warnings = diff_json(store, "tau", "again")["warnings"]
    assert not any("another task" in w for w in warnings), warnings


def test_a_replays_divergences_are_said_diverged_not_ended_in_error(tmp_path):
    """A replay whose samples all diverged (a new prompt) was said to hold samples that
    'ended in error' and 'score with the calls made before the error'."""
    store = import_tau_bench(tmp_path / "traces")
    made = cli("replay", "tau", "--run-id", "again", "--recorded-tools", "--allow-divergence",
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    warnings = diff_json(store, "tau", "again")["warnings"]
    assert "B (again): 20 of its 20 samples and trials diverged from their recording; they " \
        "score with the calls made until then" in warnings, warnings  # fmt: skip
    assert not any("ended in error" in w for w in warnings), warnings


def test_one_sample_in_error_and_one_missing_are_said_in_the_singular(pair, pair_copy):
    root = pair_copy
    manifest_path = root / pair.b / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["totals"] = {**manifest["totals"], "errors": 2, "missing": 1}
    manifest_path.write_text(json.dumps(manifest))
    warnings = diff_json(root, pair.a, pair.b, "--bootstrap", 40)["warnings"]
    assert f"B ({pair.b}): 1 of its 94 samples and trials ended in error; it scores with the " \
        "calls made before the error" in warnings  # fmt: skip
    assert f"B ({pair.b}): 1 sample and trial of its dataset is missing from its traces" \
        in warnings  # fmt: skip


def test_an_imports_missing_samples_are_said_missing_not_ended_in_error(tmp_path):
    """An import counts the samples its traces lack among its totals' errors: diff said they
    'ended in error' and 'score with the calls made before the error', beside the right
    warning that they are missing."""
    entries = [{"id": f"s{k}", "input": f"q{k}", "target": []} for k in range(3)]
    (tmp_path / "ds.json").write_text(json.dumps(entries))
    line = {"sample_id": "s0", "messages": [{"role": "user", "content": "q0"},
                                            {"role": "assistant", "content": "hi"}]}  # fmt: skip
    (tmp_path / "t.jsonl").write_text(json.dumps(line) + "\n")
    store = tmp_path / "traces"
    for run_id in ("a", "b"):
        made = cli("import", "--format", "openai", "--traces", tmp_path / "t.jsonl", "--dataset",
                   tmp_path / "ds.json", "--tools", TEST_DATA / "tools_shop.json", "--run-id",
                   run_id, "--store", store)  # fmt: skip
        assert made.exit_code == 0, made.output
    warnings = diff_json(store, "a", "b")["warnings"]
    assert "A (a): 2 samples and trials of its dataset are missing from its traces" in warnings
    assert not any("ended in error" in w for w in warnings), warnings
