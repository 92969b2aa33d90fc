"""Compile the kernels ahead of time: ``python -m tcbreplay.kernels.build``.

Writes the extension module ``tcbreplay/kernels/_aot.<platform>.so`` from the same
functions numba compiles just in time (numba's ``pycc``; a C compiler links it). Scoring
loads it without importing numba, as long as its ``source_sha()`` is that of the sources
beside it (:func:`tcbreplay.kernels.functions`). ``make install`` runs this.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

from numba import types

from tcbreplay import kernels

i64, i32, i8, u8 = types.int64, types.int32, types.int8, types.uint8
f8, b1 = types.float64, types.boolean


def _array(dtype: types.Type, ndim: int = 1, readonly: bool = False) -> types.Array:
    return types.Array(dtype, ndim, "C", readonly=readonly)


# exactly the types scoring passes: texts are read-only views of Arrow buffers, every other
# array is one numpy made
TEXT = _array(u8, readonly=True)
# score_samples: agent calls (first, code, offsets, texts), gold calls (the same), name codes,
# tool parameters (first, key offsets, keys, has default, default offsets, defaults),
# tolerances, checked flags, number scratch, locale handle, candidate table
_SCORE_SAMPLES = (
    [_array(i64), _array(i32), _array(i64), TEXT] * 2
    + [i64, _array(i64), _array(i64), TEXT, _array(b1), _array(i64), TEXT]
    + [f8, f8, _array(b1), _array(b1), _array(u8), i64, _array(i32, 2)]
)
SIGNATURES = {
    "score_samples": types.Tuple((_array(f8), _array(f8), _array(b1), i64, i64, i64))(
        *_SCORE_SAMPLES
    ),
    "choose_pairs": _array(b1)(_array(i64), _array(i64), _array(b1), _array(i32, 2)),
    "sample_totals": _array(i64, 2)(i64, _array(i32, 2), _array(b1)),
    "picked": _array(i64, 2)(_array(i32, 2), _array(b1)),
    "tool_totals": _array(i64, 2)(i64, _array(i32), _array(i32), _array(i64, 2)),
    "encode_texts": b1(
        _array(i64), TEXT, _array(i64), _array(i64), _array(u8), _array(i64), _array(i32)
    ),
    "first_repeated_key": i64(_array(i64), TEXT, _array(b1)),
    "positions": types.Tuple((_array(i64), _array(b1)))(_array(i64), _array(i64)),
    "in_call_order": b1(_array(i64), _array(i64)),
    "split_calls": i64(_array(i64), TEXT, _array(i64), _array(i8), *[_array(i64)] * 4),
    "span_texts": _array(u8)(TEXT, _array(i64), _array(i64), TEXT, _array(i64)),
    # dashboard_samples: listed samples, their inputs' rows, inputs (offsets, texts, not
    # null), then per side each sample's first call, name offsets and texts, argument
    # offsets and texts, the buffer written
    "dashboard_samples": i64(
        *[_array(i64)] * 3,
        TEXT,
        _array(b1),
        *([_array(i64)] + [_array(i64), TEXT] * 2) * 2,
        _array(u8),
    ),
}


def build(output_dir: Path | None = None) -> Path:
    """Compile every kernel into ``_aot``; returns the module's path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba.pycc is marked pending deprecation
        from numba.pycc import CC, compiler

    class Flags(compiler.Flags):
        """Compile flags with the GIL released around each call, as ``nogil=True`` does just
        in time (scoring runs a kernel per part in threads side by side); pycc has no
        option for it, so its compiler is handed these flags."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True

    compiler.Flags = Flags

    from tcbreplay.kernels import scoring

    cc = CC("_aot")
    cc.output_dir = str(output_dir or Path(kernels.__file__).parent)
    cc.verbose = False
    for name, signature in SIGNATURES.items():
        cc.export(name, signature)(getattr(scoring, name).py_func)
    sha = kernels.source_sha()

    def source_sha() -> int:
        return sha

    cc.export("source_sha", i64())(source_sha)
    cc.compile()
    return Path(cc.output_dir) / cc.output_file


def main() -> int:
    started = time.perf_counter()
    path = build()
    print(f"compiled {path} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
