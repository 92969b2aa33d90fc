"""The kernels' extension as scoring loads it (``tcbreplay._score.kernels.functions``): compiled,
running without the GIL, refusing arrays it cannot read. What the kernels compute:
``test_kernels_scoring.py``, ``test_kernels_jsontext.py``, ``test_kernels_calls.py``,
``test_kernels_dashboard.py``; whole runs against the reference: ``test_metrics.py``."""

from __future__ import annotations

import ast
import inspect
import itertools
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tcbreplay._score import kernels, pairing
from tcbreplay._score.kernels import number_locale, scratch_for
from tcbreplay._score.scorers import default as default_scorer


def test_the_kernels_are_the_compiled_extension():
    module = kernels.functions()
    assert module.__name__ == "tcbreplay._score.kernels._compiled"
    assert module.__file__.endswith((".so", ".pyd"))
    default_scorer.warm()  # every kernel scoring uses, on what scoring hands it


# what the kernels declare (cpdef enum in the .pxi files) and Python reads from them
KERNEL_CONSTANTS = (
    "SAMPLE", "AGENT", "GOLD", "TOOL", "INVALID", "VALID", "MISSING", "PENDING", "MAX_KEYS",
    "SMALL_BLOCK", "STRINGS_EXACT", "STRINGS_BFCL", "NAME_NONE", "NAME_TEXT", "NAME_ESCAPED",
    "NAME_VALUE",
)  # fmt: skip


def test_python_reads_the_kernels_constants_and_declares_none_of_its_own():
    """Declared once, in the kernels: no Python module assigns one (SMALL_BLOCK was 12 in
    pairing.py and 10 in the kernel), and the package's are the compiled module's."""
    package = Path(kernels.__file__).parents[2]
    assigned = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        if not any(name in text for name in KERNEL_CONSTANTS):  # (parsing them all took 4 s)
            continue
        for node in ast.walk(ast.parse(text)):
            targets = node.targets if isinstance(node, ast.Assign) else []
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            assigned += [
                f"{path.relative_to(package)}: {n}" for n in names if n in KERNEL_CONSTANTS
            ]
    assert assigned == []
    for name in KERNEL_CONSTANTS:
        assert getattr(kernels, name) == getattr(kernels.functions(), name), name


def test_python_and_the_kernel_pair_blocks_of_the_same_size_over_subsets():
    """pairing.align_pairs (explanations, the report) and the kernel's choose_pairs (scores)
    switch from subset tables to the Hungarian algorithm at the same block size."""
    kernel = inspect.signature(kernels.functions().choose_pairs).parameters["small_block"]
    python = inspect.signature(pairing.align_pairs).parameters["small_block"]
    assert python.default == kernel.default == kernels.SMALL_BLOCK


def _score_samples() -> tuple:
    """Samples of 1,500 agent and 1,501 gold calls of one name: edit distance, sequence
    tables and 3,000 candidate pairs each."""
    n, a, g = 20, 1500, 1501
    a_first = np.arange(n + 1, dtype=np.int64) * a
    g_first = np.arange(n + 1, dtype=np.int64) * g
    a_offsets = np.arange(n * a + 1, dtype=np.int64) * 2
    g_offsets = np.arange(n * g + 1, dtype=np.int64) * 2
    data = np.frombuffer(b"{}" * n * g + b"\0", dtype=np.uint8)
    nothing = np.zeros(1, dtype=np.int64)
    return (
        a_first, np.zeros(n * a, dtype=np.int32), a_offsets, data, g_first,
        np.zeros(n * g, dtype=np.int32), g_offsets, data, 1, np.zeros(2, dtype=np.int64),
        nothing, data, np.zeros(0, dtype=np.bool_), nothing, data, 1e-9, 1e-9,
        np.zeros(n * a, dtype=np.bool_), np.zeros(n * g, dtype=np.bool_), scratch_for(a_offsets),
        number_locale(), np.empty((n * 2 * a, 8), dtype=np.int32),
    )  # fmt: skip


