"""The ``tcbreplay`` command line: parse options, call one library function, render the result.

Library modules are imported inside each command so that ``score`` and ``sql``
never load LangChain. Each command lives in the module named after it, imported when the
command is asked for (``COMMAND_MODULES`` in :mod:`tcbreplay._cli.common`).
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import os
import sys
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tcbreplay._machine import collector_paused_for

if TYPE_CHECKING:
    from tcbreplay._cli.common import main

__all__ = ["main", "run"]


def __getattr__(name: str) -> Any:
    # ``main`` (click and every command's options) loads once :func:`run` has paused the
    # garbage collector
    if name == "main":
        from tcbreplay._cli.common import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run() -> None:
    """The ``tcbreplay`` console script: :func:`main`, after which the process ends without
    Python's interpreter teardown, once exit handlers have run and output is flushed.

    The teardown only frees memory the operating system frees anyway, and collects
    garbage over every object left, several times. A crash in tcbreplay still ends the usual
    way, traceback included.
    """
    sys.excepthook = _print_redacted
    usable_streams()
    # while the command loads its modules (about 500 for a scoring), every few hundred new
    # objects made the collector scan again those made since, which all live on: 30 ms of a
    # 0.4 s scoring, nothing found (see BENCHMARKS.md)
    collector_paused_for(LOADING_S)
    # tcbreplay does no linear algebra: numpy's BLAS threads, started when numpy loads, would
    # only spin (see BENCHMARKS.md)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from tcbreplay._cli.common import main

    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()  # logging, thread pools, temporary files, child processes
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe: nothing more can be said on it
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


# a command's first second, in which it loads its modules
LOADING_S = 1.0


def usable_streams() -> None:
    """stdout and stderr as every command can write them: one the shell closed (``>&-``) is
    the null device (a traceback, exit 1, before: a record's run was stored all the same),
    and one whose encoding cannot hold every character (``PYTHONIOENCODING=ascii``, a
    ``C`` locale) writes the others as JSON's escapes (``\\u2014``), valid in a JSON string
    and readable in a table (a UnicodeEncodeError's traceback, before)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:  # (opened at once: the file descriptor no file of a run takes)
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
            continue
        encoding = str(getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
        if not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors=_ESCAPES)


_ESCAPES = "tcbreplay-json-escapes"


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for char in error.object[error.start : error.end]:
        code = ord(char)
        if code > 0xFFFF:  # a surrogate pair, as JSON writes it
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), error.end


codecs.register_error(_ESCAPES, _json_escapes)


def _print_redacted(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """Print a crash's traceback without any secret it may quote (as typed errors are)."""
    from tcbreplay._secrets import redact

    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))
