"""``make bench``: time ``tcbreplay score`` on synthetic runs of 10k, 100k and 1M samples.

For each size, in fresh processes: ``tcbreplay score`` end to end (process start
included; best of 3, of 2 at 1M), a bare read pass over every column of the same stored
messages (``tcbreplay sql``; and plain DuckDB on the file, for comparison), and the
reference scorer (``bench.reference``: the original evaluator's per-sample loop), with
wall time, CPU time and peak RSS; checks that both scorers give the same numbers (run
level, and per sample); measures the store against the same traces as JSONL and the
import time of ``score``. Prints a table and writes it to BENCHMARKS.md ("Scoring at
scale"). Generated runs are kept under ``bench/out/`` and reused while still valid.

    python -m bench.run [--sizes 10k,100k,1m] [--seed 0] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.generate import generate_run, generator_info, parse_size

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
SECTION = "## Scoring at scale"
REFERENCE_LIMIT_S = 600.0
TIME = "/usr/bin/time"
TOL = 1e-12
FLOOR_SQL = (
    "select sum(length(run_id)) + sum(length(sample_id)) + sum(position) + sum(length(type))"
    " + sum(length(message)) + sum(input_tokens) + sum(output_tokens) + sum(total_tokens)"
    " + sum(latency_s) as total from messages"
)
SUMMARY_KEYS = ("tsa", "tp", "ahr")
COUNT_KEYS = (
    "n_samples",
    "n_tsa",
    "n_tp",
    "args_invalid",
    "args_total",
    "args_missing",
    "n_errors",
)
# Targets of the issue "Scoring at scale"
TARGET_1M_S = 10.0
TARGET_10K_S = 1.0
TARGET_SPEEDUP = 20.0
TARGET_FLOOR_RATIO = 3.0
TARGET_RSS_1M_GB = 3.0
TARGET_SCALING = 11.0
TARGET_STORE_RATIO = 1 / 5


def bin_path(name: str) -> str:
    """A console script of this virtualenv (``tcbreplay``)."""
    return str(Path(sys.executable).parent / name)


def label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


# -- measuring a process ------------------------------------------------------------------------


@dataclass
class Measure:
    """One fresh process: wall seconds (process start included), CPU seconds, peak RSS."""

    wall: float
    cpu: float
    rss_mb: float
    stdout: str = field(repr=False, default="")


def measure(cmd: Sequence[str], timeout: float | None = None) -> Measure:
    """Run ``cmd`` in a fresh process; fail loudly when it fails."""
    with tempfile.NamedTemporaryFile("r", suffix=".rusage", delete=False) as f:
        report = Path(f.name)
    try:
        if Path(TIME).exists():
            wrapped = [TIME, "-v", "-o", str(report), *cmd]
        else:  # the children's rusage, from a small wrapper process
            wrapped = [sys.executable, "-c", _RUSAGE_WRAPPER, str(report), *cmd]
        t0 = time.perf_counter()
        proc = subprocess.run(
            wrapped, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        cpu, rss_kb = _read_rusage(report.read_text())
    finally:
        report.unlink(missing_ok=True)
    return Measure(wall=wall, cpu=cpu, rss_mb=rss_kb / 1024, stdout=proc.stdout)


_RUSAGE_WRAPPER = """
import json, resource, subprocess, sys
code = subprocess.run(sys.argv[2:]).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write(f"User time (seconds): {u.ru_utime}\\nSystem time (seconds): {u.ru_stime}\\n")
    f.write(f"Maximum resident set size (kbytes): {u.ru_maxrss}\\n")
sys.exit(code)
"""


def _read_rusage(text: str) -> tuple[float, float]:
    def field_(name: str) -> float:
        match = re.search(rf"{re.escape(name)}: ([0-9.]+)", text)
        if not match:
            raise RuntimeError(f"no {name!r} in the time report:\n{text}")
        return float(match.group(1))

    cpu = field_("User time (seconds)") + field_("System time (seconds)")
    return cpu, field_("Maximum resident set size (kbytes)")


@dataclass
class Timing:
    """The best of several fresh runs (peak RSS: the highest of them)."""

    runs: list[Measure]

    @property
    def best(self) -> Measure:
        return min(self.runs, key=lambda m: m.wall)

    @property
    def wall(self) -> float:
        return self.best.wall

    @property
    def cpu(self) -> float:
        return self.best.cpu

    @property
    def median_wall(self) -> float:
        return statistics.median(m.wall for m in self.runs)

    @property
    def rss_mb(self) -> float:
        return max(m.rss_mb for m in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_wall_s": self.wall,
            "best_cpu_s": self.cpu,
            "peak_rss_mb": self.rss_mb,
            "walls_s": [m.wall for m in self.runs],
        }


def best_of(cmd: Sequence[str], repeats: int) -> Timing:
    return Timing([measure(cmd) for _ in range(repeats)])


# -- runs ---------------------------------------------------------------------------------------


@dataclass
class Bench:
    """One size: its run, and everything measured on it."""

    samples: int
    store: Path
    run_id: str
    messages: int = 0
    generated_s: float | None = None
    generated_cpu_s: float | None = None
    generated: dict[str, Any] = field(default_factory=dict)
    store_bytes: int = 0
    manifest_bytes: int = 0
    dataset_bytes: int = 0
    score: Timing | None = None
    score_dashboard: Timing | None = None  # the default command, dashboard file included
    summary: dict[str, Any] = field(default_factory=dict)
    floor: Timing | None = None
    duckdb_floor: Timing | None = None
    reference: Measure | None = None
    reference_extrapolated_from: int | None = None
    reference_summary: dict[str, Any] = field(default_factory=dict)
    reference_dashboard: Measure | None = None  # the reference writing the dashboard file too
    reference_dashboard_summary: dict[str, Any] = field(default_factory=dict)
    agreement: dict[str, Any] = field(default_factory=dict)
    dashboard_agreement: dict[str, Any] = field(default_factory=dict)
    load_before: float = 0.0

    @property
    def run_dir(self) -> Path:
        return self.store / self.run_id

    @property
    def reference_s(self) -> float | None:
        if self.reference is None:
            return None
        return self.reference.wall * self._reference_scale

    @property
    def reference_with_dashboard_s(self) -> float | None:
        """The reference's second run: scoring, then writing the dashboard file."""
        if self.reference_dashboard is None:
            return None
        return self.reference_dashboard.wall * self._reference_scale

    @property
    def reference_dashboard_s(self) -> float | None:
        """The seconds of that run spent writing the dashboard file."""
        seconds = self.reference_dashboard_summary.get("dashboard_seconds")
        return None if seconds is None else seconds * self._reference_scale

    @property
    def _reference_scale(self) -> float:
        return self.samples / (self.reference_extrapolated_from or self.samples)

    @property
    def speedup(self) -> float | None:
        ref = self.reference_s
        return ref / self.score.wall if ref and self.score else None

    @property
    def speedup_with_dashboard(self) -> float | None:
        """The default command against the reference writing its dashboard file too."""
        ref = self.reference_with_dashboard_s
        return ref / self.score_dashboard.wall if ref and self.score_dashboard else None


