"""The report as a person sees it: opened in headless Chromium, charts drawn, table used.

Needs Debian's ``chromium`` at /usr/bin/chromium and the ``playwright`` package (the
``test`` extra); skipped otherwise. ``.ci/run`` installs Chromium, so CI runs these.
Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from urllib.parse import urlencode

import polars as pl
import pytest
from helpers import ROOT, TEST_DATA
from report_helpers import import_hand_run, payload

from tcbreplay._compare.diff import diff_runs
from tcbreplay._query.sql import run_sql
from tcbreplay._report import collect, write_report
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"
CHARTS = ("chart-metrics", "chart-tools", "chart-tp")


def _skip_reason() -> str | None:
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def browser(sim_run, sim_runs_pair):
    """Chromium for this module. The sim runs are recorded first: recording runs an asyncio
    loop, which cannot start while Playwright's own loop runs in this thread."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Opened:
    """A report loaded in a fresh page; what it logged and every request it tried."""

    def __init__(self, browser, path: Path, fragment: str = "") -> None:
        self.path = path
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._request)
        self.page.goto(path.as_uri() + fragment)
        self.page.wait_for_selector("body[data-ready='1']", timeout=20_000)

    def _request(self, request) -> None:
        if not request.url.startswith(("file:", "data:")):
            self.requests.append(request.url)

    def reset(self) -> None:
        """Close the detail, set every filter back to its default, sort by sample index."""
        self.page.keyboard.press("Escape")
        for select, value in (("#f-show", "all"), ("#f-tool", ""), ("#f-cat", "")):
            self.page.select_option(select, value)
        self.page.fill("#f-text", "")
        index = self.page.locator("th[data-sort='idx']")
        while index.get_attribute("class") != "num sorted":  # ascending
            index.click()

    def count(self) -> int:
        return int(self.page.get_attribute("#row-count", "data-count"))

    def visible_rows(self) -> int:
        return self.page.locator("#samples-table tbody tr").count()

    def open_sample(self, sample_id: str) -> str:
        """Search for the sample, click its row, return the detail's text."""
        self.page.fill("#f-text", sample_id)
        assert self.count() >= 1
        self.page.locator("#samples-table tbody tr", has_text=sample_id).first.click()
        self.page.wait_for_selector("#detail:not([hidden])")
        assert self.page.inner_text("#d-title") == sample_id
        return self.page.inner_text("#d-body")


# The samples table: five columns, then calls, TSA, TP and AHR of each run.
RUN_COLUMNS = ("calls", "tsa", "tp", "ahr")


def column(run: int, name: str) -> int:
    """The position (from 1, as ``nth-child`` counts) of a run's column in the samples table."""
    return 5 + len(RUN_COLUMNS) * run + RUN_COLUMNS.index(name) + 1


@pytest.fixture(scope="module")
def one_run_page(browser, sim_run, tmp_path_factory):
    store, run_id = sim_run
    path = write_report(store, [run_id], tmp_path_factory.mktemp("page") / "one.html")
    opened = Opened(browser, path)
    yield opened
    opened.page.close()


@pytest.fixture(scope="module")
def two_run_page(browser, sim_runs_pair, tmp_path_factory):
    store, run_ids = sim_runs_pair
    path = write_report(store, run_ids, tmp_path_factory.mktemp("page") / "two.html")
    opened = Opened(browser, path)
    yield opened
    opened.page.close()


@pytest.mark.parametrize("which", ["one_run_page", "two_run_page"])
def test_page_loads_without_errors_or_network_and_draws_every_chart(which, request):
    opened = request.getfixturevalue(which)
    assert opened.errors == []
    assert opened.requests == []
    for chart in CHARTS:
        drawn = opened.page.evaluate(
            """id => {
                const svg = document.querySelector(`#${id} svg.main-svg`);
                const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
                const marks = [...document.querySelectorAll(`#${id} .trace .point path`)]
                    .filter(p => (p.getAttribute('d') || '').length > 2).length;
                return {width: box.width, height: box.height, marks};
            }""",
            chart,
        )
        assert drawn["width"] > 200 and drawn["height"] > 200, (chart, drawn)
        assert drawn["marks"] > 0, (chart, drawn)
    ARTIFACTS.mkdir(exist_ok=True)
    name = "report.png" if which == "two_run_page" else "report-one-run.png"
    opened.page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    assert (ARTIFACTS / name).stat().st_size > 10_000


