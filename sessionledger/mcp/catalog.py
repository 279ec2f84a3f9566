"""The tools an MCP client is offered: the session's surface, as MCP ``Tool`` entries.

The MCP server offers the session tools of SPEC TR-1 that an agent can use without running
prompts for the service — TodoRead, TodoWrite, AskUserQuestion, EnterPlanMode, ExitPlanMode,
ReadSessionContext and ListModels (when the dynamic-workflow flag is on) — as far as the
session's surface holds them (a subagent has no Plan tools), plus ``InteractionStatus``.
Each entry's input schema and description are the ones the HTTP service gives the model
(:meth:`ToolHandler.model_schema`, from the pydantic contracts); its annotations come from
the tool's descriptor (``readOnlyHint``, ``destructiveHint``).
"""

from __future__ import annotations

from typing import Any

from mcp_types import Tool, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from ..permission.descriptors import ToolDescriptor
from ..tools.registry import ToolRegistry

__all__ = [
    "INTERACTION_STATUS",
    "MCP_TOOLS",
    "InteractionStatusInput",
    "interaction_status_tool",
    "mcp_tool_entry",
    "offered_tools",
]

MCP_TOOLS = (
    "TodoRead", "TodoWrite", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode",
    "ReadSessionContext", "ListModels",
)
"""The session tools exposed over MCP, in listing order (the cron and off-peak tools are
left to hosts that run prompts, D119)."""
INTERACTION_STATUS = "InteractionStatus"


class InteractionStatusInput(BaseModel):
    """Input of ``InteractionStatus``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    interaction_id: str = Field(
        alias="interactionId", min_length=1, max_length=200,
        description="The id of a pending question or plan approval, as a pending call named it "
                    "(int_…).",
    )


_STATUS_DESCRIPTION = (
    "Check a question or plan approval that is waiting for the user. When AskUserQuestion or "
    "ExitPlanMode answers that it is pending (this client cannot ask the user itself), a person "
    "answers it elsewhere — on the sessionledger web page, for example. Call this with the "
    "interactionId it named: while it waits you are told so; once it is resolved you get the "
    "tool's result, exactly as if the call had just completed."
)


def _annotations(descriptor: ToolDescriptor) -> ToolAnnotations:
    return ToolAnnotations(
        title=descriptor.name, read_only_hint=descriptor.read_only,
        destructive_hint=descriptor.destructive,
    )


def mcp_tool_entry(
    name: str, description: str, schema: dict[str, Any], descriptor: ToolDescriptor
) -> Tool:
    """One MCP tool entry."""
    return Tool(
        name=name, description=description, input_schema=schema,
        annotations=_annotations(descriptor),
    )


def interaction_status_tool() -> Tool:
    """The extra tool of the no-elicitation path: read-only, not destructive."""
    schema = InteractionStatusInput.model_json_schema(by_alias=True)
    descriptor = ToolDescriptor(name=INTERACTION_STATUS, kind="service", read_only=True)
    return mcp_tool_entry(INTERACTION_STATUS, _STATUS_DESCRIPTION, schema, descriptor)


def offered_tools(registry: ToolRegistry, surface: list[str]) -> list[Tool]:
    """The MCP entries of the tools in ``surface``, then ``InteractionStatus``."""
    entries: list[Tool] = []
    for name in MCP_TOOLS:
        handler = registry.handler(name)
        if name in surface and handler is not None:
            entries.append(mcp_tool_entry(
                name, handler.description, handler.model_schema(), handler.descriptor
            ))
    return [*entries, interaction_status_tool()]
