"""Faults nobody planned for, against a real ``serve`` (issue 41): connections that never
finish a request.

A client that opens a connection and sends part of a request head (or nothing) holds one of the
server's descriptors. ``serve`` closes a connection whose head is not complete within
``HEADER_TIMEOUT_S`` of its first byte (or that sends nothing for the keep-alive time), and
when the open connections reach the descriptor limit less a reserve, a new connection closes
the oldest one that has no request in progress — so such sockets cannot lock other clients
out, before the token check or after it.
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from server_support import ServerProcess, running_server

from sessionledger.http.onewrite import HEADER_TIMEOUT_S

DESCRIPTORS = 256
"""The server's descriptor limit in these tests (the issue's case)."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with running_server(tmp_path) as served:
        resource.prlimit(served.process.pid, resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))
        yield served


def _address(server: ServerProcess) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def half_open(server: ServerProcess, stack: ExitStack, count: int) -> list[socket.socket]:
    """``count`` connections that each send a request head without its last line."""
    host, port = _address(server)
    opened = []
    for _ in range(count):
        sock = stack.enter_context(socket.create_connection((host, port), timeout=30))
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
        opened.append(sock)
    return opened


def test_half_open_connections_do_not_lock_other_clients_out(server: ServerProcess) -> None:
    with ExitStack() as stack:
        sockets = half_open(server, stack, DESCRIPTORS + 44)
        for _ in range(5):
            # a new connection each time, as a fresh client makes
            with httpx.Client(base_url=server.base_url, timeout=30) as client:
                assert client.get("/healthz").status_code == 200
                assert client.get("/v1/sessions").status_code == 200
        assert len(sockets) == DESCRIPTORS + 44
    deadline = time.monotonic() + 30
    while not any(line.get("event") == "connections_shed" for line in server.log_records()):
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.1)


def _closed_by_the_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (reads until the end; the bound stops a hang)."""
    sock.settimeout(HEADER_TIMEOUT_S * 6)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


@pytest.mark.slow  # waits out the timeouts: make verify
def test_a_request_head_that_never_ends_is_closed(server: ServerProcess) -> None:
    with ExitStack() as stack:
        (sock,) = half_open(server, stack, 1)
        assert _closed_by_the_server(sock)
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            assert client.get("/healthz").status_code == 200


@pytest.mark.slow  # waits out the timeouts: make verify
def test_a_connection_that_sends_nothing_is_closed(server: ServerProcess) -> None:
    with socket.create_connection(_address(server), timeout=30) as sock:
        assert _closed_by_the_server(sock)


@pytest.mark.slow  # waits out the timeouts: make verify
def test_a_slow_but_complete_head_is_answered(server: ServerProcess) -> None:
    # a head sent a line a second, complete well within the header timeout
    host, port = _address(server)
    lines = [b"GET /healthz HTTP/1.1\r\n", f"Host: {host}:{port}\r\n".encode(),
             b"Connection: close\r\n", b"\r\n"]
    with socket.create_connection((host, port), timeout=30) as sock:
        for line in lines:
            sock.sendall(line)
            time.sleep(1)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")
