"""The shards of a recording (``record --shard I/N``, ``record --engine ray``): which rows each
records, and where a sharded recording stands.

A recording selects rows: the samples ``--sample-id`` names (all when none), in dataset
order, the first ``--limit`` of them, each for every trial. Its shards deal these out by their
place in the selection, trial by trial: place k (from 0) is shard k mod N + 1's. Every shard
computes the same from the same options (the manifest's ``shard_selection`` keeps them until
the run is ``complete`` or ``partial``), so shards differ by one row at most and none is
empty while N is at most the rows selected. Without ``--limit`` and ``--sample-id`` a row's
place is its number (``sample_index``): shard I records the rows numbered I - 1 modulo N.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tcbreplay import _json
from tcbreplay._store.locks import being_written, held_shards, lock_holder
from tcbreplay._store.objects import is_remote
from tcbreplay._store.schema import DATASET, LOCK
from tcbreplay._words import count

if TYPE_CHECKING:
    from tcbreplay._store.run_dir import Run

__all__ = [
    "SETTLED", "SHARD_SELECTION", "ShardProgress", "deal", "finish_hint", "select",
    "selection_options", "shard_command", "shard_progress",
]  # fmt: skip

# the manifest's record of the samples a sharded recording's shards were asked for
# (``limit``, ``sample_ids``) and of their N (``shards``, the latest shard's)
SHARD_SELECTION = "shard_selection"
# the same of a recording not in shards, the latest one (its finish hint asks for them again)
SELECTION = "selection"
# a run in these states is between recordings: a new one (sharded or not) may ask for others
SETTLED = ("complete", "partial")

T = TypeVar("T")


def select(ids: Sequence[str], limit: int | None, sample_ids: Collection[str] | None) -> list[int]:
    """The dataset positions a recording selects, of a dataset of these ``ids``: those
    ``sample_ids`` names (all when none), in dataset order, the first ``limit`` of them."""
    positions: Sequence[int] = range(len(ids))
    if sample_ids:
        wanted = set(sample_ids)
        positions = [k for k, sample_id in enumerate(ids) if sample_id in wanted]
    return list(positions[:limit] if limit is not None else positions)


def deal(items: Sequence[T], trials: int, shard: tuple[int, int] | None) -> list[tuple[T, int]]:
    """The rows of shard I of N (``shard``; None: every row) of a recording of ``items`` (the
    samples it selects, in dataset order), each ``trials`` times, as (item, trial): the places
    I - 1, I - 1 + N, ... of the selection's rows taken trial by trial."""
    first, step = (0, 1) if shard is None else (shard[0] - 1, shard[1])
    count = len(items)
    return [(items[place % count], place // count) for place in range(first, count * trials, step)]


def selection_options(selection: dict[str, Any]) -> list[str]:
    """A stored ``shard_selection`` as the ``record`` options that ask for it again."""
    ids = selection.get("sample_ids") or []
    out = [arg for sample_id in ids for arg in ("--sample-id", sample_id)]
    if selection.get("limit") is not None:
        out += ["--limit", str(selection["limit"])]
    return out


def shard_command(
    run: Run,
    shard: tuple[int, int] | str | None,
    selection: dict[str, Any],
    flag: str = "--resume",
) -> str:
    """The command that records shard ``shard`` (I, N; text such as ``I/8``; None: the whole
    run) of run ``run``, of the recording that asked for ``selection`` (its ``limit`` and
    ``sample_ids``), with the inputs and settings of its manifest; ``flag="--retry-errors"``
    also records the rows of it stored as errors again."""
    command = run.resume_command(flag)
    if shard is not None:
        command += f" --shard {shard if isinstance(shard, str) else f'{shard[0]}/{shard[1]}'}"
    more = " ".join(shlex.quote(arg) for arg in selection_options(selection))
    return f"{command} {more}" if more else command


@dataclass
class ShardProgress:
    """Where a sharded recording that has not settled stands: its ``shards`` (N), the rows
    its selection asks for (``asked``: the samples it selects, each ``trials`` times) and
    those of them not stored (``missing``), the shards a live process records
    (``recording``) and those that miss rows with none recording them (``unfinished``), the
    shard folding every shard's samples into the run (``folding``: it holds the run's lock
    once every row is stored), and its selection (``selection``: its ``limit`` and
    ``sample_ids``)."""

    shards: int
    asked: int
    missing: int
    trials: int = 1
    recording: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    selection: dict[str, Any] = field(default_factory=dict)
    folding: int | None = None

    @property
    def partial(self) -> bool:
        """Whether the recording asks for some samples only (``--limit``, ``--sample-id``)."""
        return self.selection.get("limit") is not None or bool(self.selection.get("sample_ids"))

    def counted(self) -> str:
        """The rows asked for, in words: ``20 samples asked for``, ``282 trials (94 samples x
        3 trials)``."""
        n, trials = self.asked, self.trials
        what = count(n, "sample")
        if trials > 1:
            what = f"{n} trials ({count(n // trials, 'sample')} x {trials} trials)"
        return what + (" asked for" if self.partial else "")

    def next_steps(self, run: Run) -> str:
        """What to do for the run to be recorded: the shards to run, or to wait for.
        Never a command that records outside the selection, nor one refused meanwhile (a
        writer of the whole run, while shards record)."""
        parts = []
        if self.recording:
            these = _shards(self.recording, self.shards)
            one = len(self.recording) == 1
            parts.append(f"{these} {'is' if one else 'are'} still recording")
        if self.unfinished:
            these = _shards(self.unfinished, self.shards)
            one = len(self.unfinished) == 1
            which = f"{self.unfinished[0]}/{self.shards}" if one else f"I/{self.shards}"
            command = shard_command(run, which, self.selection)
            parts.append(
                f"{these} {'has' if one else 'have'} not finished: run {'it' if one else 'them'} "
                f"(the same command with --shard {which}, or: {command}"
                + ("" if one else f", for I in {_numbers(self.unfinished)}")
                + ")"
            )
        if not parts and self.folding is not None:  # the last shard to finish, at it now
            parts.append(
                f"shard {self.folding}/{self.shards} is folding every shard's samples into the "
                "run: wait for it to finish"
            )
        if not parts:  # every row stored, not yet folded (the last shard was killed folding)
            command = shard_command(run, (1, self.shards), self.selection)
            parts.append(
                "every shard has recorded its samples, which the last to finish did not fold: "
                f"run any shard again (the same command, or: {command})"
            )
        return "; ".join(parts)


def _shards(shards: list[int], n: int) -> str:
    """``shard 2/4``, ``shards 1/4 and 3/4``, ``shards 1/9, 2/9, 3/9 and 5 more``."""
    names = [f"{i}/{n}" for i in shards]
    if len(names) == 1:
        return f"shard {names[0]}"
    if len(names) > 6:
        return f"shards {', '.join(names[:3])} and {len(names) - 3} more"
    return f"shards {', '.join(names[:-1])} and {names[-1]}"


def _numbers(numbers: list[int]) -> str:
    """Sorted whole numbers, runs of them as ranges: ``2, 4 to 7, 9``."""
    spans: list[list[int]] = []
    for k in numbers:
        if spans and k == spans[-1][1] + 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a} to {b}"
                     for a, b in spans)  # fmt: skip


