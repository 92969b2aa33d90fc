"""The report: a self-contained HTML page of one or more runs, built from the store."""

from __future__ import annotations

import hashlib
import json
import re
import stat
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, cli, fifo_read, import_tau_bench, with_messages
from report_helpers import import_hand_run, payload

import tcbreplay._report as report_package
from tcbreplay._compare.resampling import resamples
from tcbreplay._report import build_report, collect, write_report
from tcbreplay._report.charts import (
    PLOTLY_JS,
    PLOTLY_JS_VERSION,
    figures,
    plotly_js,
    tp_bins,
    tp_normalised,
)
from tcbreplay._report.intervals import _CHUNK_CELLS, metric_intervals
from tcbreplay._report.payloads import script_json
from tcbreplay._score.metrics import explain_sample
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError, RunNotFoundError

HAND_FAILED = ["wrong-and-invented", "missed-call", "extra-call", "crashed"]
# Per tool of run hand-a: gold, agent, paired calls, args, invalid args, invented args.
HAND_TOOLS = {
    "list_items": (2, 2, 1, 0, 0, 0),
    "add_numbers": (2, 1, 1, 3, 2, 1),
    "multiply_numbers": (2, 2, 2, 4, 0, 0),
}


class _Refs(HTMLParser):
    """Every URL-valued attribute, every script and every stylesheet of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("src", "href", "srcset", "action", "poster", "data") and value:
                self.refs.append((tag, key, value))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    """Two imported runs of six hand-written samples with known scores: (store, [a, b])."""
    store = Store(tmp_path_factory.mktemp("hand") / "traces")
    return store, [
        import_hand_run(store, "hand-a", "traces_a.jsonl"),
        import_hand_run(store, "hand-b", "traces_b.jsonl"),
    ]


@pytest.fixture(scope="module")
def one_run_html(sim_run):
    store, run_id = sim_run
    return build_report(store, [run_id])


@pytest.fixture(scope="module")
def two_run_html(sim_runs_pair):
    store, run_ids = sim_runs_pair
    return build_report(store, run_ids)


@pytest.mark.parametrize("which", ["one_run_html", "two_run_html"])
def test_page_is_self_contained(which, request):
    page = request.getfixturevalue(which)
    parser = _Refs()
    parser.feed(page)
    assert parser.refs, "expected at least the inline favicon"
    for tag, key, value in parser.refs:
        assert value.startswith(("#", "data:")), f"<{tag} {key}={value!r}> leaves the file"
    assert not re.search(r"<script[^>]*\ssrc=", page)
    assert not re.search(r"<link[^>]*stylesheet", page)
    css = "\n".join(parser.styles)
    assert "@import" not in css
    assert not re.search(r"url\((?![\"']?(data:|#))", css)
    bundle = plotly_js()
    assert page.count(bundle) == 1  # the vendored bundle, embedded whole
    # plotly.js itself holds links (its licences, attribution for map tiles it never draws)
    ours = page.replace(bundle, "")
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", ours)
    assert not re.search(r"https?://", ours)


# npm plotly.js-basic-dist-min 4.1.1, package/plotly-basic.min.js (see vendor/README.md)
PLOTLY_SHA256 = "99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba"


def test_vendored_plotly_is_the_pinned_bundle():
    """The partial bundle, byte for byte as published, with its licence, safe to inline."""
    folder = Path(report_package.__file__).parent
    path = folder / PLOTLY_JS
    assert hashlib.sha256(path.read_bytes()).hexdigest() == PLOTLY_SHA256
    text = plotly_js()
    assert text.startswith(f"/**\n* plotly.js (basic - minified) v{PLOTLY_JS_VERSION}\n")
    assert f"`plotly.js-basic-dist-min` **{PLOTLY_JS_VERSION}**" in (
        folder / "vendor" / "README.md"
    ).read_text(encoding="utf-8")
    assert PLOTLY_SHA256 in (folder / "vendor" / "README.md").read_text(encoding="utf-8")
    licence = (folder / "vendor" / "LICENSE-plotly.js").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "Plotly" in licence
    # inlined in a <script> element: nothing in it may end the element or open a comment
    assert not re.search(r"</script|<!--", text, re.I)


def test_chart_traces_are_those_the_bundle_draws(two_run_html):
    """The basic bundle draws bar, pie and scatter traces only."""
    charts = payload(two_run_html, "report-data")["charts"]
    kinds = {trace["type"] for fig in charts.values() for trace in fig["data"]}
    assert kinds == {"bar"}


def test_one_run_page_holds_the_run_and_its_samples(one_run_html, sim_run):
    store, run_id = sim_run
    scores = score_run(store, run_id, write=False).scores.sort("sample_index")
    data = payload(one_run_html, "report-data")
    assert [r["id"] for r in data["runs"]] == [run_id]
    assert run_id in one_run_html
    assert data["samples"]["id"] == scores["sample_id"].to_list()
    assert data["cols"][0]["tp"] == [round(v, 4) for v in scores["tp"]]
    assert set(data["charts"]) == {"chart-metrics", "chart-tools", "chart-tp"}
    assert not any(data["samples"]["regressed"])
    assert 'value="regressed"' not in one_run_html  # the filter needs two runs


def test_known_sample_data_and_verdicts(one_run_html, sim_run):
    """A sample with an invalid argument: its scores, verdicts, input and tool results."""
    store, run_id = sim_run
    run = store.open_run(run_id)
    scores = score_run(store, run_id, write=False).scores
    sid = scores.filter(pl.col("args_invalid") > 0).sort("sample_index")["sample_id"][0]
    row = scores.filter(pl.col("sample_id") == sid).row(0, named=True)
    samples = pl.read_parquet(run.samples_path).filter(pl.col("sample_id") == sid)
    messages = pl.read_parquet(run.messages_path).filter(pl.col("sample_id") == sid)
    data = payload(one_run_html, "report-data")
    details = payload(one_run_html, "report-details")
    s = data["samples"]["id"].index(sid)
    assert data["samples"]["input"][s] == samples["input"][0]
    assert data["cols"][0]["inv"][s] == row["args_invalid"]
    assert data["cols"][0]["tot"][s] == row["args_total"]
    assert data["samples"]["failed"][s] == 1
    entry = details["runs"][0]["samples"][s]
    gold = [(c["name"], c["args"]) for c in json.loads(samples["gold"][0])]
    agent = [(n, a) for n, a in entry["a"]]
    explained = explain_sample(agent, gold, run.manifest["tools"]["specs"])
    bad = [{k: v for k, v in p["args"].items() if v != "ok"} for p in explained["pairs"]]
    assert [p[2] for p in entry["p"]] == bad
    assert sum(len(b) for b in bad) == row["args_invalid"]
    texts = [details["strings"][m[1]] for m in entry["t"]]
    tool_messages = messages.filter(pl.col("type") == "tool")["message"]
    tool_texts = [json.loads(m)["data"]["content"] for m in tool_messages]
    assert samples["input"][0] in texts
    assert tool_texts and all(t in texts for t in tool_texts)
    assert [m[0] for m in entry["t"]] == messages.sort("position")["type"].to_list()


def test_hand_runs_failed_tools_and_regressed(hand):
    store, run_ids = hand
    report = collect(store, run_ids[:1])
    failed = [sid for sid, f in zip(report.sample_ids, report.failed, strict=True) if f]
    assert failed == HAND_FAILED
    rows = {r.tool: r for r in report.tool_rows}
    for tool, expected in HAND_TOOLS.items():
        r = rows[tool]
        got = (r.gold_calls, r.agent_calls, r.paired_calls, r.args, r.invalid_args)
        assert (*got, r.invented_args) == expected, tool
    both = collect(store, run_ids)
    regressed = [s for s, r in zip(both.sample_ids, both.regressed, strict=True) if r]
    assert regressed == ["perfect"]  # missed-call improved in hand-b, perfect made no call
    assert sum(both.failed) == len(HAND_FAILED) + 1
    assert both.runs[1].diff["tp"]["delta"] == pytest.approx(-1 / 12)


def test_hand_page_escapes_markup_and_shows_errors(hand):
    store, run_ids = hand
    page = build_report(store, run_ids)
    assert "</script><!-- not markup" not in page  # the input text of one sample
    data = payload(page, "report-data")
    details = payload(page, "report-details")
    s = data["samples"]["id"].index("wrong-and-invented")
    assert data["samples"]["input"][s] == "What is 3 plus 2? </script><!-- not markup -->"
    assert details["runs"][0]["samples"][s]["p"] == [[0, 0, {"b": "wrong", "unit": "unknown"}]]
    crashed = details["runs"][0]["samples"][data["samples"]["id"].index("crashed")]
    assert crashed["e"] == "RateLimitError: 429 Too Many Requests"
    perfect_b = details["runs"][1]["samples"][data["samples"]["id"].index("perfect")]
    assert perfect_b["t"][-1][6] == [["list_items", "{oops", "Invalid JSON"]]  # unparseable call
    assert [m[0] for m in perfect_b["t"]] == ["system", "human", "ai"]


def test_script_json_cannot_close_its_element():
    text = script_json({"a": "</script><!-- <b>"})
    assert "<" not in text
    assert json.loads(text) == {"a": "</script><!-- <b>"}


def test_two_run_page_has_both_runs_and_their_comparison(two_run_html, sim_runs_pair):
    store, run_ids = sim_runs_pair
    data = payload(two_run_html, "report-data")
    assert [r["id"] for r in data["runs"]] == run_ids
    for run_id in run_ids:
        assert run_id in two_run_html
    a, b = (score_run(store, r, write=False).scores for r in run_ids)
    joined = a.join(b, on="sample_id", suffix="_b").sort("sample_index")
    # as `tcbreplay diff` defines it: tsa or tp down, ahr up (also from undefined to above 0)
    worse = joined.filter(
        (pl.col("tp_b") < pl.col("tp")).fill_null(False)
        | (pl.col("tsa_b") < pl.col("tsa")).fill_null(False)
        | (pl.col("ahr_b") > pl.col("ahr")).fill_null(False)
        | (pl.col("ahr").is_null() & (pl.col("ahr_b") > 0)).fill_null(False)
    )["sample_id"]
    got = [s for s, r in zip(data["samples"]["id"], data["samples"]["regressed"], strict=True) if r]
    assert got == worse.to_list() and got
    assert 'value="regressed"' in two_run_html
    assert "Δ " in two_run_html  # the second run's card shows its delta from the first


def snapshot(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.mark.slow  # (about 3 s)
def test_unscored_runs_are_scored_in_memory_without_writing(tmp_path):
    store = Store(tmp_path / "traces")
    for run_id, traces in (("a", "traces_a.jsonl"), ("b", "traces_b.jsonl")):
        import_hand_run(store, run_id, traces)
    before = snapshot(store.root)
    report = collect(store, ["a", "b"])
    write_report(store, ["a", "b"], tmp_path / "r.html")
    assert [run.scored_in_memory for run in report.runs] == [True, True]
    assert snapshot(store.root) == before
    score_run(store, "a")
    assert [run.scored_in_memory for run in collect(store, ["a", "b"]).runs] == [False, True]


def test_stale_stored_scores_are_not_used(tmp_path):
    store = Store(tmp_path / "traces")
    run_id = import_hand_run(store, "a", "traces_a.jsonl")
    score_run(store, run_id)
    assert not collect(store, [run_id]).runs[0].scored_in_memory
    summary = store.open_run(run_id).scores_dir("spec") / "summary.json"
    doc = json.loads(summary.read_text())
    doc["audit"]["inputs_sha256"]["messages.parquet"] = "0" * 64  # traces changed since
    summary.write_text(json.dumps(doc))
    assert collect(store, [run_id]).runs[0].scored_in_memory


def test_rewritten_traces_are_hashed_again(tmp_path):
    """The manifest's recorded sha256 stands only while size and mtime are unchanged."""
    store = Store(tmp_path / "traces")
    run_id = import_hand_run(store, "a", "traces_a.jsonl")
    score_run(store, run_id)
    messages = store.open_run(run_id).messages_path
    pq.write_table(pq.read_table(messages), messages, compression="gzip")  # new bytes
    assert collect(store, [run_id]).runs[0].scored_in_memory


