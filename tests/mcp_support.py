"""Helpers for tests that drive ``sessionledger mcp`` with the ``mcp`` SDK's own client.

:func:`mcp_client` spawns the *installed* command over stdio (``stdio_client``), initializes a
``ClientSession`` — with an elicitation callback when one is given, so the client declares the
capability — and closes the process on exit. :class:`Answers` is an elicitation callback that
replays prepared answers and keeps what it was asked; :class:`Scripted` runs one step per
request (:func:`reply`, :func:`never`, or the test's own). :class:`UrlOnlySession` declares URL
elicitation only; :func:`call_resetting_on_progress` calls a tool as a host that resets its
request timeout on progress. :func:`normalized` turns a session's events into comparable
``(type, data)`` pairs with ids replaced by their order of appearance.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import psutil
import uvicorn
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.stdio import get_default_environment
from server_support import free_port, sessionledger_command

from eventlog import RecordedEvent
from sessionledger import ServerSettings, SessionService
from sessionledger.http import create_app
from sessionledger.http.app import McpOnDemand
from sessionledger.mcp import MCP_PATH
from sessionledger.mcp.http import McpHttpTransport

__all__ = [
    "PLAN", "QUESTION", "TODOS", "Answers", "InProcessServe", "NeverAnswers", "Scripted",
    "UrlOnlySession", "abandon_once_asked", "abandon_when", "call_resetting_on_progress",
    "kill_servers", "masked", "mcp_client", "never", "normalized", "reply", "serve_in_process",
    "server_env", "server_params", "text_of",
]

QUESTION = {"questions": [{
    "question": "Which database?", "header": "Database", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "one file"},
                {"label": "Postgres", "description": "a server"}],
}]}
TODOS = {"todos": [
    {"content": "Write the tests", "status": "in_progress", "priority": "high"},
    {"content": "Ship it", "status": "pending", "priority": "low"},
]}
PLAN = {"plan": "1. Add the MCP server\n2. Test it"}
REFUSED_CALLS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("TodoWrite", {"todos": "no"}, "todos: Input should be a valid list"),
    ("TodoRead", {"extra": 1}, "extra: Extra inputs are not permitted"),
    ("AskUserQuestion", {"questions": []}, "questions: List should have at least 1 item"),
    ("InteractionStatus", {"interactionId": "int_NOPE"}, "interaction"),
    ("ReadSessionContext", {"query": "todos"}, "sessionId: Field required"),
)
"""A call each tool refuses, and words of the ledger's message (issue 40 finding 1: clients
that validate error results dropped that message for a schema error of their own)."""
_ID = re.compile(r"\b(?:sess|call|int|chk)_[0-9A-Z]{1,26}(?:\b|…)")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def server_params(
    db_url: str, workspace: Path, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    """The installed ``sessionledger mcp`` over ``db_url`` in ``workspace``, with ``env`` on
    top of the SDK's safe default environment and this test's ``PYTHONPATH`` (the SDK passes
    on only a few variables, so the command would import another checkout's code)."""
    command, *rest = sessionledger_command()
    return StdioServerParameters(
        command=command,
        args=[*rest, "mcp", "--db", db_url, "--workspace", str(workspace), *args],
        cwd=str(workspace), env={**server_env(), **(env or {})},
    )


def server_env() -> dict[str, str]:
    """The SDK's default environment for a server it spawns, plus this test's ``PYTHONPATH``
    (so the command runs the code under test, not only the installed copy)."""
    env = get_default_environment()
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@asynccontextmanager
async def mcp_client(
    db_url: str, workspace: Path, *args: str, elicitation: ElicitationFnT | None = None,
    env: dict[str, str] | None = None, session_class: type[ClientSession] = ClientSession,
) -> AsyncIterator[ClientSession]:
    """An initialized client session (2025-11-25, the handshake) with a fresh
    ``sessionledger mcp`` process."""
    async with (
        stdio_client(server_params(db_url, workspace, *args, env=env)) as (read, write),
        session_class(read, write, elicitation_callback=elicitation) as session,
    ):
        await session.initialize()
        yield session


class InProcessServe:
    """The app of ``serve`` under uvicorn in a thread of the test process, on a real port:
    its MCP transport (and so its bindings) can be inspected."""

    def __init__(self, base_url: str, transport: McpHttpTransport, service: SessionService):
        self.base_url = base_url
        self.transport = transport
        self.service = service

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}{MCP_PATH}"

    def bound_when_settled(self, expected: int, *, within_s: float = 20.0) -> int:
        """The transport's bound connections once they equal ``expected`` (connections end
        in the server's own time after a DELETE), or what they are after ``within_s``."""
        deadline = time.monotonic() + within_s
        while self.transport.ledger.bound_connections != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.transport.ledger.bound_connections