def test_failed_filter_shows_the_failed_samples(one_run_page, sim_run):
    store, run_id = sim_run
    scores = score_run(store, run_id, write=False).scores
    failed = scores.filter(
        (pl.col("status") != "ok")
        | (pl.col("tp") < 1)
        | (pl.col("args_invalid") > 0)
        | (pl.col("args_missing") > 0)
    ).height
    opened = one_run_page
    opened.reset()
    assert opened.count() == opened.visible_rows() == scores.height
    opened.page.select_option("#f-show", "failed")
    assert 0 < failed < scores.height
    assert opened.count() == opened.visible_rows() == failed
    assert opened.page.locator("#samples-table tbody tr.failed").count() == failed


def test_tool_and_text_filters(two_run_page, sim_runs_pair):
    store, _ = sim_runs_pair
    rows = run_sql(
        store,
        "select sample_id from gold_calls where name = $tool "
        "union select sample_id from tool_calls where name = $tool",
        {"tool": "list_items"},
    ).rows
    opened = two_run_page
    opened.reset()
    opened.page.select_option("#f-tool", "list_items")
    assert 0 < len(rows) < 94
    assert opened.count() == opened.visible_rows() == len(rows)
    opened.page.fill("#f-text", "HEADPHONES")
    shown = opened.page.locator("#samples-table tbody tr td:nth-child(2)").all_inner_texts()
    expected = {sid for (sid,) in rows if "headphones" in sid}
    assert expected and expected <= set(shown)


def test_regressed_filter_and_sorting(two_run_page, sim_runs_pair):
    store, (first, second) = sim_runs_pair
    regressed = diff_runs(store, first, second).regressed
    opened = two_run_page
    opened.reset()
    opened.page.select_option("#f-show", "regressed")
    assert 0 < len(regressed) < 94
    assert opened.count() == opened.visible_rows() == len(regressed)
    shown = opened.page.locator("#samples-table tbody tr td:nth-child(2)").all_inner_texts()
    assert sorted(shown) == sorted(regressed)
    opened.page.select_option("#f-show", "all")
    opened.page.click("th[data-sort='tp1']")  # the second run's TP, ascending
    cells = opened.page.locator(f"#samples-table tbody tr td:nth-child({column(1, 'tp')})")
    cells = cells.all_inner_texts()
    values = [float(c.strip(" ▼")) for c in cells if c.strip(" ▼") not in ("—", "")]
    assert values == sorted(values) and values[0] < values[-1]


