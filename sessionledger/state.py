"""A session's current state as a fold over its events, and its wire document (SPEC §11).

Nothing changes state except appending an event, so the state of a session is computed by
applying its events in ``seq`` order. Each event type has one small applier in
:data:`APPLIERS` (a dispatch on ``type``, STYLE 3); later issues add theirs beside
``SessionCreated``'s. An event type with no applier still advances ``version`` and
``updatedAt``: it is recorded, it just does not change the document.

This is the read model for the session document until ``projections/`` maintains it inline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from eventlog import ExecutionStateData, RecordedEvent, SessionCreated

from .errors import CorruptLog

__all__ = [
    "APPLIERS",
    "DisplayMode",
    "SessionState",
    "apply_event",
    "display_mode",
    "execution_state_wire",
    "fold",
]

DisplayMode = Literal["plan", "build", "edit", "yolo", "auto"]


def display_mode(execution: ExecutionStateData) -> DisplayMode:
    """``plan`` while the Plan switch is on, else the permission mode (SPEC ES-1)."""
    return "plan" if execution.plan_enabled else execution.mode


def execution_state_wire(execution: ExecutionStateData) -> dict[str, Any]:
    """Exactly ``mode``, ``planEnabled`` and ``goal`` (``null`` or ``{"objective"}``)."""
    goal = None if execution.goal is None else {"objective": execution.goal.objective}
    return {"mode": execution.mode, "planEnabled": execution.plan_enabled, "goal": goal}


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything the session document shows, as of event ``version``."""

    session_id: str
    version: int
    workspace: str
    host: str
    parent_session_id: str | None
    execution: ExecutionStateData
    created_at: str
    updated_at: str

    @property
    def display_mode(self) -> DisplayMode:
        return display_mode(self.execution)

    def to_document(self) -> dict[str, Any]:
        """The ``GET /v1/sessions/{id}`` shape; todos and interactions come in later issues."""
        return {
            "sessionId": self.session_id,
            "version": self.version,
            "workspace": self.workspace,
            "parentSessionId": self.parent_session_id,
            "executionState": execution_state_wire(self.execution),
            "displayMode": self.display_mode,
            "todos": [],
            "interactions": [],
        }


Applier = Callable[[SessionState | None, RecordedEvent], SessionState]
"""Turns the state before an event (``None`` before the first) into the state after it."""


def _apply_created(state: SessionState | None, event: RecordedEvent) -> SessionState:
    data = event.data
    if not isinstance(data, SessionCreated):  # the dispatch guarantees it; mypy needs it
        raise CorruptLog(f"{event.session_id} seq {event.seq}: not a SessionCreated payload")
    return SessionState(
        session_id=event.session_id,
        version=event.seq,
        workspace=data.workspace,
        host=data.host,
        parent_session_id=data.parent_session_id,
        execution=data.execution_state,
        created_at=event.recorded_at if state is None else state.created_at,
        updated_at=event.recorded_at,
    )


APPLIERS: dict[str, Applier] = {
    "SessionCreated": _apply_created,
}


def apply_event(state: SessionState | None, event: RecordedEvent) -> SessionState:
    """Apply one event: its type's applier, or just advance the version."""
    applier = APPLIERS.get(event.type)
    if applier is not None:
        return applier(state, event)
    if state is None:
        raise CorruptLog(
            f"{event.session_id} seq {event.seq}: {event.type} before SessionCreated"
        )
    return replace(state, version=event.seq, updated_at=event.recorded_at)


def fold(events: Iterable[RecordedEvent]) -> SessionState | None:
    """The state after every event, in order; ``None`` for a session with no events."""
    state: SessionState | None = None
    for event in events:
        state = apply_event(state, event)
    return state
