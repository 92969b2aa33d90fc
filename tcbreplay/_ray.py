"""Ray, the optional engine that scores parts as tasks and records shards as actors.

``--engine ray`` joins the Ray cluster at ``--ray-address`` (or ``RAY_ADDRESS``), or starts a
Ray of its own on this machine for the length of the command; a process that has already
joined one (``ray.init`` in a script or a test) keeps using it. Ray is an extra
(``pip install 'tcbreplay[ray]'``): without it, asking for it is an error that says so.
Each machine of the cluster reads the store at the same path or URL (with its own credentials),
and has tcbreplay installed.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType

from tcbreplay.errors import EngineError, InputError

ENGINES = ("local", "ray")


def check_engine(
    engine: str, ray_address: str | None = None, ray_keep: float | None = None
) -> None:
    """Refuse an unknown engine, and an address or a time to keep scorers without Ray."""
    if engine not in ENGINES:
        raise InputError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    if ray_address is not None and engine != "ray":
        raise InputError("--ray-address applies to --engine ray", hint="add --engine ray")
    if ray_keep is not None and engine != "ray":
        raise InputError("--ray-keep applies to --engine ray", hint="add --engine ray")
    if ray_keep is not None and not 0 <= ray_keep < float("inf"):
        raise InputError(f"--ray-keep {ray_keep:g}: give the seconds as 0 or more")
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
    one this process had already joined is used as it is, and left joined, unless another
    cluster's address is given (a process joins one cluster at a time)."""
    ray = ray_module()
    where = address or os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        joined = ray.get_runtime_context().gcs_address
        if where and where not in ("auto", "local", joined):
            _check_reachable(where, "--ray-address" if address else "RAY_ADDRESS")
            raise EngineError(
                f"cannot join the Ray cluster at {where}: this process has joined the one "
                f"at {joined}",
                hint="score or record against one cluster per process",
            )
        yield ray
        return
    if where:
        _check_reachable(where, "--ray-address" if address else "RAY_ADDRESS")
        _check_token(where)
    else:
        # a Ray of the command's own takes tokens (Ray's default), which Ray announces in a
        # warning a user of tcbreplay has nothing to do about
        logging.getLogger(_TOKEN_SETUP_LOGGER).setLevel(logging.ERROR)
    try:
        ray.init(
            # "local": a Ray of the command's own, not whichever cluster was started last on
            # this machine (what Ray joins given no address: someone else's, or a dead one it
            # then retries for minutes)
            address=where or "local",
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
    token = _OWN.set(not where)
    try:
        yield ray
    finally:
        _OWN.reset(token)
        ray.shutdown()


def own_ray() -> bool:
    """Whether the Ray of the :func:`ray_session` this code runs in is the command's own,
    started on this machine for it and stopped after it (not a cluster joined)."""
    return _OWN.get()


_OWN: ContextVar[bool] = ContextVar("tcbreplay_own_ray", default=False)
# the logger of Ray's token authentication set-up
_TOKEN_SETUP_LOGGER = "ray._private.authentication.authentication_token_setup"
# how long joining waits for the cluster's first answer before saying it cannot be reached
CONNECT_S = 5.0
# HTTP/2's client connection preface (RFC 9113, 3.4), then an empty SETTINGS frame: the
# opening of every gRPC connection, such as Ray's to its GCS (and to its client server)
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4  # the frame type an HTTP/2 server's own preface starts with
_RAY_HINT = "start one with: ray start --head, then give its address (--ray-address)"


def _check_reachable(address: str, given_by: str) -> None:
    """Refuse at once an address no Ray cluster answers at (``host:port`` of its GCS, or
    ``ray://host:port`` of its client server): Ray itself retries an address for many
    minutes, deaf to Ctrl-C, whether nothing listens there or something else does (a web
    server). Both of Ray's speak gRPC, so the address must answer HTTP/2's preface with
    its own (a SETTINGS frame) within :data:`CONNECT_S`. ``auto`` and ``local`` are left
    to Ray."""
    if address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InputError(
            f"{given_by} {address}: write it HOST:PORT (the head node's GCS, as "
            "`ray start --head` prints it) or ray://HOST:PORT"
        )
    deadline = time.monotonic() + CONNECT_S
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S) as conn:
            conn.sendall(H2_PREFACE)
            head = _read(conn, 9, deadline)
    except TimeoutError:
        raise EngineError(
            f"cannot join the Ray cluster at {address}: no answer within {CONNECT_S:g} s",
            hint=_RAY_HINT,
        ) from None
    except (OSError, ValueError) as exc:
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise EngineError(
            f"cannot join the Ray cluster at {address}: {reason}", hint=_RAY_HINT
        ) from None
    if not _settings_frame(head):
        raise EngineError(
            f"cannot join the Ray cluster at {address}: it answers, but not as a Ray GCS does "
            "(gRPC over HTTP/2)",
            hint="give the head node's GCS address, as `ray start --head` prints it "
            "(port 6379 unless given), or ray://HOST:PORT of its client server (10001)",
        )


