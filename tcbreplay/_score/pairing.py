"""The AHR pairing and TP of the metric spec in plain Python, with order-free gold blocks.

Gold calls come in **blocks**: consecutive calls with the same ``group`` value form one
block, whose order does not matter; every other call is a block of its own. A pairing pairs
agent calls with gold calls of the same name, one-to-one, such that listed by agent call the
pairs' blocks never go back (inside a block, any order). Of all such pairings the spec keeps
one with the best counts (most pairs, then fewest invalid, most valid, fewest missing) and,
among those, the one the walk back of :func:`align_pairs` takes. Without blocks of two or
more calls this is the order-preserving pairing of :func:`align_one_pairs`, the same choice.

The counts of a sub-problem (the first ``x`` agent calls, the blocks before ``b`` in full
and the open calls ``R`` of block ``b``) are computed by a table over subsets of the block
for blocks of at most :data:`SMALL_BLOCK` calls, and as the best over where the block's
agent calls start of an optimal assignment (Hungarian algorithm) for larger ones: both give
the same counts, so the same pairs. The compiled kernel does the same; tests hold both to a
brute force over every pairing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

# blocks up to this many calls are solved over subsets of their calls (2**k states): the
# kernel's size, declared once in verdicts.pxi
from tcbreplay._score.kernels import SMALL_BLOCK

# A pairing's counts (pairs, invalid, valid, missing) as one integer that orders as the
# spec prefers them: pairs * K**3 - invalid * K**2 + valid * K - missing. Counts are below
# 2**31 and a sample's sums far below K / 2, so the order of the sums is the order of the
# tuples.
_K = 1 << 64
_NONE = -(1 << 400)  # no pairing: below every sum


def weight(invalid: int, valid: int, missing: int) -> int:
    """One pair's counts as an integer (see ``_K``)."""
    return ((_K - invalid) * _K + valid) * _K - missing


def blocks_of(groups: Sequence[Any]) -> list[int]:
    """Each gold call's block number: consecutive calls with the same group value (not None;
    ``1`` and ``"1"`` differ) share one, every other call has its own."""
    out: list[int] = []
    for j, group in enumerate(groups):
        prev = groups[j - 1] if j else None
        same = group is not None and prev is not None and _same_group(group, prev)
        out.append(out[-1] if same else (out[-1] + 1 if out else 0))
    return out


