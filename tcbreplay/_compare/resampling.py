"""Bootstrap resamples of a run's samples, and the sums of per-sample columns over each.

A resample's sum of a column is the column weighted by how many times the resample drew each
sample: the draws are counted once per resample and multiplied with every column at once,
rather than each column gathered at the drawn indexes (at a million samples and 1,000
resamples, a gather per column costs a second per resample). ``diff``'s deltas and the
report's intervals are taken this way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from tcbreplay.errors import InputError

COUNT_CELLS = 4_000_000  # resample counts weighted at once
COUNT_BY_ROW = 10_000  # samples from which each resample is counted by itself


def resamples(
    rng: np.random.Generator, n: int, n_boot: int, chunk_cells: int
) -> Iterator[np.ndarray]:
    """Batches of bootstrap index arrays, shape (batch, n), each at most ``chunk_cells``
    indexes (and a whole resample at least): how the seed's stream is cut, so the same
    ``chunk_cells`` draws the same resamples."""
    batch = max(1, min(n_boot, chunk_cells // max(n, 1)))
    done = 0
    while done < n_boot:
        size = min(batch, n_boot - done)
        yield rng.integers(0, n, size=(size, n))
        done += size


class ResampleSums:
    """The sums of per-sample columns over each of ``n_boot`` resamples of ``n`` samples
    (drawn with replacement from ``seed``, ``chunk_cells`` at a time: see :func:`resamples`),
    every column over the same resamples.

    Sums of integers (counts, arguments) are exact; sums of fractions (tsa, tp) may differ
    from a gathered sum in their last bits. Two equal columns are one column, so the two
    sides of an unchanged metric get the same sums to the bit. A column that is 0 at most
    samples (a tool's arguments) can be given by its other values and their samples alone,
    and takes the room of every sample only while the sums are drawn; it is the same column
    as one given whole with the same values.
    """

    def __init__(self, n: int, n_boot: int, seed: int, chunk_cells: int) -> None:
        self.n, self.n_boot, self.seed, self.chunk_cells = n, n_boot, seed, chunk_cells
        # (None, values) for a column of every sample; (samples, values) for one given there
        self._columns: list[tuple[np.ndarray | None, np.ndarray]] = []
        self._sums: np.ndarray | None = None

    def column(self, values: np.ndarray, at: np.ndarray | None = None) -> int:
        """Where ``values`` (one per sample; or one per sample of ``at``, ascending, the
        column 0 elsewhere) will be in :meth:`sums`."""
        if self._sums is not None:
            raise RuntimeError("a column given after the sums were drawn")
        values = np.ascontiguousarray(values, dtype=np.float64)
        if at is not None:
            at = np.ascontiguousarray(at, dtype=np.int64)
        for k, known in enumerate(self._columns):
            if _same_column(known, (at, values)):
                return k
        self._columns.append((at, values))
        return len(self._columns) - 1

    def sums(self, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Each resample's sum of each column, shape (n_boot, columns); drawn once. The
        columns are let go once put in one table. ``progress``: told the resamples done and
        their number as they are drawn."""
        if self._sums is None:
            columns: list = self._columns
            self._columns = []
            table = np.zeros((self.n, len(columns)))
            for k, (at, values) in enumerate(columns):
                table[slice(None) if at is None else at, k] = values
                columns[k] = None  # (let go as soon as the table holds it)
            sums = np.empty((self.n_boot, table.shape[1]))
            rows = max(1, min(self.n_boot, COUNT_CELLS // max(self.n, 1)))
            # counted as floats at once: the same counts, without an integer copy to convert
            ones = np.ones(self.n) if self.n >= COUNT_BY_ROW else None
            # (a resample at a time: its count is the block)
            weights = np.empty((rows, self.n)) if rows > 1 or ones is None else None
            done = 0
            rng = np.random.default_rng(self.seed)
            block: np.ndarray
            for batch in resamples(rng, self.n, self.n_boot, self.chunk_cells):
                for start in range(0, len(batch), rows):
                    drawn = batch[start : start + rows]
                    if weights is None:
                        block = np.bincount(drawn[0], ones, self.n)[None, :]
                    elif ones is not None:  # a row at a time: fewer, smaller passes
                        block = weights[: len(drawn)]
                        for k, row in enumerate(drawn):
                            block[k] = np.bincount(row, ones, self.n)
                    else:  # few samples: every row of the block in one count
                        block = weights[: len(drawn)]
                        flat = (drawn + (np.arange(len(drawn)) * self.n)[:, None]).ravel()
                        block[:] = np.bincount(flat, minlength=block.size).reshape(block.shape)
                    sums[done : done + len(drawn)] = block @ table
                    done += len(drawn)
                    if progress is not None:
                        progress(done, self.n_boot)
            self._sums = sums
        return self._sums


def _same_column(
    a: tuple[np.ndarray | None, np.ndarray], b: tuple[np.ndarray | None, np.ndarray]
) -> bool:
    """Whether two columns (``(None, values)`` of every sample, or ``(samples, values)``)
    hold the same value at every sample: so that the sums' table has the columns it would
    have of the same columns given whole."""
    (at_a, a_values), (at_b, b_values) = a, b
    if at_a is None and at_b is None:
        return np.array_equal(a_values, b_values)
    if at_a is None or at_b is None:  # the whole column is the other one's values, 0 elsewhere
        whole, at, values = (
            (a_values, at_b, b_values) if at_a is None else (b_values, at_a, a_values)
        )
        return np.array_equal(whole[at], values) and int(np.count_nonzero(whole)) == int(
            np.count_nonzero(values)
        )
    shown_a, shown_b = a_values != 0, b_values != 0  # (the samples given a 0 are as left out)
    return np.array_equal(at_a[shown_a], at_b[shown_b]) and np.array_equal(
        a_values[shown_a], b_values[shown_b]
    )


def ratio(num: np.ndarray | int, den: np.ndarray | int) -> np.ndarray:
    """``num / den`` where ``den`` is above 0, NaN elsewhere."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def least_resamples(confidence: float) -> int:
    """The fewest resamples a percentile interval at ``confidence`` is taken from: each tail
    outside it, ``(1 - confidence) / 2`` of the resamples, holds one at least (40 at 95%).
    With fewer its ends are the most extreme resamples, which need not enclose the estimate:
    one resample gave an "interval" of that one draw."""
    return math.ceil(round(2 / (1 - confidence), 9))  # (2 / 0.05 is 40.00000000000004)


def refuse_few_resamples(n_boot: int, confidence: float) -> None:
    """Refuse fewer resamples than :func:`least_resamples` for an interval at ``confidence``."""
    least = least_resamples(confidence)
    if n_boot < least:
        level, tail = f"{confidence * 100:.10g}%", f"{(1 - confidence) * 50:.10g}%"
        raise InputError(
            f"--bootstrap {n_boot}: a {level} interval needs at least {least} resamples, so "
            f"that each {tail} tail outside it holds one (with fewer its ends are the most "
            "extreme resamples, which need not enclose the estimate)",
            hint="leave --bootstrap out for 2,000 resamples"
            if least <= 2000
            else f"give --bootstrap {least} or more, or a lower --confidence",
        )
