"""What each command's results look like in every format: the :class:`Output` of a score,
a diff, an audit, a query, a replay and a record or import summary (printed by :func:`emit`;
validity's: :mod:`tcbreplay._cli.validity_tables`)."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

from tcbreplay._cli.render import Grid, Output, Whole
from tcbreplay._replay.divergence import Divergence
from tcbreplay._store.schema import counted_as
from tcbreplay._words import count

_METRIC_LABELS = {
    "tsa": "tsa  tool selection accuracy",
    "tp": "tp   trajectory precision",
    "ahr": "ahr  argument hallucination rate",
    "exact": "exact  whole trajectory as gold",
    "write_exact": "write_exact  write calls as gold",
    "first_divergence": "first_divergence  mean position",
    "covered": "covered  every gold call done",
}
NO_WRITE_ROLE = "write_exact: no tool has the role write (score --role write=NAME,...)"


def query_output(result: Any) -> Output:
    """Rows of a query (``sql``, ``query``, ``runs``): a JSON array of row objects."""
    caption = count(len(result.rows), "row")
    return Output(grids=[Grid(list(result.columns), list(result.rows), caption=caption)])


def score_output(summary: dict[str, Any], extra: dict[str, Any]) -> Output:
    """The metrics of a scoring, its per-tool and per-category tables; json: the summary."""
    abet = (summary.get("options") or {}).get("scorer") == "abet"
    each = counted_as(summary.get("trials"))
    tsa_unit = "gold calls" if abet else each
    over = {
        "tsa": (None, summary["n_tsa"], tsa_unit),
        "tp": (None, summary["n_tp"], each),
        "ahr": (summary["args_invalid"], summary["args_total"], "args"),
    }
    if "exact" in summary:  # the default scorer's outcome metrics
        over["exact"] = (summary["exact_samples"], summary["n_exact"], each)
        over["write_exact"] = (summary["write_exact_samples"], summary["n_write_exact"], each)
        over["first_divergence"] = (None, summary["n_first_divergence"], "diverging")
    if "covered" in summary:
        over["covered"] = (summary["covered_samples"], summary["n_covered"], each)
    title = f"{summary['run_id']}  ({summary.get('model') or 'unknown model'})"
    if summary.get("simulated"):
        title += "  [simulated model]"
    missing = "" if abet else f", {summary['args_missing']} gold args left out"
    caption = (
        f"{summary['n_samples']} {each}, {_not_ok(summary)}{missing}; scoring: {summary['scoring']}"
    )
    shown = Grid(
        ["metric", "value", "exact", "over"],
        [
            (
                _METRIC_LABELS[m],
                summary[m],
                repr(summary[m]) if summary[m] is not None else "",
                _over(m, count, n, unit, summary),
            )
            for m, (count, n, unit) in over.items()
        ],
        title=title,
        caption=caption,
        digits=".4f",
        null="—",
    )
    rows = Grid(
        ["run_id", "scoring", "metric", "value", "count", "n", "unit"],
        [
            (summary["run_id"], summary["scoring"], m, summary[m], count, n, unit)
            for m, (count, n, unit) in over.items()
        ],
    )
    grids = [shown]
    for key, title, first in (
        ("by_tool", "per tool", "tool"),
        ("by_category", "per category", "category"),
    ):
        if summary.get(key):
            columns = (
                [
                    first,
                    "gold_calls",
                    "agent_calls",
                    "paired",
                    "recall",
                    "args_invalid",
                    "args_total",
                    "ahr",
                ]
                if key == "by_tool"
                else [first, "n_samples", "tsa", "tp", "ahr"]
            )
            grids.append(
                Grid(
                    columns,
                    [[row.get(c) for c in columns] for row in summary[key]],
                    title=title,
                    digits=".4f",
                    null="—",
                )
            )
    grids += trial_grids(summary)
    notes = [SUCCESS] if summary.get("trials", 1) > 1 else []
    if "write_exact" in summary and summary["write_exact"] is None:
        notes.insert(0, NO_WRITE_ROLE)
    if extra.get("dashboard_file"):
        notes.append(f"dashboard: {extra['dashboard_file']}")
    return Output(grids=grids, rows=rows, data={**summary, **extra}, notes=notes)


def _over(metric: str, count: int | None, n: int, unit: str, summary: dict[str, Any]) -> str:
    if metric == "write_exact" and summary.get("write_exact") is None:
        return "no write role"
    return f"{count}/{n} {unit}" if count is not None else f"{n} {unit}"


SUCCESS = (
    "success: a clean sample (tsa 1 or no gold calls, tp 1, ahr 0 or none, no gold argument "
    "left out: exact); pass^k: the chance that k of a sample's trials drawn without "
    "replacement all succeed, pass@k: that at least one does, averaged over samples"
)


def trial_grids(summary: dict[str, Any]) -> list[Grid]:
    """With several trials: each trial's metrics and the per-sample means, then pass^k and
    pass@k for each k (json has them as ``by_trial``, ``by_sample`` and ``pass_k``)."""
    if summary.get("trials", 1) < 2:
        return []
    columns = ["trial", "n_samples", "tsa", "tp", "ahr", "success"]
    mean = summary["by_sample"]
    write = mean.get("write_exact") is not None
    if write:
        columns.append("write_exact")
    per_trial = Grid(
        columns,
        [[row.get(c) for c in columns] for row in summary["by_trial"]]
        + [["per sample", *(mean[c] for c in columns[1:])]],
        title="per trial",
        caption="per sample: each sample's mean over its trials, averaged over samples",
        digits=".4f",
        null="—",
    )
    pass_k = Grid(
        ["k", "pass^k", "pass@k"] + (["pass^k write_exact"] if write else []),
        [
            (row["k"], row["pass_hat_k"], row["pass_at_k"])
            + ((row.get("pass_hat_k_write_exact"),) if write else ())
            for row in summary["pass_k"]
        ],
        title="pass^k and pass@k",
        digits=".4f",
        null="—",
    )
    return [per_trial, pass_k]


def _signed(value: float | None) -> str:
    return Whole("—" if value is None else f"{value:+.4f}")


def _interval(low: float | None, high: float | None) -> str:
    return Whole(f"[{_signed(low)}, {_signed(high)}]")


def diff_output(result: Any, limit: int = 10) -> Output:
    """Run-level deltas with intervals, per-tool ahr deltas and the samples that moved;
    csv: the run-level rows; json: everything, every sample's deltas included."""
    pct = f"{result.confidence:.0%}"
    head = Grid(
        ["metric", "A", "B", "B − A", f"{pct} interval"],
        [
            (m, d["a"], d["b"], _signed(d["delta"]), _interval(d["ci_low"], d["ci_high"]))
            for m, d in result.runs.items()
        ],
        title=f"{result.run_b} vs {result.run_a}  ({result.n_common} common samples, "
        f"scoring {result.scoring})",
        caption=f"paired bootstrap, {result.n_boot} resamples, seed {result.seed}; "
        f"{count(len(result.regressed), 'sample')} regressed, {len(result.improved)} improved"
        + (f"; {result.trials_note}" if result.trials_note else ""),
        digits=".4f",
        null="—",
    )
    rows = Grid(
        ["run_a", "run_b", "scoring", "metric", "a", "b", "delta", "ci_low", "ci_high"],
        [
            (
                result.run_a,
                result.run_b,
                result.scoring,
                m,
                d["a"],
                d["b"],
                d["delta"],
                d["ci_low"],
                d["ci_high"],
            )
            for m, d in result.runs.items()
        ],
    )
    grids = [head]
    if result.tools:
        grids.append(
            Grid(
                ["tool", "paired A", "paired B", "A", "B", "B − A", f"{pct} interval"],
                [
                    (
                        t["tool"],
                        t["paired_a"],
                        t["paired_b"],
                        t["ahr_a"],
                        t["ahr_b"],
                        _signed(t["ahr_delta"]),
                        _interval(t["ahr_ci_low"], t["ahr_ci_high"]),
                    )
                    for t in result.tools
                ],
                title="ahr per tool",
                digits=".4f",
                null="—",
            )
        )
    for change in ("regressed", "improved"):
        moved = result.samples.filter(result.samples["change"] == change)
        if not moved.height:
            continue
        moved = moved.sort("d_tp", descending=change == "improved").head(limit)
        grids.append(
            Grid(
                ["sample_id", "d_tsa", "d_tp", "d_ahr"],
                [
                    (r["sample_id"], _signed(r["d_tsa"]), _signed(r["d_tp"]), _ahr_change(r))
                    for r in moved.iter_rows(named=True)
                ],
                title=f"{change} (first {moved.height})",
            )
        )
    return Output(grids=grids, rows=rows, json_text=partial(diff_json, result))