def test_intervals_contain_the_value(one_run_html, sim_run):
    store, run_id = sim_run
    run = collect(store, [run_id]).runs[0]
    for metric in ("tsa", "tp", "ahr"):
        low, high = run.intervals[metric]
        assert low <= run.summary[metric] <= high
        assert low < high


def test_intervals_are_the_quantiles_of_the_resampled_metrics():
    """The intervals are those of the run's rows drawn with replacement from the seed and
    each metric recomputed over them (tsa over the rows it is defined for, ahr over their
    arguments), to rounding."""
    rng = np.random.default_rng(8)
    n = 300
    tsa = np.where(rng.uniform(size=n) < 0.1, np.nan, rng.integers(0, 4, n) / 3)
    scores = pl.DataFrame(
        {
            "tsa": tsa,
            "tp": rng.integers(0, 5, n) / 4,
            "args_invalid": rng.integers(0, 2, n),
            "args_total": rng.integers(0, 4, n),
        }
    )
    got = metric_intervals(scores, n_boot=200, seed=5)
    drawn = np.concatenate(list(resamples(np.random.default_rng(5), n, 200, _CHUNK_CELLS)))
    defined = ~np.isnan(tsa)
    per_draw = {
        "tsa": np.nan_to_num(tsa)[drawn].sum(axis=1) / defined[drawn].sum(axis=1),
        "tp": scores["tp"].to_numpy()[drawn].mean(axis=1),
        "ahr": (
            scores["args_invalid"].to_numpy()[drawn].sum(axis=1)
            / scores["args_total"].to_numpy()[drawn].sum(axis=1)
        ),
    }
    for metric, values in per_draw.items():
        expected = np.quantile(values, [0.025, 0.975])
        assert got[metric] == pytest.approx(tuple(expected), rel=1e-12, abs=1e-15)


