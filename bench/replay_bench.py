"""``make bench-replay``: what replaying a run costs against recording it, and how fast
``serve`` answers.

Three measurements, with the offline ``sim`` model at zero latency (no network, no keys):

1. cost: the built-in benchmark cycled to 10,000 samples, recorded with ``tcbreplay record``
   and replayed unchanged with ``tcbreplay replay`` (same workers), each a subprocess timed
   from start to exit, in alternation (record, replay, record, replay: the machine is
   shared, so each pair sees about the same load); the ratio of the best replay to the best
   recording (target ≤ 1.2);
2. memory: the replays' resident memory, sampled from ``/proc`` at 10%, 50% and 90% of
   their samples (journal lines) and its peak, beside the recordings' (target: flat, the
   growth from 10% to 90% under a fifth of the 10% figure);
3. serve: ``tcbreplay serve`` of the recorded run answering non-streamed OpenAI requests
   (the recorded requests of every turn of its first 500 samples, cycled) from a load
   generator on loopback: ``wrk`` (Debian's package) when installed, else a Python client
   of keep-alive connections in two processes (target ≥ 2,000 requests/s).

The machine's load average is noted beside each figure. Prints a table and writes it to
BENCHMARKS.md under "Replay".

    python -m bench.replay_bench [--samples N] [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.record_bench import (
    BENCHMARKS_MD,
    ROOT,
    _dataset,
    _journal_lines,
    _record_cmd,
    _rss_mb,
    _verdict,
)

SECTION = "## Replay"
WORKERS = 16
SERVE_SAMPLES = 500


def _load() -> float:
    return os.getloadavg()[0]


def _timed(cmd: list[str], run_dir: Path, n: int) -> dict[str, Any]:
    """Run a recording or replay subprocess: its wall time, and its RSS at 10%, 50% and 90%
    of ``n`` samples (journal lines) and peak."""
    load = _load()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    marks: dict[float, float | None] = {0.1: None, 0.5: None, 0.9: None}
    peak = 0.0
    while proc.poll() is None:
        rss = _rss_mb(proc.pid)
        if rss is not None:
            peak = max(peak, rss)
            done = _journal_lines(run_dir) / n
            for mark in marks:
                if marks[mark] is None and done >= mark:
                    marks[mark] = rss
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[2:5])} failed: {proc.stderr.read().decode()[-2000:]}")
    return {
        "wall_s": wall,
        "rss_10pct_mb": marks[0.1],
        "rss_50pct_mb": marks[0.5],
        "rss_90pct_mb": marks[0.9],
        "peak_mb": peak,
        "load": (load + _load()) / 2,
    }


def _replay_cmd(store: Path, parent: str, run_id: str, workers: int) -> list[str]:
    return [sys.executable, "-m", "tcbreplay", "replay", parent, "--run-id", run_id, "--store",
            str(store), "--workers", str(workers), "--quiet", "--format", "json"]  # fmt: skip


def cost(tmp: Path, n: int, rounds: int) -> dict[str, Any]:
    """Record and replay ``n`` samples ``rounds`` times in alternation."""
    dataset = _dataset(tmp / "replay.json", n)
    store = tmp / "store"
    records, replays = [], []
    for k in range(rounds):
        run = f"rec{k}"
        print(f"  round {k + 1}: record ...", flush=True)
        cmd = _record_cmd(dataset, store, run, "sim:seed=1", WORKERS)
        records.append(_timed(cmd, store / run, n))
        print(f"  round {k + 1}: replay ...", flush=True)
        replayed = f"rep{k}"
        replays.append(_timed(_replay_cmd(store, run, replayed, WORKERS), store / replayed, n))
        manifest = json.loads((store / replayed / "manifest.json").read_text())
        block = manifest["replay"]
        if block["diverged_samples"] or block["live_calls"] or manifest["totals"]["ok"] != n:
            raise SystemExit(f"replay {replayed} was not clean: {block}")
        replays[-1]["turns_served"] = block["turns_served"]
    best_record = min(r["wall_s"] for r in records)
    best_replay = min(r["wall_s"] for r in replays)
    return {
        "samples": n,
        "workers": WORKERS,
        "records": records,
        "replays": replays,
        "ratio": best_replay / best_record,
        "store": str(store),
        "run": "rec0",
    }


def _requests(store: Path, run_id: str, limit: int) -> list[bytes]:
    """The OpenAI request of every recorded turn of the run's first ``limit`` samples."""
    import pyarrow.parquet as pq

    from tcbreplay._importers.openai import to_openai

    manifest = json.loads((store / run_id / "manifest.json").read_text())
    tools = [{"type": "function", "function": s} for s in manifest["tools"]["specs"]]
    system = {"role": "system", "content": manifest["system_prompt"]["text"]}
    table = pq.read_table(store / run_id / "messages.parquet",
                          columns=["sample_index", "position", "message"])  # fmt: skip
    table = table.filter(table["sample_index"].to_numpy() < limit)
    table = table.sort_by([("sample_index", "ascending"), ("position", "ascending")])
    conversations: dict[int, list[dict[str, Any]]] = {}
    for index, text in zip(table["sample_index"].to_pylist(), table["message"].to_pylist(),
                           strict=True):  # fmt: skip
        conversations.setdefault(index, []).append(json.loads(text))
    bodies = []
    for messages in conversations.values():
        sent = [system]
        for message in to_openai(messages):
            if message["role"] == "assistant":
                body = {"model": "sim", "messages": sent, "tools": tools}
                bodies.append(json.dumps(body).encode())
            sent = [*sent, message]
    return bodies


