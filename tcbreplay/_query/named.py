"""Named queries: the ``.sql`` files in ``queries/named/``, run with named parameters.

Each file starts with a one-line ``-- description`` and may declare its parameters
on a ``-- params: name = default, ...`` line (defaults are JSON; a parameter
without ``= default`` is required). The SQL uses them as ``$name``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcbreplay import _json
from tcbreplay._query.sql import QueryResult, run_sql
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import DEFAULT_SCORING, SCORES
from tcbreplay._store.views import queries_dir
from tcbreplay.errors import QueryError

_REQUIRED = object()
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class NamedQuery:
    """A query file: its name, description, parameters with defaults, and SQL."""

    name: str
    description: str
    params: dict[str, Any]
    sql: str

    def bind(self, given: Mapping[str, str]) -> dict[str, Any]:
        """Parameter values from ``-p key=value`` strings (JSON when they parse, but for text
        parameters: those whose default is text or null)."""
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            known = ", ".join(self.params) or "none"
            raise QueryError(f"query {self.name}: unknown parameter {unknown[0]!r} (takes {known})")
        values = {}
        for key, default in self.params.items():
            if key in given:
                value = _parse(given[key])
                # A text parameter takes the text given (a run id such as 123, true or null),
                # unless it is a JSON string ("true" in quotes: true)
                textual = default is None or isinstance(default, str)
                if textual and not isinstance(value, str):
                    value = given[key]
                elif _whole(default) and not (_whole(value) and value >= 0):
                    raise QueryError(
                        f"query {self.name}: parameter {key!r} takes a whole number of 0 or "
                        f"more, not {given[key]!r} (-p {key}={default})"
                    )
                values[key] = value
            elif default is _REQUIRED:
                raise QueryError(f"query {self.name}: parameter {key!r} is required (-p {key}=...)")
            else:
                values[key] = default
        return values

    def usage(self) -> str:
        parts = [
            f"{k}" if v is _REQUIRED else f"{k}={json.dumps(v)}" for k, v in self.params.items()
        ]
        return ", ".join(parts)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse(text: str) -> Any:
    try:
        return _json.loads(text)
    except json.JSONDecodeError:
        return text
    except _json.LimitError as exc:
        raise QueryError(f"-p value: {exc.problem}", hint=_json.HINT) from exc


def load_named(name: str) -> NamedQuery:
    """Read ``queries/named/<name>.sql``."""
    if not _NAME.match(name):
        raise QueryError(f"query name {name!r}: use lower-case letters, digits and _")
    path = queries_dir() / "named" / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(q.name for q in list_named())
        raise QueryError(f"no named query {name!r}", hint=f"named queries: {known}")
    return _parse_file(name, path.read_text())


def list_named() -> list[NamedQuery]:
    """Every named query, by name."""
    folder = queries_dir() / "named"
    return [_parse_file(p.stem, p.read_text()) for p in sorted(folder.glob("*.sql"))]


def _parse_file(name: str, text: str) -> NamedQuery:
    lines = text.splitlines()
    description = lines[0].removeprefix("--").strip() if lines and lines[0].startswith("--") else ""
    params: dict[str, Any] = {}
    for line in lines[1:4]:
        if line.startswith("-- params:"):
            for part in filter(None, (p.strip() for p in line.split(":", 1)[1].split(","))):
                key, sep, default = (x.strip() for x in part.partition("="))
                params[key] = _parse(default) if sep else _REQUIRED
    return NamedQuery(name=name, description=description, params=params, sql=text)


def run_named(
    store: Store,
    name: str,
    given: Mapping[str, str] | None = None,
    *,
    timeout: float | None = None,
    memory_limit: str | None = None,
) -> QueryResult:
    """Run a named query over the store with its parameters bound (``timeout`` and
    ``memory_limit`` as for :func:`tcbreplay._query.sql.run_sql`)."""
    query = load_named(name)
    params = query.bind(given or {})
    if isinstance(params.get("run_id"), str):  # a run the store lacks: say so, not 0 rows
        store.open_run(params["run_id"])
    if isinstance(params.get("scoring"), str):  # a scoring no run holds: the same
        _check_scoring(store, params["scoring"], params.get("run_id"), name)
    elif _READS_SCORES.search(query.sql):  # the scores view: the default scoring's
        _check_scoring(store, DEFAULT_SCORING, params.get("run_id"), name)
    return run_sql(store, query.sql, params, timeout=timeout, memory_limit=memory_limit)


# a query reading the scores view (the default scoring), not scores_all by a parameter
_READS_SCORES = re.compile(r"\b(?:from|join)\s+scores\b(?!_)", re.IGNORECASE)


def _check_scoring(store: Store, scoring: str, run_id: Any, name: str) -> None:
    """A :class:`QueryError` when no run the query reads holds a scoring named ``scoring``
    (its answer would be 0 rows, which says nothing of why)."""
    runs = [store.open_run(run_id)] if isinstance(run_id, str) else store.runs()
    stored = {p.parent.name for run in runs for p in (run.dir / SCORES).glob("*/summary.json")}
    if scoring in stored or not runs:
        return
    if isinstance(run_id, str):
        whose = f"run {run_id!r} holds no scoring"
    else:
        whose = "no run in the store holds a scoring"
    known = ", ".join(sorted(stored)) or "none: score a run first, tcbreplay score RUN"
    raise QueryError(f"query {name}: {whose} named {scoring!r} (stored: {known})")
