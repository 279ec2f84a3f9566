"""The MCP server driven by clients nobody here wrote (issue 21 acceptance 1).

Three third-party clients, each pinned: the MCP Inspector's CLI (``mcp-inspector --cli``,
npm), a small host on the TypeScript SDK v2 client (``tests/node/host.mjs``, npm) and the
official Python SDK's ``Client`` with its default settings. With each, TodoWrite and then
TodoRead succeed at the documented URL (``http://127.0.0.1:PORT/mcp`` on a real
``sessionledger serve``) and over stdio (``sessionledger mcp --db … --workspace …``), on the
client's default protocol era and on the other one it can choose.

On a 2026-07-28 request over HTTP there is no MCP session: the first call creates a ledger
session and names it in its result's ``_meta["sessionledger/sessionId"]``, and the next call
passes it as its ``sessionId`` argument (D156). On a 2025 handshake connection, and over stdio,
the connection carries the session. The Inspector runs one request per invocation, so its
second invocation resumes the session the documented way: ``sessionId`` (2026-07-28),
``/mcp?session=`` (handshake era over HTTP) or ``sessionledger mcp --session`` (stdio).

The Node clients are installed from ``tests/node/package-lock.json`` by the ``node_clients``
fixture (see ``node_support``); without node they are skipped, on CI they fail.
"""

from __future__ import annotations

import json
import os
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_support import QUESTION, REFUSED_CALLS, TODOS
from node_support import NODE_PROJECT, NodeClients, run_json_lines, running_host
from server_support import ServerProcess, running_server, sessionledger_command

from sessionledger.mcp import SESSION_META

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 60.0
MODERN = "2026-07-28"
INSPECTOR = "@modelcontextprotocol/inspector"
TS_CLIENT = "@modelcontextprotocol/client"


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, Path]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    return f"sqlite:///{tmp_path / 'ledger.db'}", workspace


def stdio_command(db_url: str, workspace: Path, *args: str) -> list[str]:
    return [*sessionledger_command(), "mcp", "--db", db_url, "--workspace", str(workspace), *args]


def session_of(result: dict[str, Any]) -> str:
    """The ledger session a tool result names (D156: ``_meta``, or ``structuredContent``)."""
    session = (result.get("_meta") or {}).get(SESSION_META)
    session = session or (result.get("structuredContent") or {}).get("sessionId")
    assert isinstance(session, str) and session.startswith("sess_"), result
    return session


def todos_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    assert not result.get("isError"), result
    return list(result["structuredContent"]["result"]["todos"])


# -- the MCP Inspector CLI ----------------------------------------------------------------------


INSPECTOR_TOOL_ERROR = 5
"""The Inspector CLI's exit status when the tool's result is ``isError`` (its ``EXIT_CODES.
TOOL_ERROR``: every error result, after printing it), not a failure of the client."""


def inspect(
    clients: NodeClients, home: Path, era: str, target: list[str], *args: str,
    exit_status: int = 0,
) -> dict[str, Any]:
    """One ``mcp-inspector --cli`` invocation against ``target`` (a URL, or a command after
    ``--``); the result it prints with ``--format json`` (and exits ``exit_status``)."""
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "npm_config_update_notifier": "false"}
    if target[0] != "--":
        transport = ["--transport", "http"]
    elif "PYTHONPATH" in os.environ:  # a stdio server gets the SDK's default environment
        transport = ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"]
    else:
        transport = []
    code, lines, stderr = run_json_lines(
        clients.inspector("--protocol-era", era, "--format", "json", *transport, *args, *target),
        timeout=RUN_TIMEOUT_S, env=env,
    )
    assert code == exit_status and len(lines) == 1, (code, lines, stderr)
    return dict(lines[0]["result"])


