"""ListModels (SPEC LM-1): the contract, the listing text and the handler.

No parameters (input ``{}``, strict). Every call reads the host's catalog afresh through the
:class:`~sessionledger.tools.model_catalog.ModelCatalogPort` — bounded by the tool's 10 s timeout —
and answers one line per model::

    anthropic/claude-sonnet — Anthropic · reasoning: low, high (default low) · context 200000 tokens
    anthropic/claude-opus — Anthropic · context 200000 tokens [current]
    openai/gpt-x — OpenAI [disabled: no API key]

``[current]`` marks the session's model (the user's choice recorded on the session, else the
host's ``current``); ``[disabled: reason]`` marks unusable ones. The text is at most
:data:`OUTPUT_BUDGET` bytes: whole lines are dropped from the end and a note says how many.
Without a catalog the call fails with error 31 ``model_catalog_unavailable`` in
``result.error`` and says it is a missing host capability, not a lack of configured models.
The tool is registered only with the dynamic-workflow flag (TR-1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from eventlog import InteractionKind

from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .handlers import HandlerOutcome, PortTimeout, Resolution, ToolContext, call_with_timeout
from .model_catalog import CatalogModel, ModelCatalog, ModelCatalogPort

__all__ = [
    "CATALOG_UNAVAILABLE_CODE",
    "CATALOG_UNAVAILABLE_NAME",
    "DESCRIPTION",
    "NOT_A_SWITCH",
    "OUTPUT_BUDGET",
    "TIMEOUT_S",
    "ListModelsHandler",
    "ListModelsInput",
    "listing_text",
    "model_line",
    "unavailable_result",
]

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
