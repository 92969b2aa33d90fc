"""``make wheel-check``: tcbreplay as a user installs it, from its wheel.

Builds the wheel from these sources (``pip wheel . --no-deps``, in a copy of the files git
tracks or would track, so that nothing left in ``build/`` gets in), checks what it holds (the
kernels' extension, ``queries/`` as ``tcbreplay/queries``, no kernel sources),
installs it into a fresh virtualenv (dependencies from the package index or pip's cache),
records the demo with the sim model into a temporary store, and times the first
``tcbreplay score`` of it, process start included, with every warning shown and a
DeprecationWarning an error: its stderr must hold no warning. Prints the numbers; exits 1 if
a check fails.

    python -m bench.wheel_check [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_FIRST_SCORE_S = 3.0
# every warning shown, a DeprecationWarning an error (the later filter wins)
WARNINGS = "default,error::DeprecationWarning"


def run(cmd: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``cmd``; its result and wall seconds."""
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    return done, time.perf_counter() - started


def must(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")


def source_copy(target: Path) -> None:
    """The files of this checkout that git tracks or would track, copied under ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True, cwd=ROOT,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # (a file deleted but not yet committed is listed too)
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def wheel_problems(wheel: Path) -> list[str]:
    """What the wheel should hold and does not, or holds and should not."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    problems = []
    if not any(re.fullmatch(r"tcbreplay/_score/kernels/_compiled\..*(so|pyd)", n) for n in names):
        problems.append("no compiled kernels (tcbreplay/_score/kernels/_compiled.*)")
    sql = {f"tcbreplay/{p.relative_to(ROOT).as_posix()}" for p in ROOT.glob("queries/**/*.sql")}
    if missing := sorted(sql - names):
        problems.append(f"SQL files missing: {', '.join(missing)}")
    if sources := sorted(n for n in names if n.endswith((".pyx", ".pxi", ".h", ".c"))):
        problems.append(f"kernel sources in the wheel: {', '.join(sources)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wheel_check", description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tcbreplay-wheel-"))
    problems: list[str] = []
    try:
        source_copy(tmp / "src")
        done, built_s = run(
            [sys.executable, "-m", "pip", "wheel", ".", "-w", str(tmp / "dist"), "--no-deps",
             "--quiet"],
            cwd=tmp / "src",
        )  # fmt: skip
        must(done, "pip wheel")
        wheel = next((tmp / "dist").glob("tcbreplay-*.whl"))
        print(f"wheel: {wheel.name}, {wheel.stat().st_size / 1e6:.2f} MB, built in {built_s:.1f} s")
        problems += wheel_problems(wheel)

        venv = tmp / "venv"
        must(run([sys.executable, "-m", "venv", str(venv)])[0], "python -m venv")
        bin_ = venv / "bin"
        done, install_s = run([str(bin_ / "python"), "-m", "pip", "install", "--quiet", str(wheel)])
        must(done, "pip install of the wheel")
        print(f"installed into a fresh venv with its dependencies in {install_s:.1f} s")

        store = tmp / "store"
        # a folder of its own: the installed package, not these sources, is imported
        work = tmp / "work"
        work.mkdir()
        tcbreplay = str(bin_ / "tcbreplay")
        done, record_s = run(
            [tcbreplay, "record", "--model", "sim:seed=7", "--run-id", "demo-sim", "--store",
             str(store), "--quiet"],
            cwd=work,
        )  # fmt: skip
        must(done, "tcbreplay record")
        print(f"recorded demo-sim (sim:seed=7) in {record_s:.1f} s")

        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PYTHONWARNINGS"] = WARNINGS
        scores = []
        for _ in range(2):
            done, took = run([tcbreplay, "score", "demo-sim", "--store", str(store)], cwd=work,
                             env=env)  # fmt: skip
            must(done, "tcbreplay score")
            scores.append(took)
            if warned := [line for line in done.stderr.splitlines() if "Warning" in line]:
                problems.append("score warned:\n  " + "\n  ".join(warned))
        met = "met" if scores[0] <= TARGET_FIRST_SCORE_S else "MISSED"
        print(
            f"first score: {scores[0]:.2f} s (target <= {TARGET_FIRST_SCORE_S:.0f} s: {met}); "
            f"second: {scores[1]:.2f} s; stderr with PYTHONWARNINGS={WARNINGS}: "
            + ("warnings (below)" if any("warned" in p for p in problems) else "no warnings")
        )
        if scores[0] > TARGET_FIRST_SCORE_S:
            problems.append(f"the first score took {scores[0]:.2f} s")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("wheel check: " + ("failed" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
