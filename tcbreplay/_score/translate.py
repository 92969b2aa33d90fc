"""Raw messages to tool-call rows, by the SQL in ``queries/`` over the store's views.

Nothing here imports LangChain: the serialized messages are read as JSON. Scoring
reads every AI message's calls once (``score_agent_calls.sql``: the ``calls`` column, JSON
text, which ``tcbreplay/_score/kernels/calls.pxi`` splits) and keeps the calls flat as
Arrow arrays in sample and call order, with ``s`` (the sample's position in sample order); as
tables, calls are numbered ``i`` (agent) and ``j`` (gold) within their sample: the shapes
they are kept in are in :mod:`tcbreplay._score.flat_calls`, the tools' parameters as scoring
reads them in :mod:`tcbreplay._score.tool_params`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay import _json
from tcbreplay._score import kernels
from tcbreplay._score.flat_calls import RULES, CallTables, FlatCalls, FlatSide, first_rows
from tcbreplay._score.texts import texts_of, validity
from tcbreplay._store.views import query_text
from tcbreplay.errors import EngineError, StoreError, first_line, out_of_memory, read_error

# what a name or arguments left out read as (bytes at an address compiled code can take)
_NO_NAME = np.frombuffer(b"\0", np.uint8)[:0]
_NO_ARGS = np.frombuffer(b"{}", np.uint8)
# rows per Arrow batch of a query's result: all of them
_ONE_BATCH = 1 << 40
# every sample index (the store's sample_index is a 32-bit integer)
ALL_SAMPLES = (-(2**31), 2**31)


def split_samples(con: duckdb.DuckDBPyConnection, parts: int) -> list[tuple[int, int]]:
    """The run's sample indexes cut into at most ``parts`` ranges ``(lo, hi)``, ascending."""
    try:
        rows = con.execute(query_text("score_split"), {"parts": max(1, parts)}).fetchall()
    except duckdb.Error as exc:
        if out_of_memory(exc):
            raise read_error("the run's samples", exc) from exc
        raise StoreError(f"cannot read the run's samples: {first_line(exc)}") from exc
    if rows:
        for count, column in zip(rows[0][:2], ("sample_index", "sample_id"), strict=True):
            if count:
                raise StoreError(f"samples.parquet: {count} samples have no {column}")
    return [(lo, hi) for *_, lo, hi in rows if lo is not None and lo < hi] or [ALL_SAMPLES]


# whose calls a scoring compares with gold (score --side): the agent's, the user's or both
SIDES = {"agent": ["agent"], "user": ["user"], "both": ["agent", "user"]}
# the messages whose calls are each side's
_SIDE_TYPES = {"agent": "ai", "user": "human"}


def load_calls(
    con: duckdb.DuckDBPyConnection, samples: tuple[int, int] = ALL_SAMPLES, side: str = "agent"
) -> CallTables:
    """:func:`load_flat` as Polars tables."""
    return load_flat(con, samples, side).tables()