@contextmanager
def serve_in_process(
    directory: Path, *, config: str | None = None, idle_timeout_s: float | None = None,
) -> Iterator[InProcessServe]:
    """Serve the app over a fresh SQLite file in ``directory`` until the block ends (MCP
    sessions idle for ``idle_timeout_s`` end, when given)."""
    workspace = directory / "workspace"
    workspace.mkdir(exist_ok=True)
    if config is not None:
        (workspace / ".sessionledger").mkdir(exist_ok=True)
        (workspace / ".sessionledger" / "config.toml").write_text(config, encoding="utf-8")
    port = free_port()
    service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}", workspace_root=workspace)
    app = create_app(service=service, settings=ServerSettings(workspace_root=workspace, port=port))
    (endpoint,) = [getattr(r, "endpoint", None) for r in app.router.routes
                   if getattr(r, "path", None) == MCP_PATH]
    assert isinstance(endpoint, McpOnDemand)
    transport = endpoint.transport()  # built now (else at the first request): inspected below
    if idle_timeout_s is not None:
        transport.session_idle_timeout_s = idle_timeout_s
    server = uvicorn.Server(uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
    ))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield InProcessServe(f"http://127.0.0.1:{port}", transport, service)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        service.close()
    assert not thread.is_alive(), "uvicorn did not stop"


def kill_servers(db_url: str) -> int:
    """SIGKILL this test's ``sessionledger mcp`` processes on ``db_url``; how many."""
    killed = 0
    for child in psutil.Process().children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "mcp" in command and db_url in command:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            killed += 1
    return killed


PERSON_S = 1.3
"""How long the scripted person takes to decline a form: a decline sooner than the server's
``unattended_s`` (1 s) is no person's and leaves the call pending (issue 40)."""


class Answers:
    """An elicitation callback answering with ``replies`` in order: ``(action, content)``;
    a decline after ``decline_after_s`` (a person's moment; 0: a client declining by itself)."""

    def __init__(self, *replies: tuple[str, dict[str, Any] | None],
                 decline_after_s: float = PERSON_S) -> None:
        self._replies = list(replies)
        self._decline_after_s = decline_after_s
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        action, content = self._replies.pop(0)
        if action == "decline":
            await anyio.sleep(self._decline_after_s)
        return types.ElicitResult.model_validate({"action": action, "content": content})


class NeverAnswers:
    """An elicitation callback that keeps its form open until the server withdraws it
    (``notifications/cancelled`` cancels the callback); counts both."""

    def __init__(self) -> None:
        self.opened = 0
        self.withdrawn = 0

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.opened += 1
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.withdrawn += 1
            raise
        raise AssertionError("sleep_forever returned")


Step = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]


class Scripted:
    """An elicitation callback running one step per request, in order: each step gets the
    request's params and returns the result (it may wait, act elsewhere first, or never
    return). Keeps what it was asked; counts the requests the server withdrew."""

    def __init__(self, *steps: Step) -> None:
        self._steps = list(steps)
        self.asked: list[types.ElicitRequestParams] = []
        self.withdrawn = 0

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked.append(params)
        step = self._steps.pop(0)
        try:
            return await step(params)
        except anyio.get_cancelled_exc_class():
            self.withdrawn += 1
            raise