def ensure_run(samples: int, seed: int, out: Path) -> Bench:
    """The generated run of this size under ``out``; generate it unless a valid one is there."""
    name = label(samples)
    bench = Bench(samples=samples, store=out / f"store-{name}", run_id=f"bench-{name}")
    info_path = out / f"generated-{name}.json"
    if not _valid_run(bench.run_dir, samples, seed):
        # a store holds this one run only: `tcbreplay sql` reads every run in the store
        shutil.rmtree(bench.store, ignore_errors=True)
        print(f"generating {samples:,} samples -> {bench.run_dir}", flush=True)
        result = generate_run(bench.store, bench.run_id, samples, seed, quiet=False)
        generated = {
            "seconds": result.seconds,
            "cpu_seconds": result.cpu_seconds,
            "messages": result.messages,
            "load_average": load1(),
            # peak RSS so far of this process (the writer) and of its largest worker
            "writer_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
        info_path.write_text(json.dumps(generated))
        bench.generated_s, bench.generated_cpu_s = result.seconds, result.cpu_seconds
        bench.generated = generated
        print(
            f"  {result.messages:,} messages in {result.seconds:.1f} s "
            f"({samples / result.seconds:,.0f} samples/s, {result.cpu_seconds:.1f} CPU s)",
            flush=True,
        )
    elif info_path.exists():
        generated = json.loads(info_path.read_text())
        bench.generated_s = generated.get("seconds")
        bench.generated_cpu_s = generated.get("cpu_seconds")
        bench.generated = {**generated, "reused": True}
    bench.messages = pq.ParquetFile(bench.run_dir / "messages.parquet").metadata.num_rows
    # the run at rest: every file of the run directory (not the scores written later)
    bench.store_bytes = sum(p.stat().st_size for p in bench.run_dir.iterdir() if p.is_file())
    bench.manifest_bytes = (bench.run_dir / "manifest.json").stat().st_size
    dataset = bench.run_dir / "dataset.jsonl"
    bench.dataset_bytes = dataset.stat().st_size if dataset.exists() else 0
    return bench


def _valid_run(run_dir: Path, samples: int, seed: int) -> bool:
    """A complete generated run of this size and seed, by this generator version."""
    try:
        tail = _tail(run_dir / "manifest.json")  # status and generator follow the dataset
        generator = json.dumps(generator_info(samples, seed), indent=2).replace("\n", "\n  ")
        if '"status": "complete"' not in tail or f'"generator": {generator}' not in tail:
            return False
        rows = pq.ParquetFile(run_dir / "samples.parquet").metadata.num_rows
        return (
            rows == samples and pq.ParquetFile(run_dir / "messages.parquet").metadata.num_rows > 0
        )
    except (OSError, ValueError):
        return False


def _tail(path: Path, size: int = 1 << 16) -> str:
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - size))
        return f.read().decode("utf-8", errors="replace")


# -- the measurements ---------------------------------------------------------------------------


def time_score(bench: Bench, repeats: int) -> None:
    cmd = [bin_path("tcbreplay"), "score", bench.run_id, "--store", str(bench.store)]
    bench.score = best_of([*cmd, "--format", "json", "--dashboard", "none"], repeats)
    bench.summary = json.loads(bench.score.best.stdout)
    bench.score_dashboard = best_of([*cmd, "--format", "json"], repeats)


def _dashboard(b: Bench) -> str:
    t = b.score_dashboard
    return f"{t.wall:.2f} ({t.rss_mb:,.0f} MB)" if t else "—"


