"""``make bench-record``: how fast, how lean and how crash-proof ``tcbreplay record`` is.

Four measurements with the offline ``sim`` model (no network, no keys):

1. throughput with ``sim:latency=0.2`` and 64 workers, as a fraction of the ideal
   (every worker always waiting on a model turn: Σ model turns × latency / workers),
   with the runner's default number of processes (one per 32 workers, at most one per core);
2. the record path's own cost per sample with zero latency, on samples of exactly
   3 model turns (two sequential tool calls, then the answer);
3. resident memory while recording 10,000 samples, sampled from ``/proc`` in a
   subprocess: early, middle and late in the run, and the peak (the final fold of
   the journal into Parquet included);
4. ``kill -9`` of a recording subprocess at 20 random moments, each followed by the
   same command again (alternately in one process and with ``--processes 2``, where the
   kill hits the parent, the only writer), then a check that every sample is stored
   exactly once and that the scores equal those of an uninterrupted run with the same seed.

Prints a table and writes it to BENCHMARKS.md under "Recording".

    python -m bench.record_bench [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
SECTION = "## Recording"


def _dataset(path: Path, n: int, calls: int | None = None) -> Path:
    """``n`` samples cycled from the built-in dataset (only those with ``calls`` gold calls)."""
    from tcbreplay._inputs.benchmarks import BENCHMARKS

    base = json.loads(BENCHMARKS["tool-call"].dataset.read_text())
    if calls is not None:
        base = [e for e in base if len(e["target"]) == calls]
    entries = [{**base[i % len(base)], "id": f"s{i}"} for i in range(n)]
    path.write_text(json.dumps(entries))
    return path


def _inputs(dataset: Path):
    from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs

    builtin = BENCHMARKS["tool-call"]
    return load_inputs(None, dataset, builtin.tools, builtin.system_prompt)


def throughput(tmp: Path, n: int, workers: int = 64, latency: float = 0.2) -> dict[str, Any]:
    """Samples per second against the ideal: workers ÷ per-sample latency.

    Every sample has exactly 3 model turns (two sequential tool calls, then the answer),
    so the per-sample latency is 3 × ``latency`` and the ideal is well defined.
    """
    import pyarrow.parquet as pq

    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    inputs = _inputs(_dataset(tmp / "tp.json", n, calls=2))
    spec = parse_model(f"sim:latency={latency},error_rate=0,parallel=0")
    busy0, own0 = _busy_cpu_s(), _own_cpu_s()
    t0 = time.perf_counter()
    summary = record_run(inputs, spec, Store(tmp / "tp"), run_id="tp",
                         options=RecordOptions(workers=workers))  # fmt: skip
    wall = time.perf_counter() - t0
    own = _own_cpu_s() - own0
    busy = None if busy0 is None else _busy_cpu_s() - busy0  # type: ignore[operator]
    messages = pq.read_table(Path(summary.run_dir) / "messages.parquet", columns=["type"])
    turns = sum(1 for t in messages["type"].to_pylist() if t == "ai")
    ideal = turns * latency / workers
    return {
        "samples": n,
        "workers": workers,
        "processes": summary.processes,
        "model_turns": turns,
        "wall_s": wall,
        "ideal_s": ideal,
        "samples_per_s": n / wall,
        "fraction": ideal / wall,
        "own_cpu_s": own,
        # CPU the rest of the machine used meanwhile (the machine is shared)
        "others_cpu_s": None if busy is None else max(0.0, busy - own),
    }


def _own_cpu_s() -> float:
    """CPU seconds of this process and its finished children (the recording's processes)."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _busy_cpu_s() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``), if known."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def overhead(tmp: Path, n: int) -> dict[str, Any]:
    """Wall time per 3-turn sample with a zero-latency model, one and eight workers."""
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    inputs = _inputs(_dataset(tmp / "oh.json", n, calls=2))
    spec = parse_model("sim:error_rate=0,parallel=0")
    record_run(
        _inputs(_dataset(tmp / "warm.json", 20, calls=2)), spec, Store(tmp / "warm"), run_id="warm"
    )  # fmt: skip  (imports and first-call costs out of the way)
    out = {"samples": n}
    for workers in (1, 8):
        t0 = time.perf_counter()
        record_run(inputs, spec, Store(tmp / f"oh{workers}"), run_id="oh",
                   options=RecordOptions(workers=workers))  # fmt: skip
        out[f"ms_per_sample_w{workers}"] = (time.perf_counter() - t0) / n * 1000
    return out


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _journal_lines(run_dir: Path) -> int:
    path = run_dir / "journal.jsonl"
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def _record_cmd(
    dataset: Path, store: Path, run_id: str, model: str, workers: int, processes: int = 1
) -> list[str]:
    from tcbreplay._inputs.benchmarks import BENCHMARKS

    builtin = BENCHMARKS["tool-call"]
    return [sys.executable, "-m", "tcbreplay", "record", "--dataset", str(dataset), "--tools",
            builtin.tools, "--system-prompt", str(builtin.system_prompt), "--model", model,
            "--run-id", run_id, "--store", str(store), "--workers", str(workers),
            "--processes", str(processes), "--quiet"]  # fmt: skip


def memory(tmp: Path, n: int) -> dict[str, Any]:
    """RSS of a recording subprocess at 10%, 50% and 90% of the samples, and its peak."""
    dataset = _dataset(tmp / "mem.json", n)
    store = tmp / "mem"
    proc = subprocess.Popen(_record_cmd(dataset, store, "mem", "sim:seed=1", 16), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    marks = {0.1: None, 0.5: None, 0.9: None}
    peak = 0.0
    while proc.poll() is None:
        rss = _rss_mb(proc.pid)
        if rss is not None:
            peak = max(peak, rss)
            done = _journal_lines(store / "mem") / n
            for mark in marks:
                if marks[mark] is None and done >= mark:
                    marks[mark] = rss
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"memory run failed: {proc.stderr.read().decode()[-2000:]}")
    return {
        "samples": n,
        "rss_10pct_mb": marks[0.1],
        "rss_50pct_mb": marks[0.5],
        "rss_90pct_mb": marks[0.9],
        "peak_mb": peak,
        "growth_10_to_90_mb": (marks[0.9] or 0) - (marks[0.1] or 0),
    }


def kill_resume(tmp: Path, n: int, kills: int, seed: int = 0) -> dict[str, Any]:
    """kill -9 at random moments, resume each time, then compare with an uninterrupted run."""
    import pyarrow.parquet as pq

    from tcbreplay._score.run import score_run
    from tcbreplay._store.runs import Store

    rng = random.Random(seed)
    dataset = _dataset(tmp / "kill.json", n)
    model = "sim:seed=3,latency=0.01,error_rate=0.3"
    store = tmp / "kill"
    progress = []
    hits = 0  # kills that found the recording still running
    for i in range(kills):
        # every other attempt in two processes: the kill hits the parent, the only writer
        cmd = _record_cmd(dataset, store, "k", model, 8, processes=1 + i % 2)
        before = _journal_lines(store / "k")
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        # a random moment while samples are being written: once this process has stored one,
        # up to 1 s later (start-up takes seconds, so a fixed delay could hit it instead; at
        # most 1 s so that all the kills come before the run is complete)
        while _journal_lines(store / "k") <= before and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 1.0))
        hits += proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        progress.append(_journal_lines(store / "k"))
    cmd = _record_cmd(dataset, store, "k", model, 8)
    final = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if final.returncode != 0:
        raise SystemExit(f"final resume failed: {final.stderr[-2000:]}")
    rows = pq.read_table(store / "k" / "samples.parquet", columns=["sample_id"]).to_pylist()
    ids = [r["sample_id"] for r in rows]
    expected = {f"s{i}" for i in range(n)}
    clean = subprocess.run(_record_cmd(dataset, tmp / "clean", "k", model, 8), cwd=ROOT,
                           capture_output=True, text=True)  # fmt: skip
    if clean.returncode != 0:
        raise SystemExit(f"uninterrupted run failed: {clean.stderr[-2000:]}")

    def scores(root: Path) -> list[tuple]:
        frame = score_run(Store(root), "k", write=False).scores
        return sorted(frame.drop("run_id", "scoring").rows())

    return {
        "samples": n,
        "kills": kills,
        "journal_lines_at_kills": progress,
        "kills_while_running": hits,
        "lost": len(expected - set(ids)),
        "duplicated": len(ids) - len(set(ids)),
        "unknown": len(set(ids) - expected),
        "scores_equal_uninterrupted": scores(store) == scores(tmp / "clean"),
    }


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def render(results: dict[str, Any], quick: bool, load_start: float) -> str:
    tp, oh, mem, kill = (results[k] for k in ("throughput", "overhead", "memory", "kill"))
    # every kill must hit a running recording, or the measurement tested fewer moments
    kill_ok = (
        kill["lost"] == kill["duplicated"] == 0 and kill["kills_while_running"] == kill["kills"]
    )
    load = os.getloadavg()[0]
    others = "" if tp["others_cpu_s"] is None else f", other processes {tp['others_cpu_s']:.1f}"
    lines = [
        SECTION,
        "",
        "`make bench-record` (`python -m bench.record_bench`"
        + (" --quick" if quick else "")
        + f"), {dt.date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {load_start:.1f} at the start, "
        f"{load:.1f} at the end.",
        "",
        "| measurement | target | measured | verdict |",
        "|---|---|---|---|",
        f"| throughput, `sim:latency=0.2`, {tp['workers']} workers ({tp['processes']} processes, "
        f"the default here), {tp['samples']} samples ({tp['model_turns']} model turns) "
        f"| ≥ 0.85 of ideal | {tp['fraction']:.3f} of ideal "
        f"({tp['samples_per_s']:.1f} samples/s; ideal {tp['ideal_s']:.1f} s, took "
        f"{tp['wall_s']:.1f} s; {tp['own_cpu_s']:.1f} CPU s{others}) "
        f"| {_verdict(tp['fraction'] >= 0.85)} |",
        f"| record-path cost per 3-turn sample, zero latency, {oh['samples']} samples | ≤ 10 ms "
        f"| {oh['ms_per_sample_w1']:.1f} ms (1 worker), {oh['ms_per_sample_w8']:.1f} ms "
        f"(8 workers) | {_verdict(min(oh['ms_per_sample_w1'], oh['ms_per_sample_w8']) <= 10)} |",
        f"| RSS while recording {mem['samples']:,} samples | flat | "
        f"{mem['rss_10pct_mb']:.0f} MB at 10%, {mem['rss_50pct_mb']:.0f} MB at 50%, "
        f"{mem['rss_90pct_mb']:.0f} MB at 90%; peak {mem['peak_mb']:.0f} MB (final fold) "
        f"| {_verdict(mem['growth_10_to_90_mb'] < 0.2 * mem['rss_10pct_mb'])} |",
        f"| kill -9 at {kill['kills']} random moments (alternately 1 and 2 processes), then "
        f"resume ({kill['samples']} samples) "
        f"| 0 lost, 0 duplicated | {kill['lost']} lost, {kill['duplicated']} duplicated; scores "
        f"{'equal' if kill['scores_equal_uninterrupted'] else 'DIFFER from'} the uninterrupted "
        f"run's | {_verdict(kill_ok)} |",
        "",
        f"{kill['kills_while_running']} of the {kill['kills']} kills found the recording still "
        "running. Samples finished at each kill (journal lines; 0 once the run is complete "
        "and folded): " + ", ".join(map(str, kill["journal_lines_at_kills"])) + ".",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace this benchmark's section of BENCHMARKS.md, keeping the others."""
    old = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + ("" if end < 0 else old[end + 1 :])
    BENCHMARKS_MD.write_text(new.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    args = parser.parse_args()
    quick = args.quick
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="tcb-record-bench-"))
    try:
        results = {}
        print("throughput ...", flush=True)
        results["throughput"] = throughput(tmp, 256 if quick else 2000)
        print("overhead ...", flush=True)
        results["overhead"] = overhead(tmp, 200 if quick else 1000)
        print("memory ...", flush=True)
        results["memory"] = memory(tmp, 1000 if quick else 10_000)
        print("kill -9 and resume ...", flush=True)
        results["kill"] = kill_resume(tmp, 300 if quick else 2000, 3 if quick else 20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(results, quick, load_start)
    print(text)
    print(json.dumps(results, indent=2))
    if not quick:
        write_section(text)


if __name__ == "__main__":
    main()
