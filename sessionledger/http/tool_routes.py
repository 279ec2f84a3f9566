"""Tool calls and the user's answers over HTTP (SPEC §11).

``POST /v1/sessions/{id}/tool-calls`` runs a service tool: 200 when it completed or was
denied, 202 while it waits for the user; re-sending a ``callId`` returns the original call.
``POST …/interactions/{iid}/respond`` answers a waiting call and returns the call document once
its completion is committed. ``POST …/permission-check`` decides for the host's own tools.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ..service.sessions import SessionService
from .middleware import api_router
from .schemas import (
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    TOO_LARGE,
    CallDocument,
    CallIdPath,
    CompletedCall,
    InteractionIdPath,
    PendingCall,
    PermissionAnswer,
    SessionIdPath,
    error_responses,
)

__all__ = ["PermissionCheckRequest", "RespondRequest", "ToolCallRequest", "tool_routes"]

_RESPONSES = error_responses({
    404: "no such session, call or interaction",
    409: "the interaction was already resolved, or the call id is taken",
    410: "the session was deleted (`session_deleted`)",
    422: "the input failed the tool's schema (`invalid_input`), or the workspace's config.toml "
         "cannot be used (`invalid_configuration`, naming the key); nothing appended",
})


class ToolCallRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/tool-calls``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra={
        "examples": [
            {"tool": "TodoWrite", "input": {"todos": [
                {"content": "Write the tests", "status": "in_progress", "priority": "high"}]}},
            {"tool": "AskUserQuestion", "callId": "call_1", "input": {"questions": [{
                "question": "Which database?", "header": "Database", "multiSelect": False,
                "options": [{"label": "SQLite (Recommended)", "description": "one file"},
                            {"label": "Postgres", "description": "a server"}]}]}},
            {"tool": "EnterPlanMode", "input": {}},
        ],
    })

    tool: str = Field(min_length=1, max_length=200)
    input: dict[str, Any]
    call_id: str | None = Field(
        default=None, alias="callId", min_length=1, max_length=MAX_ID_CHARS,
        description="the host's id for the call; re-sending it returns the original call",
    )


class RespondRequest(BaseModel):
    """Body of ``POST …/interactions/{iid}/respond``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"decision": "approve"}, {"decision": "deny"},
        {"decision": "feedback", "feedback": "Split the second step in two."},
    ]})

    decision: Literal["modify", "approve", "deny", "feedback"]
    input: dict[str, Any] | None = Field(
        default=None, description="with modify: the new tool input (answers filled in)"
    )
    feedback: str | None = Field(
        default=None, max_length=MAX_TEXT_CHARS, description="with feedback: the user's text"
    )


class PermissionCheckRequest(BaseModel):
    """Body of ``POST …/permission-check`` for one of the host's own tools (TR-3)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra={
        "examples": [{"tool": "Bash", "input": {"command": "git status"}}],
    })

    tool: str = Field(min_length=1, max_length=200)
    input: dict[str, Any] = Field(default_factory=dict)
    read_only: bool | None = Field(default=None, alias="readOnly")
    destructive: bool | None = None
    call_id: str | None = Field(default=None, alias="callId", max_length=MAX_ID_CHARS)


def tool_routes(service: SessionService) -> APIRouter:
    """The tool-call, answer and permission-check routes over ``service``."""
    router = api_router(tags=["tool calls"], responses=_RESPONSES)

    @router.post(
        "/v1/sessions/{session_id}/tool-calls", response_model=None,
        responses={200: {"model": CallDocument, "description": "completed or denied"},
                   202: {"model": PendingCall, "description": "waiting for the user"},
                   **TOO_LARGE},
    )
    def call_tool(
        session_id: SessionIdPath, body: Annotated[ToolCallRequest, Body()]
    ) -> JSONResponse:
        """Run a tool call: 200 completed or denied, 202 pending on the user."""
        answer = service.tools.call(session_id, body.tool, body.input, call_id=body.call_id)
        return JSONResponse(answer.document, status_code=answer.status_code)

    @router.get(
        "/v1/sessions/{session_id}/tool-calls/{call_id}", response_model=None,
        responses={200: {"model": CallDocument}},
    )
    def get_call(session_id: SessionIdPath, call_id: CallIdPath) -> JSONResponse:
        """The call document as it is now (``pending`` until resolved)."""
        answer = service.tools.get(session_id, call_id)
        return JSONResponse(answer.document, status_code=200)

    @router.post(
        "/v1/sessions/{session_id}/interactions/{interaction_id}/respond", response_model=None,
        responses={200: {"model": CompletedCall}, **TOO_LARGE},
    )
    def respond(
        session_id: SessionIdPath, interaction_id: InteractionIdPath,
        body: Annotated[RespondRequest, Body()],
    ) -> dict[str, Any]:
        """Answer a waiting call; the completed call document."""
        return service.tools.respond(
            session_id, interaction_id, body.decision, input=body.input, feedback=body.feedback
        )

    @router.post(
        "/v1/sessions/{session_id}/permission-check", response_model=None,
        responses={200: {"model": PermissionAnswer}, **TOO_LARGE},
    )
    def permission_check(
        session_id: SessionIdPath, body: Annotated[PermissionCheckRequest, Body()]
    ) -> dict[str, Any]:
        """Decide allow / ask / deny for a host tool; recorded as an event."""
        return service.tools.permission_check(
            session_id, body.tool, body.input, read_only=body.read_only,
            destructive=body.destructive, call_id=body.call_id,
        )

    return router
