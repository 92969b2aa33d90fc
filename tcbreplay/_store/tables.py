"""The store-wide tables the views ``runs``, ``tools`` and ``scorings`` read, made of the
runs' manifests and their scorings' summaries (a value of another type than its column's, as
in a file edited by hand, is null, said in a warning); and a run's stored scorings and the
status the views show of it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcbreplay._store import objects
from tcbreplay._store.locks import being_written
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import (
    _RUNS_SCHEMA,
    _SCORINGS_SCHEMA,
    _TOOLS_SCHEMA,
    DEFAULT_SCORER,
    SCORES,
)
from tcbreplay.errors import SkippedRunWarning


def stored_scorings(run: Run) -> list[tuple[str, Path, dict]]:
    """The run's stored scorings, by name: (scoring, scores file, summary). A scoring whose
    summary cannot be read (not JSON, not UTF-8, not an object) is not one."""
    found = []
    with objects.failures(run.dir):
        found_summaries = (run.dir / SCORES).glob("*/summary.json")
        summaries = sorted(found_summaries, key=lambda p: p.parent.name)
    for summary_path in summaries:
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            summary = None
        path = summary_path.parent / "scores.parquet"
        if not isinstance(summary, dict):  # (a truncated scores file is said so too)
            warnings.warn(
                SkippedRunWarning(
                    f"left out the {summary_path.parent.name} scoring of run {run.run_id!r}: "
                    f"{summary_path}: unreadable summary (score the run again)"
                ),
                stacklevel=2,
            )
        elif path.exists():
            found.append((summary_path.parent.name, path, summary))
    return found


def scorings_table(scorings: list[tuple[str, Path, dict]]) -> pa.Table:
    rows = []
    for scoring, path, summary in scorings:
        found = summary.get("options")
        options: dict[str, Any] = found if isinstance(found, dict) else {}
        scorer = options.get("scorer", DEFAULT_SCORER)
        default = scorer == DEFAULT_SCORER  # whose comparison options these are
        row = {name: summary.get(name) for name in _SCORINGS_SCHEMA.names}
        rows.append(
            {
                **{k: v if _fits(v, _SCORINGS_SCHEMA.field(k).type) else None
                   for k, v in row.items()},
                "run_id": path.parents[2].name,
                "scoring": scoring,
                "scorer": scorer,
                "rel_tol": _number(options.get("rel_tol")),
                "abs_tol": _number(options.get("abs_tol")),
                # summaries from before these options compared exactly and leniently
                "strings": _text(options.get("strings", "exact")) if default else None,
                "types": _text(options.get("types", "lenient")) if default else None,
                "trials": row["trials"] if "trials" in summary else 1,
                "focus": _focus_text(options),
                "gold_run": _text(options.get("gold_run")),
                "side": _text(options.get("side", "agent")) if default else None,
                "roles": json.dumps(summary["roles"]) if isinstance(summary.get("roles"), dict)
                else None,
                "stale": summary.get("stale") is True,  # (set by views._readable_scorings)
            }
        )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=_SCORINGS_SCHEMA)


def _focus_text(options: dict[str, Any]) -> str | None:
    """A scoring's --only and --without as words: ``only write without think``."""
    words = [
        f"{option} {','.join(str(n) for n in options[option])}"
        for option in ("only", "without")
        if isinstance(options.get(option), list) and options[option]
    ]
    return " ".join(words) or None


def _fits(value: object, arrow_type: pa.DataType) -> bool:
    """Whether a summary's value has the column's kind (a summary edited by hand may not)."""
    if pa.types.is_floating(arrow_type):
        return _number(value) is not None
    if pa.types.is_integer(arrow_type):
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    return isinstance(value, str)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e308:
        return float(value)
    return None


def shown_status(run: Run) -> str | None:
    """The manifest's status, but ``interrupted`` for a run still marked ``recording`` whose
    writer is gone (killed before it could say so), and no shard of it records either: no
    process is recording it (as ``runs`` and ``score`` say it)."""
    status = run.manifest.get("status")
    if status == "recording" and not being_written(run.dir):
        return "interrupted"
    return status


def runs_table(runs: list[Run]) -> pa.Table:
    rows = []
    for run in runs:
        m = run.manifest
        model = m.get("model", {})
        totals = m.get("totals") or {}
        rows.append(
            {
                "run_id": run.run_id,
                "status": shown_status(run),
                "created_at": m.get("created_at"),
                "finished_at": m.get("finished_at"),
                "benchmark": (m.get("benchmark") or {}).get("name"),
                "model": model.get("id"),
                "provider": model.get("provider"),
                "simulated": bool(model.get("simulated")),
                "n_samples": (m.get("dataset") or {}).get("n_entries"),
                "recorded": totals.get("recorded"),
                "ok": totals.get("ok"),
                "errors": totals.get("errors"),
                "input_tokens": totals.get("input_tokens"),
                "output_tokens": totals.get("output_tokens"),
                "toolkit_version": (m.get("toolkit") or {}).get("version"),
                "dataset_sha256": (m.get("dataset") or {}).get("sha256"),
                "source": m.get("source", "record"),
                # recorded: the runner's trials; imported: the most any sample has
                "trials": totals.get("trials") or (m.get("runner") or {}).get("trials") or 1,
            }
        )
    try:
        return pa.Table.from_pylist(rows, schema=_RUNS_SCHEMA)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return pa.Table.from_pylist([_typed(row) for row in rows], schema=_RUNS_SCHEMA)


# where the runs table's columns come from in a manifest (those of another name)
_MANIFEST_NAMES = {
    **{k: f"totals.{k}" for k in ("recorded", "ok", "errors", "input_tokens", "output_tokens")},
    "trials": "totals.trials", "n_samples": "dataset.n_entries",
    "dataset_sha256": "dataset.sha256", "benchmark": "benchmark.name", "model": "model.id",
    "provider": "model.provider", "toolkit_version": "toolkit.version",
}  # fmt: skip


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the runs table with each value of another type than its column's (a
    manifest edited by hand: totals.ok "x") null, with a warning naming it."""
    out = dict(row)
    for name, value in row.items():
        if value is None:
            continue
        try:
            pa.array([value], _RUNS_SCHEMA.field(name).type)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            warnings.warn(
                SkippedRunWarning(
                    f"run {row['run_id']!r}: its manifest's {_MANIFEST_NAMES.get(name, name)} "
                    f"{value!r:.40} is not a {_RUNS_SCHEMA.field(name).type}: shown as null"
                ),
                stacklevel=4,
            )
            out[name] = None
    return out


def tools_table(runs: list[Run]) -> pa.Table:
    rows = []
    for run in runs:
        for tool in (run.manifest.get("tools") or {}).get("specs", []):
            props = (tool.get("parameters") or {}).get("properties") or {}
            base = {"run_id": run.run_id, "tool": tool["name"],
                    "description": tool.get("description")}  # fmt: skip
            if not props:
                rows.append({**base, "param": None, "has_default": None, "default_value": None})
            for param, schema in props.items():
                has_default = isinstance(schema, dict) and "default" in schema
                rows.append(
                    {
                        **base,
                        "param": param,
                        "has_default": has_default,
                        "default_value": json.dumps(schema["default"]) if has_default else None,
                    }
                )
    return pa.Table.from_pylist(rows, schema=_TOOLS_SCHEMA)
