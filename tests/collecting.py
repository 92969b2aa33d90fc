"""``collect`` in a thread of the test, and requests posted to it (tests of collect and of what
it keeps)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tcbreplay._importers.otel.collect import collect
from tcbreplay._store.runs import Store


def post(url: str, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type, **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextmanager
def collecting(store: Path, run_id: str = "live", **options):
    """``collect`` on a free port in a thread; yields its endpoint and log, and the summary
    (a list, filled once the collection is finished on leaving)."""
    stop, ready, log, summary = threading.Event(), threading.Event(), [], []
    endpoint: list[str] = []

    def run() -> None:
        summary.append(
            collect(Store(store), run_id, port=0, log=log.append, stop=stop,
                    ready=lambda url: (endpoint.append(url), ready.set()), **options)
        )  # fmt: skip

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(10)
    try:
        yield endpoint[0], log, summary
    finally:
        stop.set()
        thread.join(20)
