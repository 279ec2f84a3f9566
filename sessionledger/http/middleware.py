"""What every request passes before its route: ASGI middleware and the strict JSON body decoder.

The middleware logs a structured line per request, checks Host and Origin and the bearer token,
caps the body and answers HEAD like GET without the body. All are plain ASGI callables rather
than ``BaseHTTPMiddleware`` so they never buffer or break the streaming (SSE) responses: they
only watch and decorate the messages going out. Every request passes all of them, so they read
the few headers they need straight from the scope's list (:func:`header`) and the Host check
keeps its verdict on the last ``Host`` values it saw (issue 24). Every router is an
:func:`api_router`, whose routes decode a JSON body once, by :func:`eventlog.loads_json`
(EG-1).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Protocol

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog import Clock, loads_json, new_id, now_text
from eventlog.encoding import plain_json_bytes

from ..config import DEFAULT_PORTS, ServerSettings, parse_authority, parse_origin
from ..errors import ForbiddenOrigin, MisdirectedRequest, SessionLedgerError, Unauthorized
from ..logs import log_event, logger

__all__ = [
    "LOOPBACK_NAMES",
    "MAX_BODY_BYTES",
    "OPEN_PATHS",
    "OPEN_PREFIXES",
    "REQUEST_ID_HEADER",
    "SAFE_METHODS",
    "BearerAuthMiddleware",
    "BodyLimitMiddleware",
    "BodyTooLarge",
    "HeadAsGetMiddleware",
    "HostOriginMiddleware",
    "LoginCheck",
    "RequestLogMiddleware",
    "StrictJsonRequest",
    "StrictJsonRoute",
    "api_router",
    "header",
]

REQUEST_ID_HEADER = "x-request-id"
TIME_HEADER = "sessionledger-time"
"""The service's time when the answer started (the clock its deadlines are on): a client
whose own clock differs, or steps, counts a countdown down against this (the page does)."""
OPEN_PATHS = frozenset({"/healthz", "/", "/v1/login", "/v1/logout"})
"""Paths answered without a token: probes need no secret, and a browser must load the page
and reach its login form (``login.py``) before it has one."""
OPEN_PREFIXES = ("/static/",)
"""Prefixes answered without a token: the page's own files, which hold no secret."""

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body taken, in bytes: the largest legitimate body (a 20,000-character plan,
a full todo list) is a small fraction of it. A larger one is 413 ``payload_too_large``."""

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Names every server answers to on its port, whatever address it is bound to."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: answered whatever page asked (a foreign page cannot read the
answer without CORS, which the server never grants)."""
_OTHER_SITES = frozenset({"cross-site", "same-site"})
"""``Sec-Fetch-Site`` values of a request a page of another origin made."""
_QUOTED_HEADER_CHARS = 200
_VERDICTS_KEPT = 256

_SAFE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_http_log = logger.getChild("http")


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of the header ``name`` (lower case, as servers pass header names), as
    Starlette's ``Headers.get`` answers it, without building the mapping."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


_REQUEST_ID_KEY = REQUEST_ID_HEADER.encode()


def _request_id(scope: Scope) -> str:
    """The caller's ``X-Request-ID`` when it is short and plain, else a fresh ``req_`` id."""
    given = header(scope, _REQUEST_ID_KEY)
    if given is not None and _SAFE_REQUEST_ID.fullmatch(given):
        return given
    return new_id("req")


