"""The execution-state projection: each session's mode, Plan switch, goal and head.

A pure fold over the log (one small applier per event type, STYLE 3) into a
:class:`SessionSummary` per session, kept inline by the store in a table of its own. The fold
reads events; it never runs the state machine: the machine decided when the events were
appended, and the log is the truth now. The table behind it is the backend's
(:mod:`projections.tables`); the fold is the same for every backend.

The summary also notes the seq and time of the session's last ``TodosWritten``
(``todos_seq``, ``todos_updated_at``; ``None`` before the first write and once the session is
deleted): which write the current todo list is, so a reader can tell whether a list it already
holds is still the current one, and what a TodoWrite's recorded result names as the list it
replaced (docs/decisions.md D70). The row is rewritten by every event anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from eventlog import (
    GoalEnded,
    GoalStarted,
    RecordedEvent,
    SessionCreated,
    SessionDeleted,
    SessionModeChanged,
    TodosWritten,
)

from .chain_cache import ChainCache, session_spans
from .tables import SessionSummary, SummaryTable, TableBacked

__all__ = [
    "APPLIERS",
    "ExecutionStateProjection",
    "apply_event",
    "fold",
]


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
    if summary is None:
        return None
    return replace(summary, deleted=True, todos_seq=None, todos_updated_at=None)


def _todos_written(
    summary: SessionSummary | None, event: RecordedEvent
) -> SessionSummary | None:
    assert isinstance(event.data, TodosWritten)
    if summary is None or summary.deleted:
        return summary  # a write to no session, or to a deleted one, changes no list
    return SessionSummary(  # not dataclasses.replace: this runs for every TodoWrite
        summary.session_id, summary.version, summary.last_position, summary.workspace,
        summary.host, summary.parent_session_id, summary.mode, summary.plan_enabled,
        summary.goal, summary.created_at, summary.updated_at, summary.deleted, event.seq,
        event.recorded_at,
    )


APPLIERS: dict[str, Applier] = {
    "SessionCreated": _created,
    "SessionModeChanged": _mode_changed,
    "GoalStarted": _goal_started,
    "GoalEnded": _goal_ended,
    "SessionDeleted": _deleted,
    "TodosWritten": _todos_written,
}


def _stamped(summary: SessionSummary, event: RecordedEvent) -> SessionSummary:
    """``summary`` as of ``event``: its version, log position and time."""
    return SessionSummary(
        summary.session_id, event.seq, event.global_position, summary.workspace, summary.host,
        summary.parent_session_id, summary.mode, summary.plan_enabled, summary.goal,
        summary.created_at, event.recorded_at, summary.deleted, summary.todos_seq,
        summary.todos_updated_at,
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


class ExecutionStateProjection(TableBacked[SummaryTable]):
    """The inline projection the store runs: fold events, save the touched summaries."""

    name = "execution_state"
    version = 2
    """2: the todo list's seq and time (D70); no index on ``last_position`` (D74)."""

    def __init__(self, table: SummaryTable) -> None:
        self.table = table
        self._applied: tuple[Sequence[RecordedEvent], dict[str, SessionSummary]] | None = None
        """The events of the last :meth:`apply` and the summaries it saved for them."""
        self._known: ChainCache[SessionSummary | None] = ChainCache()
        """Each session's summary as of the last batch this process folded (D74)."""

    def drop(self, tx: Any) -> None:
        self._applied = None
        self._known.clear()
        self.table.drop(tx)

    def forget(self, tx: Any, session_id: str) -> None:
        self._applied = None
        self._known.forget(session_id)
        self.table.delete(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        # Same result as apply_event per event, cheaper: only events with an applier change
        # a summary; version, position and time are stamped once from each session's last.
        # A summary this process folded at the head a session's batch chains from is not
        # read back (D74).
        self._applied = None
        last = {e.session_id: e for e in events}
        spans = session_spans(events)
        current: dict[str, SessionSummary | None] = {}
        missing = []
        for session_id, (head, _last) in spans.items():
            known, summary = self._known.get(session_id, head)
            if known:
                current[session_id] = summary
            else:
                missing.append(session_id)
        if missing:
            current.update(self.table.load(tx, missing))
        appliers = APPLIERS
        for event in events:
            applier = appliers.get(event.type)
            if applier is not None:
                current[event.session_id] = applier(current.get(event.session_id), event)
        saved = {
            sid: _stamped(summary, last[sid]) for sid, summary in current.items()
            if summary is not None
        }
        self.table.save(tx, list(saved.values()))
        self._applied = (events, saved)
        for session_id, (_head, head) in spans.items():
            self._known.put(session_id, head, saved.get(session_id))

    def applied(
        self, tx: Any, events: Sequence[RecordedEvent], session_id: str
    ) -> SessionSummary | None:
        """The session's summary right after :meth:`apply` of ``events`` in this transaction
        (the projections that follow it in the same apply ask): what it saved, without
        reading it back; read when ``events`` were not the last applied."""
        applied = self._applied
        if applied is not None and applied[0] is events:
            return applied[1].get(session_id)
        return self.table.get(tx, session_id)

    def get(self, tx: Any, session_id: str) -> SessionSummary | None:
        return self.table.get(tx, session_id)

    def newest_first(self, tx: Any) -> list[SessionSummary]:
        return self.table.newest_first(tx)
