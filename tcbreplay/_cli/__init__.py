"""The ``tcbreplay`` command line: parse options, call one library function, render the result.

Library modules are imported inside each command so that ``score`` and ``sql``
never load LangChain. Each command lives in the module named after it, imported when the
command is asked for (``COMMAND_MODULES`` in :mod:`tcbreplay._cli.common`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import traceback
from types import TracebackType

from tcbreplay._cli.common import main
from tcbreplay._secrets import redact

__all__ = ["main", "run"]


def run() -> None:
    """The ``tcbreplay`` console script: :func:`main`, after which the process ends without
    Python's interpreter teardown, once exit handlers have run and output is flushed.

    The teardown only frees memory the operating system frees anyway, and collects
    garbage over every object left, several times. A crash in tcbreplay still ends the usual
    way, traceback included.
    """
    sys.excepthook = _print_redacted
    # tcbreplay does no linear algebra: numpy's BLAS threads, started when numpy loads, would
    # only spin (see BENCHMARKS.md)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
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


def _print_redacted(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """Print a crash's traceback without any secret it may quote (as typed errors are)."""
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))
