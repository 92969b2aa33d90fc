"""Turn library results into what a terminal shows: tables, JSON, CSV and progress."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4f}"
    return escape(str(value))


def metrics_table(summary: dict[str, Any]) -> Table:
    """The run-level metrics with the n behind each, exact values beside rounded ones."""
    title = f"{summary['run_id']}  ({summary.get('model') or 'unknown model'})"
    if summary.get("simulated"):
        title += "  [simulated model]"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("exact", justify="right", style="dim")
    table.add_column("over", justify="right")
    abet = (summary.get("options") or {}).get("scorer") == "abet"
    tsa_n = f"{summary['n_tsa']} gold calls" if abet else f"{summary['n_tsa']} samples"
    rows = [
        ("tsa  tool selection accuracy", summary["tsa"], tsa_n),
        ("tp   trajectory precision", summary["tp"], f"{summary['n_tp']} samples"),
        (
            "ahr  argument hallucination rate",
            summary["ahr"],
            f"{summary['args_invalid']}/{summary['args_total']} args",
        ),
    ]
    for label, value, over in rows:
        table.add_row(label, _fmt(value), repr(value) if value is not None else "", over)
    missing = "" if abet else f", {summary['args_missing']} gold args left out"
    table.caption = (
        f"{summary['n_samples']} samples, {summary['n_errors']} with recording errors{missing}; "
        f"scoring: {summary['scoring']}"
    )
    return table


def bfcl_tables(summary: dict[str, Any]) -> list[Table]:
    """BFCL's accuracy per category and overall, and how many samples had each error type."""
    title = f"{summary['run_id']}  ({summary.get('model') or 'unknown model'})"
    table = Table(title=escape(title), title_justify="left")
    for column in ("category", "valid", "total", "accuracy"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for name, row in summary["categories"].items():
        table.add_row(escape(name), str(row["valid"]), str(row["total"]), _fmt(row["accuracy"]))
    table.add_row("overall", str(summary["valid"]), str(summary["total"]),
                  _fmt(summary["accuracy"]), style="bold")  # fmt: skip
    table.caption = (
        f"{summary['n_errors']} samples with recording errors; scoring: {summary['scoring']}"
    )
    tables = [table]
    if summary["error_types"]:
        errors = Table(title="BFCL error types", title_justify="left")
        errors.add_column("error_type")
        errors.add_column("samples", justify="right")
        for name, count in summary["error_types"].items():
            errors.add_row(escape(name), str(count))
        tables.append(errors)
    return tables


def breakdown_tables(summary: dict[str, Any]) -> list[Table]:
    """Per-tool and per-category tables, where the scorer gives them."""
    tables = []
    if summary.get("by_tool"):
        table = Table(title="per tool", title_justify="left")
        columns = ("tool", "gold_calls", "agent_calls", "paired", "recall", "args_invalid",
                   "args_total", "ahr")  # fmt: skip
        for column in columns:
            table.add_column(column, justify="left" if column == "tool" else "right")
        for row in summary["by_tool"]:
            table.add_row(*(_fmt(row.get(c)) for c in columns))
        tables.append(table)
    if summary.get("by_category"):
        table = Table(title="per category", title_justify="left")
        columns = ("category", "n_samples", "tsa", "tp", "ahr")
        for column in columns:
            table.add_column(column, justify="left" if column == "category" else "right")
        for row in summary["by_category"]:
            table.add_row(*(_fmt(row.get(c)) for c in columns))
        tables.append(table)
    return tables


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.4f}"


