"""``tcbreplay report``: one self-contained HTML file that shows one or more scored runs.

The page needs no network: plotly.js (a partial bundle vendored in ``vendor/``), the
styles, the table script and every datum are inline; past
:data:`tcbreplay._report.shown.SAMPLES` samples, the rows and transcripts of those it
shows. Nothing is written to the
store: runs never scored, or scored before their traces last changed, are scored
in memory (see :mod:`tcbreplay._report.data`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tcbreplay._report.charts import figures, plotly_js
from tcbreplay._report.data import ReportData, collect
from tcbreplay._report.page import render_page
from tcbreplay._report.shown import SAMPLES, SEED
from tcbreplay._store.files import output_target
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError

__all__ = ["ReportData", "build_report", "collect", "write_report"]


def build_report(
    store: Store,
    run_ids: list[str],
    *,
    allow_incomplete: bool = False,
    scoring: str = "spec",
    outcome: str | None = None,
    samples: int | None = SAMPLES,
    seed: int = SEED,
) -> str:
    """Build the report of ``run_ids`` as HTML text; the first run is the baseline;
    ``scoring``: the scoring whose numbers it shows; ``outcome``: see
    :func:`tcbreplay._compare.outcomes.read_outcomes` (by default, runs whose samples have a
    reward get the validity panel); ``samples``: how many samples the page shows with their
    transcripts (None: all), the rest left out as :mod:`tcbreplay._report.shown` chooses
    with ``seed``."""
    with reading(store, run_ids):  # the page shows transcripts: read up to its last one
        report = collect(
            store, list(run_ids), allow_incomplete=allow_incomplete, scoring=scoring,
            outcome=outcome, samples=samples, seed=seed,
        )  # fmt: skip
        return render_page(report, figures(report), plotly_js())


@contextmanager
def reading(store: Store, run_ids: list[str]) -> Iterator[None]:
    """Hold each run against deletion (``record --overwrite``) while the block reads it."""
    with ExitStack() as stack:
        for run_id in dict.fromkeys(run_ids):
            stack.enter_context(store.open_run(run_id).reading())
        yield


def write_report(
    store: Store,
    run_ids: list[str] | str,
    output: str | Path,
    *,
    allow_incomplete: bool = False,
    scoring: str = "spec",
    outcome: str | None = None,
    samples: int | None = SAMPLES,
    seed: int = SEED,
) -> Path:
    """Build the report and write it to ``output`` atomically; return the path written.

    A symlink is followed: the file it points to is replaced. An existing path that is no
    regular file (a FIFO, a device such as /dev/stdout) is written to as it is.
    """
    if isinstance(run_ids, str):  # one run, not its letters
        run_ids = [run_ids]
    path = Path(output)
    store.check_output(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory", hint="give a file name, e.g. -o report.html")
    target, special = output_target(path)
    if not target.parent.is_dir():
        raise InputError(
            f"{path}: directory {target.parent} does not exist", hint="create it first"
        )
    text = build_report(
        store, run_ids, allow_incomplete=allow_incomplete, scoring=scoring, outcome=outcome,
        samples=samples, seed=seed,
    )  # fmt: skip
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        if special:
            with open(target, "w", encoding="utf-8") as out:
                out.write(text)
        else:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
    except OSError as exc:
        if not special:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: cannot write the report: {exc.strerror or exc}") from exc
    return path