def _ahr_change(row: dict[str, Any]) -> str:
    """A sample's change of ahr: its delta, or, where one side judged no argument (ahr
    undefined, which to above 0 counts as worse), both values (``none→0.5000``)."""
    a, b = row["ahr_a"], row["ahr_b"]
    if row["d_ahr"] is not None or (a is None and b is None):
        return _signed(row["d_ahr"])
    return Whole(f"{'none' if a is None else f'{a:.4f}'}→{'none' if b is None else f'{b:.4f}'}")


def diff_json(result: Any, indent: int | None = 2) -> Iterator[str]:
    """``to_json(result.to_dict(), indent)``, the same text in pieces: every sample's deltas,
    the last entry, written by :func:`~tcbreplay._cli.serialize.rows_json_parts`."""
    from tcbreplay._cli.serialize import rows_json_parts, to_json  # (only json needs them)

    head = to_json(result.to_dict(samples=False), indent)
    if indent is None:
        yield f'{head[:-1]},"samples":'
    else:
        yield f'{head[:-2]},\n{" " * indent}"samples": '
    yield from rows_json_parts(result.samples, indent, level=1)
    yield "\n}" if indent else "}"


def audit_output(report: Any, limit: int = 200) -> Output:
    """What differs between stored and recomputed scores; table: one line each, and a
    ``verified:`` line when nothing does."""
    lines = [
        f"changed since the run wrote it: {name} (sha256 differs from the manifest)"
        for name in report.changed_since_written
    ] + [
        f"changed since scoring: {name} (sha256 differs from the audit record)"
        for name in report.changed_files
    ]
    for d in report.differences[:limit]:
        if d.recomputed == "differ" and d.sample_id is None:  # the rest of a list, counted
            lines.append(f"{d.scoring}: {d.stored} differ too")
            continue
        where = f"sample {d.sample_id}" if d.sample_id is not None else "run"
        # a replay's: the parent's value, then the replay's
        words = ("parent's", "replay's") if d.scoring == "replay" else ("stored", "recomputed")
        lines.append(
            f"{d.scoring}: {where}: {d.field}: {words[0]} {d.stored!r}, {words[1]} {d.recomputed!r}"
        )
    if len(report.differences) > limit:
        lines.append(f"... and {count(len(report.differences) - limit, 'more difference')}")
    lines += [
        f"note: {name} was scored by other SQL than this version's (an earlier version's): "
        "its numbers are compared with a re-score by this version's"
        for name in report.other_sql
    ]
    lines += [f"note: {note}" for note in report.notes]
    verdict = (
        f"verified: {', '.join(report.scorings)} of {report.run_id}: "
        f"{count(report.samples_checked, 'sample')} identical to a re-score from raw traces"
    )
    if report.replay_of is not None:
        served = (
            f"replay {report.run_id}: {count(report.turns_checked, 'turn')} served, each the "
            f"stored message of {report.replay_of}"
        )
        verdict = f"verified: {served}" + (f"; {verdict[10:]}" if report.scorings else "")
    if report.ok:
        lines.append(verdict)
    grid = Grid(
        ["kind", "scoring", "sample_id", "field", "stored", "recomputed"],
        [("file", None, None, name, None, None) for name in report.changed_since_written]
        + [("file", None, None, name, None, None) for name in report.changed_files]
        + [
            ("score", d.scoring, d.sample_id, d.field, d.stored, d.recomputed)
            for d in report.differences
        ],
        title=f"audit of {report.run_id}",
        caption=verdict
        if report.ok
        else f"{count(len(report.changed_files) + len(report.changed_since_written), 'file')} "
        f"changed, {count(len(report.differences), 'difference')}",
    )
    return Output(grids=[grid], text=lines, data=report.to_dict())