def _check_token(address: str) -> None:
    """Refuse at once a cluster that takes only callers with its token when this process
    sends none, or another: Ray would retry for 20 s, printing a warning each second, and
    then say only that it cannot connect. Clusters that ``ray start`` starts take tokens by
    default (Ray 2.60, the version locked), and Ray sends this machine's token only to a
    cluster it finds itself, never to an address given, unless ``RAY_AUTH_MODE=token``. One
    call of Ray's own GCS client (sending the token when Ray would) tells; any other failure
    is left to Ray to say. ``ray://`` addresses (Ray's client server) are left to Ray."""
    if address in ("auto", "local") or address.startswith("ray://"):
        return
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]
        from ray.exceptions import AuthenticationError
    except ImportError:  # a Ray older than token authentication, or laid out otherwise
        return
    try:
        with _stderr_silenced():  # (Ray's C++ client logs the refusal too)
            GcsClient(address=address)
    except AuthenticationError:
        raise _token_error(address) from None
    except Exception:  # whatever else Ray meets, its own join says
        return


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 sent to the null device for the block (for what libraries written
    in C++ log there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _token_error(where: str) -> EngineError:
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return EngineError(
            f"cannot join the Ray cluster at {where}: it refused this machine's token",
            hint="give the cluster's own token (`ray get-auth-token` on its head node prints "
            "it) in RAY_AUTH_TOKEN, in a file named by RAY_AUTH_TOKEN_PATH, or in "
            "~/.ray/auth_token",
        )
    return EngineError(
        f"cannot join the Ray cluster at {where}: it takes only callers with its token "
        "(Ray's token authentication)",
        hint="set RAY_AUTH_MODE=token, with the cluster's token in ~/.ray/auth_token, a file "
        "named by RAY_AUTH_TOKEN_PATH, or RAY_AUTH_TOKEN",
    )


def _read(conn: socket.socket, size: int, deadline: float) -> bytes:
    """The first ``size`` bytes ``conn`` receives (fewer if it closes first), by
    ``deadline`` (``time.monotonic()``; after it, :class:`TimeoutError`)."""
    got = b""
    while len(got) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        conn.settimeout(left)
        try:
            chunk = conn.recv(size - len(got))
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    return got


def _settings_frame(head: bytes) -> bool:
    """Whether ``head`` (9 bytes) is the header of an HTTP/2 server's first frame: SETTINGS,
    not an acknowledgement, on stream 0, of whole 6-byte settings."""
    if len(head) < 9:
        return False
    length = int.from_bytes(head[:3], "big")
    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
    return head[3] == _SETTINGS and head[4] == 0 and stream == 0 and length % 6 == 0


def cluster_cpus(ray: ModuleType) -> int:
    """The CPUs of the cluster joined (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
