"""Answers to BFCL questions, synthesized from its possible answers in named variants.

Each variant changes the canonical answer (every parameter's first acceptable value) in one
way BFCL's checker has a rule for; a variant that does not apply to a question (no
parameter with two acceptable values, say) gives None. Each answer is then written in one
of BFCL's result forms (:data:`FORMS`): a list of calls with JSON-text arguments (as
OpenAI-style function calling returns them) or with object arguments, where providers
rewrite dots in names as underscores, or a string of Python calls (prompting models).

Nothing here uses tcbreplay: the benchmark and the tests judge these answers with BFCL's
own checker and with tcbreplay, and compare.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Call = tuple[str, dict[str, Any]]
FORMS = ("json", "object", "text")
INVENTED_KEY = "tcbreplay_invented"
NO_SUCH_FUNCTION = "tcbreplay_no_such_function"


def _function(question: dict[str, Any], name: str) -> dict[str, Any]:
    return next((f for f in question["function"] if f["name"] == name), question["function"][0])


def _params(question: dict[str, Any], name: str) -> dict[str, Any]:
    return _function(question, name)["parameters"].get("properties", {})


def _values(acceptable: list[Any]) -> list[Any]:
    return [v for v in acceptable if v != ""]


def _first(value: Any, schema: dict[str, Any]) -> Any:
    """BFCL's first acceptable value as an argument: a dict parameter's answer lists values
    per key, so its argument takes each key's first (a list of dicts: of each dict)."""
    items = schema.get("items", {}).get("type")
    if schema.get("type") == "dict" and isinstance(value, dict):
        return {k: _values(v)[0] for k, v in value.items() if _values(v)}
    if schema.get("type") in ("array", "tuple") and items == "dict" and isinstance(value, list):
        return [_first(d, {"type": "dict"}) for d in value]
    return value


def canonical(question: dict[str, Any], answer: dict[str, Any]) -> list[Call]:
    """Every gold call with each parameter's first acceptable value (those BFCL lists
    only ``""`` for left out)."""
    calls = []
    for gold in answer["ground_truth"]:
        name, params = next(iter(gold.items()))
        schema = _params(question, name)
        args = {
            k: _first(_values(v)[0], schema.get(k, {})) for k, v in params.items() if _values(v)
        }
        calls.append((name, args))
    return calls


def _each_param(question, answer):  # type: ignore[no-untyped-def]
    """(call index, name, param, acceptable values, declared schema), in order."""
    for k, gold in enumerate(answer["ground_truth"]):
        name, params = next(iter(gold.items()))
        schema = _params(question, name)
        for param, acceptable in params.items():
            yield k, name, param, acceptable, schema.get(param, {})


def _set(calls: list[Call], k: int, param: str, value: Any) -> list[Call]:
    out = [(n, dict(a)) for n, a in calls]
    out[k][1][param] = value
    return out


def exact(question, answer):  # type: ignore[no-untyped-def]
    return canonical(question, answer)


def other_value(question, answer):  # type: ignore[no-untyped-def]
    """A parameter given its second acceptable value."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        values = _values(acceptable)
        if schema.get("type") != "dict" and len(values) > 1 and values[1] != values[0]:
            return _set(canonical(question, answer), k, param, values[1])
    return None


def _scrambled(text: str) -> str:
    changed = text.swapcase().replace(" ", "_", 1)
    return changed if changed != text else text + "."


def case_space_punct(question, answer):  # type: ignore[no-untyped-def]
    """A string argument differing from an acceptable one in case, spaces or ,./-_*^."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        values = _values(acceptable)
        if schema.get("type") == "string" and values and isinstance(values[0], str):
            return _set(canonical(question, answer), k, param, _scrambled(values[0]))
    return None


def _optional(question, answer):  # type: ignore[no-untyped-def]
    return [
        (k, param, acceptable)
        for k, _, param, acceptable, _ in _each_param(question, answer)
        if "" in acceptable and _values(acceptable)
    ]


def optional_left_out(question, answer):  # type: ignore[no-untyped-def]
    """Every parameter that may be left out, left out."""
    optional = _optional(question, answer)
    if not optional:
        return None
    calls = [(n, dict(a)) for n, a in canonical(question, answer)]
    for k, param, _ in optional:
        calls[k][1].pop(param, None)
    return calls


