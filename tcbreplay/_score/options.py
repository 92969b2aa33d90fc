"""Scoring options, and the name of the folder a scoring with them writes into."""

from __future__ import annotations

import difflib
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tcbreplay._inputs.roles import ROLES
from tcbreplay._score.metrics import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
    FORMER_ABS_TOL,
    STRINGS,
    TYPES,
    Compare,
)
from tcbreplay._score.roles import join_names
from tcbreplay._store.schema import DEFAULT_SCORER
from tcbreplay.errors import InputError

DASHBOARD_MODES = ("mismatches", "all", "none")


SCORERS = (DEFAULT_SCORER, "abet", "bfcl")
# whose calls are scored (score --side): the agent's (the default), the user's own (τ²-bench's
# telecom user acts on its device), or both sides' together
SIDES = ("agent", "user", "both")


# the names of the default scorer's scorings: spec, then the tolerances when either is not the
# default, then each comparison option that is not the default:
# spec_rel-1e-06_abs-0_strings-bfcl_types-strict
_DEFAULT_SCORING_NAME = re.compile(
    r"spec(?:_rel-(?P<rel>[^_]+)_abs-(?P<abs>[^_]+))?"
    r"(?:_strings-(?P<strings>[a-z]+))?(?:_types-(?P<types>[a-z]+))?"
    r"(?:_only-(?P<only>[A-Za-z0-9._+-]+?))?(?:_without-(?P<without>[A-Za-z0-9._+-]+?))?"
    r"(?:_side-(?P<side>user|both))?"
    r"(?:_gold-(?P<gold>[A-Za-z0-9][A-Za-z0-9._-]*))?"
)
# a tool or role a focus names (a part of a folder's name)
_FOCUS_NAME = re.compile(r"[A-Za-z0-9._-]+")
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class ScoreOptions:
    """Scoring options; each combination gets its own results folder (:attr:`scoring`)."""

    scorer: str = DEFAULT_SCORER
    rel_tol: float = DEFAULT_REL_TOL
    abs_tol: float = DEFAULT_ABS_TOL
    strings: str = "exact"
    types: str = "lenient"
    # --role: (tool, role) pairs, sorted, over the roles of the tools' specs; they make
    # write_exact defined and choose the tools of a focus by role, not the folder's name
    roles: tuple[tuple[str, str], ...] = ()
    # --only, --without: the tools or roles every metric is restricted to, or leaves out
    only: tuple[str, ...] = ()
    without: tuple[str, ...] = ()
    # --gold-run: the run whose calls are the gold (see tcbreplay._score.gold_run)
    gold_run: str | None = None
    # --side: whose calls are held to which gold calls (the agent's to its own, by default)
    side: str = "agent"

    def __post_init__(self) -> None:
        if self.scorer not in SCORERS:
            raise InputError(f"--scorer {self.scorer!r}: choose one of {', '.join(SCORERS)}")
        if self.side not in SIDES:
            raise InputError(f"--side {self.side!r}: choose one of {', '.join(SIDES)}")
        if self.side != "agent":
            if self.scorer != DEFAULT_SCORER:
                raise InputError(f"--side {self.side} applies to --scorer spec")
            if self.gold_run is not None:
                raise InputError(
                    f"--side {self.side} goes with the dataset's gold: another run's calls "
                    "(--gold-run) are its agent's"
                )
        if self.gold_run is not None:
            if self.scorer == "bfcl":
                raise InputError("--gold-run: the bfcl scorer judges by BFCL's own answers")
            if not _RUN_NAME.fullmatch(self.gold_run):
                raise InputError(f"--gold-run {self.gold_run!r}: not a run id")
        for option, value in (("--rel-tol", self.rel_tol), ("--abs-tol", self.abs_tol)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(f"{option} {value!r}: must be a number")
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{option} {value}: must be a finite number, not negative")
        for option, choice, choices in (("--strings", self.strings, STRINGS),
                                        ("--types", self.types, TYPES)):  # fmt: skip
            if choice not in choices:
                raise InputError(f"{option} {choice!r}: choose one of {', '.join(choices)}")
        if self.scorer != DEFAULT_SCORER and self.compare != Compare():
            raise InputError(
                f"--scorer {self.scorer} compares values its own way: --rel-tol, --abs-tol, "
                "--strings and --types apply to --scorer spec"
            )
        if self.scorer != DEFAULT_SCORER and self.roles:
            raise InputError(
                f"--scorer {self.scorer} has no roles: --role applies to --scorer spec"
            )
        object.__setattr__(self, "roles", tuple(sorted((str(n), str(r)) for n, r in self.roles)))
        for name, role in self.roles:
            if role not in ROLES:
                raise InputError(f"--role {role}={name}: choose one of {', '.join(ROLES)}")
        for option in ("only", "without"):
            chosen = getattr(self, option)
            if chosen and self.scorer != DEFAULT_SCORER:
                raise InputError(f"--{option} applies to --scorer spec")
            object.__setattr__(self, option, tuple(sorted(set(chosen))))
            for name in getattr(self, option):
                if not _FOCUS_NAME.fullmatch(name):
                    role = shlex.quote(f"write={join_names([name])}")
                    raise InputError(
                        f"--{option} {name!r}: a focus names tools or roles of letters, digits "
                        "and . _ - only (the scoring's folder is named after it)",
                        hint=f"give the tool a role, as --role {role}, and name the role",
                    )
        if set(self.only) & set(self.without):
            both = sorted(set(self.only) & set(self.without))[0]
            raise InputError(f"--only and --without both name {both!r}")

    @property
    def compare(self) -> Compare:
        """How the default scorer compares values."""
        return Compare(self.rel_tol, self.abs_tol, self.strings, self.types)

    @property
    def scoring(self) -> str:
        """The results folder: ``abet``, ``bfcl``, ``spec`` for the defaults, or ``spec``
        followed by the options that differ: ``_rel-<r>_abs-<a>`` (both tolerances, when
        either differs), ``_strings-bfcl``, ``_types-strict``, the focus, ``_side-user`` or
        ``_side-both``; last ``_gold-<run>`` for a scoring against another run's calls."""
        gold = f"_gold-{self.gold_run}" if self.gold_run else ""
        if self.scorer != DEFAULT_SCORER:
            return self.scorer + gold
        name = "spec"
        if (self.rel_tol, self.abs_tol) != (DEFAULT_REL_TOL, DEFAULT_ABS_TOL):
            name += f"_rel-{self.rel_tol:g}_abs-{self.abs_tol:g}"
        if self.strings != "exact":
            name += f"_strings-{self.strings}"
        if self.types != "lenient":
            name += f"_types-{self.types}"
        if self.only:
            name += "_only-" + "+".join(self.only)
        if self.without:
            name += "_without-" + "+".join(self.without)
        if self.side != "agent":
            name += f"_side-{self.side}"
        return name + gold

    def flags(self) -> list[str]:
        """The ``tcbreplay score`` options that give these options (defaults left out)."""
        gold = ["--gold-run", self.gold_run] if self.gold_run else []
        if self.scorer != DEFAULT_SCORER:
            return ["--scorer", self.scorer, *gold]
        out = []
        if self.rel_tol != DEFAULT_REL_TOL:
            out += ["--rel-tol", f"{self.rel_tol:g}"]
        if self.abs_tol != DEFAULT_ABS_TOL:
            out += ["--abs-tol", f"{self.abs_tol:g}"]
        if self.strings != "exact":
            out += ["--strings", self.strings]
        if self.types != "lenient":
            out += ["--types", self.types]
        by_role: dict[str, list[str]] = {}
        for name, role in self.roles:
            by_role.setdefault(role, []).append(name)
        for role, names in by_role.items():
            out += ["--role", f"{role}={join_names(names)}"]
        if self.only:
            out += ["--only", join_names(self.only)]
        if self.without:
            out += ["--without", join_names(self.without)]
        if self.side != "agent":
            out += ["--side", self.side]
        return out + gold

    def score_flags(self) -> str:
        """The options of ``tcbreplay score`` that give this scoring, quoted for a shell."""
        return "".join(f" {shlex.quote(flag)}" for flag in self.flags())

    def to_dict(self) -> dict[str, Any]:
        gold = {"gold_run": self.gold_run} if self.gold_run else {}
        if self.scorer != DEFAULT_SCORER:  # the comparison options are the default scorer's
            return {"scorer": self.scorer, **gold}
        out: dict[str, Any] = {
            "scorer": DEFAULT_SCORER,
            "rel_tol": self.rel_tol,
            "abs_tol": self.abs_tol,
            "strings": self.strings,
            "types": self.types,
        }
        if self.roles:  # only then: the options of a scoring without them hash as before
            out["roles"] = dict(self.roles)
        for option in ("only", "without"):
            if getattr(self, option):
                out[option] = list(getattr(self, option))
        if self.side != "agent":  # only then, as roles
            out["side"] = self.side
        return {**out, **gold}

    @property
    def focused(self) -> bool:
        """Whether the metrics look at some of the tools only (--only, --without)."""
        return bool(self.only or self.without)

    @classmethod
    def from_scoring(cls, scoring: str) -> ScoreOptions | None:
        """The options a results folder's name stands for; None for a name none give."""
        if scoring in SCORERS:
            return cls(scorer=scoring)
        scorer, _, gold = scoring.partition("_gold-")
        if scorer in SCORERS and scorer != DEFAULT_SCORER and gold:
            try:
                return cls(scorer=scorer, gold_run=gold)
            except InputError:
                return None
        match = _DEFAULT_SCORING_NAME.fullmatch(scoring)
        if match is None:
            return None
        try:
            options = cls(
                rel_tol=float(match["rel"]) if match["rel"] else DEFAULT_REL_TOL,
                abs_tol=float(match["abs"]) if match["abs"] else DEFAULT_ABS_TOL,
                strings=match["strings"] or "exact",
                types=match["types"] or "lenient",
                only=tuple(match["only"].split("+")) if match["only"] else (),
                without=tuple(match["without"].split("+")) if match["without"] else (),
                gold_run=match["gold"],
                side=match["side"] or "agent",
            )
        except (ValueError, InputError):
            return None
        # only the options' own name (spec_rel-1e-09_abs-0 is named spec)
        return options if options.scoring == scoring else None

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ScoreOptions:
        """The options of a stored audit record. Every version names its tolerances there;
        ``abs_tol`` missing reads as the default of the versions before ``strings`` and
        ``types`` existed (1e-9), and those two missing as ``exact`` and ``lenient``, the
        only comparison those versions had."""
        scorer = obj.get("scorer", DEFAULT_SCORER)
        gold = obj.get("gold_run")
        if scorer != DEFAULT_SCORER:
            return cls(scorer=scorer, gold_run=gold)
        return cls(
            gold_run=gold,
            rel_tol=obj.get("rel_tol", DEFAULT_REL_TOL),
            abs_tol=obj.get("abs_tol", FORMER_ABS_TOL if "strings" not in obj else DEFAULT_ABS_TOL),
            strings=obj.get("strings", "exact"),
            types=obj.get("types", "lenient"),
            roles=tuple((obj.get("roles") or {}).items()),
            only=tuple(obj.get("only") or ()),
            without=tuple(obj.get("without") or ()),
            side=obj.get("side", "agent"),
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
            else "a scoring is named spec, abet, bfcl or spec followed by the options that "
            "differ, as spec_rel-<rel-tol>_abs-<abs-tol>_strings-bfcl_types-strict"
        )
    has = f"scorings of {run_id}: {', '.join(stored)}" if stored else "it has no stored scoring"
    return f"{first} ({has})"