class RequestLogMiddleware:
    """Log one JSON line per request, echo its request id in ``X-Request-ID`` and tell the
    service's time in ``Sessionledger-Time``."""

    def __init__(self, app: ASGIApp, clock: Clock) -> None:
        self.app = app
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                headers.append((TIME_HEADER.encode(), now_text(self.clock).encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            log_event(
                _http_log,
                "request",
                requestId=request_id,
                method=scope["method"],
                path=scope["path"],
                status=status,
                durationMs=round((time.perf_counter() - started) * 1000, 3),
            )


async def _send_error(
    send: Send, error: SessionLedgerError, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """Answer ``error`` as the JSON body of docs/spec.md from a middleware (no app ran)."""
    body = json.dumps(error.to_wire()).encode()
    await send({
        "type": "http.response.start",
        "status": error.status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ],
    })
    await send({"type": "http.response.body", "body": body})


def _bound_name(host: str) -> str | None:
    """The bound address as a ``Host`` name; ``None`` for a wildcard (0.0.0.0, ::), which no
    client puts in a URL."""
    try:
        if ipaddress.ip_address(host.strip("[]")).is_unspecified:
            return None
    except ValueError:
        pass
    return parse_authority(host)[0] if host else None


class HostOriginMiddleware:
    """Answer only requests addressed to this server, and changes only from its own pages
    (EG-3): the one rule for every route, the page, the streams and ``/mcp`` alike.

    ``Host`` must name the server: the bound address (not a wildcard), ``localhost``,
    ``127.0.0.1`` or ``[::1]`` with the port the connection arrived on (no port means the
    scheme's default), or an ``--allowed-host`` (``name`` on any port, ``name:port`` on that
    one); names are compared without regard to case. Anything else is 421
    ``misdirected_request``: a page whose name was rebound to this address reads nothing.

    A request that is not GET, HEAD or OPTIONS must not come from a page of another origin:
    an ``Origin`` is accepted when it is the request's own (its host and port are the
    ``Host``'s) or an ``--allowed-origin``. Any other, ``null`` (a sandboxed frame, a file),
    several, or none with ``Sec-Fetch-Site`` saying another site asked, is 403
    ``forbidden_origin`` before the body is read, whatever it holds. A request without
    ``Origin`` or ``Sec-Fetch-Site`` (curl, the SDK clients, the CLI) is no browser's and passes.
    """

    def __init__(self, app: ASGIApp, *, settings: ServerSettings) -> None:
        self.app = app
        bound = _bound_name(settings.host)
        self._own_names = LOOPBACK_NAMES | ({bound} if bound else set())
        self._port = settings.port
        allowed = [parse_authority(value) for value in settings.allowed_hosts]
        self._any_port = frozenset(name for name, port in allowed if port is None)
        self._allowed = frozenset(allowed)
        self._origins = frozenset(parse_origin(value) for value in settings.allowed_origins)
        self._verdicts: dict[tuple[str, str, int], tuple[str, int | None] | None] = {}
        """:meth:`_host`'s answers for one ``Host`` value, scheme and listening port."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = self._host_of(scope)
        if host is None:
            await _send_error(send, MisdirectedRequest(
                "this server does not answer to that Host; serve it under another name with "
                "--allowed-host", details={"host": _quoted(headers.getlist("host"))},
            ))
            return
        if scope["method"] not in SAFE_METHODS:
            origins = headers.getlist("origin")
            if not self._origin_allowed(origins, host, headers.get("sec-fetch-site")):
                await _send_error(send, ForbiddenOrigin(
                    f"a {scope['method']} from a page of another origin is refused; allow one "
                    "with --allowed-origin",
                    details={"origin": _quoted(origins),
                             "secFetchSite": _quoted(headers.getlist("sec-fetch-site"))},
                ))
                return
        await self.app(scope, receive, send)

    def _host_of(self, scope: Scope) -> tuple[str, int | None] | None:
        """:meth:`_host` of the request's ``Host`` values, remembered for a single value (a
        server sees the same one or two again and again; at most :data:`_VERDICTS_KEPT`)."""
        values = [value for key, value in scope["headers"] if key == b"host"]
        if len(values) != 1:
            return None
        server = scope.get("server")
        key = (values[0].decode("latin-1"), scope.get("scheme", "http"),
               server[1] if server and server[1] else 0)
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        verdict = self._host(scope, [key[0]])
        if len(self._verdicts) >= _VERDICTS_KEPT:
            self._verdicts.clear()
        self._verdicts[key] = verdict
        return verdict

    def _host(self, scope: Scope, values: list[str]) -> tuple[str, int | None] | None:
        """The ``Host`` as ``(name, port or None)`` when it names this server, else ``None``."""
        if len(values) != 1:
            return None
        try:
            name, given = parse_authority(values[0])
        except ValueError:
            return None
        port = DEFAULT_PORTS.get(scope.get("scheme", "http"), 80) if given is None else given
        server = scope.get("server")
        listening = server[1] if server and server[1] else self._port
        if (name in self._own_names and port == listening) or name in self._any_port \
                or (name, port) in self._allowed:
            return name, given
        return None

    def _origin_allowed(
        self, origins: list[str], host: tuple[str, int | None], fetch_site: str | None
    ) -> bool:
        if not origins:
            return fetch_site not in _OTHER_SITES
        if len(origins) != 1:
            return False
        try:
            origin = parse_origin(origins[0])
        except ValueError:  # "null", another scheme, garbage
            return False
        scheme, name, port = origin
        # A Host without a port was sent to the default port of the scheme the page used.
        own = name == host[0] and port == (DEFAULT_PORTS[scheme] if host[1] is None else host[1])
        return own or origin in self._origins


def _quoted(values: list[str]) -> str | None:
    """A header's values for an error's details: joined, cut short, ``None`` when absent."""
    return ", ".join(values)[:_QUOTED_HEADER_CHARS] if values else None


class LoginCheck(Protocol):
    """What the token check asks of the live logins (``login.LoginSessions``)."""

    def authorizes(self, scope: Scope) -> bool: ...


class BearerAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` or a live login cookie (``login.py``) on every
    path but :data:`OPEN_PATHS` and :data:`OPEN_PREFIXES`.

    The scheme is matched without regard to case and may be followed by several spaces
    (RFC 7235 section 2.1); the token itself must match exactly. How a request is
    authenticated (``"bearer"``, ``"cookie"`` or ``None``) is left in ``scope["state"]["auth"]``
    for ``GET /v1/login``. With no token configured (loopback binding) every request passes.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, logins: LoginCheck | None = None
    ) -> None:
        self.app = app
        self._expected = None if token is None else token.encode()
        self._logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._expected is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        open_path = path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)
        via = self._via(scope)
        if via is not None or open_path:
            scope.setdefault("state", {})["auth"] = via
            await self.app(scope, receive, send)
            return
        await _send_error(
            send, Unauthorized(
                "a valid 'Authorization: Bearer <token>' header (or a login cookie from "
                "POST /v1/login) is required"),
            [(b"www-authenticate", b"Bearer")],
        )

    def _via(self, scope: Scope) -> str | None:
        if self._authorized(scope):
            return "bearer"
        if self._logins is not None and self._logins.authorizes(scope):
            return "cookie"
        return None

    def _authorized(self, scope: Scope) -> bool:
        # Header values arrive decoded as latin-1: re-encoding gives the bytes sent.
        scheme, _, credentials = (header(scope, b"authorization") or "").partition(" ")
        assert self._expected is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.lstrip(" ").encode("latin-1"), self._expected
        )


class BodyTooLarge(HTTPException):
    """Raised while a body is read once it passes the cap; answered 413 like any HTTP error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


def _declared_length(scope: Scope) -> int | None:
    value = header(scope, b"content-length") or ""
    return int(value) if value.isascii() and value.isdigit() else None


class BodyLimitMiddleware:
    """Refuse a request body over ``limit`` bytes with 413 ``payload_too_large``.

    A ``Content-Length`` over the limit is refused before the app runs; a body without one
    (chunked) is counted as the app reads it and refused when it passes the limit, through
    :class:`BodyTooLarge`, so nothing is parsed or appended either way.
    """

    def __init__(
        self, app: ASGIApp, *, limit: int = MAX_BODY_BYTES,
        larger: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.larger = dict(larger or {})
        """Paths that take more (a Claude Code hook event carries a whole file's content)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope.get("path", ""), self.limit)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(send, limit)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counted, send)

    async def _refuse(self, send: Send, limit: int) -> None:
        error = BodyTooLarge(limit)
        body = json.dumps({"error": {
            "code": "payload_too_large", "message": error.detail, "details": None,
        }}).encode()
        await send({
            "type": "http.response.start",
            "status": error.status_code,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        })
        await send({"type": "http.response.body", "body": body})


class HeadAsGetMiddleware:
    """Answer ``HEAD`` wherever ``GET`` is answered, with GET's status and headers and no body
    (RFC 9110 section 9.3.2: monitors and ``curl -I`` probe with it).

    FastAPI's routes list only the methods they declare, so a HEAD would be 405. The request
    goes to the app as a GET when ``answers_head`` says its route may (event streams never end,
    so they are left out and stay 405); whatever body the app sends is dropped.
    """

    def __init__(self, app: ASGIApp, *, answers_head: Callable[[Scope], bool]) -> None:
        self.app = app
        self._answers_head = answers_head

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or not self._answers_head(scope):
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)

# -- the strict JSON body decoder (EG-1) ------------------------------------------------------
#
# FastAPI reads a JSON body with ``await request.json()`` (Starlette's ``json.loads``, which
# takes ``NaN``, any nesting its stack allows, any integer, lone surrogates, and UTF-16). Every
# route here is a StrictJsonRoute, whose requests decode with eventlog.loads_json instead: the
# same one parse, with the shape check of every JSON value from outside. A body it refuses
# never reaches validation or a handler; FastAPI reports the failure as an HTTP error caused by
# the eventlog.JsonShapeError, which the app answers as 422 ``invalid_input`` naming the path
# (``app.py``). A syntax error stays FastAPI's own 422 ``json_invalid``.


class StrictJsonRequest(Request):
    """A request whose JSON body is decoded by :func:`eventlog.loads_json`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_json(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route handing its handler a :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict


def api_router(**options: Any) -> APIRouter:
    """An ``APIRouter`` of :class:`StrictJsonRoute` routes; every router of the app is one."""
    return APIRouter(route_class=StrictJsonRoute, **options)


class JSONAnswer(JSONResponse):
    """Starlette's ``JSONResponse`` whose bytes ``orjson`` writes when they are the same (a
    plain JSON value: :func:`eventlog.encoding.plain_json_bytes`), Starlette otherwise: the
    answers of the routes that build their own response (issue 24)."""

    def render(self, content: Any) -> bytes:
        fast = plain_json_bytes(content)
        return fast if fast is not None else super().render(content)