def test_every_row_of_a_regressed_sample_is_marked_as_diff_decides(browser, tmp_path):
    """The markers compared a row with the first run's same row (trial 0 with trial 0), the
    regressed filter diff's verdict over a sample's trials: τ-bench's tasks 0 and 2, one trial
    in A and four in B, were listed as regressed without a marker. Each row of a sample that
    got worse is marked in each metric diff finds worse, and no other row."""
    from helpers import TAU_BENCH, cli

    results = json.loads((TAU_BENCH / "gpt-4o-airline-sample.json").read_text())
    (tmp_path / "a.json").write_text(json.dumps([r for r in results if r["trial"] == 0]))
    (tmp_path / "b.json").write_text(json.dumps(results))
    root = tmp_path / "traces"
    for run_id in ("a", "b"):
        made = cli("import", "--format", "tau-bench", "--traces", tmp_path / f"{run_id}.json",
                   "--tools", TAU_BENCH / "airline-tools.json", "--run-id", run_id,
                   "--store", root)  # fmt: skip
        assert made.exit_code == 0, made.output
    deltas = diff_runs(Store(root), "a", "b").samples
    worse = {
        row["sample_id"]: {m for m in ("tsa", "tp") if (row[f"d_{m}"] or 0) < 0}
        | ({"ahr"} if (row["ahr_b"] or 0) > (row["ahr_a"] or 0) else set())
        for row in deltas.iter_rows(named=True)
    }
    assert {sid for sid, metrics in worse.items() if metrics} == {"0", "2"}
    opened = Opened(browser, write_report(Store(root), ["a", "b"], tmp_path / "r.html"))
    try:
        page = opened.page
        marked = page.evaluate(
            """() => [...document.querySelectorAll('#samples-table tbody tr')].map(tr => [
                tr.children[1].innerText,
                [...tr.children].map((td, k) => td.querySelector('span.down') ? k + 1 : 0)
                    .filter(Boolean)])"""
        )
        assert len(marked) == 20
        names = {column(r, m): m for r in (0, 1) for m in ("tsa", "tp", "ahr")}
        for row_id, columns in marked:
            assert all(c > column(1, "calls") for c in columns), row_id  # later runs' only
            assert {names[c] for c in columns} == worse[row_id.split(" ")[0]], row_id
        title = page.get_attribute("#samples-table tbody span.down", "title")
        assert "over its trials" in title
        page.select_option("#f-show", "regressed")
        ids = page.locator("#samples-table tbody tr td:nth-child(2)").all_inner_texts()
        assert sorted(ids) == sorted(r for r, columns in marked if columns)
        assert len(ids) == 8 and opened.errors == []
    finally:
        page.close()


def test_clicking_a_sample_shows_its_transcript(two_run_page, sim_runs_pair):
    store, run_ids = sim_runs_pair
    run = store.open_run(run_ids[0])
    messages = pl.read_parquet(run.messages_path)
    sid = messages.filter(pl.col("type") == "tool")["sample_id"][0]
    own = messages.filter(pl.col("sample_id") == sid)
    text_in = json.loads(own.filter(pl.col("type") == "human")["message"][0])["data"]["content"]
    results = [
        json.loads(m)["data"]["content"] for m in own.filter(pl.col("type") == "tool")["message"]
    ]
    opened = two_run_page
    opened.reset()
    body = opened.open_sample(sid)
    assert text_in in body
    assert all(r in body for r in results)
    assert "Trajectories" in body and "Transcript" in body
    assert opened.page.locator("#d-body .traj .mid").count() >= 1
    ARTIFACTS.mkdir(exist_ok=True)
    opened.page.screenshot(path=str(ARTIFACTS / "report-sample.png"))
    opened.page.keyboard.press("Escape")
    assert opened.page.is_hidden("#detail")
    assert opened.errors == []


def test_detail_highlights_wrong_and_invented_arguments(browser, tmp_path):
    """Hand-written runs: known verdicts, markup in the input shown as text, run tabs."""
    store = Store(tmp_path / "traces")
    for run_id, traces in (("hand-a", "traces_a.jsonl"), ("hand-b", "traces_b.jsonl")):
        import_hand_run(store, run_id, traces)
    opened = Opened(browser, write_report(store, ["hand-a", "hand-b"], tmp_path / "r.html"))
    try:
        body = opened.open_sample("wrong-and-invented")
        assert "What is 3 plus 2? </script><!-- not markup -->" in body
        args = opened.page.locator("#d-body .traj .arg")
        verdicts = {
            args.nth(k).inner_text(): args.nth(k).get_attribute("class")
            for k in range(args.count())
        }
        assert verdicts["b=4wrong"] == "arg wrong"
        assert verdicts['unit="usd"invented'] == "arg unknown"
        assert verdicts["a=3"] == "arg"
        assert '{"result": 7}' in body
        opened.page.click("#d-body .tabs button[data-run='1']")
        opened.page.keyboard.press("Escape")
        body = opened.open_sample("perfect")
        opened.page.click("#d-body .tabs button[data-run='1']")
        body = opened.page.inner_text("#d-body")
        assert "missed" in body and "unparseable tool calls" in body
        opened.page.keyboard.press("Escape")
        opened.page.fill("#f-text", "")
        opened.page.select_option("#f-show", "regressed")
        assert opened.count() == 1
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()


