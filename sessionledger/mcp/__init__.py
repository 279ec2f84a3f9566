"""The Model Context Protocol server (issue 12): the session tools for any MCP client.

:mod:`.server` lists the tools (the schemas and descriptions of their pydantic contracts,
annotations from their descriptors, the call document as their output schema), binds one MCP
connection to one ledger session for the connection's life, created at its first call — or,
on a request without an MCP session, takes the session as a ``sessionId`` handle (D156) — runs
every call through :meth:`ToolService.call <sessionledger.tools.service.ToolService.call>`, the path
the HTTP routes take, and turns a tool-call document into an MCP tool result; :mod:`.asking`
asks the user about a call that waits for them and records the answer, with the forms of
:mod:`.forms` (one elicitation per questionnaire or plan approval, carried in a 2026-07-28
``input_required`` round where the server cannot ask mid-call), sends progress while it waits
and records a withdrawal when the caller cancels (D157); :mod:`.tasks` serves the 2025-11-25
tasks of AskUserQuestion and ExitPlanMode, read from the log (D158); :mod:`.resources` serves a
session's resources, their change notices and the prompts (D159); :mod:`.http` is the
streamable-HTTP endpoint ``serve`` mounts at ``/mcp``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import (
        DEFAULT_WEB_URL,
        SESSION_ARGUMENT,
        SESSION_META,
        LedgerMcp,
        McpOptions,
        run_stdio,
    )

__all__ = [
    "DEFAULT_WEB_URL", "MCP_PATH", "SESSION_ARGUMENT", "SESSION_META", "LedgerMcp", "McpOptions",
    "run_stdio",
]

MCP_PATH = "/mcp"
"""Where ``serve`` mounts the streamable-HTTP endpoint (:mod:`.http`, loaded at its first
request)."""


def __getattr__(name: str) -> Any:
    """The server's names on first use: :mod:`.early` is imported before the SDK (issue 38)."""
    if name in __all__ and name != "MCP_PATH":
        value = getattr(import_module(".server", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
