"""Typed errors: the library raises them, the CLI turns them into one line."""

from __future__ import annotations

import re


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


class StoreWriteError(StoreError):
    """A file of the store that could not be written: a full disk, a refusal."""


class StoreWriteRefused(StoreWriteError):
    """A store that refuses writes: read-only credentials or mount, permissions."""


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
    """An exception's message in one line (its first two non-empty lines joined); of one whose
    message is a Python traceback, the exception that traceback ends in (see :func:`_raised`)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    if lines and _TRACEBACK in lines[0]:
        return _raised(lines)
    return " ".join(lines[:2]) if lines else type(exc).__name__


# what begins a Python traceback, as DuckDB copies one into its error when a Python filesystem
# (fsspec's, reading a store on object storage) raised: its first line said nothing
_TRACEBACK = "Traceback (most recent call last):"
# a frame of a traceback: its file and function
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+, in (?P<function>\S+)')


def _raised(lines: list[str]) -> str:
    """The exception a traceback's ``lines`` end in, with the place it was raised when it
    says nothing more than its name (``IsADirectoryError (raised in s3fs/core.py, modified)``)."""
    frames = [index for index, line in enumerate(lines) if _FRAME.match(line)]
    after = lines[frames[-1] + 1 :] if frames else lines[1:]
    said = [line.strip() for line in after if not line[:1].isspace()]  # (not a code line)
    text = " ".join(said[:2]).rstrip(": ") or "an exception"
    if frames and ":" not in text:
        frame = _FRAME.match(lines[frames[-1]])
        assert frame is not None
        # (a library's file from its package on: s3fs/core.py; any other, by its name)
        where = frame["file"].replace("\\", "/").rsplit("site-packages/", 1)[-1]
        where = where.rsplit("/", 1)[-1] if where.startswith("/") else where
        text += f" (raised in {where}, {frame['function']})"
    return text


class DivergenceError(TcbReplayError):
    """A replayed model request that no recorded turn answers; ``divergence`` says where it
    first differs from the nearest recorded request (a
    :class:`tcbreplay._replay.divergence.Divergence`)."""

    def __init__(self, divergence: object, hint: str | None = None) -> None:
        line = getattr(divergence, "line", None)
        super().__init__(f"diverged at {line() if line else divergence}", hint)
        self.divergence = divergence


class RecordedFailure(TcbReplayError):
    """A replayed request where its recording ended in error: the error it ended in, again
    (``error_type``, ``error``: the recorded sample's)."""

    def __init__(self, error_type: str | None, error: str | None) -> None:
        super().__init__(f"{error_type or 'Error'}: {error or 'the recorded sample ended here'}")
        self.error_type, self.error = error_type, error


class LiveCallRefused(TcbReplayError):
    """A model call a replay with ``--offline`` would have made live."""


# what an allocator says inside another error (Arrow's memory pools, Rust's, DuckDB's)
_OUT_OF_MEMORY = ("realloc of size", "malloc of size", "failed to allocate", "out of memory")
MEMORY_HINT = (
    "close what else holds memory, or run it on a machine with more; a query's own memory "
    "is set with --memory-limit"
)


def out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says memory ran out: a
    MemoryError (pyarrow's ArrowMemoryError is one), DuckDB's OutOfMemoryException, or an
    allocator's words in another error's text."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryException":
            return True
        if any(words in str(exc).lower() for words in _OUT_OF_MEMORY):
            return True
        hidden = exc.__suppress_context__
        exc, seen = exc.__cause__ or (None if hidden else exc.__context__), seen + 1
    return False


def memory_words(exc: BaseException, doing: str) -> str:
    """``out of memory while {doing} (N GB free); the allocator's words``."""
    from tcbreplay._machine import free_memory

    free = free_memory()
    left = f" ({free / 1e9:.1f} GB free)" if free is not None else ""
    detail = first_line(exc) if str(exc).strip() else ""  # a bare MemoryError says nothing
    return f"out of memory while {doing}{left}" + (f"; {detail}" if detail else "")


def read_error(
    place: object, exc: BaseException, what: str = "it", hint: str | None = None
) -> StoreError:
    """The :class:`StoreError` of ``place`` that could not be read because of ``exc``: in
    so many words when memory ran out, else ``PLACE: cannot read WHAT: the error``."""
    if out_of_memory(exc):
        return StoreError(memory_words(exc, f"reading {place}"), hint=MEMORY_HINT)
    return StoreError(f"{place}: cannot read {what}: {first_line(exc)}", hint=hint)
