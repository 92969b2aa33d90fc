"""The metric spec's test helpers shared by the score tests: the tools, generated samples,
the scoring path, the plain-Python reference and the comparisons of their results."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
import reference_metrics as ref
from hypothesis import strategies as st

from tcbreplay._score.metrics import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
)
from tcbreplay._score.run import score_tables
from traces import build_tables

# The tool universe of every case that does not name its own "tools": parameters with and without
# declared defaults (int, str, bool, float, null, object), unicode tool names, a tool without
# parameters.
TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "lang": {"type": "string", "default": "en"},
                "exact": {"type": "boolean", "default": False},
            },
        },
    },
    {
        "name": "convert",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "to": {"type": "string"},
                "rate": {"type": "number", "default": 1.5},
                "note": {"type": ["string", "null"], "default": None},
            },
        },
    },
    {
        "name": "schedule",
        "parameters": {
            "type": "object",
            "properties": {
                "when": {"type": "string"},
                "people": {"type": "array"},
                "options": {"type": "object", "default": {"remind": True, "offsets": [0.5, 1]}},
            },
        },
    },
    {
        "name": "météo",
        "parameters": {
            "type": "object",
            "properties": {"ville": {"type": "string"}, "jours": {"default": 1}},
        },
    },
    {"name": "計算", "parameters": {"type": "object", "properties": {"式": {"type": "string"}}}},
    {"name": "ping", "parameters": {"type": "object", "properties": {}}},
    {
        # parameter names that are not identifiers: JSON pointer and JSONPath characters
        "name": "paths",
        "parameters": {
            "type": "object",
            "properties": {
                "a/b": {"type": "integer", "default": 1},
                "~0": {"type": "string"},
                'k"q': {"default": "x"},
                "": {"type": "number"},
                "$.x[0]": {},
            },
        },
    },
]


FLOAT_FIELDS = ("tsa", "tp", "ahr")


# the outcome metrics: compared with == like the counts
OUTCOME_FIELDS = ("exact", "first_divergence", "covered")


COUNT_FIELDS = ("args_invalid", "args_total", "args_missing", "pairs", *OUTCOME_FIELDS)


def agent_calls(case: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A: AI messages in order, each message's tool calls in order."""
    return [(name, args) for turn in case["turns"] for name, args in turn]


def gold_calls(case: dict[str, Any]) -> list[tuple[Any, ...]]:
    """G: ``(name, args)``, or ``(name, args, rules)`` for a call with rules."""
    return [tuple(call) for call in case["gold"]]


def score(
    cases: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, options=None
) -> pl.DataFrame:
    """The real scoring path on in-memory traces; rows in the order of ``cases``."""
    samples, messages = build_tables(cases)
    scores = score_tables(samples, messages, TOOLS if tools is None else tools, options)
    order = pl.DataFrame({"sample_id": [str(c.get("sample_id", k)) for k, c in enumerate(cases)]})
    assert scores.height == len(cases)
    return order.join(scores, on="sample_id", how="left", maintain_order="left")


def reference(case: dict[str, Any], tools=None, rel_tol=None, abs_tol=None) -> dict[str, Any]:
    tools = case.get("tools", TOOLS) if tools is None else tools
    return ref.score_sample(
        gold_calls(case),
        agent_calls(case),
        case["sample_tools"] if case.get("sample_tools") is not None else tools,
        rel_tol=case.get("rel_tol", DEFAULT_REL_TOL) if rel_tol is None else rel_tol,
        abs_tol=case.get("abs_tol", DEFAULT_ABS_TOL) if abs_tol is None else abs_tol,
        strings=case.get("strings", "exact"),
        types=case.get("types", "lenient"),
    )