def _scores_frame(n_gold: list[int], tsa: list[float], trials: int = 1) -> pl.DataFrame:
    n = len(n_gold)
    return pl.DataFrame(
        {
            "sample_id": [f"s{i}" for i in range(n)] * trials,
            "trial": pl.Series([t for t in range(trials) for _ in range(n)], dtype=pl.Int32),
            "sample_index": list(range(n)) * trials,
            "n_gold": n_gold * trials,
            "tsa": tsa * trials,
            "tp": [(i % 4) / 3 for i in range(n)] * trials,
            "args_invalid": [i % 2 for i in range(n)] * trials,
            "args_total": [2] * n * trials,
            "exact": [None] * n * trials,
            "write_exact": [None] * n * trials,
            "first_divergence": [None] * n * trials,
        },
        schema_overrides={"exact": pl.Boolean, "write_exact": pl.Boolean,
                          "first_divergence": pl.Int32},
    )  # fmt: skip


def test_an_abet_intervals_tsa_is_pooled_as_its_value_is():
    """abet's tsa pools hits over gold calls (20 of 29 here): the interval resampled the
    samples' unweighted mean, 0.000-0.300 around a TSA of 0.690."""
    scores = _scores_frame([20] + [1] * 9, [1.0] + [0.0] * 9)
    low, high = metric_intervals(scores, "abet", n_boot=500, seed=0)["tsa"]
    assert low <= 20 / 29 <= high
    assert metric_intervals(scores, "spec", n_boot=500, seed=0)["tsa"][1] < 20 / 29


