"""Raw messages to tool-call rows, by the SQL in ``queries/`` over the store's views.

Nothing here imports LangChain: the serialized messages are read as JSON. Scoring
reads every AI message once (``score_agent_calls.sql``), flattens the calls in
Polars, and numbers them by sample with ``s`` (the sample's position in sample
order), ``i`` (agent call) and ``j`` (gold call).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

from tcbreplay.errors import StoreError
from tcbreplay.sql import first_line, query_text


@dataclass
class CallTables:
    """The calls of one run, flat: samples (``s``), agent calls (``s``, ``i``), gold calls
    (``s``, ``j``); each call with ``name`` and ``args`` (canonical JSON text)."""

    samples: pl.DataFrame
    agent: pl.DataFrame
    gold: pl.DataFrame


# every sample index (the store's sample_index is a 32-bit integer)
ALL_SAMPLES = (-(2**31), 2**31)


def split_samples(con: duckdb.DuckDBPyConnection, parts: int) -> list[tuple[int, int]]:
    """The run's sample indexes cut into at most ``parts`` ranges ``(lo, hi)``, ascending."""
    try:
        rows = con.execute(query_text("score_split"), {"parts": max(1, parts)}).fetchall()
    except duckdb.Error as exc:
        raise StoreError(f"cannot read the run's samples: {first_line(exc)}") from exc
    if rows:
        for count, column in zip(rows[0][:2], ("sample_index", "sample_id"), strict=True):
            if count:
                raise StoreError(f"samples.parquet: {count} samples have no {column}")
    return [(lo, hi) for *_, lo, hi in rows if lo is not None and lo < hi] or [ALL_SAMPLES]


def load_calls(
    con: duckdb.DuckDBPyConnection, samples: tuple[int, int] = ALL_SAMPLES
) -> CallTables:
    """Parse the gold calls and every AI message's tool calls of the samples whose
    ``sample_index`` is in ``samples`` (``lo <= index < hi``), once."""
    bounds = {"lo": samples[0], "hi": samples[1]}
    try:
        gold_lists = con.sql(query_text("score_gold_calls"), params=bounds).pl()
        ai = con.sql(query_text("score_agent_calls"), params=bounds).pl()
    except duckdb.Error as exc:
        raise StoreError(
            f"cannot read the run's traces: {_malformed(con, bounds) or first_line(exc)}"
        ) from exc
    order = gold_lists["sample_index"].to_numpy().astype(np.int64)
    if len(order) and np.any(np.diff(order) <= 0):
        gold_lists = gold_lists.sort("sample_index")
        order = gold_lists["sample_index"].to_numpy().astype(np.int64)
        if np.any(np.diff(order) == 0):
            raise StoreError("samples.parquet: sample_index values are not unique")
    samples = gold_lists.select("sample_id", "sample_index", "category", "status").with_row_index(
        "s"
    )
    gold = _flatten(np.arange(len(order)), gold_lists["calls"], "j")
    unnamed = gold.filter(pl.col("name").is_null())
    if unnamed.height:
        sample_id = samples["sample_id"][int(unnamed["s"][0])]
        raise StoreError(f"samples.parquet: sample {sample_id!r} has a gold call without a name")
    s, known = _positions(order, ai["sample_index"].to_numpy())
    if not known.all():  # messages of samples the run does not hold are left out
        ai = ai.filter(pl.Series(known))
        s = s[known]
    if not _is_sorted(s, ai["position"].to_numpy()):  # (a null position sorts first)
        ai = ai.with_columns(pl.Series("s", s)).sort("s", "position")
        s = ai["s"].to_numpy()
    agent = _flatten(s, ai["calls"], "i").with_columns(pl.col("name").fill_null(""))
    return CallTables(samples=samples, agent=agent, gold=gold)


