"""Live output on stderr: a spinner while a step runs, and the progress of a recording (a
rich bar on a terminal, plain lines otherwise)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from tcbreplay._clock import SYSTEM_CLOCK, Clock
from tcbreplay._words import count

if TYPE_CHECKING:  # rich is imported where a bar is drawn
    from rich.console import Console


@contextmanager
def working(message: str, file: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """A spinner with ``message`` while a step runs, on a terminal only (logs stay clean);
    it leaves nothing on the screen. Yields what says another message in its place (such as
    how far the step has come)."""
    file = file or sys.stderr
    if not file.isatty():
        yield lambda _message: None
        return
    from rich.console import Console
    from rich.markup import escape

    with Console(file=file).status(escape(message)) as status:
        yield lambda message: status.update(escape(message))


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Live progress of a recording: a rich bar on a terminal, plain lines otherwise.

    On a terminal the numbers come first (done/total, rate, time left, errors, retries)
    and the label is cut to what is left of the line, so a narrow terminal still shows them.
    """

    def __init__(
        self,
        label: str,
        quiet: bool = False,
        file: TextIO | None = None,
        console: Console | None = None,
        clock: Clock = SYSTEM_CLOCK,
        verb: str = "recorded",
    ):
        self.label = label
        self.verb = verb  # what a plain line says was done ("replayed")
        self.total = 0
        self.done = self.errors = self.retries = 0
        self.diverged = 0  # a replay's samples that diverged (no errors)
        self.quiet = quiet
        self.file = file or sys.stderr
        self.console = console  # for tests: a console of a given width, recorded
        self.clock = clock  # for tests: a clock they move
        self.started = clock.monotonic()
        self._last_line = 0.0
        self._bar: Any = None

    def start(self, total: int, already: int = 0) -> None:
        """Called once the runner knows how many samples it will record."""
        self.total = total
        self.started = self.clock.monotonic()
        if already and total and not self.quiet:
            doing = self.verb.removesuffix("ed") + "ing"  # recording, replaying
            print(
                f"{count(already, 'sample')} already {self.verb}; {doing} {total} more",
                file=self.file,
            )
        if total and not self.quiet and (self.console is not None or self.file.isatty()):
            from rich.console import Console
            from rich.progress import BarColumn, ProgressColumn, TextColumn
            from rich.progress import Progress as RichProgress
            from rich.table import Column
            from rich.text import Text

            class Label(ProgressColumn):
                """The label, on one line: it is the column that gives way to the numbers."""

                def render(self, task: Any) -> Text:
                    return Text(task.description, no_wrap=True, overflow="ellipsis")

            self._bar = RichProgress(
                Label(table_column=Column(min_width=1)),
                BarColumn(bar_width=12),
                TextColumn("{task.fields[numbers]}", table_column=Column(no_wrap=True)),
                console=self.console or Console(file=self.file),
                transient=False,
            )
            self._task = self._bar.add_task(self.label, total=total, numbers=self.numbers())
            self._bar.start()

    def numbers(self) -> str:
        """done/total, samples per second, time left, errors and retries (and a replay's
        divergences, once there are some)."""
        elapsed = max(self.clock.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        eta = _clock((self.total - self.done) / rate) if self.done else "-:--:--"
        diverged = f"diverged {self.diverged}  " if self.diverged else ""
        return (
            f"{self.done}/{self.total}  {rate:.1f}/s  eta {eta}  {diverged}"
            f"errors {self.errors}  retries {self.retries}"
        )

    def retry(self, exc: BaseException) -> None:
        """A model call is being retried (counted live)."""
        self.retries += 1

    def __call__(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.errors += record["status"] == "error"
        self.diverged += record["status"] == "diverged"
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, numbers=self.numbers())
            return
        now = self.clock.monotonic()
        if self.done == self.total or now - self._last_line >= 2.0:
            self._last_line = now
            print(f"{self.verb} {self.numbers()}", file=self.file, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
