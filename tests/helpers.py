"""Small helpers shared by the CLI and store tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner, Result

from tcbreplay.cli import main


def cli(*args: object) -> Result:
    """Run ``tcbreplay`` with click's test runner (arguments may be paths)."""
    return CliRunner().invoke(main, [str(a) for a in args])


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path (directories as '<dir>'), to show
    that a command left the store as it was."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): "<dir>"
        if p.is_dir()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }
