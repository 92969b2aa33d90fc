"""Gold calls and their rules: acceptable values, optional arguments, order-free groups, the
arguments compared, and whose call it is.

A gold call in a dataset's ``target`` list is ``{"name", "args"}`` with, optionally:

- ``accept``: ``{key: [value, ...]}``, every acceptable value of the key (matching any one
  is valid); a value that is itself a list or an object is one element of that list. A key
  of ``args`` lists its gold value among them.
- ``optional``: ``[key, ...]``, keys the agent may leave out. An optional key may be absent
  from ``args``; supplying it is then valid with a value in ``accept[key]`` or the default.
- ``group``: an integer or a string; consecutive calls with the same group form one block
  whose calls may come in any order. A group's calls are next to each other.
- ``compare``: ``[key, ...]``, the only keys whose values are compared (τ²-bench's
  ``compare_args``); ``[]`` compares none, so any arguments the tool takes are right. Left
  out: every key is compared.
- ``side``: ``"agent"`` (the default) or ``"user"``: a call the user is to make (τ²-bench's
  actions whose requestor is the user, on the user's own device), scored with
  ``score --side user`` and never against the agent's calls.
- ``bfcl``: ``{"answer", "function"}``, BFCL's own answer for the call and the function
  schema its checker reads, as ``import --format bfcl`` keeps them (``score --scorer bfcl``
  reads them; an export of such a run writes them back). Its keys are BFCL's and are not
  checked against the tool's parameters: BFCL's answers name some their functions lack.

An entry's ``"order": "any"`` makes all its calls one such block: stored as the group
:data:`ANY_ORDER` on every call. This module checks all of it, and a call's keys against a
tool's parameters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# the group every call of an entry with "order": "any" is stored with
ANY_ORDER = "any"
ORDERS = ("any",)
# whose calls a gold call stands for: the agent's (the default, stored without a side) or the
# user's
SIDES = ("agent", "user")


class GoldProblem(Exception):
    """What is wrong with a gold call or an entry's gold, without its place."""


@dataclass(frozen=True)
class GoldCall:
    """One expected tool call, with its rules (None: none given)."""

    name: str
    args: dict[str, Any]
    accept: dict[str, list[Any]] | None = None
    optional: tuple[str, ...] | None = None
    group: int | str | None = None
    compare: tuple[str, ...] | None = None
    side: str | None = None  # None: the agent's
    bfcl: dict[str, Any] | None = field(default=None, compare=False)  # BFCL's answer, function

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.accept is not None:
            out["accept"] = self.accept
        if self.optional is not None:
            out["optional"] = list(self.optional)
        if self.group is not None:
            out["group"] = self.group
        if self.compare is not None:
            out["compare"] = list(self.compare)
        if self.side is not None:
            out["side"] = self.side
        if self.bfcl is not None:
            out["bfcl"] = self.bfcl
        return out

    @property
    def keys(self) -> set[str]:
        """Every argument key the call names: in args, accept, optional and compare."""
        return (
            set(self.args) | set(self.accept or {}) | set(self.optional or ())
            | set(self.compare or ())
        )  # fmt: skip


