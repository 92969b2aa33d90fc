"""The manual's generated parts, written into its pages while MkDocs builds them.

A page asks for one with a marker on a line of its own:

- ``<!-- cli-reference -->``: every command's ``--help``, as click prints it;
- ``<!-- api-reference -->``: every name ``tcbreplay`` exports, with its signature and docstring;
- ``<!-- include: FILE -->``: a file of the repository: a Markdown file (BENCHMARKS.md,
  CHANGELOG.md) without its title, any other (an example script) as a code block.

So the reference cannot drift from the code: it is the code's own text. ``tests/test_docs.py``
calls these functions too.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
# as a terminal prints it, and as wide as a code block of the site shows without scrolling
WIDTH = 80
_MARKER = re.compile(r"^<!-- (cli-reference|api-reference|include: (\S+)) -->$", re.M)


def commands(
    cmd: click.Command | None = None, path: tuple[str, ...] = ("tcbreplay",)
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of the CLI, the group first, with the words that call it."""
    if cmd is None:
        from tcbreplay._cli import main

        cmd = main
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=path[-1])
        for name in cmd.list_commands(ctx):  # a lazily loading group's too
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from commands(sub, (*path, name))


def help_text(path: tuple[str, ...], cmd: click.Command) -> str:
    """What ``tcbreplay ... --help`` prints for the command at ``path``."""
    ctx = None
    for name in path[:-1]:
        ctx = click.Context(click.Command(name), info_name=name, parent=ctx)
    ctx = click.Context(
        cmd, info_name=path[-1], parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH
    )
    return cmd.get_help(ctx)


def cli_reference() -> str:
    """A section per command: its name as a heading, its help as click prints it."""
    parts = []
    for path, cmd in commands():
        parts.append(f"## `{' '.join(path)}`\n\n```text\n{help_text(path, cmd)}\n```\n")
    return "\n".join(parts)


def api_reference() -> str:
    """A section per public name: its signature and docstring (methods of classes too)."""
    import tcbreplay

    parts = []
    for name in tcbreplay.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(tcbreplay, name)
        parts.append(_entry(f"tcbreplay.{name}", obj, level=2))
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not inspect.isfunction(member) or not member.__doc__:
                    continue
                parts.append(_entry(f"{name}.{attr}", member, level=3))
    return "\n".join(parts)


def _entry(title: str, obj: Any, level: int) -> str:
    kind = "class" if inspect.isclass(obj) else "def"
    try:
        signature = str(inspect.signature(obj))
    except (TypeError, ValueError):
        signature = "(...)"
    # annotations are strings (postponed evaluation): shown without their quotes
    signature = re.sub(r"(: |-> )'([^']*)'", r"\1\2", signature)
    if kind == "class":
        signature = signature.removesuffix(" -> None")
    short = title.rsplit(".", 1)[-1]
    doc = _markdown(inspect.getdoc(obj) or "")
    heading = "#" * level
    return f"{heading} `{title}`\n\n```python\n{kind} {short}{signature}\n```\n\n{doc}\n"


def _markdown(doc: str) -> str:
    """Docstrings in the reST habits of the code (``x``, :func:`~a.b`) as Markdown."""
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", lambda m: f"`{m.group(1)}`", doc)
    return doc.replace("``", "`")


_LANGUAGES = {".py": "python", ".sh": "bash"}


def include(name: str) -> str:
    """A Markdown file of the repository without its first line, the title; another file as
    a code block."""
    path = ROOT / name
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".md":
        return f"```{_LANGUAGES.get(path.suffix, 'text')}\n{text.rstrip()}\n```\n"
    first, _, rest = text.partition("\n")
    if not first.startswith("# "):
        raise ValueError(f"{name} does not start with a title")
    return rest.lstrip("\n")


def render(markdown: str) -> str:
    """The page with each marker replaced by what it asks for."""

    def part(match: re.Match[str]) -> str:
        if match.group(1) == "cli-reference":
            return cli_reference()
        if match.group(1) == "api-reference":
            return api_reference()
        return include(match.group(2))

    return _MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs' hook: called with each page's Markdown before it is rendered."""
    return render(markdown)
