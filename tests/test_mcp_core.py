"""The MCP server's core (issue 21): bindings, sessions made at first use, the session handle
of the 2026-07-28 era, and the protocol details hosts rely on.

Real parts throughout: ``sessionledger serve`` (a subprocess, or its app under uvicorn in this
process where the test counts the transport's bindings), ``sessionledger mcp`` over stdio, and
the official ``mcp`` SDK's clients — ``Client`` at its defaults (the 2026-07-28 era; ``mode=
"legacy"`` for the 2025 handshake) and raw JSON-RPC over ``httpx`` for volume.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_support import (
    PLAN,
    QUESTION,
    REFUSED_CALLS,
    TODOS,
    serve_in_process,
    server_env,
    server_params,
    text_of,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    INVALID_PARAMS,
    PROTOCOL_VERSION_META_KEY,
    CallToolResult,
    LoggingMessageNotificationParams,
)
from server_support import running_server, sessionledger_command
from tool_support import CATALOG_TOML

from eventlog import open_store
from sessionledger import SessionService
from sessionledger.mcp import SESSION_META
from sessionledger.mcp.server import (
    CALL_DOCUMENT_SCHEMA,
    CALLER_ARGUMENT,
    IDEMPOTENT,
    SESSION_ARGUMENT,
    TITLES,
    handle_line,
)
from sessionledger.permission.descriptors import SERVICE_TOOLS

ERAS = (pytest.param("2025-11-25", marks=pytest.mark.slow), "2026-07-28")
"""The protocol eras of the parametrised tests; 2025-11-25 runs in ``make verify`` (D182) —
the tests that name it directly run in ``make test``."""
"""The handshake era (``Client(mode="legacy")``) and the modern one (``Client`` defaults)."""
_RPC_HEADERS = {"Accept": "application/json, text/event-stream",
                "Content-Type": "application/json"}
_VALID = Draft202012Validator(CALL_DOCUMENT_SCHEMA)
_MODERN = {PROTOCOL_VERSION_META_KEY: "2026-07-28", CLIENT_CAPABILITIES_META_KEY: {}}
"""The ``_meta`` envelope of a 2026-07-28 request sent by hand."""


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, Path]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    return f"sqlite:///{tmp_path / 'ledger.db'}", workspace


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


@asynccontextmanager
async def connected(
    target: str | StdioServerParameters, era: str, **options: Any
) -> AsyncIterator[Client]:
    """An SDK client on ``era``: the defaults for 2026-07-28, the handshake for 2025."""
    mode = "auto" if era == "2026-07-28" else "legacy"
    async with Client(target, mode=mode, **options) as client:
        assert client.session.protocol_version == era
        yield client


def sessions_of(db_url: str, workspace: Path) -> list[str]:
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        return [s.session_id for s in service.summaries()]
    finally:
        service.close()


def todo_writes(db_url: str, workspace: Path) -> int:
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        return sum(1 for s in service.summaries() for e in service.iter_events(s.session_id)
                   if e.type == "TodosWritten")
    finally:
        service.close()


def session_of(result: CallToolResult) -> str:
    """The session a result names, checked to be named the same in both places."""
    assert result.meta is not None and isinstance(result.structured_content, dict)
    assert result.structured_content["sessionId"] == result.meta[SESSION_META]
    return str(result.meta[SESSION_META])


def _rpc_body(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a streamable-HTTP answer (JSON, or one SSE event)."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return dict(response.json())
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


def raw_mcp_session(http: httpx.Client, url: str, tool: str = "TodoRead") -> str:
    """One 2025 MCP session by hand: initialize, one call, DELETE; its ledger session."""
    init = http.post(url, headers=_RPC_HEADERS, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    _rpc_body(init)
    headers = {**_RPC_HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-11-25"}
    done = http.post(url, headers=headers,
                     json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    called = _rpc_body(http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}}))["result"]
    assert called["isError"] is False, called
    assert http.delete(url, headers=headers).status_code == 200
    return str(called["_meta"][SESSION_META])


# -- bindings: exactly as long as the MCP session (finding 1, acceptance 3) -------------------

def test_a_listing_binds_nothing_and_a_delete_drops_the_binding(  # issue 21 finding 1
    tmp_path: Path,
) -> None:
    with serve_in_process(tmp_path) as serve:
        async def scenario() -> None:
            async with connected(serve.mcp_url, "2025-11-25") as client:
                await client.list_tools()
                assert serve.transport.ledger.bound_connections == 0
                assert serve.service.summaries() == []  # listing creates no session
                written = await client.call_tool("TodoWrite", TODOS)
                assert serve.transport.ledger.bound_connections == 1
                read = await client.call_tool("TodoRead", {})
                assert session_of(read) == session_of(written)
            # the client's exit sent DELETE: the MCP session ended, its binding with it

        run(scenario)
        assert serve.bound_when_settled(0) == 0
        with httpx.Client(timeout=30) as http:
            raw_mcp_session(http, serve.mcp_url)
        assert serve.bound_when_settled(0) == 0
        assert len(serve.service.summaries()) == 2  # the sessions stay in the log


def test_an_idle_timeout_and_a_stopping_server_drop_the_binding(  # issue 21 finding 1
    tmp_path: Path,
) -> None:
    # Idle for 3 s: longer than any pause a busy machine puts between this client's requests
    # (the SDK counts idle time only between requests), short enough to wait for.
    with serve_in_process(tmp_path, idle_timeout_s=3.0) as serve:
        with httpx.Client(timeout=30) as http:
            init = http.post(serve.mcp_url, headers=_RPC_HEADERS, json=_INITIALIZE)
            headers = {**_RPC_HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
            http.post(serve.mcp_url, headers=headers,
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            _rpc_body(http.post(serve.mcp_url, headers=headers, json=_call(2, "2025-11-25")))
            assert serve.transport.ledger.bound_connections == 1
            assert serve.bound_when_settled(0) == 0  # idle past the timeout: it ended
            gone = http.post(serve.mcp_url, headers=headers, json=_call(3, "2025-11-25"))
            assert gone.status_code == 404  # the SDK forgot the MCP session too
    (tmp_path / "again").mkdir()
    with serve_in_process(tmp_path / "again") as serve:
        with httpx.Client(timeout=30) as http:
            init = http.post(serve.mcp_url, headers=_RPC_HEADERS, json=_INITIALIZE)
            headers = {**_RPC_HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
            http.post(serve.mcp_url, headers=headers,
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            _rpc_body(http.post(serve.mcp_url, headers=headers, json=_call(2, "2025-11-25")))
        assert serve.transport.ledger.bound_connections == 1
        transport = serve.transport
    assert transport.ledger.bound_connections == 0  # the manager stopped: every session ended


@pytest.mark.slow
def test_an_open_connection_keeps_its_session_after_5000_others(  # issue 21 finding 1
    tmp_path: Path,
) -> None:  # acceptance 3; the binding count returns to what is open (no growth)
    with serve_in_process(tmp_path) as serve:
        opened = threading.Event()
        others_done = threading.Event()
        seen: dict[str, Any] = {}

        async def hold_open() -> None:
            async with connected(serve.mcp_url, "2025-11-25") as client:
                seen["session"] = session_of(await client.call_tool("TodoWrite", TODOS))
                opened.set()
                while not others_done.is_set():
                    await anyio.sleep(0.05)
                read = await client.call_tool("TodoRead", {})
                seen["after"] = session_of(read)
                seen["todos"] = read.structured_content["result"]["todos"]
                seen["bound while open"] = serve.transport.ledger.bound_connections

        holder = threading.Thread(target=anyio.run, args=(hold_open,), daemon=True)
        holder.start()
        assert opened.wait(60)
        others: set[str] = set()

        def churn(count: int) -> None:
            with httpx.Client(timeout=30) as http:
                for _ in range(count):
                    others.add(raw_mcp_session(http, serve.mcp_url))

        churners = [threading.Thread(target=churn, args=(1250,)) for _ in range(4)]
        for churner in churners:
            churner.start()
        for churner in churners:
            churner.join()
        assert len(others) == 5000 and seen["session"] not in others
        assert serve.bound_when_settled(1) == 1  # only the open connection is bound
        others_done.set()
        holder.join(60)
        assert seen["after"] == seen["session"]
        assert seen["todos"] == TODOS["todos"]
        assert seen["bound while open"] == 1
        assert serve.bound_when_settled(0) == 0


# -- sessions made at first use, not at launch or listing (finding 7) -------------------------

def test_stdio_creates_its_session_at_the_first_call_not_at_launch(  # issue 21 finding 7
    ledger: tuple[str, Path],
) -> None:
    command, *rest = sessionledger_command()
    db_url, workspace = ledger

    async def scenario() -> None:
        async with connected(server_params(*ledger), "2025-11-25") as client:
            await client.list_tools()
            assert sessions_of(db_url, workspace) == []
            written = await client.call_tool("TodoWrite", TODOS)
            assert sessions_of(db_url, workspace) == [session_of(written)]

    run(scenario)
    # launched, listed and closed again: no session either, and stderr names none
    server = subprocess.Popen(
        [command, *rest, "mcp", "--db", db_url, "--workspace", str(workspace)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workspace,
        env=server_env(),
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                       "params": {"_meta": _MODERN}}).encode() + b"\n")
        server.stdin.flush()
        assert "TodoWrite" in server.stdout.readline().decode()
        server.stdin.close()
        assert server.wait(timeout=60) == 0
        assert server.stderr.read().decode() == ""
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pipe in (server.stdout, server.stderr):
            pipe.close()
    assert len(sessions_of(db_url, workspace)) == 1


@pytest.mark.parametrize("era", ERAS)
def test_a_listing_only_http_session_creates_no_session(  # issue 21 finding 7
    tmp_path: Path, era: str,
) -> None:
    with running_server(tmp_path) as server:
        async def scenario() -> None:
            async with connected(f"{server.base_url}/mcp", era) as client:
                assert "TodoWrite" in {t.name for t in (await client.list_tools()).tools}

        run(scenario)
        with server.client() as http:
            assert http.get("/v1/sessions").json()["sessions"] == []


# -- the session handle of a request without an MCP session (finding 2, D156) ----------------

def test_the_sdk_client_at_its_defaults_writes_then_reads_todos_at_the_url(  # finding 2
    tmp_path: Path,
) -> None:  # issue 21 finding 2, acceptance 1
    with running_server(tmp_path) as server:
        async def scenario() -> None:
            async with Client(f"{server.base_url}/mcp") as client:  # the defaults: 2026-07-28
                tools = {t.name: t for t in (await client.list_tools()).tools}
                for tool in tools.values():
                    argument = CALLER_ARGUMENT if tool.name == "ReadSessionContext" \
                        else SESSION_ARGUMENT
                    assert argument in tool.input_schema["properties"], tool.name
                    assert argument not in tool.input_schema.get("required", [])
                written = await client.call_tool("TodoWrite", TODOS)
                assert not written.is_error
                session = session_of(written)
                assert text_of(written).splitlines()[0] == handle_line(session)
                read = await client.call_tool("TodoRead", {SESSION_ARGUMENT: session})
                assert read.structured_content["result"]["todos"] == TODOS["todos"]
                assert session_of(read) == session
                by_meta = await client.call_tool("TodoRead", {}, meta={SESSION_META: session})
                assert by_meta.structured_content["result"]["todos"] == TODOS["todos"]
                fresh = await client.call_tool("TodoRead", {})
                assert session_of(fresh) != session
                assert fresh.structured_content["result"]["todos"] == []

        run(scenario)
        with server.client() as http:
            assert len(http.get("/v1/sessions").json()["sessions"]) == 2


def test_the_sdk_client_at_its_defaults_writes_then_reads_todos_over_stdio(  # finding 2
    ledger: tuple[str, Path],
) -> None:  # issue 21 finding 2, acceptance 1: stdio is one connection, so one session
    async def scenario() -> None:
        async with Client(server_params(*ledger)) as client:
            assert client.session.protocol_version == "2026-07-28"
            tools = (await client.list_tools()).tools
            assert all(SESSION_ARGUMENT not in t.input_schema["properties"] for t in tools
                       if t.name != "ReadSessionContext")
            written = await client.call_tool("TodoWrite", TODOS)
            read = await client.call_tool("TodoRead", {})
        assert read.structured_content["result"]["todos"] == TODOS["todos"]
        assert session_of(read) == session_of(written)
        assert not text_of(read).startswith("[sessionledger session")

    run(scenario)
    assert len(sessions_of(*ledger)) == 1


def test_a_handle_naming_an_unknown_or_deleted_session_is_refused(  # issue 21 finding 2
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        with server.client() as http:
            deleted = http.post("/v1/sessions", json={}).json()["sessionId"]
            assert http.delete(f"/v1/sessions/{deleted}").status_code == 200

        async def scenario() -> None:
            async with Client(f"{server.base_url}/mcp") as client:
                unknown = await client.call_tool("TodoRead", {SESSION_ARGUMENT: "sess_NOPE"})
                gone = await client.call_tool("TodoWrite", {**TODOS, SESSION_ARGUMENT: deleted})
                wrong = await client.call_tool("TodoRead", {SESSION_ARGUMENT: 7})
            assert unknown.is_error and "sess_NOPE" in text_of(unknown)
            assert unknown.structured_content["error"]["code"] == "session_not_found"
            assert gone.is_error and gone.structured_content["error"]["code"] == "session_deleted"
            assert wrong.is_error and wrong.structured_content["error"]["code"] == "invalid_input"

        run(scenario)
        with server.client() as http:  # nothing was created or written
            assert [s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]] == []
            assert http.get(f"/v1/sessions/{deleted}").status_code == 410


def test_the_sessionless_listing_offers_list_models_when_the_workspace_enables_it(  # finding 2
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / ".sessionledger").mkdir(parents=True)
    (workspace / ".sessionledger" / "config.toml").write_text(CATALOG_TOML, encoding="utf-8")
    with running_server(tmp_path) as server:
        async def scenario() -> None:
            async with Client(f"{server.base_url}/mcp") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert "ListModels" in names
                listed = await client.call_tool("ListModels", {})
                assert not listed.is_error and "/" in text_of(listed)

        run(scenario)


def test_a_2025_client_over_http_keeps_one_session_per_mcp_session(  # issue 21 finding 2
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        async def scenario() -> None:
            url = f"{server.base_url}/mcp"
            async with connected(url, "2025-11-25") as one, connected(url, "2025-11-25") as two:
                tools = (await one.list_tools()).tools
                assert all(SESSION_ARGUMENT not in t.input_schema["properties"] for t in tools
                           if t.name != "ReadSessionContext")
                first = session_of(await one.call_tool("TodoWrite", TODOS))
                second = session_of(await two.call_tool("TodoRead", {}))
                again = await one.call_tool("TodoRead", {})
                assert first != second and session_of(again) == first
                assert again.structured_content["result"]["todos"] == TODOS["todos"]
                assert not text_of(again).startswith("[sessionledger session")

        run(scenario)


# -- finding 7: the protocol's details -------------------------------------------------------

@pytest.mark.parametrize("era", ERAS)
def test_an_unknown_tool_is_a_json_rpc_error(  # issue 21 finding 7
    ledger: tuple[str, Path], era: str,
) -> None:
    async def scenario() -> None:
        async with connected(server_params(*ledger), era) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("NoSuchTool", {})
        assert raised.value.error.code == INVALID_PARAMS
        assert raised.value.error.message == "Unknown tool: NoSuchTool"

    run(scenario)
    assert sessions_of(*ledger) == []


@pytest.mark.parametrize("era", ERAS)
def test_an_unknown_or_deleted_url_session_is_a_json_rpc_error(  # issue 21 finding 7
    tmp_path: Path, era: str,
) -> None:
    with running_server(tmp_path) as server:
        with server.client() as http:
            deleted = http.post("/v1/sessions", json={}).json()["sessionId"]
            assert http.delete(f"/v1/sessions/{deleted}").status_code == 200

        async def scenario() -> None:
            for wanted, status in (("sess_NOPE", 404), (deleted, 410)):
                async with connected(f"{server.base_url}/mcp?session={wanted}", era) as client:
                    with pytest.raises(MCPError) as listed:
                        await client.list_tools()
                    with pytest.raises(MCPError) as called:
                        await client.call_tool("TodoRead", {})
                for raised in (listed.value, called.value):
                    assert raised.error.code == INVALID_PARAMS and wanted in raised.error.message
                    assert isinstance(raised.error.data, dict)
                    assert raised.error.data["status"] == status

        run(scenario)
        assert "Traceback" not in server.log()
        with server.client() as http:
            assert http.get("/v1/sessions").json()["sessions"] == []


_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "dies", "version": "1"}}}
def _call(request_id: int, era: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "TodoWrite", "arguments": TODOS}
    if era == "2026-07-28":
        params["_meta"] = _MODERN
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("how", ["stops reading", "closes its input"])
def test_a_client_that_dies_ends_the_stdio_server_quietly(  # issue 21 finding 7
    ledger: tuple[str, Path], era: str, how: str,
) -> None:
    db_url, workspace = ledger
    command, *rest = sessionledger_command()
    server = subprocess.Popen(
        [command, *rest, "mcp", "--db", db_url, "--workspace", str(workspace)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workspace,
        env=server_env(),
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None

    def send(message: dict[str, Any]) -> None:
        assert server.stdin is not None
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    try:
        if era == "2025-11-25":
            send(_INITIALIZE)
            assert json.loads(server.stdout.readline())["id"] == 1
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(_call(2, era))
        assert json.loads(server.stdout.readline())["result"]["isError"] is False
        if how == "stops reading":
            server.stdout.close()  # the reader is gone: the next answer meets a broken pipe
            send(_call(3, era))
            deadline = time.monotonic() + 30
            while todo_writes(db_url, workspace) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # the call ran; its answer is written to nobody
        server.stdin.close()  # then its input ends too, as a dead client's does
        code = server.wait(timeout=60)
        stderr = server.stderr.read().decode()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pipe in (server.stdout, server.stderr):
            pipe.close()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


@pytest.mark.parametrize("era", ERAS)
def test_interaction_status_results_name_their_session(  # issue 21 finding 7
    ledger: tuple[str, Path], era: str,
) -> None:
    async def scenario() -> None:
        async with connected(server_params(*ledger), era) as client:  # no elicitation
            asked = await client.call_tool("AskUserQuestion", QUESTION)
            assert asked.structured_content["status"] == "pending"
            before = version_of(session_of(asked))
            status = await client.call_tool(
                "InteractionStatus", {"interactionId": asked.structured_content["interactionId"]}
            )
            assert version_of(session_of(asked)) == before  # it reads; it records nothing
        assert status.structured_content["status"] == "pending"
        assert session_of(status) == session_of(asked)

    def version_of(session_id: str) -> int:
        with closing(open_store(ledger[0])) as store:
            return store.version(session_id)

    run(scenario)


@pytest.mark.parametrize("era", ERAS)
def test_thirty_concurrent_todo_writes_on_one_session_all_succeed(  # EG-6
    tmp_path: Path, era: str,
) -> None:  # issue 21 finding 7
    def todos(n: int) -> dict[str, Any]:
        return {"todos": [{"content": f"write {n}", "status": "pending", "priority": "low"}]}

    with running_server(tmp_path) as server:
        async def over_mcp() -> None:
            async with connected(f"{server.base_url}/mcp", era) as client:
                session = session_of(await client.call_tool("TodoRead", {}))
                handle = {SESSION_ARGUMENT: session} if era == "2026-07-28" else {}
                results: list[CallToolResult] = []

                async def write(n: int) -> None:
                    results.append(await client.call_tool("TodoWrite", {**todos(n), **handle}))

                async with anyio.create_task_group() as group:
                    for n in range(30):
                        group.start_soon(write, n)
                assert [r.is_error for r in results] == [False] * 30, [
                    text_of(r) for r in results if r.is_error]
                assert {session_of(r) for r in results} == {session}

        run(over_mcp)
        with server.client() as http:
            session = http.post("/v1/sessions", json={}).json()["sessionId"]
        statuses: list[int] = []

        def write_over_http(n: int) -> None:
            with server.client(timeout=60) as http:
                answer = http.post(f"/v1/sessions/{session}/tool-calls",
                                   json={"tool": "TodoWrite", "input": todos(n)})
                statuses.append(answer.status_code)

        writers = [threading.Thread(target=write_over_http, args=(n,)) for n in range(30)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        assert statuses == [200] * 30


def test_in_process_writers_of_one_session_take_turns(tmp_path: Path) -> None:  # EG-6
    service = SessionService.open(f"sqlite:///{tmp_path / 'l.db'}", workspace_root=tmp_path)
    try:
        session = str(service.create_session()["sessionId"])
        errors: list[BaseException] = []
        entered = threading.Barrier(30)

        def write(n: int) -> None:
            entered.wait()
            try:
                service.tools.call(session, "TodoWrite", {"todos": [
                    {"content": f"t{n}", "status": "pending", "priority": "low"}]})
            except BaseException as exc:  # collected for the assertion
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(n,)) for n in range(30)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        assert errors == []
        written = [e for e in service.iter_events(session) if e.type == "TodosWritten"]
        assert len(written) == 30
        assert len(service.ledger.writers) == 0  # no lock is kept for a session nobody writes
    finally:
        service.close()


@pytest.mark.parametrize("era", ERAS)
def test_every_tool_is_fully_annotated_and_its_results_match_its_output_schema(  # finding 7
    tmp_path: Path, era: str,
) -> None:  # issue 21 finding 7 (and 8: outputSchema, annotations)
    with serve_in_process(tmp_path, config=CATALOG_TOML) as serve:
        other = str(serve.service.create_session()["sessionId"])

        async def scenario() -> None:
            async with connected(f"{serve.mcp_url}?session={other}", "2025-11-25") as client:
                await client.call_tool("TodoWrite", TODOS)
            async with connected(serve.mcp_url, era) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools) == {*TITLES}
                for name, tool in tools.items():
                    annotations = tool.annotations
                    assert annotations is not None and tool.title == TITLES[name]
                    assert annotations.title == TITLES[name]
                    assert annotations.open_world_hint is False
                    assert annotations.idempotent_hint is (True if name in IDEMPOTENT else None)
                    if name in SERVICE_TOOLS:
                        assert annotations.read_only_hint is SERVICE_TOOLS[name].read_only
                        assert annotations.destructive_hint is SERVICE_TOOLS[name].destructive
                    assert tool.output_schema == CALL_DOCUMENT_SCHEMA
                handle: dict[str, Any] = {}
                results: list[CallToolResult] = []

                async def call(name: str, arguments: dict[str, Any]) -> CallToolResult:
                    # the SDK client validates structuredContent against the outputSchema
                    key = CALLER_ARGUMENT if name == "ReadSessionContext" else SESSION_ARGUMENT
                    extra = {key: handle["session"]} if handle and era == "2026-07-28" else {}
                    result = await client.call_tool(name, {**arguments, **extra})
                    assert not result.is_error, (name, text_of(result))
                    handle.setdefault("session", session_of(result))
                    results.append(result)
                    return result

                await call("TodoWrite", TODOS)
                await call("TodoRead", {})
                await call("ListModels", {})
                await call("ReadSessionContext", {"sessionId": other, "query": "todos"})
                asked = await call("AskUserQuestion", QUESTION)
                await call("InteractionStatus",
                           {"interactionId": asked.structured_content["interactionId"]})
                await call("EnterPlanMode", {})
                pending = await call("ExitPlanMode", PLAN)
                assert pending.structured_content["status"] == "pending"
                for result in results:
                    _VALID.validate(result.structured_content)
                assert {session_of(r) for r in results} == {handle["session"]}

        run(scenario)


@pytest.mark.parametrize("era", ERAS)
def test_a_refused_call_is_an_error_result_its_output_schema_allows(  # issue 40 finding 1
    tmp_path: Path, era: str,
) -> None:
    # A client that validates an error result's structuredContent (the Inspector CLI and
    # Gemini CLI do) must find the ledger's error body allowed, and the model gets the
    # ledger's message.
    with serve_in_process(tmp_path) as serve:

        async def scenario() -> None:
            async with connected(serve.mcp_url, era) as client:
                schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
                for name, arguments, words in REFUSED_CALLS:
                    result = await client.call_tool(name, arguments)
                    assert result.is_error, (name, text_of(result))
                    error = result.structured_content["error"]
                    assert error["code"] in {"invalid_input", "not_found"}, (name, error)
                    assert words in error["message"], (name, error)
                    assert text_of(result).endswith(error["message"]), (name, text_of(result))
                    Draft202012Validator(schemas[name]).validate(result.structured_content)
                    _VALID.validate(result.structured_content)
                without_error = dict(result.structured_content)
                del without_error["error"]  # nor is a body with neither shape allowed
                assert not _VALID.is_valid(without_error)

        run(scenario)


@pytest.mark.parametrize("era", ERAS)
def test_log_lines_reach_a_client_at_or_above_its_level(  # issue 21 finding 8 (logging)
    ledger: tuple[str, Path], era: str,
) -> None:
    received: list[LoggingMessageNotificationParams] = []

    async def logged(params: LoggingMessageNotificationParams) -> None:
        received.append(params)

    async def scenario() -> None:
        opt_in = {"log_level": "warning"} if era == "2026-07-28" else {}
        async with connected(
            server_params(*ledger), era, logging_callback=logged, **opt_in
        ) as client:
            if era == "2025-11-25":
                await client.call_tool("TodoRead", {})  # before any level: nothing is sent
                with pytest.warns(MCPDeprecationWarning):  # deprecated in 2026-07-28 only
                    await client.set_logging_level("warning")
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                await client.call_tool("TodoRead", {})  # info lines only: below the level
                refused = await client.call_tool("TodoWrite", {"todos": "no"})
        assert refused.is_error
        assert [(r.level, r.logger, r.data["event"], r.data["code"]) for r in received] == [
            ("warning", "sessionledger", "call refused", "invalid_input")]

    run(scenario)
