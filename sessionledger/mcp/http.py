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
(EG-3), so the SDK's own DNS-rebinding check, which would apply other lists, is off.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import DEFAULT_MCP_MAX_SESSIONS
from ..service.sessions import SessionService
from . import MCP_PATH
from .jsonrpc import InFlight, Screened, screen
from .server import LedgerMcp, McpOptions

__all__ = ["DISCONNECT_REASON", "MCP_PATH", "McpHttpTransport"]

DISCONNECT_REASON = "the client disconnected"
"""The reason of the ``notifications/cancelled`` sent for a request whose client left."""


_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The SDK's Host and Origin lists stay unused: the app's middleware answered them already."""


class _RoomyManager(StreamableHTTPSessionManager):
    """The SDK's session manager, which at its limit refuses every new client (``503 Too many
    open sessions``) until a session ends or idles out (30 minutes): one process could lock
    every other client out. At the limit this one closes the session idle longest — none with
    a request or stream open — to admit the new one; that session's client is told ``404
    Session not found`` at its next request and starts a new one, as MCP clients do. It uses
    the manager's own bookkeeping (``_server_instances``, pinned SDK)."""

    def __init__(self, *args: Any, activity: _SessionUse, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._activity = activity

    def _admit_session(self, requestor: Any) -> Any:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            idlest = self._activity.idlest(self._server_instances)
            if idlest is not None and self._task_group is not None:
                transport = self._server_instances.pop(idlest)
                self._session_owners.pop(idlest, None)
                self._task_group.start_soon(transport.terminate)
                self._activity.closed(idlest)
        return super()._admit_session(requestor)


class _SessionUse:
    """Each MCP session's requests and streams open, and when its last one ended."""

    def __init__(self) -> None:
        self.open: dict[str, int] = {}
        self.last: dict[str, float] = {}

    def began(self, session_id: str) -> None:
        self.open[session_id] = self.open.get(session_id, 0) + 1
        self.last[session_id] = time.monotonic()

    def ended(self, session_id: str) -> None:
        left = self.open.get(session_id, 1) - 1
        if left > 0:
            self.open[session_id] = left
        else:
            self.open.pop(session_id, None)
        self.last[session_id] = time.monotonic()

    def idlest(self, sessions: dict[str, Any]) -> str | None:
        """The open session with nothing in flight (no request being served, no response
        stream open: the transport's own counts) that was used longest ago."""
        for gone in [s for s in self.last if s not in sessions]:
            self.closed(gone)
        idle = [(self.last.get(s, 0.0), s) for s, transport in sessions.items()
                if s not in self.open and not getattr(transport, "_requests_in_flight", 0)
                and not getattr(transport, "_request_streams", None)]
        return min(idle)[1] if idle else None

    def closed(self, session_id: str) -> None:
        self.open.pop(session_id, None)
        self.last.pop(session_id, None)


class McpHttpTransport:
    """The ``/mcp`` endpoint (an ASGI app) and the lifetime of its session manager."""

    def __init__(self, service: SessionService, *, elicitation: bool = True,
                 max_sessions: int = DEFAULT_MCP_MAX_SESSIONS) -> None:
        self.ledger = LedgerMcp(service, McpOptions(elicitation=elicitation))
        self.session_idle_timeout_s: float = DEFAULT_SESSION_IDLE_TIMEOUT
        """How long an MCP session without a request in flight lives (read at each start)."""
        self.max_sessions = max_sessions
        self._manager: StreamableHTTPSessionManager | None = None
        self._activity = _SessionUse()
        self._in_flight: dict[str, InFlight] = {}
        """Each MCP session's request ids in flight (:mod:`.jsonrpc`), while it has any."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run a session manager until the app stops; open MCP sessions end then."""
        self._activity = _SessionUse()
        manager = _RoomyManager(
            app=self.ledger.server(), security_settings=_SECURITY,
            session_idle_timeout=self.session_idle_timeout_s, max_sessions=self.max_sessions,
            activity=self._activity,
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
        session_id = _header(scope, MCP_SESSION_ID_HEADER)
        if session_id is not None and session_id not in manager._server_instances:
            await _unknown_session(session_id)(scope, receive, send)
            return
        held: tuple[str, InFlight, Screened] | None = None
        if scope.get("type") == "http" and scope.get("method") == "POST":
            request = await _body(receive)
            if request is None:
                return  # the client left before its request arrived
            screened, held = self._screened(scope, session_id, request)
            if screened.error is not None:
                await JSONResponse(screened.error, status_code=400)(scope, receive, send)
                return
            receive = _replaying(request, receive)
        post = _Post.of(scope)
        if post is not None:
            receive = post.watching(receive)
        elif scope.get("method") == "GET":
            scope = _without_resumption(scope)
        if session_id is not None:
            self._activity.began(session_id)
        else:
            send = self._noting_new_session(send)
        try:
            await _completed(manager.asgi_app, scope, receive, send, post)
        finally:
            if session_id is not None:
                self._activity.ended(session_id)
            if held is not None:
                self._ended(*held)
            if post is not None and post.left:
                with anyio.CancelScope(shield=True):
                    await post.cancel(manager)

    def _noting_new_session(self, send: Send) -> Send:
        """``send``, noting the session an ``initialize`` opened (its answer names it) as
        used now: a session never used again is still the idlest to close."""
        wanted = MCP_SESSION_ID_HEADER.lower().encode("latin-1")

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", ()):
                    if key.lower() == wanted:
                        self._activity.began(value.decode("latin-1"))
                        self._activity.ended(value.decode("latin-1"))
            await send(message)

        return noting

    def _screened(self, scope: Scope, session_id: str | None, body: bytes
                  ) -> tuple[Screened, tuple[str, InFlight, Screened] | None]:
        """The POST's message as :mod:`.jsonrpc` reads it, and the MCP session's ids in
        flight that its request now holds (until its POST ends)."""
        screened = screen(body)
        if screened.error is not None or session_id is None or screened.request_id is None:
            return screened, None
        flight = self._in_flight.setdefault(session_id, InFlight())
        screened = flight.begin(screened)
        if screened.error is not None:
            return screened, None
        return screened, (session_id, flight, screened)

    def _ended(self, session_id: str, flight: InFlight, screened: Screened) -> None:
        flight.end(screened.request_id)
        if flight.empty and self._in_flight.get(session_id) is flight:
            del self._in_flight[session_id]


def _unknown_session(session_id: str) -> JSONResponse:
    """The answer to a request naming an MCP session this process does not hold: 404, which
    tells an MCP client to ``initialize`` again, with why in a JSON-RPC error."""
    shown = session_id if len(session_id) <= 64 and session_id.isprintable() else "given"
    message = (
        f"MCP session {shown!r} is not open on this server: it was opened on another replica "
        "(an MCP session lives in the process that answered its initialize, so route each "
        "client to one replica: sticky on the Mcp-Session-Id header), or it was closed or "
        "the server restarted. Send initialize to open a new session."
    )
    return JSONResponse({"jsonrpc": "2.0", "id": None,
                         "error": {"code": -32600, "message": message}}, status_code=404)


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.lower().encode("latin-1")
    for key, value in scope.get("headers", ()):
        if key.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


async def _body(receive: Receive) -> bytes | None:
    """The whole request body (the app's middleware bounds its size), ``None`` when the
    client disconnected first."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            return bytes(body)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` for an app that reads the body again: the body once, then the wire's
    (a disconnect)."""
    given = [False]

    async def replayed() -> Message:
        if not given[0]:
            given[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _without_resumption(scope: Scope) -> Scope:
    """A GET's scope without ``Last-Event-ID``: this server keeps no event store to replay
    from (the SDK then returned without any response: a 500), and a client asking to resume
    gets a new stream, which the MCP transport allows a server without resumption."""
    headers = scope.get("headers") or []
    if not any(name.lower() == b"last-event-id" for name, _value in headers):
        return scope
    return {**scope, "headers": [(n, v) for n, v in headers if n.lower() != b"last-event-id"]}


class _Post:
    """A handshake-era POST to ``/mcp`` naming an MCP session, watched for its client leaving.

    The SDK does not cancel a request's handler when the connection carrying its event
    stream drops (a client may resume it from an event store; this server keeps none, so a
    dropped request can never be answered), and the MCP session's idle timeout does not run
    while a request is in flight: a call waiting for a person would wait until ``serve``
    stops. So the request body and ``http.disconnect`` are read as they pass to the SDK, and
    a client that disconnected before its response ended has its requests cancelled — the
    MCP session is told ``notifications/cancelled`` for each, as the client itself would
    say it, and a waiting call withdraws its interaction (D157). A 2026-07-28 request has no
    MCP session: the SDK cancels its handler on disconnect itself.
    """

    def __init__(self, scope: Scope, session_id: str, version: str | None) -> None:
        self.scope = scope
        self.session_id = session_id
        self.version = version
        self.body = bytearray()
        self.disconnected = False
        self.ended = False

    @classmethod
    def of(cls, scope: Scope) -> _Post | None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        session_id = headers.get(MCP_SESSION_ID_HEADER.lower())
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER.lower())
        if session_id is None or (version is not None
                                  and version not in HANDSHAKE_PROTOCOL_VERSIONS):
            return None  # no MCP session (a new one, or the 2026-07-28 era)
        return cls(scope, session_id, version)

    def watching(self, receive: Receive) -> Receive:
        """``receive``, noting the body and a disconnect on the way."""
        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.body.extend(message.get("body", b""))
            elif message["type"] == "http.disconnect":
                self.disconnected = True
            return message
        return watched

    @property
    def left(self) -> bool:
        """The client disconnected before its response ended."""
        return self.disconnected and not self.ended

    def request_ids(self) -> list[Any]:
        """The ids of the JSON-RPC requests of the body (none if it is not JSON-RPC)."""
        try:
            parsed = json.loads(self.body)
        except (ValueError, RecursionError):
            return []
        messages = parsed if isinstance(parsed, list) else [parsed]
        return [m["id"] for m in messages
                if isinstance(m, dict) and isinstance(m.get("method"), str)
                and isinstance(m.get("id"), (str, int)) and not isinstance(m.get("id"), bool)]

    async def cancel(self, manager: StreamableHTTPSessionManager) -> None:
        """Tell the MCP session its requests from this POST are cancelled.

        The SDK has no public call into a session's transport, so the notification goes
        through the session manager's own entry point, as the client's POST would: the
        session routes it to its dispatcher, which cancels the handler (an unknown or
        finished id is ignored there)."""
        for request_id in self.request_ids():
            with suppress(Exception):  # the session ended meanwhile: nothing to cancel
                await manager.asgi_app(*self._cancelled(request_id))

    def _cancelled(self, request_id: Any) -> tuple[Scope, Receive, Send]:
        """A POST of ``notifications/cancelled`` for ``request_id`` in this MCP session, its
        answer (202) discarded."""
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": request_id, "reason": DISCONNECT_REASON}}
        body = json.dumps(notice).encode()
        headers = [(k, v) for k, v in self.scope.get("headers", ()) if k == b"host"]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
            (MCP_SESSION_ID_HEADER.lower().encode(), self.session_id.encode("latin-1")),
        ]
        if self.version is not None:
            headers.append((MCP_PROTOCOL_VERSION_HEADER.lower().encode(),
                            self.version.encode("latin-1")))
        sent = [False]

        async def receive() -> Message:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(_message: Message) -> None:
            return None

        return {**self.scope, "headers": headers}, receive, discard


async def _completed(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, post: _Post | None = None,
) -> None:
    """Run ``app``, then end a response it started and left open.

    On shutdown the SDK's event stream (sse-starlette) stops without its last body message,
    which uvicorn reports as an error: the stream is ended properly here instead. ``post``
    is told when the response ended.
    """
    state = {"started": False, "ended": False}

    async def watched(message: Message) -> None:
        if message["type"] == "http.response.start":
            state["started"] = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            state["ended"] = True
            if post is not None:
                post.ended = True
        await send(message)

    try:
        await app(scope, receive, watched)
    finally:
        if state["started"] and not state["ended"]:
            with anyio.CancelScope(shield=True), suppress(OSError, RuntimeError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
