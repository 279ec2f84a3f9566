"""The permission authority the executor asks: a workspace's rules applied to one call.

Each session's workspace may hold ``.sessionledger/config.toml`` (SPEC TR-4); its rules are
loaded on first use and reloaded when the file changes, so editing the rules takes effect
without a restart. An invalid file is a :class:`~sessionledger.errors.ConfigurationError`
naming the key (``serve`` checks the root's file before it starts).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eventlog import PermissionVerdict
from statemachine.execution import ExecutionState

from .permission import PermissionRequest, PermissionService
from .tools.descriptors import ToolDescriptor
from .workspace_config import WorkspaceConfig, config_path, load_workspace_config

__all__ = ["WorkspacePermissions"]


class WorkspacePermissions:
    """Decides calls with the rules of the session's workspace (cached by file mtime)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[float | None, PermissionService, WorkspaceConfig]] = {}
        self._files: dict[str, str] = {}
        """Each workspace's configuration file as a string, for a plain ``os.stat`` (every
        call stats it, some twice: building the path each time cost more than the stat)."""
        self._lock = threading.Lock()

    def config(self, workspace: Path) -> WorkspaceConfig:
        """The workspace's configuration (defaults when it has no file)."""
        return self._entry(workspace)[2]

    def _entry(self, workspace: Path) -> tuple[float | None, PermissionService, WorkspaceConfig]:
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
        if cached is not None and cached[0] == stamp:
            return cached
        config = load_workspace_config(workspace)
        entry = (stamp, PermissionService(config.permission), config)
        with self._lock:
            self._cache[key] = entry
        return entry

    def decide(
        self, *, tool: ToolDescriptor, input: Mapping[str, Any], state: ExecutionState,
        workspace: Path,
    ) -> PermissionVerdict:
        service = self._entry(workspace)[1]
        request = PermissionRequest(tool=tool, input=input, state=state, workspace=workspace)
        return service.check(request).to_verdict()
