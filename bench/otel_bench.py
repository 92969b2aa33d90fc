"""``make bench-otel``: how fast OpenTelemetry traces come into tcbreplay.

1. ``tcbreplay import`` of 100,000 OTLP/JSON spans (20,001 agent runs): the three traces of
   ``tests/data/otel/openai_v2_latest.otlp.jsonl`` (openai-v2's spans, 5 a run on average)
   written again 6,667 times with fresh ids, as JSON Lines of requests of 100 traces (as the
   collector's file exporter writes them); wall time and the process's peak memory (the
   issue's bar: 15 s and 1 GB).
2. ``tcbreplay collect`` fed as many runs as protobuf requests of about 500 spans (the
   OTLP/HTTP exporter's batch; the spans of ``openai_v2_latest.otlp.pb``, the body the
   exporter posted, copied with fresh ids) by a client process over two keep-alive
   connections, as fast as it acknowledges them: spans received a second, the receiver's
   CPU time, and its resident memory sampled from ``/proc`` (early, middle, late; the bar:
   5,000 spans a second, memory flat), then Ctrl-C and the time it takes to finish the run.

The machine's load is printed beside the figures: on a shared machine they move with it.
Prints a table and writes it to BENCHMARKS.md under "OpenTelemetry".

    python -m bench.otel_bench [--runs N] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
SECTION = "## OpenTelemetry"
FIXTURE = ROOT / "tests" / "data" / "otel" / "openai_v2_latest.otlp.jsonl"
OUT = ROOT / "bench" / "out" / "otel"


def _template() -> list[list[dict]]:
    """The fixture's spans, grouped by trace."""
    traces: dict[str, list[dict]] = {}
    for line in FIXTURE.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    traces.setdefault(span["traceId"], []).append(span)
    return list(traces.values())


def _fresh(trace: list[dict]) -> list[dict]:
    """A copy of a trace's spans with new trace and span ids (parents kept in the trace)."""
    trace_id = secrets.token_hex(16)
    ids = {s["spanId"]: secrets.token_hex(8) for s in trace}
    out = []
    for span in trace:
        copy = {**span, "traceId": trace_id, "spanId": ids[span["spanId"]]}
        if span.get("parentSpanId"):
            copy["parentSpanId"] = ids.get(span["parentSpanId"], span["parentSpanId"])
        out.append(copy)
    return out


def _request(spans: list[dict]) -> dict:
    resource_ = {"attributes": [{"key": "service.name", "value": {"stringValue": "bench"}}]}
    scope = {"scope": {"name": "opentelemetry.util.genai.handler"}, "spans": spans}
    return {"resourceSpans": [{"resource": resource_, "scopeSpans": [scope]}]}


def write_spans(path: Path, runs: int) -> tuple[int, int]:
    """``runs`` agent runs as JSON Lines of requests of 100 traces; (runs, spans)."""
    template = _template()
    count = spans = 0
    with path.open("w") as f:
        batch: list[dict] = []
        while count < runs:
            for trace in template:
                batch.extend(_fresh(trace))
                count += 1
                spans += len(trace)
                if count % 100 == 0 or count == runs:
                    f.write(json.dumps(_request(batch), separators=(",", ":")) + "\n")
                    batch = []
                if count == runs:
                    break
    return count, spans


def _tcbreplay(*args: str) -> list[str]:
    return [sys.executable, "-m", "tcbreplay", *args]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def calibrate() -> float:
    """Seconds of CPU that json.loads of 100 MB of JSON takes here now: a yardstick for the
    machine's speed under its load (a few tenths of a second on an idle desktop core)."""
    text = json.dumps([{"a": "x" * 50, "b": [1, 2, 3], "c": {"d": "hello world"}}] * 1_000_000)
    t0 = time.process_time()
    json.loads(text)
    return time.process_time() - t0


