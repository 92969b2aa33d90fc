"""Scoring against another run: its calls are the gold (``score RUN --gold-run OTHER``).

Each sample and trial of RUN is scored against the tool calls OTHER made for the same sample
and trial, in their order, as gold calls without rules (a run's calls carry none): a
regression test without gold, such as a replay or a fork scored against its parent. Every
other option of the scoring applies as with gold from the dataset (tolerances, comparison of
strings and types, roles, --only and --without). A sample (or trial) that OTHER does not
hold is scored against no calls, and said so.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.views import connect, query_text
from tcbreplay.errors import InputError, StoreError


def gold_calls(store: Store, run: Run, gold_run: str) -> pa.Table:
    """The calls of run ``gold_run`` as gold: (sample_id, trial, gold JSON text)."""
    if gold_run == run.run_id:
        raise InputError(
            f"--gold-run {gold_run}: the run itself: give another run to score its calls against",
            hint="a run scored against its own calls is all correct but for the arguments its "
            "tools do not take, which are invalid whatever the gold",
        )
    other = store.open_run(gold_run)
    if not other.has_data():
        raise StoreError(f"--gold-run {gold_run}: the run has no stored samples yet")
    with other.reading():
        con = connect(runs=[other], with_scores=False)
        try:
            gold = con.sql(query_text("gold_run_calls")).to_arrow_table()
        finally:
            con.close()
    if (run.manifest.get("replay") or {}).get("parent_run_id") == gold_run:
        gold = _by_parent_trial(run, gold)
    return gold


def _by_parent_trial(run: Run, gold: pa.Table) -> pa.Table:
    """``gold`` (the parent's calls by its sample and trial) keyed by ``run``'s trials: a
    trial of a serve log is answered by the parent trial its metadata names
    (``replay.parent_trial``; the log numbers its trials as conversations began), which it
    was scored against by number before."""
    con = connect(runs=[run], with_scores=False)
    try:
        con.register("_parent_gold", gold)
        return con.sql(query_text("gold_run_by_parent_trial")).to_arrow_table()
    finally:
        con.close()


def use_gold(con: Any, gold: pa.Table) -> int:
    """Bind the ``samples`` view of ``con`` (one run's) to its rows with ``gold`` for gold
    (each sample and trial that ``gold`` lacks: no calls); how many of them it lacks."""
    con.register("_gold_input", gold)
    con.execute("create table _gold as select * from _gold_input")
    con.unregister("_gold_input")
    con.execute("create table _run_samples as select * from samples")
    con.execute(
        "create or replace view samples as select s.* replace "
        "(coalesce(g.gold, '[]') as gold) from _run_samples s "
        "left join _gold g using (sample_id, trial)"
    )
    ((absent,),) = con.execute(
        "select count(*) from _run_samples s anti join _gold g using (sample_id, trial)"
    ).fetchall()
    return int(absent)
