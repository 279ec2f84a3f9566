"""The permission service: one pure decision per tool call (SPEC PM-1 … PM-4, AQ-5, TR-3).

``PermissionService(config).check(request)`` walks the ordered checks of :mod:`.steps`
(the PM-3 order) and returns the first :class:`PermissionDecision`. It does no I/O: the
workspace configuration is loaded beforehand (:mod:`sessionledger.config.workspace`) and paths
are compared lexically. Decisions carry a stable dotted ``rule_id`` and a human ``reason``;
:meth:`PermissionDecision.to_wire` is the ``{behavior, reason, ruleId}`` shape of SPEC §11.
"""

from __future__ import annotations

from typing import Protocol

from .config import PermissionConfig
from .decision import PermissionDecision, PermissionRequest
from .steps import decide

__all__ = ["HasPermissionConfig", "PermissionService"]


class HasPermissionConfig(Protocol):
    """Anything carrying a ``permission`` table, such as a loaded ``WorkspaceConfig``."""

    @property
    def permission(self) -> PermissionConfig: ...


class PermissionService:
    """Decides tool calls by the project rules of one workspace configuration."""

    def __init__(self, config: PermissionConfig | HasPermissionConfig | None = None) -> None:
        if config is None:
            config = PermissionConfig()
        self._config = config if isinstance(config, PermissionConfig) else config.permission

    @property
    def config(self) -> PermissionConfig:
        """The ``[permission]`` rules this service applies."""
        return self._config

    def check(self, request: PermissionRequest) -> PermissionDecision:
        """The decision for one call: the first check of the PM-3 order that decides."""
        return decide(self._config, request)
