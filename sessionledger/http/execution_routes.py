"""The execution-state commands over HTTP (SPEC §3, §11): ``/mode`` and ``/goal``.

``POST /v1/sessions/{id}/mode`` takes ``{"mode": …, "task"?: …}`` (``/mode X``, or with mode
``plan`` and a task the desktop ``/plan [task]`` path, the task recorded as a user message) or
``{"cycle": true}`` (Shift+Tab). ``POST /v1/sessions/{id}/goal`` starts a goal and
``DELETE /v1/sessions/{id}/goal`` ends it. Each answers 200 with the session document; a
change the state machine refuses is 409 ``refused`` with the machine's message (ES-5's exact
sentence for Plan and Goal together) and appends nothing; a deleted session is 410.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from ..service.sessions import RequestedMode, SessionService
from .middleware import api_router
from .schemas import (
    MAX_TEXT_CHARS,
    TOO_LARGE,
    SessionDocument,
    SessionIdPath,
    error_responses,
)

__all__ = ["COMMAND_RESPONSES", "GoalRequest", "ModeRequest", "execution_routes"]

COMMAND_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": SessionDocument},
    **error_responses({
        404: "no such session (`session_not_found`)",
        409: "the state machine refused the change (`refused`); nothing appended",
        410: "the session was deleted (`session_deleted`)",
        422: "the body failed validation (`invalid_input`)",
    }),
}
"""The answers every command route documents: the session document, or ``{"error": {…}}``."""


def _blank(text: str | None) -> bool:
    return text is not None and not text.strip()


class ModeRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/mode``: exactly one of ``mode`` and ``cycle``."""

    model_config = ConfigDict(extra="forbid")

    mode: RequestedMode | None = Field(
        default=None, description="plan enters Plan (keeping the mode); others leave it"
    )
    task: str | None = Field(
        default=None, min_length=1, max_length=MAX_TEXT_CHARS,
        description="with mode plan only: the /plan task, recorded as a user message",
    )
    cycle: StrictBool | None = Field(default=None, description="true: Shift+Tab")

    @model_validator(mode="after")
    def _one_command(self) -> ModeRequest:
        if (self.mode is None) == (self.cycle is None):
            raise ValueError("send exactly one of 'mode' and 'cycle'")
        if self.cycle is False:
            raise ValueError("'cycle' must be true")
        if self.task is not None and self.mode != "plan":
            raise ValueError("'task' goes with mode 'plan' only")
        if _blank(self.task):
            raise ValueError("'task' must not be blank")
        return self


class GoalRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/goal``."""

    model_config = ConfigDict(extra="forbid")

    objective: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS,
        description="what the agent pursues on its own",
    )

    @model_validator(mode="after")
    def _not_blank(self) -> GoalRequest:
        if _blank(self.objective):
            raise ValueError("'objective' must not be blank")
        return self


def execution_routes(service: SessionService) -> APIRouter:
    """The mode and goal routes over ``service`` (its one runtime keeps ES-6 order)."""
    router = api_router(tags=["execution state"], responses=COMMAND_RESPONSES)

    @router.post("/v1/sessions/{session_id}/mode", response_model=None, responses=TOO_LARGE)
    def change_mode(
        session_id: SessionIdPath, body: Annotated[ModeRequest, Body()]
    ) -> dict[str, Any]:
        """Set the mode (`/mode X`, `/plan [task]`) or cycle it (Shift+Tab); the document."""
        if body.cycle:
            return service.cycle_mode(session_id)
        assert body.mode is not None  # the model allows nothing else
        return service.set_mode(session_id, body.mode, task=body.task)

    @router.post("/v1/sessions/{session_id}/goal", response_model=None, responses=TOO_LARGE)
    def start_goal(
        session_id: SessionIdPath, body: Annotated[GoalRequest, Body()]
    ) -> dict[str, Any]:
        """Start a goal; 409 in Plan (ES-5) or while another goal is active."""
        return service.start_goal(session_id, body.objective)

    @router.delete("/v1/sessions/{session_id}/goal", response_model=None)
    def end_goal(session_id: SessionIdPath) -> dict[str, Any]:
        """End the active goal; 409 when there is none."""
        return service.end_goal(session_id)

    return router
