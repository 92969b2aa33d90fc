"""Recording in this one process: its workers on one event loop, each taking the next sample
(and trial) off a queue until none is left; the agents' model closed when they end (see
:mod:`tcbreplay._record.processes` for recording in several)."""

from __future__ import annotations

import asyncio
from typing import Any

from tcbreplay._record.agent import aclose_model
from tcbreplay._record.failures import Breaker
from tcbreplay._record.options import STAGGER, ProgressFn, RecordOptions
from tcbreplay._record.plan import SampleRunner
from tcbreplay._record.sample import run_sample
from tcbreplay._record.selection import Task
from tcbreplay._store.writer import RunWriter


async def record_in_process(
    agent: Any,
    chat_model: Any,
    samples: list[Task],
    writer: RunWriter,
    options: RecordOptions,
    progress: ProgressFn | None,
    breaker: Breaker,
    run_one: SampleRunner | None = None,
) -> None:
    """Record ``samples`` with ``options.workers`` workers at once into ``writer``, each
    outcome seen by ``breaker`` (which stops the run); ``run_one``: how a sample is run
    (a replay's; None: :func:`~tcbreplay._record.sample.run_sample`)."""
    queue: asyncio.Queue[Task] = asyncio.Queue()
    run = run_one or run_sample
    for job in samples:
        queue.put_nowait(job)

    async def worker(k: int) -> None:
        await asyncio.sleep(k * STAGGER)
        while True:
            try:
                sample, trial, index = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            record, outcome = await run(agent, sample, writer.run_id, options, trial, index)
            writer.append(record)
            if progress is not None:
                progress(record)
            breaker.see(outcome)

    workers = [asyncio.ensure_future(worker(k)) for k in range(min(options.workers, len(samples)))]
    try:
        await asyncio.gather(*workers)
    finally:
        # a stopped run ends its samples in flight at once (they are recorded when resumed)
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await aclose_model(chat_model)