def test_a_samples_trials_are_resampled_together():
    """Ten identical trials of each sample made the intervals a third as wide as one trial's:
    trials are no independent samples (diff and validity resample samples too)."""
    rng = np.random.default_rng(3)
    n = 40
    tsa = (rng.integers(0, 4, n) / 3).tolist()
    one = metric_intervals(_scores_frame([3] * n, tsa), n_boot=300, seed=2)
    ten = metric_intervals(_scores_frame([3] * n, tsa, trials=10), n_boot=300, seed=2)
    for metric in ("tsa", "tp", "ahr"):
        assert ten[metric] == pytest.approx(one[metric], rel=1e-12), metric


def test_write_report_writes_the_page(hand, tmp_path):
    store, run_ids = hand
    out = write_report(store, run_ids, tmp_path / "r.html")
    assert out == tmp_path / "r.html"
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary file left


def test_one_run_id_as_a_string_is_that_run(hand, tmp_path):
    """Its letters before: run 'd' not found."""
    store, run_ids = hand
    one = write_report(store, run_ids[0], tmp_path / "one.html").read_text(encoding="utf-8")
    assert one == write_report(store, run_ids[:1], tmp_path / "r.html").read_text("utf-8")


def test_unknown_run_is_refused(hand, tmp_path):
    store, run_ids = hand
    with pytest.raises(RunNotFoundError, match="no-such-run"):
        write_report(store, [run_ids[0], "no-such-run"], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("run_ids", "message"), [([], "at least one run"), (["hand-a", "hand-a"], "named twice")]
)
def test_bad_run_lists_are_refused(hand, run_ids, message):
    with pytest.raises(InputError, match=message):
        collect(hand[0], run_ids)


