"""Which kernels scoring loads (``tcbreplay.kernels.functions``): the ahead-of-time module
when it was built from the sources beside it, else numba's just-in-time ones; both give the
same scores. The kernels themselves: ``test_kernels_scoring.py``, ``test_kernels_jsontext.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal
from test_metrics import TOOLS, load_cases, score

from tcbreplay import kernels
from tcbreplay.kernels import scoring

AOT_BUILT = any(Path(kernels.__file__).parent.glob("_aot*.so"))


@pytest.fixture
def just_in_time(monkeypatch):
    """Scoring with the just-in-time kernels, whatever is built."""
    monkeypatch.setattr(kernels, "functions", lambda: scoring)


def test_stale_ahead_of_time_kernels_are_not_used(monkeypatch):
    """Kernels built from other sources (say, before an edit) are left alone."""
    kernels.functions.cache_clear()
    monkeypatch.setattr(kernels, "source_sha", lambda: 12345)
    try:
        assert kernels.functions() is scoring and not kernels.ahead_of_time()
    finally:
        kernels.functions.cache_clear()


@pytest.mark.skipif(not AOT_BUILT, reason="no ahead-of-time kernels built here")
def test_built_kernels_are_current_and_loaded_without_numba():
    """`make install` (and `make test`) build them from these sources; loading them imports no
    numba, which the just-in-time kernels cost ~0.3 s of every process."""
    assert kernels.ahead_of_time(), "stale: run python -m tcbreplay.kernels.build"
    code = (
        "import sys; from tcbreplay import kernels; kernels.functions(); "
        "print('numba' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_both_kernels_score_the_case_table_alike(just_in_time, monkeypatch):
    """Every hand-computed case, with the just-in-time kernels and with the loaded ones."""
    cases = load_cases()
    tools = TOOLS
    jit = [score([case], case.get("tools", tools)) for case in cases]
    monkeypatch.undo()
    loaded = [score([case], case.get("tools", tools)) for case in cases]
    for a, b in zip(jit, loaded, strict=True):
        assert_frame_equal(a, b)
