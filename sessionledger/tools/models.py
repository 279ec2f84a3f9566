"""ListModels and the model catalog, whole: the catalog port, references, the tool (LM-1, LM-2).

The host's catalog as a port (:class:`ModelCatalogPort`) with its file-backed implementation
(:class:`FileModelCatalog`, TR-4) and the catalog it answers (:class:`ModelCatalog` of
:class:`CatalogModel`); what a workflow's ``subagent_model`` names
(:func:`resolve_model_reference`, LM-2); and ListModels — its contract, its listing text
(:func:`listing_text`) and :class:`ListModelsHandler` (LM-1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from eventlog import InteractionKind

from ..config.workspace import ModelsConfig, WorkspaceConfig, load_workspace_config
from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .handlers import HandlerOutcome, PortTimeout, Resolution, ToolContext, call_with_timeout

__all__ = [
    "CATALOG_UNAVAILABLE_CODE",
    "CATALOG_UNAVAILABLE_NAME",
    "DESCRIPTION",
    "MAX_LISTED",
    "NOT_A_SWITCH",
    "OUTPUT_BUDGET",
    "TIMEOUT_S",
    "AmbiguousModel",
    "CatalogModel",
    "DisabledModel",
    "FileModelCatalog",
    "InvalidLevel",
    "ListModelsHandler",
    "ListModelsInput",
    "MalformedReference",
    "ModelCatalog",
    "ModelCatalogPort",
    "ModelReferenceError",
    "ResolvedModel",
    "StaticModelCatalog",
    "UnknownModel",
    "available_note",
    "catalog_from_config",
    "listing_text",
    "model_line",
    "resolve_model_reference",
    "unavailable_result",
]


# -- the catalog: a port and its file-backed implementation (LM-1, LM-2, TR-4) ---------------
#
# ListModels and model references (LM-1, LM-2) read the catalog through ModelCatalogPort:
# ``read(workspace)`` answers the catalog the host offers for that workspace, or ``None`` when
# the host offers none — a missing capability, which ListModels reports as error 31
# ``model_catalog_unavailable`` (not "no models configured": a catalog may well be empty). The
# implementation here, FileModelCatalog, is the one TR-4 names: the ``[models]`` table of
# ``<workspace>/.sessionledger/config.toml``, read again on every call (a host edits the file;
# nothing is cached beyond the file's modification time).
#
# ModelCatalog is the catalog in catalog order (providers as listed, their models as listed),
# flattened to CatalogModel entries whose ``id`` is ``providerId/modelId``.

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


# -- model references: what a workflow's ``subagent_model`` names (LM-2) --------------------
#
# resolve_model_reference is pure: a reference, the catalog and the provider of the session's
# current model in, a ResolvedModel or a typed ModelReferenceError out. The rules, all
# comparisons ignoring case:
#
# 1. ``providerId/modelId`` — that exact entry.
# 2. bare ``modelId`` under exactly one provider — that entry.
# 3. bare ``modelId`` under several — the one under the session model's provider, else an
#    ambiguity error naming the candidates.
#
# Disabled entries never match silently: they do not count toward uniqueness (a bare id with
# one enabled and one disabled entry resolves to the enabled one), and when the only match is
# disabled the error names it with its reason. An optional ``$level`` suffix must be one of the
# model's reasoning levels (returned in the catalog's spelling); without it the model's default
# level applies (``None`` when it has none). Every failure message lists at most MAX_LISTED
# enabled ids in catalog order and tells the model to call ListModels.

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
        """``{"id": "provider/model", "level": …}`` (docs/spec.md, ``GET /v1/models/resolve``)."""
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


# -- ListModels: the contract, the listing text and the handler (LM-1) -----------------------
#
# No parameters (input ``{}``, strict). Every call reads the host's catalog afresh through the
# ModelCatalogPort — bounded by the tool's 10 s timeout — and answers one line per model:
#
#  anthropic/claude-sonnet — Anthropic · reasoning: low, high (default low) · context 200000 tokens
#  anthropic/claude-opus — Anthropic · context 200000 tokens [current]
#  openai/gpt-x — OpenAI [disabled: no API key]
#
# ``[current]`` marks the session's model (the user's choice recorded on the session, else the
# host's ``current``); ``[disabled: reason]`` marks unusable ones. The text is at most
# OUTPUT_BUDGET bytes: whole lines are dropped from the end and a note says how many. Without a
# catalog the call fails with error 31 ``model_catalog_unavailable`` in ``result.error`` and
# says it is a missing host capability, not a lack of configured models. The tool is
# registered only with the dynamic-workflow flag (TR-1).

OUTPUT_BUDGET = 24000
"""The most bytes (UTF-8) ListModels answers; longer listings are cut with a note."""
TIMEOUT_S = SERVICE_TOOLS["ListModels"].timeout_s or 10.0
"""ListModels' timeout (LM-1)."""
CATALOG_UNAVAILABLE_CODE = 31
CATALOG_UNAVAILABLE_NAME = "model_catalog_unavailable"