def test_an_abet_scoring_is_reported_and_bad_choices_are_one_line(tmp_path):
    """abet leaves args_missing null: the report crashed on it (TypeError); a seed below 0
    crashed once samples were chosen; an unknown scoring's hint said there was none stored."""
    store = Store(tmp_path / "traces")
    run_id = import_hand_run(store, "hand-a", "traces_a.jsonl")
    assert cli("score", run_id, "--scorer", "abet", "--store", store.root).exit_code == 0
    made = cli("report", run_id, "--scoring", "abet", "-o", tmp_path / "r.html", "--store",
               store.root)  # fmt: skip
    assert made.exit_code == 0, made.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "samples · scoring abet · generated" in page  # the page names what it shows
    seed = cli("report", run_id, "--seed", -1, "--samples", 2, "-o", tmp_path / "s.html",
               "--store", store.root)  # fmt: skip
    assert seed.exit_code == 2 and seed.output == "Error: --seed -1: must be 0 or more\n"
    unknown = cli("report", run_id, "--scoring", "nope", "-o", tmp_path / "u.html", "--store",
                  store.root)  # fmt: skip
    assert unknown.exit_code == 2
    assert f"(scorings of {run_id}: abet)" in unknown.output


def test_unwritable_outputs_are_refused(hand, tmp_path):
    store, run_ids = hand
    with pytest.raises(InputError, match="does not exist"):
        write_report(store, run_ids, tmp_path / "missing" / "r.html")
    with pytest.raises(InputError, match="is a directory"):
        write_report(store, run_ids, tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="does not exist"):
        write_report(store, run_ids, blocker / "r.html")
    if Path("/proc/self").is_dir():  # a directory no file can be created in, even by root
        with pytest.raises(InputError, match=r"/proc/r\.html: cannot write the report"):
            write_report(store, run_ids, "/proc/r.html")


