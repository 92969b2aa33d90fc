"""The calls scoring works on, flat: each side's calls as Arrow arrays in sample and call
order (:class:`FlatSide`), a range of samples with both sides and the gold calls' rules
(:class:`FlatCalls`), and the same as Polars tables (:class:`CallTables`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay._score import kernels


@dataclass
class CallTables:
    """The calls of one run, flat: samples (``s``), agent calls (``s``, ``i``), gold calls
    (``s``, ``j``); each call with ``name`` and ``args`` (canonical JSON text)."""

    samples: pl.DataFrame
    agent: pl.DataFrame
    gold: pl.DataFrame


@dataclass
class FlatSide:
    """One side's calls of a range of samples, flat, sorted by sample and call order: each
    call's sample position ``s``, its ``name`` and ``args`` (canonical JSON text), and each
    sample's first call (``first``, one entry more than samples)."""

    s: np.ndarray
    name: pa.Array
    args: pa.Array
    first: np.ndarray

    def buffers(self) -> tuple[np.ndarray, ...]:
        """As compiled code takes the calls: ``first``, then the names' and the arguments'
        offsets and bytes (see :func:`tcbreplay._score.kernels.text_buffers`)."""
        return (self.first, *kernels.text_buffers(self.name), *kernels.text_buffers(self.args))

    def index(self) -> np.ndarray:
        """Each call's number within its sample."""
        return np.arange(len(self.s), dtype=np.int64) - self.first[self.s]

    @classmethod
    def of_frame(cls, frame: pl.DataFrame, n: int) -> FlatSide:
        """The calls of a table of ``n`` samples' calls (``s``, ``name``, ``args``), sorted."""
        s = frame["s"].to_numpy()
        return cls(
            s=s,
            name=frame["name"].to_arrow(),
            args=frame["args"].to_arrow(),
            first=first_rows(s, n),
        )

    def frame(self, index: str) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "s": self.s,
                index: self.index(),
                "name": pl.from_arrow(self.name),
                "args": pl.from_arrow(self.args),
            }
        )


# the rules a gold call may carry beside its name and args (canonical JSON text, or null)
RULES = ("accept", "optional", "group", "compare")


@dataclass
class FlatCalls:
    """The samples of a range (``s``: position in sample order) and their calls, flat;
    ``rules``: each gold call's accept, optional, group and compare (JSON text or null), None
    when no gold call of the range has one; ``tools``: each sample's own tools (JSON text or
    null), None when no sample has its own; ``keys``: each sample's hash of its (sample_id,
    trial), as the store's query gives it (None: not read)."""

    samples: pl.DataFrame
    agent: FlatSide
    gold: FlatSide
    rules: dict[str, pa.Array] | None = None
    tools: pa.Array | None = None
    keys: np.ndarray | None = None

    def tables(self) -> CallTables:
        """As tables: the gold calls with their rules, the samples with their own tools
        (null where none)."""
        gold = self.gold.frame("j")
        rules = self.rules or {}
        gold = gold.with_columns(
            pl.Series(k, rules.get(k), dtype=pl.String)
            if k in rules
            else pl.lit(None, dtype=pl.String).alias(k)
            for k in RULES
        )
        samples = self.samples.with_columns(
            pl.lit(None, dtype=pl.String).alias("tools")
            if self.tools is None
            else pl.Series("tools", self.tools, dtype=pl.String)
        )
        return CallTables(samples=samples, agent=self.agent.frame("i"), gold=gold)

    @classmethod
    def of_tables(cls, tables: CallTables) -> FlatCalls:
        n = tables.samples.height
        rules = None
        if all(k in tables.gold.columns for k in RULES) and any(
            tables.gold[k].null_count() < tables.gold.height for k in RULES
        ):
            rules = {k: tables.gold[k].to_arrow().cast(pa.large_string()) for k in RULES}
        tools = None
        if "tools" in tables.samples.columns and tables.samples["tools"].null_count() < n:
            tools = tables.samples["tools"].to_arrow()
        return cls(
            samples=tables.samples.drop("tools", strict=False),
            agent=FlatSide.of_frame(tables.agent, n),
            gold=FlatSide.of_frame(tables.gold, n),
            rules=rules,
            tools=tools,
        )


def first_rows(s: np.ndarray, n: int) -> np.ndarray:
    """Each of ``n`` samples' first row among rows of samples ``s`` (ascending), and the end."""
    if len(s) and not 0 <= s[0] <= s[-1] < n:  # rows of no sample here: left of 0 or past n
        return np.searchsorted(s, np.arange(n + 1))
    # the rows before each sample, counted: a fifth of the time of n binary searches
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(s, minlength=n), out=first[1:])
    return first