def _same_group(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def has_blocks(blocks: Sequence[int] | None) -> bool:
    """Whether some block holds two or more calls."""
    return bool(blocks) and len(set(blocks)) < len(blocks)  # type: ignore[arg-type]


def align_one_pairs(
    cands: Iterable[tuple[int, int, int, int, int]], a: int, g: int
) -> list[tuple[int, int]]:
    """The chosen pairs ``(i, j)`` of one sample without order-free blocks, from
    ``(i, j, invalid, valid, missing)`` candidates: a dynamic programme on (pairs, -invalid,
    valid, -missing) over agent and gold prefixes, walked back from the last calls: a pair
    where it keeps the best counts, else the agent's call left out where that does, else the
    gold call."""
    table = {(int(i), int(j)): (1, -int(inv), int(val), -int(mis)) for i, j, inv, val, mis in cands}
    best: list[list[tuple[int, ...]]] = [[(0, 0, 0, 0)] * (g + 1) for _ in range(a + 1)]
    for x in range(1, a + 1):
        for y in range(1, g + 1):
            options = [best[x - 1][y], best[x][y - 1]]
            w = table.get((x - 1, y - 1))
            if w is not None:
                prev = best[x - 1][y - 1]
                options.append(tuple(p + q for p, q in zip(prev, w, strict=True)))
            best[x][y] = max(options)
    picked = []
    x, y = a, g
    while x > 0 and y > 0:
        w = table.get((x - 1, y - 1))
        prev = best[x - 1][y - 1]
        if w is not None and best[x][y] == tuple(p + q for p, q in zip(prev, w, strict=True)):
            picked.append((x - 1, y - 1))
            x, y = x - 1, y - 1
        elif best[x][y] == best[x - 1][y]:
            x -= 1
        else:
            y -= 1
    return picked[::-1]


def align_pairs(
    cands: Iterable[tuple[int, int, int, int, int]],
    a: int,
    blocks: Sequence[int],
    small_block: int = SMALL_BLOCK,
) -> list[tuple[int, int]]:
    """The chosen pairs ``(i, j)``, in agent order, of one sample whose ``len(blocks)`` gold
    calls have the block numbers ``blocks`` (see :func:`blocks_of`), from ``(i, j, invalid,
    valid, missing)`` candidates (same-name pairs and their argument counts).

    Walked back from the last agent call and the last block, with R the block's calls still
    open: a pair of the agent's call with an open gold call (the latest first) where it
    keeps the best counts; else the agent's call left out where that does; else the open
    calls left unpaired, going on with the block before. ``small_block``: see the module.
    """
    cands = list(cands)
    if not has_blocks(blocks):
        return align_one_pairs(cands, a, len(blocks))
    return _BlockPairing(cands, a, blocks, small_block).walk()


class _BlockPairing:
    """The counts of every sub-problem one sample's walk back asks for (see the module)."""

    def __init__(
        self,
        cands: list[tuple[int, int, int, int, int]],
        a: int,
        blocks: Sequence[int],
        small_block: int,
    ) -> None:
        self.a = a
        self.w = {(int(i), int(j)): weight(int(inv), int(val), int(mis))
                  for i, j, inv, val, mis in cands}  # fmt: skip
        members: dict[int, list[int]] = {}
        for j, b in enumerate(blocks):
            members.setdefault(b, []).append(j)
        self.blocks = [members[b] for b in sorted(members)]
        m = len(self.blocks)
        # best[b][x]: the first x agent calls with the first b blocks in full
        self.best = [[0] * (a + 1) for _ in range(m + 1)]
        self.subsets: dict[int, list[list[int]]] = {}  # block -> table[x][mask]
        self.memo: dict[tuple[int, int, frozenset[int]], int] = {}
        for b in range(1, m + 1):
            block = self.blocks[b - 1]
            if len(block) == 1:
                self._single(b, block[0])
            elif len(block) <= small_block:
                self._subset_table(b, block)
            else:
                full = frozenset(block)
                self.best[b] = [self._assigned(x, b, full) for x in range(a + 1)]

    def _single(self, b: int, j: int) -> None:
        before, row = self.best[b - 1], self.best[b]
        for x in range(1, self.a + 1):
            options = [row[x - 1], before[x]]
            w = self.w.get((x - 1, j))
            if w is not None:
                options.append(before[x - 1] + w)
            row[x] = max(options)

    def _subset_table(self, b: int, block: list[int]) -> None:
        """table[x][mask]: the first x agent calls, the blocks before b, the calls of block b
        in mask (bit t: block[t])."""
        before, k = self.best[b - 1], len(block)
        table = [[0] * (1 << k)]
        for x in range(1, self.a + 1):
            prev, row = table[x - 1], [before[x]] * (1 << k)
            ws = [(1 << t, self.w[(x - 1, j)]) for t, j in enumerate(block) if (x - 1, j) in self.w]
            for mask in range(1, 1 << k):
                value = max(row[mask], prev[mask])
                for bit, w in ws:
                    if mask & bit:
                        value = max(value, prev[mask ^ bit] + w)
                row[mask] = value
            table.append(row)
        self.subsets[b] = table
        self.best[b] = [table[x][(1 << k) - 1] for x in range(self.a + 1)]

    def value(self, x: int, b: int, open_: frozenset[int]) -> int:
        """The best counts with the first x agent calls, the blocks before b in full and the
        calls ``open_`` of block b."""
        block = self.blocks[b - 1]
        if not open_:
            return self.best[b - 1][x]
        if len(open_) == len(block):
            return self.best[b][x]
        table = self.subsets.get(b)
        if table is not None:
            return table[x][sum(1 << t for t, j in enumerate(block) if j in open_)]
        return self._assigned(x, b, open_)

    def _assigned(self, x: int, b: int, open_: frozenset[int]) -> int:
        """value() of a large block: the best, over where its agent calls start (x0), of the
        counts before x0 and an optimal assignment of agent calls x0..x-1 to ``open_``."""
        key = (x, b, open_)
        if key in self.memo:
            return self.memo[key]
        before = self.best[b - 1]
        rows = sorted(open_)
        best = before[x]
        for x0 in range(x):
            # an earlier start with the same counts before it is never worse
            if x0 and before[x0] == before[x0 - 1]:
                continue
            cols = [i for i in range(x0, x) if any((i, j) in self.w for j in rows)]
            table = [[self.w.get((i, j)) for i in cols] for j in rows]
            best = max(best, before[x0] + max_assignment(table))
        self.memo[key] = best
        return best

    def walk(self) -> list[tuple[int, int]]:
        picked = []
        x, b = self.a, len(self.blocks)
        open_ = frozenset(self.blocks[-1]) if b else frozenset()
        while x > 0 and b > 0:
            if not open_:
                b -= 1
                open_ = frozenset(self.blocks[b - 1]) if b else frozenset()
                continue
            here = self.value(x, b, open_)
            for j in sorted(open_, reverse=True):
                w = self.w.get((x - 1, j))
                if w is not None and self.value(x - 1, b, open_ - {j}) + w == here:
                    picked.append((x - 1, j))
                    x, open_ = x - 1, open_ - {j}
                    break
            else:
                if self.value(x - 1, b, open_) == here:
                    x -= 1
                else:  # the open calls stay unpaired
                    open_ = frozenset()
        return picked[::-1]


def max_assignment(table: list[list[int | None]]) -> int:
    """The largest sum of weights of a one-to-one pairing of rows with columns, where
    ``table[r][c]`` is the weight of pairing row r with column c (None: they cannot pair)
    and any row may stay unpaired (weight 0): the Hungarian algorithm on costs = -weights,
    with a column per row for staying unpaired."""
    n = len(table)
    if n == 0:
        return 0
    m = len(table[0]) + n
    inf = -_NONE

    def cost(r: int, c: int) -> int:  # 1-based
        w = table[r - 1][c - 1] if c <= m - n else None
        return -w if w is not None else 0

    u, v = [0] * (n + 1), [0] * (m + 1)
    p, way = [0] * (m + 1), [0] * (m + 1)
    for r in range(1, n + 1):
        p[0], c0 = r, 0
        minv, used = [inf] * (m + 1), [False] * (m + 1)
        while True:
            used[c0] = True
            r0, delta, c1 = p[c0], inf, 0
            for c in range(1, m + 1):
                if not used[c]:
                    cur = cost(r0, c) - u[r0] - v[c]
                    if cur < minv[c]:
                        minv[c], way[c] = cur, c0
                    if minv[c] < delta:
                        delta, c1 = minv[c], c
            for c in range(m + 1):
                if used[c]:
                    u[p[c]] += delta
                    v[c] -= delta
                else:
                    minv[c] -= delta
            c0 = c1
            if p[c0] == 0:
                break
        while c0:
            c1 = way[c0]
            p[c0] = p[c1]
            c0 = c1
    return -sum(cost(p[c], c) for c in range(1, m + 1) if p[c])


def edit_distance(
    agent: Sequence[Any], gold: Sequence[Any], blocks: Sequence[int] | None = None
) -> int:
    """The edit distance of two name sequences (unit insert, delete, substitute) where the
    gold calls of one block may come in any order: the least over every order of each
    block. A block of k gold calls against a run of L agent calls costs max(L, k) minus the
    names they share (as multisets), so the distance is a dynamic programme over where each
    block's run of agent calls starts."""
    a = len(agent)
    if not has_blocks(blocks):
        prev = list(range(len(gold) + 1))
        for r in range(1, a + 1):
            row = [r] + [0] * len(gold)
            for c in range(1, len(gold) + 1):
                sub = 0 if agent[r - 1] == gold[c - 1] else 1
                row[c] = min(prev[c] + 1, row[c - 1] + 1, prev[c - 1] + sub)
            prev = row
        return prev[-1]
    members: dict[int, list[int]] = {}
    for j, b in enumerate(blocks):  # type: ignore[arg-type]
        members.setdefault(b, []).append(j)
    dist = list(range(a + 1))  # no gold yet: delete every agent call
    for b in sorted(members):
        names = Counter(gold[j] for j in members[b])
        k = len(members[b])
        row = [0] * (a + 1)
        for x in range(a + 1):
            best = None
            for x0 in range(x + 1):
                shared = sum((Counter(agent[x0:x]) & names).values())
                cost = dist[x0] + max(x - x0, k) - shared
                best = cost if best is None else min(best, cost)
            row[x] = best  # type: ignore[assignment]
        dist = row
    return dist[a]


def trajectory_precision(
    agent: Sequence[Any], gold: Sequence[Any], blocks: Sequence[int] | None = None
) -> float:
    """tp = 1 - edit distance / max(|A|, |G|); 1.0 when both are empty."""
    longest = max(len(agent), len(gold))
    if longest == 0:
        return 1.0
    return 1.0 - edit_distance(agent, gold, blocks) / longest