def assert_metrics(actual: dict[str, Any], expected: dict[str, Any], fields, where: str) -> None:
    for field in fields:
        if field not in expected:
            continue
        got, want = actual[field], expected[field]
        if field in FLOAT_FIELDS:
            if want is None:
                assert got is None, f"{where}: {field} = {got!r}, expected null"
            else:
                assert got is not None, f"{where}: {field} is null, expected {want!r}"
                assert got == pytest.approx(want, rel=1e-9, abs=1e-12), f"{where}: {field}"
        else:
            assert got == want, f"{where}: {field} = {got!r}, expected {want!r}"


NAMES = [
    "search", "convert", "schedule", "météo", "計算", "ping", "pingpong", "teleport", 'q"x', "paths"
]  # fmt: skip


PARAMS = ref.tool_params(TOOLS)


EXTRA_KEYS = ["zz", "ключ", "~1/"]


NESTED_KEYS = ["a", "b", "ключ"]


SPECIAL = [10, "en", False, 1.5, None, {"remind": True, "offsets": [0.5, 1]}, 1, 0.1, 1e17]


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-(2**70), 2**70),
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.text(alphabet='ab é計\u0301"\\', max_size=3),
    st.sampled_from(SPECIAL),
)


json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(NESTED_KEYS), inner, max_size=3)
    ),
    max_leaves=6,
)


def keys_of(name: str) -> list[str]:
    return [*PARAMS.get(name, {}), *EXTRA_KEYS]


@st.composite
def fresh_call(draw):
    name = draw(st.sampled_from(NAMES))
    keys = draw(st.lists(st.sampled_from(keys_of(name)), unique=True, max_size=4))
    return name, {key: draw(json_values) for key in keys}


@st.composite
def near(draw, value):
    """A value equal to ``value`` or close to it: floats within ~1e-12, an int as a float,
    nested values nudged element-wise and objects with their keys reordered."""
    kind = type(value)
    if kind in (int, float):
        how = draw(st.sampled_from(["same", "float", "abs", "rel", "far"]))
        if how == "float":
            return float(value)
        if how == "abs":
            return float(value) + draw(st.floats(-1e-12, 1e-12))
        if how == "rel":
            return float(value) * (1 + draw(st.floats(-1e-12, 1e-12)))
        if how == "far":
            return float(value) + draw(st.sampled_from([1e-8, -1e-6, 0.5]))
        return value
    if kind is list:
        return [draw(near(v)) for v in value]
    if kind is dict:
        keys = draw(st.permutations(list(value)))
        return {k: draw(near(value[k])) for k in keys}
    return value


@st.composite
def agent_call_like(draw, gold):
    """An agent call derived from a gold call: values kept, nudged or replaced, keys dropped or
    added (declared defaults included), the key order shuffled."""
    name, args = gold
    out = {}
    for key in draw(st.permutations(list(args))):
        action = draw(st.sampled_from(["keep", "near", "near", "new", "drop"]))
        if action == "keep":
            out[key] = args[key]
        elif action == "near":
            out[key] = draw(near(args[key]))
        elif action == "new":
            out[key] = draw(json_values)
    for key in draw(st.lists(st.sampled_from(keys_of(name)), unique=True, max_size=2)):
        if key not in out:
            declared = PARAMS.get(name, {})
            if key in declared and declared[key] is not ref._NO_DEFAULT and draw(st.booleans()):
                out[key] = draw(near(declared[key]))
            else:
                out[key] = draw(json_values)
    return name, out


@st.composite
def samples(draw):
    gold = draw(st.lists(fresh_call(), max_size=6))
    turns = []
    for _ in range(draw(st.integers(0, 4))):
        turn = []
        for _ in range(draw(st.integers(0, 3))):
            if gold and draw(st.integers(0, 2)) > 0:
                turn.append(draw(agent_call_like(draw(st.sampled_from(gold)))))
            else:
                turn.append(draw(fresh_call()))
        turns.append(turn)
    status = draw(st.sampled_from(["ok", "ok", "ok", "error"]))
    return {"gold": gold, "turns": turns, "status": status}
