"""``sessionledger setup claude-code``: this ledger's hooks in a Claude Code settings file.

:func:`ledger_hooks` is the ``hooks`` table docs/claude-code.md shows (its snippets are checked
against it): HTTP hooks to a running ``serve`` for every event Claude Code posts, and the
command hook for ``SessionStart``, which Claude Code runs only as a command ("HTTP hooks are not
supported for SessionStart") — or, with ``command``, the command hook for every event.

:func:`merged` puts them into a settings document and :func:`removed` takes exactly them out:
a hook is this ledger's when it posts to :data:`~.wire.HOOK_PATH` or runs
``sessionledger hook claude-code``; everything else in the file — other hooks, other events,
other settings — is kept as it was. Merging twice gives the same document (the old copies of
this ledger's hooks are replaced, not repeated).
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from typing import Any

from .wire import HOOK_PATH, HOOK_PATHS

__all__ = [
    "CODEX_EVENTS",
    "CODEX_PLAN_TOOL_NOTE",
    "GEMINI_EVENTS",
    "HOOK_TIMEOUT_S",
    "LEDGER_EVENTS",
    "MCP_NAME",
    "SettingsError",
    "changes",
    "codex_hooks",
    "codex_mcp",
    "codex_trust",
    "gemini_hooks",
    "gemini_mcp",
    "is_ledger_hook",
    "ledger_hooks",
    "merged",
    "removed",
]

LEDGER_EVENTS: tuple[str, ...] = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
    "PostToolUseFailure", "PreCompact", "Stop",
)
"""The events this ledger hooks, in the order the settings list them."""

COMMAND_ONLY = frozenset({"SessionStart"})
"""Events Claude Code hooks only with a command (2.1: "HTTP hooks are not supported for
SessionStart")."""

MATCHED = frozenset({"SessionStart", "PreToolUse", "PermissionRequest", "PostToolUse",
                     "PostToolUseFailure", "PreCompact"})
"""Events that take a ``matcher`` (a tool, a source, a trigger): ``*`` matches all."""

HOOK_TIMEOUT_S = 10
"""Seconds Claude Code waits for each hook."""

HELD: dict[str, str] = {"PreToolUse": "AskUserQuestion", "PermissionRequest": "ExitPlanMode"}
"""The hook (event and tool) that waits while a question or plan approval is answered on the
ledger's pages (a session answered here): it gets :data:`HELD_TIMEOUT_S`, and every other tool
of the event keeps :data:`HOOK_TIMEOUT_S` (a JavaScript regex matcher leaving the tool out)."""

HELD_TIMEOUT_S = 600
"""Seconds Claude Code waits for a held hook; the hook gives up 5 seconds before (the
command's ``--timeout``, the server's hold), and Claude Code asks in its own dialog."""

COMMAND = "sessionledger hook claude-code"


class SettingsError(ValueError):
    """A settings file this command cannot change without losing something: not a JSON
    object, or a ``hooks`` table not shaped as Claude Code reads it."""


def _command(url: str | None, db: str | None, *, timeout: int | None = None) -> str:
    parts = [COMMAND]
    if url is not None:
        parts += ["--url", shlex.quote(url)]
    if db is not None:
        parts += ["--db", shlex.quote(db)]
    if timeout is not None:
        parts += ["--timeout", str(timeout)]
    parts += ["--workspace", '"$CLAUDE_PROJECT_DIR"']
    return " ".join(parts)


def ledger_hooks(*, url: str | None, db: str | None = None,
                 command: bool = False) -> dict[str, list[dict[str, Any]]]:
    """The ``hooks`` table: HTTP hooks to ``url`` (a ``serve``'s ``http://HOST:PORT``) where
    Claude Code takes them and the command hook elsewhere; every hook a command with
    ``command`` (or without ``url``). The command names ``url`` (forwarding to the server)
    and ``db`` (where it records when no server answers) when given."""
    table: dict[str, list[dict[str, Any]]] = {}

    def hook(event: str, held: bool) -> dict[str, Any]:
        found: dict[str, Any]
        if command or url is None or event in COMMAND_ONLY:
            waits = HELD_TIMEOUT_S - 5 if held else None
            found = {"type": "command", "command": _command(url, db, timeout=waits)}
        else:
            found = {"type": "http", "url": url.rstrip("/") + HOOK_PATH}
        found["timeout"] = HELD_TIMEOUT_S if held else HOOK_TIMEOUT_S
        return found

    for event in LEDGER_EVENTS:
        held_tool = HELD.get(event)
        if held_tool is not None:
            table[event] = [
                {"matcher": f"^(?!{held_tool}$)", "hooks": [hook(event, False)]},
                {"matcher": held_tool, "hooks": [hook(event, True)]},
            ]
            continue
        entry: dict[str, Any] = {"matcher": "*"} if event in MATCHED else {}
        entry["hooks"] = [hook(event, False)]
        table[event] = [entry]
    return table


def is_ledger_hook(hook: Any) -> bool:
    """Whether one hook of a settings file is this ledger's (any host's)."""
    if not isinstance(hook, Mapping):
        return False
    if hook.get("type") == "http":
        url = hook.get("url")
        return isinstance(url, str) and url.split("?", 1)[0].endswith(HOOK_PATH)
    if hook.get("type") == "command":
        text = hook.get("command")
        if not isinstance(text, str):
            return False
        words = text.split()
        return len(words) >= 3 and words[0].endswith("sessionledger") and words[1] == "hook" \
            and words[2] in HOOK_PATHS
    return False


def _table(settings: Mapping[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, Mapping):
        raise SettingsError('"hooks" is not a JSON object')
    for event, entries in hooks.items():
        if not isinstance(entries, list) or not all(
                isinstance(e, Mapping) and isinstance(e.get("hooks", []), list)
                for e in entries):
            raise SettingsError(f'"hooks.{event}" is not a list of {{"matcher", "hooks"}} '
                                "objects")
    return dict(hooks)


def removed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` without this ledger's hooks: an entry left with no hook goes, an event
    left with no entry goes, and ``hooks`` goes when nothing is left in it."""
    document = copy.deepcopy(dict(settings))
    table = _table(document)
    kept: dict[str, Any] = {}
    for event, entries in table.items():
        left = []
        for entry in entries:
            hooks = entry.get("hooks", [])
            others = [h for h in hooks if not is_ledger_hook(h)]
            if len(others) == len(hooks):
                left.append(entry)
            elif others:
                left.append({**entry, "hooks": others})
        if left:
            kept[event] = left
    if kept:
        document["hooks"] = kept
    else:
        document.pop("hooks", None)
    return document


def merged(settings: Mapping[str, Any], hooks: Mapping[str, list[dict[str, Any]]]
           ) -> dict[str, Any]:
    """``settings`` with this ledger's hooks replaced by ``hooks`` (added after the user's own
    entries of each event); everything else kept."""
    document = removed(settings)
    table = dict(document.get("hooks", {}))
    for event, entries in hooks.items():
        table[event] = [*table.get(event, []), *copy.deepcopy(entries)]
    document["hooks"] = table
    return document


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What changed between two settings documents, one line per hook event."""
    lines = []
    old = before.get("hooks", {}) if isinstance(before.get("hooks"), Mapping) else {}
    new = after.get("hooks", {}) if isinstance(after.get("hooks"), Mapping) else {}
    for event in [*old, *(e for e in new if e not in old)]:
        if event not in new:
            lines.append(f"- {event}: removed")
        elif event not in old:
            lines.append(f"+ {event}: added")
        elif json.dumps(old[event], sort_keys=True) != json.dumps(new[event], sort_keys=True):
            lines.append(f"~ {event}: changed")
    return lines


# -- Codex CLI and Gemini CLI: command hooks only, and the MCP server ---------------------------

CODEX_EVENTS: tuple[str, ...] = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
    "PreCompact", "Stop",
)
"""The Codex CLI events this ledger hooks (its ``hooks.json`` names them as Claude Code does)."""
CODEX_MATCHED = frozenset({"SessionStart", "PreToolUse", "PermissionRequest", "PostToolUse",
                           "PreCompact"})
GEMINI_EVENTS: tuple[str, ...] = (
    "SessionStart", "BeforeAgent", "BeforeModel", "BeforeTool", "AfterTool", "AfterAgent",
    "SessionEnd",
)
"""The Gemini CLI events this ledger hooks. ``BeforeModel`` is how the todo list and the
approved plan reach the model after Gemini compresses its history (no event follows a
compression; its ``PreCompress`` comes before every model call, compressing or not)."""
GEMINI_MATCHED = frozenset({"BeforeTool", "AfterTool"})
MCP_NAME = "sessionledger"
"""The name the ledger's MCP server is registered under (Codex: ``mcp__sessionledger__*``;
Gemini: ``mcp_sessionledger_*``)."""
MCP_STARTUP_S = 30
"""Seconds Codex waits for the MCP server's start (``startup_timeout_sec``)."""


def _host_command(host: str, url: str | None, db: str | None) -> str:
    parts = ["sessionledger", "hook", host]
    if url is not None:
        parts += ["--url", shlex.quote(url)]
    if db is not None:
        parts += ["--db", shlex.quote(db)]
    return " ".join(parts)


def codex_hooks(*, url: str | None, db: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Codex CLI's ``hooks`` table: ``sessionledger hook codex`` on every event it hooks,
    forwarding to ``url`` when given, recording in ``db`` otherwise."""
    hook = {"type": "command", "command": _host_command("codex", url, db),
            "timeout": HOOK_TIMEOUT_S}
    return {event: [{**({"matcher": "*"} if event in CODEX_MATCHED else {}),
                     "hooks": [dict(hook)]}] for event in CODEX_EVENTS}


def gemini_hooks(*, url: str | None, db: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Gemini CLI's ``hooks`` table (its timeouts are in milliseconds)."""
    hook = {"name": MCP_NAME, "type": "command", "command": _host_command("gemini", url, db),
            "timeout": HOOK_TIMEOUT_S * 1000}
    return {event: [{**({"matcher": "*"} if event in GEMINI_MATCHED else {}),
                     "hooks": [dict(hook)]}] for event in GEMINI_EVENTS}


def _snake(event: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in event).lstrip("_")


def codex_trust(hooks_file: str, settings: Mapping[str, Any]) -> dict[str, str]:
    """The ``[hooks.state."KEY"] trusted_hash`` entries that make Codex CLI run this ledger's
    hooks in ``settings`` (the document of ``hooks_file``, an absolute path): Codex skips a
    hook nobody trusted, silently. A hook's key is ``FILE:EVENT:ENTRY:HOOK`` (the event in
    snake case, the entry's and the hook's positions) and its hash the SHA-256 of its entry
    with only that hook, as canonical JSON with ``event_name`` and ``async`` added — what
    Codex 0.171's ``hooks/list`` reports as ``currentHash`` (a test holds the two equal)."""
    import hashlib

    found: dict[str, str] = {}
    for event, entries in _table(settings).items():
        for index, entry in enumerate(entries):
            for position, hook in enumerate(entry.get("hooks", [])):
                if not is_ledger_hook(hook):
                    continue
                named: dict[str, Any] = {"event_name": _snake(event),
                                         "hooks": [{"async": False, **hook}]}
                if entry.get("matcher") is not None:
                    named["matcher"] = entry["matcher"]
                text = json.dumps(named, sort_keys=True, separators=(",", ":"),
                                  ensure_ascii=False)
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                found[f"{hooks_file}:{_snake(event)}:{index}:{position}"] = f"sha256:{digest}"
    return found


CODEX_PLAN_TOOL_NOTE = "sessionledger: update_plan, the session's todo list, in codex exec too"
"""The comment on the ``[tools.update_plan] enabled = true`` that ``setup codex`` writes: how
``--remove`` knows the line is its own. Codex 0.171 offers its plan tool to ``codex exec`` only
when it is enabled so (its interactive sessions have it)."""


def codex_mcp(*, url: str | None, db: str | None = None) -> dict[str, Any]:
    """Codex CLI's ``[mcp_servers.sessionledger]``: ``serve``'s ``/mcp`` at ``url``, else
    ``sessionledger mcp`` over stdio; ``required`` so Codex waits for it (up to
    :data:`MCP_STARTUP_S`) before the model's first request, rather than starting without
    the ledger's tools."""
    server: dict[str, Any] = {"url": url.rstrip("/") + "/mcp"} if url is not None else {
        "command": "sessionledger", "args": ["mcp", *(["--db", db] if db else [])]}
    return {**server, "required": True, "startup_timeout_sec": MCP_STARTUP_S}


def gemini_mcp(*, url: str | None, db: str | None = None) -> dict[str, Any]:
    """Gemini CLI's ``mcpServers.sessionledger``: ``serve``'s ``/mcp`` (``httpUrl``) at ``url``,
    else ``sessionledger mcp`` over stdio; ``trust`` so its calls are not confirmed twice (the
    ledger decides what each call may do)."""
    server: dict[str, Any] = {"httpUrl": url.rstrip("/") + "/mcp"} if url is not None else {
        "command": "sessionledger", "args": ["mcp", *(["--db", db] if db else [])]}
    return {**server, "trust": True}
