"""The outcome of each sample and trial (solved or not), read from its metadata.

An outcome is a metadata field (``reward``) or an expression over metadata fields
(``reward >= 1``, ``reward_info.reward = 1 and user_cost < 0.5``). The expression is SQL,
evaluated by DuckDB on the store's locked-down connection over the run's ``samples`` view,
each top-level metadata key a column (a nested one reached with ``.``). Before it runs, its
tokens are checked: literals, names, operators, parentheses and a few keywords and
functions only, so it can be an expression and nothing else (no subquery, no second
statement). Never evaluated by Python.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from tcbreplay._store.run_dir import Run
from tcbreplay._store.views import connect, query_text
from tcbreplay.errors import InputError

# a reward of 1 (within 1e-6): success as τ-bench and τ²-bench count it
DEFAULT_OUTCOME = "abs(reward - 1) <= 1e-6"
# what an outcome expression may say besides names, literals and operators
_KEYWORDS = frozenset(
    {"and", "or", "not", "is", "null", "true", "false", "in", "between", "like", "ilike",
     "similar", "to", "case", "when", "then", "else", "end", "cast", "try_cast", "as",
     "double", "float", "real", "integer", "int", "bigint", "decimal", "numeric", "varchar",
     "text", "boolean", "bool"}
)  # fmt: skip
_FUNCTIONS = frozenset(
    {"abs", "round", "floor", "ceil", "least", "greatest", "coalesce", "nullif", "lower",
     "upper", "length", "trim"}
)  # fmt: skip
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UBIGINT", "HUGEINT", "DOUBLE", "FLOAT")
_ROW = "_tcbreplay_row"  # the column holding each row's sample id and trial


@dataclass
class Outcomes:
    """Each sample and trial's outcome (``outcome``: true, false or null) and the
    expression that gave it."""

    expression: str
    frame: pl.DataFrame  # sample_id, trial, outcome


class NoOutcome(InputError):
    """A run whose samples carry no outcome to read (no metadata; none given and no numeric
    reward), as opposed to an outcome that cannot be read."""


def read_outcomes(run: Run, expression: str | None = None) -> Outcomes:
    """The outcome of every sample and trial of ``run``: ``expression`` over its metadata,
    or by default ``abs(reward - 1) <= 1e-6`` (τ-bench's and τ²-bench's success) when some
    sample has a numeric ``reward``.

    A number counts as an outcome only when it is 0 or 1; null (a field a sample lacks)
    means no outcome.
    """
    con = connect(runs=[run], with_scores=False)
    try:
        (structure,) = con.execute(query_text("outcome_structure")).fetchone() or (None,)
        fields = _signed(json.loads(structure)) if structure else None
        structure = json.dumps(fields) if structure else structure
        if not isinstance(fields, dict) or not fields:
            raise NoOutcome(
                f"run {run.run_id!r}: its samples carry no metadata, so there is no outcome "
                "to compare the metrics with",
                hint="import traces whose samples carry one, such as τ-bench's reward",
            )
        if expression is None:
            expression = _default(run, fields, con)
        option = f"--outcome {expression!r}"
        check_expression(expression, option)
        sql = (
            f"with fields as ({query_text('outcome_fields')}) "
            f"select {_ROW}.sample_id as sample_id, {_ROW}.trial as trial, "
            f"({expression}) as outcome from fields"
        )
        try:
            cursor = con.execute(sql, {"structure": structure})
            kind = str(cursor.description[2][1]) if cursor.description else ""
            rows = cursor.fetchall()
        except duckdb.Error as exc:
            # a field of several types is JSON to DuckDB, whose error lists every overload
            _refuse_mixed(con, fields, expression, option, exc)
            raise InputError(
                f"{option}: {_reason(exc)}",
                hint=f"metadata fields: {', '.join(sorted(fields))}",
            ) from exc
    finally:
        con.close()
    values = [_as_outcome(row, kind, option) for row in rows]
    frame = pl.DataFrame(
        {
            "sample_id": [row[0] for row in rows],
            "trial": [row[1] for row in rows],
            "outcome": values,
        },
        schema={"sample_id": pl.String, "trial": pl.Int64, "outcome": pl.Boolean},
    )
    return Outcomes(expression=expression, frame=frame)


def _signed(structure: Any) -> Any:
    """A metadata structure with its unsigned integers (DuckDB's type for JSON integers of
    0 and more) read as signed ones: ``reward - 1`` of a reward 0 overflowed (UBIGINT), and
    the default outcome failed on rewards written 0 and 1."""
    if isinstance(structure, dict):
        return {k: _signed(v) for k, v in structure.items()}
    if isinstance(structure, list):
        return [_signed(v) for v in structure]
    return "HUGEINT" if structure == "UBIGINT" else structure


def _default(run: Run, fields: dict, con: duckdb.DuckDBPyConnection) -> str:
    reward = fields.get("reward")
    # (a reward of several types, numbers among them, is a numeric reward the outcome cannot
    # read: said by _refuse_mixed)
    if reward in _NUMERIC or (reward == "JSON" and "a number" in _types(con, ("reward",))):
        return DEFAULT_OUTCOME
    raise NoOutcome(
        f"run {run.run_id!r}: no outcome given, and its samples' metadata has no numeric "
        "reward; give --outcome FIELD or --outcome EXPRESSION",
        hint=f"metadata fields: {', '.join(sorted(fields))} (such as --outcome "
        f"\"{sorted(fields)[0]} = 'done'\")",
    )


@functools.cache
def _names() -> frozenset[str]:
    """DuckDB's unreserved keywords: words it reads as a column's name where one stands
    (label, value, type, name, source, year...), which metadata fields are called."""
    found = duckdb.execute(
        "select keyword_name from duckdb_keywords() where keyword_category = 'unreserved'"
    ).fetchall()
    return frozenset(row[0] for row in found)


def check_expression(expression: str, option: str = "--outcome") -> None:
    """Refuse an outcome that is not one SQL expression of names, literals, operators,
    parentheses and the allowed keywords and functions."""
    if not expression.strip():
        raise InputError(f"{option}: empty; give a metadata field or an expression")
    try:
        tokens = duckdb.tokenize(expression)
    except duckdb.Error as exc:
        raise InputError(f"{option}: {_reason(exc)}") from exc
    try:
        duckdb.extract_statements(f"select {expression}")
    except duckdb.Error as exc:
        raise InputError(f"{option}: {_reason(exc)}") from exc
    ends = [start for start, _ in tokens[1:]] + [len(expression)]
    texts = [expression[s:e].strip() for (s, _), e in zip(tokens, ends, strict=True)]
    depth = 0
    for i, ((_, kind), text) in enumerate(zip(tokens, texts, strict=True)):
        name, word = kind.name, text.lower()
        after = texts[i + 1] if i + 1 < len(texts) else ""
        if name == "comment" or (name == "operator" and ";" in text):
            raise InputError(f"{option}: one expression only (no comments, no ';')")
        depth += text.count("(") - text.count(")") if name == "operator" else 0
        if depth < 0:  # would close the parenthesis the expression is evaluated in
            raise InputError(f"{option}: a ')' without its '('")
        # DuckDB's tokens call some functions keywords (coalesce, nullif, trim), and a
        # keyword such as `and` or `in` may stand before a parenthesis without calling it
        if word in _FUNCTIONS or (name == "keyword" and word in _KEYWORDS):
            continue
        if name == "keyword" and word in _names() and not after.startswith("("):
            continue  # a word DuckDB takes for a column's name: a metadata field's (label)
        if name == "keyword":
            raise InputError(f"{option}: {text!r} is not allowed in an outcome expression")
        if name == "identifier" and after.startswith("("):
            raise InputError(
                f"{option}: the function {text!r} is not allowed in an outcome "
                f"(allowed: {', '.join(sorted(_FUNCTIONS))})"
            )


def _as_outcome(row: tuple, kind: str, option: str) -> bool | None:
    value = row[2]
    if value is None or isinstance(value, bool):
        return value
    where = f"sample {row[0]!r} trial {row[1]}"
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    raise InputError(
        f"{option}: gives {value!r} ({kind}) for {where}; an outcome must be true or false "
        "(or a number 0 or 1)",
        hint='compare it, as in --outcome "reward >= 1"',
    )


# JSON's types as a message says them (json_type's names)
_TYPE_WORDS = {"UBIGINT": "a number", "BIGINT": "a number", "DOUBLE": "a number",
               "VARCHAR": "text", "BOOLEAN": "true/false", "OBJECT": "an object",
               "ARRAY": "an array"}  # fmt: skip


def _types(con: duckdb.DuckDBPyConnection, path: tuple[str, ...]) -> dict[str, tuple[str, int]]:
    """The types (:data:`_TYPE_WORDS`) a metadata field holds, each with the first sample and
    trial that holds it."""
    pointer = "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)
    rows = con.execute(query_text("outcome_field_types"), {"pointer": pointer}).fetchall()
    out: dict[str, tuple[str, int]] = {}
    for kind, sample_id, trial in rows:
        out.setdefault(_TYPE_WORDS.get(kind, kind.lower()), (sample_id, trial))
    return out


def _json_paths(structure: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The metadata fields DuckDB reads as JSON: those whose values are of several types
    (or empty objects), nested ones too (not inside lists)."""
    if structure == "JSON":
        return [path]
    if isinstance(structure, dict):
        return [p for key, value in structure.items() for p in _json_paths(value, (*path, key))]
    return []


