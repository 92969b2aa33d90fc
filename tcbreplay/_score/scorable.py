"""Whether a stored run can be scored, and what its status tells a reader before the metrics.

A run with nothing stored, or unfinished without --allow-incomplete, is refused, naming what
waits in its journal and the command that finishes it; one scored as it is carries warnings
(samples that ended in error or diverged, a partial run, samples unread in the journal).
"""

from __future__ import annotations

import shlex
from typing import Any

from tcbreplay._store.objects import is_remote
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import JOURNAL, JOURNAL_CHUNKS, counted_as
from tcbreplay._store.shards import SELECTION, finish_hint, shard_command, shard_progress
from tcbreplay._store.tables import shown_status
from tcbreplay._words import count
from tcbreplay.errors import StoreError

# how a run that scores without --allow-incomplete ended: every sample recorded, imported,
# or the samples asked for (record --limit, --sample-id)
SCORABLE = ("complete", "imported", "partial")


def _journal_place(run: Run) -> tuple[str, str]:
    """Where a run's finished samples wait before they are folded, and what folds them."""
    if is_remote(run.dir):
        return f"the journal's batches ({JOURNAL_CHUNKS}/)", "`record --resume`"
    if any(run.dir.glob("journal-*-of-*.jsonl")):  # record --shard I/N's journals
        return "the shards' journals (journal-I-of-N.jsonl)", "the last shard to finish"
    if run.manifest.get("source") in ("replay", "collect"):  # (record --resume refuses them)
        return JOURNAL, f"`{run.resume_command()}`"
    return JOURNAL, "`record --resume`"


def check_scorable(run: Run, allow_incomplete: bool, retry: str | None = None) -> None:
    """Refuse runs with nothing stored (saying what finished samples wait in the journal,
    where scoring does not read), and unfinished runs unless allowed (the journal's samples
    of one scored as it is are among its warnings: recording_warnings), saying to run
    ``retry`` with --allow-incomplete (default: score)."""
    status = shown_status(run) or run.status
    if not run.has_data():
        journal = _waiting(run)
        raise StoreError(
            f"run {run.run_id!r} has no stored samples yet (status {status})"
            + (f": {journal}" if journal else ""),
            hint=finish_hint(run),
        )
    if status not in SCORABLE and not allow_incomplete:
        raise StoreError(
            f"run {run.run_id!r} is {status}: not every sample was recorded",
            hint=f"{finish_hint(run)}; or {retry.split()[1] if retry else 'score'} what is "
            f"there with: {retry or _incomplete_score(run)}",
        )


def _waiting(run: Run) -> str:
    """What finished samples wait in the run's journal, unread by scoring ('' for none)."""
    waiting = run.unfolded_records()
    if not waiting:
        return ""
    where, folder = _journal_place(run)
    return (
        f"{count(waiting, 'finished sample')} {'waits' if waiting == 1 else 'wait'} in {where}, "
        f"which {folder} folds into the Parquet files that scoring reads"
    )


def recording_warnings(run: Run, metrics: dict[str, Any]) -> list[str]:
    """What a reader must know before the metrics: samples that ended in error while
    recording (they score with the calls made before the error), a partial or unfinished run."""
    out = []
    n, errors = metrics.get("n_samples", 0), metrics.get("n_errors", 0)
    each = counted_as((run.manifest.get("totals") or {}).get("trials") or metrics.get("trials"))
    status = shown_status(run) or run.status  # (interrupted, not recording, once none writes)
    replayed = run.manifest.get("source") == "replay"
    sharded = None if status in SCORABLE or replayed else shard_progress(run)
    if replayed:
        diverged = int((run.manifest.get("totals") or {}).get("diverged") or 0)
        if diverged:
            out.append(
                f"{diverged} of {n} {each} diverged from their recording and score with the "
                'calls made until then (tcbreplay sql "select * from divergences" says where)'
            )
        errors -= diverged
    if errors:
        imported = run.manifest.get("source") == "import"
        # (with what the recording asked for: a bare --retry-errors records the whole dataset)
        asked = run.manifest.get(SELECTION)
        retry = shard_command(run, None, asked if isinstance(asked, dict) else {}, "--retry-errors")
        again = f"; re-run them with: {retry}"
        if sharded is not None:  # not the whole run's: the selection's, once no shard records
            retry = shard_command(run, None, sharded.selection, "--retry-errors")
            again = f"; re-run them, once every shard has finished, with: {retry}"
        if replayed:
            again = f"; replay them again with: {run.resume_command()} --overwrite"
        out.append(
            f"{errors} of {n} {each} "
            + ("are stored as errors or missing" if imported else "ended in error while recording")
            + (
                " and score with the calls their traces hold (a missing one, none)"
                if imported
                else " and score with the calls made before the error"
            )
            + ": these metrics do not measure the model alone"
            + ("" if imported else again)
        )
    total = (run.manifest.get("totals") or {}).get("samples")
    if status == "partial":
        out.append(
            f"partial run: {n} of {total} {each} recorded; the metrics cover only those "
            f"({_rest(run, replayed)})"
        )
    elif sharded is not None:  # counted against what the shards were asked for
        out.append(
            f"run {status}: {sharded.asked - sharded.missing} of the {sharded.counted()} "
            f"recorded, scored as they are; {sharded.next_steps(run)}"
        )
    elif status not in SCORABLE:
        # (a run cut short before its manifest had its totals says how many it holds)
        of = f" of {total}" if isinstance(total, int) else ""
        out.append(f"run {status}: {n}{of} {each} recorded, scored as they are")
    journal = _waiting(run)
    if journal:  # (a killed recording's: in the result's warnings, as the others are)
        out.append(f"{journal}; run {run.run_id!r} is scored without them")
    return out


def _rest(run: Run, replayed: bool) -> str:
    """How a partial run gets the rest of its samples: recorded, replayed; a serve log holds
    the conversations its clients had, and a replay every sample its partial parent holds
    (the command that made it again would do nothing: helper-71)."""
    if not replayed:
        return f"record the rest with: {run.resume_command()}"
    block = run.manifest.get("replay") or {}
    if block.get("served_by"):
        return "a serve log holds the conversations its clients had"
    parent_id = block.get("parent_run_id")
    parent = Run(run.dir.parent / str(parent_id)) if parent_id else None
    try:
        partial = parent is not None and parent.status == "partial"
    except StoreError:  # (the parent removed since, or unreadable: the command as it is)
        partial = False
    if parent is not None and partial:
        return (f"its parent {parent_id} holds no more: record the rest of it with: "
                f"{parent.resume_command()}, then replay again")  # fmt: skip
    return f"replay the rest with: {run.resume_command()}"


def _incomplete_score(run: Run) -> str:
    """The command that scores what an unfinished run holds (which diff and report then
    read), naming its store unless it is the default."""
    return f"tcbreplay score {shlex.quote(run.run_id)}{run.store_option()} --allow-incomplete"
