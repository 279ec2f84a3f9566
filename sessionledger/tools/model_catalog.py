"""The host's model catalog as a port, and its file-backed implementation (SPEC §8, TR-4).

ListModels and model references (LM-1, LM-2) read the catalog through
:class:`ModelCatalogPort`: ``read(workspace)`` answers the catalog the host offers for that
workspace, or ``None`` when the host offers none — a missing capability, which ListModels
reports as error 31 ``model_catalog_unavailable`` (not "no models configured": a catalog may
well be empty). The implementation here, :class:`FileModelCatalog`, is the one TR-4 names:
the ``[models]`` table of ``<workspace>/.sessionledger/config.toml``, read again on every
call (a host edits the file; nothing is cached beyond the file's modification time).

:class:`ModelCatalog` is the catalog in catalog order (providers as listed, their models as
listed), flattened to :class:`CatalogModel` entries whose ``id`` is ``providerId/modelId``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..config.workspace import ModelsConfig, WorkspaceConfig, load_workspace_config

__all__ = [
    "CatalogModel",
    "FileModelCatalog",
    "ModelCatalog",
    "ModelCatalogPort",
    "StaticModelCatalog",
    "catalog_from_config",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogModel:
    """One model of the catalog with its provider, as ListModels shows it."""

    provider_id: str
    provider_name: str
    model_id: str
    name: str | None = None
    context_window: int | None = None
    reasoning_levels: tuple[str, ...] = ()
    default_level: str | None = None
    disabled: str | None = None
    """Why the model cannot be used; ``None`` when it can."""

    @property
    def id(self) -> str:
        """``providerId/modelId``: the id models and workflows refer to."""
        return f"{self.provider_id}/{self.model_id}"

    @property
    def enabled(self) -> bool:
        return self.disabled is None

    def to_wire(self) -> dict[str, Any]:
        """The entry as ``GET /v1/models`` lists it."""
        return {
            "id": self.id, "providerId": self.provider_id, "providerName": self.provider_name,
            "modelId": self.model_id, "name": self.name, "contextWindow": self.context_window,
            "reasoningLevels": list(self.reasoning_levels), "defaultLevel": self.default_level,
            "disabled": self.disabled,
        }


@dataclass(frozen=True, slots=True)
class ModelCatalog:
    """Every model the host offers, in catalog order, and the host's current model."""

    models: tuple[CatalogModel, ...] = ()
    current: str | None = None
    """The host's session model as ``providerId/modelId`` (a session's own choice, recorded
    as ``SessionModelSelected``, takes precedence)."""

    def enabled_ids(self) -> list[str]:
        """The ids of the usable models, in catalog order."""
        return [m.id for m in self.models if m.enabled]

    def find(self, model_id: str) -> CatalogModel | None:
        """The entry whose ``providerId/modelId`` equals ``model_id`` ignoring case."""
        wanted = model_id.lower()
        return next((m for m in self.models if m.id.lower() == wanted), None)


def catalog_from_config(models: ModelsConfig) -> ModelCatalog:
    """The catalog of a validated ``[models]`` table."""
    return ModelCatalog(
        models=tuple(
            CatalogModel(
                provider_id=provider.id, provider_name=provider.display_name,
                model_id=model.id, name=model.name, context_window=model.context_window,
                reasoning_levels=model.reasoning_levels, default_level=model.default_level,
                disabled=model.disabled,
            )
            for provider in models.providers
            for model in provider.models
        ),
        current=models.current,
    )


class ModelCatalogPort(Protocol):
    """Where the host's model catalog comes from."""

    def read(self, workspace: Path) -> ModelCatalog | None:
        """The catalog for sessions of ``workspace``; ``None`` when the host gives none."""


class FileModelCatalog:
    """The ``[models]`` table of the workspace's ``config.toml`` (TR-4), read per call.

    ``load`` reads a workspace's configuration; by default straight from the file, or the
    permission service's cache (which re-reads a changed file) when the service passes it.
    An invalid file raises :class:`~sessionledger.errors.ConfigurationError` naming the key.
    """

    def __init__(self, load: Callable[[Path], WorkspaceConfig] = load_workspace_config) -> None:
        self._load = load

    def read(self, workspace: Path) -> ModelCatalog | None:
        models = self._load(workspace).models
        return None if models is None else catalog_from_config(models)


class StaticModelCatalog:
    """A fixed catalog (or none) for every workspace: embedding hosts and tests."""

    def __init__(self, catalog: ModelCatalog | None) -> None:
        self.catalog = catalog

    def read(self, workspace: Path) -> ModelCatalog | None:
        return self.catalog
