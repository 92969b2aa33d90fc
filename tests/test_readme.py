"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


@pytest.mark.slow
def test_the_library_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    tsa, tp, ahr = (float(x) for x in out.stdout.splitlines()[0].split())
    assert 0 <= ahr <= 1 and 0 < tsa <= 1 and 0 < tp <= 1
    assert (tmp_path / "traces" / "demo-sim" / "scores" / "spec" / "summary.json").exists()
