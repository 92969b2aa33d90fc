"""Which dialect a traces file is written in: every registered dialect's sniff is asked, the
surest wins, and the choice says why.

A pick other dialects could also read says which, and that they were less sure; a fallback
(a pick below :data:`~tcbreplay._importers.dialect.GUESS`) names every dialect it tried and
why each did not fit. A file no dialect fits is refused with each dialect's reason (or, when
only one dialect found its shape in it, with that one's), and a file of a dialect that
sniffing never picks (:attr:`~tcbreplay._importers.dialect.Dialect.given_only`) with how to
name it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tcbreplay._importers import registry
from tcbreplay._importers.dialect import GUESS, Sniff, TraceFile
from tcbreplay.errors import TraceError


@dataclass(frozen=True)
class Sniffed:
    """The dialect sniffing chose, why (``reason``, as ``import`` says it), and every
    dialect's verdict, in the registry's order."""

    dialect: str
    reason: str
    verdicts: dict[str, Sniff]


def sniff(file: TraceFile) -> Sniffed:
    """The dialect ``file`` is written in, and why; a :class:`TraceError` when none fits."""
    verdicts = {d.name: d.sniff(file) for d in registry.dialects()}
    # the surest; the first registered of equally sure ones
    best = max(verdicts, key=lambda name: verdicts[name].confidence)
    verdict = verdicts[best]
    if not verdict.fits:
        raise _none_fits(file, verdicts)
    given_only = registry.get(best).given_only
    if given_only is not None:
        raise TraceError(f"{file.name}: cannot tell its format: {verdict.reason}", hint=given_only)
    reason = verdict.reason
    others = [(name, v) for name, v in verdicts.items() if name != best and v.fits]
    for name, other in others:
        reason += f"; {name} fits too, less surely ({other.reason})"
    if verdict.confidence < GUESS:
        tried = [f"{name}: {v.reason}" for name, v in verdicts.items() if not v.fits]
        reason += f"; no dialect fits better ({'; '.join(tried)})"
    return Sniffed(best, reason, verdicts)


def _none_fits(file: TraceFile, verdicts: dict[str, Sniff]) -> TraceError:
    """The error for a file no dialect fits: the one reason when only one dialect found its
    shape in the file, else each dialect's."""
    hint = f"give --format ({', '.join(registry.names())})"
    close = [v for v in verdicts.values() if v.close]
    if len(close) == 1:
        return TraceError(f"{file.name}: cannot tell its format: {close[0].reason}", hint=hint)
    if not file.data.strip():
        return TraceError(f"{file.name}: it is empty: no traces to import")
    # one line: each reason once, after the dialects that gave it
    by_reason: dict[str, list[str]] = {}
    for name, v in verdicts.items():
        by_reason.setdefault(v.reason, []).append(name)
    reasons = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
    return TraceError(
        f"{file.name}: cannot tell its format: no dialect fits it ({reasons})", hint=hint
    )
