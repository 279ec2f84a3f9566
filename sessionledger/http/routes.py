"""The JSON endpoints for sessions (SPEC §11): create, list, read, delete, page events, audit.

Each route validates its input with pydantic or FastAPI's parameter parsing, calls one
:class:`~sessionledger.service.sessions.SessionService` method and returns its document.
Handlers are
plain functions, so FastAPI runs them in worker threads and the store's blocking calls never
stall the event loop. The execution-state commands (mode, goal) are in
:mod:`sessionledger.http.execution_routes`.

A deleted session answers 410 ``session_deleted`` on its document, its stream and its
commands; its events page and its audit stay readable until the session is purged.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field

from eventlog import HostKind

from ..service.sessions import (
    DEFAULT_EVENTS_LIMIT,
    MAX_EVENTS_LIMIT,
    RequestedMode,
    SessionService,
)
from .middleware import api_router
from .schemas import (
    TOO_LARGE,
    AuditDocument,
    DeletedSession,
    EventsPage,
    Health,
    PlainInt,
    SessionDocument,
    SessionIdPath,
    SessionList,
    error_responses,
)

__all__ = ["CreateSessionRequest", "session_routes"]

_NOT_FOUND = "no such session (`session_not_found`)"
_DELETED = "the session was deleted (`session_deleted`)"
_INVALID = "a parameter or the body failed validation (`invalid_input`); nothing appended"


class CreateSessionRequest(BaseModel):
    """Body of ``POST /v1/sessions``; every field optional, unknown fields rejected."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    mode: RequestedMode | None = Field(
        default=None, description="permission mode; 'plan' means build with Plan on"
    )
    workspace: str | None = Field(
        default=None, max_length=4096, description="inside the server's workspace root"
    )
    parent_session_id: str | None = Field(
        default=None, alias="parentSessionId", max_length=256,
        description="the spawning session, for a subagent",
    )
    host: HostKind = Field(default="protocol", description="protocol, tui or headless")


def session_routes(service: SessionService) -> APIRouter:
    """Routes over ``service``; the router is built per app, so tests can run several."""
    router = api_router(tags=["sessions"])

    @router.get("/healthz", tags=["health"], response_model=None,
                responses={200: {"model": Health}})
    def healthz() -> dict[str, Any]:
        """Liveness and readiness: the store answers."""
        return {"status": "ok", "headPosition": service.store.head_position()}

    @router.post(
        "/v1/sessions", status_code=201, response_model=None,
        responses={201: {"model": SessionDocument}, **error_responses({
            404: "the parent session does not exist (`session_not_found`)",
            410: "the parent session was deleted (`session_deleted`)",
            422: "a field failed validation (`invalid_input`), the workspace resolves "
                 "outside the server's root (`workspace_outside_root`), or its config.toml "
                 "cannot be used (`invalid_configuration`, naming the key); nothing appended",
        }), **TOO_LARGE},
    )
    def create_session(
        body: Annotated[CreateSessionRequest | None, Body()] = None,
    ) -> dict[str, Any]:
        """Create a session: exactly one ``SessionCreated`` event; 201 with its document."""
        request = body or CreateSessionRequest()
        return service.create_session(
            mode=request.mode,
            workspace=request.workspace,
            parent_session_id=request.parent_session_id,
            host=request.host,
        )

    @router.get("/v1/sessions", response_model=None, responses={200: {"model": SessionList}})
    def list_sessions() -> dict[str, Any]:
        """Every session not deleted, most recently updated first."""
        return service.list_sessions()

    @router.get(
        "/v1/sessions/{session_id}", response_model=None,
        responses={200: {"model": SessionDocument}, **error_responses(
            {404: _NOT_FOUND, 410: _DELETED, 422: _INVALID})},
    )
    def get_session(session_id: SessionIdPath) -> dict[str, Any]:
        """The session document: execution state, todos, pending interactions, version."""
        return service.document(session_id)

    @router.delete(
        "/v1/sessions/{session_id}", response_model=None,
        responses={200: {"model": DeletedSession}, **error_responses({
            404: _NOT_FOUND, 409: "the session kept changing under the request (`conflict`)",
            410: "the session was already deleted (`session_deleted`)", 422: _INVALID})},
    )
    def delete_session(session_id: SessionIdPath) -> dict[str, Any]:
        """Delete a session: one ``SessionDeleted`` event; its routes then answer 410."""
        return service.delete_session(session_id)

    @router.get(
        "/v1/sessions/{session_id}/events", response_model=None,
        responses={200: {"model": EventsPage}, **error_responses(
            {404: _NOT_FOUND, 422: _INVALID})},
    )
    def get_events(
        session_id: SessionIdPath,
        after: Annotated[PlainInt, Query(description="return events with seq > after")] = 0,
        limit: Annotated[
            PlainInt, Query(description=f"page size, 1 to {MAX_EVENTS_LIMIT}")
        ] = DEFAULT_EVENTS_LIMIT,
    ) -> dict[str, Any]:
        """One page of the session's envelopes and its version (also once deleted)."""
        return service.events(session_id, after=after, limit=limit)

    @router.get(
        "/v1/sessions/{session_id}/audit", response_model=None,
        responses={200: {"model": AuditDocument}, **error_responses(
            {404: _NOT_FOUND, 422: _INVALID})},
    )
    def audit(session_id: SessionIdPath) -> dict[str, Any]:
        """Hash chain, undecodable events, projections against a fresh fold (also once deleted)."""
        return service.audit(session_id)

    return router