def time_floor(bench: Bench, repeats: int) -> None:
    sql = [bin_path("tcbreplay"), "sql", FLOOR_SQL, "--store", str(bench.store), "--format", "json"]
    bench.floor = best_of(sql, repeats)
    path = str((bench.run_dir / "messages.parquet").resolve()).replace("'", "''")
    query = FLOOR_SQL.replace("from messages", f"from read_parquet('{path}')")
    code = f"import duckdb; print(duckdb.sql({query!r}).fetchall())"
    bench.duckdb_floor = best_of([sys.executable, "-c", code], repeats)


def run_reference(bench: Bench, smaller: Bench | None, out: Path) -> None:
    """The reference scorer, unless it would take longer than REFERENCE_LIMIT_S."""
    if smaller and smaller.reference_dashboard and not smaller.reference_extrapolated_from:
        predicted = smaller.reference_dashboard.wall * bench.samples / smaller.samples
        if predicted > REFERENCE_LIMIT_S:
            print(
                f"  reference: ~{predicted:.0f} s predicted (> {REFERENCE_LIMIT_S:.0f} s); "
                f"extrapolating from {smaller.samples:,}",
                flush=True,
            )
            _extrapolate(bench, smaller)
            return
    scores = out / f"reference-{label(bench.samples)}.parquet"
    dashboard = out / f"reference-{label(bench.samples)}-dashboard.json"
    cmd = [sys.executable, "-m", "bench.reference", bench.run_id, "--store", str(bench.store)]
    try:
        # scoring only, then again writing the dashboard file: holding every sample's calls
        # for the file slows the loop itself, which would flatter the scoring-only speed-up
        bench.reference = measure([*cmd, "--scores-out", str(scores)], REFERENCE_LIMIT_S)
        bench.reference_summary = json.loads(bench.reference.stdout)
        bench.agreement = agreement(bench, scores)
        bench.reference_dashboard = measure(
            [*cmd, "--dashboard-out", str(dashboard)], REFERENCE_LIMIT_S
        )
        bench.reference_dashboard_summary = json.loads(bench.reference_dashboard.stdout)
        bench.dashboard_agreement = dashboard_agreement(bench, dashboard)
    except subprocess.TimeoutExpired:
        if smaller is None or smaller.reference is None:
            raise
        _extrapolate(bench, smaller)
    finally:
        scores.unlink(missing_ok=True)
        dashboard.unlink(missing_ok=True)


def _extrapolate(bench: Bench, smaller: Bench) -> None:
    bench.reference = smaller.reference
    bench.reference_dashboard = smaller.reference_dashboard
    bench.reference_dashboard_summary = smaller.reference_dashboard_summary
    bench.reference_extrapolated_from = smaller.samples


def dashboard_agreement(bench: Bench, reference_dashboard_file: Path) -> dict[str, Any]:
    """The dashboard file the default ``score`` left against the reference's, read back as
    JSON: the same samples in the same order, each with the same input and calls."""
    path = bench.run_dir / "evaluations" / f"Tool Call Benchmark_{bench.run_id}.json"
    mine = json.loads(path.read_text())["samples"]
    theirs = json.loads(reference_dashboard_file.read_text())["samples"]
    differing = [k for k, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b]
    return {
        "same": len(mine) == len(theirs) and not differing,
        "samples": len(mine),
        "reference_samples": len(theirs),
        "differing": len(differing),
        "examples": [(mine[k], theirs[k]) for k in differing[:2]],
    }


def agreement(bench: Bench, reference_scores: Path) -> dict[str, Any]:
    """Run level (tsa/tp/ahr within 1e-12, counts equal) and per sample (every column)."""
    out: dict[str, Any] = {"run_level": True, "differences": []}
    for key in SUMMARY_KEYS:
        a, b = bench.summary.get(key), bench.reference_summary.get(key)
        if (a is None) != (b is None) or (a is not None and abs(a - b) > TOL):
            out["run_level"] = False
            out["differences"].append(f"{key}: score {a!r}, reference {b!r}")
    for key in COUNT_KEYS:
        if bench.summary.get(key) != bench.reference_summary.get(key):
            out["run_level"] = False
            out["differences"].append(
                f"{key}: score {bench.summary.get(key)!r}, "
                f"reference {bench.reference_summary.get(key)!r}"
            )
    mine = bench.run_dir / "scores" / "spec" / "scores.parquet"
    out.update(per_sample_agreement(mine, reference_scores))
    return out


def per_sample_agreement(scores_path: Path, reference_path: Path) -> dict[str, Any]:
    """Compare two per-sample score files sample by sample."""
    import polars as pl

    columns = ["n_gold", "n_agent", "args_invalid", "args_total", "args_missing", "pairs"]
    floats = ["tsa", "tp", "ahr"]
    a = pl.read_parquet(scores_path).select("sample_id", *columns, *floats)
    b = pl.read_parquet(reference_path).select("sample_id", *columns, *floats)
    joined = a.join(b, on="sample_id", how="full", suffix="_ref", coalesce=True)
    bad = pl.lit(False)
    for c in columns:
        bad = bad | pl.col(c).ne_missing(pl.col(f"{c}_ref"))
    for c in floats:
        x, y = pl.col(c), pl.col(f"{c}_ref")
        bad = bad | (x.is_null() != y.is_null()) | ((x - y).abs() > TOL).fill_null(False)
    mismatched = joined.filter(bad)
    return {
        "per_sample": mismatched.height == 0,
        "samples_compared": joined.height,
        "samples_differing": mismatched.height,
        "examples": mismatched.head(5).to_dicts(),
    }


