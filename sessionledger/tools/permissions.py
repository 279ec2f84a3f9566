"""The permission authority the executor asks: a workspace's rules applied to one call.

Each session's workspace may hold ``.sessionledger/config.toml`` (SPEC TR-4); its rules are
loaded on first use and reloaded when the file changes, so editing the rules takes effect
without a restart. An invalid file is a :class:`~sessionledger.errors.ConfigurationError`
naming the key (``serve`` checks the root's file before it starts).

A decision depends on the call's input only through its primary argument (the path, command
or URL the rules match, :func:`~sessionledger.permission.patterns.primary_argument`). A call
without one — every TodoWrite, for instance — gets the same decision for the same tool, state
and workspace rules, so that decision is kept with the loaded rules and reused until the file
changes (docs/decisions.md D73).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eventlog import PermissionVerdict
from statemachine.execution import ExecutionState

from ..config.workspace import WorkspaceConfig, config_path, load_workspace_config
from ..permission import PermissionRequest, PermissionService
from ..permission.descriptors import ToolDescriptor
from ..permission.patterns import primary_argument

__all__ = ["WorkspacePermissions"]

_NO_ARGUMENT = ("text", "")
_MEMO_LIMIT = 1024
"""Decisions kept per loaded configuration (tools x execution states: a few dozen in use)."""


class _Rules:
    """One workspace's loaded configuration, its permission service and the decisions of
    calls without a primary argument, by (tool, execution state)."""

    __slots__ = ("config", "decided", "service", "stamp")

    def __init__(self, stamp: float | None, config: WorkspaceConfig) -> None:
        self.stamp = stamp
        self.config = config
        self.service = PermissionService(config.permission)
        self.decided: dict[tuple[ToolDescriptor, ExecutionState], PermissionVerdict] = {}


class WorkspacePermissions:
    """Decides calls with the rules of the session's workspace (cached by file mtime)."""

    def __init__(self) -> None:
        self._cache: dict[str, _Rules] = {}
        self._files: dict[str, str] = {}
        """Each workspace's configuration file as a string, for a plain ``os.stat`` (every
        call stats it, some twice: building the path each time cost more than the stat)."""
        self._lock = threading.Lock()

    def config(self, workspace: Path) -> WorkspaceConfig:
        """The workspace's configuration (defaults when it has no file)."""
        return self._entry(workspace).config

    def _entry(self, workspace: Path) -> _Rules:
        key = str(workspace)
        file = self._files.get(key)
        if file is None:
            file = self._files[key] = str(config_path(workspace))
        try:
            stamp: float | None = os.stat(file).st_mtime
        except OSError:
            stamp = None
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached.stamp == stamp:
            return cached
        entry = _Rules(stamp, load_workspace_config(workspace))
        with self._lock:
            self._cache[key] = entry
        return entry

    def decide(
        self, *, tool: ToolDescriptor, input: Mapping[str, Any], state: ExecutionState,
        workspace: Path,
    ) -> PermissionVerdict:
        rules = self._entry(workspace)
        memo = not tool.shell and primary_argument(tool, input) == _NO_ARGUMENT
        if memo:
            known = rules.decided.get((tool, state))
            if known is not None:
                return known
        request = PermissionRequest(tool=tool, input=input, state=state, workspace=workspace)
        verdict = rules.service.check(request).to_verdict()
        if memo:
            if len(rules.decided) >= _MEMO_LIMIT:
                rules.decided.clear()
            rules.decided[(tool, state)] = verdict
        return verdict
