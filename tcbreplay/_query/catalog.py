"""A DuckDB database file of the store's views (``tcbreplay catalog``), for any DuckDB client."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tcbreplay._store.files import output_target, remove, writing
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.views import create_views, readable_runs
from tcbreplay.errors import (
    InputError,
    QueryError,
    first_line,
)

# what a catalog file holds (runs, tools and scorings as tables)
VIEWS = ("runs", "tools", "samples", "messages", "tool_calls", "gold_calls", "scores",
         "scores_all", "scorings", "divergences")  # fmt: skip


def write_catalog(store: Store, path: str | Path) -> list[str]:
    """Write a DuckDB database file holding the store's views, for any DuckDB client.

    Views point at the run files by absolute path; ``runs``, ``tools`` and ``scorings`` are
    tables.
    Re-run it after recording or scoring to include new runs. Returns the run ids.
    """
    import shutil
    import tempfile

    path = Path(path)
    store.check_output(path)
    runs = readable_runs(store)
    target, special = output_target(path)
    if special:
        # DuckDB writes no database into a FIFO or a device: it is built in a temporary
        # directory and its bytes written to the path
        with tempfile.TemporaryDirectory(prefix="tcbreplay-catalog-") as folder:
            tmp = Path(folder) / "catalog.duckdb"
            _build_catalog(runs, tmp, path)
            try:
                with tmp.open("rb") as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
            except OSError as exc:
                reason = exc.strerror or first_line(exc)
                raise InputError(f"{path}: cannot write the catalog: {reason}") from exc
    else:
        tmp = target.with_name(target.name + ".tmp")
        _build_catalog(runs, tmp, path)
        with writing(path, tmp, error=InputError):
            tmp.replace(target)
    return [r.run_id for r in runs]


def _build_catalog(runs: list[Run], tmp: Path, path: Path) -> None:
    """Write the catalog database of ``runs`` to ``tmp`` (errors name ``path``); a failed or
    interrupted write removes it."""
    # DuckDB keeps a write-ahead log beside the database until it is checkpointed
    temps = (tmp, tmp.with_name(tmp.name + ".wal"))
    try:
        for name in temps:
            name.unlink(missing_ok=True)
        con = duckdb.connect(str(tmp))
    except (OSError, duckdb.Error) as exc:
        for name in temps:
            remove(name)
        raise InputError(f"{path}: cannot write the catalog: {first_line(exc)}") from exc
    try:
        try:
            create_views(con, runs, with_scores=True, materialize=True)
            con.execute("checkpoint")
        finally:
            con.close()
    except BaseException as exc:
        # a failed or interrupted write leaves no half-written database beside the target
        for name in temps:
            remove(name)
        if isinstance(exc, duckdb.Error):
            raise QueryError(f"{path}: cannot write the catalog: {first_line(exc)}") from exc
        raise
    remove(temps[1])
