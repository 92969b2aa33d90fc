"""What ``tcbreplay validity`` prints: per run, each metric's means by outcome, its AUC and
point-biserial r with their intervals, and pass^k with trials (see
:mod:`tcbreplay._compare.validity`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tcbreplay._cli.render import Grid, Output, Whole
from tcbreplay._words import count, noun_for

VALIDITY_NOTE = (
    "AUC: the chance that a success scores better than a failure (ties half); 0.5 is no "
    "signal, above 0.5 the metric tracks success. r: point-biserial correlation with the "
    "outcome. Both oriented by 'better' (ahr: lower is better)."
)


def _pair(values: list[float | None]) -> str:
    low, high = values
    return Whole("[" + ", ".join("—" if v is None else f"{v:.4f}" for v in (low, high)) + "]")


def validity_output(results: list[Any]) -> Output:
    """Per run, each metric's means by outcome, AUC and r with their intervals, and pass^k
    with trials; csv: a row per run and metric; json: the run's object (a list of them with
    several runs)."""
    grids: list[Grid] = []
    notes: list[str] = []
    csv_rows: list[Sequence[Any]] = []
    for v in results:
        grids.append(
            Grid(
                [
                    "metric",
                    "better",
                    "n",
                    "mean if true",
                    "mean if false",
                    "AUC",
                    "95% interval",
                    "r",
                    "95% interval",
                ],
                [
                    (
                        name,
                        m["orientation"],
                        m["n"],
                        m["mean_if_true"],
                        m["mean_if_false"],
                        m["auc"],
                        _pair(m["auc_ci"]),
                        m["r"],
                        _pair(m["r_ci"]),
                    )
                    for name, m in v.metrics.items()
                ],
                title=f"{v.run_id}: outcome {v.outcome}  (scoring {v.scoring})",
                caption=f"{v.n} {'trials' if v.trials > 1 else 'samples'} with an outcome "
                f"({v.n_true} true, {v.n_false} false), {v.no_outcome} without"
                + (f", of {v.n_samples} samples" if v.trials > 1 else "")
                + f"; bootstrap: {v.n_boot} resamples of samples, seed {v.seed}",
                digits=".4f",
                null="—",
            )
        )
        notes += [f"{v.run_id}: {name}: {m['note']}" for name, m in v.metrics.items() if m["note"]]
        if v.no_outcome_samples:
            shown = ", ".join(v.no_outcome_samples[:10])
            more = len(v.no_outcome_samples) - 10
            notes.append(
                f"{v.run_id}: no outcome for {count(v.no_outcome, 'trial')} of "
                f"{noun_for(len(v.no_outcome_samples), 'sample')} {shown}"
                + (f" and {more} more" if more > 0 else "")
            )
        if v.pass_k:
            names = [c for c in v.pass_k[0] if c != "k"]
            grids.append(
                Grid(
                    ["k", *(f"pass^k {c}" for c in names)],
                    [(row["k"], *(row[c] for c in names)) for row in v.pass_k],
                    title=f"{v.run_id}: pass^k",
                    digits=".4f",
                    null="—",
                )
            )
        for name, m in v.metrics.items():
            csv_rows.append(
                (
                    v.run_id,
                    v.scoring,
                    v.outcome,
                    name,
                    m["orientation"],
                    m["n"],
                    m["n_true"],
                    m["n_false"],
                    m["mean_if_true"],
                    m["mean_if_false"],
                    m["auc"],
                    *m["auc_ci"],
                    m["r"],
                    *m["r_ci"],
                )
            )
    rows = Grid(
        [
            "run_id",
            "scoring",
            "outcome",
            "metric",
            "orientation",
            "n",
            "n_true",
            "n_false",
            "mean_if_true",
            "mean_if_false",
            "auc",
            "auc_low",
            "auc_high",
            "r",
            "r_low",
            "r_high",
        ],
        csv_rows,
    )
    data = [v.to_dict() for v in results]
    return Output(
        grids=grids,
        rows=rows,
        data=data[0] if len(data) == 1 else data,
        notes=[VALIDITY_NOTE, *notes],
    )
