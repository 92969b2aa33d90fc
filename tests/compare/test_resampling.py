"""The bootstrap's resample sums (tcbreplay._compare.resampling), which diff and the
report take their intervals from."""

import numpy as np
import pytest

from tcbreplay._compare import resampling
from tcbreplay._compare.resampling import ResampleSums, resamples


@pytest.mark.parametrize("by_row", [10_000, 1])
@pytest.mark.parametrize(
    "n, n_boot, chunk, count", [(1, 7, 20, 4), (97, 300, 1000, 250), (5, 9, 20, 4)]
)
def test_resampled_sums_are_the_sums_of_the_drawn_samples(
    monkeypatch, n, n_boot, chunk, count, by_row
):
    """Each resample's sums, counted once and weighted, are the columns gathered at the
    indexes the seed draws (with the draws cut into batches, and the batches into blocks,
    of any size): integers to the bit, fractions to rounding."""
    monkeypatch.setattr(resampling, "COUNT_CELLS", count)
    monkeypatch.setattr(resampling, "COUNT_BY_ROW", by_row)  # (the two ways of counting)
    rng = np.random.default_rng(3)
    fractions, integers = rng.uniform(0, 1, n), rng.integers(0, 9, n)
    boot = ResampleSums(n, n_boot, seed=4, chunk_cells=chunk)
    at = [boot.column(fractions), boot.column(integers), boot.column(integers.copy())]
    assert at == [0, 1, 1]  # an equal column is the same column
    drawn = np.concatenate(list(resamples(np.random.default_rng(4), n, n_boot, chunk)))
    assert drawn.shape == (n_boot, n)
    sums = boot.sums()
    assert sums.shape == (n_boot, 2)
    np.testing.assert_allclose(sums[:, 0], fractions[drawn].sum(axis=1), rtol=1e-12)
    assert (sums[:, 1] == integers[drawn].sum(axis=1)).all()


def test_a_column_given_at_some_samples_sums_as_the_whole_column():
    """A column given by its values at some samples sums as the column with 0 elsewhere, to
    the bit for integers; and it is the same column as that one given whole (or given with
    0 at more samples), so the sums' table is the one of the columns given whole."""
    n = 50
    rng = np.random.default_rng(5)
    at = np.sort(rng.choice(n, 12, replace=False))
    values = rng.integers(1, 9, len(at))
    whole = np.zeros(n)
    whole[at] = values
    other = whole.copy()
    other[at[0]] += 1
    more = np.union1d(at, [k for k in range(n) if k not in at][:3])
    padded = np.where(np.isin(more, at), whole[more], 0)
    boot = ResampleSums(n, 40, seed=6, chunk_cells=200)
    where = [
        boot.column(values, at),
        boot.column(whole),
        boot.column(values.copy(), at.copy()),
        boot.column(padded, more),
        boot.column(other),
        boot.column(other[at], at),
        boot.column(values[1:], at[1:]),
    ]
    assert where == [0, 0, 0, 0, 1, 1, 2]
    sums = boot.sums()
    assert sums.shape == (40, 3)
    drawn = np.concatenate(list(resamples(np.random.default_rng(6), n, 40, 200)))
    for k, column in enumerate((whole, other, np.where(np.arange(n) == at[0], 0, whole))):
        assert (sums[:, k] == column[drawn].sum(axis=1)).all()
    with pytest.raises(RuntimeError):
        boot.column(whole)


@pytest.mark.parametrize("n, count", [(12_000, 4_000_000), (12_000, 1)])
def test_the_counts_weigh_the_columns_as_integer_counts_did(monkeypatch, n, count):
    """Past COUNT_BY_ROW samples, the draws are counted as floats (a resample's count the
    block itself when blocks are of one resample): the sums are those of integer counts
    converted and multiplied in the same blocks, to the bit."""
    monkeypatch.setattr(resampling, "COUNT_CELLS", count)
    rng = np.random.default_rng(9)
    table = np.stack([rng.integers(0, 7, n) / 7, rng.integers(0, 5, n)], axis=1)
    boot = ResampleSums(n, 30, seed=2, chunk_cells=50_000)
    boot.column(table[:, 0])
    boot.column(table[:, 1])
    rows = max(1, min(30, count // n))
    expected = []
    for batch in resamples(np.random.default_rng(2), n, 30, 50_000):
        for start in range(0, len(batch), rows):
            drawn = batch[start : start + rows]
            block = np.empty((len(drawn), n))
            for k, row in enumerate(drawn):
                block[k] = np.bincount(row, minlength=n)
            expected.append(block @ table)
    assert boot.sums().tobytes() == np.concatenate(expected).tobytes()
