"""``make bench-s3``: the 1M run of ``make bench`` scored on a store on object storage.

The run (``bench.run``'s, generated under ``bench/out/`` unless a valid one is there) is
uploaded into a bucket of moto's S3 server, started here on loopback (it keeps objects in
memory, and serves them from this process while ``tcbreplay`` runs in its own); then, in
alternation so that the machine's load falls on both alike, ``tcbreplay score`` and the bare
read pass of ``make bench`` (``tcbreplay sql``) on the local store and on ``s3://``, best of
``--repeats``. The two scorings must give the same numbers. The figures go to BENCHMARKS.md
("Object storage"), with the machine's load, which on a shared machine moves them.

moto answers a ranged GET by copying the whole object, then slicing it: a request for 1 MB of
the 1M run's messages file (550 MB) costs about a second, where S3's cost follows the range.
Each s3:// command is therefore timed twice: on moto as shipped, and on moto answering a range
by slicing its buffer without the copy (:func:`_slice_ranges`, this process only), which
isolates tcbreplay's own request pattern from moto's cost per request.

    python -m bench.s3_bench [--samples 1m] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import logging
import os
import threading
import time

from bench.generate import parse_size
from bench.run import FLOOR_SQL, OUT, Timing, bin_path, ensure_run, label, load1, measure
from bench.run import write_section as write_bench_section

SECTION = "## Object storage"
TARGET = 1.5  # s3 within 1.5× of the local store

# whether moto answers a range by slicing (see the module's docstring); switched between runs
_SLICED = threading.Event()


def _slice_ranges() -> None:
    """Let moto's objects give their bytes without a copy while :data:`_SLICED` is set: a
    ranged GET then copies its range only, as S3's cost follows the range."""
    from moto.s3.models import FakeKey

    shipped = FakeKey.value

    def value(self: FakeKey) -> bytes:
        buffer = self._value_buffer._file  # a SpooledTemporaryFile's, in memory here
        if _SLICED.is_set() and isinstance(buffer, io.BytesIO):
            return buffer.getvalue()  # the buffer's bytes, shared until written
        return shipped.fget(self)

    FakeKey.value = property(value, shipped.fset)  # type: ignore[method-assign]


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
    _slice_ranges()
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
    runs: dict[str, list] = {
        f"{what}_{where}": [] for what in ("score", "sql") for where in ("local", "s3", "sliced")
    }
    loads = [load1()]
    for _ in range(repeats):  # alternated: a change of load falls on all alike
        for what, cmd in (("score", score), ("sql", floor)):
            runs[f"{what}_local"].append(measure([*cmd, str(bench.store)]))
            runs[f"{what}_s3"].append(measure([*cmd, url]))
            _SLICED.set()
            try:
                runs[f"{what}_sliced"].append(measure([*cmd, url]))
            finally:
                _SLICED.clear()
        loads.append(load1())
    timings = {key: Timing(value) for key, value in runs.items()}
    local = json.loads(timings["score_local"].best.stdout)
    keys = ("tsa", "tp", "ahr", "n_samples", "args_invalid", "args_total", "n_errors")
    for other in ("score_s3", "score_sliced"):
        remote = json.loads(timings[other].best.stdout)
        if any(local.get(k) != remote.get(k) for k in keys):
            differ = [(k, local.get(k), remote.get(k)) for k in keys]
            raise SystemExit(f"the scorings differ ({other}): {differ}")
    same = True
    return {"timings": timings, "upload_s": upload_s, "bytes": size, "loads": loads, "same": same}


def _section(result: dict, samples: int) -> str:
    t = result["timings"]
    loads = result["loads"]
    mb = result["bytes"] / 1e6
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")

    def cell(key: str) -> str:
        times = ", ".join(f"{m.wall:.2f}" for m in t[key].runs)
        return f"{t[key].wall:.2f} ({times})"

    table = [
        "| command | local store (s) | s3:// on moto (s) | ratio | s3:// on moto, ranges "
        "sliced (s) | ratio | peak RSS local / s3 / sliced (MB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, what in (("`score` (no dashboard file)", "score"), ("bare read pass (`sql`)", "sql")):
        local, s3, sliced = (f"{what}_{where}" for where in ("local", "s3", "sliced"))
        table.append(
            f"| {name} | {cell(local)} | {cell(s3)} | {t[s3].wall / t[local].wall:.2f}× "
            f"| {cell(sliced)} | {t[sliced].wall / t[local].wall:.2f}× "
            f"| {t[local].rss_mb:,.0f} / {t[s3].rss_mb:,.0f} / {t[sliced].rss_mb:,.0f} |"
        )

    def verdict(key: str) -> str:
        ratio = t[key].wall / t["score_local"].wall
        return f"{ratio:.2f}× ({'within' if ratio <= TARGET else 'not within'} {TARGET}×)"

    return "\n".join(
        [
            SECTION,
            "",
            "`make bench-s3` (`python -m bench.s3_bench`): the run of `make bench` uploaded into "
            "moto's S3 server on loopback (objects in memory, served by the benchmark's own "
            "process), then `tcbreplay score` and the bare read pass of `make bench` on the local "
            "store and on `--store s3://...`, alternated, best of each (every time in brackets). "
            "All scorings give the same numbers (checked). moto answers a ranged GET by copying "
            "the whole object first (about a second for the 550 MB messages file on these "
            "machines, whatever the range); S3's cost follows the range. So every s3:// command "
            "runs twice: on moto as shipped, and on moto answering a range by slicing its buffer "
            "without that copy (patched in the benchmark's process only), which shows "
            "tcbreplay's own request pattern. Neither stands for S3's throughput (see "
            'docs/store.md, "What scales"). The first scoring on s3:// (the first time in its '
            "brackets) also reads the uploaded files whole to hash them, as they are newer than "
            "their manifest says; the scorings after it take the sha256 it recorded for those "
            "versions (the audit record's `inputs_seen`).",
            "",
            f"Measured {now}, {label(samples)} samples ({mb:,.0f} MB of run files, uploaded in "
            f"{result['upload_s']:.1f} s); load average {loads[0]:.1f} at the start, "
            + ", ".join(f"{x:.1f}" for x in loads[1:])
            + " after each round (2 shared cores).",
            "",
            *table,
            "",
            f"Scoring on s3:// took {verdict('score_s3')} the local store's time on moto as "
            f"shipped, {verdict('score_sliced')} with ranges sliced.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
