"""The report's validity panel: for each run whose samples carry an outcome, how well each
metric tracks it (the numbers of ``tcbreplay validity``, collected by
:mod:`tcbreplay._report.data`); the ROC curves are drawn by :mod:`tcbreplay._report.charts`."""

from __future__ import annotations

import html

from tcbreplay._report.data import ReportData


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ci(pair: list[float | None]) -> str:
    return f"[{_cell(pair[0])}, {_cell(pair[1])}]"


def validity_panel(report: ReportData) -> str:
    """The panel's HTML, empty when no run has an outcome."""
    blocks = []
    for k, run in enumerate(report.runs):
        v = run.validity
        if v is None:
            continue
        rows = "".join(
            f"<tr><td>{html.escape(name)}</td><td>{m['orientation']}</td><td>{m['n']:,}</td>"
            f"<td>{_cell(m['mean_if_true'])}</td><td>{_cell(m['mean_if_false'])}</td>"
            f'<td class="auc">{_cell(m["auc"])}</td><td>{_ci(m["auc_ci"])}</td>'
            f"<td>{_cell(m['r'])}</td><td>{_ci(m['r_ci'])}</td></tr>"
            for name, m in v.metrics.items()
        )
        notes = "".join(
            f'<p class="hint">{html.escape(name)}: {html.escape(m["note"])}</p>'
            for name, m in v.metrics.items()
            if m.get("note")
        )
        caption = (
            f"{v.n:,} {'trials' if v.trials > 1 else 'samples'} with an outcome "
            f"({v.n_true:,} true, {v.n_false:,} false), {v.no_outcome:,} without"
        )
        blocks.append(
            f'<div class="validity-run" data-run="{html.escape(run.run_id)}">'
            f"<h3>{html.escape(run.run_id)}: outcome <code>{html.escape(v.outcome)}</code></h3>"
            f'<p class="hint">{html.escape(caption)}</p><div class="split">'
            f'<div class="table-scroll"><table class="validity"><thead><tr><th>metric</th>'
            "<th>better</th><th>n</th><th>mean if true</th><th>mean if false</th><th>AUC</th>"
            "<th>95% CI</th><th>r</th><th>95% CI</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{notes}</div>"
            f'<div class="chart" id="chart-roc-{k}"></div></div></div>'
        )
    if not blocks:
        return ""
    return (
        '<section id="validity" class="panel"><h2>Does a metric track success?</h2>'
        '<p class="hint">AUC: the chance that a sample that succeeded scores better than one '
        "that failed (ties count half); 0.5 is no signal. r: the point-biserial correlation "
        "with the outcome. Both are oriented so that higher means the metric tracks success "
        "(AHR: lower is better). Intervals: 95% bootstrap over samples (1,000 resamples, all "
        "trials of a sample together, seed 0). The curves: each metric's ROC as a classifier "
        "of the outcome.</p>" + "".join(blocks) + "</section>"
    )
