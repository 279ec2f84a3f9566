"""The web client's routes (SPEC §11 ``GET /``): the page, its static files, the event types.

``GET /`` answers the page, ``/static/…`` its JavaScript modules, CSS and icon from the
package's :data:`~sessionledger.web.STATIC_DIR`, each with ``Cache-Control: no-cache`` (the
browser revalidates with the ETag, so an upgraded server never runs with an old module) and an
explicit content type. The page carries a Content-Security-Policy that allows only this
origin's scripts, styles and connections and no inline script, so text that reaches the page
from the log can never run even if it were inserted as HTML by mistake.

``GET /v1/event-types`` lists the catalog's event type names, and ``Undecodable`` (a stored
event this build cannot decode, SPEC EG-1). A browser's ``EventSource``
delivers an SSE event whose ``event:`` line names a type only to a listener registered for
that name, so the page asks the server which names exist instead of keeping a copy that
would drift when the catalog grows.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from eventlog import CATALOG, UNDECODABLE

from ..web import INDEX_FILE, STATIC_DIR
from .middleware import api_router
from .schemas import EventTypes

__all__ = ["CONTENT_SECURITY_POLICY", "STATIC_PREFIX", "install_web_client", "web_routes"]

STATIC_PREFIX = "/static"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
_PAGE_HEADERS = {
    **_HEADERS, "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
}


class _ClientFiles(StaticFiles):
    """Static files with the page's headers and a content type that does not depend on the
    host's ``mimetypes`` tables (a module script served as ``text/plain`` would not run)."""

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        media_type = _MEDIA_TYPES.get(os.path.splitext(str(full_path))[1])
        if media_type is not None and response.status_code != 304:
            response.headers["content-type"] = media_type
        response.headers.update(_HEADERS)
        return response


def web_routes() -> APIRouter:
    """``GET /`` and ``GET /v1/event-types``."""
    router = api_router(tags=["web client"])

    @router.get("/", response_class=FileResponse)
    def index() -> FileResponse:
        """The web client: sessions, mode, todos, questions with their countdown, plans."""
        return FileResponse(INDEX_FILE, media_type=_MEDIA_TYPES[".html"], headers=_PAGE_HEADERS)

    @router.get("/v1/event-types", response_model=None, responses={200: {"model": EventTypes}})
    def event_types() -> dict[str, Any]:
        """The event catalog's names and ``Undecodable``: the ``event:`` values streams send."""
        return {"eventTypes": [*CATALOG, UNDECODABLE]}

    return router


def install_web_client(app: FastAPI) -> None:
    """Add the page, its files under :data:`STATIC_PREFIX` and the event-types route."""
    app.include_router(web_routes())
    app.mount(STATIC_PREFIX, _ClientFiles(directory=STATIC_DIR), name="static")
