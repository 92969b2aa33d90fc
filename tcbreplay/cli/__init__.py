"""The ``tcbreplay`` command line: parse options, call one library function, render the result.

Library modules are imported inside each command so that ``score`` and ``sql``
never load LangChain. The commands live in one module per kind of work.
"""

from tcbreplay.cli import judge, read, write  # noqa: F401  (they register the commands)
from tcbreplay.cli.base import main

__all__ = ["main"]
