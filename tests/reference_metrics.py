"""A brute-force reference of the per-sample metric spec, independent of ``_score.metrics``.

Written to be obviously right rather than fast: plain-Python value equality, a textbook
Levenshtein table over whole names, set-based TSA, and an AHR that enumerates every
order-preserving one-to-one same-name pairing and picks one by the spec's tie-break order.

Gold rules, written from the metric spec (docs/metrics.md): a gold call may carry ``accept`` (per
key, every acceptable value), ``optional`` (keys that may be left out), ``group`` (consecutive calls
with one group value form an order-free block) and ``compare`` (the only keys whose values are
judged; any other key the tool takes is right, and never missing). The brute force enumerates every
one-to-one same-name pairing whose pairs, listed by agent call, never go back to an earlier block,
and TP takes the least edit distance over every order of every block.

Inputs: ``gold`` is a sequence of ``(name, args)`` or ``(name, args, rules)`` (rules: a dict with
any of accept, optional, group, compare); ``agent`` a sequence of ``(name, args)``; ``tools`` a list
of ``{"name": ..., "parameters": {"properties": {param: {"type": ..., "default": ...}?}}}``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

REL_TOL = 1e-9
ABS_TOL = 0.0

Call = tuple[str, Mapping[str, Any]]
# (pairs, invalid, valid, missing) of one pairing
Counts = tuple[int, int, int, int]

_NO_DEFAULT = object()


def bfcl_string(text: str) -> str:
    """BFCL's normalisation: spaces and ,./-_*^ dropped, lowercased, single quotes as double."""
    kept = "".join(ch for ch in text if ch not in " ,./-_*^")
    return kept.lower().replace("'", '"')


