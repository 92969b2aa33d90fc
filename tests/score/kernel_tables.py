"""Tables in the kernels' own layout (pairs, block starts), built for the kernel tests."""

from __future__ import annotations

import numpy as np

from tcbreplay._score import kernels


def pairs_table(rows: list[tuple[int, int, int, int, int, int]]) -> np.ndarray:
    """Candidate rows (s, i, j, invalid, valid, missing) as the kernel's table, in its order."""
    table = np.zeros((len(rows), 8), dtype=np.int32)
    for k, (s, i, j, inv, val, mis) in enumerate(sorted(rows)):
        table[k, [kernels.SAMPLE, kernels.AGENT, kernels.GOLD]] = s, i, j
        table[k, [kernels.INVALID, kernels.VALID, kernels.MISSING]] = inv, val, mis
    return table


def firsts(counts: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
