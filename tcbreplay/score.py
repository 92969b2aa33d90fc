"""Score a stored run: translate its raw messages, compute the metrics, write the results.

Scoring reads the run directory only (no LLM, tools module, dataset file or
network) and imports neither LangChain nor LangGraph.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import __version__, translate
from tcbreplay.errors import InputError, StoreError
from tcbreplay.metrics import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
    align,
    json_values_equal,
    name_metrics,
    summarize,
)
from tcbreplay.sql import SCORES_SCHEMA, connect, connect_tables
from tcbreplay.store import EVALUATIONS, Run, Store, utcnow, write_json_atomic, write_table

DASHBOARD_MODES = ("mismatches", "all", "none")


@dataclass(frozen=True)
class ScoreOptions:
    """Scoring options; each combination gets its own results folder."""

    rel_tol: float = DEFAULT_REL_TOL
    abs_tol: float = DEFAULT_ABS_TOL

    def __post_init__(self) -> None:
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise InputError("--rel-tol and --abs-tol must not be negative")

    @property
    def scoring(self) -> str:
        """The results folder name: ``spec``, or ``spec_rel-<r>_abs-<a>`` for other tolerances."""
        if (self.rel_tol, self.abs_tol) == (DEFAULT_REL_TOL, DEFAULT_ABS_TOL):
            return "spec"
        return f"spec_rel-{self.rel_tol:g}_abs-{self.abs_tol:g}"

    def to_dict(self) -> dict[str, Any]:
        return {"scorer": "spec", "rel_tol": self.rel_tol, "abs_tol": self.abs_tol}


@dataclass
class ScoreResult:
    """A scored run: the summary, the per-sample scores, and where they were written."""

    run_id: str
    summary: dict[str, Any]
    scores: pl.DataFrame
    scores_path: Path | None = None
    dashboard_path: Path | None = None


def score_run(
    store: Store,
    run_id: str,
    options: ScoreOptions | None = None,
    *,
    allow_incomplete: bool = False,
    write: bool = True,
    dashboard: str = "mismatches",
) -> ScoreResult:
    """Score one run from its raw traces; write per-sample scores, summary and dashboard file."""
    options = options or ScoreOptions()
    if dashboard not in DASHBOARD_MODES:
        raise InputError(f"--dashboard {dashboard!r}: choose one of {', '.join(DASHBOARD_MODES)}")
    run = store.open_run(run_id)
    _check_scorable(run, allow_incomplete)
    con = connect(runs=[run], with_scores=False)
    try:
        translate.bind_tool_params(con, run.manifest["tools"]["specs"])
        scores, calls = compute_scores(con, options)
    finally:
        con.close()
    scores = scores.with_columns(
        pl.lit(run.run_id).alias("run_id"), pl.lit(options.scoring).alias("scoring")
    ).select(SCORES_SCHEMA.names)
    summary = _summary(run, options, scores)
    result = ScoreResult(run_id=run.run_id, summary=summary, scores=scores)
    if write:
        folder = run.scores_dir(options.scoring)
        result.scores_path = folder / "scores.parquet"
        write_table(scores.to_arrow().cast(SCORES_SCHEMA), result.scores_path)
        write_json_atomic(folder / "summary.json", summary)
        if dashboard != "none":
            result.dashboard_path = _write_dashboard(run, scores, calls, summary, dashboard)
    return result


def score_tables(
    samples: pa.Table,
    messages: pa.Table,
    tool_specs: list[dict[str, Any]],
    options: ScoreOptions | None = None,
) -> pl.DataFrame:
    """Per-sample scores of in-memory ``samples`` and ``messages`` tables (store schemas)."""
    con = connect_tables(samples, messages)
    try:
        translate.bind_tool_params(con, tool_specs)
        scores, _ = compute_scores(con, options or ScoreOptions())
    finally:
        con.close()
    return scores


def _check_scorable(run: Run, allow_incomplete: bool) -> None:
    status = run.status
    if not run.has_data():
        raise StoreError(
            f"run {run.run_id!r} has no stored samples (status {status})",
            hint=f"finish it with: tcbreplay record --resume {run.run_id}",
        )
    if status not in ("complete", "imported") and not allow_incomplete:
        raise StoreError(
            f"run {run.run_id!r} is {status}: not every sample was recorded",
            hint=f"finish it with: tcbreplay record --resume {run.run_id}, "
            "or score what is there with --allow-incomplete",
        )


def compute_scores(con: Any, options: ScoreOptions) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-sample scores of the run bound to ``con``, and its agent calls."""
    samples = con.sql(
        "select sample_id, sample_index, category, status from samples order by sample_index"
    ).pl()
    calls = translate.agent_calls(con)
    gold = translate.gold_calls(con)
    frame = samples.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("s"))
    frame = frame.join(_name_lists(calls, "a"), on="sample_id", how="left")
    frame = frame.join(_name_lists(gold, "g"), on="sample_id", how="left")
    empty = pl.lit([], dtype=pl.List(pl.String))
    frame = frame.with_columns(pl.col("a").fill_null(empty), pl.col("g").fill_null(empty))
    named = name_metrics(frame["a"], frame["g"])
    n_agent = frame["a"].list.len().to_numpy()
    n_gold = frame["g"].list.len().to_numpy()
    same = (frame["a"] == frame["g"]).to_numpy()
    pairs = _pair_stats(translate.arg_checks(con, options.rel_tol, options.abs_tol), options)
    pairs = pairs.join(frame.select("sample_id", "s"), on="sample_id").rename(
        {"call_index": "i", "gold_index": "j"}
    )
    aligned = align(pairs, n_agent, n_gold, same)
    total = aligned["args_invalid"] + aligned["args_valid"]
    ahr = np.where(total.to_numpy() > 0, aligned["args_invalid"] / np.maximum(total, 1), np.nan)
    scores = pl.DataFrame(
        {
            "sample_id": frame["sample_id"],
            "sample_index": frame["sample_index"],
            "category": frame["category"],
            "status": frame["status"],
            "n_gold": pl.Series(n_gold, dtype=pl.Int32),
            "n_agent": pl.Series(n_agent, dtype=pl.Int32),
            "tsa": named["tsa"],
            "tp": named["tp"],
            "ahr": pl.Series(ahr, dtype=pl.Float64).fill_nan(None),
            "args_invalid": aligned["args_invalid"],
            "args_total": total,
            "args_missing": aligned["args_missing"],
            "pairs": aligned["pairs"].cast(pl.Int32),
        }
    )
    return scores, calls