def diff_tables(result: Any, limit: int = 10) -> list[Table]:
    """Run-level deltas with intervals, per-tool ahr deltas, and the samples that moved most."""
    pct = f"{result.confidence:.0%}"
    head = Table(
        title=escape(
            f"{result.run_b} vs {result.run_a}  ({result.n_common} common samples, "
            f"scoring {result.scoring})"
        ),
        title_justify="left",
    )
    for column in ("metric", "A", "B", "B − A", f"{pct} interval"):
        head.add_column(column, justify="left" if column == "metric" else "right")
    for metric, d in result.runs.items():
        head.add_row(
            metric, _fmt(d["a"]), _fmt(d["b"]), _signed(d["delta"]),
            f"[{_signed(d['ci_low'])}, {_signed(d['ci_high'])}]",
        )  # fmt: skip
    head.caption = (
        f"paired bootstrap, {result.n_boot} resamples, seed {result.seed}; "
        f"{len(result.regressed)} samples regressed, {len(result.improved)} improved"
    )
    tables = [head]
    if result.tools:
        tools = Table(title="ahr per tool", title_justify="left")
        for column in ("tool", "paired A", "paired B", "A", "B", "B − A", f"{pct} interval"):
            tools.add_column(column, justify="left" if column == "tool" else "right")
        for t in result.tools:
            tools.add_row(
                escape(t["tool"]), str(t["paired_a"]), str(t["paired_b"]), _fmt(t["ahr_a"]),
                _fmt(t["ahr_b"]), _signed(t["ahr_delta"]),
                f"[{_signed(t['ahr_ci_low'])}, {_signed(t['ahr_ci_high'])}]",
            )  # fmt: skip
        tables.append(tools)
    for change, order in (("regressed", "d_tp"), ("improved", "d_tp")):
        rows = result.samples.filter(result.samples["change"] == change)
        if not rows.height:
            continue
        rows = rows.sort(order, descending=change == "improved").head(limit)
        table = Table(title=f"{change} (first {rows.height})", title_justify="left")
        for column in ("sample_id", "d_tsa", "d_tp", "d_ahr"):
            table.add_column(column, justify="left" if column == "sample_id" else "right")
        for row in rows.iter_rows(named=True):
            table.add_row(escape(row["sample_id"]), _signed(row["d_tsa"]), _signed(row["d_tp"]),
                          _signed(row["d_ahr"]))  # fmt: skip
        tables.append(table)
    return tables


def print_table(table: Table, file: TextIO | None = None) -> None:
    console = Console(file=file or sys.stdout, soft_wrap=False, width=_width(file))
    console.print(table)


def _width(file: TextIO | None) -> int | None:
    target = file or sys.stdout
    return None if target.isatty() else 120


def rows_table(columns: list[str], rows: list[tuple[Any, ...]]) -> Table:
    table = Table(show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    table.caption = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
    return table


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return escape(str(value))


def rows_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def to_json(obj: Any) -> str:
    """Strict JSON: NaN and infinities become null."""
    return json.dumps(_finite(obj), indent=2, default=str, ensure_ascii=False, allow_nan=False)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


@contextmanager
def working(message: str, file: TextIO | None = None) -> Iterator[None]:
    """A spinner with ``message`` while a step runs, on a terminal only (logs stay clean);
    it leaves nothing on the screen."""
    file = file or sys.stderr
    if not file.isatty():
        yield
        return
    with Console(file=file).status(escape(message)):
        yield


class Progress:
    """Live progress of a recording: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, label: str, quiet: bool = False, file: TextIO | None = None):
        self.label = label
        self.total = 0
        self.done = self.errors = self.retries = 0
        self.quiet = quiet
        self.file = file or sys.stderr
        self.started = time.monotonic()
        self._last_line = 0.0
        self._bar: Any = None

    def start(self, total: int, already: int = 0) -> None:
        """Called once the runner knows how many samples it will record."""
        self.total = total
        self.started = time.monotonic()
        if already and total and not self.quiet:
            print(f"{already} samples already recorded; recording {total} more", file=self.file)
        if total and not self.quiet and self.file.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.file),
                transient=False,
            )
            self._task = self._bar.add_task(self.label, total=total, stats="")
            self._bar.start()

    def retry(self, exc: BaseException) -> None:
        """A model call is being retried (counted live)."""
        self.retries += 1

    def __call__(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.errors += record["status"] != "ok"
        if self.quiet:
            return
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        stats = f"errors {self.errors}  retries {self.retries}  {rate:.1f}/s"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, stats=stats)
            return
        now = time.monotonic()
        if self.done == self.total or now - self._last_line >= 2.0:
            self._last_line = now
            left = (self.total - self.done) / rate if rate > 0 else 0.0
            print(
                f"recorded {self.done}/{self.total}  {stats}  eta {left:.0f} s",
                file=self.file,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
