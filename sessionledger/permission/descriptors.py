"""What every tool declares about itself (TR-2, TR-3).

A :class:`ToolDescriptor` carries the flags the permission service decides on: read-only,
destructive, side-effect scope, whether the tool always needs the user, whether it needs
approval, and whether it is a session control allowed in Plan. The values for the service's
own tools are those of the TR-2 table; the host's usual coding tools get built-in descriptors;
MCP tools (``mcp__<server>__<tool>``) carry the flags their host declares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "HOST_TOOLS",
    "MCP_NAME",
    "SERVICE_TOOLS",
    "SideEffectScope",
    "ToolDescriptor",
    "ToolKind",
    "host_tool",
    "mcp_tool",
    "named_tool",
]

SideEffectScope = Literal["none", "session", "workspace", "system", "network"]
ToolKind = Literal["service", "host", "mcp"]
MCP_NAME = re.compile(r"^mcp__([A-Za-z0-9_-]+)__([A-Za-z0-9_.-]+)$")
OWN_MCP_NAME = re.compile(r"^mcp__?sessionledger__?([A-Za-z]+)$")
"""This ledger's own tools as a host names them when ``setup`` registered its MCP server
(Claude Code and Codex ``mcp__sessionledger__TodoWrite``, Gemini ``mcp_sessionledger_TodoWrite``):
a host's hook lets them through, since the server decides each call itself (TodoWrite runs in
Plan, a question waits for a person)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDescriptor:
    """The flags a tool declares; the permission service decides on these alone."""

    name: str
    kind: ToolKind
    read_only: bool
    destructive: bool = False
    side_effect_scope: SideEffectScope = "none"
    requires_user_interaction: bool = False
    needs_approval: bool = False
    allowed_in_plan_mode: bool = False
    file_edit: bool = False
    """Writes files (Write, Edit): ``edit`` mode allows it inside the workspace (PM-4)."""
    shell: bool = False
    """Runs a shell command (Bash): read-only-ness comes from the classifier (PM-4)."""
    timeout_s: float | None = None
    """The tool's own time limit, where it has one (ListModels 10 s, ReadSessionContext
    a fixed 5 minutes: LM-1, RS-2); its handler keeps to it."""


SERVICE_TOOLS: dict[str, ToolDescriptor] = {
    d.name: d
    for d in (
        ToolDescriptor(name="TodoRead", kind="service", read_only=True),
        ToolDescriptor(
            name="TodoWrite", kind="service", read_only=True, side_effect_scope="session",
            allowed_in_plan_mode=True,
        ),
        ToolDescriptor(
            name="AskUserQuestion", kind="service", read_only=True,
            requires_user_interaction=True,
        ),
        ToolDescriptor(
            name="EnterPlanMode", kind="service", read_only=False, side_effect_scope="session",
            allowed_in_plan_mode=True,
        ),
        ToolDescriptor(
            name="ExitPlanMode", kind="service", read_only=False, side_effect_scope="session",
            requires_user_interaction=True, allowed_in_plan_mode=True,
        ),
        ToolDescriptor(name="ListModels", kind="service", read_only=True, timeout_s=10.0),
        ToolDescriptor(
            name="ReadSessionContext", kind="service", read_only=True, timeout_s=300.0,
        ),
    )
}
"""The service's own tools with the TR-2 flags (handlers arrive with their issues)."""

