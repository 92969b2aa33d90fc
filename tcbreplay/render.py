"""Turn library results into what a terminal shows: tables, JSON, CSV and progress."""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def metrics_table(summary: dict[str, Any]) -> Table:
    """The run-level metrics with the n behind each."""
    title = f"{summary['run_id']}  ({summary.get('model') or 'unknown model'})"
    if summary.get("simulated"):
        title += "  [simulated model]"
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("over", justify="right")
    table.add_row(
        "tsa  tool selection accuracy", _fmt(summary["tsa"]), f"{summary['n_tsa']} samples"
    )
    table.add_row("tp   trajectory precision", _fmt(summary["tp"]), f"{summary['n_tp']} samples")
    table.add_row(
        "ahr  argument hallucination rate",
        _fmt(summary["ahr"]),
        f"{summary['args_invalid']}/{summary['args_total']} args",
    )
    table.caption = (
        f"{summary['n_samples']} samples, {summary['n_errors']} with recording errors, "
        f"{summary['args_missing']} gold args left out; scoring {summary['scoring']}"
    )
    return table


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
    return str(value)


def rows_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str, ensure_ascii=False)


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

    def __call__(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.errors += record["status"] != "ok"
        self.retries += max(0, record.get("attempts", 1) - 1)
        if self.quiet:
            return
        elapsed = max(time.monotonic() - self.started, 1e-9)
        stats = f"errors {self.errors}  retries {self.retries}  {self.done / elapsed:.1f}/s"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, stats=stats)
            return
        now = time.monotonic()
        if self.done == self.total or now - self._last_line >= 2.0:
            self._last_line = now
            print(f"recorded {self.done}/{self.total}  {stats}", file=self.file, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
