"""The streamable-HTTP transport of the MCP server, mounted on ``serve`` at ``/mcp``.

The same :class:`~sessionledger.mcp.server.LedgerMcp` tools as stdio, behind the SDK's
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`. A manager runs
once, so :meth:`McpHttpTransport.running` (entered by the app's lifespan) starts a fresh one
each time the app starts, and the ASGI endpoint hands requests to the running one (503 while
none runs). Each MCP session gets its own ledger session at its first tool call, held
until the MCP session ends (DELETE, idle timeout, the manager stopping); ``/mcp?session=sess_…``
resumes one. A 2026-07-28 request has no MCP session: it names its ledger session in a
``sessionId`` argument, or starts a new one (D156). Pending results name the web page of the
server that answered. ``Host`` and ``Origin`` are checked in front of it by the app's
:class:`~sessionledger.http.middleware.HostOriginMiddleware`, the one rule of every route
(SPEC EG-3), so the SDK's own DNS-rebinding check, which would apply other lists, is off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..service.sessions import SessionService
from .server import LedgerMcp, McpOptions

__all__ = ["MCP_PATH", "McpHttpTransport"]

MCP_PATH = "/mcp"


_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The SDK's Host and Origin lists stay unused: the app's middleware answered them already."""


class McpHttpTransport:
    """The ``/mcp`` endpoint (an ASGI app) and the lifetime of its session manager."""

    def __init__(self, service: SessionService) -> None:
        self.ledger = LedgerMcp(service, McpOptions())
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run a session manager until the app stops; open MCP sessions end then."""
        manager = StreamableHTTPSessionManager(
            app=self.ledger.server(), security_settings=_SECURITY
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:
            body = {"error": {"code": "service_unavailable",
                              "message": "the MCP endpoint is not running", "details": None}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        await _completed(manager.asgi_app, scope, receive, send)


async def _completed(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Run ``app``, then end a response it started and left open.

    On shutdown the SDK's event stream (sse-starlette) stops without its last body message,
    which uvicorn reports as an error: the stream is ended properly here instead.
    """
    state = {"started": False, "ended": False}

    async def watched(message: Message) -> None:
        if message["type"] == "http.response.start":
            state["started"] = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            state["ended"] = True
        await send(message)

    try:
        await app(scope, receive, watched)
    finally:
        if state["started"] and not state["ended"]:
            with anyio.CancelScope(shield=True), suppress(OSError, RuntimeError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