def load_flat(
    con: duckdb.DuckDBPyConnection, samples: tuple[int, int] = ALL_SAMPLES, side: str = "agent"
) -> FlatCalls:
    """Parse the gold calls and the tool calls of the samples whose ``sample_index`` is in
    ``samples`` (``lo <= index < hi``), once. ``side``: whose calls and gold calls, one of
    :data:`SIDES`: the agent's (every AI message's calls, the gold calls without a side),
    the user's (the calls human messages carry, the gold calls of the side ``user``), or
    both, in message and gold order."""
    bounds: dict[str, Any] = {"lo": samples[0], "hi": samples[1], "sides": SIDES[side]}
    try:
        # in one batch each: no chunks to put together afterwards
        gold_lists = con.sql(
            query_text("score_gold_calls"), params={"lo": samples[0], "hi": samples[1]}
        ).to_arrow_table(_ONE_BATCH)
        types = [_SIDE_TYPES[s] for s in SIDES[side]]
        ai = con.sql(
            query_text("score_agent_calls"),
            params={"lo": samples[0], "hi": samples[1], "types": types},
        ).to_arrow_table(_ONE_BATCH)
    except duckdb.Error as exc:
        raise _unreadable(con, bounds, exc) from exc
    order = _int64(gold_lists["sample_index"])
    if len(order) and np.any(np.diff(order) <= 0):
        gold_lists = gold_lists.take(np.argsort(order, kind="stable"))
        order = _int64(gold_lists["sample_index"])
        if np.any(np.diff(order) == 0):
            raise StoreError("samples.parquet: sample_index values are not unique")
    n = len(order)
    frame = pl.from_arrow(
        gold_lists.select(["sample_id", "trial", "sample_index", "category", "status"])
    )
    assert isinstance(frame, pl.DataFrame)
    try:
        gold, rules = _gold_side(con, gold_lists["calls"], n, SIDES[side])
    except duckdb.Error as exc:  # DuckDB read a gold list that is no JSON
        raise _unreadable(con, bounds, exc) from exc
    tools = _combined(gold_lists["tools"])
    if gold.name.null_count:
        first_unnamed = int(np.flatnonzero(gold.name.is_null().to_numpy(zero_copy_only=False))[0])
        sample_id = frame["sample_id"][int(gold.s[first_unnamed])]
        raise StoreError(f"samples.parquet: sample {sample_id!r} has a gold call without a name")
    kernel = kernels.functions()
    s, known = kernel.positions(order, _int64(ai["sample_index"]))
    if not known.all():  # messages of samples the run does not hold are left out
        ai = ai.filter(pa.array(known))
        s = s[known]
    position = ai["position"]
    if position.null_count or not kernel.in_call_order(s, _int64(position)):
        # in sample and message order (a message without a position first; the sort is
        # stable)
        import pyarrow.compute as pc  # here: see tcbreplay._score.texts

        keys = pa.table({"s": s, "position": position})
        at = pc.sort_indices(
            keys, sort_keys=[("s", "ascending", "at_start"), ("position", "ascending", "at_start")]
        )
        ai = ai.take(at)
        s = s[at.to_numpy()]
    return FlatCalls(
        samples=frame.with_row_index("s"),
        agent=_split_calls(con, s, ai["tool_calls"], n),
        gold=gold,
        rules=rules,
        tools=None if tools.null_count == len(tools) else tools,
        keys=gold_lists["key"].to_numpy(),
    )


def _split_calls(
    con: duckdb.DuckDBPyConnection, s: np.ndarray, lists: pa.ChunkedArray, n: int
) -> FlatSide:
    """The calls of the tool-call list texts ``lists`` (the text at row k belongs to sample
    ``s[k]``, ``s`` ascending), flat: see ``tcbreplay/_score/kernels/calls.pxi``. Arguments left out
    read as ``{}`` and names left out as ``''``."""
    offsets, data = kernels.text_buffers(_combined(lists))
    room = 2 * (len(offsets) - 1) + 16  # most messages have fewer calls
    while True:
        row = np.empty(room, dtype=np.int64)
        kind = np.empty(room, dtype=np.int8)
        spans = [np.empty(room, dtype=np.int64) for _ in range(4)]
        count = kernels.functions().split_calls(offsets, data, row, kind, *spans)
        if count >= 0:
            break
        room *= 4
    name_lo, name_hi, args_lo, args_hi = (span[:count] for span in spans)
    name = texts_of(data, name_lo, name_hi, _NO_NAME)
    kind = kind[:count]
    name = _as_text(con, name, kind)
    calls_s = s[row[:count]]
    return FlatSide(
        s=calls_s,
        name=name,
        args=texts_of(data, args_lo, args_hi, _NO_ARGS),
        first=first_rows(calls_s, n),
    )


def _as_text(con: duckdb.DuckDBPyConnection, texts: pa.Array, kind: np.ndarray) -> pa.Array:
    """``texts`` (values of the kinds ``kind``, NAME_* of the kernels) read as json_transform
    reads a VARCHAR: strings with escapes and values of other kinds are read by DuckDB."""
    by_duckdb = np.flatnonzero((kind == kernels.NAME_ESCAPED) | (kind == kernels.NAME_VALUE))
    if not len(by_duckdb):
        return texts
    values = texts.take(pa.array(by_duckdb)).to_pylist()
    read = con.execute(query_text("json_values_as_text"), {"texts": values}).fetchall()[0][0]
    whole = texts.to_pylist()
    for k, value in zip(by_duckdb.tolist(), read, strict=True):
        whole[k] = value
    return pa.array(whole, pa.large_string())


