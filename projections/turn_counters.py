"""The turn counters: what the reminder engine needs to know about a session's conversation.

SPEC TD-5 and PM-5 decide reminders from counts over the log (assistant messages since the
last todo write or reminder, real user messages since the last Plan reminder, injections in
this Plan period, a pending "you left Plan" notice, a compaction not yet followed by a
request). Counting them per request would replay the session; instead this inline projection
folds them, one small applier per event type (STYLE 3), into one :class:`TurnCounters` per
session, updated in the append transaction like the other read models, so a restarted
service answers exactly as before. The rows live in a :class:`~projections.tables.DocTable`
named ``turn_counters``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from eventlog import (
    ContextCompacted,
    MessageRecorded,
    RecordedEvent,
    ReminderInjected,
    SessionCreated,
    SessionModeChanged,
)

from .chain_cache import ChainCache, session_spans
from .tables import Doc, DocTable, TableBacked

__all__ = [
    "TURN_EVENTS",
    "TurnCounters",
    "TurnCountersProjection",
    "apply_turn_event",
    "fold_turns",
]


@dataclass(frozen=True, slots=True)
class TurnCounters:
    """One session's reminder counters, as of its last event that touched them.

    ``assistant_since_todo``: assistant messages (``continuation: false``, any kind) since
    the last ``TodosWritten`` and the last todo ``ReminderInjected`` (TD-5).
    ``plan_enabled``: whether Plan is on. ``plan_reminders``: ``runtime_mode`` injections in
    the current Plan period. ``users_since_plan_reminder``: real user messages since the last
    ``runtime_mode`` (PM-5). ``plan_exit_armed``: Plan was left and the ``plan_exit``
    reminder is still owed. ``compacted``: a ``ContextCompacted`` came after the last
    recorded reminder, i.e. no request has injected anything since (PM-10).
    """

    session_id: str
    assistant_since_todo: int = 0
    plan_enabled: bool = False
    plan_reminders: int = 0
    users_since_plan_reminder: int = 0
    plan_exit_armed: bool = False
    compacted: bool = False

    def to_body(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> TurnCounters:
        return cls(**body)


_FIELDS = tuple(f.name for f in fields(TurnCounters))

Applier = Callable[[TurnCounters, RecordedEvent], TurnCounters]


def _mode_changed(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    data = event.data
    assert isinstance(data, SessionModeChanged)
    if data.plan_enabled and not counters.plan_enabled:
        # A new Plan period: counted afresh (full reminder first); a pending exit is void.
        return replace(counters, plan_enabled=True, plan_reminders=0,
                       users_since_plan_reminder=0, plan_exit_armed=False)
    if counters.plan_enabled and not data.plan_enabled:
        return replace(counters, plan_enabled=False, plan_reminders=0,
                       users_since_plan_reminder=0, plan_exit_armed=True)
    return counters


def _message(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    data = event.data
    assert isinstance(data, MessageRecorded)
    if data.role == "assistant" and not data.continuation:
        return replace(counters, assistant_since_todo=counters.assistant_since_todo + 1)
    if data.role == "user" and data.kind == "real":
        return replace(counters, users_since_plan_reminder=counters.users_since_plan_reminder + 1)
    return counters


def _todos_written(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    if counters.assistant_since_todo == 0:
        return counters  # nothing counted since the last write (or reminder)
    return replace(counters, assistant_since_todo=0)


def _reminder(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    data = event.data
    assert isinstance(data, ReminderInjected)
    after = replace(counters, compacted=False)  # a request was prepared after the compaction
    if data.kind == "todo_reminder":
        return replace(after, assistant_since_todo=0)
    if data.kind == "runtime_mode":
        return replace(after, plan_reminders=after.plan_reminders + 1,
                       users_since_plan_reminder=0)
    if data.kind == "plan_exit":
        return replace(after, plan_exit_armed=False)
    return after


def _compacted(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    assert isinstance(event.data, ContextCompacted)
    return replace(counters, compacted=True)


APPLIERS: dict[str, Applier] = {
    "SessionModeChanged": _mode_changed,
    "MessageRecorded": _message,
    "TodosWritten": _todos_written,
    "ReminderInjected": _reminder,
    "ContextCompacted": _compacted,
}
TURN_EVENTS = frozenset({"SessionCreated", *APPLIERS})
"""The event types the counters fold; every other event is skipped without a look inside."""


def apply_turn_event(counters: TurnCounters | None, event: RecordedEvent) -> TurnCounters | None:
    """The counters after ``event`` (``SessionCreated`` starts them, Plan maybe on)."""
    data = event.data
    if isinstance(data, SessionCreated):
        return TurnCounters(event.session_id, plan_enabled=data.execution_state.plan_enabled)
    applier = APPLIERS.get(event.type)
    if counters is None or applier is None:
        return counters
    return applier(counters, event)


def fold_turns(events: Iterable[RecordedEvent]) -> TurnCounters | None:
    """A fresh fold of one session's events (audits compare the table with this)."""
    counters: TurnCounters | None = None
    for event in events:
        counters = apply_turn_event(counters, event)
    return counters


