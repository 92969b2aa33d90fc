"""Which SQL statements may run on the store: queries only, whatever their wrapping.

DuckDB's parser names most statements' kinds; two need a closer look. An EXPLAIN (with or
without options such as ``(ANALYZE, FORMAT JSON)``) runs what it explains when it analyzes,
so only the explaining of a query is let through. A PIVOT without an ``IN`` list, anywhere
in a statement, comes back as a MULTI statement (DuckDB first creates an enum type of the
pivoted values in the in-memory catalog), whatever the statement around it is, so a MULTI
statement is let through only when the statement it wraps is a query.
"""

from __future__ import annotations

import duckdb

from tcbreplay.errors import QueryError, first_line

# keywords that start a statement returning rows without writing anything
_QUERY_STARTS = {"select", "from", "values", "table", "pivot", "pivot_wider", "unpivot",
                 "pivot_longer"}  # fmt: skip
# the words of a WITH clause outside its parentheses, before the statement it prefixes
_CTE_WORDS = {"with", "recursive", "as", "not", "materialized", "using", "key"}
# keywords that wrap a query and only describe it
_WRAPPERS = {"describe", "summarize"}

_HINT = "only queries (SELECT, WITH, FROM, DESCRIBE, SUMMARIZE, EXPLAIN, PIVOT, UNPIVOT) run here"


def check_read_only(sql: str) -> list[str]:
    """Split SQL into statements and refuse any that is not a query."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL does not parse: {first_line(exc)}") from exc
    if not statements:
        raise QueryError("no SQL statement given")
    out = []
    for statement in statements:
        text = statement.query
        kind = _kind(statement)
        if kind != "SELECT" and not (kind in ("EXPLAIN", "MULTI") and _main_word(text) in
                                     _QUERY_STARTS):  # fmt: skip
            raise QueryError(
                f"{_refused_name(kind, text)} statements are not allowed: "
                "the store is read-only to SQL",
                hint=_HINT,
            )
        out.append(text)
    return out


def _kind(statement) -> str | None:
    """The statement's kind as DuckDB names it; None for a kind the Python package does not
    know (such as UPDATE EXTENSIONS in DuckDB 1.x/2.0, which raises ValueError)."""
    try:
        return statement.type.name
    except ValueError:
        return None


def _refused_name(kind: str | None, text: str) -> str:
    if kind == "LOAD":
        return "INSTALL or LOAD"
    if kind == "MULTI":  # named by what it does
        return (_main_word(text) or "MULTI").upper()
    if kind == "EXPLAIN":
        return f"EXPLAIN {_main_word(text) or ''}".upper().strip()
    if kind is None:  # named by its first words, as in UPDATE EXTENSIONS
        words = [token for sort, token in _tokens(text) if sort in ("keyword", "identifier")]
        return " ".join(words[:2]).upper() or "these"
    return kind.replace("_", " ")


Token = tuple[str, str]  # (kind, text)


def _tokens(text: str) -> list[Token]:
    """The kind and text of each token, comments left out."""
    found = duckdb.tokenize(text)
    ends = [p for p, _ in found[1:]] + [len(text)]
    return [
        (kind.name, text[p:end].strip())
        for (p, kind), end in zip(found, ends, strict=True)
        if kind.name != "comment"
    ]


def _main_word(text: str) -> str | None:
    """The keyword that says what a statement does, past EXPLAIN (and its options), DESCRIBE,
    SUMMARIZE, opening parentheses and a WITH clause; None if there is none."""
    tokens = _tokens(text)
    i = 0
    while i < len(tokens):
        kind, token = tokens[i]
        word = token.lower()
        if token == "(" or word in _WRAPPERS:
            i += 1
        elif word == "explain":
            i += 1
            if i < len(tokens) and tokens[i][1].lower() == "analyze":
                i += 1
            elif (
                i + 1 < len(tokens)
                and tokens[i][1] == "("
                and tokens[i + 1][1].lower() not in _QUERY_STARTS | {"with", "("}
            ):  # EXPLAIN (option, ...): the statement follows the closing parenthesis
                i = _after_parentheses(tokens, i)
        elif word == "with":
            i = _after_with(tokens, i)
        else:
            return word if kind == "keyword" else None
    return None


def _after_parentheses(tokens: list[Token], i: int) -> int:
    """The index after the parenthesis that closes the one at ``i`` (a string is a single
    token, so a parenthesis inside one does not count)."""
    depth = 0
    for j in range(i, len(tokens)):
        kind, token = tokens[j]
        if kind == "operator" and token in ("(", ")"):
            depth += 1 if token == "(" else -1
            if depth == 0:
                return j + 1
    return len(tokens)


def _after_with(tokens: list[Token], i: int) -> int:
    """The index of the statement that a WITH clause starting at ``i`` prefixes: the first
    token after a closed parenthesis that goes on with neither another part of the clause
    (a column list, AS, MATERIALIZED, USING KEY) nor a comma and the next definition."""
    j = i + 1
    while j < len(tokens):
        if tokens[j][1] != "(":
            j += 1
            continue
        j = _after_parentheses(tokens, j)
        if (
            j < len(tokens)
            and tokens[j][1] not in (",", "(")
            and (tokens[j][1].lower() not in _CTE_WORDS)
        ):
            return j
    return len(tokens)
