"""Assemble the self-contained page: static tables, compact data payloads, the template.

The run cards, the leaderboard and the tools table are written here as HTML; the samples
table and the sample detail are drawn by ``report.js`` from the two JSON payloads of
:mod:`tcbreplay._report.payloads`.
"""

from __future__ import annotations

import html
import re
from importlib import resources
from typing import Any

from tcbreplay._report.charts import run_color, tp_normalised
from tcbreplay._report.data import ReportData, RunData
from tcbreplay._report.payloads import details_payload, script_json_and_replaced, table_payload
from tcbreplay._report.replay import replay_card
from tcbreplay._report.shown import shown_note
from tcbreplay._report.validity_panel import validity_panel
from tcbreplay._store.schema import counted_as, utcnow
from tcbreplay._version import __version__

_MARKER = re.compile(r"\{\{(\w+)\}\}")


def render_page(report: ReportData, charts: dict[str, Any], plotly_js: str) -> str:
    """The whole HTML document, every script, style and datum inline."""
    package = resources.files("tcbreplay._report")
    data, data_replaced = script_json_and_replaced({**table_payload(report), "charts": charts})
    details, details_replaced = script_json_and_replaced(details_payload(report))
    meta = _meta(report)
    if data_replaced or details_replaced:
        meta += html.escape(" · numbers JSON has no form for (Infinity, NaN) are shown as text")
    parts = {
        "title": html.escape(_title(report)),
        "meta": meta,
        "css": package.joinpath("report.css").read_text(encoding="utf-8"),
        "cards": "\n".join(_card(k, run, report) for k, run in enumerate(report.runs)),
        "leaderboard": _leaderboard(report),
        "tool_table": _tool_table(report),
        "validity": validity_panel(report),
        "tool_options": "".join(_option(t, t) for t in report.tools),
        "category_options": "".join(_option(c, c) for c in _categories(report)),
        "tp_hint": _tp_hint(report),
        "shown": shown_note(report.shown),
        "regressed_option": (
            '<option value="regressed">regressed (vs first run)</option>'
            if len(report.runs) > 1
            else ""
        ),
        "plotly_js": plotly_js,
        "data": data,
        "details": details,
        "report_js": package.joinpath("report.js").read_text(encoding="utf-8"),
    }
    template = package.joinpath("template.html").read_text(encoding="utf-8")
    # One pass, so inserted text (plotly.js, data) is never scanned for markers.
    return _MARKER.sub(lambda m: parts[m.group(1)], template)


def _tp_hint(report: ReportData) -> str:
    if tp_normalised(report):
        sizes = ", ".join(f"{run.scores.height:,}" for run in report.runs)
        return (
            f"Share of each run's samples per TP value (bins of 0.05): the runs differ in "
            f"size ({html.escape(sizes)} samples); 1 is a name sequence equal to gold."
        )
    return "Samples per TP value (bins of 0.05); 1 is a name sequence equal to gold."


