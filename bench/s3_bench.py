"""``make bench-s3``: the 1M run of ``make bench`` scored on a store on object storage.

The run (``bench.run``'s, generated under ``bench/out/`` unless a valid one is there) is
uploaded into a bucket of moto's S3 server, started here on loopback (it keeps objects in
memory, and serves them from this process while ``tcbreplay`` runs in its own); then, in
alternation so that the machine's load falls on both alike, ``tcbreplay score`` and the bare
read pass of ``make bench`` (``tcbreplay sql``) on the local store and on ``s3://``, best of
``--repeats``. The two scorings must give the same numbers. The figures go to BENCHMARKS.md
("Object storage"), with the machine's load, which on a shared machine moves them.

    python -m bench.s3_bench [--samples 1m] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import time

from bench.generate import parse_size
from bench.run import FLOOR_SQL, OUT, Timing, bin_path, ensure_run, label, load1, measure
from bench.run import write_section as write_bench_section

SECTION = "## Object storage"
TARGET = 1.5  # s3 within 1.5× of the local store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default="1m", help="the run's size (default 1m)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command (best)")
    args = parser.parse_args()
    samples = parse_size(args.samples)
    bench = ensure_run(samples, 0, OUT)
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        # moto keeps an object over 5 MB in a temporary file otherwise: in memory, as S3's
        # own storage is not this machine's disk
        MOTO_S3_DEFAULT_KEY_BUFFER_SIZE=str(2**31),
    )  # fmt: skip
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        os.environ["AWS_ENDPOINT_URL_S3"] = f"http://{host}:{port}"
        result = _measure(bench, args.repeats)
    finally:
        server.stop()
    text = _section(result, samples)
    print(text)
    write_bench_section(text, section=SECTION)


def _measure(bench, repeats: int) -> dict:
    import boto3
    import s3fs

    boto3.client("s3").create_bucket(Bucket="bench")
    url = f"s3://bench/{bench.store.name}"
    fs = s3fs.S3FileSystem()
    started = time.perf_counter()
    names = ("manifest.json", "samples.parquet", "messages.parquet")  # what scoring reads
    for name in names:
        fs.put_file(str(bench.run_dir / name), f"bench/{bench.store.name}/{bench.run_id}/{name}")
    upload_s = time.perf_counter() - started
    size = sum((bench.run_dir / name).stat().st_size for name in names)
    score = [bin_path("tcbreplay"), "score", bench.run_id, "--format", "json", "--dashboard",
             "none", "--store"]  # fmt: skip
    floor = [bin_path("tcbreplay"), "sql", FLOOR_SQL, "--format", "json", "--store"]
    runs: dict[str, list] = {key: [] for key in ("score_local", "score_s3", "sql_local", "sql_s3")}
    loads = [load1()]
    for _ in range(repeats):  # alternated: a change of load falls on both
        runs["score_local"].append(measure([*score, str(bench.store)]))
        runs["score_s3"].append(measure([*score, url]))
        runs["sql_local"].append(measure([*floor, str(bench.store)]))
        runs["sql_s3"].append(measure([*floor, url]))
        loads.append(load1())
    timings = {key: Timing(value) for key, value in runs.items()}
    local, remote = (json.loads(timings[k].best.stdout) for k in ("score_local", "score_s3"))
    keys = ("tsa", "tp", "ahr", "n_samples", "args_invalid", "args_total", "n_errors")
    same = all(local.get(k) == remote.get(k) for k in keys)
    if not same:
        raise SystemExit(f"the scorings differ: {[(k, local.get(k), remote.get(k)) for k in keys]}")
    return {"timings": timings, "upload_s": upload_s, "bytes": size, "loads": loads, "same": same}


def _section(result: dict, samples: int) -> str:
    t = result["timings"]
    ratio = t["score_s3"].wall / t["score_local"].wall
    sql_ratio = t["sql_s3"].wall / t["sql_local"].wall
    loads = result["loads"]
    mb = result["bytes"] / 1e6
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        ("`score` (no dashboard file)", "score_local", "score_s3"),
        ("bare read pass (`sql`)", "sql_local", "sql_s3"),
    ]
    table = ["| command | local store (s) | s3:// on moto (s) | ratio | peak RSS local / s3 (MB) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for name, a, b in rows:
        table.append(
            f"| {name} | {t[a].wall:.2f} ({', '.join(f'{m.wall:.2f}' for m in t[a].runs)}) "
            f"| {t[b].wall:.2f} ({', '.join(f'{m.wall:.2f}' for m in t[b].runs)}) "
            f"| {t[b].wall / t[a].wall:.2f}× | {t[a].rss_mb:,.0f} / {t[b].rss_mb:,.0f} |"
        )
    verdict = "within" if ratio <= TARGET else "not within"
    return "\n".join(
        [
            SECTION,
            "",
            "`make bench-s3` (`python -m bench.s3_bench`): the run of `make bench` uploaded into "
            "moto's S3 server on loopback (objects in memory, served by the benchmark's own "
            "process), then `tcbreplay score` and the bare read pass of `make bench` on the local "
            "store and on `--store s3://...`, alternated, best of each (every time in brackets). "
            "Both scorings give the same numbers (checked). moto on loopback has no network "
            "latency and little bandwidth cost, but serves every request from Python: it stands "
            "for the request pattern, not for S3's throughput (see docs/store.md, "
            '"What scales").',
            "",
            f"Measured {now}, {label(samples)} samples ({mb:,.0f} MB of run files, uploaded in "
            f"{result['upload_s']:.1f} s); load average {loads[0]:.1f} at the start, "
            + ", ".join(f"{x:.1f}" for x in loads[1:])
            + " after each round (2 shared cores).",
            "",
            *table,
            "",
            f"Scoring on s3:// took {ratio:.2f}× the local store's time, {verdict} the target of "
            f"{TARGET}×; the read pass {sql_ratio:.2f}×.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
