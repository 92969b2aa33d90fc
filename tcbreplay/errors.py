"""Typed errors: the library raises them, the CLI turns them into one line."""

from __future__ import annotations


class TcbReplayError(Exception):
    """Base of every error tcbreplay reports to a user without a traceback."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(TcbReplayError):
    """Bad input from the user: a file, an option, a query (exit code 2)."""

    exit_code = 2


class DatasetError(InputError):
    """A dataset file that cannot be loaded or does not fit its tools."""


class ToolSchemaError(InputError):
    """A tools module or JSON schema file that cannot be loaded."""


class TraceError(InputError):
    """Imported traces that cannot be read."""


class ModelError(InputError):
    """A model string that cannot be resolved, or a missing credential."""


class QueryError(InputError):
    """SQL that fails, or is not allowed on the store."""


class QueryLimitError(TcbReplayError):
    """A query stopped at its time or memory limit (exit code 1)."""


class RunNotFoundError(InputError):
    """A run id that is not in the store."""


class RunExistsError(InputError):
    """A run id that the store already holds, given for a new run."""


class StoreError(TcbReplayError):
    """A store or run directory that is unreadable or inconsistent."""


class RunLockedError(TcbReplayError):
    """Another live process is writing the run."""


class RecordError(TcbReplayError):
    """A recording that stopped on an error retrying cannot fix, or ended with more samples in
    error than allowed. What it finished is stored and the run can be resumed; ``summary``
    holds the run's totals (exit code 1)."""

    def __init__(self, message: str, hint: str | None = None, summary: object = None) -> None:
        super().__init__(message, hint)
        self.summary = summary


class EngineError(TcbReplayError):
    """The engine parts run on (Ray) cannot be reached, or lost a part it could not run
    again; or the compiled kernels scoring runs on are not built (exit code 1)."""


class TcbReplayWarning(UserWarning):
    """Something the user should know that does not stop the command (the CLI prints it as
    one ``Warning:`` line)."""


class SkippedRunWarning(TcbReplayWarning):
    """A run left out of a store-wide view because it cannot be read."""


def first_line(exc: BaseException) -> str:
    """An exception's message in one line (its first two non-empty lines joined)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__


class DivergenceError(TcbReplayError):
    """A replayed model request that no recorded turn answers; ``divergence`` says where it
    first differs from the nearest recorded request (a
    :class:`tcbreplay._replay.divergence.Divergence`)."""

    def __init__(self, divergence: object, hint: str | None = None) -> None:
        line = getattr(divergence, "line", None)
        super().__init__(f"diverged at {line() if line else divergence}", hint)
        self.divergence = divergence


class LiveCallRefused(TcbReplayError):
    """A model call a replay with ``--offline`` would have made live."""
