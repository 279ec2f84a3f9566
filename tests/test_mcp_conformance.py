"""A raw JSON-RPC conformance suite over both MCP transports, no SDK on the client side
(issue 41, finding 8 and acceptance 3).

Each malformed message goes as bytes to a real ``sessionledger mcp`` (stdio: the wire that
answers the handshake early, and the one that does not — a workspace with a ``config.toml``)
and to ``/mcp`` of a real ``serve``. JSON-RPC 2.0 says what comes back: a parse error
(-32700) for what is not JSON or not UTF-8, an invalid request (-32600) for a batch (MCP takes
none), an empty one, an id that is null, a fraction, a boolean, an object, an array or a
string with a lone surrogate, a ``jsonrpc`` other than ``"2.0"``, a method that is not a
string, and a request reusing the id of one still in progress. After each the server keeps
serving (a ``ping`` is answered), and nothing is ever appended.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from claude_hooks_support import this_repo_env
from server_support import ServerProcess, running_server

from eventlog import open_store

INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
              "params": {"protocolVersion": "2025-06-18",
                         "capabilities": {"elicitation": {}},
                         "clientInfo": {"name": "conformance", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

DEEP = 100_000
ANSWER_S = 60.0
"""How long a test waits for an answer (only a hang reaches it)."""

MALFORMED: list[Any] = [
    pytest.param(b"not json", -32700, id="not-json"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, id="cut-short"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":'
                 b'"TodoWrite","arguments":{"todos":[{"content":"\xff\xfe","status":"pending",'
                 b'"priority":"low"}]}}}', -32700, id="not-utf-8"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * DEEP
                 + b"]" * DEEP + b"}", -32700, id="100000-deep"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', -32700,
                 id="nan"),
    pytest.param(b"[]", -32600, id="empty-batch"),
    pytest.param(json.dumps([{"jsonrpc": "2.0", "id": n, "method": "ping"}
                             for n in range(1000)]).encode(), -32600, id="batch-of-1000"),
    pytest.param(b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, id="id-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, id="id-fraction"),
    pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, id="id-true"),
    pytest.param(b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600, id="id-object"),
    pytest.param(b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', -32600, id="id-array"),
    pytest.param(b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', -32600,
                 id="id-lone-surrogate"),
    pytest.param(b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600, id="jsonrpc-1.0"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":5}', -32600, id="method-a-number"),
    pytest.param(b'42', -32600, id="a-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":1}', -32600, id="neither-request-nor-answer"),
    pytest.param(json.dumps({**INITIALIZE, "id": 1, "params": {
        **INITIALIZE["params"], "capabilities": {"experimental": {"x": "y" * 900_000}}}})
        .encode(), -32602, id="initialize-declaring-900-kb"),
]


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def answered_id(raw: bytes) -> Any:
    """The id an error answers: the request's when it could be read and is one, else null."""
    try:
        message = json.loads(raw, parse_constant=no_constant)
    except (ValueError, RecursionError):
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, int | str) and not isinstance(found, bool) and (
        not isinstance(found, str) or found.isascii()) else None


def event_count(db: Path) -> int:
    if not db.exists():
        return 0
    store = open_store(f"sqlite:///{db}")
    try:
        return sum(1 for _ in store.read_all())
    finally:
        store.close()


# -- stdio ---------------------------------------------------------------------------------------


class Stdio:
    """``sessionledger mcp`` as a process: bytes in, lines out (read on a thread)."""

    def __init__(self, workspace: Path) -> None:
        self.db = workspace / "ledger.db"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sessionledger", "mcp", "--db", f"sqlite:///{self.db}",
             "--workspace", str(workspace)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=workspace, env=this_repo_env())
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def next(self, timeout: float = ANSWER_S) -> Any:
        return json.loads(self.lines.get(timeout=timeout))

    def answer_to(self, request_id: Any) -> Any:
        while True:
            message = self.next()
            if message.get("id") == request_id and "method" not in message:
                return message

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(params=["early", "sdk"])
def stdio(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stdio]:
    """A connection, initialized: answered early (a new session, no configuration) or by the
    SDK server only (a workspace with a ``config.toml``)."""
    if request.param == "sdk":
        (tmp_path / ".sessionledger").mkdir()
        (tmp_path / ".sessionledger" / "config.toml").write_text("", encoding="utf-8")
    wire = Stdio(tmp_path)
    try:
        wire.send(json.dumps(INITIALIZE).encode())
        assert "result" in wire.answer_to("init")
        wire.send(json.dumps(INITIALIZED).encode())
        yield wire
    finally:
        wire.close()


@pytest.mark.parametrize("raw, code", MALFORMED)
def test_stdio_answers_every_malformed_message_and_keeps_serving(
        stdio: Stdio, raw: bytes, code: int) -> None:
    stdio.send(raw)
    answer = stdio.next()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == answered_id(raw), answer
    assert answer["error"]["code"] == code and answer["error"]["message"], answer
    stdio.send(b'{"jsonrpc":"2.0","id":"after","method":"ping"}')
    assert stdio.answer_to("after")["result"] == {}
    assert event_count(stdio.db) == 0


