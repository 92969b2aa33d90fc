"""The JSON the page's script draws from, and its form inside the page.

``report-data``: one array per column of the samples table (parsed on load);
``report-details``: per run and sample, the calls, the AHR pairing and the transcript (parsed
at the first click). Both go in ``<script>`` elements as :func:`script_json` writes them.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tcbreplay._report.charts import run_color
from tcbreplay._report.data import ReportData, RunData, failed_rows
from tcbreplay._report.replay import divergence_views
from tcbreplay._report.transcripts import transcripts


def script_json(obj: Any) -> str:
    """JSON safe inside a ``<script>`` element: every ``<`` escaped, no NaN (see
    :func:`script_json_and_replaced`)."""
    return script_json_and_replaced(obj)[0]


def script_json_and_replaced(obj: Any) -> tuple[str, bool]:
    """:func:`script_json`, and whether a number JSON has no form for was replaced: Infinity,
    -Infinity and NaN (a dataset's ``1e999`` is stored as Infinity) become those words as
    strings."""
    try:
        text, replaced = _dumps(obj), False
    except ValueError:
        text, replaced = _dumps(_nonfinite_as_text(obj)), True
    return text.replace("<", "\\u003c"), replaced


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _nonfinite_as_text(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return json.dumps(obj)  # Infinity, -Infinity or NaN
    if isinstance(obj, dict):
        return {k: _nonfinite_as_text(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nonfinite_as_text(v) for v in obj]
    return obj


def _num(value: Any, digits: int = 4) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), digits)


def table_payload(report: ReportData) -> dict[str, Any]:
    """One array per column of the samples table, aligned with ``report.sample_ids``."""
    first: dict[str, dict[str, Any]] = {}
    for run in report.runs:
        for row in run.shown().iter_rows(named=True):
            first.setdefault(row["sample_id"], row)
    n_gold: dict[str, int] = {}
    for run in report.runs:
        for sid, calls in run.gold.items():
            n_gold.setdefault(sid, len(calls))
    tool_index = {t: k for k, t in enumerate(report.tools)}
    used: list[set[int]] = []
    for sid in report.sample_ids:
        names = {n for run in report.runs for n, _ in run.gold.get(sid, [])}
        names |= {n for run in report.runs for n, _ in run.agent.get(sid, [])}
        used.append({tool_index[n] for n in names})
    runs = [
        {
            "id": run.run_id,
            "color": run_color(k),
            "model": (run.run.manifest.get("model") or {}).get("id"),
        }
        for k, run in enumerate(report.runs)
    ]
    return {
        "runs": runs,
        "tools": report.tools,
        "rows": report.rows_word,  # what a row of the table is: samples, or trials
        "samples": {
            "id": report.sample_ids,
            "cat": [first[s]["category"] for s in report.sample_ids],
            "input": [first[s]["input"] for s in report.sample_ids],
            "ngold": [n_gold.get(s, 0) for s in report.sample_ids],
            "tools": [sorted(u) for u in used],
            "failed": [int(f) for f in report.failed],
            "regressed": [int(r) for r in report.regressed],
        },
        "cols": [_run_columns(run, report) for run in report.runs],
    }


def _run_columns(run: RunData, report: ReportData) -> dict[str, list[Any]]:
    sample_ids = report.sample_ids
    shown_scores = report.shown_rows(run.scores)
    scores = {r["sample_id"]: r for r in shown_scores.iter_rows(named=True)}
    samples = {r["sample_id"]: r for r in run.shown().iter_rows(named=True)}
    failed = failed_rows(shown_scores)
    worse = dict(run.worse.iter_rows()) if run.worse is not None else {}
    names = ("tsa", "tp", "ahr", "calls", "inv", "tot", "mis", "status", "failed", "tin", "tout")
    cols: dict[str, list[Any]] = {k: [] for k in (*names, "dur", "worse")}
    for sid, base_id in zip(sample_ids, report.base_ids, strict=True):
        s, m = scores.get(sid), samples.get(sid)
        values = (
            [
                _num(s["tsa"]),
                _num(s["tp"]),
                _num(s["ahr"]),
                s["n_agent"],
                s["args_invalid"],
                s["args_total"],
                s["args_missing"],
                s["status"],
                int(failed[sid]),
                m["input_tokens"],
                m["output_tokens"],
                _num(m["duration_s"], 3),
            ]
            if s is not None and m is not None
            else [None] * (len(cols) - 1)
        )
        # the metrics in which the sample got worse than in the first run (bits in
        # data.METRICS order), every row of it marked (a trial this run lacks too): the rows
        # the "regressed" filter shows
        values.append(worse.get(base_id, 0))
        for key, value in zip(cols, values, strict=True):
            cols[key].append(value)
    return cols


class _Strings:
    """Intern message texts: tool results and canned answers repeat across samples."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[str] = []

    def __call__(self, text: str) -> int:
        k = self.index.get(text)
        if k is None:
            k = self.index[text] = len(self.values)
            self.values.append(text)
        return k


def details_payload(report: ReportData) -> dict[str, Any]:
    """Per run and sample: agent calls, the AHR pairing, non-ok verdicts, the transcript."""
    strings = _Strings()
    first_gold: dict[str, list[Any]] = {}
    for run in report.runs:
        for sid, calls in run.gold.items():
            first_gold.setdefault(sid, _gold_payload(calls, run.gold_rules.get(sid)))
    runs = []
    for run in report.runs:
        messages = transcripts(run)
        diverged = divergence_views(run, lambda m: _message(m, strings))
        rows = run.shown()
        errors = dict(rows.select("sample_id", "error").iter_rows())
        metadata = dict(rows.select("sample_id", "metadata").iter_rows())
        per_sample: list[Any] = []
        for sid in report.sample_ids:
            if sid not in run.agent:
                per_sample.append(None)
                continue
            explained = run.explanations[sid]
            entry: dict[str, Any] = {
                "a": [[n, a] for n, a in run.agent[sid]],
                "p": [_pair_payload(p) for p in explained["pairs"]],
                "t": [_message(m, strings) for m in messages.get(sid, [])],
            }
            gold = _gold_payload(run.gold.get(sid, []), run.gold_rules.get(sid))
            if gold != first_gold.get(sid):
                entry["g"] = gold
            if sid in run.own_tools:
                entry["o"] = run.own_tools[sid]
            if errors.get(sid):
                entry["e"] = errors[sid]
            if metadata.get(sid):  # the sample's metadata object, as stored
                entry["m"] = json.loads(metadata[sid])
            if sid in diverged:  # a replay's: where it diverged, and its parent from there
                entry["v"] = diverged[sid]
            per_sample.append(entry)
        runs.append(
            {
                "system": (run.run.manifest.get("system_prompt") or {}).get("text") or "",
                "tools": run.tool_schemas,
                "samples": per_sample,
            }
        )
    return {
        "gold": [first_gold.get(sid, []) for sid in report.sample_ids],
        "runs": runs,
        "strings": strings.values,
    }


def _gold_payload(calls: list[Any], rules: list[dict[str, Any]] | None) -> list[Any]:
    """Gold calls as ``[name, args]``, with ``[name, args, rules]`` where a call has any
    (accept, optional, group)."""
    rules = rules or [{}] * len(calls)
    return [[n, a, r] if r else [n, a] for (n, a), r in zip(calls, rules, strict=True)]


def _pair_payload(pair: dict[str, Any]) -> list[Any]:
    """``[agent, gold, verdicts other than ok, missing keys, optional keys left out]``, the
    trailing empty lists left out."""
    out = [pair["agent"], pair["gold"], {k: v for k, v in pair["args"].items() if v != "ok"},
           pair["missing"], pair.get("optional") or []]  # fmt: skip
    while len(out) > 3 and not out[-1]:
        out.pop()
    return out


def _message(m: dict[str, Any], strings: _Strings) -> list[Any]:
    """``[type, text index, extra, input tokens, output tokens, latency]``, plus the unparseable
    tool calls of an AI message when it has any; extra is an AI message's tool calls or a tool
    message's ``[name, status]``."""
    extra: Any = None
    if m["type"] == "ai":
        extra = [[n, a] for n, a in m["tool_calls"]]
    elif m["type"] == "tool":
        extra = [m.get("name"), m.get("status")]
    row = [
        m["type"],
        strings(m["text"]),
        extra,
        m["input_tokens"],
        m["output_tokens"],
        _num(m["latency_s"]),
    ]
    if m.get("invalid_tool_calls"):
        row.append([list(c) for c in m["invalid_tool_calls"]])
    return row
