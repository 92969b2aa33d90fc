"""The run-level numbers of a large scoring, folded from its parts in memory that does not grow.

A run is scored in parts (ranges of samples), one after another or side by side, on this
machine or as Ray tasks. A run of more than ``EXACT_FROM_ROWS`` rows has each part's
per-sample scores made into a :class:`Tally` as soon as they are computed, and tallies add
up: counts as integers, the sums behind the means (tsa, tp) as exact sums (:func:`exact_sum`:
every float64 is an integer multiple of 2**-1126, so their sum is an integer), and a mean is
that sum divided by its count, rounded once. So its run-level numbers are the same to the bit
however the run was cut into parts and in whatever order the parts ended, and scoring holds
no per-sample column of the run for them. A smaller run keeps the few columns they are
computed from (at most about 50 MB) and computes them as it always has, with Polars: their
means, summed in Polars' order, repeat those of scorings stored before to the bit. (A large
run's means may differ from such a stored scoring's in their last bits, which ``audit
verify`` allows.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

# runs of more rows than this have their run-level numbers folded exactly (see above)
EXACT_FROM_ROWS = 1_000_000
# every finite float64 is a multiple of 2**-1126 (the smallest subnormal's last bit, 2**-1074,
# as frexp writes it: a 53-bit integer times 2**(exp - 53))
_SCALE = 1126
# bincount sums float64 weights: integers below 2**27 (the high half of a 53-bit mantissa)
# add exactly while fewer than 2**25 of them are summed at once
_CHUNK = 1 << 25
_LOW_BITS = 26


def exact_sum(values: np.ndarray) -> int:
    """The exact sum of finite float64 ``values``, as an integer in units of 2**-1126."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    total = 0
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        if not np.isfinite(chunk).all():
            raise ValueError("exact_sum takes finite numbers only")
        mantissa, exponent = np.frexp(chunk)
        whole = (mantissa * 2.0**53).astype(np.int64)  # exactly: 53 significant bits
        shift = exponent.astype(np.int64) + (_SCALE - 53)  # never negative
        bins = int(shift.max(initial=0)) + 1
        high = np.bincount(shift, weights=whole >> _LOW_BITS, minlength=bins)
        low = np.bincount(shift, weights=whole & ((1 << _LOW_BITS) - 1), minlength=bins)
        for at in np.flatnonzero((high != 0) | (low != 0)).tolist():
            total += ((int(high[at]) << _LOW_BITS) + int(low[at])) << at
    return total


def exact_mean(total: int, count: int) -> float | None:
    """An :func:`exact_sum` divided by ``count``, rounded once (None for no values)."""
    if not count:
        return None
    return total / (count << _SCALE)  # Python divides integers correctly rounded


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass
class _Group:
    """The sums of some samples (a category's): samples, defined tsa, exact sums, arguments."""

    n: int = 0
    n_tsa: int = 0
    n_tp: int = 0  # samples with a tp (every one the default scorer scores)
    tsa: int = 0
    tp: int = 0
    args_invalid: int = 0
    args_total: int = 0

    def add(self, other: _Group) -> None:
        self.n += other.n
        self.n_tsa += other.n_tsa
        self.n_tp += other.n_tp
        self.tsa += other.tsa
        self.tp += other.tp
        self.args_invalid += other.args_invalid
        self.args_total += other.args_total