def _int64(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    # int64 and contiguous, as the kernels take them; they only read it, so Arrow's buffer
    # itself does when it is both (no copy)
    return np.require(column.to_numpy(), dtype=np.int64, requirements=["C"])


def _gold_side(
    con: duckdb.DuckDBPyConnection, lists: pa.ChunkedArray, n: int, sides: list[str]
) -> tuple[FlatSide, dict[str, pa.Array] | None]:
    """The gold calls of the sides ``sides`` in the gold list texts ``lists`` (one per sample,
    ``n`` of them), flat, read as json_transform reads them (see
    ``tcbreplay/_score/kernels/gold.pxi``): arguments left out read as ``{}``; and their rules
    (see :class:`FlatCalls`)."""
    gold = _read_gold(con, _combined(lists))
    name, args = gold.names(con), gold.args()
    rules = [gold.member(con, j) for j in range(2, 6)]
    side_of = gold.member(con, 6)
    flat_s = gold.row  # the text at row k is sample k's
    # a call without a side is the agent's
    if sides != ["agent"] or side_of.null_count < len(side_of):
        import pyarrow.compute as pc  # here: see tcbreplay._score.texts

        keep = pc.is_in(pc.fill_null(side_of, "agent"), pa.array(sides)).to_numpy(
            zero_copy_only=False
        )
        if not keep.all():
            name, args, *rules = (column.filter(keep) for column in (name, args, *rules))
            flat_s = flat_s[keep]
    side = FlatSide(s=flat_s, name=name, args=args, first=first_rows(flat_s, n))
    if all(r.null_count == len(r) for r in rules):
        return side, None
    return side, dict(zip(RULES, rules, strict=True))


@dataclass
class _Gold:
    """Gold lists as the kernels' read_gold reads them (see gold.pxi): each call's text
    ``row``, its name's kind and text (``name_offsets`` into ``name_bytes``), its args' text
    likewise, and its other members given (``extra``, ``extra_kind``, spans of ``out``)."""

    row: np.ndarray
    name_kind: np.ndarray
    name_offsets: np.ndarray
    name_bytes: np.ndarray
    args_offsets: np.ndarray
    args_bytes: np.ndarray
    extra: np.ndarray
    extra_kind: np.ndarray
    out: np.ndarray

    def names(self, con: duckdb.DuckDBPyConnection) -> pa.Array:
        """Each call's name as json_transform reads a VARCHAR, null where left out or null."""
        bitmap, nulls = validity(self.name_kind != kernels.NAME_NONE)
        buffers = [bitmap, pa.py_buffer(self.name_offsets), pa.py_buffer(self.name_bytes)]
        names = pa.Array.from_buffers(pa.large_string(), len(self.row), buffers, nulls)
        return _as_text(con, names, self.name_kind)

    def args(self) -> pa.Array:
        """Each call's args as DuckDB writes JSON, ``{}`` where left out or null."""
        buffers = [None, pa.py_buffer(self.args_offsets), pa.py_buffer(self.args_bytes)]
        return pa.Array.from_buffers(pa.large_string(), len(self.row), buffers)

    def member(self, con: duckdb.DuckDBPyConnection, j: int) -> pa.Array:
        """Member ``j`` of GOLD_KEYS (not the name or args) of every call, null where left
        out or null: JSON text, or for the side, text as json_transform reads a VARCHAR."""
        count = len(self.row)
        at = np.flatnonzero(self.extra[kernels.EXTRA_MEMBER] == j)
        if not len(at):
            return pa.nulls(count, pa.large_string())
        calls = self.extra[kernels.EXTRA_CALL, at]
        lo, hi = np.full(count, -1, dtype=np.int64), np.full(count, -1, dtype=np.int64)
        kind = np.full(count, kernels.NAME_NONE, dtype=np.int8)
        lo[calls], hi[calls] = self.extra[kernels.EXTRA_LO, at], self.extra[kernels.EXTRA_HI, at]
        kind[calls] = self.extra_kind[at]
        values = texts_of(self.out, lo, hi, _NO_NAME, kind != kernels.NAME_NONE)
        return _as_text(con, values, kind) if kernels.GOLD_KEYS[j] == "side" else values


def _read_gold(con: duckdb.DuckDBPyConnection, texts: pa.Array) -> _Gold:
    """The gold list texts ``texts`` read by the kernels (read_gold: see gold.pxi). Texts
    the kernels cannot read as DuckDB would are written by DuckDB, then read again; DuckDB
    fails on text that is no JSON."""
    gold, slow = _read_gold_once(texts, np.zeros(len(texts), dtype=np.bool_))
    if not slow.any():
        return gold
    import pyarrow.compute as pc  # here: see tcbreplay._score.texts

    written = _written(con, texts.filter(pa.array(slow)))
    texts = pc.replace_with_mask(texts.cast(pa.large_string()), pa.array(slow), written)
    gold, again = _read_gold_once(texts, slow)  # the others read as before
    if again.any():  # DuckDB's own text is read as it is: never slow
        text = str(texts[int(np.flatnonzero(again)[0])])[:200]
        raise EngineError(f"the kernels could not read DuckDB's text of a gold list: {text}")
    return gold


def _written(con: duckdb.DuckDBPyConnection, texts: pa.Array) -> pa.Array:
    """The JSON texts ``texts`` as DuckDB's writer writes them (a table of them registered:
    a list parameter of as many texts took seven times as long)."""
    cursor = con.cursor()
    try:
        cursor.register("_texts", pa.table({"i": np.arange(len(texts)), "t": texts}))
        written = cursor.sql(query_text("json_minified")).to_arrow_table(_ONE_BATCH)["t"]
    finally:
        cursor.close()
    return _combined(written).cast(pa.large_string())


def _read_gold_once(texts: pa.Array, canonical: np.ndarray) -> tuple[_Gold, np.ndarray]:
    """One pass of read_gold over ``texts``: what it read, and which texts are slow."""
    offsets, data = kernels.text_buffers(texts)
    slow = np.empty(len(texts), dtype=np.bool_)
    size = len(data) + 16  # (see read_gold)
    names, out = np.empty(size, dtype=np.uint8), np.empty(size, dtype=np.uint8)
    room, extra_room = 4 * len(texts) + 16, len(texts) + 16
    args = np.empty(size + 2 * room, dtype=np.uint8)
    row, name_kind = np.empty(room, dtype=np.int64), np.empty(room, dtype=np.int8)
    name_offsets, args_offsets = np.empty(room + 1, np.int64), np.empty(room + 1, np.int64)
    name_offsets[0] = args_offsets[0] = 0
    extra, extra_kind = np.empty((4, extra_room), np.int64), np.empty(extra_room, np.int8)
    at = np.zeros(5, dtype=np.int64)
    read = kernels.functions().read_gold
    while True:
        read(offsets, data, canonical, row, name_kind, name_offsets, names, args_offsets, args,
             extra, extra_kind, out, slow, at)  # fmt: skip
        if at[0] == len(texts):
            break
        # full: more room, the rest read into it
        if at[4] == 2:
            extra_room *= 2
            extra = np.concatenate([extra, np.empty_like(extra)], axis=1)
            extra_kind = _grown(extra_kind, extra_room)
        else:  # the calls' tables (args holds 2 bytes more than data per call)
            room *= 2
            row, name_kind = _grown(row, room), _grown(name_kind, room)
            name_offsets = _grown(name_offsets, room + 1)
            args_offsets = _grown(args_offsets, room + 1)
            args = _grown(args, size + 2 * room)
    n, x = int(at[1]), int(at[2])
    gold = _Gold(
        row=row[:n], name_kind=name_kind[:n], name_offsets=name_offsets[: n + 1],
        name_bytes=names, args_offsets=args_offsets[: n + 1], args_bytes=args,
        extra=extra[:, :x], extra_kind=extra_kind[:x], out=out,
    )  # fmt: skip
    return gold, slow


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array``'s entries first in a new array of ``size`` entries."""
    grown = np.empty(size, dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def _combined(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.Array):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _unreadable(
    con: duckdb.DuckDBPyConnection, bounds: dict[str, Any], exc: duckdb.Error
) -> StoreError:
    if out_of_memory(exc):
        return read_error("the run's traces", exc)
    return StoreError(f"cannot read the run's traces: {_malformed(con, bounds) or first_line(exc)}")


def _malformed(con: duckdb.DuckDBPyConnection, bounds: dict[str, Any]) -> str | None:
    """Which stored text is not valid JSON, named by file, sample and message position."""
    try:
        rows = con.execute(query_text("score_malformed"), bounds).fetchall()
    except duckdb.Error:
        return None
    for file, sample_id, position, kind in rows:
        what = (
            "its gold calls are"
            if position is None
            else f"its {'AI' if kind == 'ai' else kind} message at position {position} is"
        )
        return f"{file}: sample {sample_id!r}: {what} not valid JSON"
    return None


def read_args(text: str, where: str = "") -> Any:
    """An arguments text (canonical JSON from DuckDB) as a Python value; ``where`` (such as
    ``sample 'x': ``) starts the error's message."""
    try:
        return _json.loads(text)
    except _json.LimitError as exc:  # written by hand, or by a version without the limits
        raise StoreError(
            f"{where}tool-call arguments hold {exc.problem}: {text[:80]}", hint=_json.HINT
        ) from None
    except ValueError as exc:  # DuckDB reads number words (nan, inf) Python's reader refuses
        raise StoreError(
            f"{where}tool-call arguments are not JSON that Python reads: {text[:200]}"
        ) from exc


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