def reply(action: str, content: dict[str, Any] | None = None) -> Step:
    """A step answering at once."""
    async def step(_params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult.model_validate({"action": action, "content": content})

    return step


async def never(_params: types.ElicitRequestParams) -> types.ElicitResult:
    """A step that keeps its form open until the server withdraws it."""
    await anyio.sleep_forever()
    raise AssertionError("sleep_forever returned")


class UrlOnlySession(ClientSession):
    """A client session that declares URL elicitation only (no forms)."""

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        declared = super()._build_capabilities(version)
        return declared.model_copy(update={"elicitation": types.ElicitationCapability(
            url=types.UrlElicitationCapability()
        )})


async def call_resetting_on_progress(
    session: ClientSession, name: str, arguments: dict[str, Any], *, timeout_s: float,
    progress: list[float] | None = None,
) -> tuple[types.CallToolResult | None, list[float]]:
    """``tools/call`` as a host with ``resetTimeoutOnProgress`` makes it (the TypeScript SDK's
    option): abandoned — ``notifications/cancelled`` — once ``timeout_s`` pass without a
    progress notification. The result (``None`` when it timed out) and the progress values
    (appended to ``progress`` as they come, when given)."""
    progress = [] if progress is None else progress
    scope = anyio.CancelScope(deadline=anyio.current_time() + timeout_s)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        scope.deadline = anyio.current_time() + timeout_s

    with scope:
        return await session.call_tool(name, arguments, progress_callback=on_progress), progress
    return None, progress


async def abandon_when(request: Callable[[], Awaitable[Any]], ready: Callable[[], bool]) -> None:
    """Send ``request()`` and abandon it — ``notifications/cancelled``, as a host's own timeout
    sends it — once ``ready()`` holds (at most 30 s): the host gives up after the server got
    that far, however long it took (a fixed timeout would race the server's commit on a busy
    machine: issue 36)."""
    with anyio.CancelScope() as host:
        async with anyio.create_task_group() as group:
            async def give_up_when_ready() -> None:
                with anyio.fail_after(30):
                    while not ready():
                        await anyio.sleep(0.01)
                host.cancel()

            group.start_soon(give_up_when_ready)
            await request()
    assert host.cancelled_caught, "the request was answered before the host gave up"


async def abandon_once_asked(
    session: ClientSession, form: Scripted | NeverAnswers, name: str, arguments: dict[str, Any]
) -> None:
    """``tools/call`` that the host abandons once the call's form is open (:func:`abandon_when`)."""
    asked = form.opened if isinstance(form, NeverAnswers) else len(form.asked)

    def opened() -> bool:
        return (form.opened if isinstance(form, NeverAnswers) else len(form.asked)) > asked

    await abandon_when(lambda: session.call_tool(name, arguments), opened)


def text_of(result: types.CallToolResult) -> str:
    """The text content of a tool result (one text block)."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def _renamed(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        value = _TIME.sub("<time>", value)
        return _ID.sub(lambda m: names.setdefault(m.group(0), f"<id{len(names)}>"), value)
    if isinstance(value, dict):
        return {k: _renamed(v, names) for k, v in value.items() if k != "recordedAt"}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return value


def normalized(events: Iterable[RecordedEvent], *, skip: Sequence[str] = ()) -> list[Any]:
    """``(type, actor, data)`` of each event with ids numbered by first appearance."""
    names: dict[str, str] = {}
    return [
        _renamed([e.type, e.actor, e.to_wire()["data"]], names)
        for e in events if e.type not in skip
    ]


def masked(lines: Iterable[str]) -> list[str]:
    """Text lines (``replay``'s) with ids numbered by first appearance and times masked."""
    names: dict[str, str] = {}
    return [str(_renamed(line, names)) for line in lines]
