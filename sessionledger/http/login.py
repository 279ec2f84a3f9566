"""Token login for browsers: the token exchanged once for an ``HttpOnly`` session cookie.

A browser's ``EventSource`` sends no ``Authorization`` header, so on a server with a token the
page could not read a stream. ``POST /v1/login`` takes ``{"token": …}``, compares it with the
server's token in constant time and answers with a ``Set-Cookie`` of an opaque login id:
``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it),
``Path=/``, ``Max-Age`` :data:`LOGIN_MAX_AGE_S`, and ``Secure`` when the request came over
https. The bearer middleware accepts that cookie wherever it accepts the header, streams
included. ``POST /v1/logout`` forgets the login and clears the cookie; ``GET /v1/login`` says
whether a token is required and how this request is authenticated, so the page knows whether
to show its login form.

The cookie's value is a random id (256 bits) and never the token; the server keeps only the
SHA-256 of each live id with its expiry, in memory (:class:`LoginSessions`). So a logout
really ends the login (a copied cookie stops working), the token never leaves the login
request, and a restart logs everyone out (they log in again). Failed logins are not throttled:
the token is the secret a bearer client sends anyway, and every guess costs a request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import Scope

from ..errors import Conflict, Unauthorized
from .middleware import api_router
from .schemas import error_responses

__all__ = [
    "COOKIE_PREFIX",
    "LOGIN_MAX_AGE_S",
    "MAX_LOGINS",
    "LoginSessions",
    "cookie_name",
    "login_routes",
]

COOKIE_PREFIX = "sessionledger_login_"
"""The cookie is named by this and the server's port: cookies are shared by every port of a
host, so two servers on one machine would otherwise log each other out."""
LOGIN_MAX_AGE_S = 12 * 3600
"""How long a login lasts, in seconds: the cookie's ``Max-Age`` and the server's own limit."""
MAX_LOGINS = 1024
"""Live logins kept; beyond it the oldest is forgotten (its browser logs in again)."""

Via = Literal["bearer", "cookie"]


def cookie_name(scope: Scope) -> str:
    """The login cookie's name on the port this request arrived on."""
    server = scope.get("server")
    port = server[1] if server and server[1] else 0
    return f"{COOKIE_PREFIX}{port}"


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


class LoginSessions:
    """The live logins of one server process: SHA-256 of the cookie value → expiry.

    Looking a cookie up by its digest compares nothing secret in a way that could leak it by
    timing; the raw values are never kept. The token check reads it on the event loop while
    the login routes run in worker threads: one lock keeps the table whole.
    """

    def __init__(
        self, *, max_age_s: float = LOGIN_MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_age_s = max_age_s
        self.clock = clock
        self._expiry: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def open(self) -> tuple[str, float]:
        """A new login: its cookie value and its expiry (seconds since the epoch)."""
        value = secrets.token_urlsafe(32)
        with self._lock:
            now = self.clock()
            for key in [key for key, expires in self._expiry.items() if expires <= now]:
                del self._expiry[key]
            while len(self._expiry) >= MAX_LOGINS:
                del self._expiry[next(iter(self._expiry))]
            expires = now + self.max_age_s
            self._expiry[_digest(value)] = expires
        return value, expires

    def expiry(self, value: str) -> float | None:
        """When the login of this cookie value ends; ``None`` when it is not a live one."""
        key = _digest(value)
        with self._lock:
            expires = self._expiry.get(key)
            if expires is None:
                return None
            if expires <= self.clock():
                del self._expiry[key]
                return None
            return expires

    def close(self, value: str) -> None:
        key = _digest(value)
        with self._lock:
            self._expiry.pop(key, None)

    def cookie(self, scope: Scope) -> str | None:
        """This request's login cookie value, if it sent one."""
        header = Headers(scope=scope).get("cookie")
        return None if header is None else cookie_parser(header).get(cookie_name(scope))

    def authorizes(self, scope: Scope) -> bool:
        """Whether this request carries the cookie of a live login."""
        value = self.cookie(scope)
        return value is not None and self.expiry(value) is not None


class LoginRequest(BaseModel):
    """Body of ``POST /v1/login``."""

    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=4096, description="the server's token")


class LoginState(BaseModel):
    """How this request is authenticated, and whether the server asks for a token at all."""

    model_config = ConfigDict(extra="forbid")
    tokenRequired: bool
    authenticated: bool = Field(description="true when no token is required")
    via: Via | None = Field(description="`bearer` (the header), `cookie` (a login) or null")
    expiresAt: str | None = Field(description="when the cookie's login ends (RFC 3339)")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def _refused(error: Unauthorized) -> JSONResponse:
    return JSONResponse(error.to_wire(), status_code=error.status,
                        headers={"WWW-Authenticate": "Bearer"})


def login_routes(token: str | None, logins: LoginSessions | None) -> APIRouter:
    """``GET``/``POST /v1/login`` and ``POST /v1/logout`` over the server's token."""
    router = api_router(tags=["login"])
    expected = None if token is None else token.encode("utf-8", "surrogateescape")

    def state(request: Request) -> dict[str, Any]:
        via: Via | None = request.scope.get("state", {}).get("auth")
        value = logins.cookie(request.scope) if logins is not None else None
        expires = logins.expiry(value) if logins is not None and value is not None else None
        return {"tokenRequired": expected is not None,
                "authenticated": expected is None or via is not None, "via": via,
                "expiresAt": None if expires is None else _iso(expires)}

    @router.get("/v1/login", response_model=None, responses={200: {"model": LoginState}})
    def login_state(request: Request) -> dict[str, Any]:
        """Whether a token is required and how this request is authenticated (no token needed)."""
        return state(request)

    @router.post("/v1/login", response_model=None, responses={
        200: {"model": LoginState}, **error_responses({
            401: "the token is not the server's (`unauthorized`); no cookie set",
            409: "this server requires no token (`conflict`)",
            422: "the body failed validation (`invalid_input`)",
        })})
    def login(body: LoginRequest, request: Request) -> JSONResponse:
        """Exchange the token for an HttpOnly, SameSite=Strict login cookie (12 h)."""
        if expected is None or logins is None:
            raise Conflict("this server requires no token: there is nothing to log in to")
        if not hmac.compare_digest(body.token.encode("utf-8", "surrogateescape"), expected):
            return _refused(Unauthorized("that is not this server's token"))
        previous = logins.cookie(request.scope)
        if previous is not None:
            logins.close(previous)  # one login per browser: the old cookie ends here
        value, expires = logins.open()
        answer = {**state(request), "authenticated": True, "via": "cookie",
                  "expiresAt": _iso(expires)}
        response = JSONResponse(answer)
        response.set_cookie(
            cookie_name(request.scope), value, max_age=int(logins.max_age_s), path="/",
            secure=request.url.scheme == "https", httponly=True, samesite="strict",
        )
        return response

    @router.post("/v1/logout", response_model=None, responses={200: {"model": LoginState}})
    def logout(request: Request) -> JSONResponse:
        """End this browser's login and clear its cookie (no token needed)."""
        if logins is not None:
            value = logins.cookie(request.scope)
            if value is not None:
                logins.close(value)
        after = state(request)  # the login is gone: only a bearer header still counts
        if after["via"] == "cookie":
            after.update(authenticated=expected is None, via=None)
        response = JSONResponse(after)
        response.delete_cookie(cookie_name(request.scope), path="/",
                               secure=request.url.scheme == "https", httponly=True,
                               samesite="strict")
        return response

    return router