@dataclass
class Tally:
    """The run-level numbers of some samples in a form that adds up exactly: those of
    :func:`tcbreplay._score.metrics.summarize`, of the outcome metrics (when scored) and per
    category."""

    all: _Group = field(default_factory=_Group)
    args_missing: int = 0
    n_errors: int = 0  # samples whose status is not ok
    n_missing: int = 0  # of them, those an import stored missing (no trace)
    outcomes: bool = False  # the scores hold exact, write_exact and first_divergence
    n_exact: int = 0
    exact_samples: int = 0
    n_write_exact: int = 0
    write_exact_samples: int = 0
    n_first_divergence: int = 0
    first_divergence_sum: int = 0
    has_covered: bool = False  # the scores hold covered
    n_covered: int = 0
    covered_samples: int = 0
    categories: dict[str | None, _Group] = field(default_factory=dict)

    @classmethod
    def of(cls, scores: pl.DataFrame) -> Tally:
        """The tally of some per-sample scores."""
        tally = cls(all=_group(scores))
        tally.args_missing = int(scores["args_missing"].sum())
        tally.n_errors = int((scores["status"] != "ok").sum())
        tally.n_missing = int((scores["status"] == "missing").sum())
        if "exact" in scores.columns:
            tally.outcomes = True
            exact = scores["exact"].drop_nulls()
            write = scores["write_exact"].drop_nulls()
            diverged = scores["first_divergence"].drop_nulls()
            tally.n_exact, tally.exact_samples = exact.len(), int(exact.sum())
            tally.n_write_exact, tally.write_exact_samples = write.len(), int(write.sum())
            tally.n_first_divergence = diverged.len()
            tally.first_divergence_sum = int(diverged.cast(pl.Int64).sum())
        if "covered" in scores.columns:
            tally.has_covered = True
            covered = scores["covered"].drop_nulls()
            tally.n_covered, tally.covered_samples = covered.len(), int(covered.sum())
        if "category" in scores.columns:
            for (category,), rows in scores.group_by("category"):
                tally.categories[category] = _group(rows)
        return tally

    def add(self, other: Tally) -> Tally:
        """Add ``other``'s samples (the sum is the same in any order); returns self."""
        self.all.add(other.all)
        self.args_missing += other.args_missing
        self.n_errors += other.n_errors
        self.n_missing += other.n_missing
        self.outcomes = self.outcomes or other.outcomes
        self.has_covered = self.has_covered or other.has_covered
        for name in ("n_exact", "exact_samples", "n_write_exact", "write_exact_samples",
                     "n_first_divergence", "first_divergence_sum", "n_covered",
                     "covered_samples"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for category, group in other.categories.items():
            self.categories.setdefault(category, _Group()).add(group)
        return self

    def metrics(self) -> dict[str, Any]:
        """The run-level metrics with the n behind each (as ``summarize``), then the outcome
        metrics' (as ``summarize_exact_match``) where the scores had them."""
        a = self.all
        out: dict[str, Any] = {
            "tsa": exact_mean(a.tsa, a.n_tsa),
            "tp": exact_mean(a.tp, a.n_tp),
            "ahr": _ratio(a.args_invalid, a.args_total),
            "n_samples": a.n,
            "n_tsa": a.n_tsa,
            "n_tp": a.n,
            "args_invalid": a.args_invalid,
            "args_total": a.args_total,
            "args_missing": self.args_missing,
            "n_errors": self.n_errors,
            "n_missing": self.n_missing,
        }
        if self.outcomes:
            out.update(
                {
                    "exact": _ratio(self.exact_samples, self.n_exact),
                    "n_exact": self.n_exact,
                    "exact_samples": self.exact_samples,
                    "write_exact": _ratio(self.write_exact_samples, self.n_write_exact),
                    "n_write_exact": self.n_write_exact,
                    "write_exact_samples": self.write_exact_samples,
                    "first_divergence": _ratio(self.first_divergence_sum, self.n_first_divergence),
                    "n_first_divergence": self.n_first_divergence,
                }
            )
            if self.has_covered:
                out.update(
                    {
                        "covered": _ratio(self.covered_samples, self.n_covered),
                        "n_covered": self.n_covered,
                        "covered_samples": self.covered_samples,
                    }
                )
        return out

    def by_category(self) -> list[dict[str, Any]]:
        """Per dataset category (by name, the samples without one last): its samples, tsa,
        tp and ahr; empty when no sample has a category."""
        if not self.categories or set(self.categories) == {None}:
            return []
        order = sorted(self.categories, key=lambda c: (c is None, c or ""))
        return [
            {
                "category": category,
                "n_samples": (g := self.categories[category]).n,
                "tsa": exact_mean(g.tsa, g.n_tsa),
                "tp": exact_mean(g.tp, g.n_tp),
                "ahr": _ratio(g.args_invalid, g.args_total),
            }
            for category in order
        ]


def _group(scores: pl.DataFrame) -> _Group:
    tsa = scores["tsa"].drop_nulls().to_numpy()
    tp = scores["tp"].drop_nulls().to_numpy()
    return _Group(
        n=scores.height,
        n_tsa=len(tsa),
        n_tp=len(tp),
        tsa=exact_sum(tsa),
        tp=exact_sum(tp),
        args_invalid=int(scores["args_invalid"].sum()),
        args_total=int(scores["args_total"].sum()),
    )