def _wrk_script(bodies: list[bytes], path: Path) -> Path:
    """A wrk script that sends the bodies in turn."""

    def lua(text: bytes) -> str:
        return '"' + text.decode().replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["bodies = {", *(f"  {lua(b)}," for b in bodies), "}", "i = 0",
             'wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"',
             "request = function()", "  i = i % #bodies + 1",
             '  return wrk.format(nil, "/v1/chat/completions", nil, bodies[i])', "end"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def _python_load(host: str, port: int, bodies: list[bytes], seconds: float) -> tuple[int, int]:
    """Keep-alive requests for ``seconds`` from two processes: (answered, non-2xx)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as pool:
        parts = [pool.submit(_client, host, port, bodies[k::2], seconds) for k in range(2)]
        done = [p.result() for p in parts]
    return sum(d[0] for d in done), sum(d[1] for d in done)


def _client(host: str, port: int, bodies: list[bytes], seconds: float) -> tuple[int, int]:
    import http.client

    conn = http.client.HTTPConnection(host, port)
    headers = {"Content-Type": "application/json"}
    answered = bad = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.request("POST", "/v1/chat/completions", bodies[answered % len(bodies)], headers)
        response = conn.getresponse()
        response.read()
        answered += 1
        bad += response.status >= 300
    return answered, bad


def serve(tmp: Path, store: str, run_id: str, seconds: float) -> dict[str, Any]:
    """Requests per second ``serve`` answers (see the module)."""
    bodies = _requests(Path(store), run_id, SERVE_SAMPLES)
    cmd = [sys.executable, "-m", "tcbreplay", "serve", run_id, "--port", "0", "--store", store]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        match = re.search(r" at http://([\d.]+):(\d+)", line)
        if not match:
            raise SystemExit(f"serve did not start: {line}")
        host, port = match.group(1), int(match.group(2))
        load = _load()
        wrk = shutil.which("wrk")
        if wrk:
            script = _wrk_script(bodies, tmp / "requests.lua")
            url = f"http://{host}:{port}"
            subprocess.run(
                [wrk, "-t1", "-c8", "-d3s", "-s", str(script), url], capture_output=True, check=True
            )  # fmt: skip  (warm-up)
            out = subprocess.run(
                [wrk, "-t2", "-c16", f"-d{seconds:g}s", "-s", str(script), url],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
            bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
            errors = int(bad.group(1)) if bad else 0
            client = "wrk 2 threads, 16 connections"
        else:
            _python_load(host, port, bodies, 2)  # warm-up
            answered, errors = _python_load(host, port, bodies, seconds)
            rate = answered / seconds
            client = "Python http.client, 2 processes"
        return {
            "requests_per_s": rate,
            "non_2xx": errors,
            "distinct_requests": len(bodies),
            "client": client,
            "seconds": seconds,
            "load": (load + _load()) / 2,
        }
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def render(results: dict[str, Any], quick: bool, load_start: float) -> str:
    c, s = results["cost"], results["serve"]
    rec = min(c["records"], key=lambda r: r["wall_s"])
    rep = min(c["replays"], key=lambda r: r["wall_s"])
    growth = (rep["rss_90pct_mb"] or 0) - (rep["rss_10pct_mb"] or 0)
    flat = growth < 0.2 * (rep["rss_10pct_mb"] or 1)
    rounds = "; ".join(
        f"{a['wall_s']:.1f} s / {b['wall_s']:.1f} s (load {a['load']:.1f}, {b['load']:.1f})"
        for a, b in zip(c["records"], c["replays"], strict=True)
    )
    lines = [
        SECTION,
        "",
        "`make bench-replay` (`python -m bench.replay_bench"
        + (" --quick" if quick else "")
        + f"`), {dt.date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {load_start:.1f} at the start, "
        f"{_load():.1f} at the end (the machine is shared: each figure has the load average "
        "beside it).",
        "",
        "| measurement | target | measured | verdict |",
        "|---|---|---|---|",
        f"| replay against record, {c['samples']:,} samples of the built-in benchmark, `sim` at "
        f"zero latency, {c['workers']} workers, best of {len(c['records'])} in alternation "
        f"| ≤ 1.2× | {c['ratio']:.2f}× (record {rec['wall_s']:.1f} s, load {rec['load']:.1f}; "
        f"replay {rep['wall_s']:.1f} s, load {rep['load']:.1f}; {rep['turns_served']:,} turns "
        f"served, 0 diverged) | {_verdict(c['ratio'] <= 1.2)} |",
        f"| RSS while replaying {c['samples']:,} samples | flat | "
        f"{rep['rss_10pct_mb']:.0f} MB at 10%, {rep['rss_50pct_mb']:.0f} MB at 50%, "
        f"{rep['rss_90pct_mb']:.0f} MB at 90%; peak {rep['peak_mb']:.0f} MB (recording: "
        f"{rec['rss_10pct_mb']:.0f}, {rec['rss_90pct_mb']:.0f}, peak {rec['peak_mb']:.0f} MB) "
        f"| {_verdict(flat)} |",
        f"| `serve` answering non-streamed OpenAI requests on loopback ({s['client']}; "
        f"{s['distinct_requests']:,} recorded requests cycled, {s['seconds']:g} s) "
        f"| ≥ 2,000/s | {s['requests_per_s']:,.0f}/s, {s['non_2xx']} not 2xx (load "
        f"{s['load']:.1f}) | {_verdict(s['requests_per_s'] >= 2000 and not s['non_2xx'])} |",
        "",
        f"Each round, record / replay wall time: {rounds}.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace this benchmark's section of BENCHMARKS.md, keeping the others."""
    old = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    start = old.find(SECTION + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + ("" if end < 0 else old[end + 1 :])
    BENCHMARKS_MD.write_text(new.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1,000 samples, one round")
    args = parser.parse_args()
    n, rounds = (1000, 1) if args.quick else (args.samples, args.rounds)
    load_start = _load()
    tmp = Path(tempfile.mkdtemp(prefix="tcb-replay-bench-"))
    try:
        print("record and replay ...", flush=True)
        results: dict[str, Any] = {"cost": cost(tmp, n, rounds)}
        print("serve ...", flush=True)
        results["serve"] = serve(tmp, results["cost"]["store"], results["cost"]["run"],
                                 5 if args.quick else 10)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(results, args.quick, load_start)
    print(text)
    print(json.dumps(results, indent=2))
    if not args.quick:
        write_section(text)


if __name__ == "__main__":
    main()
