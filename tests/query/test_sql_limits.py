"""Time and memory limits on user SQL, and Ctrl-C while it runs."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from helpers import wait_for
from sql_runs import ALPHA, make_run

from tcbreplay._query.limits import memory_bytes
from tcbreplay._query.named import run_named
from tcbreplay._query.sql import run_sql
from tcbreplay.errors import InputError, QueryLimitError

# minutes of work for DuckDB, and no memory to speak of
SLOW = "select sum(i) as s from range(60_000_000_000) t(i)"


@pytest.fixture
def one_run(store):
    make_run(store, "alpha", ALPHA)
    return store


def test_a_query_past_its_time_limit_is_stopped(one_run):
    started = time.monotonic()
    with pytest.raises(QueryLimitError) as info:
        run_sql(one_run, SLOW, timeout=0.5)
    assert time.monotonic() - started < 10
    assert str(info.value) == "the query ran past its time limit of 0.5 s and was stopped"
    assert info.value.hint == "raise it with --timeout SECONDS, or --timeout 0 for no limit"
    assert info.value.exit_code == 1
    # the statement before a slow one runs; a slow one after the limit is stopped as well
    with pytest.raises(QueryLimitError):
        run_sql(one_run, f"select 1; {SLOW}", timeout=0.5)


def test_a_named_query_has_the_same_time_limit(one_run):
    with pytest.raises(QueryLimitError, match="time limit of 1e-06 s"):
        run_named(one_run, "cost_latency", timeout=1e-6)


@pytest.mark.parametrize("timeout", [None, 0, 30])
def test_a_query_within_its_time_limit_gives_its_rows(one_run, timeout):
    got = run_sql(one_run, "select count(*) as n from samples", timeout=timeout).records()
    assert got == [{"n": 2}]


def _workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tcbreplay-sql" and t.is_alive()]


@pytest.mark.parametrize("thread", ["main", "duckdb"])
def test_ctrl_c_stops_the_query_whichever_thread_the_system_hands_it_to(one_run, thread):
    """The kernel may deliver SIGINT to any thread of the process, DuckDB's included."""

    sent = []

    def interrupt() -> None:
        # once the query runs in its thread, however long a loaded machine takes to get there
        wait_for(lambda: len(_workers()) == 1, timeout=60)
        time.sleep(0.5)
        sent.append(time.monotonic())
        if thread == "main":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        else:
            (worker,) = _workers()
            signal.pthread_kill(worker.ident, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_sql(one_run, SLOW, timeout=60)  # (the limit only ends a failing test sooner)
    assert time.monotonic() - sent[0] < 10
    wait_for(lambda: not _workers(), timeout=5)


def test_the_memory_limit_is_duckdbs(one_run):
    got = run_sql(one_run, "select current_setting('memory_limit') as m", memory_limit="100MB")
    assert got.records() == [{"m": "95.3 MiB"}]
    got = run_sql(one_run, "select current_setting('memory_limit') as m", memory_limit="2GiB")
    assert got.records() == [{"m": "2.0 GiB"}]


def test_a_query_that_needs_more_memory_than_its_limit_is_stopped(one_run):
    with pytest.raises(QueryLimitError) as info:
        run_sql(one_run, "select list(range) as l from range(20_000_000)", memory_limit="64MB")
    assert str(info.value).startswith("the query needs more memory than its limit of 61.0 MiB (")
    assert "\n" not in str(info.value)
    assert info.value.hint == "raise it with --memory-limit SIZE (such as 8GB or 75%)"


@pytest.mark.slow  # (about 2 s under load)
def test_rows_that_would_take_more_memory_than_the_limit_are_not_fetched(one_run):
    """A cross join streams its rows out of DuckDB within its limit: held in Python they
    would fill the machine's memory."""
    started = time.monotonic()
    with pytest.raises(QueryLimitError) as info:
        run_sql(one_run, "select * from range(100000) a cross join range(100000) b",
                memory_limit="64MB")  # fmt: skip
    assert time.monotonic() - started < 30
    assert str(info.value) == (
        "the query's rows take more memory than its limit of 61.0 MiB and it was stopped"
    )
    assert info.value.hint.startswith("select fewer rows or columns, or raise it")
    # rows within the limit are all given
    got = run_sql(one_run, "select * from range(100000)", memory_limit="64MB")
    assert len(got.rows) == 100_000


@pytest.mark.parametrize("limit", ["abc", "0", "10XB", "150%", "-5GB", "-50%"])
def test_a_memory_limit_duckdb_cannot_read_is_bad_input(one_run, limit):
    with pytest.raises(InputError, match=rf"^memory limit '{limit}': ") as info:
        run_sql(one_run, "select 1", memory_limit=limit)
    assert "--memory-limit" in info.value.hint
    assert info.value.exit_code == 2


def test_a_memory_limit_too_small_for_any_query(one_run):
    with pytest.raises(
        QueryLimitError, match=r"^the query needs more memory than its limit of 0GB"
    ):
        run_sql(one_run, "select 1", memory_limit="0GB")


@pytest.mark.parametrize(
    ("text", "size"),
    [("11.7 GiB", int(11.7 * 2**30)), ("95.3 MiB", int(95.3 * 2**20)), ("1000 bytes", 1000),
     ("3.7 GB", int(3.7e9)), ("", None), ("lots", None)],
)  # fmt: skip
def test_memory_bytes_reads_duckdbs_sizes(text, size):
    assert memory_bytes(text) == size