NOT_A_SWITCH = (
    "This tool does NOT change the model you are running on. The session model is the "
    "user's choice and only the user changes it; `subagent_model` only moves the workflow's "
    "subagents."
)
"""The exact sentence of LM-1."""

DESCRIPTION = (
    "List the models the host offers, so you can pick `subagent_model` for a dynamic "
    "workflow. One line per model: its id as providerId/modelId, the provider, its reasoning "
    "levels and default level if any, and its context window; [current] marks the session's "
    "model and [disabled: reason] a model that cannot be used. Refer to a model as "
    "providerId/modelId (or a bare modelId when only one provider offers it), optionally "
    "followed by $level. Takes no input.\n\n" + NOT_A_SWITCH
)


class ListModelsInput(BaseModel):
    """ListModels' input: nothing (strict)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def model_line(model: CatalogModel, *, current: bool) -> str:
    """One model as ListModels lists it."""
    parts = [f"{model.id} — {model.provider_name}"]
    if model.name:
        parts[0] += f" ({model.name})"
    if model.reasoning_levels:
        levels = f"reasoning: {', '.join(model.reasoning_levels)}"
        if model.default_level:
            levels += f" (default {model.default_level})"
        parts.append(levels)
    if model.context_window is not None:
        parts.append(f"context {model.context_window} tokens")
    line = " · ".join(parts)
    if current:
        line += " [current]"
    if model.disabled is not None:
        line += f" [disabled: {model.disabled}]"
    return line


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def listing_text(
    catalog: ModelCatalog, *, current: str | None, budget: int = OUTPUT_BUDGET
) -> tuple[str, int]:
    """The listing and how many model lines were cut to keep it within ``budget`` bytes."""
    wanted = (current or "").lower()
    header = (f"{len(catalog.models)} model(s) in the host's catalog "
              "(id — provider · reasoning levels · context window):")
    if not catalog.models:
        return "The host's model catalog lists no models.", 0
    lines = [model_line(m, current=m.id.lower() == wanted) for m in catalog.models]
    text = "\n".join([header, *lines])
    if _size(text) <= budget:
        return text, 0
    kept: list[str] = [header]
    used = _size(header)
    for index, line in enumerate(lines):
        cut = len(lines) - index
        note = _cut_note(cut, budget)
        if used + 1 + _size(line) + 1 + _size(note) > budget:
            return "\n".join([*kept, note]), cut
        kept.append(line)
        used += 1 + _size(line)
    raise AssertionError("unreachable: the whole listing did not fit")  # pragma: no cover


def _cut_note(cut: int, budget: int) -> str:
    return (f"[… {cut} more model(s) not shown: the listing was cut at {budget} bytes. "
            "Refer to a model by providerId/modelId.]")


def unavailable_result(detail: str | None = None) -> HandlerOutcome:
    """Error 31: the host gives no model catalog (a missing capability)."""
    message = (
        "The host provides no model catalog: this is a missing host capability, not a lack of "
        "configured models. ListModels cannot list models here; leave `subagent_model` unset "
        "so the workflow's subagents run on the session model."
    )
    if detail:
        message += f" ({detail})"
    return HandlerOutcome(
        success=False, model_content=message,
        result={"error": {"code": CATALOG_UNAVAILABLE_CODE, "name": CATALOG_UNAVAILABLE_NAME,
                          "message": message}},
    )


CurrentModel = Callable[[str], str | None]
"""The session's current model id for a session id (``None``: the host's default)."""


class ListModelsHandler:
    """Reads the catalog on every call and lists it (LM-1)."""

    descriptor: ToolDescriptor = SERVICE_TOOLS["ListModels"]
    description: str = DESCRIPTION

    def __init__(
        self, catalog: ModelCatalogPort, current: CurrentModel, *, timeout_s: float = TIMEOUT_S
    ) -> None:
        self._catalog = catalog
        self._current = current
        self._timeout_s = timeout_s

    def model_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {}, "additionalProperties": False}

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        ListModelsInput.model_validate(dict(raw))

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        ListModelsInput.model_validate(dict(raw))

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """Only reached when a workspace rule makes ListModels ask."""
        return "toolApproval", {"tool": "ListModels", "input": dict(raw)}

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        if resolution is not None and resolution.decision == "deny":
            return HandlerOutcome(success=False, model_content="The user declined ListModels.",
                                  result={"declined": True})
        workspace = Path(context.session.workspace)
        try:
            catalog = call_with_timeout(
                lambda: self._catalog.read(workspace), self._timeout_s, name="model catalog"
            )
        except PortTimeout as exc:
            return HandlerOutcome(
                success=False, model_content=f"ListModels timed out: {exc}.",
                result={"error": {"code": "timeout", "message": str(exc)}},
            )
        if catalog is None:
            return unavailable_result()
        current = self._current(context.session.session_id) or catalog.current
        text, cut = listing_text(catalog, current=current)
        found = catalog.find(current) if current else None
        return HandlerOutcome(success=True, model_content=text, result={
            "models": len(catalog.models), "current": found.id if found else None,
            "cutModels": cut,
        })