def tool_call(name: str, arguments: dict[str, Any]) -> tuple[str, ...]:
    return ("--method", "tools/call", "--tool-name", name,
            "--tool-args-json", json.dumps(arguments))


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_the_inspector_cli_lists_writes_and_reads_todos_at_the_documented_url(  # issue 21 finding 2
    node_clients: NodeClients, server: ServerProcess, tmp_path: Path, era: str
) -> None:
    url = f"{server.base_url}/mcp"
    listed = inspect(node_clients, tmp_path / "home", era, [url], "--method", "tools/list")
    assert {"TodoWrite", "TodoRead"} <= {tool["name"] for tool in listed["tools"]}
    written = inspect(node_clients, tmp_path / "home", era, [url], *tool_call("TodoWrite", TODOS))
    session = session_of(written)
    if era == "legacy":  # a new MCP session: it resumes the ledger session by ?session=
        read = inspect(node_clients, tmp_path / "home", era, [f"{url}?session={session}"],
                       *tool_call("TodoRead", {}))
    else:  # auto negotiates 2026-07-28: no MCP session, the call names its ledger session
        read = inspect(node_clients, tmp_path / "home", era, [url],
                       *tool_call("TodoRead", {"sessionId": session}))
    assert todos_of(read) == TODOS["todos"]
    assert session_of(read) == session


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_the_inspector_cli_writes_and_reads_todos_over_stdio(
    node_clients: NodeClients, ledger: tuple[str, Path], tmp_path: Path, era: str
) -> None:
    home = tmp_path / "home"
    command = ["--", *stdio_command(*ledger)]
    session = session_of(inspect(node_clients, home, era, command, *tool_call("TodoWrite", TODOS)))
    read = inspect(node_clients, home, era, [*command, "--session", session],
                   *tool_call("TodoRead", {}))
    assert todos_of(read) == TODOS["todos"]
    assert session_of(read) == session


def assert_refused_with_the_ledgers_message(name: str, result: dict[str, Any]) -> None:
    """An error result whose text is the ledger's message and whose structured content is
    the error body the tool's ``outputSchema`` allows."""
    assert result["isError"] is True, (name, result)
    message = result["structuredContent"]["error"]["message"]
    assert result["structuredContent"]["error"]["code"] in {"invalid_input", "not_found"}
    assert result["content"][0]["text"].endswith(message), (name, result)
    assert name in message or "int_NOPE" in message, (name, result)


@pytest.mark.slow  # a Node client per call: make verify (D182)
def test_the_inspector_cli_gets_the_ledgers_message_for_refused_calls(
    node_clients: NodeClients, server: ServerProcess, tmp_path: Path
) -> None:  # issue 40 acceptance 4: no schema error (it exited 1 with one before)
    url = f"{server.base_url}/mcp"
    for name, arguments, _words in REFUSED_CALLS:
        result = inspect(node_clients, tmp_path / "home", "legacy", [url],
                         *tool_call(name, arguments), exit_status=INSPECTOR_TOOL_ERROR)
        assert_refused_with_the_ledgers_message(name, result)


# -- a host on the TypeScript SDK v2 client ------------------------------------------------------


