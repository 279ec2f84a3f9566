"""The model catalog for hosts and clients: listing, resolving, and the session's model (§8).

The HTTP routes (``GET /v1/models``, ``GET /v1/models/resolve``, ``PUT …/model``) call this;
it is attached to :class:`~sessionledger.service.sessions.SessionService` as ``.models``.
A session's
current model is the user's choice recorded on the session (``SessionModelSelected``, read
from the tool-records projection), else the catalog's ``current``; only the user changes it
— ListModels never does (LM-1). Which catalog: the session's workspace's, or the server's
workspace root's when no session is named.

Errors: no catalog is 404 ``model_catalog_unavailable``; a reference that does not resolve
is 422 ``invalid_model_reference`` carrying the LM-2 message (at most 40 ids, "call
ListModels") and ``details.reason``; a selection appends nothing on either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventlog import NewEvent, SessionModelSelected
from projections import SessionSummary

from ..errors import (
    InvalidInput,
    NotFound,
)
from ..ledger import Ledger, eventlog_errors
from ..tools.models import (
    CATALOG_UNAVAILABLE_CODE,
    CATALOG_UNAVAILABLE_NAME,
    ModelCatalog,
    ModelCatalogPort,
    ModelReferenceError,
    ResolvedModel,
    listing_text,
    resolve_model_reference,
)

__all__ = ["InvalidModelReference", "ModelCatalogUnavailable", "ModelService"]



class ModelCatalogUnavailable(NotFound):
    """The host gives no model catalog for this workspace (error 31 of LM-1)."""

    code = CATALOG_UNAVAILABLE_NAME

    def __init__(self, workspace: str) -> None:
        super().__init__(
            "the host provides no model catalog for this workspace (a missing host "
            "capability, not a lack of configured models): add a [models] table to "
            ".sessionledger/config.toml",
            details={"errorCode": CATALOG_UNAVAILABLE_CODE, "workspace": workspace},
        )


class InvalidModelReference(InvalidInput):
    """A model reference that does not resolve (LM-2); the message is the model-facing one."""

    code = "invalid_model_reference"

    def __init__(self, error: ModelReferenceError) -> None:
        super().__init__(error.message, details={
            "ref": error.ref, "reason": error.reason, "available": error.available,
        })


class ModelService:
    """Lists and resolves models, and records the user's choice of a session's model."""

    def __init__(
        self, ledger: Ledger, *, catalog: ModelCatalogPort, workspace_root: Path,
    ) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._projections = ledger.projections
        self._catalog = catalog
        self._root = workspace_root

    def chosen(self, session_id: str) -> str | None:
        """The model the user chose for the session, or ``None`` (the host's default)."""
        records = self._projections.records
        with eventlog_errors():
            doc = self._store.read_view(lambda tx: records.chosen_model(tx, session_id))
        return None if doc is None else str(doc.body["model"])

    def _catalog_of(self, session_id: str | None) -> tuple[ModelCatalog, SessionSummary | None]:
        session = None if session_id is None else self._ledger.live(session_id)
        workspace = self._root if session is None else Path(session.workspace)
        catalog = self._catalog.read(workspace)
        if catalog is None:
            raise ModelCatalogUnavailable(str(workspace))
        return catalog, session

    def current(self, catalog: ModelCatalog, session_id: str | None) -> str | None:
        """The session's current model id as the catalog spells it (``None`` if unlisted)."""
        wanted = (self.chosen(session_id) if session_id else None) or catalog.current
        found = catalog.find(wanted) if wanted else None
        return found.id if found else None

    def listing(self, session_id: str | None = None) -> dict[str, Any]:
        """``GET /v1/models``: the ListModels text and the catalog as JSON."""
        catalog, _ = self._catalog_of(session_id)
        current = self.current(catalog, session_id)
        text, cut = listing_text(catalog, current=current)
        return {"text": text, "current": current, "cutModels": cut,
                "models": [m.to_wire() for m in catalog.models]}

    def resolve(self, ref: str, session_id: str | None = None) -> ResolvedModel:
        """LM-2 against the session's catalog, preferring its current model's provider."""
        catalog, _ = self._catalog_of(session_id)
        current = self.current(catalog, session_id)
        provider = current.partition("/")[0] if current else None
        try:
            return resolve_model_reference(ref, catalog, session_provider=provider)
        except ModelReferenceError as exc:
            raise InvalidModelReference(exc) from exc

    def select(self, session_id: str, ref: str) -> dict[str, Any]:
        """The user sets the session's model: resolved by LM-2, recorded on the session."""
        def attempt() -> dict[str, Any]:
            session = self._ledger.live(session_id)
            resolved = self.resolve(ref, session_id)
            event = SessionModelSelected(level=resolved.level, model=resolved.id)
            appended = self._ledger.append(
                session_id, [NewEvent(event, actor="user")], expected_version=session.version
            )
            return {"sessionId": session_id, "model": resolved.id, "level": resolved.level,
                    "version": appended.version}

        with eventlog_errors():
            return self._ledger.retry(session_id, attempt)
