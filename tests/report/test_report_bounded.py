"""A report past its number of samples: which samples it shows, what the page says, and that
its numbers are those of the report that shows every sample."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from report_helpers import import_hand_run, payload

from tcbreplay._report import build_report, collect
from tcbreplay._report.charts import figures, plotly_js
from tcbreplay._report.page import render_page
from tcbreplay._report.shown import KINDS, SAMPLES, choose
from tcbreplay._report.transcripts import transcripts
from tcbreplay._score.run import score_run
from tcbreplay._store.export import Slices
from tcbreplay._store.parquet import read_table
from tcbreplay._store.runs import Store


@pytest.fixture(scope="module")
def sim_reports(sim_run):
    """The sim run's report data and page showing every sample, and showing 10 fewer:
    (store, run_id, full, bounded, limit, pages: {"full", "bounded"})."""
    store, run_id = sim_run
    full = collect(store, [run_id], samples=None)
    limit = len(full.sample_ids) - 10
    assert sum(full.failed) <= limit - limit // 4  # every failed one is shown
    bounded = collect(store, [run_id], samples=limit)
    pages = {
        name: render_page(report, figures(report), plotly_js())
        for name, report in (("full", full), ("bounded", bounded))
    }
    return store, run_id, full, bounded, limit, pages


def _numbers(report):
    """Everything a report counts over every sample."""
    return (
        report.n_samples,
        report.tools,
        report.tool_rows,
        [
            # (a run scored in memory has the time it was scored)
            (
                {k: v for k, v in r.summary.items() if k != "scored_at"},
                r.intervals,
                r.failed(),
                r.invented,
                r.call_names,
            )
            for r in report.runs
        ],
    )


def _in_error(report):
    scores = report.runs[0].scores.select("sample_id", "status")
    return {s for s, status in scores.iter_rows() if status != "ok"}


def test_failed_samples_come_first_then_a_seeded_choice_of_the_rest(sim_reports):
    _, _, full, bounded, limit, _ = sim_reports
    failed = {s for s, f in zip(full.sample_ids, full.failed, strict=True) if f}
    shown = bounded.sample_ids
    assert len(shown) == limit
    assert failed <= set(shown)
    assert shown == [s for s in full.sample_ids if s in set(shown)]  # in the run's order
    assert bounded.failed == [s in failed for s in shown]
    in_error = _in_error(full)
    kinds = {"in error": len(in_error), "failed": len(failed - in_error)}
    assert bounded.shown.kinds == {kind: (n, n) for kind, n in kinds.items() if n}
    rest = len(full.sample_ids) - len(failed)
    assert bounded.shown.rest == (rest - 10, rest)
    assert bounded.shown.total == len(full.sample_ids) == bounded.n_samples


def test_the_choice_is_seeded(sim_reports):
    store, run_id, _, bounded, limit, _ = sim_reports
    other = collect(store, [run_id], samples=limit, seed=1)
    assert other.sample_ids != bounded.sample_ids
    assert other.shown.kinds == bounded.shown.kinds and other.shown.rest == bounded.shown.rest


def test_the_numbers_count_every_sample(sim_reports):
    _, _, full, bounded, _, _ = sim_reports
    assert _numbers(bounded) == _numbers(full)


def test_only_the_shown_samples_are_read_and_paired(sim_reports):
    _, _, full, bounded, _, _ = sim_reports
    run, every = bounded.runs[0], full.runs[0]
    shown = bounded.sample_ids
    assert list(run.agent) == list(run.gold) == list(run.explanations) == shown
    assert {s: every.explanations[s] for s in shown} == run.explanations
    assert {s: every.agent[s] for s in shown} == run.agent
    assert (
        run.shown_indices
        == run.samples.filter(run.samples["sample_id"].is_in(shown))["sample_index"].to_list()
    )
    messages = transcripts(run)
    assert set(messages) <= set(shown) and len(messages) > len(shown) // 2
    everything = transcripts(every)
    assert messages == {s: everything[s] for s in messages}


def test_the_page_shows_the_chosen_samples_and_says_so(sim_reports):
    _, _, full, bounded, limit, pages = sim_reports
    page = pages["bounded"]
    data, details = payload(page, "report-data"), payload(page, "report-details")
    assert data["samples"]["id"] == bounded.sample_ids
    assert len(details["runs"][0]["samples"]) == len(details["gold"]) == limit
    note = re.search(r'<p class="hint" id="shown">(.*?)</p>', page).group(1)
    assert note.startswith(f"Showing {limit} of {len(full.sample_ids)} samples with their")
    rest = len(full.sample_ids) - sum(full.failed)
    assert f": all {sum(full.failed)} failed, {rest - 10} others chosen" in note  # none in error
    assert "at random (seed 0)" in note
    head = re.compile(r'^.*?<section id="samples"', re.S)
    before = [_unstamped(head.search(text).group(0)) for text in (page, pages["full"])]
    assert before[0] == before[1]
    assert data["charts"] == payload(pages["full"], "report-data")["charts"]


def _unstamped(page: str) -> str:
    return re.sub(r"generated [^·<]*UTC", "", page)


def test_below_the_number_the_page_is_the_whole_one(sim_run, sim_reports):
    store, run_id = sim_run
    small = build_report(store, [run_id], samples=SAMPLES)
    assert 'id="shown"' not in small
    assert _unstamped(small) == _unstamped(sim_reports[-1]["full"])


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    """Two imported runs of six hand-written samples, and their report showing every one."""
    store = Store(tmp_path_factory.mktemp("hand") / "traces")
    run_ids = [
        import_hand_run(store, "hand-a", "traces_a.jsonl"),
        import_hand_run(store, "hand-b", "traces_b.jsonl"),
    ]
    for run_id in run_ids:  # stored scores: each report reads them, not scores again
        score_run(store, run_id)
    return store, run_ids, collect(store, run_ids, samples=None)


def test_a_comparison_shows_its_regressed_samples_first(hand):
    store, run_ids, full = hand
    regressed = [s for s, r in zip(full.sample_ids, full.regressed, strict=True) if r]
    failed = [s for s, f in zip(full.sample_ids, full.failed, strict=True) if f]
    assert regressed == ["perfect"] and len(failed) > 2
    bounded = collect(store, run_ids, samples=3)
    others = len(set(failed) - {"perfect", "crashed"})
    assert bounded.shown.kinds == {"regressed": (1, 1), "in error": (1, 1), "failed": (1, others)}
    assert {"perfect", "crashed"} <= set(bounded.sample_ids)
    assert "perfect" in bounded.sample_ids
    assert set(bounded.sample_ids) <= set(failed) | {"perfect"}
    assert bounded.regressed == [s == "perfect" for s in bounded.sample_ids]
    assert _numbers(bounded) == _numbers(full)
    assert [r.diff for r in bounded.runs] == [r.diff for r in full.runs]


def test_invented_arguments_are_counted_over_samples_not_shown(hand):
    store, run_ids, full = hand
    assert any(r.invented_args for r in full.tool_rows)
    bounded = collect(store, run_ids, samples=0)  # every sample left out, every one counted
    assert bounded.sample_ids == [] and bounded.shown.rest == (0, 1)
    assert _numbers(bounded) == _numbers(full)


def test_choose_takes_the_kinds_in_order():
    kinds = {
        "regressed": [True, False, False, False, False, False],
        "in error": [True, True, False, False, False, False],
        "failed": [True, True, True, True, False, False],
    }
    positions, shown = choose(kinds, 6, 4, seed=3)  # 3 to the kinds, 1 to the rest
    assert positions[:2] == [0, 1] and len(positions) == 4
    assert positions[2] in (2, 3) and positions[3] in (4, 5)
    assert shown.kinds == {"regressed": (1, 1), "in error": (1, 1), "failed": (1, 2)}
    assert shown.rest == (1, 2) and shown.shown == 4
    assert choose(kinds, 6, 4, seed=3) == (positions, shown)
    assert choose(kinds, 6, 5, seed=3)[0][:4] == [0, 1, 2, 3]  # what the rest leaves
    everything_failed = {"failed": [True] * 6}
    assert choose(everything_failed, 6, 4)[1].kinds == {"failed": (4, 6)}
    many = {"in error": [k < 100 for k in range(1000)], "failed": [k < 200 for k in range(1000)]}
    shared = choose(many, 1000, 100)[1]
    assert shared.kinds == {"in error": (38, 100), "failed": (37, 100)}
    assert shared.rest == (25, 800)
    assert choose(kinds, 6, 2, seed=3)[0] == [0, 1]
    assert {tuple(choose(kinds, 6, 3, seed=s)[0]) for s in range(20)} == {(0, 1, 2), (0, 1, 3)}
    assert choose(kinds, 6, 6) == (list(range(6)), None)
    assert choose(kinds, 6, None) == (list(range(6)), None)
    assert list(KINDS) == ["regressed", "in error", "failed"]


def test_the_heavy_columns_are_read_for_the_shown_samples_only(sim_run, monkeypatch):
    """Input, gold, metadata and error are read of the samples the page shows, never of the
    whole file: at ten million samples they alone are gigabytes."""
    from tcbreplay._store import parquet

    reads, real = [], parquet.read_table

    def spy(path, **options):
        reads.append((path.name, options.get("columns")))
        return real(path, **options)

    monkeypatch.setattr(parquet, "read_table", spy)
    store, run_id = sim_run
    report = collect(store, [run_id], samples=5)
    heavy = {"input", "gold", "metadata", "error"}
    whole = [columns for name, columns in reads if name == "samples.parquet"]
    assert whole and all(c is not None and not heavy & set(c) for c in whole)
    run = report.runs[0]
    assert not heavy & set(run.samples.columns) and not heavy & set(run.scores.columns)
    shown = run.shown()
    assert shown["sample_id"].to_list() == report.sample_ids and heavy <= set(shown.columns)
    assert shown["sample_index"].to_list() == run.shown_indices
    every = pl.read_parquet(run.run.samples_path).filter(pl.col("sample_index").is_in(
        run.shown_indices)).sort("sample_index")  # fmt: skip
    assert shown.select(*heavy).equals(every.select(*heavy))


def test_calls_beyond_what_duckdb_splits_as_python_would_are_read_in_python():
    """Per agent call, the keys its tool does not take are counted by DuckDB; a call whose
    arguments are no JSON, or may be beyond the limits Python reads JSON within (too deep, an
    integer too long), is to be read in Python (null): Python reads those as text, which
    invents nothing, where DuckDB would count their keys."""
    import duckdb

    from tcbreplay._json import MAX_DEPTH, MAX_INT_DIGITS
    from tcbreplay._report.calls import _may_invent

    deep = '{"zz": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    long, longest = (
        '{"zz": ' + "7" * digits + "}" for digits in (MAX_INT_DIGITS + 1, MAX_INT_DIGITS)
    )
    args = ['{"a": 1, "zz": 2, "yy": 3}', '{"a": 1}', deep, long, "not json", None, longest]
    agent = pl.DataFrame({"s": [0, 0, 1, 1, 2, 2, 3], "i": [0, 1, 0, 1, 0, 1, 0],
                          "name": ["t"] * 7, "args": args})  # fmt: skip
    con = duckdb.connect()
    try:
        found = _may_invent(con, agent, ["a", "b", "c", "d"], {}, {"t": {"a": {}}})
    finally:
        con.close()
    rows = sorted(found.select("s", "i", "unknown").iter_rows())
    assert rows == [(0, 0, 2), (1, 0, None), (1, 1, None), (2, 0, None), (3, 0, 1)]


def test_slices_read_the_rows_of_some_samples(sim_run):
    store, run_id = sim_run
    path = store.open_run(run_id).messages_path
    table = read_table(path)
    wanted = [3, 0, 41, 41, 90]
    got = Slices(path, ["sample_index", "position"]).read_indices(wanted)
    index = table["sample_index"].to_numpy()
    assert sorted(got["sample_index"].to_pylist()) == sorted(index[np.isin(index, wanted)].tolist())
    assert got.column_names == ["sample_index", "position"]
    assert Slices(path, ["sample_index"]).read_indices([10**6]).num_rows == 0


def _with_texts(view, strings):
    """A divergence view with its parent's messages' texts in place of their indices."""
    return {**view, "pt": [[m[0], strings[m[1]], *m[2:]] for m in view["pt"]]}


@pytest.mark.slow
def test_a_replay_shows_the_divergences_of_its_shown_samples(sim_run, tmp_path):
    from report_helpers import drifted_replay

    store, parent, replay = drifted_replay(sim_run, tmp_path / "traces")
    views = []
    for limit in (None, 90):
        page = build_report(store, [parent, replay], allow_incomplete=True, samples=limit)
        data, details = payload(page, "report-data"), payload(page, "report-details")
        entries = zip(data["samples"]["id"], details["runs"][1]["samples"], strict=True)
        views.append(
            {s: _with_texts(e["v"], details["strings"]) for s, e in entries if e and "v" in e}
        )
    full, bounded = views
    assert len(data["samples"]["id"]) == 90
    assert bounded and bounded == {s: full[s] for s in data["samples"]["id"] if s in full}


@pytest.mark.slow
def test_the_validity_panel_counts_every_sample(tmp_path):
    from helpers import import_tau_bench

    store = Store(import_tau_bench(tmp_path / "traces"))
    pages = [build_report(store, ["tau"], samples=limit) for limit in (None, 2)]
    assert 'id="shown"' in pages[1] and 'id="validity"' in pages[0]
    head = re.compile(r'^.*?<section id="samples"', re.S)
    before = [_unstamped(head.search(page).group(0)) for page in pages]
    assert before[0] == before[1]
    charts = [payload(page, "report-data")["charts"] for page in pages]
    assert any(name.startswith("chart-roc") for name in charts[0]) and charts[0] == charts[1]