def values_equal(
    a: Any, b: Any, rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL, strings: str = "exact"
) -> bool:
    """Equality of two JSON values (as Python objects) per the spec."""
    a_bool, b_bool = type(a) is bool, type(b) is bool
    if a_bool or b_bool:
        return a_bool and b_bool and a is b
    a_num = type(a) in (int, float)
    b_num = type(b) in (int, float)
    if a_num and b_num:
        if type(a) is int and type(b) is int:
            return a == b
        return math.isclose(_float(a), _float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    if type(a) is str and type(b) is str:
        if strings == "bfcl":
            return bfcl_string(a) == bfcl_string(b)
        return a == b
    if a is None and b is None:
        return True
    if type(a) is list and type(b) is list:
        if len(a) != len(b):
            return False
        return all(values_equal(x, y, rel_tol, abs_tol, strings) for x, y in zip(a, b, strict=True))
    if type(a) is dict and type(b) is dict:
        if set(a) != set(b):
            return False
        return all(values_equal(a[k], b[k], rel_tol, abs_tol, strings) for k in a)
    return False


def _float(x: int | float) -> float:
    try:
        return float(x)
    except OverflowError:  # an integer beyond the float range
        return math.inf if x > 0 else -math.inf


def levenshtein(x: Sequence[str], y: Sequence[str]) -> int:
    """Edit distance between two sequences of whole names (unit insert, delete, substitute)."""
    rows, cols = len(x) + 1, len(y) + 1
    d = [[0] * cols for _ in range(rows)]
    for r in range(rows):
        d[r][0] = r
    for c in range(cols):
        d[0][c] = c
    for r in range(1, rows):
        for c in range(1, cols):
            substitute = 0 if x[r - 1] == y[c - 1] else 1
            d[r][c] = min(d[r - 1][c] + 1, d[r][c - 1] + 1, d[r - 1][c - 1] + substitute)
    return d[rows - 1][cols - 1]


def tsa(agent_names: Sequence[str], gold_names: Sequence[str]) -> float | None:
    gold_set = set(gold_names)
    if not gold_set:
        return None
    return len(set(agent_names) & gold_set) / len(gold_set)


def tp(agent_names: Sequence[str], gold_names: Sequence[str]) -> float:
    longest = max(len(agent_names), len(gold_names))
    if longest == 0:
        return 1.0
    return 1.0 - levenshtein(agent_names, gold_names) / longest


def blocks(groups: Sequence[Any]) -> list[int]:
    """Each gold call's block: a new one unless its group (not None) equals the previous call's."""
    out: list[int] = []
    for j, group in enumerate(groups):
        joins = j > 0 and group is not None and type(group) is type(groups[j - 1])
        joins = joins and group == groups[j - 1]
        out.append(out[-1] if joins else (out[-1] + 1 if out else 0))
    return out


def block_orders(gold_names: Sequence[str], block_of: Sequence[int]) -> Iterator[list[str]]:
    """Every gold name sequence with each block's calls in any order."""
    members: dict[int, list[int]] = {}
    for j, b in enumerate(block_of):
        members.setdefault(b, []).append(j)
    choices = [list(itertools.permutations(members[b])) for b in sorted(members)]
    for pick in itertools.product(*choices):
        yield [gold_names[j] for perm in pick for j in perm]


def tp_blocks(
    agent_names: Sequence[str], gold_names: Sequence[str], block_of: Sequence[int]
) -> float:
    longest = max(len(agent_names), len(gold_names))
    if longest == 0:
        return 1.0
    distance = min(levenshtein(agent_names, order) for order in block_orders(gold_names, block_of))
    return 1.0 - distance / longest


def tool_params(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """tool name -> {param: declared default, or _NO_DEFAULT}; a tool that takes free-form
    arguments (``additionalProperties`` true or a schema, or parameters with no
    ``properties``) has every other key as ``ANY_KEY``, with no default."""
    out: dict[str, dict[str, Any]] = {}
    for spec in tools:
        parameters = spec.get("parameters") or {}
        props = parameters.get("properties") or {}
        params = out.setdefault(spec["name"], {})
        for param, schema in props.items():
            has_default = isinstance(schema, dict) and "default" in schema
            params[param] = schema["default"] if has_default else _NO_DEFAULT
        given = isinstance(spec.get("parameters"), dict)  # (none given: a tool of none)
        more = parameters.get("additionalProperties") if given else False
        if (
            more is True
            or isinstance(more, dict)
            or (more is None and "properties" not in parameters)
        ):
            params[ANY_KEY] = _NO_DEFAULT
    return out


# (a tool's params: any key the tool does not declare is one it takes)
ANY_KEY = object()


def integer_params(tools: Sequence[Mapping[str, Any]]) -> set[tuple[str, Any]]:
    """(tool, param) whose schema says "type": "integer" (``ANY_KEY``: every key a tool of
    free-form arguments does not declare, when its ``additionalProperties`` say so)."""
    out: set[tuple[str, Any]] = set()
    for spec in tools:
        parameters = spec.get("parameters") or {}
        props = parameters.get("properties") or {}
        for param, schema in props.items():
            if isinstance(schema, dict) and schema.get("type") == "integer":
                out.add((spec["name"], param))
        more = parameters.get("additionalProperties")
        if isinstance(more, dict) and more.get("type") == "integer":
            out.add((spec["name"], ANY_KEY))
    return out


def pair_counts(
    name: str,
    agent_args: Mapping[str, Any],
    gold_args: Mapping[str, Any],
    params: Mapping[str, Mapping[str, Any]],
    rel_tol: float,
    abs_tol: float,
    rules: Mapping[str, Any] | None = None,
    strings: str = "exact",
    integers: set[tuple[str, str]] | None = None,
) -> tuple[int, int, int]:
    """(invalid, valid, missing) of one agent call paired with one gold call of tool ``name``;
    ``integers``: the integer parameters when types are strict (None: lenient)."""
    declared = dict(params.get(name, {}))
    if ANY_KEY in declared:  # free-form: the keys passed are the tool's too
        declared = {**dict.fromkeys(agent_args, _NO_DEFAULT), **declared}
        if integers is not None and (name, ANY_KEY) in integers:
            integers = integers | {(name, k) for k in agent_args if k not in params[name]}
    accept = (rules or {}).get("accept") or {}
    optional = set((rules or {}).get("optional") or [])
    compare = (rules or {}).get("compare")
    compared = set(compare) if compare is not None else set(agent_args) | set(gold_args)
    invalid = valid = 0
    for key, value in agent_args.items():
        if key not in declared:
            bad = True  # (a) no such parameter
        elif (
            integers is not None
            and (name, key) in integers
            and type(value) is float
            and type(gold_args.get(key)) is not float
        ):
            bad = True  # strict types: a float for an integer parameter (gold's not a float)
        elif key not in compared:
            bad = False  # any value of a key not compared
        else:
            acceptable = list(accept.get(key, []))
            if key in gold_args:
                acceptable.append(gold_args[key])  # (b)
            elif declared[key] is not _NO_DEFAULT and strings != "bfcl":
                acceptable.append(declared[key])  # (c) (not as BFCL compares: it takes none)
            bad = not any(values_equal(value, v, rel_tol, abs_tol, strings) for v in acceptable)
        if bad:
            invalid += 1
        else:
            valid += 1
    missing = sum(
        1 for key in gold_args if key not in agent_args and key not in optional and key in compared
    )
    return invalid, valid, missing


def candidate_pairings(
    allowed: set[tuple[int, int]], n_agent: int, n_gold: int
) -> Iterator[list[tuple[int, int]]]:
    """Every strictly increasing matching of agent indices to gold indices using ``allowed``."""
    for k in range(min(n_agent, n_gold) + 1):
        for agent_idx in itertools.combinations(range(n_agent), k):
            for gold_idx in itertools.combinations(range(n_gold), k):
                chosen = list(zip(agent_idx, gold_idx, strict=True))
                if all(p in allowed for p in chosen):
                    yield chosen


def block_pairings(
    allowed: set[tuple[int, int]], n_agent: int, block_of: Sequence[int]
) -> Iterator[list[tuple[int, int]]]:
    """Every one-to-one pairing using ``allowed`` whose pairs, listed by agent call, never go
    back to an earlier gold block."""

    def extend(i: int, used: frozenset[int], chosen: list[tuple[int, int]]):
        if i == n_agent:
            yield list(chosen)
            return
        yield from extend(i + 1, used, chosen)
        for j in range(len(block_of)):
            if (i, j) in allowed and j not in used:
                if chosen and block_of[chosen[-1][1]] > block_of[j]:
                    continue
                chosen.append((i, j))
                yield from extend(i + 1, used | {j}, chosen)
                chosen.pop()

    yield from extend(0, frozenset(), [])


def best_counts(
    stats: Mapping[tuple[int, int], tuple[int, int, int]],
    n_agent: int,
    n_gold: int,
    block_of: Sequence[int] | None = None,
) -> Counts:
    """Brute-force choice over candidate pairs ``(i, j) -> (invalid, valid, missing)``:
    most pairs, then fewest invalid, then most valid, then fewest missing (with gold blocks:
    over :func:`block_pairings`)."""
    best: Counts | None = None
    best_key: tuple[int, int, int, int] | None = None
    pairings = (
        candidate_pairings(set(stats), n_agent, n_gold)
        if block_of is None
        else block_pairings(set(stats), n_agent, block_of)
    )
    for chosen in pairings:
        invalid = sum(stats[p][0] for p in chosen)
        valid = sum(stats[p][1] for p in chosen)
        missing = sum(stats[p][2] for p in chosen)
        key = (len(chosen), -invalid, valid, -missing)
        if best_key is None or key > best_key:
            best_key = key
            best = (len(chosen), invalid, valid, missing)
    assert best is not None
    return best


def score_sample(
    gold: Sequence[Any],
    agent: Sequence[Call],
    tools: Sequence[Mapping[str, Any]],
    rel_tol: float = REL_TOL,
    abs_tol: float = ABS_TOL,
    strings: str = "exact",
    types: str = "lenient",
) -> dict[str, Any]:
    """Per-sample tsa, tp, ahr and the AHR counts of the chosen pairing."""
    gold_names = [call[0] for call in gold]
    rules = [call[2] if len(call) > 2 else {} for call in gold]
    agent_names = [name for name, _ in agent]
    params = tool_params(tools)
    integers = integer_params(tools) if types == "strict" else None
    stats = {
        (i, j): pair_counts(
            agent[i][0], agent[i][1], gold[j][1], params, rel_tol, abs_tol, rules[j], strings,
            integers,
        )
        for i in range(len(agent))
        for j in range(len(gold))
        if agent_names[i] == gold_names[j]
    }  # fmt: skip
    block_of = blocks([r.get("group") for r in rules])
    ordered = len(set(block_of)) == len(block_of)
    pairs, invalid, valid, missing = best_counts(
        stats, len(agent), len(gold), None if ordered else block_of
    )
    total = invalid + valid
    accepted = {ij for ij, (inv, _, mis) in stats.items() if inv == 0 and mis == 0}
    divergence = first_divergence(accepted, len(agent), block_of)
    return {
        "exact": divergence is None,
        "first_divergence": divergence,
        # every gold call accepts some agent call, whatever the order and the other calls
        "covered": all(
            any((i, j) in accepted for i in range(len(agent))) for j in range(len(gold))
        ),
        "tsa": tsa(agent_names, gold_names),
        "tp": tp(agent_names, gold_names)
        if ordered
        else tp_blocks(agent_names, gold_names, block_of),
        "ahr": invalid / total if total else None,
        "args_invalid": invalid,
        "args_total": total,
        "args_missing": missing,
        "pairs": pairs,
    }


def gold_orders(block_of: Sequence[int]) -> Iterator[list[int]]:
    """Every order of the gold calls' indexes with each block's calls in any order."""
    members: dict[int, list[int]] = {}
    for j, b in enumerate(block_of):
        members.setdefault(b, []).append(j)
    choices = [list(itertools.permutations(members[b])) for b in sorted(members)]
    for combo in itertools.product(*choices):
        yield [j for block in combo for j in block]


def first_divergence(accepted: set[tuple[int, int]], a: int, block_of: Sequence[int]) -> int | None:
    """The longest p such that, in some order of gold allowed by its blocks, the agent's
    first p calls are accepted one by one by gold's first p; None when that is every call of
    both sides, else p (brute force over the orders)."""
    g = len(block_of)
    longest = 0
    for order in gold_orders(block_of):
        p = 0
        while p < min(a, g) and (p, order[p]) in accepted:
            p += 1
        longest = max(longest, p)
    return None if longest == a == g else longest