def _fmt(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _title(report: ReportData) -> str:
    titles = {(r.run.manifest.get("benchmark") or {}).get("title") for r in report.runs}
    named = sorted(t for t in titles if t is not None)
    return f"tcbreplay report: {' / '.join(named) or 'runs'}"


def _meta(report: ReportData) -> str:
    n_runs = len(report.runs)
    when = utcnow().strftime("%Y-%m-%d %H:%M UTC")
    return html.escape(
        f"{n_runs} run{'s' if n_runs > 1 else ''} · {_counted(report)} · "
        f"scoring {report.scoring} · generated {when} by tcbreplay {__version__}"
    )


def _counted(report: ReportData) -> str:
    """The runs' samples, and their trials when there are several (the table's rows)."""
    if report.rows_word == "samples":
        return f"{report.n_samples:,} samples"
    return f"{report.n_samples:,} trials of {report.n_tasks:,} samples"


def _option(value: str, label: str) -> str:
    return f'<option value="{html.escape(value)}">{html.escape(label)}</option>'


def _categories(report: ReportData) -> list[str]:
    return sorted({c for run in report.runs for c in run.categories})


def _card(k: int, run: RunData, report: ReportData) -> str:
    s = run.summary
    model = run.run.manifest.get("model") or {}
    failed = run.n_failed
    badges = '<span class="badge">simulated</span>' if model.get("simulated") else ""
    if k == 0 and len(report.runs) > 1:
        badges += '<span class="badge base">baseline</span>'
    source = "scored in memory" if run.scored_in_memory else "stored scores"
    totals = run.run.manifest.get("totals") or {}
    metrics = [
        ("TSA", s.get("tsa"), f"n = {s.get('n_tsa', 0):,}", "tsa"),
        ("TP", s.get("tp"), f"n = {s.get('n_tp', 0):,}", "tp"),
        (
            "AHR",
            s.get("ahr"),
            f"{s.get('args_invalid', 0):,} / {s.get('args_total', 0):,} args",
            "ahr",
        ),
        *_outcome_metrics(s),
    ]
    cells = []
    for label, value, n, key in metrics:
        ci = run.intervals.get(key)
        ci_text = (
            f'<div class="ci" title="95% bootstrap interval over the run\'s samples">'
            f"CI {ci[0]:.3f}–{ci[1]:.3f}</div>"
            if ci
            else ""
        )
        delta = (run.diff or {}).get(key)
        if delta and delta.get("delta") is not None:
            interval = (
                f" ({delta['ci_low']:+.3f}, {delta['ci_high']:+.3f})"
                if delta.get("ci_low") is not None
                else ""
            )
            ci_text += (
                f'<div class="delta" title="vs {html.escape(report.runs[0].run_id)}, paired '
                f'bootstrap 95% CI">Δ {delta["delta"]:+.3f}<br>{interval}</div>'
            )
        cells.append(
            f'<div class="metric" data-metric="{key}"><div class="label">{label}</div>'
            f'<div class="value">{_fmt(value)}</div>{ci_text}<div class="n">{n}</div></div>'
        )
    cells += [f'<div class="note">{html.escape(caveat)}</div>' for caveat in run.diff_caveats]
    if run.diff_error:
        cells.append(
            f'<div class="note">No comparison with {html.escape(report.runs[0].run_id)}: '
            f"{html.escape(run.diff_error)}</div>"
        )
    foot = (
        f"{s.get('n_samples', 0):,} {counted_as(s.get('trials'))} · {failed:,} failed · "
        f"{_errors(run):,} errors · "
        + (f"{_diverged(run):,} diverged · " if _diverged(run) else "")
        + f"{s.get('args_missing', 0):,} gold args left out · "
        + _tokens(totals.get("input_tokens"), totals.get("output_tokens"))
    )
    return (
        f'<article class="card" style="--run: {run_color(k)}" data-run="{html.escape(run.run_id)}">'
        f'<header><span class="swatch"></span><h3>{html.escape(run.run_id)}</h3>{badges}</header>'
        f"{_banner(run)}"
        f'<div class="sub">{html.escape(str(model.get("id") or "unknown model"))} · '
        f"{html.escape(run.run.status)} · {source}</div>"
        f"{replay_card(run)}"
        f'<div class="metrics">{"".join(cells)}</div>'
        f'<div class="foot">{html.escape(foot)}</div></article>'
    )


def _outcome_metrics(s: dict[str, Any]) -> list[tuple[str, Any, str, str]]:
    """The outcome metrics of a summary, as the card shows them: exact, write_exact where a
    tool has the role write, and first_divergence where a sample diverges."""
    if "exact" not in s:  # a summary from before them, or another scorer's
        return []
    out = [("EXACT", s.get("exact"), f"n = {s.get('n_exact', 0):,}", "exact")]
    if s.get("write_exact") is not None:
        n = f"n = {s.get('n_write_exact', 0):,}"
        out.append(("WRITE EXACT", s["write_exact"], n, "write_exact"))
    if s.get("first_divergence") is not None:
        n = f"mean position, n = {s.get('n_first_divergence', 0):,}"
        out.append(("FIRST DIVERGENCE", s["first_divergence"], n, "first_divergence"))
    return out


def _diverged(run: RunData) -> int:
    """A replay's samples that diverged from their recording (among its errors: they score
    with the calls made until then, the replay's finding, not a failure of recording)."""
    return int((run.run.manifest.get("totals") or {}).get("diverged") or 0)


def _errors(run: RunData) -> int:
    """The run's samples that ended in error, a replay's divergences aside."""
    return (run.summary.get("n_errors") or 0) - _diverged(run)


def _banner(run: RunData) -> str:
    """A run whose samples ended in error while recording (or a replay's that diverged)
    says so above its metrics."""
    s = run.summary
    missing = s.get("n_missing") or 0
    errors = _errors(run) - missing
    diverged = _diverged(run)
    each = counted_as(s.get("trials"))
    said = []
    if errors:
        said.append(f"{errors:,} of {s.get('n_samples', 0):,} {each} ended in error and score "
                    "with the calls made before the error")  # fmt: skip
    if missing:
        said.append(f"{missing:,} are missing (no trace) and score with no calls")
    if said:
        return (
            f'<div class="banner" role="alert">{"; ".join(said)}: these metrics do not measure '
            "the model alone, and the run is listed after the others</div>"
        )
    if diverged:
        return (
            f'<div class="banner" role="note">{diverged:,} of {s.get("n_samples", 0):,} {each} '
            "diverged from their recording and score with the calls made until then</div>"
        )
    return ""


def _tokens(given: Any, made: Any) -> str:
    """A run's token counts, or that it has none (an import whose traces carry none)."""
    if given is None and made is None:
        return "no token counts"
    return f"tokens {given or 0:,} in / {made or 0:,} out"


def _leaderboard(report: ReportData) -> str:
    def key(run: RunData) -> tuple[bool, float, float, float]:
        s = run.summary
        ahr = s.get("ahr")
        # runs with recording errors are not ranked among the others: they come last
        return (
            bool(_errors(run)),
            -(s.get("tp") or 0),
            -(s.get("tsa") or 0),
            ahr if ahr is not None else 2.0,
        )

    order = sorted(range(len(report.runs)), key=lambda k: key(report.runs[k]))
    writes = any(run.summary.get("write_exact") is not None for run in report.runs)
    rows = []
    for rank, k in enumerate(order, start=1):
        run = report.runs[k]
        s = run.summary
        model = (run.run.manifest.get("model") or {}).get("id") or ""
        place = "—" if _errors(run) else str(rank)
        tag = ' <span class="tag errors">recording errors</span>' if _errors(run) else ""
        rows.append(
            f'<tr style="--run: {run_color(k)}"><td>{place}</td>'
            f'<td><span class="swatch"></span>{html.escape(run.run_id)}{tag}</td>'
            f"<td>{html.escape(str(model))}</td>"
            f'<td class="num">{_fmt(s.get("tp"))}</td><td class="num">{_fmt(s.get("tsa"))}</td>'
            f'<td class="num">{_fmt(s.get("ahr"))}</td>'
            f'<td class="num">{_fmt(s.get("exact"))}</td>'
            + (f'<td class="num">{_fmt(s.get("write_exact"))}</td>' if writes else "")
            + f'<td class="num">{s.get("n_samples", 0):,}</td>'
            f'<td class="num">{run.n_failed:,}</td>'
            f'<td class="num">{_errors(run):,}</td></tr>'
        )
    head = (
        "<tr><th>#</th><th>run</th><th>model</th><th class=num>TP ↑</th><th class=num>TSA ↑</th>"
        "<th class=num>AHR ↓</th><th class=num>exact ↑</th>"
        + ("<th class=num>write exact ↑</th>" if writes else "")
        + "<th class=num>samples</th><th class=num>failed</th><th class=num>errors</th></tr>"
    )
    return _table("leaderboard", head, rows)


def _tool_table(report: ReportData) -> str:
    many = len(report.runs) > 1
    descriptions = {
        tool["name"]: tool.get("description") or ""
        for run in report.runs
        for tool in run.tool_schemas
    }
    colors = {run.run_id: run_color(k) for k, run in enumerate(report.runs)}
    rows = []
    for r in sorted(report.tool_rows, key=lambda r: report.tools.index(r.tool)):
        known = r.tool in descriptions
        name = html.escape(r.tool) + (
            "" if known else ' <span class="tag unknown">no such tool</span>'
        )
        run_cell = (
            f'<td style="--run: {colors[r.run_id]}"><span class="swatch"></span>'
            f"{html.escape(r.run_id)}</td>"
            if many
            else ""
        )
        rows.append(
            f'<tr><td title="{html.escape(descriptions.get(r.tool, ""))}">{name}</td>{run_cell}'
            f'<td class="num">{r.gold_calls}</td><td class="num">{r.agent_calls}</td>'
            f'<td class="num">{r.paired_calls}</td><td class="num">{r.args}</td>'
            f'<td class="num">{r.invalid_args}</td><td class="num">{r.invented_args}</td>'
            f'<td class="num">{r.missing_args}</td></tr>'
        )
    head = (
        "<tr><th>tool</th>"
        + ("<th>run</th>" if many else "")
        + "".join(
            f'<th class="num">{label}</th>'
            for label in (
                "gold calls",
                "agent calls",
                "paired calls",
                "args",
                "invalid args",
                "invented args",
                "gold args left out",
            )
        )
        + "</tr>"
    )
    return _table("tool-table", head, rows)


def _table(element_id: str, head: str, rows: list[str]) -> str:
    return (
        f'<table class="static" id="{element_id}"><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
