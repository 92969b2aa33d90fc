"""Ending a recording, however it ends (done, interrupted, stopped): fold the run's journal,
total its rows and set its status in the manifest, and say it in a :class:`RecordSummary`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay._record.agent import inline_tracing_hooks
from tcbreplay._record.failures import PROCESS_DIED, ChildFailed, RecordStop
from tcbreplay._record.loop import lean_gc
from tcbreplay._record.selection import Task
from tcbreplay._store.schema import utcnow
from tcbreplay._store.shards import ShardProgress
from tcbreplay._store.writer import RunWriter


@dataclass
class RecordSummary:
    """What a recording did, for the CLI to render."""

    run_id: str
    run_dir: str
    status: str
    total: int
    recorded: int
    ok: int
    errors: int
    retries: int
    duration_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    simulated: bool = False
    error_types: dict[str, int] = field(default_factory=dict)
    attempted: int = 0
    processes: int = 1
    trials: int = 1  # recordings of each sample (``total`` counts every one)
    # when this recording wrote the run's manifest as it ended (None: a shard that left that
    # to the last shard to finish)
    finished_at: str | None = None
    # a shard's, while its recording is under way: what its selection misses, of which shards
    sharding: ShardProgress | None = None
    # a recording that resumed a run another left unfinished (killed, or stopped): what it
    # found ("interrupted": a recording or its fold cut short; "failed"); None otherwise
    took_over: str | None = None


class RecordInterrupted(Exception):
    """Ctrl-C stopped a recording; everything finished so far was kept."""

    def __init__(self, summary: RecordSummary) -> None:
        super().__init__(f"recording of {summary.run_id} interrupted")
        self.summary = summary


def _record(
    run: Callable[[], None],
    samples: list[Task],
    writer: RunWriter,
    simulated: bool,
    total: int,
    wanted: tuple[set[str], int] | None = None,
    finish: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None,
) -> RecordSummary:
    """Run ``run`` (the recording of ``samples``), then finish the run; ``wanted``: the
    sample ids and trials a partial recording asked for (None: the whole dataset)."""
    started = time.perf_counter()
    try:
        if samples:
            with inline_tracing_hooks(), lean_gc():
                run()
    except KeyboardInterrupt:
        summary = finish_run(writer, "interrupted", time.perf_counter() - started, total, None,
                          finish)  # fmt: skip
        summary.simulated = simulated
        raise RecordInterrupted(summary) from None
    except RecordStop as stop:
        line = f"{stop.reason}: {stop.outcome.error}"
        summary = finish_run(writer, "failed", time.perf_counter() - started, total, line, finish)
        summary.simulated = simulated
        summary.attempted = len(samples)
        stop.summary = summary
        raise
    except ChildFailed as exc:  # (said in the manifest, as a stop is)
        line = f"{PROCESS_DIED}: {exc}"
        finish_run(writer, "failed", time.perf_counter() - started, total, line, finish)
        raise
    except BaseException:
        finish_run(writer, "failed", time.perf_counter() - started, total, None, finish)
        raise
    status = "partial" if wanted is not None else "complete"
    summary = finish_run(
        writer, status, time.perf_counter() - started, total, None, finish, wanted=wanted
    )
    summary.simulated = simulated
    summary.attempted = len(samples)
    return summary


def finish_run(
    writer: RunWriter,
    status: str,
    duration: float,
    total: int,
    stopped: str | None = None,
    finish: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None,
    *,
    wanted: tuple[set[str], int] | None = None,
) -> RecordSummary:
    """Fold the journal, write totals and status (and what ``finish`` makes of the rows) into
    the manifest, release the run.

    ``partial`` (some samples left out on purpose) becomes ``complete`` once every sample
    is stored, and ``incomplete`` while some that were asked for (``wanted``: sample ids and
    trials) are not (a shard of the selection not recorded yet); ``complete`` becomes
    ``incomplete`` while some are not. ``stopped`` says why
    a recording stopped early (kept in the manifest, like the status, until the next one).
    A shard that is not the last to finish leaves the manifest to the last one (status
    ``recording``)."""
    try:
        folded = writer.fold()
        rows = _stored_rows(writer.dir)
        if not folded:
            status = "recording"
        ok = sum(1 for r in rows if r["status"] == "ok")
        error_types: dict[str, int] = {}
        for r in rows:
            if r["status"] != "ok":
                key = r["error_type"] or r["status"]
                error_types[key] = error_types.get(key, 0) + 1
        before = writer.manifest.get("totals") or {}
        tokens_in = [r["input_tokens"] for r in rows if r["input_tokens"] is not None]
        tokens_out = [r["output_tokens"] for r in rows if r["output_tokens"] is not None]
        totals: dict[str, Any] = {
            "samples": total,
            "recorded": len(rows),
            "ok": ok,
            "errors": len(rows) - ok,
            "retries": sum(max(0, (r["attempts"] or 1) - 1) for r in rows),
            "input_tokens": sum(tokens_in) if tokens_in else None,
            "output_tokens": sum(tokens_out) if tokens_out else None,
            # (the run's: each recording's, resumed or not, added up as its tokens are)
            "duration_s": round((before.get("duration_s") or 0) + duration, 3),
        }
        diverged = error_types.get("diverged", 0)
        if diverged:  # a replay's samples that diverged (counted among the errors)
            totals["diverged"] = diverged
        if status == "recording":
            pass
        elif status == "partial" and len(rows) >= total:
            status = "complete"
        elif (status == "partial" and wanted is not None and _short_of(rows, *wanted)) or (
            status == "complete" and len(rows) < total
        ):
            status = "incomplete"
        ending: dict[str, Any] = {"stopped": stopped} if stopped else {}
        if not stopped and "stopped" in writer.manifest:
            ending["stopped"] = None  # an earlier recording's, resumed since
        if finish is not None and folded:
            ending.update(finish(rows, writer.manifest))
        finished_at = None
        before = getattr(writer, "before", None)
        ended = {**writer.manifest, "status": status, "totals": totals, **ending}
        if folded and before is not None and _same_but_times(ended, before):
            # nothing recorded (a rerun of a finished recording): the manifest, which scorings'
            # audit records hash, is put back as it was
            writer.write_manifest(before)
            finished_at = before.get("finished_at")
        elif folded:
            finished_at = utcnow().isoformat()
            writer.update_manifest(status=status, finished_at=finished_at, totals=totals, **ending)
    finally:
        writer.close()
    return RecordSummary(
        run_id=writer.run_id,
        run_dir=str(writer.dir),
        status=status,
        total=total,
        recorded=totals["recorded"],
        ok=ok,
        errors=totals["errors"],
        retries=totals["retries"],
        duration_s=duration,
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        error_types=error_types,
        finished_at=finished_at,
    )


def _same_but_times(ended: dict[str, Any], before: dict[str, Any]) -> bool:
    """Whether a manifest as a recording would end it differs from the one before it only in
    its times (its finish, and the duration added to the totals)."""

    def timeless(manifest: dict[str, Any]) -> dict[str, Any]:
        totals = {k: v for k, v in (manifest.get("totals") or {}).items() if k != "duration_s"}
        kept = {k: v for k, v in manifest.items() if k not in ("finished_at", "totals")}
        return {**kept, "totals": totals}

    return "finished_at" in before and timeless(ended) == timeless(before)


def _short_of(rows: list[dict[str, Any]], ids: set[str], trials: int) -> bool:
    """Whether ``rows`` lack some trial (below ``trials``) of a sample of ``ids``."""
    held = sum(1 for r in rows if r["sample_id"] in ids and (r.get("trial") or 0) < trials)
    return held < len(ids) * trials


def _stored_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of a run's samples file, with those its journals hold (folded or not)."""
    from tcbreplay._store.journal import journal_records
    from tcbreplay._store.parquet import read_table
    from tcbreplay._store.records import sample_rows
    from tcbreplay._store.schema import SAMPLES

    rows: dict[tuple[str, int], dict[str, Any]] = {}
    if (run_dir / SAMPLES).exists():
        for row in read_table(run_dir / SAMPLES).to_pylist():
            rows[(row["sample_id"], row.get("trial") or 0)] = row
    for row in sample_rows(list(journal_records(run_dir))):
        rows[(row["sample_id"], row.get("trial") or 0)] = row
    return list(rows.values())
