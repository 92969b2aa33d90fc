"""The scores two compared runs are compared by: a run's stored scoring with its chosen
pairs, or computed in memory where nothing current is stored, and which options of two runs'
stored scorings of one name differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from tcbreplay._score.audit_record import sql_sha256
from tcbreplay._score.read_results import (
    read_scoring_file,
    read_summary,
    refuse_repeated_rows,
    scoring_file_batches,
)
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCORES
from tcbreplay.errors import InputError

if TYPE_CHECKING:
    from tcbreplay._score.options import ScoreOptions

METRICS = ("tsa", "tp", "ahr")
# the outcome metrics: shares (exact, write_exact) and a position, shown beside the three;
# whether a sample regressed is still decided by the three alone
OUTCOMES = ("exact", "write_exact", "first_divergence")
SCORE_COLUMNS = ["sample_id", "sample_index", "n_gold", *METRICS, "args_invalid", "args_total"]
PAIR_COLUMNS = ["sample_id", "tool", "args_invalid", "args_valid"]
_PAIR_NUMBERS = PAIR_COLUMNS[1:]  # (read apart from the ids, which are mostly only checked)
# what diff reads of the scores (a file written before trials or the outcomes reads without)
DIFF_COLUMNS = [*SCORE_COLUMNS, "trial", *OUTCOMES, "pairs"]


def load_scores(
    store: Store, run: Run, scoring: str, like: list[Run] | None = None,
    columns: list[str] | None = None, options: ScoreOptions | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:  # fmt: skip
    """Stored per-sample scores and chosen pairs of a scoring, or computed in memory with the
    options it was stored with in one of the runs ``like``, else those its name stands for
    (so also when the run's files changed since it was stored: :meth:`Run.changed_since`).
    ``columns``: only these of the scores, those the scoring has (None: all of them). Of the
    pairs, ``PAIR_COLUMNS``, each pair's sample given by the row of the scores it is of
    (``row``) where the pairs list each row's pairs in the rows' order, as scoring writes
    them (:func:`pair_rows`), else by its ``sample_id``. ``options``: computed in memory with
    these, whatever is stored."""
    folder = run.scores_dir(scoring)
    kept = options is None and (folder / "scores.parquet").exists()
    if kept and _named_options(run, scoring, current=True):
        found = read_scoring_file(run, folder / "scores.parquet", SCORE_COLUMNS, columns)
        refuse_repeated_rows(run, folder / "scores.parquet", found)
        pairs_path = folder / "pairs.parquet"
        if not pairs_path.exists():
            return found, None
        numbers = read_scoring_file(run, pairs_path, PAIR_COLUMNS, _PAIR_NUMBERS, ("tool",))
        _, batches = scoring_file_batches(run, pairs_path, PAIR_COLUMNS, ["sample_id"])
        rows = pair_rows(found, numbers.height, (batch["sample_id"] for batch in batches))
        if rows is not None:  # (the pairs' ids were only read to check them, not kept)
            return found, numbers.with_columns(row=pl.Series(rows))
        ids = read_scoring_file(run, pairs_path, PAIR_COLUMNS, ["sample_id"])["sample_id"]
        return found, numbers.with_columns(ids)
    from tcbreplay._score.options import ScoreOptions, missing_scoring_hint
    from tcbreplay._score.run import score_run

    options = options or _stored_options(like or [], scoring) or ScoreOptions.from_scoring(scoring)
    if options is None:
        stored = sorted(p.parent.name for p in (run.dir / SCORES).glob("*/summary.json"))
        raise InputError(
            f"run {run.run_id!r} has no scoring {scoring!r}",
            hint=missing_scoring_hint(run.run_id, scoring, stored),
        )
    result = score_run(store, run.run_id, options, write=False)
    scores, pairs = result.scores, result.pairs
    if columns is not None:
        scores = scores.select(c for c in columns if c in scores.columns)
    if pairs is None:
        return scores, None
    rows = pair_rows(scores, pairs.height, [pairs["sample_id"]])
    if rows is not None:
        return scores, pairs.select(_PAIR_NUMBERS).with_columns(row=pl.Series(rows))
    return scores, pairs.select(PAIR_COLUMNS)


def _stored_options(runs: list[Run], scoring: str) -> ScoreOptions | None:
    """The options a scoring was stored with in one of ``runs``: its name rounds the
    tolerances to 6 digits, so the exact ones come from there."""
    for run in runs:
        folder = run.scores_dir(scoring)
        if (folder / "summary.json").exists() and _named_options(run, scoring):
            return read_summary(run, folder)[1]
    return None


def unlike_options(a: Run, b: Run, scoring: str) -> tuple[ScoreOptions | None, list[str]]:
    """Of two runs whose stored scorings of one name were scored with other options (the
    name leaves out the roles: ``--role``, a role file) or chose other tools to focus on: A's
    options, to score B with in memory (None: B's stored scores are compared), and what the
    comparison must say."""
    found_a, found_b = _stored_summary(a, scoring), _stored_summary(b, scoring)
    if found_a is None or found_b is None:
        return None, []
    (summary_a, options_a), (summary_b, options_b) = found_a, found_b
    if options_a != options_b:
        return options_a, [
            f"B ({b.run_id}) was scored {scoring} with other options than A ({a.run_id}) "
            f"({_options_text(options_a, options_b)}): B is scored in memory with A's"
        ]
    focus_a, focus_b = summary_a.get("focus"), summary_b.get("focus")
    if focus_a != focus_b:
        return None, [
            f"the runs' {scoring} focus on other tools (their specs give them other roles): "
            f"A {_focus_text(focus_a)}, B {_focus_text(focus_b)}"
        ]
    return None, []


def _stored_summary(run: Run, scoring: str) -> tuple[dict[str, Any], ScoreOptions] | None:
    folder = run.scores_dir(scoring)
    if not (folder / "summary.json").exists() or not _named_options(run, scoring, current=True):
        return None
    return read_summary(run, folder)


def _options_text(a: ScoreOptions, b: ScoreOptions) -> str:
    """What differs between two scorings' options: ``roles B's (A: A's)``, ..."""
    out = []
    for name in (f.name for f in dataclasses.fields(a)):
        mine, theirs = getattr(b, name), getattr(a, name)
        if mine != theirs:
            out.append(f"{name} {_option_value(mine)} (A: {_option_value(theirs)})")
    return "; ".join(out)


def _option_value(value: Any) -> str:
    if isinstance(value, tuple) and all(isinstance(v, tuple) for v in value):
        return ", ".join("=".join(map(str, pair)) for pair in value) or "none"
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _focus_text(focus: Any) -> str:
    tools = focus.get("tools") if isinstance(focus, dict) else None
    return ", ".join(map(str, tools)) if isinstance(tools, list) else "every tool"


def _named_options(run: Run, scoring: str, current: bool = False) -> bool:
    """Whether the run's stored scoring ``scoring`` was scored with options of that name: a
    spec folder written under an earlier version's defaults (abs_tol 1e-9) was not, and is
    compared as if the run had none (scored in memory); ``current``: and of the run's files
    as they are."""
    folder = run.scores_dir(scoring)
    if not (folder / "summary.json").exists():
        # a scoring writes its summary last: scores without one are no scoring it finished
        return False
    summary, options = read_summary(run, folder)
    if options.scoring != scoring:
        return False
    if not current:
        return True
    audit = summary.get("audit")
    # scored by other SQL than today's (an earlier version's): scored again, as report does
    sql = audit.get("sql_sha256") if isinstance(audit, dict) else None
    return sql in (None, sql_sha256(options.scorer)) and not run.changed_since(summary)


def pair_rows(
    scores: pl.DataFrame, n_pairs: int, id_batches: Iterable[pl.Series]
) -> np.ndarray | None:
    """The row of ``scores`` each of ``n_pairs`` pairs is of, when the pairs (whose sample
    ids come in ``id_batches``, in order) list each row's pairs (its ``pairs`` count) in the
    rows' order, as scoring writes them; None otherwise (a file written otherwise: the pairs
    are then matched by sample id). The ids are checked a batch at a time, and not kept:
    each row's pairs are one run of its id, starting where the counts say."""
    if "pairs" not in scores.columns:
        return None
    counts = scores["pairs"].fill_null(0).to_numpy().astype(np.int64)
    if (counts < 0).any() or int(counts.sum()) != n_pairs:
        return None
    having = np.flatnonzero(counts)  # the rows with pairs, and where their pairs start
    starts = np.cumsum(counts)[having] - counts[having]
    ids = scores["sample_id"]
    seen = found = 0  # pairs and runs of one id seen so far
    last: Any = None  # the id the batch before ended with
    for batch in id_batches:
        if not len(batch):
            continue
        runs = batch.rle_id().to_numpy()
        local = np.flatnonzero(np.diff(runs, prepend=-1))
        if seen and batch[0] == last:  # a run going on from the batch before
            local = local[1:]
        upto = found + len(local)
        if upto > len(starts) or not np.array_equal(local + seen, starts[found:upto]):
            return None
        if not ids.gather(having[found:upto]).equals(batch.gather(local)):
            return None
        seen, found, last = seen + len(batch), upto, batch[-1]
    if seen != n_pairs or found != len(starts):
        return None
    return np.repeat(np.arange(len(counts)), counts)
