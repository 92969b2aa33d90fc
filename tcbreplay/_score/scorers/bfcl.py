"""The ``bfcl`` scorer: the Berkeley Function Calling Leaderboard's AST verdict, per sample.

BFCL judges a sample valid or not, with an error type saying why not (its checker's
own words, such as ``value_error:string``). This module reproduces that checker for its
Python categories (simple_python, multiple, parallel, parallel_multiple), quirks
included; docs/bfcl.md lists them. In short:

- the category picks the checker: a name containing ``parallel`` matches the calls in
  any order, greedily (each gold call, in order, takes the first agent call that fits, so
  a valid permutation can be refused); one containing ``multiple`` checks the first call
  only; any other wants exactly one call, judged against the question's first function;
- a call is judged parameter by parameter against the function's schema (its declared
  type) and BFCL's list of acceptable values (``""`` in it: may be left out). Strings
  compare lowercased without spaces and ``,./-_*^``, also inside lists and dicts; an
  integer passes for a float, a float never for an integer; ``1 == 1.0 == True``
  elsewhere, as Python compares.

Where BFCL's checker raises (and stops the whole evaluation), the sample is invalid with
error type ``checker_error``. Runs imported with ``--format bfcl`` keep, on each gold
call, BFCL's own answer and the function schema its checker reads (``gold[k].bfcl``), and
on the answer's AI message the result as given (``response_metadata.bfcl_result``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

from tcbreplay._inputs.bfcl_calls import DecodeError, decode_result
from tcbreplay._score.results import Scored
from tcbreplay._store.views import query_text
from tcbreplay.errors import InputError, StoreError, first_line

CHECKER_ERROR = "checker_error"

# BFCL's Python type for each type name a function schema may give
_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool,
    "array": list, "tuple": list, "dict": dict, "any": str,
}  # fmt: skip
_NESTED = ("array", "tuple")


@dataclass(frozen=True)
class Verdict:
    """BFCL's verdict on one sample: valid, else its error type and what went wrong."""

    valid: bool
    error_type: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class GoldCall:
    """One call of BFCL's answer: the acceptable values of each parameter (``""``: it may be
    left out), and the function schema the checker reads for it."""

    answer: dict[str, Any]
    function: dict[str, Any]


