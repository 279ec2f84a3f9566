"""The execution-state projection: each session's mode, Plan switch, goal and head.

A pure fold over the log (one small applier per event type, STYLE 3) into a
:class:`SessionSummary` per session, kept inline by the store in a table of its own. The fold
reads events; it never runs the state machine: the machine decided when the events were
appended, and the log is the truth now. The table behind it is the backend's
(:mod:`projections.tables`); the fold is the same for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from eventlog import (
    GoalEnded,
    GoalStarted,
    PermissionMode,
    RecordedEvent,
    SessionCreated,
    SessionDeleted,
    SessionModeChanged,
)
from statemachine.execution import ExecutionState

from .table_backed import TableBacked

__all__ = [
    "APPLIERS",
    "ExecutionStateProjection",
    "SessionSummary",
    "SummaryTable",
    "apply_event",
    "fold",
]


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What one session is now: its execution state and where its log ends."""

    session_id: str
    version: int
    last_position: int
    workspace: str
    host: str
    parent_session_id: str | None
    mode: PermissionMode
    plan_enabled: bool
    goal: str | None
    created_at: str
    updated_at: str
    deleted: bool = False

    @property
    def execution(self) -> ExecutionState:
        return ExecutionState(self.mode, self.plan_enabled, self.goal)

    @property
    def display_mode(self) -> str:
        return self.execution.display_mode


Applier = Callable[[SessionSummary | None, RecordedEvent], SessionSummary | None]


def _created(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary:
    data = event.data
    assert isinstance(data, SessionCreated)
    state = data.execution_state
    return SessionSummary(
        session_id=event.session_id, version=event.seq, last_position=event.global_position,
        workspace=data.workspace, host=data.host, parent_session_id=data.parent_session_id,
        mode=state.mode, plan_enabled=state.plan_enabled,
        goal=state.goal.objective if state.goal else None,
        created_at=event.recorded_at, updated_at=event.recorded_at,
    )


def _mode_changed(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    data = event.data
    assert isinstance(data, SessionModeChanged)
    if summary is None:
        return None
    return replace(summary, mode=data.mode, plan_enabled=data.plan_enabled)


def _goal_started(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    data = event.data
    assert isinstance(data, GoalStarted)
    return None if summary is None else replace(summary, goal=data.objective)


def _goal_ended(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    assert isinstance(event.data, GoalEnded)
    return None if summary is None else replace(summary, goal=None)


def _deleted(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    assert isinstance(event.data, SessionDeleted)
    return None if summary is None else replace(summary, deleted=True)


APPLIERS: dict[str, Applier] = {
    "SessionCreated": _created,
    "SessionModeChanged": _mode_changed,
    "GoalStarted": _goal_started,
    "GoalEnded": _goal_ended,
    "SessionDeleted": _deleted,
}


def _stamped(summary: SessionSummary, event: RecordedEvent) -> SessionSummary:
    """``summary`` as of ``event``: its version, log position and time."""
    return SessionSummary(
        summary.session_id, event.seq, event.global_position, summary.workspace, summary.host,
        summary.parent_session_id, summary.mode, summary.plan_enabled, summary.goal,
        summary.created_at, event.recorded_at, summary.deleted,
    )


def apply_event(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    """The summary after ``event``; every event advances version, position and time."""
    applier = APPLIERS.get(event.type)
    after = applier(summary, event) if applier is not None else summary
    return None if after is None else _stamped(after, event)


def fold(events: Iterable[RecordedEvent]) -> SessionSummary | None:
    """A fresh fold of one session's events (audits compare the table with this)."""
    summary: SessionSummary | None = None
    for event in events:
        summary = apply_event(summary, event)
    return summary


class SummaryTable(Protocol):
    """Where summaries live for one backend; ``tx`` is the store's transaction handle."""

    def create(self, tx: Any) -> None: ...
    def is_present(self, tx: Any) -> bool: ...
    def drop(self, tx: Any) -> None: ...
    def load(self, tx: Any, session_ids: Sequence[str]) -> dict[str, SessionSummary]: ...
    def save(self, tx: Any, summaries: Sequence[SessionSummary]) -> None: ...
    def delete(self, tx: Any, session_id: str) -> None: ...
    def get(self, tx: Any, session_id: str) -> SessionSummary | None: ...
    def newest_first(self, tx: Any) -> list[SessionSummary]: ...


class ExecutionStateProjection(TableBacked[SummaryTable]):
    """The inline projection the store runs: fold events, save the touched summaries."""

    name = "execution_state"
    version = 1

    def __init__(self, table: SummaryTable) -> None:
        self.table = table

    def forget(self, tx: Any, session_id: str) -> None:
        self.table.delete(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        # Same result as apply_event per event, cheaper: only events with an applier change
        # a summary; version, position and time are stamped once from each session's last.
        last = {e.session_id: e for e in events}
        current: dict[str, SessionSummary | None] = dict(self.table.load(tx, list(last)))
        appliers = APPLIERS
        for event in events:
            applier = appliers.get(event.type)
            if applier is not None:
                current[event.session_id] = applier(current.get(event.session_id), event)
        self.table.save(tx, [
            _stamped(summary, last[sid]) for sid, summary in current.items()
            if summary is not None
        ])

    def get(self, tx: Any, session_id: str) -> SessionSummary | None:
        return self.table.get(tx, session_id)

    def newest_first(self, tx: Any) -> list[SessionSummary]:
        return self.table.newest_first(tx)
