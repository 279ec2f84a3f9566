"""The permission service: who may run which tool call, in which mode (PM-1 … PM-4, TR-3).

Pure and I/O-free: :class:`PermissionService` decides a :class:`PermissionRequest` into a
:class:`PermissionDecision` by the ordered checks of :mod:`.authority`, with the project rules of
a :class:`PermissionConfig` (the ``[permission]`` table of ``.sessionledger/config.toml``), the
rule patterns (in :mod:`.authority`) and the shell classifier of :mod:`.shell`.
"""

from __future__ import annotations

from .authority import (
    ENTER_PLAN_REASON,
    EXIT_PLAN_REASON,
    RULE_IDS,
    Behavior,
    HasPermissionConfig,
    PermissionConfig,
    PermissionDecision,
    PermissionRequest,
    PermissionService,
    RulePattern,
    parse_pattern,
)
from .shell import ShellClass, ShellVerdict, classify

__all__ = [
    "ENTER_PLAN_REASON",
    "EXIT_PLAN_REASON",
    "RULE_IDS",
    "Behavior",
    "HasPermissionConfig",
    "PermissionConfig",
    "PermissionDecision",
    "PermissionRequest",
    "PermissionService",
    "RulePattern",
    "ShellClass",
    "ShellVerdict",
    "classify",
    "parse_pattern",
]