def call_rules(call: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The checked rules of a gold call object (``where``: such as ``target[2]``), as
    keyword arguments of :class:`GoldCall`."""
    args = call.get("args", {})
    out: dict[str, Any] = {}
    if "optional" in call:
        optional = call["optional"]
        if not isinstance(optional, list) or not all(isinstance(k, str) for k in optional):
            raise GoldProblem(f"{where}.optional must be a list of argument names")
        repeated = sorted({k for k in optional if optional.count(k) > 1})
        if repeated:
            raise GoldProblem(f"{where}.optional names {repeated[0]!r} twice")
        out["optional"] = tuple(optional)
    if "accept" in call:
        accept = call["accept"]
        if not isinstance(accept, dict):
            raise GoldProblem(f"{where}.accept must be an object of lists of acceptable values")
        for key, values in accept.items():
            if not isinstance(values, list) or not values:
                raise GoldProblem(
                    f"{where}.accept.{key} must be a non-empty list of acceptable values "
                    "(a value that is a list is one element of it)"
                )
            if key in args and not any(_same_json(args[key], v) for v in values):
                raise GoldProblem(
                    f"{where}.accept.{key} does not list args.{key} ({_short(args[key])}): "
                    "accept lists every acceptable value, gold's own among them"
                )
            if key not in args and key not in out.get("optional", ()):
                raise GoldProblem(
                    f"{where}.accept.{key}: {key!r} is neither in args nor optional "
                    "(an acceptable value of a key gold does not pass belongs to an optional key)"
                )
        out["accept"] = accept
    if "group" in call:
        group = call["group"]
        if isinstance(group, bool) or not isinstance(group, int | str):
            raise GoldProblem(f"{where}.group must be an integer or a string")
        out["group"] = group
    if "compare" in call:
        compare = call["compare"]
        if not isinstance(compare, list) or not all(isinstance(k, str) for k in compare):
            raise GoldProblem(
                f"{where}.compare must be a list of argument names ([]: compare none)"
            )
        repeated = sorted({k for k in compare if compare.count(k) > 1})
        if repeated:
            raise GoldProblem(f"{where}.compare names {repeated[0]!r} twice")
        uncompared = sorted(set(out.get("accept", {})) - set(compare))
        if uncompared:
            raise GoldProblem(
                f"{where}.accept.{uncompared[0]}: {uncompared[0]!r} is not compared (it is "
                "not in compare), so its acceptable values would never be looked at"
            )
        out["compare"] = tuple(compare)
    if "side" in call:
        side = call["side"]
        if side not in SIDES:
            raise GoldProblem(f"{where}.side must be {' or '.join(map(repr, SIDES))}")
        if side != "agent":  # the agent's is the default, stored without a side
            out["side"] = side
    if "bfcl" in call:
        kept = call["bfcl"]
        if not (
            isinstance(kept, dict)
            and isinstance(kept.get("answer"), dict)
            and isinstance(kept.get("function"), dict)
        ):
            raise GoldProblem(
                f"{where}.bfcl must be BFCL's answer and function, as import --format bfcl "
                'keeps them ({"answer": {...}, "function": {...}})'
            )
        out["bfcl"] = kept
    return out


def check_groups(calls: Sequence[GoldCall], prefix: str = "target") -> None:
    """Refuse a group whose calls are not next to each other."""
    ended: dict[str, int] = {}
    for j, call in enumerate(calls):
        if call.group is None:
            continue
        key = json.dumps(call.group)
        before = calls[j - 1].group if j else None
        if j and before is not None and json.dumps(before) == key:
            continue
        if key in ended:
            raise GoldProblem(
                f"{prefix}[{j}].group {call.group!r} is also the group of {prefix}[{ended[key]}], "
                "with other calls between: a group's calls must be next to each other"
            )
        ended[key] = j


def check_order(calls: Sequence[GoldCall], order: Any) -> None:
    """Refuse an entry's ``order`` other than ``"any"``, or given beside groups."""
    if order is None:
        return
    if order not in ORDERS:
        raise GoldProblem(f"order must be {' or '.join(map(repr, ORDERS))}, got {_short(order)}")
    grouped = [j for j, c in enumerate(calls) if c.group is not None]
    if grouped:
        raise GoldProblem(
            f'gives "order": "any" and target[{grouped[0]}].group: give the order one way'
        )


def stored_calls(calls: Sequence[GoldCall], order: str | None) -> list[dict[str, Any]]:
    """The gold calls as a run stores them: with ``"order": "any"``, every call in the
    group :data:`ANY_ORDER`."""
    out = [c.to_dict() for c in calls]
    if order == "any":
        for c in out:
            c["group"] = ANY_ORDER
    return out


def key_problems(call: GoldCall, params: set[str] | None) -> list[str]:
    """Keys of a gold call's args, accept and optional that the tool (``params``; None: one
    that takes any argument) lacks, each as a problem (none for a call with BFCL's answer:
    its keys are BFCL's)."""
    problems: list[str] = []
    # (a tool of free-form arguments takes any key; BFCL's answers name some parameters
    # their functions lack)
    if params is None or call.bfcl is not None:
        return problems
    for what, keys in (("passes", call.args), ("accepts values of", call.accept or {}),
                       ("makes optional", call.optional or ()),
                       ("compares", call.compare or ())):  # fmt: skip
        extra = sorted(set(keys) - params)
        if extra:
            problems.append(
                f"{what} {', '.join(map(repr, extra))}, which {call.name} does not take"
            )
    return problems


def _same_json(a: Any, b: Any) -> bool:
    """The same JSON value (1 is not 1.0 nor true; key order aside)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
