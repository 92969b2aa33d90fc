"""options"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tcbreplay._score.metrics import DEFAULT_ABS_TOL, DEFAULT_REL_TOL
from tcbreplay.errors import InputError

DASHBOARD_MODES = ("mismatches", "all", "none")


SCORERS = ("spec", "abet", "bfcl")


_TOLERANCES = re.compile(r"spec_rel-([^_]+)_abs-([^_]+)")


@dataclass(frozen=True)
class ScoreOptions:
    """Scoring options; each combination gets its own results folder."""

    scorer: str = "spec"
    rel_tol: float = DEFAULT_REL_TOL
    abs_tol: float = DEFAULT_ABS_TOL

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise InputError(f"--scorer {self.scorer!r}: choose one of {', '.join(SCORERS)}")
        for option, value in (("--rel-tol", self.rel_tol), ("--abs-tol", self.abs_tol)):
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{option} {value}: must be a finite number, not negative")

    @property
    def scoring(self) -> str:
        """The results folder: ``spec``, ``abet``, ``bfcl``, or ``spec_rel-<r>_abs-<a>``."""
        if self.scorer != "spec":
            return self.scorer
        if (self.rel_tol, self.abs_tol) == (DEFAULT_REL_TOL, DEFAULT_ABS_TOL):
            return "spec"
        return f"spec_rel-{self.rel_tol:g}_abs-{self.abs_tol:g}"

    def score_flags(self) -> str:
        """The options of ``tcbreplay score`` that give this scoring."""
        if self.scorer == "abet":
            return " --scorer abet"
        if self.scoring == "spec":
            return ""
        return f" --rel-tol {self.rel_tol!r} --abs-tol {self.abs_tol!r}"

    def to_dict(self) -> dict[str, Any]:
        if self.scorer != "spec":  # the tolerances are the spec scorer's
            return {"scorer": self.scorer}
        return {"scorer": "spec", "rel_tol": self.rel_tol, "abs_tol": self.abs_tol}

    @classmethod
    def from_scoring(cls, scoring: str) -> ScoreOptions | None:
        """The options a results folder's name stands for; None for a name none give."""
        if scoring in SCORERS:
            return cls(scorer=scoring)
        match = _TOLERANCES.fullmatch(scoring)
        if match is None:
            return None
        try:
            options = cls(rel_tol=float(match[1]), abs_tol=float(match[2]))
        except (ValueError, InputError):
            return None
        # only the options' own name (spec_rel-1e-09_abs-1e-09 is named spec)
        return options if options.scoring == scoring else None

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ScoreOptions:
        return cls(
            scorer=obj.get("scorer", "spec"),
            rel_tol=obj.get("rel_tol", DEFAULT_REL_TOL),
            abs_tol=obj.get("abs_tol", DEFAULT_ABS_TOL),
        )


def missing_scoring_hint(run_id: str, scoring: str, stored: Sequence[str]) -> str:
    """What to do about a scoring a run does not have: the ``score`` command that makes it,
    or the name it may have meant; and the scorings the run has."""
    options = ScoreOptions.from_scoring(scoring)
    if options is not None:
        first = f"score it so first: tcbreplay score {run_id}{options.score_flags()}"
    else:
        close = difflib.get_close_matches(scoring, [*stored, *SCORERS], n=1, cutoff=0.5)
        first = (
            f"did you mean {close[0]!r}?"
            if close
            else "a scoring is named spec, abet or spec_rel-<rel-tol>_abs-<abs-tol>"
        )
    has = f"scorings of {run_id}: {', '.join(stored)}" if stored else "it has no stored scoring"
    return f"{first} ({has})"
