"""``make bench-s3-requests``: how many requests each command sends to a store on object storage.

On S3 a request costs tens of milliseconds whatever it asks, so a command's count of them
(each ``HEAD`` of an object, each ``GET`` of a range or a listing) bounds its time from below on
a real bucket, where moto on loopback answers in about a millisecond. The 1k run of
``make bench`` is uploaded into a bucket of moto's S3 server, started here on loopback, and
each command runs once in a process of its own against ``s3://``; the server's log of the
requests it answered is counted by method (a ``GET`` with ``list-type=2``: a listing).

    python -m bench.s3_requests [--samples 1k]
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from bench.generate import parse_size
from bench.run import OUT, bin_path, ensure_run

BUCKET = "bench-requests"
# what each is asked of the run (score twice: the second finds its inputs' sha256 recorded)
COMMANDS = (
    ("score", "score", "{run}", "--format", "json", "--dashboard", "none"),
    ("score again", "score", "{run}", "--format", "json", "--dashboard", "none"),
    ("diff", "diff", "{run}", "{run}", "--bootstrap", "40"),
    ("audit verify", "audit", "verify", "{run}"),
    ("export otlp", "export", "{run}", "-o", "{out}/otlp", "--format", "otlp"),
    ("report", "report", "{run}", "-o", "{out}/report.html"),
    ("sql", "sql", "select count(*) from messages"),
)


class _Requests(logging.Handler):
    """The request lines of moto's server (werkzeug's log), as they are answered."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(
            r'"([A-Z]+) (\S+) HTTP', re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage())
        )
        if found:
            self.lines.append(f"{found[1]}{' list' if 'list-type=' in found[2] else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default="1k", help="the run's size (default 1k)")
    args = parser.parse_args()
    bench = ensure_run(parse_size(args.samples), 0, OUT)
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )  # fmt: skip
    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    requests = _Requests()
    log = logging.getLogger("werkzeug")
    log.setLevel(logging.INFO)
    log.addHandler(requests)
    log.propagate = False
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        os.environ["AWS_ENDPOINT_URL_S3"] = f"http://{host}:{port}"
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        fs = s3fs.S3FileSystem()
        for path in sorted(bench.run_dir.rglob("*")):
            relative = path.relative_to(bench.store)
            # (not its scores, nor its local lock, which on S3 would be a live lease)
            skip = relative.parts[1] in ("scores", "evaluations") or path.name == "writer.lock"
            if path.is_file() and not skip:
                fs.put_file(str(path), f"{BUCKET}/traces/{relative.as_posix()}")
        rows = []
        with tempfile.TemporaryDirectory(prefix="bench-requests-") as out:
            for name, *command in COMMANDS:
                words = [w.format(run=bench.run_id, out=out) for w in command]
                requests.lines.clear()
                started = time.perf_counter()
                done = subprocess.run(
                    [bin_path("tcbreplay"), *words, "--store", f"s3://{BUCKET}/traces"],
                    capture_output=True, text=True, cwd=Path(out),
                )  # fmt: skip
                seconds = time.perf_counter() - started
                if done.returncode:
                    raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr[-400:]}")
                kinds = collections.Counter(requests.lines)
                rows.append((name, len(requests.lines), dict(sorted(kinds.items())), seconds))
    finally:
        server.stop()
    print(f"requests to s3:// per command, the {args.samples} run (moto on loopback):")
    for name, count, kinds, seconds in rows:
        each = ", ".join(f"{k} {v}" for k, v in kinds.items())
        print(f"  {name:<13} {count:>4}  ({each}; {seconds:.2f} s)")


if __name__ == "__main__":
    main()
