"""``make bench-report``: the HTML report of a 10,000-sample run, its size and time to interactive.

The run is a synthetic Gemini-shaped run from :mod:`bench.generate` (kept under
``bench/out/report/`` and reused). The report is built with ``tcbreplay report`` in a
fresh process, then opened ``--repeats`` times in headless Chromium, a new browser
each time: *time to interactive* is from navigation start until the page has drawn
every chart and the first page of the samples table with its handlers attached
(``performance.now()`` when the page sets ``data-ready``), checked by then using the
failed-only filter and opening one sample. The numbers are printed and appended to
BENCHMARKS.md under "## Report" (other sections are kept).

``--baseline FILE`` also times an earlier report of the same run (one built by an
earlier commit, say), its loads alternating with the new one's so that both meet the
same load on a shared machine; it gets a row of its own, marked as the baseline.

    python -m bench.report_bench [--samples 10000] [--repeats 3] [--baseline OLD.html]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "report"
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
SECTION = "## Report"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# no larger than the report was with the whole of plotly.js embedded (13.4 MB, 2026-11-22)
SIZE_LIMIT_MB = 13.4
TTI_LIMIT_S = 3.0
TABLE_HEAD = (
    "| date | samples | report size | build (CLI, s) | time to interactive (median, s) "
    "| all loads (s) | failed filter (ms) | first sample opened (ms) | machine |\n"
    "|---|---|---|---|---|---|---|---|---|\n"
)


def ensure_run(samples: int) -> tuple[Path, str]:
    """The synthetic run of ``samples`` samples, generated once and reused while the generator
    is the same version."""
    import json

    from bench.generate import GENERATOR_VERSION, generate_run

    store, run_id = OUT / "traces", f"report-{samples}"
    manifest = store / run_id / "manifest.json"
    version = None
    if manifest.exists():
        version = (json.loads(manifest.read_text()).get("generator") or {}).get("version")
    if version != GENERATOR_VERSION:
        print(f"generating {samples} samples into {store / run_id} ...", flush=True)
        generate_run(store, run_id, samples, seed=0)
    return store, run_id


def build(store: Path, run_id: str, output: Path) -> float:
    """Run ``tcbreplay report`` in a fresh process; its wall time in seconds. Every sample is
    shown (``--all-samples``), so the page's table is as large as the run, as it always was
    here."""
    cli = Path(sys.executable).with_name("tcbreplay")
    start = time.perf_counter()
    subprocess.run(
        [str(cli), "report", run_id, "--all-samples", "--store", str(store), "-o", str(output)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def load_once(path: Path) -> dict[str, float]:
    """Open the report in a new headless Chromium; time it and use it as a person would."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.goto(path.as_uri(), timeout=60_000)
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            ready_ms = page.evaluate("window.tcbReportReadyMs")
            filter_ms = page.evaluate(
                """() => {
                    const t = performance.now(), f = document.getElementById('f-show');
                    f.value = 'failed';
                    f.dispatchEvent(new Event('input'));
                    return performance.now() - t;
                }"""
            )
            failed = int(page.get_attribute("#row-count", "data-count"))
            open_ms = page.evaluate(
                """() => {
                    const t = performance.now();
                    document.querySelector('#samples-table tbody tr').click();
                    return performance.now() - t;
                }"""
            )
            if errors or not failed or page.is_hidden("#detail"):
                raise SystemExit(f"the report did not work: errors={errors} failed={failed}")
            return {"tti_s": ready_ms / 1000, "filter_ms": filter_ms, "open_ms": open_ms}
        finally:
            browser.close()


def append_row(row: str, path: Path = BENCHMARKS_MD) -> None:
    """Add a table row at the end of the "## Report" section, creating what is missing."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(SECTION + "\n")
    if start < 0:
        intro = (
            f"\n{SECTION}\n\n`make bench-report`: `tcbreplay report` of a synthetic run "
            "(`bench.generate`), opened in headless Chromium; time to interactive is from "
            "navigation start until every chart and the samples table are drawn and usable "
            f"(targets: under {SIZE_LIMIT_MB:g} MB, under {TTI_LIMIT_S:g} s).\n\n"
        )
        path.write_text(text.rstrip("\n") + "\n" + intro + TABLE_HEAD + row + "\n", "utf-8")
        return
    end = text.find("\n## ", start + len(SECTION))
    end = len(text) if end < 0 else end + 1
    section = text[start:end].rstrip("\n") + "\n" + row + "\n"
    path.write_text(
        text[:start] + section + ("\n" + text[end:] if end < len(text) else ""), "utf-8"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="an earlier report file to time too")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    store, run_id = ensure_run(args.samples)
    output = OUT / f"report-{args.samples}.html"
    build_s = build(store, run_id, output)
    files = [output] if args.baseline is None else [output, args.baseline]
    loads: dict[Path, list[dict[str, float]]] = {path: [] for path in files}
    for _ in range(args.repeats):
        for path in files:  # alternating, so that each file meets the same machine load
            loads[path].append(load_once(path))
    machine = f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    size_mb = output.stat().st_size / 1e6
    tti = report(f"report of {args.samples} samples", output, loads[output], build_s, machine)
    if args.baseline is not None:
        report("baseline", args.baseline, loads[args.baseline], None, machine)
    print(f"appended to {BENCHMARKS_MD.relative_to(ROOT)} ({SECTION[3:]})")
    return 0 if size_mb <= SIZE_LIMIT_MB and tti < TTI_LIMIT_S else 1


def report(
    what: str, path: Path, loads: list[dict[str, float]], build_s: float | None, machine: str
) -> float:
    """Print one file's numbers and append its row; return its median time to interactive."""
    samples = int(
        re.search(r"([\d,]+) samples", path.read_text(encoding="utf-8"))[1].replace(",", "")
    )
    size_mb = path.stat().st_size / 1e6
    tti = statistics.median(x["tti_s"] for x in loads)
    filter_ms = statistics.median(x["filter_ms"] for x in loads)
    open_ms = statistics.median(x["open_ms"] for x in loads)
    all_loads = ", ".join(f"{x['tti_s']:.2f}" for x in loads)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"{what}: {shown}")
    print(f"  size                {size_mb:.1f} MB (limit {SIZE_LIMIT_MB:g} MB)")
    if build_s is not None:
        print(f"  build (CLI)         {build_s:.1f} s")
    print(f"  time to interactive {tti:.2f} s median of {len(loads)} (limit {TTI_LIMIT_S:g} s)")
    print(f"                      loads: {all_loads} s")
    print(f"  failed-only filter  {filter_ms:.0f} ms; first sample opened {open_ms:.0f} ms")
    print(f"  machine             {machine}")
    build = "—" if build_s is None else f"{build_s:.1f}"
    note = "" if build_s is not None else f" · baseline: {path.name}, loads alternated"
    append_row(
        f"| {dt.date.today().isoformat()} | {samples:,} | {size_mb:.1f} MB | {build} "
        f"| {tti:.2f} | {all_loads} | {filter_ms:.0f} | {open_ms:.0f} | {machine}{note} |"
    )
    return tti


if __name__ == "__main__":
    sys.exit(main())