@pytest.mark.slow  # (a process of its own, 2 s)
def test_report_imports_neither_langchain_nor_plotly(hand):
    """Nor plotly.py: the figures are plain JSON for the vendored plotly.js."""
    store, run_ids = hand
    code = (
        "import sys\n"
        "from tcbreplay._report import build_report\n"
        "from tcbreplay._store.runs import Store\n"
        f"build_report(Store({str(store.root)!r}), {run_ids!r})\n"
        "bad = sorted(m for m in sys.modules\n"
        "    if m.startswith(('langchain', 'langgraph', 'plotly')))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow  # (2 s)
def test_runs_without_common_samples_are_reported_without_comparison(sim_run, tmp_path):
    import shutil

    sim_store, sim_id = sim_run
    store = Store(tmp_path / "traces")
    shutil.copytree(sim_store.run_dir(sim_id), store.run_dir(sim_id))
    import_hand_run(store, "hand-a", "traces_a.jsonl")
    report = collect(store, [sim_id, "hand-a"])
    assert report.runs[1].diff is None
    assert "in common" in report.runs[1].diff_error
    assert len(report.sample_ids) == 94 + 6 and not any(report.regressed)
    page = build_report(store, [sim_id, "hand-a"])
    assert "No comparison with" in page
    assert payload(page, "report-data")["cols"][1]["tp"][0] is None  # hand-a lacks sim samples


def test_a_call_without_a_name_is_reported_as_scoring_reads_it(tmp_path):
    """A stored tool call with a null name is the tool '' to scoring and to the report."""
    store = Store(tmp_path / "traces")
    run_id = import_hand_run(store, "a", "traces_a.jsonl")
    path = store.open_run(run_id).messages_path
    table = pq.read_table(path)
    messages = table["message"].to_pylist()
    row = next(i for i, m in enumerate(messages) if json.loads(m)["data"].get("tool_calls"))
    message = json.loads(messages[row])
    message["data"]["tool_calls"][0]["name"] = None
    messages[row] = json.dumps(message)
    pq.write_table(with_messages(table, messages), path)
    sample_id = table["sample_id"][row].as_py()
    report = collect(store, [run_id])
    (run,) = report.runs
    assert run.agent[sample_id][0][0] == ""
    assert "" in [item["tool"] for item in run.summary["by_tool"]]
    assert "" in [row.tool for row in report.tool_rows]


def _set_text(store: Store, run_id: str, sample_id: str, column: str, text: str | None) -> None:
    """Set one sample's gold text (``gold``) or its first AI message (``message``), keeping the
    file's schema: a hand edit of the store that scoring still accepts."""
    run = store.open_run(run_id)
    path = run.samples_path if column == "gold" else run.messages_path
    table = pq.read_table(path)
    rows = table.to_pylist()
    row = min(
        (r for r in rows if r["sample_id"] == sample_id and r.get("type", "ai") == "ai"),
        key=lambda r: r.get("position", 0),
    )
    row[column] = text
    table = pl.DataFrame(rows).to_arrow().cast(table.schema)
    if column == "message":  # (the message's calls read from it, as edited)
        table = with_messages(table, table["message"].to_pylist())
    pq.write_table(table, path)


@pytest.mark.parametrize(
    ("column", "text", "agent", "gold"),
    [
        ("message", "[1,2]", [], None),
        ("message", '{"type":"ai","data":{"tool_calls":"notalist"}}', [], None),
        ("message", '{"type":"ai","data":{"tool_calls":[7]}}', [["", {}]], None),
        ("message", None, [], None),
        ("gold", '[{"name":5}]', None, [["5", {}]]),
        ("gold", '"str"', None, []),
    ],
)
def test_odd_stored_values_are_reported_as_scoring_reads_them(tmp_path, column, text, agent, gold):
    """Texts scoring accepts: a list or tool_calls that is no list holds no calls, an element
    that is no object is a call named '' and a name that is no string is its JSON text."""
    store = Store(tmp_path / "traces")
    run_id = import_hand_run(store, "a", "traces_a.jsonl")
    sid = "wrong-and-invented"
    _set_text(store, run_id, sid, column, text)
    scores = score_run(store, run_id, write=False).scores.sort("sample_index")
    page = build_report(store, [run_id])
    data = payload(page, "report-data")
    details = payload(page, "report-details")
    s = data["samples"]["id"].index(sid)
    entry = details["runs"][0]["samples"][s]
    if agent is not None:
        assert entry["a"] == agent
    if gold is not None:
        assert details["gold"][s] == gold
    assert data["cols"][0]["calls"] == scores["n_agent"].to_list()
    assert data["samples"]["ngold"] == scores["n_gold"].to_list()
    assert data["cols"][0]["tp"] == [round(v, 4) for v in scores["tp"]]
    ai = next(m for m in entry["t"] if m[0] == "ai")
    if text and "notalist" in text:  # shown as its JSON text, apart from the calls
        assert ai[6] == [[None, '"notalist"', "tool_calls is not a list: no calls"]]
    if text == "[1,2]":  # no message object: its stored text is shown
        assert details["strings"][ai[1]] == "[1,2]"


def test_infinite_argument_values_are_shown_as_text(tmp_path):
    """A dataset's 1e999 is stored as Infinity, which JSON has no form for: the page shows it
    as the string "Infinity" and says so."""
    store = Store(tmp_path / "traces")
    run_id = import_hand_run(store, "a", "traces_a.jsonl")
    assert "(Infinity, NaN)" not in build_report(store, [run_id])
    sid = "wrong-and-invented"
    args = {"a": float("inf"), "b": 2}
    _set_text(store, run_id, sid, "gold", json.dumps([{"name": "add_numbers", "args": args}]))
    message = {"type": "ai", "data": {"tool_calls": [{"name": "add_numbers", "args": args}]}}
    _set_text(store, run_id, sid, "message", json.dumps(message))
    scores = score_run(store, run_id, write=False).scores
    assert scores.filter(pl.col("sample_id") == sid)["args_invalid"][0] == 0
    page = build_report(store, [run_id])
    data = payload(page, "report-data")
    details = payload(page, "report-details")
    s = data["samples"]["id"].index(sid)
    shown = [["add_numbers", {"a": "Infinity", "b": 2}]]
    assert details["gold"][s] == shown
    assert details["runs"][0]["samples"][s]["a"] == shown
    assert details["runs"][0]["samples"][s]["p"] == [[0, 0, {}]]  # equal, as scoring says
    assert "(Infinity, NaN) are shown as text" in page


def test_report_is_written_into_a_fifo(hand, tmp_path):
    store, run_ids = hand
    fifo = tmp_path / "r.html"
    with fifo_read(fifo) as chunks:
        write_report(store, run_ids, fifo)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # not replaced by a file
    text = b"".join(chunks).decode()
    assert text.startswith("<!doctype html>") and payload(text, "report-data")["runs"]
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_report_through_a_symlink_replaces_its_target(hand, tmp_path):
    store, run_ids = hand
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "target.html"
    target.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    write_report(store, run_ids, link)
    assert link.is_symlink() and link.readlink() == target
    assert target.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "out"]
    assert [p.name for p in target.parent.iterdir()] == ["target.html"]  # no temporary file


