"""The turn loop over HTTP (SPEC §11): messages, compaction, and preparing a model request.

``POST /v1/sessions/{id}/messages`` records one real message (201 with where it landed; with
a ``messageId`` sent before, 200 with the original receipt and nothing appended, EG-6);
``POST /v1/sessions/{id}/compact`` records that the host compacted the context (200, same
body); ``POST /v1/sessions/{id}/prepare-request`` decides the reminders for the next model
request and records them (TD-5, PM-5, PM-10) — it is not idempotent: each call that returns
reminders moves the counters. Bodies are strict: unknown fields, blank content or tool names
and non-boolean flags are 422 ``invalid_input`` and append nothing; an unknown session is
404, a deleted one 410.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ..service.sessions import SessionService
from ..service.turns import receipt
from .middleware import api_router
from .schemas import MAX_ID_CHARS, MAX_TEXT_CHARS, TOO_LARGE, SessionIdPath, error_responses

__all__ = [
    "CompactRequest",
    "MessageRequest",
    "PrepareRequest",
    "RecordedReceipt",
    "ReminderOut",
    "RemindersResponse",
    "turn_routes",
]

_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses({
        404: "no such session (`session_not_found`)",
        410: "the session was deleted (`session_deleted`)",
        422: "the body failed validation (`invalid_input`); nothing appended",
    }),
    **TOO_LARGE,
}
MAX_TOOLS = 1000
"""More tool names than any host offers in one request; a longer list is bad input."""


def _not_blank(value: str, name: str) -> str:
    if not value.strip():
        raise ValueError(f"'{name}' must not be blank")
    return value


class MessageRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/messages``: one real message of the conversation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    role: Literal["assistant", "user"]
    content: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS,
        description="the message text (not only whitespace)",
    )
    continuation: StrictBool = Field(
        default=False,
        description="true for an output-token continuation (not counted by TD-5)",
    )
    message_id: str | None = Field(
        default=None, alias="messageId", min_length=1, max_length=MAX_ID_CHARS,
        description="the host's id for the message; re-sending it appends nothing and "
        "answers the original receipt (200)",
    )

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        return _not_blank(value, "content")


class CompactRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/compact``: empty (``{}``) or no body at all."""

    model_config = ConfigDict(extra="forbid")


class PrepareRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/prepare-request``."""

    model_config = ConfigDict(extra="forbid")

    tools: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        max_length=MAX_TOOLS, description="the tool names this model request offers"
    )
    continuation: StrictBool = Field(
        default=False,
        description="an output-token continuation: no todo reminder (Plan reminders still come)",
    )

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str]) -> list[str]:
        if any(not name.strip() for name in value):
            raise ValueError("tool names must not be blank")
        return value


class RecordedReceipt(BaseModel):
    """Where a recorded event landed: its ``seq`` and the session's version after it."""

    sessionId: str  # the wire names are camelCase
    seq: int
    version: int
    recordedAt: str


class ReminderOut(BaseModel):
    """One reminder to inject, in the order it goes into the request."""

    kind: Literal["todo_reminder", "runtime_mode", "plan_exit", "plan_file_reference"]
    variant: Literal["full", "sparse"] | None
    text: str


class RemindersResponse(BaseModel):
    """Answer of ``prepare-request``: the reminders, possibly none."""

    reminders: list[ReminderOut]


def turn_routes(service: SessionService) -> APIRouter:
    """The messages, compact and prepare-request routes over ``service.turns``."""
    router = api_router(tags=["turn loop"], responses=_RESPONSES)

    @router.post(
        "/v1/sessions/{session_id}/messages", status_code=201,
        response_model=RecordedReceipt,
        responses={200: {"model": RecordedReceipt,
                         "description": "the messageId was recorded before: the original "
                         "receipt, nothing appended"}},
    )
    def record_message(
        session_id: SessionIdPath, body: Annotated[MessageRequest, Body()]
    ) -> JSONResponse:
        """Record a real message: 201 with its ``seq``, 200 for a ``messageId`` sent before.

        With a ``messageId`` already recorded in this session (also before a restart) nothing
        is appended and the answer is the original receipt, whatever the new role and content.
        """
        result = service.turns.message(
            session_id, body.role, body.content, continuation=body.continuation,
            message_id=body.message_id,
        )
        return JSONResponse(receipt(result), status_code=200 if result.replayed else 201)

    @router.post("/v1/sessions/{session_id}/compact", response_model=RecordedReceipt)
    def compact(
        session_id: SessionIdPath, body: Annotated[CompactRequest | None, Body()] = None
    ) -> dict[str, Any]:
        """Record a context compaction (``ContextCompacted``); 200 with its ``seq``."""
        return service.turns.compact(session_id)

    @router.post(
        "/v1/sessions/{session_id}/prepare-request", response_model=RemindersResponse
    )
    def prepare_request(
        session_id: SessionIdPath, body: Annotated[PrepareRequest, Body()]
    ) -> dict[str, Any]:
        """Decide and record this model request's reminders, in injection order."""
        reminders = service.turns.prepare_request(
            session_id, body.tools, continuation=body.continuation
        )
        return {"reminders": [r.to_wire() for r in reminders]}

    return router
