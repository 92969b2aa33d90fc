"""The samples a report shows in full: every one up to a limit, past it those that matter most
and a seeded choice of the rest.

A sample shown has its row in the samples table and its trajectories and transcript in the
page; the cards, charts and per-tool numbers count every sample whatever is shown. Past the
limit the page shows, in this order, the samples regressed (vs the first run), those that
ended in error while recording, the others that failed, and then the rest; a kind that does
not fit whole is a choice of its samples at random (``numpy``'s generator, seeded), as are
the rest that fill the page up to the limit. The same runs, limit and seed show the same
samples.
"""

from __future__ import annotations

import html
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
    kinds: dict[str, list[bool]], total: int, limit: int | None, seed: int = SEED
) -> tuple[list[int], Shown | None]:
    """The positions (ascending) of the samples shown, of ``total``, and how they were chosen
    (None when all are: ``limit`` None, or no fewer than ``total``). ``kinds``: per kind of
    :data:`KINDS`, a flag per sample (a sample goes with the first of its kinds)."""
    if limit is None or total <= limit:
        return list(range(total)), None
    rng = np.random.default_rng(seed)
    left = np.ones(total, dtype=bool)  # not yet of a kind
    chosen: list[np.ndarray] = []
    room = limit
    shown = Shown(total=total, limit=limit, seed=seed)
    for kind in KINDS:
        flags = np.asarray(kinds.get(kind) or [False] * total, dtype=bool)
        members = np.flatnonzero(flags & left)
        left &= ~flags
        if not len(members):
            continue
        picked = _pick(rng, members, room)
        shown.kinds[kind] = (len(picked), len(members))
        chosen.append(picked)
        room -= len(picked)
    others = np.flatnonzero(left)
    picked = _pick(rng, others, room)
    shown.rest = (len(picked), len(others))
    chosen.append(picked)
    return sorted(int(k) for k in np.concatenate(chosen)), shown


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
        f"{', '.join(parts)} (seed {shown.seed}). The cards, charts and per-tool numbers count "
        "every sample; tcbreplay report --samples N (or --all-samples) shows more, and "
        "tcbreplay export or tcbreplay sql reach every sample."
    )
    return f'<p class="hint" id="shown">{html.escape(text)}</p>'