def test_detail_marks_accepted_values_optional_keys_and_groups(browser, tmp_path):
    """tests/data/rules: an accepted value tagged (not counted as invalid) beside gold's
    other acceptable values, an optional key left out, order-free calls paired crosswise."""
    from helpers import cli

    data = TEST_DATA
    root = tmp_path / "traces"
    imported = cli("import", "--dataset", data / "rules" / "dataset.json", "--tools",
                   data / "tools_shop.json", "--traces", data / "rules" / "traces.jsonl",
                   "--run-id", "rules", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    opened = Opened(browser, write_report(Store(root), ["rules"], tmp_path / "r.html"))
    try:
        body = opened.open_sample("accepted-unit")
        args = opened.page.locator("#d-body .traj .arg")
        shown = {args.nth(k).inner_text(): args.nth(k).get_attribute("class")
                 for k in range(args.count())}  # fmt: skip
        assert shown['unit="F"accepted'] == "arg accepted"
        assert shown['unit="fahrenheit" | "F"'] == "arg"  # gold, with its other value
        assert shown["days?="] == "arg"  # optional, and gold does not give it
        assert "paired · 1 invalid" in body  # the city; the accepted unit is valid
        assert "the sample's own" in body
        opened.page.keyboard.press("Escape")
        body = opened.open_sample("optional-left-out")
        assert "optional, left out" in body and "paired · " not in body
        opened.page.keyboard.press("Escape")
        opened.page.fill("#f-text", "")
        body = opened.open_sample("parallel-any-order")
        assert body.count('group "any"') == 2 and "missed" not in body and "extra" not in body
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()


def _shown(value) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.2f}"


def test_samples_table_has_a_tsa_column_per_run(two_run_page, sim_runs_pair):
    store, run_ids = sim_runs_pair
    opened = two_run_page
    opened.reset()
    heads = opened.page.locator("#samples-table thead th[data-sort^='tsa']")
    assert heads.all_inner_texts() == ["TSA", "TSA"]
    for r, run_id in enumerate(run_ids):
        scores = score_run(store, run_id, write=False).scores.sort("sample_index")
        cells = opened.page.locator(f"#samples-table tbody tr td:nth-child({column(r, 'tsa')})")
        shown = [c.strip(" ▼") for c in cells.all_inner_texts()]
        assert shown == [_shown(v) for v in scores["tsa"]]
        assert "—" in shown and "1.00" in shown and len(set(shown)) > 2
    opened.page.click("th[data-sort='tsa0']")
    cells = opened.page.locator(f"#samples-table tbody tr td:nth-child({column(0, 'tsa')})")
    shown = cells.all_inner_texts()
    defined = [float(c) for c in shown if c != "—"]
    assert defined == sorted(defined) and shown[len(defined) :] == ["—"] * (94 - len(defined))


def test_rows_of_the_samples_table_are_one_line_high(two_run_page):
    """Long sample ids, categories and inputs are cut with an ellipsis, at any width."""
    opened = two_run_page
    opened.reset()
    try:
        for width in (1400, 900):
            opened.page.set_viewport_size({"width": width, "height": 900})
            heights = opened.page.evaluate(
                """() => [...document.querySelectorAll('#samples-table tbody tr')]
                    .map(tr => tr.getBoundingClientRect().height)"""
            )
            assert len(heights) == 94 and len(set(heights)) == 1, (width, sorted(set(heights)))
        cell = opened.page.locator("#samples-table tbody tr td.id").nth(1)
        assert cell.get_attribute("title") == cell.inner_text()
    finally:
        opened.page.set_viewport_size({"width": 1400, "height": 900})


def _fragment(run_id: str, sample_id: str) -> str:
    return "#" + urlencode({"run": run_id, "sample": sample_id})