def measure_import(path: Path, store: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu = _cpu()
    t0 = time.perf_counter()
    done = subprocess.run(
        _tcbreplay("--store", str(store), "import", "--traces", str(path), "--run-id", "big"),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"import failed: {done.stderr}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"seconds": seconds, "cpu": _cpu() - cpu, "peak_mb": max(peak, before) / 1024,
            "out": done.stdout.strip()}  # fmt: skip


def _proto_bodies(runs: int, spans_per_request: int = 500) -> list[tuple[bytes, int]]:
    """``runs`` agent runs as protobuf export requests of about ``spans_per_request`` spans:
    the spans of ``openai_v2_latest.otlp.pb`` (the body the OTLP/HTTP exporter posted for
    the same three runs) copied with fresh ids."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    posted = ExportTraceServiceRequest.FromString(FIXTURE.with_suffix(".pb").read_bytes())
    traces: dict[bytes, list] = {}
    for rs in posted.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                traces.setdefault(span.trace_id, []).append(span)
    template = list(traces.values())
    bodies: list[tuple[bytes, int]] = []
    request = ExportTraceServiceRequest()
    scope = None
    count = 0
    while count < runs:
        for trace in template:
            if scope is None:
                rs = request.resource_spans.add()
                rs.resource.CopyFrom(posted.resource_spans[0].resource)
                scope = rs.scope_spans.add()
                scope.scope.CopyFrom(posted.resource_spans[0].scope_spans[0].scope)
            trace_id = secrets.token_bytes(16)
            ids = {s.span_id: secrets.token_bytes(8) for s in trace}
            for span in trace:
                copy = scope.spans.add()
                copy.CopyFrom(span)
                copy.trace_id = trace_id
                copy.span_id = ids[span.span_id]
                if span.parent_span_id:
                    copy.parent_span_id = ids.get(span.parent_span_id, span.parent_span_id)
            count += 1
            if len(scope.spans) >= spans_per_request or count == runs:
                bodies.append((request.SerializeToString(), len(scope.spans)))
                request, scope = ExportTraceServiceRequest(), None
            if count == runs:
                break
    return bodies


_CLIENT = r"""
import http.client, pickle, sys, threading, time
bodies = pickle.load(open(sys.argv[1], "rb"))
host, port, workers = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def send(share):
    c = http.client.HTTPConnection(host, port, timeout=60)
    for body, _ in share:
        c.request("POST", "/v1/traces", body=body,
                  headers={"Content-Type": "application/x-protobuf"})
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
t0 = time.perf_counter()
threads = [threading.Thread(target=send, args=(bodies[k::workers],)) for k in range(workers)]
for t in threads: t.start()
for t in threads: t.join()
print(time.perf_counter() - t0)
"""


def _server_cpu(pid: int) -> float:
    """CPU seconds the process has used so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def measure_collect(runs: int, store: Path) -> dict:
    import pickle

    bodies = _proto_bodies(runs)
    spans = sum(n for _, n in bodies)
    payload = OUT / "bodies.pickle"
    payload.write_bytes(pickle.dumps(bodies))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        _tcbreplay("--store", str(store), "collect", "--run-id", "live", "--port", "0"),
        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert server.stderr is not None
    line = server.stderr.readline()
    while "listening on" not in line:
        if not line:
            raise SystemExit("collect ended before it listened")
        line = server.stderr.readline()
    host, port = line.split("listening on http://")[1].split()[0].split(":")
    rss: list[tuple[float, float]] = []
    client = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, str(payload), host, port, "2"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    t0 = time.perf_counter()
    while client.poll() is None:
        mb = _rss_mb(server.pid)
        if mb is not None:
            rss.append((time.perf_counter() - t0, mb))
        time.sleep(0.5)
    assert client.stdout is not None
    sent_s = float(client.stdout.read().strip())
    if client.returncode != 0:
        raise SystemExit("the client failed")
    server_cpu = _server_cpu(server.pid)
    t1 = time.perf_counter()
    server.send_signal(signal.SIGINT)
    out, _ = server.communicate(timeout=600)
    finish_s = time.perf_counter() - t1
    third = max(1, len(rss) // 3)
    return {
        "spans": spans,
        "server_cpu": server_cpu,
        "requests": len(bodies),
        "seconds": sent_s,
        "spans_per_s": spans / sent_s,
        "rss_early": rss[min(1, len(rss) - 1)][1] if rss else None,
        "rss_mid": rss[len(rss) // 2][1] if rss else None,
        "rss_late": rss[-1][1] if rss else None,
        "rss_peak": max(mb for _, mb in rss) if rss else None,
        "rss_first_third": max(mb for _, mb in rss[:third]) if rss else None,
        "finish_s": finish_s,
        "out": out.strip(),
    }


def report(
    runs: int, spans: int, imp: dict, col: dict, load: tuple[float, ...], yardstick: float
) -> str:
    today = dt.date.today().isoformat()
    lines = [
        SECTION,
        "",
        f"`make bench-otel` ({today}, {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} when it started: the machine is shared, and the figures move with "
        "it). The spans are openai-v2's (`tests/data/otel/openai_v2_latest.otlp.jsonl`, "
        f"5 a run on average) written again with fresh ids: {runs:,} agent runs, "
        f"{spans:,} spans.",
        "",
        "| measure | figure | bar |",
        "|---|---:|---:|",
        f"| `import` of {spans:,} OTLP/JSON spans, wall time (CPU time) | {imp['seconds']:.1f} s "
        f"({imp['cpu']:.1f} s) | 15 s |",
        f"| `import`, peak resident memory | {imp['peak_mb']:.0f} MB | 1 GB |",
        f"| `collect`, protobuf requests of ~500 spans, 2 client connections | "
        f"{col['spans_per_s']:,.0f} spans/s ({col['spans']:,} in {col['seconds']:.1f} s; the "
        f"receiver's CPU {col['server_cpu']:.1f} s: {col['spans'] / col['server_cpu']:,.0f} "
        "spans per CPU second) | 5,000 spans/s |",
        f"| `collect`, resident memory early / middle / late (peak) | "
        f"{col['rss_early']:.0f} / {col['rss_mid']:.0f} / {col['rss_late']:.0f} MB "
        f"({col['rss_peak']:.0f}) | flat |",
        f"| `collect`, Ctrl-C to a finished run ({runs:,} samples folded) | "
        f"{col['finish_s']:.1f} s | — |",
        f"| yardstick: `json.loads` of 100 MB, CPU time | {yardstick:.2f} s | — |",
        "",
        f"`import`: {imp['out']}. `collect`: {col['out']}. The client runs on the same two "
        "cores as the receiver. CPU time is the process's own (user and system); under load "
        "the wall time is longer, and the yardstick (a few tenths of a second on an idle "
        "core) shows how much slower the machine was.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace the section of BENCHMARKS.md (or add it at the end)."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = old.find(SECTION + "\n")
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + text, encoding="utf-8")
        return
    end = old.find("\n## ", start + len(SECTION))
    rest = "" if end < 0 else old[end:]
    path.write_text(old[:start] + text.rstrip("\n") + "\n" + rest, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_001)
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    yardstick = calibrate()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    path = OUT / "spans.otlp.jsonl"
    runs, spans = write_spans(path, args.runs)
    print(f"{runs} runs, {spans} spans -> {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    imp = measure_import(path, OUT / "store-import")
    print(f"import: {imp['seconds']:.1f} s, peak {imp['peak_mb']:.0f} MB")
    col = measure_collect(runs, OUT / "store-collect")
    print(f"collect: {col['spans_per_s']:.0f} spans/s, rss {col['rss_early']:.0f} / "
          f"{col['rss_mid']:.0f} / {col['rss_late']:.0f} MB")  # fmt: skip
    text = report(runs, spans, imp, col, load, yardstick)
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