def shard_progress(run: Run, ids: Sequence[str] | None = None) -> ShardProgress | None:
    """Where run ``run``'s sharded recording stands (None: no sharded recording under way,
    one of a tcbreplay that did not keep its N, or a run whose ``dataset.jsonl`` cannot be
    read); ``ids``: the dataset's sample ids, in order (read from that file when not given)."""
    if is_remote(run.dir):
        return None  # (shards record into a shared file system's store only)
    manifest = run.manifest
    stored = manifest.get(SHARD_SELECTION)
    if not isinstance(stored, dict) or manifest.get("status") in SETTLED:
        return None
    shards = stored.get("shards")
    if not isinstance(shards, int) or shards < 1:
        return None
    trials = (manifest.get("runner") or {}).get("trials")
    trials = trials if isinstance(trials, int) and trials > 0 else 1
    if ids is None:
        ids = _dataset_ids(run)
        if ids is None:
            return None
    positions = select(ids, stored.get("limit"), stored.get("sample_ids"))
    recorded = run.recorded_ids()
    missing = [
        sum((ids[k], trial) not in recorded for k, trial in deal(positions, trials, (i, shards)))
        for i in range(1, shards + 1)
    ]
    names = re.compile(rf"shard-([0-9]+)-of-{shards}\.lock")
    recording = sorted(
        int(m[1]) for name in held_shards(run.dir) if (m := names.fullmatch(name)) is not None
    )
    folding = None
    if not recording and not any(missing):  # the last shard lets go of its own lock to fold
        holder = re.match(rf"shard ([0-9]+)/{shards} ", lock_holder(run.dir / LOCK) or "")
        folding = int(holder[1]) if holder else None
    return ShardProgress(
        shards=shards,
        asked=len(positions) * trials,
        missing=sum(missing),
        trials=trials,
        recording=recording,
        unfinished=[i for i in range(1, shards + 1) if missing[i - 1] and i not in recording],
        selection={"limit": stored.get("limit"), "sample_ids": stored.get("sample_ids")},
        folding=folding,
    )


def finish_hint(run: Run) -> str:
    """How to finish recording run ``run``: the shards to run or wait for while a sharded
    recording is under way, else the command that records what it misses."""
    progress = shard_progress(run)
    if progress is not None:
        return progress.next_steps(run)
    if run.status == "recording" and being_written(run.dir):
        return "a process is recording it: wait for that recording to end"
    asked = run.manifest.get(SELECTION)
    # a run that stopped with samples in error: --resume would leave them so
    totals = run.manifest.get("totals")
    errors = totals.get("errors") if isinstance(totals, dict) else None
    flag = "--retry-errors" if isinstance(errors, int) and errors > 0 else "--resume"
    if run.status not in SETTLED and isinstance(asked, dict):  # cut short: what it asked for
        return f"finish it with: {shard_command(run, None, asked, flag)}"
    return f"finish it with: {run.resume_command(flag)}"


def _dataset_ids(run: Run) -> list[str] | None:
    """The sample ids of the run's dataset file, in order (None: it cannot be read, which
    the command that records the run says)."""
    try:
        with (run.dir / DATASET).open("rb") as f:
            return [str(_json.loads(line.decode("utf-8"))["id"]) for line in f if line.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        return None