def _refuse_mixed(
    con: duckdb.DuckDBPyConnection, fields: dict, expression: str, option: str, exc: Exception
) -> None:
    """Refuse an expression that failed on a metadata field of several types (1, "1" and
    true across samples): one line naming the field and where each type is."""
    names = {expression[start:end].strip().strip('"').lower() for start, end in _spans(expression)}
    for path in _json_paths(fields):
        if path[0].lower() not in names:
            continue
        types = _types(con, path)
        if len(types) < 2:
            continue
        name = ".".join(path)
        where = ", ".join(
            f"{word} in sample {sample_id!r} trial {trial}"
            for word, (sample_id, trial) in types.items()
        )
        raise InputError(
            f"{option}: the metadata field {name!r} is {where}; an outcome reads a field of "
            "one type",
            hint=f"give it one type in every sample's metadata, or convert it, as in --outcome "
            f'"try_cast({name} as double) >= 1"',
        ) from exc


def _spans(expression: str) -> list[tuple[int, int]]:
    """Where each of the expression's tokens starts and ends."""
    starts = [start for start, _ in duckdb.tokenize(expression)]
    return list(zip(starts, [*starts[1:], len(expression)], strict=True))


def _reason(exc: duckdb.Error) -> str:
    """DuckDB's message on one line, without its error class and its caret drawing."""
    text = str(exc).split("\n\nLINE")[0].split("\nLINE")[0]
    text = text.split(": ", 1)[1] if ": " in text.split("\n")[0] else text
    missing = re.match(r'Referenced column (".*?") not found', text)
    if missing:  # DuckDB's candidates would name the column that holds the row's ids
        return f"no metadata field {missing[1]}"
    # a.b where a is no field: DuckDB reads a as a table's name
    table = re.match(r'Referenced table (".*?") not found', text)
    if table:
        return f"no metadata field {table[1]} (a.b names the field b inside the field a)"
    key = re.match(r'Could not find key (".*?") in struct', text)
    if key:
        return f"no field {key[1]} inside the metadata field it is read from"
    return " ".join(text.split())