def optional_supplied(question, answer):  # type: ignore[no-untyped-def]
    """The parameters that may be left out left out, but one, given its last acceptable value."""
    optional = _optional(question, answer)
    if not optional:
        return None
    calls = optional_left_out(question, answer)
    k, param, acceptable = optional[0]
    schema = _params(question, calls[k][0]).get(param, {})
    calls[k][1][param] = _first(_values(acceptable)[-1], schema)
    return calls


# the empty value of each type BFCL's checker may take for its optional mark ""
_EMPTY: dict[str, Any] = {"string": "", "any": "", "array": [], "tuple": []}


def optional_empty(question, answer):  # type: ignore[no-untyped-def]
    """A string or list parameter that may be left out given empty (``""``, ``[]``)."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        empty = _EMPTY.get(schema.get("type"))
        if "" in acceptable and empty is not None:
            return _set(canonical(question, answer), k, param, copy.copy(empty))
    return None


def optional_default(question, answer):  # type: ignore[no-untyped-def]
    """A parameter whose answer lists only ``""`` (to be left out) given its schema's declared
    default (which BFCL's checker refuses: it takes only its answer's values; the tests'
    vendored questions have none: see :func:`left_out_only`)."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        if acceptable == [""] and "default" in schema:
            return _set(canonical(question, answer), k, param, copy.deepcopy(schema["default"]))
    return None


def reordered(question, answer):  # type: ignore[no-untyped-def]
    """A parallel question's calls in reverse order."""
    calls = canonical(question, answer)
    if "parallel" not in question["id"] or len(calls) < 2:
        return None
    return calls[::-1]


def int_for_float(question, answer):  # type: ignore[no-untyped-def]
    """A float parameter given a whole number as an integer (5 for 5.0)."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        values = _values(acceptable)
        whole = values and type(values[0]) in (int, float) and float(values[0]).is_integer()
        if schema.get("type") == "float" and whole and abs(values[0]) < 1e15:
            return _set(canonical(question, answer), k, param, int(values[0]))
    return None


def float_for_int(question, answer):  # type: ignore[no-untyped-def]
    """An integer parameter given a float with no fraction (10.0 for 10)."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        values = _values(acceptable)
        if schema.get("type") == "integer" and values and type(values[0]) is int:
            return _set(canonical(question, answer), k, param, float(values[0]))
    return None


def float_listed_for_int(question, answer):  # type: ignore[no-untyped-def]
    """An integer parameter whose answer's first value is a float, given that float (BFCL's
    own data has none: see :func:`derived`)."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        values = _values(acceptable)
        if schema.get("type") == "integer" and values and type(values[0]) is float:
            return _set(canonical(question, answer), k, param, values[0])
    return None


def _fold(text: str) -> str:
    return "".join(c for c in text if c not in " ,./-_*^").lower()


def _wrong(values: list[Any]) -> Any:
    """A value of the first acceptable value's type that none of them equals."""
    first = values[0]
    if isinstance(first, bool):
        return None if (not first) in values else (not first)
    if isinstance(first, int | float):
        wrong = first + 7919 if isinstance(first, int) else first * 1.5 + 1.25
        return wrong if wrong not in values else None
    if isinstance(first, str):
        folded = {_fold(v) for v in values if isinstance(v, str)}
        wrong = first + " tcbreplay"
        return wrong if _fold(wrong) not in folded else None
    if isinstance(first, list):
        wrong = [*first, first[0] if first else "tcbreplay"]
        return wrong if wrong not in values else None
    return None


def wrong_value(question, answer):  # type: ignore[no-untyped-def]
    """A parameter given a value none of its acceptable values equals."""
    for k, _, param, acceptable, schema in _each_param(question, answer):
        values = _values(acceptable)
        if values and schema.get("type") != "dict":
            wrong = _wrong(values)
            if wrong is not None:
                return _set(canonical(question, answer), k, param, wrong)
    return None


def invented_key(question, answer):  # type: ignore[no-untyped-def]
    """An argument the function does not take."""
    calls = canonical(question, answer)
    return _set(calls, 0, INVENTED_KEY, "x") if calls else None


def wrong_function(question, answer):  # type: ignore[no-untyped-def]
    """The first call made to another function of the question (or to none)."""
    calls = canonical(question, answer)
    if not calls:
        return None
    others = [f["name"] for f in question["function"] if f["name"] != calls[0][0]]
    return [(others[0] if others else NO_SUCH_FUNCTION, calls[0][1]), *calls[1:]]