def test_stdio_refuses_an_id_a_request_in_progress_holds(stdio: Stdio) -> None:
    question = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "AskUserQuestion", "arguments": {"questions": [{
            "question": "Which parser?", "header": "Parser", "multiSelect": False,
            "options": [{"label": "PEG", "description": "a PEG parser"},
                        {"label": "LR", "description": "an LR parser"}]}]}}}
    stdio.send(json.dumps(question).encode())
    while True:  # the call waits on the form it sent this client
        message = stdio.next()
        if message.get("method") == "elicitation/create":
            break
    stdio.send(b'{"jsonrpc":"2.0","id":7,"method":"ping"}')
    refused = stdio.answer_to(7)
    assert refused["error"]["code"] == -32600 and "in progress" in refused["error"]["message"]
    stdio.send(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                           "result": {"action": "cancel"}}).encode())
    answered = stdio.answer_to(7)
    assert "result" in answered, answered  # the call itself, answered once the form closed
    stdio.send(b'{"jsonrpc":"2.0","id":7,"method":"ping"}')  # the id is free again
    assert stdio.answer_to(7)["result"] == {}


def test_a_refused_first_call_appends_nothing(stdio: Stdio) -> None:
    stdio.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "TodoWrite", "arguments": {"todos": "design, build"}}}).encode())
    answer = stdio.answer_to(3)
    assert answer["result"]["isError"] is True, answer
    assert event_count(stdio.db) == 0


# -- /mcp on serve --------------------------------------------------------------------------------

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("mcp-conformance")) as server:
        yield server


def _json_answer(response: httpx.Response) -> Any:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines()
                if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


@pytest.fixture
def http(served: ServerProcess) -> Iterator[httpx.Client]:
    """A client with an initialized MCP session."""
    with httpx.Client(base_url=served.base_url, timeout=60, headers=ACCEPT) as client:
        response = client.post("/mcp", json=INITIALIZE)
        assert response.status_code == 200, response.text
        client.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        client.headers["Mcp-Protocol-Version"] = "2025-06-18"
        assert client.post("/mcp", json=INITIALIZED).status_code == 202
        yield client


@pytest.mark.parametrize("raw, code", MALFORMED)
def test_http_answers_every_malformed_message_and_keeps_serving(
        served: ServerProcess, http: httpx.Client, raw: bytes, code: int) -> None:
    before = event_count(served.db_path)
    response = http.post("/mcp", content=raw)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == answered_id(raw), answer
    assert answer["error"]["code"] == code and answer["error"]["message"], answer
    after = http.post("/mcp", json={"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert _json_answer(after)["result"] == {}
    assert event_count(served.db_path) == before


def test_http_refuses_an_id_a_request_in_progress_holds(
        served: ServerProcess, http: httpx.Client) -> None:
    question = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "AskUserQuestion", "arguments": {"questions": [{
            "question": "Which parser?", "header": "Parser", "multiSelect": False,
            "options": [{"label": "PEG", "description": "a PEG parser"},
                        {"label": "LR", "description": "an LR parser"}]}]}}}
    with http.stream("POST", "/mcp", json=question) as waiting:
        lines = waiting.iter_lines()
        for line in lines:  # the call waits on the form it sent this client
            if line.startswith("data:") and "elicitation/create" in line:
                form = json.loads(line[5:])
                break
        refused = http.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "ping"})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32600
        assert "in progress" in refused.json()["error"]["message"]
        assert http.post("/mcp", json={"jsonrpc": "2.0", "id": form["id"],
                                       "result": {"action": "cancel"}}).status_code == 202
        for _line in lines:  # the call's answer, and the end of its stream
            pass
    # the id is free again once the server has ended that request (a moment after its
    # stream's last byte left: asked again until then, within a bound that only stops a hang)
    deadline = time.monotonic() + 30
    while (again := http.post("/mcp", json={"jsonrpc": "2.0", "id": 9,
                                              "method": "ping"})).status_code == 400:
        assert time.monotonic() < deadline, again.text
        time.sleep(0.05)
    assert _json_answer(again)["result"] == {}


# -- MCP sessions: bounded, with room kept for new clients ---------------------------------------

LIMIT = 8


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("mcp-bounded"),
                        args=["--mcp-max-sessions", str(LIMIT)]) as server:
        yield server


def _initialized(client: httpx.Client) -> str:
    response = client.post("/mcp", json=INITIALIZE, headers=ACCEPT)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    assert client.post("/mcp", json=INITIALIZED, headers={
        **ACCEPT, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"},
    ).status_code == 202
    return str(session)


def _ping(client: httpx.Client, session: str) -> int:
    return client.post("/mcp", json={"jsonrpc": "2.0", "id": "p", "method": "ping"}, headers={
        **ACCEPT, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"},
    ).status_code


def test_at_the_session_limit_a_new_client_gets_in_and_the_idlest_session_closes(
        bounded: ServerProcess) -> None:  # issue 41, finding 7
    with httpx.Client(base_url=bounded.base_url, timeout=60) as client:
        # one process opens many more sessions than the limit (the SDK's own answer to the
        # ninth would be 503 "Too many open sessions" for every client after)
        opened = [_initialized(client) for _ in range(LIMIT * 3)]
        assert _ping(client, opened[-1]) == 200
        # a client that keeps using its session keeps it
        kept = opened[-LIMIT]
        assert _ping(client, kept) == 200
        newcomer = _initialized(client)
        assert _ping(client, newcomer) == 200
        assert _ping(client, kept) == 200
        # the sessions idle longest were closed for the others: told 404, they start anew
        assert _ping(client, opened[0]) == 404


def test_a_session_in_use_is_never_closed_for_room(bounded: ServerProcess) -> None:
    with httpx.Client(base_url=bounded.base_url, timeout=60) as client:
        used = _initialized(client)
        for _ in range(LIMIT * 3):  # each new one closes the idlest, never the one in use
            _initialized(client)
            assert _ping(client, used) == 200
