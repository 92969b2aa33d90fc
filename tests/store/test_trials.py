"""Trials and metadata in the store (#20): rows keyed by (sample_id, trial), a trial column in
the views, ``record --trials K`` with the sim varying by trial, and per-sample metadata."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, cli

from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._query.sql import run_sql
from tcbreplay._record.models import parse_model
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCHEMA_VERSION
from tcbreplay.errors import InputError

DATA = TEST_DATA
V1 = DATA / "store_v1"
BUILTIN = BENCHMARKS["tool-call"]
# the built-in benchmark's first entries, for the tests that record it several times over
SMALL = 10


@pytest.fixture
def small_dataset(tmp_path):
    """The built-in benchmark's first SMALL entries as a dataset file (its tools and prompt
    are the built-in's)."""
    path = tmp_path / "small.json"
    path.write_text(json.dumps(json.loads(BUILTIN.dataset.read_text())[:SMALL]))
    return path


# the built-in benchmark's first entries, recorded in three trials by the tests of the views
THREE = 30


@pytest.fixture(scope="module")
def three_trials(tmp_path_factory):
    """The built-in benchmark's first THREE entries recorded with ``sim:seed=7,error_rate=0.3``
    in three trials."""
    folder = tmp_path_factory.mktemp("trials")
    dataset = folder / "first.json"
    dataset.write_text(json.dumps(json.loads(BUILTIN.dataset.read_text())[:THREE]))
    store = Store(folder / "traces")
    record_run(
        load_inputs("tool-call", dataset=dataset),
        parse_model("sim:seed=7,error_rate=0.3"),
        store,
        run_id="t3",
        options=RecordOptions(workers=8, trials=3),
    )
    return store


def calls_by_trial(store: Store, run_id: str) -> dict[int, list[tuple]]:
    rows = run_sql(
        store,
        "select trial, sample_id, call_index, name, args::varchar from tool_calls "
        f"where run_id = '{run_id}' order by trial, sample_id, call_index",
    ).rows
    out: dict[int, list[tuple]] = {}
    for trial, *rest in rows:
        out.setdefault(trial, []).append(tuple(rest))
    return out


def test_k_trials_store_k_rows_per_sample_keyed_by_sample_and_trial(three_trials):
    rows = pq.read_table(three_trials.run_dir("t3") / "samples.parquet").to_pylist()
    assert len(rows) == 3 * THREE
    keys = [(r["sample_id"], r["trial"]) for r in rows]
    assert len(set(keys)) == len(keys)
    assert {r["trial"] for r in rows} == {0, 1, 2}
    # sample_index: the entry's position, after all rows of the trials before
    entry = {str(e["id"]): i for i, e in enumerate(json.loads(BUILTIN.dataset.read_text()))}
    assert all(r["sample_index"] == entry[r["sample_id"]] + r["trial"] * THREE for r in rows)
    manifest = json.loads((three_trials.run_dir("t3") / "manifest.json").read_text())
    assert manifest["runner"]["trials"] == 3
    assert manifest["totals"]["samples"] == manifest["totals"]["recorded"] == 3 * THREE
    assert manifest["schema_version"] == SCHEMA_VERSION


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_every_view_carries_the_trial(three_trials):
    for view in ("samples", "messages", "tool_calls", "gold_calls"):
        counts = run_sql(
            three_trials,
            f"select trial, count(distinct sample_id) from {view} group by 1 order by 1",
        ).rows
        assert [t for t, _ in counts] == [0, 1, 2], view
    assert cli("score", "t3", "--store", three_trials.root).exit_code == 0
    rows = run_sql(three_trials, "select trial, count(*) from scores group by 1 order by 1").rows
    assert rows == [(0, THREE), (1, THREE), (2, THREE)]
    # a trial's messages are its own: joined on (sample_id, trial), every row finds its sample
    orphans = run_sql(
        three_trials,
        "select count(*) from messages m anti join samples s using (run_id, sample_id, trial)",
    ).rows
    assert orphans == [(0,)]