def jsonl_comparison(bench: Bench, out: Path) -> dict[str, Any]:
    """The same run exported as JSONL (``tcbreplay export``): its size beside the store's."""
    target = out / f"jsonl-{label(bench.samples)}"
    shutil.rmtree(target, ignore_errors=True)
    try:
        cmd = [bin_path("tcbreplay"), "export", bench.run_id, "-o", str(target)]
        cmd += ["--format", "tables"]  # the store's tables, not traces for import
        took = measure([*cmd, "--store", str(bench.store)])
        sizes = {p.name: p.stat().st_size for p in target.iterdir()}
    finally:
        shutil.rmtree(target, ignore_errors=True)
    data = sizes["samples.jsonl"] + sizes["messages.jsonl"]
    stored = bench.store_bytes - bench.manifest_bytes - bench.dataset_bytes
    # export leaves out dataset.jsonl; it would be the same file on both sides
    whole = data + sizes["manifest.json"] + bench.dataset_bytes
    return {
        "samples": bench.samples,
        "jsonl_bytes": whole,
        "jsonl_data_bytes": data,
        "store_bytes": bench.store_bytes,
        "store_data_bytes": stored,
        "ratio": bench.store_bytes / whole,
        "data_ratio": stored / data,
        "export_s": took.wall,
    }