def test_an_imported_run_is_titled_by_its_own_benchmark(tmp_path):
    """A τ-bench run's page was titled "Tool Call Benchmark"; so were its manifest's title and
    its dashboard file."""
    root = import_tau_bench(tmp_path / "traces")
    manifest = json.loads((root / "tau" / "manifest.json").read_text())
    assert manifest["benchmark"] == {"name": "tau-bench", "title": "τ-bench"}
    page = build_report(Store(root), ["tau"])
    assert "<title>tcbreplay report: τ-bench</title>" in page
    assert "<h1>tcbreplay report: τ-bench</h1>" in page
    # its traces carry no token counts: the card said "tokens 0 in / 0 out"
    assert "no token counts" in page and "tokens 0 in" not in page
    costs = cli("query", "cost_latency", "-p", "run_id=tau", "--format", "json", "--store", root)
    assert {row["total_tokens"] for row in json.loads(costs.stdout)} == {None}
    assert cli("score", "tau", "--store", root).exit_code == 0
    assert [p.name for p in (root / "tau" / "evaluations").iterdir()] == ["τ-bench_tau.json"]


def test_trials_are_rows_of_their_own_and_metadata_shows(tmp_path):
    """τ-bench's trajectories (#20): each trial a row named by its sample and trial, with its
    own calls and transcript, and its metadata (the reward) in the sample view."""
    tau = TEST_DATA / "tau-bench"
    root = tmp_path / "traces"
    imported = cli("import", "--traces", tau / "gpt-4o-airline-sample.json", "--tools",
                   tau / "airline-tools.json", "--run-id", "tau", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    out = tmp_path / "r.html"
    assert cli("report", "tau", "-o", out, "--store", root).exit_code == 0
    page = out.read_text()
    data, details = payload(page, "report-data"), payload(page, "report-details")
    ids = data["samples"]["id"]
    assert len(ids) == 20 and len(set(ids)) == 20
    assert ids[:6] == ["0", "1", "2", "5", "12", "0 (trial 1)"]
    results = json.loads((tau / "gpt-4o-airline-sample.json").read_text())
    for r in results:
        key = str(r["task_id"]) + (f" (trial {r['trial']})" if r["trial"] else "")
        entry = details["runs"][0]["samples"][ids.index(key)]
        assert entry["m"]["reward"] == r["reward"]
        calls = [m for m in r["traj"] if m.get("tool_calls")]
        assert len(entry["a"]) == sum(len(m["tool_calls"]) for m in calls)


def test_tp_bins_are_centred_on_their_value():
    tp = np.array([0.0, 0.0249, 0.025, 1 / 3, 0.5, 0.9749, 0.975, 1.0, np.nan])
    counts = tp_bins(tp)
    assert len(counts) == 21 and counts.sum() == 8  # NaN is in no bin
    assert counts[0] == 2 and counts[1] == 1 and counts[7] == 1 and counts[10] == 1
    assert counts[19] == 1 and counts[20] == 2


def _tp_chart(report):
    fig = figures(report)["chart-tp"]
    return fig, [trace["y"] for trace in fig["data"]]


def test_tp_histogram_counts_samples_when_the_runs_are_the_same_size(sim_runs_pair):
    store, run_ids = sim_runs_pair
    report = collect(store, run_ids)
    assert not tp_normalised(report)
    fig, ys = _tp_chart(report)
    assert fig["layout"]["yaxis"]["title"]["text"] == "samples"
    for run, y in zip(report.runs, ys, strict=True):
        scores = run.scores
        assert sum(y) == scores.height == 94
        assert y[20] == scores.filter(pl.col("tp") == 1).height
        assert y[0] == scores.filter(pl.col("tp") == 0).height


@pytest.mark.slow  # (2 s)
def test_tp_histogram_shows_shares_when_the_runs_differ_in_size(sim_run, tmp_path):
    """94 samples against 6: counts would compare the runs' sizes; shares compare scores."""
    import shutil

    sim_store, sim_id = sim_run
    store = Store(tmp_path / "traces")
    shutil.copytree(sim_store.run_dir(sim_id), store.run_dir(sim_id))
    import_hand_run(store, "hand-a", "traces_a.jsonl")
    report = collect(store, [sim_id, "hand-a"])
    assert tp_normalised(report)
    fig, ys = _tp_chart(report)
    assert fig["layout"]["yaxis"]["title"]["text"] == "share of the run's samples (%)"
    for run, y, trace in zip(report.runs, ys, fig["data"], strict=True):
        n = run.scores.height
        assert sum(y) == pytest.approx(100, abs=0.1)
        perfect = run.scores.filter(pl.col("tp") == 1).height
        assert y[20] == pytest.approx(100 * perfect / n, abs=0.01)
        assert sum(trace["customdata"]) == n  # the counts, shown on hover
    page = build_report(store, [sim_id, "hand-a"])
    assert "the runs differ in size (94, 6 samples)" in page


def test_a_replay_shows_its_block_and_each_divergence_beside_its_parent(sim_run, tmp_path):
    """#29: the card of a replay shows its replay block; a diverged sample carries where it
    diverged and its parent's transcript from that message on."""
    from report_helpers import drifted_replay

    store, parent, replay = drifted_replay(sim_run, tmp_path / "traces")
    page = build_report(store, [parent, replay], allow_incomplete=True)
    cards = re.findall(r'<article class="card".*?</article>', page, re.S)
    assert "replay-block" not in cards[0]
    assert f"replay of <code>{parent}</code>" in cards[1]
    block = json.loads((store.run_dir(replay) / "manifest.json").read_text())["replay"]
    assert f"<b>{block['turns_served']:,}</b> turns served" in cards[1]
    assert f"<b>{block['diverged_samples']}</b> samples diverged" in cards[1]
    data, details = payload(page, "report-data"), payload(page, "report-details")
    ids = data["samples"]["id"]
    diverged = {ids[s]: e["v"] for s, e in enumerate(details["runs"][1]["samples"])
                if e and "v" in e}  # fmt: skip
    assert len(diverged) == block["diverged_samples"] > 0
    assert all("v" not in e for e in details["runs"][0]["samples"] if e)
    strings = details["strings"]
    for sample_id, view in diverged.items():
        assert (view["parent"], view["component"], view["marked"]) == (parent, "tool_output", True)
        assert view["path"] == "messages[2].content.result" and view["at"] == 2
        # the parent's side from the message that differs: its recorded tool output
        first = view["pt"][0]
        assert first[0] == "tool" and first[2][0] == "add_numbers"
        assert json.loads(strings[first[1]])["result"] == json.loads(view["recorded"])
        mine = details["runs"][1]["samples"][ids.index(sample_id)]["t"]
        assert json.loads(strings[mine[2][1]])["result"] == json.loads(view["replayed"])
    # diverged samples are the replay's finding, not errors of recording (helper-71: "N
    # errors", a banner of errors, the run left unranked)
    n = block["diverged_samples"]
    assert f"{n:,} diverged · " in cards[1] and " 0 errors · " in cards[1]
    assert "ended in error" not in cards[1] and f"{n:,} of " in cards[1]
    assert "recording errors" not in re.search(r"leaderboard.*?</table>", page, re.S)[0]


def test_an_unfinished_run_is_to_be_reported_with_reports_own_allow_incomplete(tmp_path):
    """The hint of a run not every sample was recorded of said to run `tcbreplay score RUN
    --allow-incomplete`, a command that is not the one the user ran (report has the flag)."""
    root = tmp_path / "traces"
    for run_id in ("a", "k"):
        recorded = cli("record", "--model", "sim", "--limit", "3", "--run-id", run_id,
                       "--quiet", "--store", root)  # fmt: skip
        assert recorded.exit_code == 0, recorded.output
    manifest_path = root / "k" / "manifest.json"  # its writer killed: interrupted
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()),
                                         "status": "recording"}))  # fmt: skip
    result = cli("report", "a", "k", "-o", tmp_path / "r.html", "--store", root)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        "Error: run 'k' is interrupted: not every sample was recorded"
    )
    assert result.stderr.splitlines()[1].endswith(
        f"; or report what is there with: tcbreplay report a k --store {root} --allow-incomplete"
    ), result.stderr
    assert not (tmp_path / "r.html").exists()
    again = cli("report", "a", "k", "-o", tmp_path / "r.html", "--store", root,
                "--allow-incomplete")  # fmt: skip
    assert again.exit_code == 0, again.output
