"""Request bodies parsed once, by the strict decoder of SPEC EG-1.

FastAPI reads a JSON body with ``await request.json()`` (Starlette's ``json.loads``, which takes
``NaN``, any nesting its stack allows, any integer, lone surrogates, and UTF-16). Every route
here is a :class:`StrictJsonRoute`, whose requests decode with :func:`eventlog.loads_json`
instead: the same one parse, with the shape check of every JSON value from outside. A body it
refuses never reaches validation or a handler; FastAPI reports the failure as an HTTP error
caused by the :class:`~eventlog.JsonShapeError`, which the app answers as 422 ``invalid_input``
naming the path (``app.py``). A syntax error stays FastAPI's own 422 ``json_invalid``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute

from eventlog import loads_json

__all__ = ["StrictJsonRequest", "StrictJsonRoute", "api_router"]


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
