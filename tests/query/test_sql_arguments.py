"""The library's query functions take what their signatures and docs say, and refuse the
rest as typed errors (the CLI refuses the same values in its options)."""

from __future__ import annotations

import duckdb
import pytest

from tcbreplay import run_sql, write_catalog
from tcbreplay.errors import QueryError


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf"), "5"])
def test_run_sql_refuses_a_timeout_that_is_no_number_of_seconds(sim_run, timeout):
    with pytest.raises(QueryError, match=r"timeout .*: give seconds, 0 or more"):
        run_sql(sim_run[0], "select 1", timeout=timeout)


def test_run_sql_takes_no_limit_and_a_limit(sim_run):
    store, _ = sim_run
    for timeout in (None, 0, 2.5):
        assert run_sql(store, "select 1 as one", timeout=timeout).rows == [(1,)]


def test_write_catalog_takes_a_path_as_text(sim_run, tmp_path):
    store, run_id = sim_run
    path = tmp_path / "cat.duckdb"
    assert write_catalog(store, str(path)) == [run_id]
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("select count(*) from runs").fetchone() == (1,)