def host(clients: NodeClients, scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``tests/node/host.mjs`` over ``scenario``; the events it printed, which must end
    with ``done``."""
    code, events, stderr = run_json_lines(clients.host(scenario), timeout=RUN_TIMEOUT_S)
    assert code == 0 and events and events[-1] == {"event": "done"}, (code, events, stderr)
    return events


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool results of the host's steps, in order (each must have succeeded)."""
    steps = [event for event in events if event["event"] == "result"]
    assert all(step["ok"] for step in steps), steps
    return [step["result"] for step in steps]


WRITE_THEN_READ = [{"tool": "TodoWrite", "arguments": TODOS}, {"tool": "TodoRead"}]


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("era", [None, "auto"], ids=["default", "auto"])
def test_a_typescript_sdk_host_writes_and_reads_todos_at_the_documented_url(  # issue 21 finding 2
    node_clients: NodeClients, server: ServerProcess, era: str | None
) -> None:
    steps: list[dict[str, Any]] = [{"list": "tools"}, *WRITE_THEN_READ]
    if era == "auto":  # 2026-07-28: the second call names the session the first one created
        steps[-1] = {**steps[-1], "withSession": True}
    events = host(node_clients, {"connect": {"url": f"{server.base_url}/mcp"}, "era": era,
                                 "steps": steps})
    connected = events[0]
    assert connected["event"] == "connected"
    assert connected["protocolVersion"] == (MODERN if era == "auto" else "2025-11-25")
    listed, written, read = results(events)
    assert {"TodoWrite", "TodoRead"} <= {tool["name"] for tool in listed["tools"]}
    assert todos_of(read) == TODOS["todos"]
    assert session_of(read) == session_of(written)


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("era", [None, "auto"], ids=["default", "auto"])
def test_a_typescript_sdk_host_writes_and_reads_todos_over_stdio(
    node_clients: NodeClients, ledger: tuple[str, Path], era: str | None
) -> None:
    command, *args = stdio_command(*ledger)
    events = host(node_clients, {
        "connect": {"command": command, "args": args, "cwd": str(ledger[1])}, "era": era,
        "steps": WRITE_THEN_READ,
    })
    assert events[0]["protocolVersion"] == (MODERN if era == "auto" else "2025-11-25")
    written, read = results(events)
    assert todos_of(read) == TODOS["todos"]
    assert session_of(read) == session_of(written)


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("era", [None, "auto"], ids=["default", "auto"])
def test_a_typescript_sdk_host_gets_the_ledgers_message_for_refused_calls(
    node_clients: NodeClients, server: ServerProcess, era: str | None
) -> None:  # issue 40 acceptance 4: the SDK validates error results against the outputSchema
    events = host(node_clients, {
        "connect": {"url": f"{server.base_url}/mcp"}, "era": era,
        "steps": [{"list": "tools"},
                  *({"tool": name, "arguments": arguments}
                    for name, arguments, _words in REFUSED_CALLS)],
    })
    _listed, *refused = results(events)  # every step ok: no "does not match" from the SDK
    assert len(refused) == len(REFUSED_CALLS)
    for (name, _arguments, _words), result in zip(REFUSED_CALLS, refused, strict=True):
        assert_refused_with_the_ledgers_message(name, result)


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("era", [None, "auto"], ids=["default", "auto"])
def test_a_typescript_sdk_host_answers_a_question_in_its_form(
    node_clients: NodeClients, server: ServerProcess, era: str | None
) -> None:
    # 2025-11-25: an elicitation request during the call; 2026-07-28: input_required rounds,
    # which the TypeScript client fulfils through the same elicitation handler.
    events = host(node_clients, {
        "connect": {"url": f"{server.base_url}/mcp"}, "era": era,
        "elicitation": [{"action": "accept", "content": {"q1": "Postgres"}}],
        "steps": [{"tool": "AskUserQuestion", "arguments": QUESTION}],
    })
    (form,) = [event for event in events if event["event"] == "elicitation"]
    assert form["requestedSchema"]["properties"]["q1"]["enum"] == [
        "SQLite (Recommended)", "Postgres"]
    (asked,) = results(events)
    assert asked["structuredContent"]["result"]["answers"] == {"Which database?": "Postgres"}


@pytest.mark.slow  # a Node client per test: make verify (D182)
def test_a_typescript_sdk_host_form_is_withdrawn_when_the_question_is_answered_elsewhere(
    node_clients: NodeClients, tmp_path: Path
) -> None:  # D128, on the handshake era (the TypeScript client's default)
    with running_server(tmp_path) as server, running_host(node_clients, {
        "connect": {"url": f"{server.base_url}/mcp"}, "elicitation": [{"hold": True}],
        "steps": [{"tool": "AskUserQuestion", "arguments": QUESTION}],
    }) as running:
        running.wait_for("elicitation")
        with server.client() as http:
            (summary,) = http.get("/v1/sessions").json()["sessions"]
            session = summary["sessionId"]
            (waiting,) = http.get(f"/v1/sessions/{session}").json()["interactions"]
            answered = {**QUESTION, "answers": {"Which database?": "SQLite (Recommended)"}}
            response = http.post(
                f"/v1/sessions/{session}/interactions/{waiting['interactionId']}/respond",
                json={"decision": "modify", "input": answered},
            )
            assert response.status_code == 200, response.text
        assert running.wait_for("withdrawn")["step"] == 0
        result = running.wait_for("result")
        assert result["ok"] and result["sessionId"] == session
        assert result["result"]["structuredContent"]["result"]["answers"] == {
            "Which database?": "SQLite (Recommended)"}
        running.wait_for("done")


# -- a host whose request timeout is shorter than the person's answer (acceptance 2, D157) ------

PROGRESS_ENV = "SESSIONLEDGER_MCP_PROGRESS_S"
SECOND = {"questions": [{**QUESTION["questions"][0], "question": "Which queue?"}]}


def http_events(server: ServerProcess, session: str) -> list[dict[str, Any]]:
    with server.client() as http:
        page = http.get(f"/v1/sessions/{session}/events", params={"limit": 1000})
        assert page.status_code == 200, page.text
        return list(page.json()["events"])


@pytest.mark.slow  # a Node client per test: make verify (D182)
@pytest.mark.parametrize("kind", ["http", "stdio"])
def test_a_typescript_host_resetting_on_progress_gets_a_late_answer(  # issue 21 finding 3
    node_clients: NodeClients, tmp_path: Path, kind: str
) -> None:
    # The host gives up 1.7 s after the last sign of life (its RequestOptions.timeout, reset on
    # progress); the person answers its form after 2.1 s; the server sends progress every 0.5 s.
    scenario: dict[str, Any] = {
        "elicitation": [{"action": "accept", "content": {"q1": "Postgres"}, "delayMs": 2100}],
        "steps": [{"tool": "AskUserQuestion", "arguments": QUESTION, "timeoutMs": 1700,
                   "resetTimeoutOnProgress": True}],
    }
    if kind == "http":
        with running_server(tmp_path, env={PROGRESS_ENV: "0.5"}) as server:
            events = host(node_clients, {**scenario, "connect": {"url": f"{server.base_url}/mcp"}})
    else:
        workspace = tmp_path / "work"
        workspace.mkdir()
        command, *args = stdio_command(f"sqlite:///{tmp_path / 'ledger.db'}", workspace)
        events = host(node_clients, {**scenario, "connect": {
            "command": command, "args": args, "cwd": str(workspace),
            "env": {PROGRESS_ENV: "0.5"}}})
    (asked,) = results(events)
    assert asked["structuredContent"]["result"]["answers"] == {"Which database?": "Postgres"}
    progress = [event["progress"] for event in events if event["event"] == "progress"]
    assert len(progress) >= 3 and progress == sorted(progress)


@pytest.mark.slow  # a Node client per test: make verify (D182)
def test_a_typescript_host_that_aborts_sees_it_withdrawn_and_the_next_ask(  # issue 21 finding 6
    node_clients: NodeClients, tmp_path: Path
) -> None:
    # With its form open the host aborts the call (an AbortSignal: the SDK sends
    # notifications/cancelled); the server withdraws the form and records the call cancelled,
    # and the session's next question is asked in a form and answered.
    with running_server(tmp_path) as server, running_host(node_clients, {
        "connect": {"url": f"{server.base_url}/mcp"},
        "elicitation": [{"hold": True}, {"action": "accept", "content": {"q1": "Postgres"}}],
        "steps": [{"tool": "AskUserQuestion", "arguments": QUESTION, "abortOnStdin": True},
                  {"tool": "AskUserQuestion", "arguments": SECOND}],
    }) as running:
        assert running.wait_for("elicitation")["step"] == 0
        running.abort()
        aborted = running.wait_for("result")
        assert aborted["step"] == 0 and not aborted["ok"]
        answered = running.wait_for("result")
        assert answered["ok"], answered
        assert answered["result"]["structuredContent"]["result"]["answers"] == {
            "Which queue?": "Postgres"}
        running.wait_for("done")
        assert [event["event"] for event in running.events].count("withdrawn") == 1
        log = http_events(server, answered["sessionId"])
    decisions = [(e["actor"], e["data"]["decision"]) for e in log
                 if e["type"] == "InteractionResolved"]
    assert decisions == [("host", "withdrawn"), ("user", "modify")]
    completed = [e["data"]["status"] for e in log if e["type"] == "ToolCallCompleted"]
    assert completed == ["cancelled", "completed"]


# -- the official Python SDK client ------------------------------------------------------------


def python_sdk_write_then_read(
    target: str | StdioServerParameters, *, pass_session: bool, **options: Any
) -> tuple[str, str, list[dict[str, Any]]]:
    """TodoWrite then TodoRead with ``mcp.Client(target, **options)``: the protocol version,
    the session each call named, and the todos read."""
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with Client(target, **options) as client:
            seen["version"] = client.protocol_version
            written = await client.call_tool("TodoWrite", TODOS)
            assert not written.is_error, written
            assert written.meta is not None
            seen["written"] = written.meta[SESSION_META]
            arguments = {"sessionId": seen["written"]} if pass_session else {}
            read = await client.call_tool("TodoRead", arguments)
            assert not read.is_error, read
            assert read.meta is not None and read.structured_content is not None
            seen["read"] = read.meta[SESSION_META]
            seen["todos"] = read.structured_content["result"]["todos"]

    anyio.run(scenario)
    assert seen["read"] == seen["written"]
    return seen["version"], seen["read"], seen["todos"]


def test_the_python_sdk_client_with_its_defaults_at_the_documented_url(  # issue 21 finding 2
    server: ServerProcess,
) -> None:
    version, _session, todos = python_sdk_write_then_read(
        f"{server.base_url}/mcp", pass_session=True
    )
    assert version == MODERN  # the default mode "auto" negotiates 2026-07-28
    assert todos == TODOS["todos"]


def test_the_python_sdk_client_with_its_defaults_over_stdio(ledger: tuple[str, Path]) -> None:
    command, *args = stdio_command(*ledger)
    params = StdioServerParameters(command=command, args=args, cwd=str(ledger[1]),
                                   env=dict(os.environ))
    version, _session, todos = python_sdk_write_then_read(params, pass_session=False)
    assert version == MODERN
    assert todos == TODOS["todos"]


def test_the_python_sdk_client_on_the_handshake_era(
    server: ServerProcess, ledger: tuple[str, Path]
) -> None:
    command, *args = stdio_command(*ledger)
    params = StdioServerParameters(command=command, args=args, cwd=str(ledger[1]),
                                   env=dict(os.environ))
    for target in (f"{server.base_url}/mcp", params):
        version, _session, todos = python_sdk_write_then_read(
            target, pass_session=False, mode="legacy"
        )
        assert version == "2025-11-25"
        assert todos == TODOS["todos"]


# -- the pins ----------------------------------------------------------------------------------


def test_the_node_clients_are_pinned_exactly_and_installed_from_the_lock_file(
    node_clients: NodeClients,
) -> None:
    manifest = json.loads((NODE_PROJECT / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((NODE_PROJECT / "package-lock.json").read_text(encoding="utf-8"))
    pins = manifest["dependencies"]
    # axe-core is pinned here too: tests/browser/test_web_a11y.py injects it into the page
    assert set(pins) == {INSPECTOR, TS_CLIENT, "axe-core"}
    for package, version in pins.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), (package, version)
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
        assert node_clients.version(package) == version
    assert all("integrity" in entry for name, entry in lock["packages"].items() if name)


def test_the_tested_clients_table_names_the_pinned_versions() -> None:
    pins = json.loads((NODE_PROJECT / "package.json").read_text(encoding="utf-8"))
    docs = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    heading = re.search(r"^#+ Tested clients$", docs, re.MULTILINE)
    assert heading is not None
    table = docs[heading.end():].split("\n#", 1)[0]
    for package in (INSPECTOR, TS_CLIENT):
        assert f"`{package}` {pins['dependencies'][package]}" in table, package
    assert f"`mcp` {metadata.version('mcp')}" in table  # the SDK the suite runs with
