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
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import psutil
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.stdio import get_default_environment
from server_support import sessionledger_command

from eventlog import RecordedEvent

__all__ = [
    "PLAN", "QUESTION", "TODOS", "Answers", "NeverAnswers", "kill_servers", "masked", "mcp_client",
    "normalized", "server_env", "server_params", "text_of",
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
