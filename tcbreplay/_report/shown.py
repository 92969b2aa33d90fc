"""The samples a report shows in full: every one up to a number, past it a choice that keeps
the samples that matter most and a seeded sample of the rest.

A sample shown has its row in the samples table and its trajectories and transcript in the
page; the cards, charts and per-tool numbers count every sample whatever is shown. Past the
number, three quarters of it go to the samples regressed (vs the first run), in error
(while recording) and otherwise failed, a sample counted in the first of those kinds it
is: shared evenly among the kinds, a kind with fewer samples than its share shown whole and
its room left to the next ones. The last quarter, and what the kinds leave, goes to the rest;
what the rest leaves goes back to the kinds. Within a kind, and in the rest, the samples
shown are a choice at random (``numpy``'s generator, seeded): the same runs, number and seed
show the same samples.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

# the samples a report shows in full before it chooses (report --samples)
SAMPLES = 2_000
# the seed of that choice (report --seed)
SEED = 0
# the kinds shown first, in this order
KINDS = ("regressed", "in error", "failed")


@dataclass
class Shown:
    """How a report chose the samples it shows, of ``total``: per kind (:data:`KINDS`) how
    many it shows of how many there are, and how many of the rest it shows."""

    total: int
    limit: int
    seed: int
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    rest: tuple[int, int] = (0, 0)

    @property
    def shown(self) -> int:
        return sum(n for n, _ in self.kinds.values()) + self.rest[0]


def choose(
    kinds: Mapping[str, Sequence[bool] | np.ndarray],
    total: int,
    limit: int | None,
    seed: int = SEED,
) -> tuple[list[int], Shown | None]:
    """The positions (ascending) of the samples shown, of ``total``, and how they were chosen
    (None when all are: ``limit`` None, or no fewer than ``total``). ``kinds``: per kind of
    :data:`KINDS`, a flag per sample (a sample goes with the first of its kinds)."""
    if limit is None or total <= limit:
        return list(range(total)), None
    left = np.ones(total, dtype=bool)  # not yet of a kind
    groups: dict[str, np.ndarray] = {}
    for kind in KINDS:
        given = kinds.get(kind)
        flags = np.zeros(total, dtype=bool) if given is None else np.asarray(given, dtype=bool)
        members = np.flatnonzero(flags & left)
        left &= ~flags
        if len(members):
            groups[kind] = members
    others = np.flatnonzero(left)
    sizes = [len(m) for m in groups.values()]
    shares = _share(sizes, limit - limit // 4)
    rest = min(len(others), limit - sum(shares))
    more = _share([n - k for n, k in zip(sizes, shares, strict=True)], limit - sum(shares) - rest)
    rng = np.random.default_rng(seed)
    shown = Shown(total=total, limit=limit, seed=seed)
    chosen = []
    for (kind, members), k, extra in zip(groups.items(), shares, more, strict=True):
        chosen.append(_pick(rng, members, k + extra))
        shown.kinds[kind] = (k + extra, len(members))
    chosen.append(_pick(rng, others, rest))
    shown.rest = (rest, len(others))
    return sorted(int(k) for k in np.concatenate([np.empty(0, np.int64), *chosen])), shown


def _share(sizes: list[int], room: int) -> list[int]:
    """``room`` shared evenly among groups of ``sizes``, none given more than its size, what
    one cannot take going to the others (the first ones first)."""
    given = [0] * len(sizes)
    open_ = [k for k, n in enumerate(sizes) if n]
    while room > 0 and open_:
        share = max(1, room // len(open_))
        for k in list(open_):
            take = min(share, sizes[k] - given[k], room)
            given[k] += take
            room -= take
            if given[k] == sizes[k]:
                open_.remove(k)
            if not room:
                break
    return given


def _pick(rng: np.random.Generator, members: np.ndarray, room: int) -> np.ndarray:
    """All of ``members`` when they fit in ``room``, else ``room`` of them at random."""
    if len(members) <= room:
        return members
    if room <= 0:
        return members[:0]
    return np.sort(rng.choice(members, size=room, replace=False))


def shown_note(shown: Shown | None) -> str:
    """The page's note on what its samples table and transcripts hold ('' when every sample):
    how many of each kind, and where the others are."""
    if shown is None:
        return ""
    parts = [
        f"all {n:,} {kind}"
        if n == of
        else f"none of the {of:,} {kind}"
        if not n
        else f"{n:,} of the {of:,} {kind} chosen at random"
        for kind, (n, of) in shown.kinds.items()
    ]
    if shown.rest[0] or not parts:
        parts.append(f"{shown.rest[0]:,} {'others' if parts else 'samples'} chosen at random")
    text = (
        f"Showing {shown.shown:,} of {shown.total:,} samples with their transcripts: "
        f"{', '.join(parts)} (seed {shown.seed}). The cards, charts, per-tool numbers and "
        "validity panel count every sample; tcbreplay report --samples N (or --all-samples) "
        "shows more, and tcbreplay export or tcbreplay sql reach every sample."
    )
    return f'<p class="hint" id="shown">{html.escape(text)}</p>'