def _doc(counters: TurnCounters, seq: int) -> Doc:
    return Doc(counters.session_id, counters.session_id, "live", seq, counters.to_body())


class TurnCountersProjection(TableBacked[DocTable]):
    """The inline projection the store runs: fold turn events, save the touched counters."""

    name = "turn_counters"
    version = 1

    def __init__(self, table: DocTable) -> None:
        self.table = table
        self._known: ChainCache[TurnCounters | None] = ChainCache()
        """Each session's counters as of the last batch this process folded (D74)."""

    def drop(self, tx: Any) -> None:
        self._known.clear()
        self.table.drop(tx)

    def forget(self, tx: Any, session_id: str) -> None:
        self._known.forget(session_id)
        self.table.delete_session(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        spans = session_spans(events)
        relevant = [e for e in events if e.type in TURN_EVENTS]
        if not relevant:
            self._known.advance(spans)
            return
        # Counters this process folded at the head a session's batch chains from are not
        # read back (D74); the others are loaded.
        wanted = list(dict.fromkeys(e.session_id for e in relevant))
        stored: dict[str, TurnCounters | None] = {}
        missing = []
        for session_id in wanted:
            found, counters = self._known.get(session_id, spans[session_id][0])
            if found:
                stored[session_id] = counters
            else:
                missing.append(session_id)
        if missing:
            loaded = self.table.load(tx, missing)
            for session_id in missing:
                doc = loaded.get(session_id)
                stored[session_id] = None if doc is None else TurnCounters.from_body(doc.body)
        current = dict(stored)
        last_seq: dict[str, int] = {}
        for event in relevant:
            current[event.session_id] = apply_turn_event(current.get(event.session_id), event)
            last_seq[event.session_id] = event.seq
        # Only counters that changed are written (a todo write when none were counted, a
        # mode change that keeps Plan as it was, … leave the row as it is).
        changed = [
            _doc(counters, last_seq[sid]) for sid, counters in current.items()
            if counters is not None and counters != stored.get(sid)
        ]
        if changed:
            self.table.save(tx, changed)
        for session_id, counters in current.items():
            self._known.put(session_id, spans[session_id][1], counters)
        self._known.advance(spans, skip=wanted)

    def get(self, tx: Any, session_id: str) -> TurnCounters | None:
        doc = self.table.load(tx, [session_id]).get(session_id)
        return None if doc is None else TurnCounters.from_body(doc.body)

    def differences(self, stored: TurnCounters | None, events: Sequence[RecordedEvent],
                    session_id: str) -> list[str]:
        """How ``stored`` differs from a fresh fold of the session's ``events`` (audit)."""
        fresh = fold_turns(events)
        if fresh == stored:
            return []
        if fresh is None or stored is None:
            which = "the log" if fresh is None else "the projection"
            return [f"{self.name}: {session_id} is missing from {which}"]
        theirs, ours = fresh.to_body(), stored.to_body()
        return [
            f"{self.name}.{key}: stored {ours[key]!r}, log says {theirs[key]!r}"
            for key in theirs if ours[key] != theirs[key]
        ]
