"""The FastAPI application factory: routes, error bodies, middleware and store listeners.

:func:`create_app` wires one :class:`~sessionledger.service.sessions.SessionService` into an app; it
holds no globals, so tests build as many apps as they like. Every error leaves as the JSON
body of docs/spec.md, ``{"error": {"code", "message", "details"}}``: application errors with their
own status, FastAPI's validation errors as 422 ``invalid_input``, unknown routes as 404, and
anything unexpected as 500 ``internal_error`` (logged, never a traceback on the wire).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import import_module
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount, Route

from eventlog import EventLogError, JsonShapeError

from .. import __version__
from ..claude_code.hooks import HOOK_PATHS, MAX_HOOK_BYTES
from ..config import DEFAULT_MCP_MAX_SESSIONS, ServerSettings
from ..errors import (
    OutOfDescriptors,
    SessionLedgerError,
    from_os_error,
)
from ..ledger import from_eventlog, shape_refused
from ..logs import batch_logger, descriptor_shortage, log_event, logger
from ..mcp import MCP_PATH
from ..service.sessions import SessionService
from ..service.timers import TimerScheduler
from .login import LoginSessions, login_routes
from .middleware import (
    BearerAuthMiddleware,
    BodyLimitMiddleware,
    HeadAsGetMiddleware,
    HostOriginMiddleware,
    RequestLogMiddleware,
)
from .routes import (
    execution_routes,
    hook_routes,
    hot_tool_calls,
    install_web_client,
    interaction_routes,
    model_routes,
    session_routes,
    tool_routes,
    turn_routes,
)
from .schemas import document_guards
from .streaming import STREAM_SUFFIX, CommitNotifier, stream_routes

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from ..mcp.http import McpHttpTransport

__all__ = ["create_app", "error_response"]

_log = logger.getChild("http")

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def _document_guards(app: FastAPI, *, token_required: bool) -> None:
    """``/openapi.json`` also lists the answers of the middleware and a failing store."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_guards(
                FastAPI.openapi(app), token_required=token_required
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def error_response(
    status: int, code: str, message: str, details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON error in the shape of docs/spec.md."""
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    """FastAPI's errors without the raw input (it may be large or not JSON-safe)."""
    return [
        {"loc": [str(part) for part in error.get("loc", ())],
         "message": str(error.get("msg", "")), "type": str(error.get("type", ""))}
        for error in exc.errors()
    ]


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> str | None:
    """Every method some route answers at the request's path, for the ``Allow`` of a 405 (the
    route that refused knows only its own method). A mount is the static files: GET, HEAD."""
    allowed: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Mount):
            if route.matches(request.scope)[0] is not Match.NONE:
                allowed |= {"GET", "HEAD"}
            continue
        allowed.update(
            method for method in _METHODS
            if route.matches({**request.scope, "method": method})[0] is Match.FULL
        )
    if _answers_head(request.app, request.scope):
        allowed.add("HEAD")
    return ", ".join(sorted(allowed)) or None


def _answers_head(app: FastAPI, scope: Mapping[str, Any]) -> bool:
    """Whether a GET at this path is answered and ends: every route's but the event streams'
    (``…/stream``) and the MCP endpoint's (its GET is a stream too)."""
    path: str = scope["path"]
    if path.endswith(STREAM_SUFFIX) or path == MCP_PATH:
        return False
    get = {**scope, "method": "GET"}
    return any(route.matches(get)[0] is Match.FULL for route in app.router.routes)


