"""The look at ``--ray-address`` before Ray joins it (``tcbreplay._ray``): a port that answers
is taken only if it answers as a Ray GCS does (gRPC, that is HTTP/2), since Ray retries any
other for minutes. Loopback servers stand in for the cluster; a real GCS is in
tests/score/test_ray.py."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tcbreplay import _ray
from tcbreplay._ray import _check_reachable
from tcbreplay.errors import EngineError

# a server's connection preface in HTTP/2: a SETTINGS frame (here with one setting,
# MAX_CONCURRENT_STREAMS 100), as gRPC servers send it
SETTINGS = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes([0, 3, 0, 0, 0, 100])
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@contextmanager
def tcp_server(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback server that hands each connection to ``answer``: its HOST:PORT."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


def silent(conn: socket.socket) -> None:
    """Accept, and say nothing."""


def http2(conn: socket.socket) -> None:
    """Read the client's preface, and answer with a SETTINGS frame as an HTTP/2 server does."""
    got = b""
    while len(got) < len(PREFACE):
        chunk = conn.recv(64)
        if not chunk:
            return
        got += chunk
    if got.startswith(PREFACE):
        conn.sendall(SETTINGS)


@contextmanager
def http_server() -> Iterator[str]:
    """Python's own HTTP/1 server on loopback: its HOST:PORT."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_that_speaks_http2_is_taken():
    with tcp_server(http2) as address:
        _check_reachable(address, "--ray-address")
        _check_reachable(f"ray://{address}", "--ray-address")  # Ray Client's server: gRPC too


def test_an_http_server_is_no_ray_cluster():
    # a TCP connection was enough: ray.init then retried for minutes
    with http_server() as address:
        started = time.monotonic()
        with pytest.raises(EngineError) as refused:
            _check_reachable(address, "--ray-address")
    assert time.monotonic() - started < 2
    assert str(refused.value) == (
        f"cannot join the Ray cluster at {address}: it answers, but not as a Ray GCS does "
        "(gRPC over HTTP/2)"
    )
    assert "the head node's GCS address" in (refused.value.hint or "")


def test_a_port_that_says_nothing_is_no_ray_cluster(monkeypatch):
    monkeypatch.setattr(_ray, "CONNECT_S", 0.5)
    with tcp_server(silent) as address:
        started = time.monotonic()
        with pytest.raises(EngineError, match=r"at .*: no answer within 0\.5 s"):
            _check_reachable(address, "RAY_ADDRESS")
    assert time.monotonic() - started < 2


def test_a_port_that_closes_at_once_is_no_ray_cluster():
    with (
        tcp_server(lambda conn: conn.close()) as address,
        pytest.raises(EngineError, match="it answers, but not as a Ray GCS does"),
    ):
        _check_reachable(address, "--ray-address")
