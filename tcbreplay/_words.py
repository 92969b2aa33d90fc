"""How the lines users read say a count: "1 sample", "2 samples", "0 errors"."""

from __future__ import annotations


def count(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, in the singular for one (``many``: its plural, when not noun + s)."""
    return f"{n} {noun_for(n, noun, many)}"


def noun_for(n: float, noun: str, many: str | None = None) -> str:
    """``noun`` for ``n`` of it, without the number: in the singular for one."""
    return noun if n == 1 else many or noun + "s"
