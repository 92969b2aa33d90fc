"""Values some commands are given, checked as click reads them: an input file of this machine
(``INPUT_FILE``), an output path (:class:`OutputPath`), ``KEY=VALUE`` pairs
(:func:`options_dict`), the address a server listens on (:func:`listen_on`). The options
every command has (``--store``, ``--format``) are :mod:`tcbreplay._cli.common`'s.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from tcbreplay._store.store_urls import names_object_storage
from tcbreplay.errors import InputError


class InputFile(click.Path):
    """A file of this machine given as input (a dataset, traces, a system prompt): a URL is
    refused in one line (object storage holds stores, ``--store s3://...``, not inputs),
    instead of being read as a path whose ``//`` collapsed."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and _URL_START.match(value):
            self.fail(
                f"{value}: a URL; give a file of this machine (a store may be on object "
                "storage, its inputs may not)",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
INPUT_FILE = InputFile()


class OutputPath(click.Path):
    """The ``-o`` path of a command: an empty one is refused (as a path it is the working
    folder, which no one means)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not value:
            self.fail("an empty path names no file or folder", param, ctx)
        if isinstance(value, str) and names_object_storage(value):
            # not shown: a URL may hold credentials
            self.fail(
                "a URL (such as s3://...) is no local path: the files are written here; copy "
                "them to object storage with its own tools",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


def options_dict(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"{flag} {pair!r}: expected KEY=VALUE")
        key = key.strip()
        if key in out and out[key] != value:  # (the last one won, in silence)
            raise InputError(f"{flag} {pair!r}: {key} is given twice ({key}={out[key]} too)")
        out[key] = value
    return out


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def listen_on(host: str) -> str | None:
    """Refuse an empty ``--host`` (every interface's address to the OS); the warning a host
    other than loopback is given, or None."""
    if not host.strip():
        raise InputError("--host '': give an address to listen on (127.0.0.1: this machine only)")
    if host not in LOOPBACK:
        return f"Warning: listening on {host}, not on loopback only"
    return None