def _choose_pairs() -> tuple:
    """Samples of 800 agent and 800 gold calls with the diagonal as candidates, aligned
    (their name sequences said to differ): a table of 800 × 800 scores each."""
    n, calls = 50, 800
    first = np.arange(n + 1, dtype=np.int64) * calls
    pairs = np.zeros((n * calls, 8), dtype=np.int32)
    pairs[:, kernels.SAMPLE] = np.repeat(np.arange(n), calls)
    pairs[:, kernels.AGENT] = pairs[:, kernels.GOLD] = np.tile(np.arange(calls), n)
    pairs[:, kernels.VALID] = np.arange(n * calls) % 5
    return first, first, np.zeros(n, dtype=np.bool_), pairs


# the kernels that take most of a part's time in the kernels
KERNELS = {"score_samples": _score_samples, "choose_pairs": _choose_pairs}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_kernels_release_the_gil(name):
    """Scoring runs a part's kernels per thread, side by side: while one thread is inside a
    kernel, another runs Python. A loop in this thread, while another thread runs the kernel,
    goes on; were the GIL held, it would stop for as long as the kernel takes alone. (A few
    tries: a machine too busy may not run the loop for a while either.)"""
    kernel = getattr(kernels.functions(), name)
    args = KERNELS[name]()
    alone = []
    for _ in range(2):
        started = time.perf_counter()
        kernel(*args)
        alone.append(time.perf_counter() - started)
    span: list[float] = []

    def call() -> None:
        started = time.perf_counter()
        kernel(*args)
        span[:] = [started, time.perf_counter()]

    for _ in range(5):
        beats: list[float] = []
        thread = threading.Thread(target=call)
        thread.start()
        while thread.is_alive():
            beats.append(time.perf_counter())
        thread.join()
        assert span, f"{name} failed"
        times = [span[0], *(beat for beat in beats if span[0] < beat < span[1]), span[1]]
        stopped = max(b - a for a, b in itertools.pairwise(times))
        if stopped < min(alone) / 2:
            return
    pytest.fail(f"{name}: the loop stopped for {stopped:.3f} s; alone it takes {min(alone):.3f} s")


def test_an_array_with_strides_is_refused_not_misread():
    """The kernels read arrays as plain memory: a strided view is refused."""
    whole = np.arange(9, dtype=np.int64)
    s, known = kernels.functions().positions(whole[2:5], np.array([3, 9], dtype=np.int64))
    assert list(s) == [1, 7] and list(known) == [True, False]
    with pytest.raises(ValueError, match="contiguous"):
        kernels.functions().positions(whole[::3], whole[:2])


def test_a_locale_handle_other_than_number_locale_is_refused():
    """Numbers are read in the C locale the module made; c_locale is that handle, checked."""
    texts = np.frombuffer(b"1.51\0", dtype=np.uint8)
    value_equal = kernels.functions().value_equal
    scratch = np.empty(8, dtype=np.uint8)
    assert value_equal(texts, 0, 3, texts, 3, 4, 0.5, 0.0, scratch, number_locale()) == 1
    with pytest.raises(ValueError, match="number_locale"):
        value_equal(texts, 0, 3, texts, 3, 4, 0.5, 0.0, scratch, number_locale() + 8)


@pytest.mark.slow  # (about 3 s: a process of its own)
def test_kernels_not_built_are_one_line_that_says_how_to_build_them(tmp_path):
    # a clone nobody installed: the extension is absent (here: hidden from the import)
    code = textwrap.dedent(
        """
        import sys
        from importlib.abc import MetaPathFinder

        class Hide(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "tcbreplay._score.kernels._compiled":
                    raise ImportError(name)
                return None

        sys.meta_path.insert(0, Hide())
        from tcbreplay._cli import main
        main(["score", "x", "--store", sys.argv[1]])
        """
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: tcbreplay's compiled kernels are not built")
    assert "Hint: install the package" in done.stderr and "Traceback" not in done.stderr
