"""One part of a scoring: a range of a run's samples scored on its own.

The default scorer cuts a run into ranges of samples
(:func:`tcbreplay._score.translate.split_samples`) and scores each from the store alone: its
calls parsed, the kernels run, its rows made ready to write, its
:class:`~tcbreplay._score.fold.Tally`, the hashes of its sample keys and its lines of the
dashboard file. A part is scored by a thread of this process or by a Ray task on
any machine that reads the store (:mod:`tcbreplay._score.engines`); the parts' results are
folded in sample order (:mod:`tcbreplay._score.results`), so the outcome is the same however
many parts there were and wherever they ran.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay._score import dashboard, translate
from tcbreplay._score.flat_calls import FlatCalls
from tcbreplay._score.fold import Tally
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.roles import restrict
from tcbreplay._score.scorers.default import score_part
from tcbreplay._score.tool_params import Tools, sample_tool_sets
from tcbreplay._store.schema import SCORES_SCHEMA

# the tools a focused scoring keeps (or, exclude, leaves out); None: every tool
Focus = tuple[frozenset[str], bool] | None

# the columns of the scores the run-level numbers are computed from (runs of at most
# EXACT_FROM_ROWS rows; larger ones are tallied part by part)
SUMMARY_COLUMNS = (
    "category", "status", "tsa", "tp", "args_invalid", "args_total", "args_missing", "exact",
    "write_exact", "first_divergence", "covered",
)  # fmt: skip
# the columns of the scores that pass^k and the per-trial numbers read (runs of 2+ trials)
TRIAL_COLUMNS = (
    "sample_id", "trial", "status", "tsa", "tp", "ahr", "args_invalid", "args_total",
    "args_missing", "write_exact",
)  # fmt: skip

# only the bfcl scorer gives a verdict per sample, the default one outcomes
_VERDICTS = {
    "exact": pl.Boolean,
    "write_exact": pl.Boolean,
    "first_divergence": pl.Int32,
    "valid": pl.Boolean,
    "error_type": pl.String,
}


@dataclass(frozen=True)
class PartPlan:
    """What every part of one scoring needs besides its range of samples: plain data, sent
    to Ray tasks as it is. ``dashboard``: the dashboard file's mode, ``none`` for no file;
    ``trials``: the run's trials (its rows for pass^k are kept when more than one); ``exact``:
    the run-level numbers are tallied (:mod:`tcbreplay._score.fold`), not computed from the
    rows kept; ``keep``: each part's calls are kept too (for
    :func:`tcbreplay._score.run.compute_scores`)."""

    run_id: str
    options: ScoreOptions
    tools: Tools
    roles: dict[str, str]
    focus: Focus = None
    dashboard: str = "none"
    trials: int = 1
    exact: bool = False
    keep: bool = False


@dataclass
class PartResult:
    """A part's results: its rows of the scores and pairs files, its per-tool counts, its
    tally or the columns of its rows the run-level numbers are computed from (see
    :class:`PartPlan`), the sorted hashes of its (sample_id, trial) keys, its rows for pass^k
    (runs of 2+ trials), its listed samples of the dashboard file (the text, and how many)
    and, when the plan keeps them, its calls."""

    # Polars frames, or Arrow tables when the part was scored in a Ray task
    scores: pl.DataFrame | pa.Table
    pairs: pl.DataFrame | pa.Table
    tool_counts: pl.DataFrame
    keys: np.ndarray
    tally: Tally | None = None
    summary_rows: pl.DataFrame | None = None
    trial_rows: pl.DataFrame | None = None
    board: bytes = b""
    listed: int = 0
    flat: FlatCalls | None = None


class Stopped(Exception):
    """A part given up because another part failed or scoring was interrupted."""


def go_on(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped


def score_range(
    con: Any, samples: tuple[int, int], plan: PartPlan, stop: threading.Event | None = None
) -> PartResult:
    """Score the samples of ``con``'s run whose ``sample_index`` is in ``samples``
    (``lo <= index < hi``) with ``plan``; ``stop``: give up (:class:`Stopped`) once set."""
    options = plan.options
    flat = translate.load_flat(con, samples, options.side)
    keys = np.sort(flat.keys) if flat.keys is not None else np.zeros(0, np.uint64)
    if plan.focus is not None:  # every metric over the calls to the chosen tools only
        flat = restrict(flat, plan.focus[0], exclude=plan.focus[1])
    own_tools = None
    if flat.tools is not None:
        own_tools = sample_tool_sets(con, flat.tools, flat.samples["sample_id"])
    go_on(stop)
    part = score_part(flat, plan.tools, options.compare, own_tools)
    writes = [name for name, role in plan.roles.items() if role == "write"]
    if plan.focus is not None:  # the write tools the focus keeps
        writes = [name for name in writes if (name in plan.focus[0]) != plan.focus[1]]
    if writes:  # write_exact: exact of the write calls alone, in any order
        go_on(stop)
        only = score_part(restrict(flat, writes, order_free=True), plan.tools, options.compare,
                          own_tools, covered=False)  # fmt: skip
        part.scores = part.scores.with_columns(only.scores["exact"].alias("write_exact"))
    go_on(stop)
    scores = part.scores.with_columns(
        pl.lit(plan.run_id).alias("run_id"),
        pl.lit(options.scoring).alias("scoring"),
        *(pl.lit(None, t).alias(c) for c, t in _VERDICTS.items() if c not in part.scores.columns),
    ).select(SCORES_SCHEMA.names)
    board, listed = b"", 0
    if plan.dashboard != "none":
        board, listed = dashboard.part_text(con, samples, flat, scores, plan.dashboard)
    return PartResult(
        scores=scores,
        pairs=part.pairs,
        tool_counts=tool_sums(part.tool_counts),
        keys=keys,
        tally=Tally.of(scores) if plan.exact else None,
        summary_rows=None if plan.exact else scores.select(SUMMARY_COLUMNS),
        trial_rows=scores.select(TRIAL_COLUMNS) if plan.trials > 1 else None,
        board=board,
        listed=listed,
        flat=flat if plan.keep else None,
    )


def tool_sums(counts: pl.DataFrame) -> pl.DataFrame:
    """Per-tool counts summed per tool (of one part, or of parts already summed)."""
    return counts.group_by("tool", maintain_order=True).agg(pl.exclude("tool").sum())