def _malformed(con: duckdb.DuckDBPyConnection, bounds: dict[str, int]) -> str | None:
    """Which stored text is not valid JSON, named by file, sample and message position."""
    try:
        rows = con.execute(query_text("score_malformed"), bounds).fetchall()
    except duckdb.Error:
        return None
    for file, sample_id, position in rows:
        what = (
            "its gold calls are"
            if position is None
            else f"its AI message at position {position} is"
        )
        return f"{file}: sample {sample_id!r}: {what} not valid JSON"
    return None


def _positions(order: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each ``index``'s position in the sorted, unique ``order``, and whether it is there."""
    n = len(order)
    if n == 0:
        return np.zeros(len(index), dtype=np.int64), np.zeros(len(index), dtype=bool)
    if order[-1] - order[0] == n - 1:  # consecutive indexes: a position is an offset
        s = index.astype(np.int64) - int(order[0])
        return s, (s >= 0) & (s < n)
    s = np.searchsorted(order, index)
    return s, (s < n) & (order[np.minimum(s, n - 1)] == index)


def _flatten(s: np.ndarray, calls: pl.Series, index: str) -> pl.DataFrame:
    """One row per call, in order: ``s`` (the list's sample; ``s`` ascending), the call's
    number within its sample (``index``), ``name`` and ``args`` (``{}`` if missing)."""
    lengths = calls.list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = calls.explode(empty_as_null=False, keep_nulls=False).struct.unnest()
    flat_s = np.repeat(s.astype(np.int64), lengths)
    per_sample = np.bincount(flat_s, minlength=int(s.max(initial=-1)) + 1)
    first = np.cumsum(per_sample) - per_sample  # each sample's first row
    return pl.DataFrame(
        {
            "s": flat_s,
            index: np.arange(len(flat_s), dtype=np.int64) - first[flat_s],
            "name": flat["name"],
            "args": flat["args"].fill_null("{}"),
        }
    )


def _is_sorted(s: np.ndarray, position: np.ndarray) -> bool:
    if len(s) < 2:
        return True
    ds = np.diff(s)
    return bool(np.all(ds >= 0) and np.all(np.diff(position)[ds == 0] > 0))


def arg_values(con: duckdb.DuckDBPyConnection, args: pl.DataFrame) -> pl.DataFrame:
    """Members of distinct arguments objects (``id``, ``args``): ``id``, ``key``, ``value``
    (canonical JSON text) and ``text`` (a string's decoded value)."""
    con.register("distinct_args", args.to_arrow())
    try:
        kv = con.sql(query_text("arg_values")).pl()
    except duckdb.Error as exc:  # a large object with a repeated key fails its cast
        raise StoreError(
            f"cannot split tool-call arguments into keys: {_repeated_key(args) or first_line(exc)}"
        ) from exc
    finally:
        con.unregister("distinct_args")
    if kv.select(pl.struct("id", "key").is_duplicated().any()).item():
        raise StoreError(f"cannot split tool-call arguments into keys: {_repeated_key(args)}")
    return kv


class _Members(list):
    """A JSON object read as its (key, value) pairs, repeats kept."""


def _repeated_key(args: pl.DataFrame) -> str | None:
    """Which arguments object repeats one of its own keys, if one does (JSON objects must
    not; a repeat inside a nested value is the value's business)."""
    for text in args["args"]:
        try:
            members = json.loads(text, object_pairs_hook=_Members)
        except ValueError:
            continue
        if isinstance(members, _Members):
            keys = [key for key, _ in members]
            if len(keys) != len(set(keys)):
                return f"an arguments object repeats a key: {text[:200]}"
    return None


def agent_calls(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every agent tool call: sample_id, call_index, name, args (JSON text), position."""
    return con.sql(
        "select sample_id, call_index, name, args::varchar as args, position "
        "from tool_calls order by sample_id, call_index"
    ).pl()


def gold_calls(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every gold call: sample_id, call_index, name, args (JSON text)."""
    return con.sql(
        "select sample_id, call_index, name, args::varchar as args "
        "from gold_calls order by sample_id, call_index"
    ).pl()
