"""Tool roles: ``write`` (changes state), ``read``, ``scratch`` (thinking or arithmetic with
no effect), or none; and the focus of a scoring on some tools or roles.

A tool's role comes from its schema (``"role"`` beside its name, kept in the run's manifest)
or from ``score --role ROLE=NAME,...``, which wins (a name holding a comma is quoted, as in
CSV: ``--role 'write="book,cancel"'``). The roles a scoring used are stored in
its summary (``roles``) and the ``--role`` part in its options, so ``audit verify`` scores
it again the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tcbreplay._inputs.roles import ROLES
from tcbreplay._score.flat_calls import FlatCalls, FlatSide, first_rows
from tcbreplay._score.texts import filter_texts
from tcbreplay.errors import InputError

__all__ = [
    "ROLES", "join_names", "parse_names", "parse_roles", "restrict", "split_names", "tool_roles"
]  # fmt: skip


def split_names(text: str, where: str) -> list[str]:
    """``NAME,NAME,...`` as a list of names, each stripped of spaces at its ends. A name
    that holds a comma or a quote, or spaces at its ends, is written in double quotes with
    each quote in it doubled, as in CSV: ``"book,cancel",pay``; an error names ``where``."""
    names: list[str] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if text.startswith('"', at):
            parts, start = [], at + 1
            while True:
                end = text.find('"', start)
                if end < 0:
                    raise InputError(f'{where}: a quote " without its closing one')
                parts.append(text[start:end])
                if not text.startswith('"', end + 1):
                    break
                parts.append('"')
                start = end + 2
            name, at = "".join(parts), end + 1
            while at < len(text) and text[at].isspace():
                at += 1
            if at < len(text) and text[at] != ",":
                raise InputError(
                    f"{where}: {text[at:]!r} after the quoted name {name!r}",
                    hint="separate names with commas",
                )
        else:
            end = text.find(",", at)
            end = len(text) if end < 0 else end
            name, at = text[at:end].strip(), end
            if '"' in name:
                raise InputError(
                    f"{where}: a quote inside an unquoted name {name!r}",
                    hint='write the whole name in quotes, each quote in it doubled: "a ""b"""',
                )
        names.append(name)
        if at >= len(text):
            return names
        at += 1  # the comma


def join_names(names: Iterable[str]) -> str:
    """Names as :func:`split_names` reads them back."""
    return ",".join(_quoted(name) for name in names)


