"""Model reference resolution (SPEC LM-2): what a workflow's ``subagent_model`` names.

:func:`resolve_model_reference` is pure: a reference, the catalog and the provider of the
session's current model in, a :class:`ResolvedModel` or a typed
:class:`ModelReferenceError` out. The rules, all comparisons ignoring case:

1. ``providerId/modelId`` — that exact entry.
2. bare ``modelId`` under exactly one provider — that entry.
3. bare ``modelId`` under several — the one under the session model's provider, else an
   ambiguity error naming the candidates.

Disabled entries never match silently: they do not count toward uniqueness (a bare id with
one enabled and one disabled entry resolves to the enabled one), and when the only match is
disabled the error names it with its reason. An optional ``$level`` suffix must be one of
the model's reasoning levels (returned in the catalog's spelling); without it the model's
default level applies (``None`` when it has none). Every failure message lists at most
:data:`MAX_LISTED` enabled ids in catalog order and tells the model to call ListModels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from .model_catalog import CatalogModel, ModelCatalog

__all__ = [
    "MAX_LISTED",
    "AmbiguousModel",
    "DisabledModel",
    "InvalidLevel",
    "MalformedReference",
    "ModelReferenceError",
    "ResolvedModel",
    "UnknownModel",
    "available_note",
    "resolve_model_reference",
]

MAX_LISTED = 40
"""At most this many available ids are listed in a failure message."""


class ModelReferenceError(ValueError):
    """A reference that does not resolve; ``reason`` says which rule failed.

    ``message`` is the full text for the model: the problem, up to :data:`MAX_LISTED`
    available ids and the advice to call ListModels. ``available`` holds the ids listed.
    """

    reason: ClassVar[str] = "unresolved"

    def __init__(self, problem: str, *, ref: str, catalog: ModelCatalog) -> None:
        self.problem = problem
        self.ref = ref
        self.available = catalog.enabled_ids()[:MAX_LISTED]
        self.message = f"{problem} {available_note(catalog)}"
        super().__init__(self.message)


class MalformedReference(ModelReferenceError):
    """Empty, or not ``modelId`` / ``providerId/modelId`` with an optional ``$level``."""

    reason = "malformed"


class UnknownModel(ModelReferenceError):
    """No entry of the catalog has this id."""

    reason = "unknown"


class AmbiguousModel(ModelReferenceError):
    """A bare id under several providers, none of them the session model's."""

    reason = "ambiguous"


class DisabledModel(ModelReferenceError):
    """The only entries the reference matches are disabled."""

    reason = "disabled"


class InvalidLevel(ModelReferenceError):
    """The ``$level`` suffix is not one of the model's reasoning levels."""

    reason = "invalid_level"


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """What a reference resolved to: the entry and the reasoning level to run it at."""

    model: CatalogModel
    level: str | None

    @property
    def id(self) -> str:
        return self.model.id

    def to_wire(self) -> dict[str, str | None]:
        """``{"id": "provider/model", "level": …}`` (SPEC §11, ``GET /v1/models/resolve``)."""
        return {"id": self.model.id, "level": self.level}


def available_note(catalog: ModelCatalog) -> str:
    """The tail of every failure: up to 40 enabled ids and the advice to call ListModels."""
    ids = catalog.enabled_ids()
    if not ids:
        listed = "Available models: none (every model in the catalog is disabled)."
    else:
        more = len(ids) - MAX_LISTED
        tail = f" … and {more} more" if more > 0 else ""
        listed = f"Available models: {', '.join(ids[:MAX_LISTED])}{tail}."
    return f"{listed} Call ListModels to see every model with its reasoning levels."


def _disabled(matches: Sequence[CatalogModel]) -> str:
    return "; ".join(f"{m.id} is disabled: {m.disabled}" for m in matches)


def _pick(
    name: str, ref: str, catalog: ModelCatalog, session_provider: str | None
) -> CatalogModel:
    if "/" in name:
        provider, _, model_id = name.partition("/")
        if not provider or not model_id or "/" in model_id:
            raise MalformedReference(
                f"{ref!r} is not a model reference (use modelId or providerId/modelId).",
                ref=ref, catalog=catalog,
            )
        exact = catalog.find(name)
        if exact is None:
            raise UnknownModel(f"No model {name!r} in the catalog.", ref=ref, catalog=catalog)
        if not exact.enabled:
            raise DisabledModel(f"Model {_disabled([exact])}.", ref=ref, catalog=catalog)
        return exact
    matches = [m for m in catalog.models if m.model_id.lower() == name.lower()]
    enabled = [m for m in matches if m.enabled]
    if len(enabled) == 1:
        return enabled[0]
    if not enabled:
        if matches:
            raise DisabledModel(f"Model {_disabled(matches)}.", ref=ref, catalog=catalog)
        raise UnknownModel(f"No model {name!r} in the catalog.", ref=ref, catalog=catalog)
    if session_provider is not None:
        own = [m for m in enabled if m.provider_id.lower() == session_provider.lower()]
        if len(own) == 1:
            return own[0]
    candidates = ", ".join(m.id for m in enabled)
    raise AmbiguousModel(
        f"Model {name!r} is offered by several providers ({candidates}); "
        "name one as providerId/modelId.",
        ref=ref, catalog=catalog,
    )


def _level(model: CatalogModel, level: str | None, ref: str, catalog: ModelCatalog) -> str | None:
    if level is None:
        return model.default_level
    found = next((lv for lv in model.reasoning_levels if lv.lower() == level.lower()), None)
    if found is not None:
        return found
    levels = ", ".join(model.reasoning_levels) or "none"
    raise InvalidLevel(
        f"{level!r} is not a reasoning level of {model.id} (its levels: {levels}).",
        ref=ref, catalog=catalog,
    )


def resolve_model_reference(
    ref: str, catalog: ModelCatalog, *, session_provider: str | None = None
) -> ResolvedModel:
    """Resolve ``ref`` (``modelId``, ``providerId/modelId``, either with ``$level``).

    ``session_provider`` is the provider of the session's current model: it breaks a tie
    between providers offering the same bare id. Raises a :class:`ModelReferenceError`.
    """
    text = ref.strip()
    name, dollar, level = text.partition("$")
    name = name.strip()
    if not name or any(c.isspace() for c in name):
        raise MalformedReference(
            f"{ref!r} is not a model reference (use modelId or providerId/modelId, "
            "optionally followed by $level).",
            ref=ref, catalog=catalog,
        )
    model = _pick(name, ref, catalog, session_provider)
    return ResolvedModel(model, _level(model, level.strip() if dollar else None, ref, catalog))
