"""What the permission service is asked and what it answers (SPEC PM-3, TR-3, §11).

A :class:`PermissionRequest` is one tool call in context; a :class:`PermissionDecision` is
the answer, with a stable dotted rule id (listed in :mod:`.steps`) and a human reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from eventlog import PermissionVerdict
from statemachine.execution import ExecutionState

from .descriptors import ToolDescriptor

__all__ = ["Behavior", "PermissionDecision", "PermissionRequest"]

Behavior = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequest:
    """A tool call to decide on: the tool's flags, its input, the session state, the workspace."""

    tool: ToolDescriptor
    input: Mapping[str, Any]
    state: ExecutionState
    workspace: Path


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """``allow``, ``ask`` or ``deny``, why (for humans and the model), and which rule decided."""

    behavior: Behavior
    reason: str
    rule_id: str

    def to_wire(self) -> dict[str, str]:
        """The JSON shape of SPEC §11: ``{"behavior", "reason", "ruleId"}``."""
        return {"behavior": self.behavior, "reason": self.reason, "ruleId": self.rule_id}

    def to_verdict(self) -> PermissionVerdict:
        """The decision as recorded in a ``PermissionDecided`` event."""
        return PermissionVerdict(behavior=self.behavior, reason=self.reason, rule_id=self.rule_id)
