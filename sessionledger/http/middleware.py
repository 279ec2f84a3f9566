"""ASGI middleware: a structured log line per request, the bearer token check, the body cap,
HEAD answered like GET without the body.

All are plain ASGI callables rather than ``BaseHTTPMiddleware`` so they never buffer or
break the streaming (SSE) responses: they only watch and decorate the messages going out.
"""

from __future__ import annotations

import hmac
import json
import re
import time
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog import new_id

from ..errors import Unauthorized
from ..logs import log_event, logger

__all__ = [
    "MAX_BODY_BYTES",
    "OPEN_PATHS",
    "REQUEST_ID_HEADER",
    "BearerAuthMiddleware",
    "BodyLimitMiddleware",
    "BodyTooLarge",
    "HeadAsGetMiddleware",
    "RequestLogMiddleware",
]

REQUEST_ID_HEADER = "x-request-id"
OPEN_PATHS = frozenset({"/healthz"})
"""Paths answered without a token, so probes need no secret."""

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body taken, in bytes: the largest legitimate body (a 20,000-character plan,
a full todo list) is a small fraction of it. A larger one is 413 ``payload_too_large``."""

_SAFE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_http_log = logger.getChild("http")


def _request_id(scope: Scope) -> str:
    """The caller's ``X-Request-ID`` when it is short and plain, else a fresh ``req_`` id."""
    given = Headers(scope=scope).get(REQUEST_ID_HEADER)
    if given is not None and _SAFE_REQUEST_ID.fullmatch(given):
        return given
    return new_id("req")


class RequestLogMiddleware:
    """Log one JSON line per request and echo its request id in ``X-Request-ID``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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


class BearerAuthMiddleware:
    """Require ``Authorization: Bearer <token>`` on every path but :data:`OPEN_PATHS`.

    The scheme is matched without regard to case and may be followed by several spaces
    (RFC 7235 section 2.1); the token itself must match exactly. With no token configured
    (loopback binding) every request passes.
    """

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self._expected = None if token is None else token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self._expected is None
            or scope["type"] != "http"
            or scope["path"] in OPEN_PATHS
            or self._authorized(scope)
        ):
            await self.app(scope, receive, send)
            return
        await self._refuse(send)

    def _authorized(self, scope: Scope) -> bool:
        # Header values arrive decoded as latin-1: re-encoding gives the bytes sent.
        scheme, _, credentials = Headers(scope=scope).get("authorization", "").partition(" ")
        assert self._expected is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.lstrip(" ").encode("latin-1"), self._expected
        )

    @staticmethod
    async def _refuse(send: Send) -> None:
        error = Unauthorized("a valid 'Authorization: Bearer <token>' header is required")
        body = json.dumps(error.to_wire()).encode()
        await send({
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer"),
            ],
        })
        await send({"type": "http.response.body", "body": body})


class BodyTooLarge(HTTPException):
    """Raised while a body is read once it passes the cap; answered 413 like any HTTP error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


def _declared_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length", "")
    return int(value) if value.isascii() and value.isdigit() else None


class BodyLimitMiddleware:
    """Refuse a request body over ``limit`` bytes with 413 ``payload_too_large``.

    A ``Content-Length`` over the limit is refused before the app runs; a body without one
    (chunked) is counted as the app reads it and refused when it passes the limit, through
    :class:`BodyTooLarge`, so nothing is parsed or appended either way.
    """

    def __init__(self, app: ASGIApp, *, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counted, send)

    async def _refuse(self, send: Send) -> None:
        error = BodyTooLarge(self.limit)
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