def test_a_sample_link_opens_that_sample(browser, two_run_page, sim_runs_pair):
    _, run_ids = sim_runs_pair
    path = two_run_page.path
    link = _fragment(run_ids[1], "price-pen")
    opened = Opened(browser, path, link)
    try:
        page = opened.page
        assert page.is_visible("#detail") and page.inner_text("#d-title") == "price-pen"
        assert page.get_attribute("#d-body .tabs button.active", "data-run") == "1"
        assert page.get_attribute("#d-link", "href") == link
        page.click("#d-body .tabs button[data-run='0']")  # the link follows the run shown
        assert page.evaluate("location.hash") == _fragment(run_ids[0], "price-pen")
        page.keyboard.press("Escape")
        assert page.is_hidden("#detail") and page.evaluate("location.hash") == ""
        page.locator("#samples-table tbody tr", has_text="hi-there").first.click()
        assert page.evaluate("location.hash") == _fragment(run_ids[0], "hi-there")
        page.go_back()  # to the page without a sample open
        page.wait_for_selector("#detail", state="hidden")
        page.go_forward()
        page.wait_for_selector("#detail:not([hidden])")
        assert page.inner_text("#d-title") == "hi-there"
        page.keyboard.press("Escape")
        page.evaluate("h => { location.hash = h; }", _fragment(run_ids[0], "no-such-sample"))
        page.wait_for_function("document.getElementById('f-text').value !== ''")
        assert page.is_hidden("#detail")  # an id no sample has: searched for, nothing matches
        assert page.input_value("#f-text") == "no-such-sample" and opened.count() == 0
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()


def test_an_empty_trajectory_shows_no_calls(one_run_page, sim_run):
    store, run_id = sim_run
    scores = score_run(store, run_id, write=False).scores
    none = scores.filter((pl.col("n_gold") == 0) & (pl.col("n_agent") == 0))["sample_id"]
    gold_only = scores.filter((pl.col("n_gold") > 0) & (pl.col("n_agent") == 0))["sample_id"]
    assert len(none) and len(gold_only)
    opened = one_run_page
    opened.reset()
    opened.open_sample(none[0])
    cells = opened.page.locator("#d-body .traj > div").all_inner_texts()
    heads = ["gold · no calls", "alignment", "agent · no calls"]
    assert cells == [*heads, "no calls", "same: none", "no calls"]
    opened.reset()
    opened.open_sample(gold_only[0])
    heads = opened.page.locator("#d-body .traj > .h").all_inner_texts()
    n = scores.filter(pl.col("sample_id") == gold_only[0])["n_gold"][0]
    assert heads == [f"gold · {n} call{'s' if n > 1 else ''}", "alignment", "agent · no calls"]
    assert opened.errors == []


def test_tp_histogram_shows_shares_when_runs_differ_in_size(browser, sim_run, tmp_path):
    sim_store, sim_id = sim_run
    store = Store(tmp_path / "traces")
    shutil.copytree(sim_store.run_dir(sim_id), store.run_dir(sim_id))
    import_hand_run(store, "hand-a", "traces_a.jsonl")  # 6 samples against 94
    opened = Opened(browser, write_report(store, [sim_id, "hand-a"], tmp_path / "r.html"))
    try:
        page = opened.page
        sums = page.evaluate(
            "() => document.getElementById('chart-tp').data.map(t => t.y.reduce((a, b) => a + b))"
        )
        assert sums == [pytest.approx(100, abs=0.1)] * 2
        title = page.text_content("#chart-tp .ytitle")
        assert title == "share of the run's samples (%)"
        assert "differ in size (94, 6 samples)" in page.inner_text("#tp-dist")
        bars = page.locator("#chart-tp .trace .point path").count()
        assert bars > 2
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()


@pytest.fixture(scope="module")
def tau_page(browser, tmp_path_factory):
    from helpers import import_tau_bench

    root = import_tau_bench(tmp_path_factory.mktemp("tau") / "traces", roles=True)
    path = write_report(Store(root), ["tau"], tmp_path_factory.mktemp("page") / "tau.html")
    opened = Opened(browser, path)
    yield opened, root
    opened.page.close()


