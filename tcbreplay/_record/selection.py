"""Which rows a recording records: the samples ``--limit`` and ``--sample-id`` select, each
for every trial, those a resume still lacks, and those of one ``--shard``; with the checks
of ``--shard`` against the rows and ``--max-rpm``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import Dataset, Sample
from tcbreplay._record.options import RecordOptions
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import row_index
from tcbreplay._store.shards import ShardProgress, deal, select, shard_progress
from tcbreplay._words import count
from tcbreplay.errors import InputError


def _progress(
    run_dir: Path, shard: tuple[int, int] | None, inputs: BenchmarkInputs
) -> ShardProgress | None:
    """Where the sharded recording of the run in ``run_dir`` stands once shard ``shard`` has
    finished (None: not a shard, or the run settled)."""
    if shard is None:
        return None
    return shard_progress(Run(run_dir), inputs.dataset.ids())


# one recording of a sample: the sample, its trial and its row's sample_index
Task = tuple[Sample, int, int]


def _tasks(
    samples: list[Sample],
    trials: int,
    entries: int,
    recorded: dict[tuple[str, int], str],
    redo: set[str],
    shard: tuple[int, int] | None = None,
) -> list[Task]:
    """The trials of ``samples`` (those selected, of a dataset of ``entries``) to record,
    trial by trial in dataset order: those not recorded yet, and those stored with a status
    in ``redo``; ``shard`` (I, N): only those of shard I (see :func:`deal`)."""
    out = []
    for s, trial in deal(samples, trials, shard):
        status = recorded.get((s.sample_id, trial))
        if status is None or status in redo:
            out.append((s, trial, row_index(s.index, trial, entries)))
    return out


def _shard_rows(
    samples: list[Sample], trials: int, entries: int, shard: tuple[int, int] | None
) -> set[int] | None:
    """The row numbers of shard ``shard``'s rows (None: not a shard, every row is its)."""
    if shard is None:
        return None
    return {row_index(s.index, trial, entries) for s, trial in deal(samples, trials, shard)}


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (``--shard 2/4``) as (I, N): two whole numbers in ASCII digits, nothing else
    (int() would also take ' 1', '+1', '1_0' and other scripts' digits)."""
    match = _SHARD.fullmatch(text)
    if match is None:
        raise InputError(f"--shard {text!r}: write it I/N, such as 2/4")
    i, n = int(match[1]), int(match[2])
    check_shard((i, n))
    return i, n


_SHARD = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")


def check_shard(shard: tuple[int, int] | None) -> None:
    if shard is not None and not 1 <= shard[0] <= shard[1]:
        raise InputError(f"--shard {shard[0]}/{shard[1]}: I must be from 1 to N")


def check_shard_count(shard: tuple[int, int] | None, samples: int, trials: int) -> None:
    """Refuse more shards than the trials of the ``samples`` a recording selects: the shards
    split those (row by row), so shards past them would record nothing, and every shard
    would wait on a share of ``--max-rpm`` too small to send anything (``--shard 1/999999999``
    made a run that never completes)."""
    if shard is None or shard[1] <= samples * trials:
        return
    some = count(samples, "sample")
    rows = some if trials == 1 else f"{samples * trials} trials ({some} x {trials} trials)"
    raise InputError(
        f"--shard {shard[0]}/{shard[1]}: N is more than the {rows} this recording selects",
        hint=f"give N from 1 to {samples * trials}: the rows selected are dealt out one by one "
        "to the shards, so that each records one at least",
    )


def check_shard_rate(shard: tuple[int, int] | None, options: RecordOptions) -> None:
    """Refuse more shards than ``--max-rpm`` allows calls a minute: the calls are shared out
    whole (see :meth:`RecordOptions.rate_limiter`), so some shard would have none and never
    send a call. Every shard of such a recording is refused alike, not only those left
    without, so that none of them starts a run the others cannot finish. (``--processes``
    above the calls is not refused: a recording runs fewer, see
    :meth:`RecordOptions.processes_for`; nor is ``--engine ray``, which starts fewer tasks.)"""
    calls = options.calls_per_minute()
    if shard is None or calls is None or shard[1] <= calls:
        return
    raise InputError(
        f"--shard {shard[0]}/{shard[1]}: --max-rpm {options.max_rpm:g} is fewer calls a minute "
        f"than the {shard[1]} shards, so some shard would never send one",
        hint=f"give N from 1 to {calls}, or --max-rpm {shard[1]} or more: each shard keeps to "
        "a whole share of the calls",
    )


def _once(sample_ids: Sequence[str] | None) -> list[str] | None:
    """``--sample-id``s, each once (in the order first given): an id given twice is one
    sample, asked for once."""
    return list(dict.fromkeys(sample_ids)) if sample_ids else None


def _select(dataset: Dataset, limit: int | None, sample_ids: Sequence[str] | None) -> list[Sample]:
    """The samples ``--sample-id`` names (all when none), in dataset order, the first
    ``--limit`` of them (see :func:`select`), parsed (only they, of a stored dataset)."""
    ids = dataset.ids()
    if sample_ids:
        known = set(ids)
        for sample_id in sample_ids:
            if sample_id not in known:
                raise InputError(
                    f"--sample-id {sample_id!r}: the dataset has no sample of that id",
                    hint=f"its ids are like {', '.join(ids[:3])}" if ids else None,
                )
    if limit is not None and limit < 1:
        raise InputError(f"--limit {limit}: must be at least 1")
    return dataset.take(select(ids, limit, sample_ids))