def import_check(bench: Bench) -> dict[str, Any]:
    """Import time of the score path, and no LangChain or LangGraph after scoring in-process."""
    out: dict[str, Any] = {}
    for module in ("tcbreplay._cli", "tcbreplay._score.run"):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        cumulative = None
        heavy = []
        for line in proc.stderr.splitlines():
            parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
            if len(parts) != 3 or not parts[1].isdigit():
                continue
            if parts[2] == module:
                cumulative = int(parts[1]) / 1e6
            if parts[2].split(".")[0] in ("langchain", "langchain_core", "langgraph"):
                heavy.append(parts[2])
        out[module] = {"import_s": cumulative, "langchain_modules": heavy}
    bare = min(measure([sys.executable, "-c", "pass"]).wall for _ in range(3))
    cli = min(measure([sys.executable, "-c", "import tcbreplay._cli"]).wall for _ in range(3))
    out["python_start_s"] = bare
    out["import_cli_process_s"] = cli
    code = (
        "import json, sys\n"
        "from tcbreplay._cli import main\n"
        f"main(['score', {bench.run_id!r}, '--store', {str(bench.store)!r}, '--format', 'json',"
        " '--dashboard', 'none'], standalone_mode=False)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('langchain', 'langchain_core', 'langgraph'))\n"
        "print('\\nLOADED=' + json.dumps(loaded))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(proc.stdout.rsplit("LOADED=", 1)[1])
    out["loaded_after_score"] = loaded
    out["clean"] = not loaded and not any(
        v["langchain_modules"] for v in out.values() if isinstance(v, dict)
    )
    return out


def format_check(bench: Bench) -> dict[str, Any]:
    """``bench.check_format`` on a run: generated messages are what recording stores."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.check_format", str(bench.run_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    try:
        return {**json.loads(proc.stdout), "samples": bench.samples}
    except json.JSONDecodeError:
        return {"ok": False, "problems": [proc.stderr[-2000:]], "samples": bench.samples}


def profile(bench: Bench, top: int = 8) -> list[dict[str, Any]]:
    """cProfile of ``tcbreplay score`` in one process, scoring the run in one part (the
    timed runs score large runs in parts, in threads cProfile does not see): the
    functions taking the most time."""
    with tempfile.TemporaryDirectory() as tmp:
        stats_path = Path(tmp) / "score.prof"
        code = (
            "import cProfile\n"
            "from tcbreplay._score import run as score\n"
            "from tcbreplay._cli import main\n"
            "score.SPLIT_MIN_SAMPLES = 10**12  # one part: cProfile sees only this thread\n"
            f"args = ['score', {bench.run_id!r}, '--store', {str(bench.store)!r},"
            " '--format', 'json', '--dashboard', 'none']\n"
            f"cProfile.run('main(args, standalone_mode=False)', {str(stats_path)!r})\n"
        )
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )
        return hotspots(stats_path, top)


def hotspots(stats_path: Path, top: int) -> list[dict[str, Any]]:
    """Where ``score`` spends its time, by tcbreplay function.

    The own time of every function is charged to its nearest tcbreplay caller (split
    between callers in proportion to the time spent under each), so a DuckDB query,
    Polars, ``json.loads`` or an import counts towards the tcbreplay code that made it.
    Each row names the callee that took most of its time.
    """
    import pstats

    stats = pstats.Stats(str(stats_path)).stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in stats.values())
    outside = ("~", 0, "(outside tcbreplay)")
    memo: dict[Any, dict[Any, float]] = {}
    on_stack: set[Any] = set()

    def owners(func: Any) -> dict[Any, float]:
        """Nearest tcbreplay callers of ``func`` and the fraction of its time each gets."""
        if "/tcbreplay/" in func[0]:
            return {func: 1.0}
        if func in memo:
            return memo[func]
        on_stack.add(func)
        callers = {c: v[3] for c, v in stats[func][4].items() if c not in on_stack}
        weight = sum(callers.values())
        out: dict[Any, float] = {}
        if weight <= 0:
            out[outside] = 1.0
        else:
            for caller, ct in callers.items():
                for owner, frac in owners(caller).items():
                    out[owner] = out.get(owner, 0.0) + frac * ct / weight
        on_stack.discard(func)
        memo[func] = out
        return out

    charged: dict[Any, float] = {}
    inside: dict[Any, dict[Any, float]] = {}
    for func, (_, _, tt, _, _) in stats.items():
        if tt <= 0:
            continue
        for owner, frac in owners(func).items():
            charged[owner] = charged.get(owner, 0.0) + tt * frac
            if owner != func:
                by = inside.setdefault(owner, {})
                by[func] = by.get(func, 0.0) + tt * frac
    rows = []
    for func, seconds in charged.items():
        callee, most = max((inside.get(func) or {None: 0.0}).items(), key=lambda kv: kv[1])
        rows.append(
            {
                "function": _name(func),
                "seconds": seconds,
                "share": seconds / total if total else 0.0,
                "mostly_in": _name(callee) if callee else "its own code",
                "mostly_in_s": most,
                "total_s": total,
            }
        )
    rows.sort(key=lambda r: r["seconds"], reverse=True)
    return rows[:top]


def _name(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    return name if filename == "~" else f"{_short(filename)}:{line}({name})"


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/work/main/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return Path(filename).name


# -- the report ---------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    from importlib import metadata

    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gb = None
    with contextlib.suppress(OSError, ValueError):
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem_gb = round(kb / 1024 / 1024, 1)
    versions = {}
    for name in ("duckdb", "polars", "pyarrow", "numpy", "rapidfuzz"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": mem_gb,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": versions,
    }


def code_fingerprint() -> str:
    """sha256 of the scorer's sources (``tcbreplay/``, ``queries/``): was it edited meanwhile?"""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "tcbreplay").rglob("*.py"), *(ROOT / "queries").glob("*.sql")]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def git_head() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    return proc.stdout.strip() or "unknown"


def load1() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


def _s(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def verdict(ok: bool | str | None) -> str:
    if isinstance(ok, str):
        return ok
    return "—" if ok is None else ("PASS" if ok else "MISS")


def targets(
    benches: list[Bench], store: dict[str, Any] | None, imports: dict[str, Any]
) -> list[tuple[str, str, bool | str | None]]:
    """(target, measured, met) for each target of the issue that this run measured."""
    by = {b.samples: b for b in benches}
    rows: list[tuple[str, str, bool | str | None]] = []
    if 1_000_000 in by and by[1_000_000].score:
        w = by[1_000_000].score.wall
        rows.append((f"1M samples end to end ≤ {TARGET_1M_S:g} s", f"{w:.2f} s", w <= TARGET_1M_S))
    if 10_000 in by and by[10_000].score:
        w = by[10_000].score.wall
        rows.append(
            (
                f"10k samples ≤ {TARGET_10K_S:g} s incl. process start",
                f"{w:.2f} s",
                w <= TARGET_10K_S,
            )
        )
    for b in benches:
        if b.speedup is not None:
            note = " (reference extrapolated)" if b.reference_extrapolated_from else ""
            rows.append(
                (
                    f"≥ {TARGET_SPEEDUP:g}× faster than the reference loop, {label(b.samples)}",
                    f"{b.speedup:.1f}×{note}",
                    b.speedup >= TARGET_SPEEDUP,
                )
            )
        if b.speedup_with_dashboard is not None:
            rows.append(
                (
                    f"the same, as run by default: `score` and the reference loop both writing "
                    f"the dashboard file, {label(b.samples)}",
                    f"{b.speedup_with_dashboard:.1f}×",
                    b.speedup_with_dashboard >= TARGET_SPEEDUP,
                )
            )
    for b in benches:
        if b.score and b.floor and b.duckdb_floor:
            via_sql = b.score.wall / b.floor.wall
            via_duckdb = b.score.wall / b.duckdb_floor.wall
            met = (via_sql <= TARGET_FLOOR_RATIO, via_duckdb <= TARGET_FLOOR_RATIO)
            rows.append(
                (
                    f"≤ {TARGET_FLOOR_RATIO:g}× one bare read pass over every column of "
                    f"`messages`, {label(b.samples)}",
                    f"{via_sql:.1f}× the pass through `tcbreplay sql`; {via_duckdb:.1f}× the same "
                    "pass in plain DuckDB on the file",
                    f"{verdict(met[0])} (`sql`) / {verdict(met[1])} (DuckDB)",
                )
            )
    if 1_000_000 in by and by[1_000_000].score:
        gb = by[1_000_000].score.rss_mb / 1024
        rows.append(
            (f"peak RSS ≤ {TARGET_RSS_1M_GB:g} GB at 1M", f"{gb:.2f} GB", gb <= TARGET_RSS_1M_GB)
        )
    if {100_000, 1_000_000} <= by.keys() and by[1_000_000].score and by[100_000].score:
        r = by[1_000_000].score.wall / by[100_000].score.wall
        rows.append(
            (f"time(1M) / time(100k) ≤ {TARGET_SCALING:g}", f"{r:.1f}", r <= TARGET_SCALING)
        )
    if store:
        rows.append(
            (
                f"store at rest ≤ 1/5 of the same traces as JSONL ({label(store['samples'])})",
                f"1/{1 / store['ratio']:.1f} with the manifest; "
                f"1/{1 / store['data_ratio']:.1f} Parquet vs JSONL data files",
                store["ratio"] <= TARGET_STORE_RATIO,
            )
        )
    if imports:
        loaded = imports.get("loaded_after_score") or []
        rows.append(
            (
                "`score` imports no LangChain or LangGraph",
                "none loaded" if imports.get("clean") else f"loaded: {', '.join(loaded[:5])}",
                bool(imports.get("clean")),
            )
        )
    agree = [b for b in benches if b.agreement]
    if agree:
        ok = all(b.agreement["run_level"] and b.agreement["per_sample"] for b in agree)
        compared = ", ".join(
            f"{label(b.samples)}: "
            f"{b.agreement['samples_compared'] - b.agreement['samples_differing']:,}"
            f"/{b.agreement['samples_compared']:,} samples equal"
            for b in agree
        )
        rows.append(
            ("same spec numbers as the reference (run level ±1e-12, per sample)", compared, ok)
        )
    dashboards = [b for b in benches if b.dashboard_agreement]
    if dashboards:
        rows.append(
            (
                "same dashboard file samples as the reference (read back as JSON)",
                ", ".join(
                    f"{label(b.samples)}: "
                    f"{b.dashboard_agreement['samples'] - b.dashboard_agreement['differing']:,}"
                    f"/{b.dashboard_agreement['reference_samples']:,} samples equal"
                    for b in dashboards
                ),
                all(b.dashboard_agreement["same"] for b in dashboards),
            )
        )
    return rows


# the Bench fields written to results.json as Timing.to_dict() or in short
_MEASURES = (
    "score", "score_dashboard", "floor", "duckdb_floor", "reference", "reference_dashboard"
)  # fmt: skip


def render(
    benches: list[Bench],
    store: dict[str, Any] | None,
    imports: dict[str, Any],
    fmt: dict[str, Any],
    info: dict[str, Any],
    profiles: dict[int, list[dict[str, Any]]],
) -> str:
    lines = [
        SECTION,
        "",
        f"Measured {info['date']} on {info['machine']['nproc']} cores "
        f"({info['machine']['cpu'] or 'unknown CPU'}, {info['machine']['memory_gb']} GB RAM), "
        f"Python {info['machine']['python']}, "
        + ", ".join(f"{k} {v}" for k, v in info["machine"]["libraries"].items())
        + f"; load average {info['load_start']:.1f} at the start, "
        f"{info['load_end']:.1f} at the end "
        "(the machine is shared: wall times are the best of several runs, CPU times beside them).",
        "",
        f"Code: commit {info['git_head']} plus the working tree; sources of `tcbreplay/` and "
        f"`queries/` hashed {info['code_start']} at the start"
        + (
            f" and {info['code_end']} at the end: **they were edited during the run**, so "
            "the rows may measure different code."
            if info["code_end"] != info["code_start"]
            else ", unchanged at the end."
        ),
        "",
        f"Command: `{info['command']}`. Traces: `bench/generate.py` (seed {info['seed']}), "
        "Gemini-shaped LangChain messages written straight into the store; times are wall "
        "seconds of a fresh process, start included (best of 3; of 2 at 1M); peak RSS is the "
        "highest of those runs. `tcbreplay score` is timed with `--format json --dashboard "
        "none`, and beside it as users run it by default, writing the dashboard file too. "
        "The reference loop runs twice: scoring only, and again writing the dashboard file "
        "last, as the original evaluator did. "
        "The sources of `tcbreplay/` and `bench/` are byte-compiled first, as installing a "
        f"package does{info['bytecode_note']}.",
        "",
        "| samples | messages | load | `tcbreplay score` s | samples/s | CPU s | peak RSS | "
        "with the dashboard file (default) s | "
        "bare read pass s (`sql`; plain DuckDB) | score / read pass | "
        "store bytes/sample | manifest | generated in |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    scored = [b for b in benches if b.score]
    for b in scored:
        floor = (
            f"{b.floor.wall:.2f}; {b.duckdb_floor.wall:.2f}" if b.floor and b.duckdb_floor else "—"
        )
        ratio = f"{b.score.wall / b.floor.wall:.1f}×" if b.floor else "—"
        lines.append(
            f"| {_n(b.samples)} | {_n(b.messages)} | {b.load_before:.1f} | {b.score.wall:.2f} | "
            f"{_n(b.samples / b.score.wall)} | {b.score.cpu:.2f} | {b.score.rss_mb:,.0f} MB | "
            f"{_dashboard(b)} | {floor} | {ratio} | "
            f"{b.store_bytes / b.samples:,.0f} | {b.manifest_bytes / 1e3:,.1f} kB | "
            f"{_generated(b)} |"
        )
    lines += [
        "",
        "Against the reference loop on the same traces (its own times are in the notes below):",
        "",
        "| samples | `tcbreplay score` s | reference s | speed-up | with the dashboard file "
        "(default) s | reference with its dashboard file s | speed-up, both writing it |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in scored:
        ref = ref_dashboard = "—"
        if b.reference_s is not None and b.reference_with_dashboard_s is not None:
            ref, ref_dashboard = f"{b.reference_s:.1f}", f"{b.reference_with_dashboard_s:.1f}"
            if b.reference_extrapolated_from:
                ref += f" (extrapolated from {label(b.reference_extrapolated_from)})"
        dashboard = f"{b.score_dashboard.wall:.2f}" if b.score_dashboard else "—"
        lines.append(
            f"| {_n(b.samples)} | {b.score.wall:.2f} | {ref} | {_s(b.speedup, 1)}× | {dashboard} | "
            f"{ref_dashboard} | {_s(b.speedup_with_dashboard, 1)}× |"
        )
    lines += ["", "| target | measured | result |", "|---|---|---|"]
    for name, measured, ok in targets(benches, store, imports):
        lines.append(f"| {name} | {measured} | {verdict(ok)} |")
    if fmt:
        types = ", ".join(f"{k} {v:,}" for k, v in (fmt.get("types") or {}).items())
        lines.append(
            f"| harness: generated messages load into LangChain and serialize back byte for byte "
            f"({label(fmt['samples'])}) | {fmt.get('checked', 0):,} messages ({types}) | "
            f"{verdict(fmt.get('ok'))} |"
        )
    lines.append("")
    notes = []
    if store:
        notes.append(
            f"Store vs JSONL ({_n(store['samples'])} samples, `tcbreplay export`): run directory "
            f"{store['store_bytes'] / 1e6:,.1f} MB vs {store['jsonl_bytes'] / 1e6:,.1f} MB "
            "(each with the same manifest and dataset.jsonl); Parquet files "
            f"{store['store_data_bytes'] / 1e6:,.1f} MB "
            f"vs JSONL files {store['jsonl_data_bytes'] / 1e6:,.1f} MB."
        )
    if imports:
        cli = imports.get("tcbreplay._cli", {}).get("import_s")
        score = imports.get("tcbreplay._score.run", {}).get("import_s")
        notes.append(
            f"Import time (`python -X importtime`): `tcbreplay._cli` {_s(cli, 3)} s, "
            f"`tcbreplay._score.run` {_s(score, 3)} s; a bare `python -c pass` starts in "
            f"{imports['python_start_s']:.3f} s, `python -c 'import tcbreplay._cli'` in "
            f"{imports['import_cli_process_s']:.3f} s."
        )
    generated = [b for b in benches if b.generated_s]
    if generated:
        notes.append(
            "Generator (`bench/generate.py`: a worker process per core from 60k samples, "
            "this process writing): "
            + "; ".join(
                f"{label(b.samples)} in {b.generated_s:.1f} s wall "
                f"({b.samples / b.generated_s:,.0f} samples/s"
                + (f", {b.generated_cpu_s:.0f} CPU s" if b.generated_cpu_s is not None else "")
                + (
                    f", load {b.generated['load_average']:.1f}"
                    if b.generated.get("load_average") is not None
                    else ""
                )
                + (", reused from an earlier run" if b.generated.get("reused") else "")
                + ")"
                for b in generated
            )
            + "."
        )
    biggest = max(benches, key=lambda b: b.samples)
    notes.append(
        f"At {label(biggest.samples)} the run directory holds a "
        f"{biggest.manifest_bytes / 1e3:,.1f} kB manifest, the dataset in dataset.jsonl "
        f"({biggest.dataset_bytes / 1e6:,.1f} MB, {biggest.dataset_bytes / biggest.samples:,.0f} "
        f"bytes per sample, {biggest.dataset_bytes / biggest.store_bytes:.0%} of the run) and "
        "the two Parquet files."
    )
    refs = [b for b in benches if b.reference and not b.reference_extrapolated_from]
    if refs:
        notes.append(
            "Reference loop (`bench/reference.py`, one run of each kind): "
            + "; ".join(
                f"{label(b.samples)} {b.reference.wall:.1f} s wall, {b.reference.cpu:.1f} CPU s, "
                f"{b.reference.rss_mb:,.0f} MB peak RSS; writing the dashboard file too "
                + (
                    f"{b.reference_dashboard.wall:.1f} s wall (the file "
                    f"{_s(b.reference_dashboard_s, 1)} s of it), "
                    f"{b.reference_dashboard.rss_mb:,.0f} MB peak RSS"
                    if b.reference_dashboard
                    else "not measured"
                )
                for b in refs
            )
            + "."
        )
    if fmt and not fmt.get("ok"):
        notes.append("Format check problems: " + " / ".join(fmt.get("problems", [])[:3]))
    for b in benches:
        if b.dashboard_agreement and not b.dashboard_agreement["same"]:
            notes.append(
                f"Dashboard files differ at {label(b.samples)}: "
                f"{b.dashboard_agreement['samples']:,} samples against the reference's "
                f"{b.dashboard_agreement['reference_samples']:,}, "
                f"{b.dashboard_agreement['differing']:,} differing, e.g. "
                f"{json.dumps(b.dashboard_agreement['examples'][:1], ensure_ascii=False)[:500]}"
            )
        if b.agreement and not (b.agreement["run_level"] and b.agreement["per_sample"]):
            notes.append(
                f"Disagreement at {label(b.samples)}: {'; '.join(b.agreement['differences'])}; "
                f"{b.agreement['samples_differing']:,} samples differ, e.g. "
                f"{json.dumps(b.agreement['examples'][:2], default=str)}"
            )
    for samples, rows in profiles.items():
        if not rows:
            continue
        total = rows[0]["total_s"]
        notes.append(
            f"Hotspots of `tcbreplay score` at {label(samples)} (cProfile in one process, "
            f"the run scored in one part, {total:.1f} s profiled; time of each tcbreplay "
            "function outside other tcbreplay functions, and the call inside it that took most): "
            + "; ".join(
                f"`{r['function']}` {r['seconds']:.2f} s ({r['share']:.0%}; "
                f"`{r['mostly_in']}` {r['mostly_in_s']:.2f} s)"
                for r in rows[:5]
            )
        )
    lines += [f"- {n}" for n in notes]
    lines.append("")
    return "\n".join(lines)


def _generated(b: Bench) -> str:
    if b.generated_s is None:
        return "—"
    cpu = f" ({b.generated_cpu_s:.0f} CPU s)" if b.generated_cpu_s is not None else ""
    return f"{b.generated_s:.0f} s{cpu}"


def write_section(text: str, path: Path = BENCHMARKS_MD, section: str = SECTION) -> None:
    """Replace (or add) the section (by default "Scoring at scale"), keeping every other."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    start = old.find(section + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        nxt = old.find("\n## ", start + len(section))
        rest = "\n" + old[nxt + 1 :] if nxt >= 0 else ""  # a blank line before the next one
        new = old[:start] + text.rstrip("\n") + "\n" + rest
    path.write_text(new.rstrip("\n") + "\n")


# -- main ---------------------------------------------------------------------------------------


def byte_compile() -> str:
    """Write the ``.pyc`` files of this project's sources, so that the timed processes do not
    compile them on every start (they would where ``PYTHONDONTWRITEBYTECODE`` is set: Python
    then reads bytecode but never writes it), and check that the scoring kernels (the
    extension `make install` builds) load. Returns a note for the report."""
    import compileall

    for folder in ("tcbreplay", "bench"):
        compileall.compile_dir(ROOT / folder, quiet=1)
    check = "from tcbreplay._score.scorers.default import warm; warm()"
    subprocess.run([sys.executable, "-c", check], check=True, cwd=ROOT)
    note = ", and the scoring kernels are the C extension `make install` builds"
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return (
            " (this machine sets `PYTHONDONTWRITEBYTECODE`, so Python would not write them)" + note
        )
    return note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1m", help="comma-separated, e.g. 10k,100k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT, help="where generated runs are kept")
    parser.add_argument("--profile", action="store_true", help="cProfile score at 100k and above")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    args.out.mkdir(parents=True, exist_ok=True)
    info = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "seed": args.seed,
        "command": {"10k,100k,1m": "make bench", "10k,100k": "make bench-score"}.get(
            args.sizes, f"python -m bench.run --sizes {args.sizes}"
        ),
        "load_start": load1(),
        "bytecode_note": byte_compile(),
        "git_head": git_head(),
        "code_start": code_fingerprint(),
    }
    benches: list[Bench] = []
    profiles: dict[int, list[dict[str, Any]]] = {}
    for samples in sizes:
        benches.append(ensure_run(samples, args.seed, args.out))
    for i, bench in enumerate(benches):
        repeats = 2 if bench.samples >= 1_000_000 else 3
        bench.load_before = load1()
        print(f"{label(bench.samples)}: scoring ({repeats} runs)", flush=True)
        time_score(bench, repeats)
        print(f"  score {bench.score.wall:.2f} s; bare read pass", flush=True)
        time_floor(bench, repeats)
        print(f"  read pass {bench.floor.wall:.2f} s; reference scorer", flush=True)
        run_reference(bench, benches[i - 1] if i else None, args.out)
        if bench.reference_s:
            print(f"  reference {bench.reference_s:.1f} s", flush=True)
        if args.profile and bench.samples >= 100_000:
            print("  profiling score", flush=True)
            profiles[bench.samples] = profile(bench)
    candidates = [b for b in benches if b.samples <= 100_000] or benches[:1]
    store = jsonl_comparison(candidates[-1], args.out)
    imports = import_check(benches[0])
    fmt = format_check(benches[0])
    info["load_end"] = load1()
    info["code_end"] = code_fingerprint()
    text = render(benches, store, imports, fmt, info, profiles)
    print()
    print(text)
    results = {
        "info": info,
        "benches": [
            {
                **{k: v for k, v in asdict(b).items() if k not in _MEASURES},
                "store": str(b.store),
                "score": b.score.to_dict() if b.score else None,
                "score_with_dashboard": b.score_dashboard.to_dict() if b.score_dashboard else None,
                "floor": b.floor.to_dict() if b.floor else None,
                "duckdb_floor": b.duckdb_floor.to_dict() if b.duckdb_floor else None,
                "reference": {
                    "wall_s": b.reference.wall,
                    "cpu_s": b.reference.cpu,
                    "peak_rss_mb": b.reference.rss_mb,
                }
                if b.reference
                else None,
                "reference_with_dashboard": {
                    "wall_s": b.reference_dashboard.wall,
                    "cpu_s": b.reference_dashboard.cpu,
                    "peak_rss_mb": b.reference_dashboard.rss_mb,
                    "dashboard_s": b.reference_dashboard_s,
                }
                if b.reference_dashboard
                else None,
                "reference_s": b.reference_s,
                "reference_with_dashboard_s": b.reference_with_dashboard_s,
                "speedup": b.speedup,
                "speedup_with_dashboard": b.speedup_with_dashboard,
            }
            for b in benches
        ],
        "store_vs_jsonl": store,
        "imports": imports,
        "format_check": fmt,
        "profiles": {str(k): v for k, v in profiles.items()},
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    if not args.no_write:
        write_section(text)
        print(f"written to {BENCHMARKS_MD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
