"""The report's charts as plotly.js figures (data and layout, plain JSON).

The page draws them with the partial plotly.js bundle vendored beside this module
(``vendor/``: bar, pie and scatter traces only, 1.2 MB, the same for any number of
samples), so every chart here is made of bar traces: the TP histogram is binned here,
which also keeps the page's chart data to a few numbers per run.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

import numpy as np
import polars as pl

from tcbreplay._compare.validity import METRICS as VALIDITY_METRICS
from tcbreplay._compare.validity import roc_points
from tcbreplay._report.data import ReportData

PLOTLY_JS = "vendor/plotly-basic.min.js"
PLOTLY_JS_VERSION = "4.1.1"  # npm plotly.js-basic-dist-min; see vendor/README.md
RUN_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D"]
MEASURES = [
    ("gold_calls", "gold calls", "#A0AEC0"),
    ("agent_calls", "agent calls", "#4C78A8"),
    ("paired_calls", "paired calls", "#54A24B"),
    ("invalid_args", "invalid args", "#E45756"),
]
METRICS = [
    ("tsa", "TSA (higher is better)"),
    ("tp", "TP (higher is better)"),
    ("ahr", "AHR (lower is better)"),
]
TP_BIN = 0.05  # bins centred on 0, 0.05, ..., 1
_FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
_GRID = "#EBF0F8"
_AXIS = {
    "gridcolor": _GRID,
    "linecolor": _GRID,
    "zerolinecolor": _GRID,
    "zerolinewidth": 2,
    "automargin": True,
}


def plotly_js() -> str:
    """The vendored plotly.js bundle, as the page embeds it."""
    package = resources.files("tcbreplay._report")
    return package.joinpath(PLOTLY_JS).read_text(encoding="utf-8")


def plotly_text(text: str) -> str:
    """A text from the traces (a tool's name) as plotly.js shows it as it is: plotly.js
    reads a label's tags (``<a href>``, ``<span style>``, ``<br>``) and entities as markup,
    so ``&``, ``<`` and ``>`` go as entities, which it shows as the characters."""
    return html.escape(text, quote=False)


def run_color(k: int) -> str:
    return RUN_COLORS[k % len(RUN_COLORS)]


def figures(report: ReportData) -> dict[str, dict[str, Any]]:
    """Every chart of the page by its element id, as plotly.js JSON (data and layout)."""
    return {
        "chart-metrics": metrics_figure(report),
        "chart-tools": tools_figure(report),
        "chart-tp": tp_figure(report),
        **validity_figures(report),
    }


def _axis(**kwargs: Any) -> dict[str, Any]:
    return {**_AXIS, **kwargs}


def _layout(height: int, **kwargs: Any) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 48, "r": 16, "t": 36, "b": 40},
        "font": {"family": _FONT, "size": 12, "color": "#1f2933"},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "hoverlabel": {"align": "left"},
        "xaxis": _axis(),
        "yaxis": _axis(),
        **kwargs,
    }


def _bar(name: str, x: list[Any], y: list[Any], color: str, hover: str, **kw: Any) -> dict:
    return {
        "type": "bar",
        "name": name,
        "x": x,
        "y": y,
        "marker": {"color": color},
        "hovertemplate": hover,
        **kw,
    }


def metrics_figure(report: ReportData) -> dict[str, Any]:
    """Grouped bars: the three run-level metrics, one bar per run, with bootstrap intervals."""
    labels = [label for _, label in METRICS]
    data = []
    for k, run in enumerate(report.runs):
        values = [run.summary.get(m) for m, _ in METRICS]
        known = [
            (interval, v) if (interval := run.intervals.get(m)) and v is not None else ((0, 0), 0)
            for (m, _), v in zip(METRICS, values, strict=True)
        ]
        error_y = {
            "type": "data",
            "symmetric": False,
            "array": [ci[1] - v for ci, v in known],
            "arrayminus": [v - ci[0] for ci, v in known],
            "color": "#52606d",
            "thickness": 1.2,
        }
        hover = "%{x}<br>" + run.run_id + ": %{y:.3f}<extra></extra>"
        data.append(_bar(run.run_id, labels, values, run_color(k), hover, error_y=error_y))
    layout = _layout(340, barmode="group", yaxis=_axis(range=[0, 1.05], title={"text": "score"}))
    return {"data": data, "layout": layout}


def tools_figure(report: ReportData) -> dict[str, Any]:
    """Per tool: gold, agent and paired calls and invalid arguments, one panel per run, the
    panels side by side on one count axis."""
    n = len(report.runs)
    spacing = 0.04
    width = (1 - spacing * (n - 1)) / n
    data: list[dict[str, Any]] = []
    layout = _layout(360, barmode="group")
    annotations = []
    for k, run in enumerate(report.runs):
        suffix = "" if k == 0 else str(k + 1)
        left = k * (width + spacing)
        # (tools named like numbers are still names: not placed on a number line)
        layout[f"xaxis{suffix}"] = _axis(
            domain=[left, left + width], anchor=f"y{suffix}", type="category"
        )
        layout[f"yaxis{suffix}"] = (
            _axis(anchor="x", title={"text": "count"})
            if k == 0
            else _axis(anchor=f"x{suffix}", matches="y", showticklabels=False)
        )
        rows = [r for r in report.tool_rows if r.run_id == run.run_id]
        for key, label, color in MEASURES:
            hover = "%{x}: %{y} " + label + "<extra>" + run.run_id + "</extra>"
            data.append(
                _bar(
                    label,
                    [plotly_text(r.tool) for r in rows],
                    [getattr(r, key) for r in rows],
                    color,
                    hover,
                    legendgroup=key,
                    showlegend=k == 0,
                    xaxis=f"x{suffix}",
                    yaxis=f"y{suffix}",
                )
            )
        annotations.append(
            {
                "text": run.run_id,
                "x": left + width / 2,
                "y": 1,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "center",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 14},
            }
        )
    if n > 1:  # each panel titled by its run, with room for the legend above the titles
        layout.update(
            annotations=annotations,
            margin={**layout["margin"], "t": 72},
            legend={**layout["legend"], "y": 1.16},
        )
    return {"data": data, "layout": layout}


def tp_normalised(report: ReportData) -> bool:
    """Whether the TP histogram shows shares of each run's samples rather than counts: when
    the runs differ in size, counts would compare the runs' sizes rather than their scores."""
    return len({run.scores.height for run in report.runs}) > 1


def tp_bins(tp: np.ndarray) -> np.ndarray:
    """Samples per TP bin: 21 bins of 0.05 centred on 0, 0.05, ..., 1 (a bin holds its lower
    edge); an undefined TP (NaN) is in none."""
    tp = np.round(tp[~np.isnan(tp)], 4)
    index = np.floor((tp + TP_BIN / 2) / TP_BIN).astype(int)
    return np.bincount(np.clip(index, 0, 20), minlength=21)


def tp_figure(report: ReportData) -> dict[str, Any]:
    """Histogram of per-sample TP, one series of bars per run; shares of each run's samples
    (in %) when the runs differ in size (see :func:`tp_normalised`), else counts."""
    normalised = tp_normalised(report)
    centres = [round(k * TP_BIN, 2) for k in range(21)]
    data = []
    for k, run in enumerate(report.runs):
        counts = tp_bins(run.scores["tp"].to_numpy().astype(float))
        n = int(counts.sum())
        if normalised:
            y = [round(100 * c / n, 2) if n else 0 for c in counts.tolist()]
            hover = "tp %{x}: %{customdata:,} samples, %{y:.1f}% of " + f"{n:,}"
            extra: dict[str, Any] = {"customdata": counts.tolist()}
        else:
            y, hover, extra = counts.tolist(), "tp %{x}: %{y:,} samples", {}
        data.append(
            _bar(
                run.run_id,
                centres,
                y,
                run_color(k),
                hover + "<extra>" + run.run_id + "</extra>",
                **extra,
            )
        )
    title = "share of the run's samples (%)" if normalised else "samples"
    layout = _layout(
        340,
        barmode="group",
        bargap=0.08,
        xaxis=_axis(title={"text": "per-sample TP"}, range=[-0.03, 1.03], dtick=0.1),
        yaxis=_axis(title={"text": title}, rangemode="tozero"),
    )
    return {"data": data, "layout": layout}


_METRIC_COLORS = ("#2f6fb0", "#d9822b", "#3f9c35", "#8e44ad", "#c0392b", "#16a085")


def roc_figure(result: Any, rows: pl.DataFrame) -> dict[str, Any]:
    """Each metric's ROC curve against the run's outcome, with the diagonal of no signal."""
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": [0, 1],
            "y": [0, 1],
            "line": {"color": "#cbd2d9", "dash": "dot"},
            "hoverinfo": "skip",
            "showlegend": False,
        }
    ]
    for k, (name, m) in enumerate(result.metrics.items()):
        fpr, tpr = roc_points(rows[name], VALIDITY_METRICS[name], rows["outcome"])
        if not fpr:
            continue
        auc = "n/a" if m["auc"] is None else f"{m['auc']:.3f}"
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{name} (AUC {auc})",
                "x": [round(v, 4) for v in fpr],
                "y": [round(v, 4) for v in tpr],
                "line": {"color": _METRIC_COLORS[k % len(_METRIC_COLORS)]},
                "marker": {"size": 4},  # straight between thresholds: ties count half
                "hovertemplate": f"{name}<br>false positives %{{x:.2f}}<br>"
                "true positives %{y:.2f}<extra></extra>",
            }
        )
    layout = _layout(
        340,
        xaxis=_axis(title={"text": "false positive rate"}, range=[-0.02, 1.02]),
        yaxis=_axis(title={"text": "true positive rate"}, range=[-0.02, 1.02]),
    )
    return {"data": data, "layout": layout}


def validity_figures(report: ReportData) -> dict[str, dict[str, Any]]:
    """The ROC chart of each run with an outcome, by element id."""
    return {
        f"chart-roc-{k}": roc_figure(run.validity, run.validity_rows)
        for k, run in enumerate(report.runs)
        if run.validity is not None and run.validity_rows is not None
    }