class _Invalid(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def judge(category: str, gold: list[GoldCall], calls: list[dict[Any, Any]]) -> Verdict:
    """BFCL's verdict on decoded ``calls`` for a question of ``category``."""
    try:
        if "parallel" in category:
            _check_parallel(gold, calls)
        elif "multiple" in category:
            if len(calls) != len(gold):
                raise _Invalid("multiple_function_checker:wrong_count", _count(calls, gold))
            _check_call(gold[0], calls[0])
        else:
            if len(calls) != 1:
                raise _Invalid("simple_function_checker:wrong_count", _count(calls, [1]))
            _check_call(gold[0], calls[0])
    except _Invalid as exc:
        return Verdict(False, exc.error_type, str(exc))
    except (TypeError, KeyError, AttributeError, IndexError, ValueError, ArithmeticError) as exc:
        return Verdict(False, CHECKER_ERROR, f"BFCL's checker raises {type(exc).__name__}: {exc}")
    return Verdict(True)


def _count(calls: list[Any], gold: list[Any]) -> str:
    return f"{len(calls)} calls where {len(gold)} are expected"


def _check_parallel(gold: list[GoldCall], calls: list[dict[Any, Any]]) -> None:
    """Each gold call in order takes the first agent call not taken yet that it accepts."""
    if len(calls) != len(gold):
        raise _Invalid("parallel_function_checker_no_order:wrong_count", _count(calls, gold))
    taken: set[int] = set()
    for j, expected in enumerate(gold):
        for i, call in enumerate(calls):
            if i in taken:
                continue
            try:
                _check_call(expected, call)
            except _Invalid:
                continue
            taken.add(i)
            break
        else:
            raise _Invalid(
                "parallel_function_checker_no_order:cannot_find_match",
                f"no call left matches gold call {j}",
            )


def _check_call(expected: GoldCall, call: dict[Any, Any]) -> None:
    """One call against one gold call, as BFCL's simple function checker judges it."""
    answer = expected.answer
    schema = expected.function["parameters"]
    name = expected.function["name"]
    if name not in call:
        raise _Invalid("simple_function_checker:wrong_func_name", f"no call of {name!r}")
    params = call[name]
    for param in schema["required"]:
        if param not in params:
            raise _Invalid(
                "simple_function_checker:missing_required", f"{param!r} is required, left out"
            )
    properties = schema["properties"]
    for param, value in params.items():
        if param not in properties or param not in answer:
            raise _Invalid("simple_function_checker:unexpected_param", f"{param!r} is unexpected")
        declared = properties[param]["type"]
        python_type = _TYPES[declared]
        inner = _TYPES[properties[param]["items"]["type"]] if declared in _NESTED else None
        if declared == "tuple" and type(value) is tuple:
            value = list(value)
        if declared == "float" and type(value) is int:
            value = float(value)
        acceptable = answer[param]
        variable = _check_type(param, value, acceptable, python_type, inner)
        if not variable:
            if python_type is dict:
                _check_dict(param, value, acceptable)
                continue
            if python_type is list and inner is dict:
                _check_list_of_dicts(param, value, acceptable)
                continue
            if python_type is str:
                _check_string(param, value, acceptable)
                continue
            if python_type is list:
                _check_list(param, value, acceptable)
                continue
        if value not in acceptable:
            raise _Invalid("value_error:others", f"{param!r}: {value!r} is not in {acceptable!r}")
    for param in answer:
        if param not in params and "" not in answer[param]:
            raise _Invalid(
                "simple_function_checker:missing_optional", f"{param!r} is expected, left out"
            )


def _answer_type(acceptable: Any) -> type | None:
    """The type of the first acceptable value that is not the left-out mark ``""``."""
    for value in acceptable:
        if value != "":
            return type(value)
    return None


def _check_type(
    param: str, value: Any, acceptable: Any, python_type: type, inner: type | None
) -> bool:
    """Whether ``value`` has the declared type, or the acceptable values' type (a "variable":
    compared as is, with no string folding). Lists are checked one level deep: each item has
    the declared item type, or the type of the acceptable list's items, for at least one
    acceptable value; one that is not a list (``""``) lets any list pass."""
    answer_type = _answer_type(acceptable)
    variable = answer_type is not None and answer_type is not python_type
    if type(value) is python_type:
        if inner is None:
            return variable
        items: Any = value  # a list
        for option in acceptable:
            if type(option) is not list or all(_item_fits(v, option, inner) for v in items):
                return variable
        if answer_type is not None and type(value) is answer_type:
            raise _Invalid(
                "type_error:nested", f"{param!r}: items of {value!r} are not {inner.__name__}"
            )
        raise _Invalid("type_error:simple", f"{param!r}: {value!r} is not {python_type.__name__}")
    if answer_type is not None and type(value) is answer_type:
        return True
    raise _Invalid("type_error:simple", f"{param!r}: {value!r} is not {python_type.__name__}")


def _item_fits(item: Any, option: list[Any], inner: type) -> bool:
    answer_type = _answer_type(option)
    return type(item) is inner or (answer_type is not None and type(item) is answer_type)


# BFCL's string folding: these characters dropped, then lowercase, then ' as "
_DROPPED = re.compile(r"[ ,./\-_*^]")


def _fold(text: str) -> str:
    return _DROPPED.sub("", text).lower().replace("'", '"')


def _fold_any(value: Any) -> Any:
    return _fold(value) if type(value) is str else value


def _members(values: Any) -> list[Any]:
    """The items of a list of acceptable values as BFCL reads them, by index (a string gives
    its characters; a mapping or a number raises, as it does in BFCL)."""
    return [values[k] for k in range(len(values))]


def _check_string(param: str, value: str, acceptable: Any) -> None:
    folded = [_fold(v) for v in _members(acceptable) if type(v) is str]
    if _fold(value) not in folded:
        raise _Invalid("value_error:string", f"{param!r}: {value!r} is not one of {acceptable!r}")


def _check_list(param: str, value: list[Any], acceptable: Any) -> None:
    folded = [[_fold_any(v) for v in _members(option)] for option in _members(acceptable)]
    if [_fold_any(v) for v in value] not in folded:
        raise _Invalid(
            "value_error:list/tuple", f"{param!r}: {value!r} is not one of {acceptable!r}"
        )


def _check_dict(param: str, value: dict[Any, Any], acceptable: Any) -> None:
    """A dict matches an acceptable dict when each of its keys is there with a value among
    that key's acceptable values (strings folded), and it leaves out only keys whose list
    holds ``""``. The last acceptable dict's failure is reported."""
    failure = _Invalid("dict_checker:unclear", f"{param!r}: no acceptable dict")
    for option in _members(acceptable):
        if option == "":
            continue
        failure = _Invalid("dict_checker:unclear", f"{param!r}: no acceptable dict")
        fits = True
        for key, item in value.items():
            if key not in option:
                failure = _Invalid("value_error:dict_key", f"{param!r}: unexpected key {key!r}")
                fits = False
                break
            if _fold_any(item) not in [_fold_any(v) for v in _members(option[key])]:
                failure = _Invalid("value_error:dict_value", f"{param!r}: {key!r} is {item!r}")
                fits = False
                break
        for key, values in option.items():
            if key not in value and "" not in values:
                failure = _Invalid("value_error:dict_key", f"{param!r}: key {key!r} left out")
                fits = False
                break
        if fits:
            return
    raise failure


def _check_list_of_dicts(param: str, value: list[Any], acceptable: Any) -> None:
    """A list of dicts matches an acceptable list of the same length, dict by dict."""
    failure = _Invalid("list_dict_checker:unclear", f"{param!r}: no acceptable list")
    for option in _members(acceptable):
        if len(value) != len(option):
            failure = _Invalid("value_error:list_dict_count", f"{param!r}: {len(value)} dicts")
            continue
        try:
            for k, item in enumerate(value):
                _check_dict(param, item, [option[k]])
        except _Invalid as exc:
            failure = exc
            continue
        return
    raise failure


def score_run_bfcl(con: Any) -> Scored:
    """BFCL's verdict on every sample of the run bound to ``con``, and accuracy per category
    and overall (valid samples over all samples)."""
    rows = con.execute(query_text("score_bfcl")).fetchall()
    records = []
    for sample_id, trial, sample_index, category, status, gold_text, messages in rows:
        gold = _gold_of(sample_id, gold_text)
        calls: list[dict[Any, Any]] | None = None
        try:
            calls = _calls_of(sample_id, messages)
            verdict = judge(category or "", gold, calls)
        except DecodeError as exc:
            verdict = Verdict(False, exc.error_type, str(exc))
        records.append(
            (sample_id, trial, sample_index, category, status, len(gold),
             None if calls is None else len(calls), verdict.valid, verdict.error_type)
        )  # fmt: skip
    schema = {
        "sample_id": pl.String, "trial": pl.Int32, "sample_index": pl.Int32,
        "category": pl.String, "status": pl.String, "n_gold": pl.Int32, "n_agent": pl.Int32,
        "valid": pl.Boolean, "error_type": pl.String,
    }  # fmt: skip
    nulls = {"tsa": pl.Float64, "tp": pl.Float64, "ahr": pl.Float64, "args_invalid": pl.Int64,
             "args_total": pl.Int64, "args_missing": pl.Int64, "pairs": pl.Int32}  # fmt: skip
    scores = pl.DataFrame(records, schema=schema, orient="row").with_columns(
        pl.lit(None, dtype).alias(name) for name, dtype in nulls.items()
    )
    return Scored(scores=scores, metrics=summarize(scores))


def summarize(scores: pl.DataFrame) -> dict[str, Any]:
    """Accuracy overall and per category, with the counts behind it, and the error types."""

    def accuracy(frame: pl.DataFrame) -> dict[str, Any]:
        valid = int(frame["valid"].sum())
        return {"accuracy": valid / frame.height if frame.height else None, "valid": valid,
                "total": frame.height}  # fmt: skip

    parts = scores.partition_by("category", as_dict=True, maintain_order=False)
    categories = {
        "" if key[0] is None else str(key[0]): accuracy(part)
        for key, part in sorted(parts.items(), key=lambda kv: str(kv[0][0]))
    }
    errors = Counter(t for t in scores["error_type"].to_list() if t is not None)
    return {
        **accuracy(scores),
        "categories": categories,
        "error_types": dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))),
        "n_samples": scores.height,
        "n_errors": int((scores["status"] != "ok").sum()),
        "n_missing": int((scores["status"] == "missing").sum()),  # (of the errors)
    }


