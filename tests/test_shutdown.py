"""Graceful shutdown of ``sessionledger serve`` (SPEC EL-7: nothing acknowledged is lost).

SIGTERM arrives while many clients are creating sessions: every request answered 201 must
have its session in the log afterwards, every chain must verify, and no session may hold a
partial batch. Open event streams must not hold the shutdown up.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from server_support import ServerProcess, running_server

from eventlog import open_store
from sessionledger.claude_code.wire import discovery_path
from sessionledger.http.server import GRACEFUL_SHUTDOWN_S

CLIENTS = 8


def _create_until_refused(
    server: ServerProcess, acknowledged: list[str], lock: threading.Lock
) -> None:
    """POST sessions until the server stops answering; remember every 201."""
    with server.client(timeout=15.0) as client:
        while True:
            try:
                response = client.post("/v1/sessions", json={"mode": "edit"})
            except httpx.TransportError:
                return
            if response.status_code != 201:
                assert response.status_code == 503, response.text  # store closing: refused
                return
            with lock:
                acknowledged.append(response.json()["sessionId"])


@pytest.mark.slow  # a server stopped under load: make verify (D182)
def test_sigterm_under_load_loses_no_acknowledged_session(tmp_path: Path) -> None:  # EL-7
    acknowledged: list[str] = []
    lock = threading.Lock()
    with running_server(tmp_path) as server:
        clients = [
            threading.Thread(target=_create_until_refused, args=(server, acknowledged, lock))
            for _ in range(CLIENTS)
        ]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 20
        while len(acknowledged) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.process.send_signal(signal.SIGTERM)  # mid-way: the clients keep firing
        returncode = server.process.wait(timeout=30)
        for client in clients:
            client.join(timeout=30)
    assert returncode == 0, server.log()
    assert len(acknowledged) >= 100
    # the store was closed after serving
    assert any(r.get("event") == "stopped" for r in server.log_records())

    store = open_store(server.db_url)
    try:
        heads = {head.session_id: head for head in store.session_heads()}
        missing = [s for s in acknowledged if s not in heads]
        assert missing == [], f"{len(missing)} acknowledged sessions lost"
        for head in heads.values():  # no partial batch: each session is one SessionCreated
            events = list(store.read_session(head.session_id))
            assert head.version == len(events) == 1
            assert events[0].type == "SessionCreated"
        reports = store.verify()
        assert [r for r in reports if not r.ok] == []
        assert len(reports) == len(heads) >= len(acknowledged)
    finally:
        store.close()


def test_sigterm_ends_open_streams_promptly(tmp_path: Path) -> None:
    opened, ended = threading.Event(), threading.Event()

    def listen(server: ServerProcess) -> None:
        with server.client(timeout=httpx.Timeout(10.0, read=60.0)) as client, connect_sse(
            client, "GET", "/v1/events/stream"
        ) as source:
            for _event in source.iter_sse():
                opened.set()
        ended.set()

    with running_server(tmp_path) as server:
        with server.client() as client:
            assert client.post("/v1/sessions", json={}).status_code == 201
        listener = threading.Thread(target=listen, args=(server,), daemon=True)
        listener.start()
        assert opened.wait(30)  # the stream is open and has sent the catch-up
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=GRACEFUL_SHUTDOWN_S + 60) == 0, server.log()
        # Without the stop event the open stream would hold the server for the whole grace
        # period, and uvicorn would cancel it then with an error record (how long the exit
        # took is the machine's: issue 36).
        errors = [r for r in server.log_records() if r.get("level") == "error" or "unparsed" in r]
        assert errors == [], errors
        listener.join(timeout=30)
    assert ended.is_set()  # the stream ended cleanly, not by a read timeout


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["kill", "ctrl-c", "terminal-closed"])
def test_each_stop_signal_closes_the_store_and_says_where_it_no_longer_listens(
    tmp_path: Path, stop: signal.Signals
) -> None:  # EL-7
    """A shell passes SIGHUP on to its jobs when its terminal closes: ``serve`` then stops as
    on Ctrl-C, with no discovery file left to send hooks to a port nobody listens on."""
    with hangup_as(signal.SIG_DFL), running_server(tmp_path) as server:  # not as under nohup
        with server.client() as client:
            assert client.post("/v1/sessions", json={}).status_code == 201
        found = discovery_path(server.db_url)
        assert found is not None and Path(found).is_file()
        server.process.send_signal(stop)
        assert server.process.wait(timeout=GRACEFUL_SHUTDOWN_S + 60) == 0, server.log()
        assert any(r.get("event") == "stopped" for r in server.log_records()), server.log()
        assert not Path(found).exists()


def test_under_nohup_a_hangup_is_still_ignored(tmp_path: Path) -> None:
    with hangup_as(signal.SIG_IGN), running_server(tmp_path) as server:
        server.process.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):  # a stop takes well under a second
            server.process.wait(timeout=3)
        with server.client() as client:
            assert client.post("/v1/sessions", json={}).status_code == 201
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=GRACEFUL_SHUTDOWN_S + 60) == 0, server.log()


@contextmanager
def hangup_as(handling: signal.Handlers) -> Iterator[None]:
    """SIGHUP handled so in this process, hence in a server started meanwhile (an ignored
    signal stays ignored across exec, as ``nohup`` relies on)."""
    previous = signal.signal(signal.SIGHUP, handling)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize("failing", ["create_app", "GracefulServer"])
def test_serve_lets_the_port_and_the_store_go_when_it_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str,
) -> None:
    # serve() as a library: the socket it listens on and the store it was given are closed
    # when building the app or the server fails, so the port can be served again at once.
    import socket

    from sessionledger import SessionService
    from sessionledger.config import ServerSettings
    from sessionledger.http import server as http_server

    def broken(*_: object, **__: object) -> object:
        raise RuntimeError("not today")

    monkeypatch.setattr(http_server, failing, broken)
    service = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}",
                                  workspace_root=tmp_path)
    listener = http_server.listening_socket("127.0.0.1", 0)
    port = listener.getsockname()[1]
    settings = ServerSettings(workspace_root=tmp_path, host="127.0.0.1", port=port)
    with pytest.raises(RuntimeError, match="not today"):
        http_server.serve(settings, service=service, listener=listener)
    assert listener.fileno() == -1  # closed
    with socket.socket() as again:  # nothing listens there any more
        assert again.connect_ex(("127.0.0.1", port)) != 0
    http_server.listening_socket("127.0.0.1", port).close()  # and it can be bound again
    with pytest.raises(Exception, match="closed"):
        service.store.session_heads()
