"""The samples a run stored lately: what a resumed recording's rate window starts with.

A recording killed (kill -9, a preempted machine) and resumed must not start ``--max-rpm``
afresh: the calls its predecessor made in its last minute still count. This reads the
samples stored since a time, cheaply on a run of any size: a journal from its end back to
its first line older than that (its lines are appended as samples finish), and of the
Parquet files only the rows that finished since then (and those rows' AI messages).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tcbreplay._store.journal import journals, read_journal
from tcbreplay._store.objects import is_remote
from tcbreplay._store.parquet import read_schema, read_table
from tcbreplay._store.schema import MESSAGES, SAMPLES


class RecentSample(NamedTuple):
    """One stored trial of a sample, as far as the rate limits are concerned."""

    finished_at: float  # wall-clock seconds
    status: str
    attempts: int | None  # 1 plus the model calls retried
    ai_messages: int  # the model calls that answered
    tokens: int | None  # the usage its messages report
    row: int | None  # its sample_index (which shard's it is)


# Journal lines are appended as samples finish, so nearly in finished_at order; a line this
# much older than the time asked for ends the read (out-of-order appends lie well within).
SLACK_S = 60.0
# bytes read at a time from a journal's end
BLOCK = 1 << 20


def recent_samples(
    run_dir: Path, since: float, rows: Collection[int] | None = None
) -> list[RecentSample]:
    """The samples of the run in ``run_dir`` stored (finished) at ``since`` (wall-clock
    seconds) or later, from its journals and its Parquet files alike; ``rows``: only those
    of these row numbers (``sample_index``: a shard's, see :mod:`tcbreplay._store.shards`).
    A sample stored twice (recorded again by ``--retry-errors``) counts each time: both
    recordings made their calls."""

    def ours(index: Any) -> bool:
        return rows is None or index in rows

    out = [
        _from_record(r)
        for path in journals(run_dir)
        for r in _records_since(path, since)
        if ours(r.get("sample_index"))
    ]
    out.extend(_rows_since(run_dir, since, rows))
    return out


def _from_record(record: dict[str, Any]) -> RecentSample:
    ai = [m for m in record.get("messages") or [] if m.get("type") == "ai"]
    return RecentSample(
        _seconds(record["finished_at"]),
        record.get("status") or "error",
        record.get("attempts"),
        len(ai),
        _sum(_tokens(m.get("total_tokens"), m.get("input_tokens"), m.get("output_tokens"))
             for m in ai),
        record.get("sample_index"),
    )  # fmt: skip


def _records_since(path: Path, since: float) -> Iterator[dict[str, Any]]:
    """The records of a journal file that finished at ``since`` or later, last first."""
    lines = _lines_from_end(path) if not is_remote(path) else _reversed(path)
    for line in lines:
        try:
            record = json.loads(line) if isinstance(line, bytes) else line
            finished = _seconds(record["finished_at"])
        except (ValueError, TypeError, KeyError):
            continue  # not a sample's line: the resume's own read of the journal says so
        if finished >= since:
            yield record
        elif finished < since - SLACK_S:
            return


def _reversed(path: Path) -> Iterator[dict[str, Any]]:
    # a batch on object storage is small (BATCH_LINES at most): read whole, last first
    yield from reversed(list(read_journal(path)))


def _lines_from_end(path: Path) -> Iterator[bytes]:
    """The complete lines of a file, last first: a torn last line (a crash mid-append) is
    left out, as the journal's readers leave it."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    with f:
        pos = f.seek(0, os.SEEK_END)
        head = b""  # the part of a line that starts before ``pos``, if any
        torn = True  # the bytes after the file's last newline, yet to be dropped
        while pos > 0:
            size = min(BLOCK, pos)
            pos -= size
            f.seek(pos)
            parts = (f.read(size) + head).split(b"\n")
            head = parts[0]
            lines = parts[1:]
            if torn and lines:
                lines.pop()  # (empty when the file ends with a newline)
                torn = False
            for line in reversed(lines):
                if line.strip():
                    yield line
        if head.strip() and not torn:
            yield head


def _rows_since(run_dir: Path, since: float, rows: Collection[int] | None) -> list[RecentSample]:
    """The rows of the samples file that finished at ``since`` or later, with their AI
    messages counted and their tokens summed from the messages file."""
    samples_path = run_dir / SAMPLES
    if not samples_path.exists():
        return []
    names = read_schema(samples_path).names
    if "finished_at" not in names or "sample_index" not in names:
        return []  # (no store version wrote samples without them)
    when = dt.datetime.fromtimestamp(since, dt.UTC)
    columns = ["sample_index", "finished_at", "status", "attempts", "n_messages"]
    table = read_table(
        samples_path,
        columns=[c for c in columns if c in names],
        filters=[("finished_at", ">=", when)],
    )
    found = [row for row in table.to_pylist() if rows is None or row["sample_index"] in rows]
    if not found:
        return []
    counts, tokens = _ai_messages(run_dir / MESSAGES, [row["sample_index"] for row in found])
    out = []
    for row in found:
        index = row["sample_index"]
        ai = counts.get(index)
        out.append(
            RecentSample(
                row["finished_at"].timestamp(),
                row.get("status") or "error",
                row.get("attempts"),
                # without its messages: every message counted as a call (more than it made)
                ai if ai is not None else (row.get("n_messages") or 0),
                tokens.get(index),
                index,
            )
        )
    return out


def _ai_messages(path: Path, indexes: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    """The AI messages of the rows numbered ``indexes``: how many each has, and their
    tokens. The messages file is read only where those rows lie (it is in row order)."""
    if not path.exists():
        return {}, {}
    names = read_schema(path).names
    wanted = ["sample_index", "total_tokens", "input_tokens", "output_tokens"]
    table = read_table(
        path,
        columns=[c for c in wanted if c in names],
        filters=[
            ("type", "==", "ai"),
            ("sample_index", ">=", min(indexes)),
            ("sample_index", "<=", max(indexes)),
            ("sample_index", "in", indexes),
        ],
    )
    counts: dict[int, int] = {}
    tokens: dict[int, int] = {}
    for m in table.to_pylist():
        index = m["sample_index"]
        counts[index] = counts.get(index, 0) + 1
        used = _tokens(m.get("total_tokens"), m.get("input_tokens"), m.get("output_tokens"))
        if used:
            tokens[index] = tokens.get(index, 0) + used
    return counts, tokens


def _tokens(total: int | None, given: int | None, taken: int | None) -> int | None:
    """A message's tokens as the limiter counts them: its usage's total."""
    if total is not None:
        return total
    if given is None and taken is None:
        return None
    return (given or 0) + (taken or 0)


def _sum(values: Iterator[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _seconds(value: Any) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return dt.datetime.fromisoformat(value).timestamp()