HOST_TOOLS: dict[str, ToolDescriptor] = {
    d.name: d
    for d in (
        ToolDescriptor(name="Read", kind="host", read_only=True),
        ToolDescriptor(name="Grep", kind="host", read_only=True),
        ToolDescriptor(name="Glob", kind="host", read_only=True),
        ToolDescriptor(
            name="Write", kind="host", read_only=False, side_effect_scope="workspace",
            needs_approval=True, file_edit=True,
        ),
        ToolDescriptor(
            name="Edit", kind="host", read_only=False, side_effect_scope="workspace",
            needs_approval=True, file_edit=True,
        ),
        ToolDescriptor(
            name="Bash", kind="host", read_only=False, side_effect_scope="system",
            needs_approval=True, shell=True,
        ),
        ToolDescriptor(
            name="WebFetch", kind="host", read_only=True, side_effect_scope="network",
        ),
        # Claude Code's own tools (CC-4): read-only, or workspace writes like Write/Edit
        ToolDescriptor(name="LS", kind="host", read_only=True),
        ToolDescriptor(name="NotebookRead", kind="host", read_only=True),
        ToolDescriptor(name="WebSearch", kind="host", read_only=True),
        ToolDescriptor(name="Task", kind="host", read_only=True),
        ToolDescriptor(
            name="MultiEdit", kind="host", read_only=False, side_effect_scope="workspace",
            needs_approval=True, file_edit=True,
        ),
        ToolDescriptor(
            name="NotebookEdit", kind="host", read_only=False, side_effect_scope="workspace",
            needs_approval=True, file_edit=True,
        ),
        # Claude Code 2.1 (the tools the pinned binary offers, D200): its task list is the
        # session's todo list, allowed in every mode as TodoWrite is; what only touches the
        # session (a subagent, a message to one, a schedule, a skill's instructions, a report
        # to its UI) is read-only, the calls it leads to being checked each in turn
        ToolDescriptor(name="Agent", kind="host", read_only=True),
        *(ToolDescriptor(name=name, kind="host", read_only=True, side_effect_scope="session",
                         allowed_in_plan_mode=True)
          for name in ("TaskCreate", "TaskUpdate", "TaskStop")),
        ToolDescriptor(name="TaskGet", kind="host", read_only=True),
        ToolDescriptor(name="TaskList", kind="host", read_only=True),
        ToolDescriptor(name="TaskOutput", kind="host", read_only=True),
        *(ToolDescriptor(name=name, kind="host", read_only=True, side_effect_scope="session")
          for name in ("CronCreate", "CronDelete", "ScheduleWakeup", "SendMessage", "Skill",
                       "ReportFindings")),
        ToolDescriptor(name="CronList", kind="host", read_only=True),
        # Claude Code 2.1.337: ToolSearch loads the schemas of the tools it defers (WebFetch,
        # NotebookEdit, … are called only after it); ListAgents lists whom SendMessage can
        # reach; DeferredToolPlaceholder is never called (it keeps deferred loading on)
        *(ToolDescriptor(name=name, kind="host", read_only=True, side_effect_scope="session")
          for name in ("ToolSearch", "ListAgents", "DeferredToolPlaceholder")),
        # Monitor runs its command in the background as Bash runs one (a call that also opens
        # a WebSocket, `ws`, is never read-only: authority._SHELL_ACTIONS)
        ToolDescriptor(name="Monitor", kind="host", read_only=False, side_effect_scope="system",
                       needs_approval=True, shell=True),
        # a git worktree is made or removed in the workspace; a workflow runs a script of its
        # own: neither is read-only
        *(ToolDescriptor(name=name, kind="host", read_only=False,
                         side_effect_scope="workspace", needs_approval=True)
          for name in ("EnterWorktree", "ExitWorktree")),
        ToolDescriptor(name="Workflow", kind="host", read_only=False, side_effect_scope="system",
                       needs_approval=True),
        # Codex CLI 0.171 (its hooks name exec_command "Bash"): apply_patch edits the files its
        # patch names; write_stdin types into a running command; update_plan is its todo list;
        # its question tool and its goal tools touch only the session
        ToolDescriptor(name="apply_patch", kind="host", read_only=False,
                       side_effect_scope="workspace", needs_approval=True),
        ToolDescriptor(name="write_stdin", kind="host", read_only=False,
                       side_effect_scope="system", needs_approval=True),
        ToolDescriptor(name="update_plan", kind="host", read_only=True,
                       side_effect_scope="session", allowed_in_plan_mode=True),
        *(ToolDescriptor(name=name, kind="host", read_only=True, side_effect_scope="session")
          for name in ("request_user_input", "get_goal", "create_goal", "update_goal")),
        *(ToolDescriptor(name=name, kind="host", read_only=True)
          for name in ("view_image", "tool_search", "web_search")),
        # Gemini CLI 0.61: write_file and replace are Write and Edit; run_shell_command is
        # Bash; write_todos is its todo list; save_memory writes the user's GEMINI.md outside
        # any workspace; its plan mode and its topic touch only the session
        *(ToolDescriptor(name=name, kind="host", read_only=False, side_effect_scope="workspace",
                         needs_approval=True, file_edit=True)
          for name in ("write_file", "replace")),
        ToolDescriptor(name="run_shell_command", kind="host", read_only=False,
                       side_effect_scope="system", needs_approval=True, shell=True),
        ToolDescriptor(name="write_todos", kind="host", read_only=True,
                       side_effect_scope="session", allowed_in_plan_mode=True),
        ToolDescriptor(name="save_memory", kind="host", read_only=False,
                       side_effect_scope="system", needs_approval=True),
        *(ToolDescriptor(name=name, kind="host", read_only=True)
          for name in ("read_file", "read_many_files", "list_directory", "glob", "grep_search",
                       "search_file_content", "google_web_search",
                       "list_background_processes", "read_background_output", "invoke_agent")),
        ToolDescriptor(name="web_fetch", kind="host", read_only=True,
                       side_effect_scope="network"),
        *(ToolDescriptor(name=name, kind="host", read_only=True, side_effect_scope="session",
                         allowed_in_plan_mode=True)
          for name in ("enter_plan_mode", "exit_plan_mode", "update_topic", "activate_skill")),
    )
}
"""Built-in descriptors for the host's usual coding tools (TR-3), Claude Code's among them."""


def host_tool(name: str) -> ToolDescriptor | None:
    """The built-in descriptor of a host tool, or ``None`` if it has none."""
    return HOST_TOOLS.get(name)


def mcp_tool(name: str, *, read_only: bool, destructive: bool = False) -> ToolDescriptor:
    """A descriptor for ``mcp__<server>__<tool>`` with the flags its host declares."""
    if not MCP_NAME.match(name):
        raise ValueError(f"{name!r} is not an MCP tool name (mcp__<server>__<tool>)")
    return ToolDescriptor(
        name=name, kind="mcp", read_only=read_only, destructive=destructive,
        side_effect_scope="none" if read_only else "system", needs_approval=not read_only,
    )


def named_tool(name: str) -> ToolDescriptor:
    """The descriptor of any tool a host names without declaring flags (Claude Code, CC-4):
    the service's own tools (TodoWrite, AskUserQuestion, EnterPlanMode, ExitPlanMode, also as
    the ledger's MCP server's tools), the built-in host tools, and for anything else — an
    ``mcp__*`` tool or a tool this build does not know — a tool that is not read-only."""
    known = SERVICE_TOOLS.get(name) or HOST_TOOLS.get(name)
    if known is not None:
        return known
    own = OWN_MCP_NAME.match(name)
    if own is not None and own.group(1) in SERVICE_TOOLS:
        # the ledger's MCP server decides the call itself, on its own session, and asks the
        # person when the tool needs one: the host's hook lets it through
        return ToolDescriptor(name=name, kind="mcp", read_only=True, allowed_in_plan_mode=True)
    if MCP_NAME.match(name):
        return mcp_tool(name, read_only=False)
    return ToolDescriptor(
        name=name, kind="host", read_only=False, side_effect_scope="system", needs_approval=True,
    )