def _install_error_handlers(app: FastAPI) -> None:
    async def ledger_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SessionLedgerError)
        if isinstance(exc, OutOfDescriptors):
            descriptor_shortage.report("request")  # one line per shortage, not per request
        elif exc.status >= 500:
            log_event(_log, "error", level=logging.ERROR, code=exc.code, message=exc.message)
        return error_response(exc.status, exc.code, exc.message, exc.details)

    async def eventlog_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, EventLogError)
        return await ledger_error(request, from_eventlog(exc))

    async def invalid_request(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(
            422, "invalid_input", "the request failed validation", _validation_details(exc)
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and isinstance(exc.__cause__, JsonShapeError):
            # FastAPI's "error parsing the body" when the strict decoder (middleware.py) refused
            # it, bytes that are not UTF-8 included: EG-1's 422 naming the path.
            return await ledger_error(request, shape_refused(exc.__cause__, loc="body"))
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        headers = exc.headers
        allowed = _allowed_methods(request) if exc.status_code == 405 else None
        if allowed is not None:
            headers = {**(headers or {}), "Allow": allowed}
        return error_response(exc.status_code, code, str(exc.detail), headers=headers)

    async def os_error(request: Request, exc: Exception) -> JSONResponse:
        # No descriptor left where a route or its thread pool opens one (a lazy import, a
        # file): answered here, inside the app, so the connection stays open. A handler of
        # ``Exception`` answers from Starlette's outermost layer, which then re-raises and
        # uvicorn closes the connection: the client's next request on it was reset.
        assert isinstance(exc, OSError)
        shortage = from_os_error(exc)
        if shortage is None:
            raise exc  # any other OSError is unexpected: the one 500 below
        return await ledger_error(request, shortage)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        shortage = from_os_error(exc) if isinstance(exc, OSError) else None
        if shortage is not None:  # raised by a middleware, outside the routes
            return await ledger_error(request, shortage)
        _log.error("unexpected error", exc_info=exc)
        return error_response(500, "internal_error", "an unexpected error occurred")

    handlers: dict[type[Exception], Callable[[Request, Exception], Any]] = {
        SessionLedgerError: ledger_error,
        EventLogError: eventlog_error,
        RequestValidationError: invalid_request,
        StarletteHTTPException: http_error,
        OSError: os_error,
        Exception: unexpected,
    }
    for exc_class, handler in handlers.items():
        app.add_exception_handler(exc_class, handler)


def _add_routes(app: FastAPI, group: APIRouter) -> None:
    """The group's routes as the app's own, each matched once per request (issue 24): an
    included router (FastAPI's ``include_router``) is matched whole by the app's router and
    again by itself, and every router before it is tried, ~50 µs per request. No group has a
    prefix, tags or dependencies of its inclusion, so its routes are the same routes either
    way (the same OpenAPI document)."""
    app.router.routes.extend(group.routes)


class McpOnDemand:
    """The ``/mcp`` endpoint, its SDK and session manager loaded at the first request to it.

    Importing the MCP SDK and building the tools cost ``serve`` about half of its start, and a
    server may never be asked for MCP; so :meth:`running` (the app's lifespan) only waits, and
    the first request to ``/mcp`` has the SDK imported (on a worker thread: the loop serves
    every other request meanwhile), the session manager run for the rest of the app's life,
    and is then handed to it with every later one (issue 38). A load that fails is logged and
    answered 503, as requests after shutdown began are.
    """

    def __init__(self, service: SessionService, *, elicitation: bool = True,
                 max_sessions: int = DEFAULT_MCP_MAX_SESSIONS) -> None:
        self._service = service
        self._elicitation = elicitation
        self._max_sessions = max_sessions
        self._built: McpHttpTransport | None = None
        self._building = threading.Lock()
        self._transport: McpHttpTransport | None = None  # while its session manager runs
        self._wanted = asyncio.Event()
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()

    def transport(self) -> McpHttpTransport:
        """The endpoint's transport, built now (the SDK imported on this thread) unless it
        was already; the same one serves every start of the app."""
        with self._building:
            if self._built is None:
                module = import_module("sessionledger.mcp.http")
                self._built = module.McpHttpTransport(self._service,
                                                      elicitation=self._elicitation,
                                                      max_sessions=self._max_sessions)
            return self._built

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve ``/mcp`` (once asked for) until the app stops; open MCP sessions end then."""
        self._wanted, self._ready, self._stopping = (asyncio.Event(), asyncio.Event(),
                                                      asyncio.Event())
        task = asyncio.create_task(self._serve(), name="mcp-on-demand")
        try:
            yield
        finally:
            self._stopping.set()
            self._wanted.set()
            await task

    async def _serve(self) -> None:
        try:
            await self._wanted.wait()
            if self._stopping.is_set():
                return
            try:
                transport = await asyncio.to_thread(self.transport)
                async with transport.running():
                    self._transport = transport
                    self._ready.set()
                    await self._stopping.wait()
            except Exception as exc:  # answered 503: the rest of the server stays up
                log_event(logger, "mcp endpoint failed", level=logging.ERROR,
                          error=exc.__class__.__name__, message=str(exc))
        finally:
            self._transport = None
            self._ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._transport is None and not self._stopping.is_set():
            self._wanted.set()
            await self._ready.wait()
        transport = self._transport
        if transport is None:
            body = {"error": {"code": "service_unavailable",
                              "message": "the MCP endpoint is not running", "details": None}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        await transport(scope, receive, send)


def create_app(
    *,
    service: SessionService,
    settings: ServerSettings,
    stopping: threading.Event | None = None,
) -> FastAPI:
    """Build the HTTP app over ``service``.

    ``stopping`` is set by whoever runs the server when shutdown begins; open streams end
    then, so in-flight requests can finish and the server can close the store.
    """
    stop = stopping if stopping is not None else threading.Event()
    notifier = CommitNotifier()

    scheduler = TimerScheduler(service.timers, service.store, poll_s=settings.stream_poll_s)
    # the MCP server at /mcp (#12), loaded when first asked for
    mcp = McpOnDemand(service, elicitation=settings.mcp_elicitation,
                      max_sessions=settings.mcp_max_sessions)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        notifier.attach(service.store, asyncio.get_running_loop())
        unsubscribe = service.store.subscribe(batch_logger())
        scheduler.start()  # its first pass re-arms every timer from the log (HO-7)
        try:
            async with mcp.running():
                yield
        finally:
            stop.set()
            scheduler.stop()
            unsubscribe()
            notifier.detach()

    app = FastAPI(
        title="sessionledger",
        version=__version__,
        summary="Event-sourced session state for AI coding-agent hosts",
        lifespan=lifespan,
        # A body is JSON only when sent as JSON: a "simple" cross-site POST (text/plain, no
        # preflight) is never parsed (FastAPI's default from 0.132, stated so it stays).
        strict_content_type=True,
    )
    _install_error_handlers(app)
    for group in (
        session_routes(service), execution_routes(service), tool_routes(service),
        turn_routes(service), model_routes(service), interaction_routes(service),
        hook_routes(service, hook_writer=settings.hook_writer),
        stream_routes(service, notifier=notifier, settings=settings, stopping=stop),
    ):
        _add_routes(app, group)
    # Tried first: tool calls are the hot path (issue 24, D193); the FastAPI route stays
    # behind it for OpenAPI and for every request it does not take.
    app.router.routes.insert(0, hot_tool_calls(service, app.router.routes))
    app.router.routes.append(Route(MCP_PATH, endpoint=mcp, include_in_schema=False))
    install_web_client(app)
    logins = None if settings.token is None else LoginSessions(settings.token)
    app.state.logins = logins  # the signed login cookies (login.py)
    app.include_router(login_routes(settings.token, logins))
    _document_guards(app, token_required=settings.token is not None)
    app.add_middleware(HeadAsGetMiddleware, answers_head=lambda scope: _answers_head(app, scope))
    # inside the token check: strangers read nothing; a hook event may carry a whole file
    app.add_middleware(BodyLimitMiddleware,
                       larger=dict.fromkeys(HOOK_PATHS.values(), MAX_HOOK_BYTES))
    app.add_middleware(BearerAuthMiddleware, token=settings.token, logins=logins)
    app.add_middleware(HostOriginMiddleware, settings=settings)  # EG-3: before anything acts
    # outermost: refused requests are logged too
    app.add_middleware(RequestLogMiddleware, clock=service.timers.clock)
    return app
