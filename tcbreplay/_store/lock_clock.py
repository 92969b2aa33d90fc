"""How long ago a lock on object storage was renewed, by the store's own clock if asked.

A lease lock (:class:`tcbreplay._store.locks.LeaseLock`) is a dead writer's once not renewed
for its lease; its age is read from the object's time of writing, against this machine's
clock or, for a writer, against the time the store gives a probe object written beside it
(``writer.lock.clock-<pid>-<n>``, removed at once; one whose removal failed is removed by a
later reading, and is no part of any run: :func:`is_clock_probe`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from tcbreplay._store import objects
from tcbreplay._store.objects import fs_path, info_etag, url


def written_ago(path: Path, store_clock: bool = False) -> tuple[float, str]:
    """How long ago an object was last written, and its version: by this machine's clock
    against the store's time of the write, or (``store_clock``) by the store's own clock
    alone, read from an object written beside it for the purpose (removed at once): a
    machine whose clock is off by a minute would otherwise take a live writer's lock, or
    wait an hour for a dead one's. That costs a write, so only a writer asks for it."""
    fs, where = fs_path(path)
    info = fs.info(where)  # (one HEAD: its version and its time of writing both)
    etag = info_etag(info)
    written = _modified(fs, where, info)
    if not store_clock:
        return time.time() - written, etag
    probe = path.with_name(f"{path.name}{CLOCK_PROBE}{os.getpid()}-{time.monotonic_ns()}")
    fs_probe, probe_where = fs_path(probe)
    fs_probe.pipe_file(probe_where, b"")
    try:
        now = _modified(fs_probe, probe_where, fs_probe.info(probe_where))
    finally:
        with suppress(Exception):  # (its work done: one left is removed by a later reading)
            objects.remove_object(probe)
    _remove_old_probes(path, now)
    return now - written, etag


# the clock probes beside a lock: ``writer.lock.clock-<pid>-<n>``
CLOCK_PROBE = ".clock-"
_CLOCK_PROBE = re.compile(r".+\.clock-\d+-\d+")
# A clock probe this old by the store's clock (seconds) is one whose removal failed, not one
# another process is reading now (a probe lives for two requests, which a silent endpoint
# gives up on within about 3 minutes)
OLD_PROBE_S = 300.0
_looked_beside: set[str] = set()  # the locks whose old probes this process looked for


def is_clock_probe(name: str) -> bool:
    """Whether ``name`` is a clock probe's, which a lock leaves beside it when the probe's
    removal fails (an empty object, part of no run)."""
    return _CLOCK_PROBE.fullmatch(name) is not None


def _remove_old_probes(lock: Path, now: float) -> None:
    """Remove the clock probes beside ``lock`` older than OLD_PROBE_S at the store's time
    ``now`` (their removal failed: a 503, a policy that refused it), once per process and
    lock: best done, never failing the reading of the clock."""
    if url(lock) in _looked_beside:
        return
    _looked_beside.add(url(lock))
    fs, folder = fs_path(lock.parent)
    with suppress(Exception):
        for entry in fs.ls(folder, detail=True):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if not (name.startswith(lock.name + CLOCK_PROBE) and is_clock_probe(name)):
                continue
            if entry.get("type") == "file" and now - _modified(fs, entry["name"], entry) >= (
                OLD_PROBE_S
            ):
                with suppress(Exception):
                    fs.rm_file(entry["name"])


def _modified(fs: Any, where: str, info: dict[str, Any]) -> float:
    """An object's time of writing, in seconds since 1970, by the store's clock."""
    modified = info.get("LastModified") or fs.modified(where)
    if modified.tzinfo is None:
        modified = modified.replace(tzinfo=dt.UTC)
    return float(modified.timestamp())