def test_every_scoring_view_carries_the_trial(three_trials, tmp_path):
    root = tmp_path / "traces"
    shutil.copytree(three_trials.root, root)
    for scorer in ("spec", "abet"):
        assert cli("score", "t3", "--scorer", scorer, "--store", root).exit_code == 0
    rows = cli("sql", "select scoring, trial, count(*) as n from scores_all group by all "
               "order by all", "--format", "json", "--store", root)  # fmt: skip
    assert json.loads(rows.stdout) == [
        {"scoring": scoring, "trial": trial, "n": THREE}
        for scoring in ("abet", "spec")
        for trial in range(3)
    ]
    rows = cli("sql", "select scoring, trials, n_samples from scorings order by scoring",
               "--format", "json", "--store", root)  # fmt: skip
    assert json.loads(rows.stdout) == [
        {"scoring": "abet", "trials": 3, "n_samples": 3 * THREE},
        {"scoring": "spec", "trials": 3, "n_samples": 3 * THREE},
    ]


def test_a_scoring_stored_before_trials_reads_as_one_trial(tmp_path):
    root = tmp_path / "store"
    shutil.copytree(V1, root)
    rows = cli("sql", "select distinct trials from scorings", "--format", "json", "--store", root)
    assert json.loads(rows.stdout) == [{"trials": 1}]