def _quoted(name: str) -> str:
    if name and name == name.strip() and not {",", '"'} & set(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def parse_names(values: Iterable[str], option: str) -> tuple[str, ...]:
    """Repeated ``--only``/``--without`` options (``NAME,NAME,...`` each, quoted as
    :func:`split_names` reads them) as one tuple; an empty name is refused (left out, the
    option would score every tool in silence)."""
    out: list[str] = []
    for value in values:
        names = split_names(value, f"{option} {value!r}")
        if not names or not all(name.strip() for name in names):
            raise InputError(
                f"{option} {value!r}: an empty name; give tool or role names, "
                "comma-separated (--only write,search_flights)"
            )
        out += names
    return tuple(out)


def parse_roles(values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``--role ROLE=NAME,NAME,...`` options as sorted ``(tool, role)`` pairs (names quoted
    as :func:`split_names` reads them); a tool given two roles, an unknown role or an empty
    name is refused naming the option."""
    out: dict[str, str] = {}
    for value in values:
        role, sep, names = value.partition("=")
        role = role.strip()
        where = f"--role {value!r}"
        if not sep:
            raise InputError(f"{where}: expected ROLE=NAME,NAME,... (as write=book,cancel)")
        if role not in ROLES:
            raise InputError(f"{where}: unknown role {role!r}: choose one of {', '.join(ROLES)}")
        for name in split_names(names, where):
            if not name:
                raise InputError(f"{where}: a tool name is empty")
            if out.get(name, role) != role:
                raise InputError(
                    f"{where}: tool {name!r} is given the roles {out[name]} and {role}"
                )
            out[name] = role
    return tuple(sorted(out.items()))


def tool_roles(
    schemas: Sequence[Mapping[str, Any]],
    given: Sequence[tuple[str, str]],
    own: Sequence[tuple[str, str | None]] = (),
) -> dict[str, str]:
    """Each tool's role: its schema's (the run's tools, then the ``own`` tools samples carry,
    as ``(name, role)``), then ``--role``'s over it. A ``--role`` tool the run does not
    have, and a tool declared with two roles that ``--role`` does not settle, are refused."""
    roles: dict[str, str] = {}
    declared: dict[str, set[str]] = {}
    for name, role in [(s.get("name"), s.get("role")) for s in schemas] + list(own):
        if isinstance(name, str) and isinstance(role, str) and role in ROLES:
            declared.setdefault(name, set()).add(role)
    names = {s.get("name") for s in schemas} | {name for name, _ in own}
    settled = dict(given)
    for name, role in given:
        if name not in names:
            known = sorted(n for n in names if isinstance(n, str))
            raise InputError(
                f"--role {role}={join_names([name])}: the run has no tool {name!r}",
                hint=f"its tools: {', '.join(known) or 'none'}",
            )
    for name, found in declared.items():
        if name in settled:
            continue
        if len(found) > 1:
            raise InputError(
                f"tool {name!r} is declared with the roles {' and '.join(sorted(found))} "
                "(the run's tools and samples' own)",
                hint=f"choose one with --role ROLE={join_names([name])}",
            )
        roles[name] = next(iter(found))
    roles.update(settled)
    return dict(sorted(roles.items()))


def focus_tools(
    only: Sequence[str], without: Sequence[str], roles: Mapping[str, str], known: Iterable[str]
) -> tuple[frozenset[str], bool]:
    """The tools a focused scoring keeps, as ``(names, exclude)``: with ``--only``, the tools
    it names or whose role it names, less those of ``--without``; with ``--without`` alone,
    the tools to leave out (``exclude``: every other name is kept, tools the run does not
    declare too). A name that is no role and no tool of the run, and a role no tool has,
    are refused naming the option."""
    names = set(known)

    def tools_of(option: str, chosen: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for entry in chosen:
            if entry in ROLES:
                having = {name for name, role in roles.items() if role == entry}
                if not having:
                    raise InputError(
                        f"--{option} {entry}: no tool has the role {entry}",
                        hint=f"give tools roles in the tools file or with --role {entry}=NAME,...",
                    )
                out |= having
            elif entry in names:
                out.add(entry)
            else:
                raise InputError(
                    f"--{option} {entry}: the run has no tool {entry!r}, and it is no role "
                    f"({', '.join(ROLES)})"
                )
        return out

    left_out = tools_of("without", without)
    if only:
        return frozenset(tools_of("only", only) - left_out), False
    return frozenset(left_out), True


# the group every gold call of an order-free restriction is given (JSON text, as stored)
_ANY_ORDER = pa.scalar('"any"', pa.large_string())


def restrict(
    flat: FlatCalls, names: Collection[str], order_free: bool = False, exclude: bool = False
) -> FlatCalls:
    """The calls of ``flat`` to the tools ``names`` only (``exclude``: to every other tool),
    on both sides (positions renumbered within each sample); ``order_free``: all gold calls
    left one block, in any order."""
    import pyarrow.compute as pc  # here: see tcbreplay._score.texts

    keep = pa.array(sorted(names), pa.string())
    sides = []
    for side in (flat.agent, flat.gold):
        mask = pc.fill_null(pc.is_in(side.name, value_set=keep.cast(side.name.type)), False)
        if exclude:
            mask = pc.invert(mask)
        s = side.s[mask.to_numpy(zero_copy_only=False)]
        sides.append(
            (
                FlatSide(
                    s=s,
                    name=side.name.filter(mask),
                    args=side.args.filter(mask),
                    first=first_rows(s, flat.samples.height),
                ),
                mask,
            )
        )
    (agent, _), (gold, gold_mask) = sides
    rules = None
    if flat.rules is not None:
        rules = {k: v.filter(gold_mask) for k, v in flat.rules.items()}
    if order_free:
        rules = _order_free(rules, len(gold.s))
    return FlatCalls(samples=flat.samples, agent=agent, gold=gold, rules=rules, tools=flat.tools)


def restrict_calls(
    flat: FlatCalls, agent_keep: np.ndarray, gold_keep: np.ndarray, order_free: bool = False
) -> FlatCalls:
    """The calls of ``flat`` each mask marks (a bool per agent call, per gold call); every
    sample stays, with the calls it keeps; ``order_free``: as :func:`restrict`'s."""
    sides = []
    for side, mask in ((flat.agent, agent_keep), (flat.gold, gold_keep)):
        s = side.s[mask]
        sides.append(
            FlatSide(
                s=s,
                name=filter_texts(side.name, mask),
                args=filter_texts(side.args, mask),
                first=first_rows(s, flat.samples.height),
            )
        )
    rules = None
    if flat.rules is not None:
        rules = {k: filter_texts(v, gold_keep) for k, v in flat.rules.items()}
    if order_free:
        rules = _order_free(rules, len(sides[1].s))
    return FlatCalls(
        samples=flat.samples, agent=sides[0], gold=sides[1], rules=rules, tools=flat.tools
    )


def _order_free(rules: dict[str, pa.Array] | None, count: int) -> dict[str, pa.Array]:
    """The rules of ``count`` gold calls made one block, in any order."""
    empty = pa.nulls(count, pa.large_string())
    rules = rules or {"accept": empty, "optional": empty, "compare": empty}
    return {**rules, "group": pa.repeat(_ANY_ORDER, count)}