def _gold_of(sample_id: str, text: str) -> list[GoldCall]:
    """The sample's gold calls as BFCL's checker reads them: each keeps BFCL's answer."""
    try:
        calls = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"sample {sample_id!r}: unreadable gold: {first_line(exc)}") from None
    gold = []
    for k, call in enumerate(calls):
        kept = call.get("bfcl") if isinstance(call, dict) else None
        if not (
            isinstance(kept, dict)
            and isinstance(kept.get("answer"), dict)
            and isinstance(kept.get("function"), dict)
        ):
            raise InputError(
                f"sample {sample_id!r}: gold call {k} has no BFCL answer (gold[{k}].bfcl)",
                hint="--scorer bfcl scores runs imported with --format bfcl",
            )
        gold.append(GoldCall(answer=kept["answer"], function=kept["function"]))
    return gold


def _calls_of(sample_id: str, messages: list[str]) -> list[dict[Any, Any]]:
    """The agent's calls as BFCL's checker receives them: the stored BFCL result decoded
    again (the last AI message that keeps one), else every AI message's tool calls."""
    datas = []
    for position, text in enumerate(messages):
        try:
            data = json.loads(text).get("data") or {}
        except (ValueError, RecursionError, AttributeError) as exc:
            raise StoreError(
                f"sample {sample_id!r}: AI message {position} is not readable JSON: "
                f"{first_line(exc)}"
            ) from None
        datas.append(data)
    for data in reversed(datas):
        metadata = data.get("response_metadata") or {}
        if "bfcl_result" in metadata:
            return decode_result(metadata["bfcl_result"], metadata.get("bfcl_renamed"))
    calls = []
    for data in datas:
        for call in data.get("tool_calls") or []:
            args = call.get("args")
            calls.append({call.get("name") or "": args if isinstance(args, dict) else {}})
    return calls
