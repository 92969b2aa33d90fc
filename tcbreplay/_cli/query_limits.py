"""The limits of a query (``sql`` and ``query``): ``--timeout`` and ``--memory-limit``."""

from __future__ import annotations

import math
import time

import click


def _a_number(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if math.isnan(value):
        raise click.BadParameter(f"{value} is not a number of seconds", ctx=ctx, param=param)
    return value


# the limits of a query; the library's functions have none unless given
TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=300,
    show_default=True,
    metavar="SECONDS",
    callback=_a_number,
    help="Stop the query, and drawing its table, after this long (0: none).",
)


def deadline(timeout: float) -> float | None:
    """The ``time.monotonic()`` by which a query given ``--timeout`` must be printed."""
    return time.monotonic() + timeout if timeout else None


MEMORY_OPTION = click.option(
    "--memory-limit",
    default="50%",
    show_default=True,
    metavar="SIZE",
    help="Most memory DuckDB may use (it spills to disk beyond it), and most the rows held "
    "for printing may take: a size such as 4GB, or a share of the machine's memory such "
    "as 50%.",
)
