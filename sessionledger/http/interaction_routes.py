"""The auto-continue timer's routes (SPEC §11, HO-5, HO-6): user activity and the settings.

``POST /v1/sessions/{id}/interactions/{iid}/activity`` tells the service the user is engaging
with a waiting question (moving, selecting, typing). No body is needed; ``{"action": …}``
may name what the user did. It answers 200 with the interaction as the session document
lists it — its ``autoResolution`` now ``paused`` (times kept) if its clock was running, or
``null`` if it had not started (it will not start now) — 404 for an unknown interaction,
409 once it is resolved (a deadline that has passed counts: the auto-continue is appended
first), 410 for a deleted session.

``GET /v1/settings`` answers ``{"autoContinueQuestions": bool}``; ``PUT`` takes the same shape,
any subset (``{}`` changes nothing), unknown keys or non-boolean values are 422 and append
nothing. Turning the setting off pauses running countdowns before the answer is sent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from eventlog import UserActivityAction

from ..service.sessions import SessionService
from ..service.settings import SettingsUpdate
from .middleware import api_router
from .schemas import (
    TOO_LARGE,
    InteractionDocument,
    InteractionIdPath,
    SessionIdPath,
    SettingsDocument,
    error_responses,
)

__all__ = ["ActivityRequest", "interaction_routes"]

_INVALID = "the body failed validation (`invalid_input`); nothing appended"
_ACTIVITY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": InteractionDocument},
    **error_responses({
        404: "no such session or interaction",
        409: "the interaction was already resolved (answered or auto-continued)",
        410: "the session was deleted (`session_deleted`)",
        422: _INVALID,
    }),
    **TOO_LARGE,
}


class ActivityRequest(BaseModel):
    """Optional body of ``POST …/interactions/{iid}/activity``."""

    model_config = ConfigDict(extra="forbid")

    action: UserActivityAction = Field(
        default="other", description="what the user did: move, select, type or other"
    )


def interaction_routes(service: SessionService) -> APIRouter:
    """The activity and settings routes over ``service``."""
    router = api_router(tags=["auto-continue"])

    @router.post(
        "/v1/sessions/{session_id}/interactions/{interaction_id}/activity",
        response_model=None, responses=_ACTIVITY_RESPONSES,
    )
    def activity(
        session_id: SessionIdPath, interaction_id: InteractionIdPath,
        body: Annotated[ActivityRequest | None, Body()] = None,
    ) -> dict[str, Any]:
        """Record user activity on a waiting question; pauses its countdown for good."""
        action = (body or ActivityRequest()).action
        return service.timers.activity(session_id, interaction_id, action)

    @router.get(
        "/v1/settings", response_model=None, responses={200: {"model": SettingsDocument}}
    )
    def get_settings() -> dict[str, Any]:
        """The service-wide settings: whether unanswered questions auto-continue."""
        return service.settings.current()

    @router.put(
        "/v1/settings", response_model=None,
        responses={200: {"model": SettingsDocument}, **error_responses({422: _INVALID}),
                   **TOO_LARGE},
    )
    def put_settings(body: Annotated[SettingsUpdate, Body()]) -> dict[str, Any]:
        """Change settings (any subset); recorded as ``SettingChanged`` events."""
        return service.settings.update(body.model_dump(by_alias=True, exclude_none=True))

    return router
