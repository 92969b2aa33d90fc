"""Recording in several processes: children run the agents, the parent writes the run.

LangChain and LangGraph cost a few milliseconds of CPU per model turn, so one event
loop with many workers spends much of its time waiting for its own CPU. With
``--processes N`` the parent forks N children, each with its share of the workers
on its own event loop. The parent hands out sample numbers over a pipe, one more for
each finished sample a child sends back (already encoded as a journal line), so a
slow child simply gets fewer. The parent stays the only writer of the run: journal,
run lock, resume and Ctrl-C work as with one process.

A child exits when its pipe closes and, on Linux, is killed with its parent
(``PR_SET_PDEATHSIG``), so a ``kill -9`` of the parent leaves no orphan recording.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from tcbreplay import _words
from tcbreplay._inputs.dataset import Sample
from tcbreplay._record.agent import aclose_model
from tcbreplay._record.failures import ChildFailed, Outcome, RecordStop
from tcbreplay._record.loop import run_loop
from tcbreplay._record.options import STAGGER, ProgressFn, RecordOptions, whole_shares
from tcbreplay._record.sample import run_sample
from tcbreplay._store.writer import RunWriter, journal_line

# (sample number | None) parent -> child; ("sample", status, line, outcome) | ("retry", text)
# back.
_SAMPLE = "sample"
_RETRY = "retry"


class RemoteRetry(Exception):
    """A model call that a child process is retrying (for the parent's progress)."""


def record_in_processes(
    processes: int,
    agent_for: Callable[[int, Callable[[BaseException], None]], Any],
    chat_model: Any,
    samples: list[tuple[Sample, int, int]],
    writer: RunWriter,
    options: RecordOptions,
    progress: ProgressFn | None,
    on_outcome: Callable[[Outcome], None] | None = None,
    run_one: Callable[..., Awaitable[tuple[dict, Outcome]]] | None = None,
) -> None:
    """Record ``samples`` in ``processes`` children; append what they send to ``writer``
    (``run_one``: how a child runs one trial of a sample, :func:`run_sample` by default).

    ``agent_for(process, on_retry)`` builds child ``process``'s agent (0-based, in the
    child, after the fork: its share of the rate limits is its own);
    ``on_outcome`` sees each finished sample once it is appended, and may stop the run by
    raising (the children are stopped, and what they had finished is kept).
    """

    async def child(
        process: int, workers: int, send: Callable[[tuple], None], next_number: Any
    ) -> None:
        agent = agent_for(process, lambda exc: send((_RETRY, str(exc))))
        run = run_one or run_sample

        async def worker(k: int) -> None:
            await asyncio.sleep(k * STAGGER)
            while (number := await next_number()) is not None:
                sample, trial, index = samples[number]
                record, outcome = await run(agent, sample, writer.run_id, options, trial, index)
                send((_SAMPLE, record["status"], journal_line(record), outcome))

        try:
            await asyncio.gather(*(worker(k) for k in range(workers)))
        finally:
            await aclose_model(chat_model)

    def on_line(line: str, status: str, outcome: Outcome) -> None:
        writer.append_line(line)
        if progress is not None:
            progress({"status": status})
        if on_outcome is not None:
            on_outcome(outcome)

    run_in_processes(
        # no more workers than samples (each worker waits its turn to start: 100,000 of them
        # for 5 samples took minutes after the last), as in one process
        split_workers(min(options.workers, max(len(samples), processes)), processes),
        len(samples),
        child,
        on_line,
        on_retry=getattr(progress, "retry", None),
        close_in_child=writer.forget,
    )


def split_workers(workers: int, processes: int) -> list[int]:
    """Workers of each process: as even as possible, every process at least one."""
    return whole_shares(workers, processes)


def run_in_processes(
    shares: list[int],
    count: int,
    child_main: Callable[[int, int, Callable[[tuple], None], Callable[[], Any]], Awaitable[None]],
    on_line: Callable[[str, str, Any], None],
    on_retry: Callable[[BaseException], None] | None = None,
    close_in_child: Callable[[], None] | None = None,
) -> None:
    """Record ``count`` samples in ``len(shares)`` forked processes of ``shares[i]`` workers.

    ``child_main(process, workers, send, next_number)`` runs in child ``process`` (from 0):
    an async function that records samples by the numbers ``await next_number()`` returns
    until it returns None, and sends ``("sample", status, line, outcome)`` or
    ``("retry", text)`` through ``send``. ``on_line(line, status, outcome)`` runs in this
    process for each finished sample; an exception it raises stops the children, once what
    they had finished is kept (as on Ctrl-C). ``close_in_child`` releases what the child must not
    hold (the run's files).
    """
    context = multiprocessing.get_context("fork")
    pipes = [context.Pipe(duplex=True) for _ in shares]
    parent_ends = [p[0] for p in pipes]
    children = []
    for i, workers in enumerate(shares):
        own = pipes[i][1]
        others = [*parent_ends] + [p[1] for j, p in enumerate(pipes) if j != i]
        child = context.Process(
            target=_child,
            args=(os.getpid(), own, others, close_in_child, child_main, i, workers),
            name=f"tcbreplay-record-{i + 1}",
            daemon=True,
        )
        child.start()
        children.append(child)
    for _, own in pipes:
        own.close()
    try:
        _hand_out(parent_ends, shares, count, children, on_line, on_retry)
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
        for child in children:
            child.join()
        for conn in parent_ends:
            conn.close()


def _hand_out(
    conns: list[Connection],
    shares: list[int],
    count: int,
    children: list[Any],
    on_line: Callable[[str, str, Any], None],
    on_retry: Callable[[BaseException], None] | None,
) -> None:
    todo = deque(range(count))
    out = dict.fromkeys(range(len(conns)), 0)
    index = {id(c): i for i, c in enumerate(conns)}

    def give(i: int) -> None:
        number = todo.popleft() if todo else None
        if number is not None:
            out[i] += 1
        try:
            conns[i].send(number)
        except OSError:
            failed(i)

    def failed(i: int) -> None:
        children[i].join(timeout=5)
        raise ChildFailed(
            f"recording process {children[i].pid} {_ended(children[i].exitcode)} "
            f"with {_words.count(out[i], 'sample')} of its own unfinished"
        ) from None

    for i, workers in enumerate(shares):
        for _ in range(workers):
            give(i)
    live = list(conns)
    try:
        while live:
            for ready in wait(live):
                i = index[id(ready)]
                conn = conns[i]
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    live.remove(conn)
                    if out[i]:
                        failed(i)
                    continue
                if message[0] == _SAMPLE:
                    out[i] -= 1
                    on_line(message[2], message[1], message[3])
                    give(i)
                elif on_retry is not None:
                    on_retry(RemoteRetry(message[1]))
    except (KeyboardInterrupt, RecordStop):
        # Keep what the children finished before Ctrl-C (or the sample that stopped the
        # run): it is already in the pipes.
        for child in children:
            if child.is_alive():
                child.kill()
        for conn in conns:
            _drain(conn, on_line)
        raise


def _ended(code: int | None) -> str:
    """How a child ended, by its exit code: a negative one is the signal that killed it (the
    out-of-memory killer's SIGKILL, most often)."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited (code {code})"


def _drain(conn: Connection, on_line: Callable[[str, str, Any], None]) -> None:
    try:
        while conn.poll():
            message = conn.recv()
            if message[0] == _SAMPLE:
                on_line(message[2], message[1], message[3])
    except (EOFError, OSError):
        return


def _child(
    parent_pid: int,
    conn: Connection,
    others: list[Connection],
    close_in_child: Callable[[], None] | None,
    child_main: Callable[..., Any],
    process: int,
    workers: int,
) -> None:
    _die_with_parent(parent_pid)
    # Ctrl-C is the parent's to handle: it stops the children and keeps what they sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in others:
        other.close()
    if close_in_child is not None:
        close_in_child()
    run_loop(_child_loop(conn, child_main, process, workers))


async def _child_loop(
    conn: Connection, child_main: Callable[..., Any], process: int, workers: int
) -> None:
    numbers: asyncio.Queue[int | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            while conn.poll():
                numbers.put_nowait(conn.recv())
        except (EOFError, OSError):
            os._exit(1)  # the parent is gone: nothing here can be stored any more

    sending = threading.Lock()  # (a retry of a graph's synchronous call: from its thread)

    def send(message: tuple) -> None:
        try:
            with sending:
                conn.send(message)
        except OSError:
            os._exit(1)  # the parent is gone

    loop.add_reader(conn.fileno(), readable)
    try:
        await child_main(process, workers, send, numbers.get)
    finally:
        loop.remove_reader(conn.fileno())


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit if it already has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # elsewhere the closed pipe tells the child
    if os.getppid() != parent_pid:
        os._exit(1)