def test_the_validity_panel_shows_each_metric_and_draws_its_roc_curves(tau_page):
    from helpers import cli

    opened, root = tau_page
    assert opened.errors == [] and opened.requests == []
    expected = json.loads(
        cli("validity", "tau", "--store", root, "--format", "json", "--bootstrap", "1000").stdout
    )
    rows = opened.page.locator("#validity table.validity tbody tr").all_inner_texts()
    shown = {r.split("\t")[0]: r.split("\t") for r in rows}
    metrics = expected["metrics"]
    assert set(shown) == set(metrics)
    assert set(metrics) == {
        "tsa", "tp", "ahr", "exact", "write_exact", "first_divergence", "covered"
    }  # fmt: skip
    assert metrics["write_exact"]["n"] == 20  # the stored scoring's write roles, not guessed
    for name, m in metrics.items():
        assert shown[name][5] == f"{m['auc']:.3f}"
        assert shown[name][6] == f"[{m['auc_ci'][0]:.3f}, {m['auc_ci'][1]:.3f}]"
    drawn = opened.page.evaluate(
        """() => {
            const svg = document.querySelector('#chart-roc-0 svg.main-svg');
            const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
            const paths = document.querySelectorAll('#chart-roc-0 .scatterlayer path.js-line');
            const lines = [...paths].filter(p => (p.getAttribute('d') || '').length > 10).length;
            const texts = document.querySelectorAll('#chart-roc-0 .legendtext');
            const legend = [...texts].map(t => t.textContent);
            return {width: box.width, height: box.height, lines, legend};
        }"""
    )
    assert drawn["width"] > 200 and drawn["height"] > 200, drawn
    assert drawn["lines"] == 1 + 7, drawn  # the diagonal and a curve per metric
    assert drawn["legend"] == [f"{n} (AUC {m['auc']:.3f})" for n, m in metrics.items()]
    opened.page.locator("#validity").screenshot(path=str(ARTIFACTS / "report-validity.png"))


def test_a_run_without_an_outcome_has_no_validity_panel(one_run_page):
    assert one_run_page.page.locator("#validity").count() == 0


def test_a_replay_shows_its_parent_beside_it_from_the_first_divergence(browser, sim_run,
                                                                      tmp_path):  # fmt: skip
    """#29: the replay block on the card; a diverged sample's detail has the parent's and the
    replay's transcripts side by side from the differing message, marked on both sides."""
    from report_helpers import drifted_replay

    store, parent, replay = drifted_replay(sim_run, tmp_path / "traces")
    path = write_report(store, [parent, replay], tmp_path / "replay.html", allow_incomplete=True)
    import pyarrow.parquet as pq

    first = pq.read_table(store.run_dir(replay) / "divergences.parquet").to_pylist()[0]
    sample_id = first["sample_id"]
    recorded, replayed = (str(json.loads(first[k])) for k in ("recorded", "replayed"))
    opened = Opened(browser, path, _fragment(replay, sample_id))
    try:
        assert opened.errors == []
        card = opened.page.inner_text(f"article.card[data-run='{replay}'] .replay-block")
        assert f"replay of {parent}" in card and "turns served" in card
        opened.page.wait_for_selector("#detail:not([hidden]) .side")
        heads = opened.page.locator(".side > .h").all_inner_texts()
        assert heads == [f"parent · {parent}", f"replay · {replay}"]
        marked = opened.page.locator(".side .msg.diverged")
        assert marked.count() == 2  # the differing tool output, on both sides
        assert recorded in marked.nth(0).inner_text() and replayed in marked.nth(1).inner_text()
        assert opened.page.locator(".side .msg.diverged mark.diff").all_inner_texts() == [
            recorded,
            replayed,
        ]
        # the parent goes on where the replay stopped
        assert opened.page.locator(".side .msg.none").count() >= 1
        ARTIFACTS.mkdir(exist_ok=True)
        opened.page.screenshot(path=str(ARTIFACTS / "report-replay.png"))
    finally:
        opened.page.close()