VARIANTS: dict[str, Callable[..., list[Call] | None]] = {
    "exact": exact,
    "another acceptable value": other_value,
    "case, space or punctuation": case_space_punct,
    "optional left out": optional_left_out,
    "optional supplied": optional_supplied,
    "optional supplied as empty": optional_empty,
    "optional supplied as its default": optional_default,
    "parallel calls reordered": reordered,
    "int for a float": int_for_float,
    "10.0 for an integer": float_for_int,
    "a float the answer lists for an integer": float_listed_for_int,
    "wrong value": wrong_value,
    "invented key": invented_key,
    "wrong function": wrong_function,
}


# a derived question's number: its source's plus this (BFCL's numbers stay below it)
DERIVED_FROM = 10_000


def derived(
    questions: list[dict[str, Any]], answer_of: dict[str, dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Questions with their answers that BFCL's data lacks, each derived from one of its own
    (unchanged but for its id and one answer): per category, the first question with an
    integer parameter answered by integers only, that parameter's values written as floats
    (``[5.0]`` for ``[5]``: BFCL's checker then takes a float for it, the type of the
    answer's first value), as ``<category>_<DERIVED_FROM + its number>``."""
    out = []
    done = set()
    for question in questions:
        category, number = question["id"].rsplit("_", 1)
        if category in done:
            continue
        answer = answer_of[question["id"]]
        for k, name, param, acceptable, schema in _each_param(question, answer):
            values = _values(acceptable)
            if schema.get("type") == "integer" and values and all(type(v) is int for v in values):
                qid = f"{category}_{DERIVED_FROM + int(number)}"
                changed = json.loads(json.dumps(answer))
                changed["id"] = qid
                changed["ground_truth"][k][name][param] = [
                    v if v == "" else float(v) for v in acceptable
                ]
                out.append(({**question, "id": qid}, changed))
                done.add(category)
                break
    return out


def left_out_only(
    questions: list[dict[str, Any]], answer_of: dict[str, dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """As :func:`derived`, for the tests' few vendored questions, which lack what BFCL's full
    data has (eleven times): per category, the first question with an optional parameter
    (its answer lists ``""``) whose schema declares a default, answered ``[""]`` alone for it
    in every call of its function (to be left out: BFCL's checker then refuses the default),
    as ``<category>_<2 * DERIVED_FROM + its number>``."""
    out = []
    done = set()
    for question in questions:
        category, number = question["id"].rsplit("_", 1)
        answer = answer_of[question["id"]]
        found = next(
            ((name, param) for _, name, param, acceptable, schema in _each_param(question, answer)
             if "" in acceptable and _values(acceptable) and "default" in schema),
            None,
        )  # fmt: skip
        if category in done or found is None:
            continue
        qid = f"{category}_{2 * DERIVED_FROM + int(number)}"
        changed = json.loads(json.dumps(answer))
        changed["id"] = qid
        for gold in changed["ground_truth"]:
            if found[1] in gold.get(found[0], {}):
                gold[found[0]][found[1]] = [""]
        out.append(({**question, "id": qid}, changed))
        done.add(category)
    return out


def render(calls: list[Call], form: str, question: dict[str, Any]) -> Any:
    """The calls as a BFCL result of ``form``."""
    if form == "text":
        return "[" + ", ".join(_python_call(n, a, _params(question, n)) for n, a in calls) + "]"
    rewritten = [(n.replace(".", "_"), a) for n, a in calls]  # as providers name them
    if form == "json":
        return [{n: json.dumps(a)} for n, a in rewritten]
    return [{n: a} for n, a in rewritten]


def _python_call(name: str, args: dict[str, Any], params: dict[str, Any]) -> str:
    parts = []
    for key, value in args.items():
        tuple_param = params.get(key, {}).get("type") == "tuple"
        parts.append(f"{key}={_python(value, as_tuple=tuple_param)}")
    return f"{name}({', '.join(parts)})"


def _python(value: Any, as_tuple: bool = False) -> str:
    """A Python literal of a JSON value (a tuple parameter's list as a tuple)."""
    if isinstance(value, list):
        items = [_python(v) for v in value]
        if as_tuple:
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_python(k)}: {_python(v)}" for k, v in value.items()) + "}"
    return repr(value)


def form_of(index: int) -> str:
    """The result form of the ``index``-th answer of a variant (the forms take turns)."""
    return FORMS[index % len(FORMS)]
