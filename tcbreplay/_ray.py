"""Ray, the optional engine that scores parts as tasks and records shards as actors.

``--engine ray`` joins the Ray cluster at ``--ray-address`` (or ``RAY_ADDRESS``), or starts a
Ray of its own on this machine for the length of the command; a process that has already
joined one (``ray.init`` in a script or a test) keeps using it. Ray is an extra
(``pip install 'tcbreplay[ray]'``): without it, asking for it is an error that says so.
Each machine of the cluster reads the store at the same path, and has tcbreplay installed.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from tcbreplay.errors import EngineError, InputError

ENGINES = ("local", "ray")


def check_engine(engine: str, ray_address: str | None = None) -> None:
    """Refuse an unknown engine, and an address without Ray."""
    if engine not in ENGINES:
        raise InputError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if ray_address is not None and engine != "ray":
        raise InputError("--ray-address applies to --engine ray", hint="add --engine ray")
    if ray_address is not None and not ray_address.strip():
        raise InputError("--ray-address is empty: give the cluster's HOST:PORT, or leave the "
                         "option out to start a Ray on this machine")  # fmt: skip


def ray_module() -> ModuleType:
    """The ``ray`` package, or an error saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InputError(
            f"--engine ray needs Ray, which is not installed ({exc})",
            hint="pip install 'tcbreplay[ray]'",
        ) from None
    return ray


@contextmanager
def ray_session(address: str | None = None) -> Iterator[ModuleType]:
    """Ray, joined (``address``, ``RAY_ADDRESS``) or started on this machine for the block;
    one this process had already joined is used as it is, and left joined."""
    ray = ray_module()
    if ray.is_initialized():
        yield ray
        return
    where = address or os.environ.get("RAY_ADDRESS")
    if where:
        _check_reachable(where, "--ray-address" if address else "RAY_ADDRESS")
    try:
        ray.init(
            address=where,
            logging_level=logging.WARNING,
            log_to_driver=False,
            include_dashboard=False,
            configure_logging=True,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EngineError(
            f"cannot join the Ray cluster at {where}: {exc}"
            if where
            else f"cannot start Ray on this machine: {exc}",
            hint="start one with: ray start --head, then give its address (--ray-address)",
        ) from exc
    try:
        yield ray
    finally:
        ray.shutdown()


# how long joining waits for the cluster's first answer before saying it cannot be reached
CONNECT_S = 5.0


def _check_reachable(address: str, given_by: str) -> None:
    """Refuse at once an address no cluster answers at (``host:port`` of its GCS, or
    ``ray://host:port`` of its client server): Ray itself retries a silent address for many
    minutes, deaf to Ctrl-C. ``auto`` and ``local`` are left to Ray."""
    if address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InputError(
            f"{given_by} {address}: write it HOST:PORT (the head node's GCS, as "
            "`ray start --head` prints it) or ray://HOST:PORT"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except (OSError, ValueError) as exc:
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise EngineError(
            f"cannot join the Ray cluster at {address}: {reason}",
            hint="start one with: ray start --head, then give its address (--ray-address)",
        ) from None


def cluster_cpus(ray: ModuleType) -> int:
    """The CPUs of the cluster joined (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