def test_a_page_of_some_samples_shows_them_and_says_so(browser, sim_run, tmp_path):
    """Past its number of samples the page's table holds the shown ones, each opens with its
    transcript, and a link to a sample not shown opens nothing, without an error."""
    store, run_id = sim_run
    path = write_report(store, [run_id], tmp_path / "some.html", samples=10)
    shown = payload(path.read_text(encoding="utf-8"), "report-data")["samples"]["id"]
    opened = Opened(browser, path)
    try:
        assert opened.count() == 10 == len(shown)
        assert opened.page.inner_text("#shown").startswith("Showing 10 of ")
        assert "transcript" in opened.open_sample(shown[0]).lower()
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()
    hidden = next(s for s in collect(store, [run_id], samples=None).sample_ids if s not in shown)
    linked = Opened(browser, path, f"#run={run_id}&sample={hidden}")
    try:
        assert linked.page.locator("#detail").is_hidden() and linked.errors == []
    finally:
        linked.page.close()


def test_trace_text_is_shown_as_text_in_charts_and_arguments_as_given(browser, tmp_path):
    """Tool names from traces were drawn by plotly.js as markup (a link to another site, a
    60px span) and names like numbers placed on a number line; an argument named
    ``constructor`` broke the detail with a JS error; an integer past 2^53 was shown
    rounded (as the gold value it was marked wrong against)."""
    from helpers import cli

    big = 9007199254740993
    tools = [{"name": "add", "description": "add", "parameters": {"type": "object", "properties":
              {"a": {"type": "number"}, "b": {"type": "number"}}}}]  # fmt: skip
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    gold = [{"name": "add", "args": {"a": big, "b": 1}}]
    (tmp_path / "ds.json").write_text(json.dumps([{"id": "s", "input": "q", "target": gold}]))
    names = ['<a href="https://evil.example/x">add</a>', '<span style="font-size:60px">BIG</span>',
             "1e3", "7", "a&amp;b"]  # fmt: skip
    calls = [("add", f'{{"a": {big - 1}, "b": 1, "constructor": 3}}')] + [(n, "{}") for n in names]
    line = {"sample_id": "s", "messages": [{"role": "user", "content": "q"}, {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": n, "arguments": a}}
            for k, (n, a) in enumerate(calls)]}]}  # fmt: skip
    (tmp_path / "t.jsonl").write_text(json.dumps(line) + "\n")
    root = tmp_path / "traces"
    made = cli("import", "--format", "openai", "--dataset", tmp_path / "ds.json", "--tools",
               tmp_path / "tools.json", "--traces", tmp_path / "t.jsonl", "--run-id", "odd",
               "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    opened = Opened(browser, write_report(Store(root), ["odd"], tmp_path / "r.html"))
    try:
        axis = opened.page.evaluate(
            """() => {
                const chart = document.getElementById('chart-tools');
                const ticks = [...chart.querySelectorAll('.xtick text')];
                return {type: chart._fullLayout.xaxis.type, ticks: ticks.map(t => t.textContent),
                        links: chart.querySelectorAll('a').length,
                        styled: chart.querySelectorAll('.xtick tspan[style]').length};
            }"""
        )
        assert axis["type"] == "category"
        assert sorted(axis["ticks"]) == sorted(["add", *names])
        assert axis["links"] == 0 and axis["styled"] == 0
        body = opened.open_sample("s")
        args = opened.page.locator("#d-body .traj .arg")
        shown = {args.nth(k).inner_text(): args.nth(k).get_attribute("class")
                 for k in range(args.count())}  # fmt: skip
        assert shown[f"a={big}"] == "arg"  # gold's, its digits
        assert shown[f"a={big - 1}wrong"] == "arg wrong"
        assert shown["constructor=3invented"] == "arg unknown"
        assert names[0] in body
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()


def test_sample_ids_with_bidi_controls_are_shown_escaped_not_reversed(browser, tmp_path):
    """A sample id starting with U+202E (right-to-left override) was drawn reversed in the
    table and the detail's title; it is shown with its controls escaped (``\\u202e``), as the
    terminal's tables show them, and its link still opens it."""
    from helpers import cli

    ids = ["\u202eevil-id", "ok-\u2067abc\u2069-x", "tab\there"]
    shown = ["\\u202eevil-id", "ok-\\u2067abc\\u2069-x", "tab\\x09here"]
    parameters = {"type": "object", "properties": {"a": {"type": "number"}}}
    tools = [{"name": "add", "description": "add", "parameters": parameters}]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    gold = [{"name": "add", "args": {"a": 1}}]
    dataset = [{"id": sid, "input": "q", "target": gold} for sid in ids]
    (tmp_path / "ds.json").write_text(json.dumps(dataset))
    call = {"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]}]  # fmt: skip
    lines = [{"sample_id": sid, "messages": messages} for sid in ids]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    root = tmp_path / "traces"
    made = cli("import", "--format", "openai", "--dataset", tmp_path / "ds.json", "--tools",
               tmp_path / "tools.json", "--traces", tmp_path / "t.jsonl", "--run-id", "bidi",
               "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    path = write_report(Store(root), ["bidi"], tmp_path / "r.html")
    opened = Opened(browser, path, _fragment("bidi", ids[0]))
    try:
        page = opened.page
        assert page.inner_text("#d-title") == shown[0]
        cells = page.locator("#samples-table tbody td.id")
        assert cells.all_inner_texts() == shown
        assert [cells.nth(k).get_attribute("title") for k in range(3)] == shown
        # drawn left to right: each letter of the ids further right than the one before
        lefts = page.evaluate(
            """() => [...document.querySelectorAll('#samples-table tbody td.id code')].map(c => {
                const text = c.firstChild, at = [];
                for (let i = 0; i < text.length; i++) {
                    if (!/[a-z]/.test(text.data[i])) continue;
                    const range = document.createRange();
                    range.setStart(text, i);
                    range.setEnd(text, i + 1);
                    at.push(range.getBoundingClientRect().left);
                }
                return at;
            })"""
        )
        assert all(at == sorted(at) and len(set(at)) == len(at) for at in lefts), lefts
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()


def test_categories_and_tool_names_with_bidi_controls_are_shown_escaped(browser, tmp_path):
    """A category starting with U+202E reversed the rest of the sample's facts line, and a
    tool's name its entries in the transcript; they are shown escaped, as sample ids are."""
    from helpers import cli

    name, category = "\u202eadd", "\u202ecat"
    parameters = {"type": "object", "properties": {"a": {"type": "number"}}}
    tools = [{"name": name, "description": "adds", "parameters": parameters}]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    gold = [{"name": name, "args": {"a": 1}}]
    dataset = [{"id": "s", "input": "q", "target": gold, "category": category}]
    (tmp_path / "ds.json").write_text(json.dumps(dataset))
    call = {"id": "c", "type": "function", "function": {"name": name, "arguments": '{"a": 1}'}}
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": "2"}]  # fmt: skip
    (tmp_path / "t.jsonl").write_text(json.dumps({"sample_id": "s", "messages": messages}))
    root = tmp_path / "traces"
    made = cli("import", "--format", "openai", "--dataset", tmp_path / "ds.json", "--tools",
               tmp_path / "tools.json", "--traces", tmp_path / "t.jsonl", "--run-id", "bidi",
               "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    path = write_report(Store(root), ["bidi"], tmp_path / "r.html")
    opened = Opened(browser, path, _fragment("bidi", "s"))
    try:
        page = opened.page
        cell = page.locator("#samples-table tbody td.cat")
        assert cell.inner_text() == "\\u202ecat" == cell.get_attribute("title")
        assert "category \\u202ecat" in page.inner_text("#d-body .facts")
        page.evaluate(
            "() => document.querySelectorAll('#d-body details').forEach(d => d.open = true)"
        )
        body = page.inner_text("#d-body")
        assert "→ \\u202eadd(a=1)" in body and "\\u202eadd(a)" in body  # the call, the tool
        assert "\u202e" not in body
        assert opened.errors == [] and opened.requests == []
    finally:
        opened.page.close()
