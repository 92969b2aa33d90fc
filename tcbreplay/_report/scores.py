"""The scores a report shows of a run: its stored scoring when current, else scored in memory.

A stored scoring is used when its audit record matches the run's current files and the
scoring SQL; otherwise the run is scored with the options it was stored with, or those the
scoring's name stands for, and nothing is written to the store.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

from tcbreplay._report.calls import keyed
from tcbreplay._score.audit_record import current_sha256, sql_sha256
from tcbreplay._score.options import ScoreOptions, missing_scoring_hint
from tcbreplay._score.read_results import read_summary, refuse_repeated_rows
from tcbreplay._score.run import score_run
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCORES, SCORES_SCHEMA
from tcbreplay.errors import InputError, TcbReplayError

# the scores' columns the report reads: the page's, the intervals' and the validity panel's
_SCORE_COLUMNS = [
    "sample_id",
    "trial",
    "sample_index",
    "status",
    "n_gold",
    "n_agent",
    "tsa",
    "tp",
    "ahr",
    "args_invalid",
    "args_total",
    "args_missing",
    "exact",
    "write_exact",
    "first_divergence",
    "covered",
]


def read_frame(path: Any, columns: list[str] | None = None) -> pl.DataFrame:
    """A Parquet file of the store as a frame, wherever the store is (``columns``: those of
    them it has, else every one)."""
    from tcbreplay._store.parquet import read_schema, read_table

    if columns is not None:
        names = set(read_schema(path).names)
        columns = [c for c in columns if c in names]
    frame = pl.from_arrow(read_table(path, columns=columns))
    assert isinstance(frame, pl.DataFrame)
    return frame


def report_scores(
    store: Store, run: Run, allow_incomplete: bool, scoring: str = "spec", retry: str | None = None
) -> tuple[dict[str, Any], pl.DataFrame, bool]:
    """The stored scoring ``scoring`` if its audit record matches the run's files and the
    scoring SQL; otherwise score in memory with the options it was stored with, or those its
    name stands for (writes nothing)."""
    folder = run.scores_dir(scoring)
    wanted = ScoreOptions.from_scoring(scoring)
    stored_options = None
    kept: pl.DataFrame | None = None  # the stored scores, when current
    try:
        # its shape and options checked (a bad one is scored anew, by the folder's name)
        summary, stored_options = read_summary(run, folder)
        audit = summary.get("audit") or {}
        hashes = audit.get("inputs_sha256") or {}
        current = (
            run.has_data()
            and "by_tool" in summary
            # a spec folder scored under an earlier version's defaults (abs_tol 1e-9) is not
            # the default scoring of today (roles given with --role only add write_exact)
            and wanted is not None
            and dataclasses.replace(stored_options, roles=()) == wanted
            and audit.get("sql_sha256") == sql_sha256()
            and all(
                hashes.get(path.name) == current_sha256(run, path.name, audit)
                for path in (run.samples_path, run.messages_path)
            )
        )
        if current:
            kept = read_frame(folder / "scores.parquet", _SCORE_COLUMNS)
    except (OSError, ValueError, AttributeError, TypeError, pl.exceptions.PolarsError):
        pass  # never scored, or unreadable (not JSON, not UTF-8, no object): score below
    except TcbReplayError:
        stored_options = None  # options no version writes: scored by the name below
    if kept is not None:
        refuse_repeated_rows(run, folder / "scores.parquet", kept)
        return summary, keyed(kept).sort("sample_index"), False
    options = (
        stored_options
        if stored_options is not None and (stored_options.scoring == scoring)
        else wanted
    )
    if options is None:
        stored = sorted(p.parent.name for p in (run.dir / SCORES).glob("*/summary.json"))
        raise InputError(
            f"run {run.run_id!r} has no scoring {scoring!r}",
            hint=missing_scoring_hint(run.run_id, scoring, stored),
        )
    parts: list[pl.DataFrame] = []  # each part's scores as it comes, the report's columns

    def keep(part: pl.DataFrame, _pairs: pl.DataFrame | None) -> None:
        parts.append(part.select(c for c in _SCORE_COLUMNS if c in part.columns))

    result = score_run(
        store, run.run_id, options, allow_incomplete=allow_incomplete, write=False, each_part=keep,
        retry=f"{retry}{run.store_option()} --allow-incomplete" if retry else None,
    )  # fmt: skip
    if not parts:
        empty = pl.from_arrow(SCORES_SCHEMA.empty_table())
        assert isinstance(empty, pl.DataFrame)
        parts = [empty.select(_SCORE_COLUMNS)]
    scores = pl.concat(parts, rechunk=True)
    return result.summary, keyed(scores).sort("sample_index"), True
