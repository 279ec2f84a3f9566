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

The cookie's value is signed, never the token: ``<expiry>.<nonce>.<HMAC-SHA256>`` under a key
derived from the token (scrypt, once at start), so every replica with the same token accepts a
login made on any of them, and a restart keeps everyone logged in; the login lasts until its
expiry (12 hours) or until the token changes. Its name, ``sessionledger_login_`` and 16 hex
characters of that key's digest, is the same on every replica behind one address and differs
between two servers of one machine with other tokens (cookies are shared by every port of a
host). ``POST /v1/logout`` clears the browser's cookie and ends its login on the replica that
answered it: a copy of the cookie still works on another replica until it expires (nothing but
the token is shared between replicas). Failed logins are not throttled: the token is the secret
a bearer client sends anyway, and every guess costs a request.
"""

from __future__ import annotations

import base64
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
    "LoginSessions",
    "login_routes",
]

COOKIE_PREFIX = "sessionledger_login_"
"""The cookie's name is this and 16 hex characters derived from the token (:class:`Logins`)."""
LOGIN_MAX_AGE_S = 12 * 3600
"""How long a login lasts, in seconds: the cookie's ``Max-Age`` and the signed expiry."""
MAX_ENDED = 10_000
"""Logouts remembered by one process until their cookies expire; beyond it the oldest is
forgotten (its cookie, if someone kept a copy, works again until it expires)."""

Via = Literal["bearer", "cookie"]


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class LoginSessions:
    """The logins of every replica sharing one token: signed cookies, checked statelessly.

    The key is scrypt of the token (a cookie in the wrong hands does not make guessing a weak
    token cheap); the signature is compared in constant time. Ended logins (logouts here) are
    kept by the digest of their cookie until they expire. The token check reads this on the
    event loop while the login routes run in worker threads: one lock keeps that table whole.
    """

    def __init__(
        self, token: str, *, max_age_s: float = LOGIN_MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_age_s = max_age_s
        self.clock = clock
        """Seconds since the epoch: the wall clock, which every replica shares."""
        self._key = hashlib.scrypt(token.encode("utf-8", "surrogateescape"),
                                   salt=b"sessionledger login cookie", n=2**14, r=8, p=1)
        self.name = COOKIE_PREFIX + hashlib.sha256(b"name\0" + self._key).hexdigest()[:16]
        """The cookie's name: the same on every replica with this token."""
        self._ended: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def _signature(self, body: str) -> str:
        return _b64(hmac.digest(self._key, body.encode("ascii"), "sha256"))

    def open(self) -> tuple[str, float]:
        """A new login: its cookie value and its expiry (seconds since the epoch)."""
        expires = int(self.clock() + self.max_age_s)
        body = f"{expires}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._signature(body)}", float(expires)

    def expiry(self, value: str) -> float | None:
        """When the login of this cookie value ends; ``None`` when it is not a live one."""
        body, dot, signature = value.rpartition(".")
        if not dot or not body.isascii() or not hmac.compare_digest(
                signature.encode("utf-8", "surrogateescape"),
                self._signature(body).encode("ascii")):
            return None
        expires = float(body.partition(".")[0])  # signed by us: digits
        if expires <= self.clock():
            return None
        with self._lock:
            if _digest(value) in self._ended:
                return None
        return expires

    def close(self, value: str) -> None:
        """End this cookie's login here (a logout)."""
        expires = self.expiry(value)
        if expires is None:
            return
        with self._lock:
            now = self.clock()
            for key in [key for key, until in self._ended.items() if until <= now]:
                del self._ended[key]
            while len(self._ended) >= MAX_ENDED:
                del self._ended[next(iter(self._ended))]
            self._ended[_digest(value)] = expires

    def cookie(self, scope: Scope) -> str | None:
        """This request's login cookie value, if it sent one."""
        header = Headers(scope=scope).get("cookie")
        return None if header is None else cookie_parser(header).get(self.name)

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
            logins.name, value, max_age=int(logins.max_age_s), path="/",
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
        if logins is not None:
            response.delete_cookie(logins.name, path="/",
                                   secure=request.url.scheme == "https", httponly=True,
                                   samesite="strict")
        return response

    return router
