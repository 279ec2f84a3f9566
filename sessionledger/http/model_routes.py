"""The model catalog over HTTP (SPEC §8, §11): list, resolve, and the session's model.

* ``GET /v1/models[?sessionId=…]`` — the ListModels text and the catalog as JSON
  (``{"text", "current", "cutModels", "models": [...]}``), for the session's workspace or,
  without a session, the server's workspace root. No catalog: 404
  ``model_catalog_unavailable``.
* ``GET /v1/models/resolve?ref=…[&sessionId=…]`` — LM-2: ``{"id": "provider/model",
  "level": …}``, or 422 ``invalid_model_reference`` with the LM-2 message.
* ``PUT /v1/sessions/{id}/model`` ``{"model": ref}`` — the user sets the session's model
  (resolved by LM-2, recorded as ``SessionModelSelected``); 200 with the choice. Tools never
  change it (LM-1).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field

from ..service.sessions import SessionService
from .middleware import api_router
from .schemas import (
    MAX_ID_CHARS,
    TOO_LARGE,
    ModelListing,
    ModelSelection,
    ResolvedModelAnswer,
    SessionIdPath,
    error_responses,
)

__all__ = ["ModelChoice", "model_routes"]

_RESPONSES = error_responses({
    404: "no model catalog (`model_catalog_unavailable`) or no such session",
    410: "the session was deleted (`session_deleted`)",
    422: "the reference does not resolve (`invalid_model_reference`, the LM-2 message) or "
         "the request failed validation; nothing appended",
})

SessionQuery = Annotated[
    str | None,
    Query(alias="sessionId", min_length=1, max_length=MAX_ID_CHARS,
          description="the session whose workspace catalog and current model apply"),
]


class ModelChoice(BaseModel):
    """Body of ``PUT /v1/sessions/{id}/model``: a model reference (LM-2)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"model": "anthropic/sonnet"}, {"model": "sonnet$high"}],
    })

    model: str = Field(
        min_length=1, max_length=400,
        description="providerId/modelId or a bare modelId, optionally with $level",
    )


def model_routes(service: SessionService) -> APIRouter:
    """The model catalog routes over ``service``."""
    router = api_router(tags=["models"], responses=_RESPONSES)

    @router.get("/v1/models", response_model=None, responses={200: {"model": ModelListing}})
    def list_models(session_id: SessionQuery = None) -> dict[str, Any]:
        """The ListModels text and the catalog as JSON (LM-1)."""
        return service.models.listing(session_id)

    @router.get(
        "/v1/models/resolve", response_model=None,
        responses={200: {"model": ResolvedModelAnswer}},
    )
    def resolve_model(
        ref: Annotated[str, Query(min_length=1, max_length=400,
                                  description="the model reference to resolve")],
        session_id: SessionQuery = None,
    ) -> dict[str, Any]:
        """Resolve a model reference (LM-2): ``{"id", "level"}``."""
        return service.models.resolve(ref, session_id).to_wire()

    @router.put(
        "/v1/sessions/{session_id}/model", response_model=None,
        responses={200: {"model": ModelSelection}, **error_responses(
            {409: "the session kept changing under the request (`conflict`)"}), **TOO_LARGE},
    )
    def select_model(
        session_id: SessionIdPath, body: Annotated[ModelChoice, Body()]
    ) -> dict[str, Any]:
        """The user's choice of the session's model, recorded on the session."""
        return service.models.select(session_id, body.model)

    return router
