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


# -- the soak (make verify): bursts of what holds a server's resources --------------------------

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "soak", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
BURSTS = 4
INITIALIZES = 5_000
"""Per burst: 20,000 MCP sessions opened from one process in all."""


def _resources(pid: int) -> tuple[float, int]:
    """The process's resident memory (MB) and open descriptors."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines()
                  if line.startswith("VmRSS:"))
    return rss_kb / 1024, len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _served_meanwhile(server: ServerProcess) -> None:
    """A fresh client is answered, and gets an MCP session."""
    with httpx.Client(base_url=server.base_url, timeout=30) as fresh:
        assert fresh.get("/healthz").status_code == 200
        assert fresh.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 200


@pytest.mark.slow
def test_soak_bursts_of_half_open_idle_and_mcp_sessions_leave_resources_flat(
        server: ServerProcess) -> None:  # issue 41, acceptance 2
    host, port = _address(server)
    after: list[tuple[float, int]] = []
    with httpx.Client(base_url=server.base_url, timeout=60) as opener:
        for _burst in range(BURSTS):
            with ExitStack() as stack:
                half_open(server, stack, DESCRIPTORS + 44)
                for _ in range(40):  # idle keep-alives: one request answered, then nothing
                    idle = stack.enter_context(socket.create_connection((host, port), timeout=30))
                    idle.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
                    assert idle.recv(4096).startswith(b"HTTP/1.1 200")
                _served_meanwhile(server)
                for n in range(INITIALIZES):  # one process, one kept-alive connection
                    opened = opener.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
                    assert opened.status_code == 200, (n, opened.text)
                _served_meanwhile(server)
            time.sleep(2)  # the sockets closed: the server has let them go
            after.append(_resources(server.process.pid))
    rss = [mb for mb, _fds in after]
    fds = [count for _mb, count in after]
    print(f"after each burst: RSS MB {[round(m, 1) for m in rss]}, descriptors {fds}")
    assert max(fds) <= fds[0] + 20, fds
    assert max(rss[1:]) <= rss[0] + 60, rss  # the first burst fills the session table
