"""The report's charts as Plotly figures; the page draws them with the embedded plotly.js."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from tcbreplay._analysis.report.data import ReportData

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
_FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"


def run_color(k: int) -> str:
    return RUN_COLORS[k % len(RUN_COLORS)]


def figures(report: ReportData) -> dict[str, dict[str, Any]]:
    """Every chart of the page by its element id, as Plotly JSON (data and layout)."""
    figs = {
        "chart-metrics": metrics_figure(report),
        "chart-tools": tools_figure(report),
        "chart-tp": tp_figure(report),
    }
    return {key: json.loads(pio.to_json(fig, validate=False)) for key, fig in figs.items()}


def _layout(fig: go.Figure, height: int, **kwargs: Any) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 48, "r": 16, "t": 36, "b": 40},
        font={"family": _FONT, "size": 12, "color": "#1f2933"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        **kwargs,
    )
    return fig


def metrics_figure(report: ReportData) -> go.Figure:
    """Grouped bars: the three run-level metrics, one bar per run, with bootstrap intervals."""
    fig = go.Figure()
    labels = [label for _, label in METRICS]
    for k, run in enumerate(report.runs):
        values = [run.summary.get(m) for m, _ in METRICS]
        known = [
            (interval, v) if (interval := run.intervals.get(m)) and v is not None else ((0, 0), 0)
            for (m, _), v in zip(METRICS, values, strict=True)
        ]
        fig.add_trace(
            go.Bar(
                name=run.run_id,
                x=labels,
                y=values,
                marker_color=run_color(k),
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [ci[1] - v for ci, v in known],
                    "arrayminus": [v - ci[0] for ci, v in known],
                    "color": "#52606d",
                    "thickness": 1.2,
                },
                hovertemplate="%{x}<br>" + run.run_id + ": %{y:.3f}<extra></extra>",
            )
        )
    return _layout(
        fig,
        340,
        barmode="group",
        yaxis={"range": [0, 1.05], "title": "score"},
    )


def tools_figure(report: ReportData) -> go.Figure:
    """Per tool: gold, agent and paired calls and invalid arguments, one panel per run."""
    n = len(report.runs)
    fig = make_subplots(
        rows=1,
        cols=n,
        shared_yaxes=True,
        subplot_titles=[run.run_id for run in report.runs] if n > 1 else None,
        horizontal_spacing=0.04,
    )
    for k, run in enumerate(report.runs):
        rows = [r for r in report.tool_rows if r.run_id == run.run_id]
        for key, label, color in MEASURES:
            fig.add_trace(
                go.Bar(
                    name=label,
                    legendgroup=key,
                    showlegend=k == 0,
                    x=[r.tool for r in rows],
                    y=[getattr(r, key) for r in rows],
                    marker_color=color,
                    hovertemplate="%{x}: %{y} " + label + "<extra>" + run.run_id + "</extra>",
                ),
                row=1,
                col=k + 1,
            )
    fig = _layout(fig, 360, barmode="group", yaxis={"title": "count"})
    if n > 1:  # room for the legend above the panel titles
        fig.update_layout(margin={"t": 72}, legend={"y": 1.16})
    return fig


def tp_figure(report: ReportData) -> go.Figure:
    """Histogram of per-sample TP, one series per run, bins of 0.05 centred on their value."""
    fig = go.Figure()
    for k, run in enumerate(report.runs):
        fig.add_trace(
            go.Histogram(
                name=run.run_id,
                x=run.scores["tp"].round(4).to_list(),
                xbins={"start": -0.025, "end": 1.025, "size": 0.05},
                marker_color=run_color(k),
                hovertemplate="tp %{x}: %{y} samples<extra>" + run.run_id + "</extra>",
            )
        )
    return _layout(
        fig,
        340,
        barmode="group",
        bargap=0.08,
        xaxis={"title": "per-sample TP", "range": [-0.03, 1.03], "dtick": 0.1},
        yaxis={"title": "samples"},
    )