def _name_lists(calls: pl.DataFrame, column: str) -> pl.DataFrame:
    return calls.group_by("sample_id").agg(pl.col("name").sort_by("call_index").alias(column))


def _pair_stats(checks: pl.DataFrame, options: ScoreOptions) -> pl.DataFrame:
    """Per candidate pair: invalid and valid agent arguments, gold keys left out."""
    undecided = checks["key"].is_not_null() & checks["invalid"].is_null()
    if undecided.any():
        rows = checks.filter(undecided)
        decided = [
            not json_values_equal(v, e, options.rel_tol, options.abs_tol)
            for v, e in zip(rows["value"], rows["expected"], strict=True)
        ]
        fill = checks["invalid"].to_list()
        for k, value in zip(np.flatnonzero(undecided.to_numpy()), decided, strict=True):
            fill[k] = value
        checks = checks.with_columns(pl.Series("invalid", fill, dtype=pl.Boolean))
    has_key = pl.col("key").is_not_null()
    return checks.group_by(["sample_id", "call_index", "gold_index"]).agg(
        pl.col("invalid").fill_null(False).sum().alias("invalid"),
        (has_key & ~pl.col("invalid").fill_null(False)).sum().alias("valid"),
        (pl.col("gold_keys").first() - pl.col("in_gold").fill_null(False).sum()).alias("missing"),
    )


def _summary(run: Run, options: ScoreOptions, scores: pl.DataFrame) -> dict[str, Any]:
    model = run.manifest.get("model", {})
    return {
        "run_id": run.run_id,
        **summarize(scores),
        "scoring": options.scoring,
        "options": options.to_dict(),
        "model": model.get("id"),
        "simulated": bool(model.get("simulated")),
        "run_status": run.status,
        "scored_at": utcnow().isoformat(),
        "toolkit_version": __version__,
    }


def _write_dashboard(
    run: Run, scores: pl.DataFrame, calls: pl.DataFrame, summary: dict[str, Any], mode: str
) -> Path:
    """The original dashboard format; by default only samples with a mismatch, as it did."""
    title = (run.manifest.get("benchmark") or {}).get("title") or "Tool Call Benchmark"
    samples = pl.read_parquet(run.samples_path, columns=["sample_id", "input", "gold"])
    table = samples.join(
        scores.select(
            "sample_id", "sample_index", "n_gold", "n_agent", "tp", "args_invalid", "args_missing"
        ),
        on="sample_id",
    )
    if mode == "mismatches":
        table = table.filter(
            (pl.col("tp") < 1.0) | (pl.col("args_invalid") > 0) | (pl.col("args_missing") > 0)
        )
    table = table.sort("sample_index")
    by_sample: dict[str, tuple[list[str], list[Any]]] = {}
    wanted = set(table["sample_id"].to_list())
    for sid, name, args in calls.select("sample_id", "name", "args").iter_rows():
        if sid in wanted:
            names, arglist = by_sample.setdefault(sid, ([], []))
            names.append(name)
            arglist.append(json.loads(args))
    out_samples = []
    for sid, text, gold in table.select("sample_id", "input", "gold").iter_rows():
        names, arglist = by_sample.get(sid, ([], []))
        target = json.loads(gold)
        out_samples.append(
            {
                "input": text,
                "output": {"tool_call_names": names, "tool_call_args": arglist},
                "target": {
                    "tool_call_names": [c["name"] for c in target],
                    "tool_call_args": [c["args"] for c in target],
                },
            }
        )
    doc = {
        "benchmark_name": title,
        "run_id": run.run_id,
        "results": {"tsa": summary["tsa"], "ahr": summary["ahr"], "tp": summary["tp"]},
        "samples": out_samples,
    }
    path = run.dir / EVALUATIONS / f"{title}_{run.run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    return path
