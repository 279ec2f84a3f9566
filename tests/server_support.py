"""Helpers for tests that talk to the HTTP service: a real server subprocess, or in-process.

:func:`running_server` starts the *installed* ``sessionledger serve`` command (the one a user
runs, found beside ``sys.executable``) on a free port with a temporary database and workspace,
waits until ``/healthz`` answers, and on exit sends SIGTERM and waits for the process: no test
leaks a server. :func:`in_process_client` builds the app over a store in the test process for
fast tests that need no real network.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.exceptions import StarletteDeprecationWarning

from eventlog import EventStore
from projections import open_projected_store
from sessionledger import ServerSettings, SessionService
from sessionledger.http import create_app

with warnings.catch_warnings():
    # Starlette asks for the httpx2 package; the project depends on httpx, which still works.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

__all__ = [
    "ServerProcess",
    "TestClient",
    "create_session",
    "free_port",
    "in_process_client",
    "running_server",
    "session_version",
    "sessionledger_command",
]

STARTUP_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0
PLAIN_LINES = re.compile(
    r"sessionledger serving http://\S+/ — open it in a browser( \(log in with the token\))?"
    r"|created a new event store at \S.*")
"""What ``serve`` prints for a person besides its log: its URL once it listens, and that it
created the store."""


def sessionledger_command() -> list[str]:
    """The installed ``sessionledger`` console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "sessionledger"
    assert script.exists(), f"{script} is missing: install the project (make test does)"
    return [str(script)]


def free_port() -> int:
    """A port that was free a moment ago (the server retries on a clash)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """A running ``sessionledger serve`` subprocess and where it keeps its data."""

    process: subprocess.Popen[bytes]
    base_url: str
    db_path: Path
    workspace: Path
    log_path: Path

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    def log(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The server's log as records: each JSON line parsed, the plain lines ``serve`` says
        to a person by design (:data:`PLAIN_LINES`: the URL once it listens, a store it
        created) as ``{"plain": line}``, any other line (a traceback printed outside the
        JSON handler, a crash) as ``{"unparsed": line}``."""
        records: list[dict[str, Any]] = []
        for line in self.log().splitlines():
            try:
                parsed = json.loads(line)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                records.append(parsed)
            elif PLAIN_LINES.fullmatch(line):
                records.append({"plain": line})
            else:
                records.append({"unparsed": line})
        return records

    def client(self, **options: Any) -> httpx.Client:
        """An HTTP client for this server (close it, or use it as a context manager)."""
        options.setdefault("timeout", 10.0)
        return httpx.Client(base_url=self.base_url, **options)

    def open_store(self) -> EventStore:
        """The server's database opened from the test process (a second writer).

        Opened with the projections attached, as the server opens it, so events appended
        here keep the server's read models in step.
        """
        return open_projected_store(self.db_url)[0]

    def terminate(self, *, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait; a server that does not stop is killed and the test fails."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"server did not stop within {timeout}s of SIGTERM\n{self.log()}"
            ) from None


def _wait_healthy(server: ServerProcess, deadline: float) -> bool:
    """True once /healthz answers 200; False if the process died first."""
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            if httpx.get(f"{server.base_url}/healthz", timeout=1.0).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    server.terminate()
    raise AssertionError(f"server not healthy after {STARTUP_TIMEOUT_S}s\n{server.log()}")


def _start(
    directory: Path, args: Sequence[str], env: dict[str, str], port: int | None = None
) -> ServerProcess:
    workspace = directory / "workspace"
    workspace.mkdir(exist_ok=True)
    db_path = directory / "ledger.db"
    port = port or free_port()
    log_path = directory / f"server-{port}.log"
    command = [
        *sessionledger_command(), "serve", "--port", str(port), "--db", f"sqlite:///{db_path}",
        "--workspace", str(workspace), *args,
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=directory, env=env
        )
    return ServerProcess(process, f"http://127.0.0.1:{port}", db_path, workspace, log_path)


@contextmanager
def running_server(
    directory: Path, *, args: Sequence[str] = (), env: dict[str, str] | None = None,
    port: int | None = None,
) -> Iterator[ServerProcess]:
    """Run ``sessionledger serve`` over ``directory`` on ``port`` (default: a free one);
    stop it on exit. The same directory and port again is a restart of the same server."""
    environment = {**os.environ, **(env or {})}
    environment.pop("SESSIONLEDGER_DB", None)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    for _attempt in range(3):  # another process may take the free port first
        server = _start(directory, args, environment, port)
        try:
            if _wait_healthy(server, deadline):
                break
        except BaseException:
            server.terminate()
            raise
    else:
        raise AssertionError(f"server failed to start\n{server.log()}")
    try:
        yield server
    finally:
        server.terminate()


@contextmanager
def in_process_client(
    workspace: Path, *, store_url: str = "memory://", settings: ServerSettings | None = None
) -> Iterator[tuple[TestClient, SessionService]]:
    """The app over a fresh store (with projections), served in process; closed afterwards.

    The client addresses it as ``127.0.0.1`` on the settings' port, a name the server answers
    to (EG-3), not as TestClient's default ``testserver``."""
    service = SessionService.open(store_url, workspace_root=workspace)
    settings = settings or ServerSettings(workspace_root=workspace)
    app = create_app(service=service, settings=settings)
    try:
        with TestClient(
            app, base_url=f"http://127.0.0.1:{settings.port}", raise_server_exceptions=False
        ) as client:
            yield client, service
    finally:
        service.close()


def create_session(http: httpx.Client | TestClient, **body: Any) -> str:
    """``POST /v1/sessions`` with ``body``; the new session's id (the answer must be 201)."""
    response = http.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


def session_version(http: httpx.Client | TestClient, session_id: str) -> int:
    """The session's current version, as its events page reports it."""
    response = http.get(f"/v1/sessions/{session_id}/events", params={"limit": 1})
    assert response.status_code == 200, response.text
    return int(response.json()["version"])
