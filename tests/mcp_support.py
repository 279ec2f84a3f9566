"""Helpers for tests that drive ``sessionledger mcp`` with the ``mcp`` SDK's own client.

:func:`mcp_client` spawns the *installed* command over stdio (``stdio_client``), initializes a
``ClientSession`` — with an elicitation callback when one is given, so the client declares the
capability — and closes the process on exit. :class:`Answers` is an elicitation callback that
replays prepared answers and keeps what it was asked. :func:`normalized` turns a session's
events into comparable ``(type, data)`` pairs with ids replaced by their order of appearance.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
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
from sessionledger.mcp.http import MCP_PATH, McpHttpTransport

__all__ = [
    "PLAN", "QUESTION", "TODOS", "Answers", "InProcessServe", "NeverAnswers", "kill_servers",
    "masked", "mcp_client", "normalized", "serve_in_process", "server_env", "server_params",
    "text_of",
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
_ID = re.compile(r"\b(?:sess|call|int|chk)_[0-9A-Z]{1,26}(?:\b|…)")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def server_params(db_url: str, workspace: Path, *args: str) -> StdioServerParameters:
    """The installed ``sessionledger mcp`` over ``db_url`` in ``workspace``."""
    command, *rest = sessionledger_command()
    return StdioServerParameters(
        command=command,
        args=[*rest, "mcp", "--db", db_url, "--workspace", str(workspace), *args],
        cwd=str(workspace), env=server_env(),
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
    db_url: str, workspace: Path, *args: str, elicitation: ElicitationFnT | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized client session with a fresh ``sessionledger mcp`` process."""
    async with (
        stdio_client(server_params(db_url, workspace, *args)) as (read, write),
        ClientSession(read, write, elicitation_callback=elicitation) as session,
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
def serve_in_process(directory: Path, *, config: str | None = None) -> Iterator[InProcessServe]:
    """Serve the app over a fresh SQLite file in ``directory`` until the block ends."""
    workspace = directory / "workspace"
    workspace.mkdir(exist_ok=True)
    if config is not None:
        (workspace / ".sessionledger").mkdir(exist_ok=True)
        (workspace / ".sessionledger" / "config.toml").write_text(config, encoding="utf-8")
    port = free_port()
    service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}", workspace_root=workspace)
    app = create_app(service=service, settings=ServerSettings(workspace_root=workspace, port=port))
    (transport,) = [getattr(r, "endpoint", None) for r in app.router.routes
                    if getattr(r, "path", None) == MCP_PATH]
    assert isinstance(transport, McpHttpTransport)
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


class Answers:
    """An elicitation callback answering with ``replies`` in order: ``(action, content)``."""

    def __init__(self, *replies: tuple[str, dict[str, Any] | None]) -> None:
        self._replies = list(replies)
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        action, content = self._replies.pop(0)
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