def summary_output(summary: Any, lines: list[str]) -> Output:
    """A record or import summary (a dataclass): table: ``lines``; the others: its fields."""
    data = dataclasses.asdict(summary)
    return Output(grids=[Grid(list(data), [tuple(data.values())])], text=lines, data=data)


def bfcl_output(summary: dict[str, Any], extra: dict[str, Any]) -> Output:
    """BFCL's accuracy per category and overall, and how many samples had each error type;
    json: the summary (``accuracy``, ``valid``, ``total``, ``categories`` ...)."""
    title = f"{summary['run_id']}  ({summary.get('model') or 'unknown model'})"
    rows: list[Sequence[Any]] = [
        (name, row["valid"], row["total"], row["accuracy"])
        for name, row in summary["categories"].items()
    ]
    rows.append(("overall", summary["valid"], summary["total"], summary["accuracy"]))
    grids = [
        Grid(
            ["category", "valid", "total", "accuracy"],
            rows,
            title=title,
            caption=f"{_not_ok(summary)}; scoring: {summary['scoring']}",
            digits=".4f",
            null="—",
        )
    ]
    if summary.get("error_types"):
        grids.append(
            Grid(
                ["error_type", "samples"],
                list(summary["error_types"].items()),
                title="BFCL error types",
            )
        )
    return Output(grids=grids, data={**summary, **extra})