def test_limit_and_trials_compose_and_a_resumed_run_keeps_its_trials(tmp_path, small_dataset):
    """--limit 3 --trials 2 records the first three samples twice each: a partial run that
    the same command without --limit completes, its two trials kept when resumed."""
    root = tmp_path / "traces"
    args = ["record", "--model", "sim:seed=3", "--run-id", "p", "--store", root, "--quiet",
            "--dataset", small_dataset]  # fmt: skip
    first = cli(*args, "--limit", "3", "--trials", "2")
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith(
        f"run p (simulated model): 6/6 ok (partial: {SMALL} in the dataset, 2 trials each)"
    )
    rows = pq.read_table(root / "p" / "samples.parquet").to_pylist()
    ids = [str(e["id"]) for e in json.loads(small_dataset.read_text())]
    assert sorted((r["sample_id"], r["trial"]) for r in rows) == sorted(
        (i, t) for i in ids[:3] for t in (0, 1)
    )
    manifest = json.loads((root / "p" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["runner"]["trials"] == 2
    assert (manifest["totals"]["samples"], manifest["totals"]["recorded"]) == (2 * SMALL, 6)
    one = cli("record", "--model", "sim:seed=3", "--run-id", "s", "--store", root, "--quiet",
              "--dataset", small_dataset, "--sample-id", ids[5], "--trials", "3")  # fmt: skip
    assert one.exit_code == 0, one.output
    rows = pq.read_table(root / "s" / "samples.parquet").to_pylist()
    assert sorted((r["sample_id"], r["trial"]) for r in rows) == [(ids[5], t) for t in range(3)]

    rest = cli("record", "--resume", "p", "--store", root, "--quiet")
    assert rest.exit_code == 0, rest.output
    assert f"recorded {2 * SMALL - 6} in" in rest.stdout
    manifest = json.loads((root / "p" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["runner"]["trials"] == 2
    assert pq.read_metadata(root / "p" / "samples.parquet").num_rows == 2 * SMALL


def test_the_sim_varies_by_trial_and_trial_0_is_a_run_without_trials(three_trials, sim_run):
    by_trial = calls_by_trial(three_trials, "t3")
    store, run_id = sim_run  # the same model, recorded without trials, on every entry
    first = {str(e["id"]) for e in json.loads(BUILTIN.dataset.read_text())[:THREE]}
    assert by_trial[0] == [c for c in calls_by_trial(store, run_id)[0] if c[0] in first]
    assert by_trial[1] != by_trial[0] and by_trial[2] != by_trial[1]
    ids = run_sql(three_trials, "select distinct trial, message->'data'->>'id' from messages "
                  "where type = 'ai'").rows  # fmt: skip
    assert len({i for _, i in ids}) == len(ids)  # message ids differ between trials


def test_more_trials_later_record_only_the_new_ones(tmp_path, small_dataset):
    store = Store(tmp_path / "traces")
    inputs = load_inputs("tool-call", dataset=small_dataset)
    model = parse_model("sim:seed=2")
    record_run(inputs, model, store, run_id="r", options=RecordOptions(trials=2, workers=8))
    first = pq.read_table(store.run_dir("r") / "messages.parquet").to_pylist()
    summary = record_run(inputs, model, store, run_id="r", options=RecordOptions(trials=3))
    assert summary.attempted == SMALL and summary.total == 3 * SMALL
    again = pq.read_table(store.run_dir("r") / "messages.parquet").to_pylist()
    assert [m for m in again if m["trial"] < 2] == first
    # resumed without --trials: the run's three trials, nothing left to record
    summary = record_run(inputs, model, store, run_id="r", options=RecordOptions())
    assert summary.attempted == 0 and summary.recorded == 3 * SMALL


def test_record_trials_on_the_command_line(tmp_path, small_dataset):
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=1", "--trials", "2", "--run-id", "r", "--quiet",
                 "--store", root, "--dataset", small_dataset)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{2 * SMALL}/{2 * SMALL} ok" in result.stdout
    bad = cli("record", "--model", "sim", "--trials", "0", "--run-id", "x", "--store", root)
    assert bad.exit_code == 2
    assert "--trials 0: must be from 1 to" in bad.stderr
    with pytest.raises(InputError):
        RecordOptions(trials=0)


def test_metadata_of_the_dataset_is_in_sql(tmp_path):
    entries = [
        {"id": "a", "input": "hi", "target": [], "metadata": {"reward": 0.5, "tags": ["x"]}},
        {"id": "b", "input": "hello", "target": []},
    ]
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps(entries))
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim", "--dataset", dataset, "--system-prompt",
                 BUILTIN.system_prompt, "--run-id", "m", "--quiet", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = cli("sql", "select sample_id, metadata->>'reward' as reward, "
               "json_extract(metadata, '$.tags[0]') as tag from samples order by 1",
               "--format", "json", "--store", root)  # fmt: skip
    assert json.loads(rows.stdout) == [
        {"sample_id": "a", "reward": "0.5", "tag": '"x"'},
        {"sample_id": "b", "reward": None, "tag": None},
    ]


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_a_version_1_store_reads_as_trial_0_without_metadata(tmp_path):
    root = tmp_path / "store"
    shutil.copytree(V1, root)
    for view in ("samples", "messages", "tool_calls", "gold_calls", "scores"):
        rows = cli("sql", f"select distinct trial from {view}", "--format", "json",
                   "--store", root)  # fmt: skip
        assert rows.exit_code == 0, rows.output
        assert json.loads(rows.stdout) == [{"trial": 0}], view
    rows = cli("sql", "select count(*) as n from samples where metadata is null",
               "--format", "json", "--store", root)  # fmt: skip
    total = cli("sql", "select count(*) as n from samples", "--format", "json", "--store", root)
    assert json.loads(rows.stdout) == json.loads(total.stdout)


def test_a_journal_folds_into_version_1_files_as_trial_0_rows(tmp_path):
    """Resuming a version 1 run writes version 2 files: its rows become trial 0."""
    from tcbreplay._store.journal import fold_journal
    from tcbreplay._store.writer import journal_line

    run_dir = tmp_path / "rec-v1"
    shutil.copytree(V1 / "rec-v1", run_dir)
    old = pq.read_table(run_dir / "samples.parquet").to_pylist()
    first = old[0]
    record = {
        **{k: first[k] for k in ("run_id", "sample_id", "input", "category", "status")},
        "trial": 1, "sample_index": first["sample_index"] + len(old),
        "gold": json.loads(first["gold"]), "metadata": {"note": "new"},
        "messages": [{"type": "human", "message": '{"type": "human", "data": {"content": "x"}}'}],
    }  # fmt: skip
    (run_dir / "journal.jsonl").write_text(journal_line(record) + "\n")
    fold_journal(run_dir)
    rows = pq.read_table(run_dir / "samples.parquet").to_pylist()
    assert len(rows) == len(old) + 1
    assert [(r["sample_id"], r["trial"], r["metadata"]) for r in rows[:1] + rows[-1:]] == [
        (first["sample_id"], 0, None), (first["sample_id"], 1, '{"note": "new"}')
    ]  # fmt: skip
    messages = pq.read_table(run_dir / "messages.parquet").to_pylist()
    assert {m["trial"] for m in messages} == {0, 1}