def replay_output(summary: Any, store: Any) -> Output:
    """A replay's summary: table: what it served and where samples diverged; the others: its
    fields (the first divergences among them)."""
    where = "" if str(store) == "traces" else f" --store {shlex.quote(str(store))}"
    kinds = ", ".join(f"{k} x{v}" for k, v in sorted(summary.by_component.items()))
    tools = ", ".join(f"{k} {v}" for k, v in sorted(summary.tool_outputs.items())) or "none"
    held = _samples(summary.recorded)
    # what the counts count: a run's rows, trials when it has some (so the head says them)
    unit = "trial" if summary.trials > 1 else "sample"
    rows = partial(count, noun=unit)
    counted = rows if summary.trials > 1 else str
    if summary.trials > 1:  # (as record's summary says them: its rows are trials)
        held = f"{summary.recorded} trials ({summary.trials} per sample)"
        if summary.recorded % summary.trials == 0:
            held = f"{_samples(summary.recorded // summary.trials)}, {summary.trials} trials each"
            held += f" ({summary.recorded} trials)"
    lines = [
        f"replay {summary.run_id} of {summary.parent_run_id}: {held}, "
        f"{counted(summary.diverged_samples)} diverged" + (f" ({kinds})" if kinds else "")
        + f", {counted(summary.ok)} ok, {count(summary.turns_served, 'turn')} served, "
        f"{count(summary.live_calls, 'live call')}; tool outputs compared: {tools} -> "
        f"{summary.run_dir}"
    ]  # fmt: skip
    if summary.forked_samples and summary.offline:  # (no live call left the recording)
        lines.append(
            f"{rows(summary.forked_samples)} reached the --fork-at turn, where --offline "
            f"refused {'its' if summary.forked_samples == 1 else 'their'} call to the --then "
            "model (LiveCallRefused)"
        )
    elif summary.forked_samples:
        lines.append(
            f"{rows(summary.forked_samples)} went on with the --then model at the --fork-at "
            f"turn ({_their(summary.forked_samples)} served before it)"
        )
    if summary.already_replayed:
        lines.append(
            f"(already replayed: {summary.run_id} holds every sample of a replay with these "
            "inputs and this code; --overwrite replays it again)"
        )
    if summary.awaiting_user:
        lines.append(
            f"{_awaiting(summary.awaiting_user, unit)} on with another user message, which a "
            "replay through an agent cannot send (it sends each sample's first one only)"
        )
    errors = {k: v for k, v in summary.error_types.items() if k not in ("diverged", "missing")}
    if missing := summary.error_types.get("missing", 0):
        lines.append(
            f"{count(missing, 'trial')} not replayed: {summary.parent_run_id} holds no recording "
            f"of {'it' if missing == 1 else 'them'} (status missing)"
        )
    if errors:
        lines.append("errors: " + ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())))
    if summary.recorded_errors:
        lines.append(
            f"{rows(summary.recorded_errors)} ended in the error "
            f"{_their(summary.recorded_errors)} ended in, where it did (no change)"
        )
    for d in summary.divergences[:10]:
        trial = f" (trial {d['trial']})" if d["trial"] else ""
        found = Divergence(d["turn"], d["component"], d["path"], d["recorded"], d["replayed"])
        lines.append(f"  {d['sample_id']}{trial}: {found.line()}")
    if summary.diverged_samples > 10:
        lines.append(
            f'  ... all of them: tcbreplay sql "select * from divergences where run_id = '
            f"'{summary.run_id}'\"{where}"
        )
    # (a sample that diverged scores with the calls it made until then; one in error, alone,
    # with nothing the model under test did)
    if summary.ok or summary.error_types.get("diverged"):
        lines.append(
            f"next: tcbreplay score {summary.run_id} --gold-run {summary.parent_run_id}{where}"
        )
    data = dataclasses.asdict(summary)
    columns = ["sample_id", "trial", "turn", "component", "path", "recorded", "replayed"]
    grid = Grid(
        columns,
        [tuple(d[c] for c in columns) for d in summary.divergences],
        title=f"divergences of {summary.run_id}",
    )
    return Output(grids=[grid], text=lines, data=data)


def _samples(n: int) -> str:
    """``n`` samples, in the singular for one."""
    return count(n, "sample")


def _their(n: int) -> str:
    """What ``n`` samples' recordings are called in a line about them."""
    return "its recording" if n == 1 else "their recordings"


def _awaiting(n: int, unit: str) -> str:
    return f"1 {unit}'s recording goes" if n == 1 else f"{n} {unit}s' recordings go"


def _not_ok(summary: dict[str, Any]) -> str:
    """A scoring's samples that are not ok, as its caption says them: in error (recording's
    or an import's), and missing (an import's samples without a trace) apart."""
    missing = summary.get("n_missing") or 0
    errors = (summary.get("n_errors") or 0) - missing
    said = [f"{errors} with recording errors"] if errors or not missing else []
    return ", ".join(said + ([f"{missing} missing (no trace)"] if missing else []))
