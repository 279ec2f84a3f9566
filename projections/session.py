"""What the session is now: its execution state and the turn counters its reminders need.

Two inline projections of the session's own events, each a pure fold (one small applier per
event type) into one value per session, kept in a table of :mod:`projections.tables`
in the append transaction: the :class:`SessionSummary` (mode, Plan switch, goal, head) and the
:class:`TurnCounters` (TD-5, PM-5).

**Execution state.** One :class:`SessionSummary` per session, in a table of its own. The fold
reads events; it never runs the state machine: the machine decided when the events were
appended, and the log is the truth now. The table behind it is the backend's
(:mod:`projections.tables`); the fold is the same for every backend.

The summary also notes the seq and time of the session's last ``TodosWritten``
(``todos_seq``, ``todos_updated_at``; ``None`` before the first write and once the session is
deleted): which write the current todo list is, so a reader can tell whether a list it already
holds is still the current one, and what a TodoWrite's recorded result names as the list it
replaced (docs/decisions.md D70). The row is rewritten by every event anyway. It also keeps
the start of the first real user message (``first_message``, which names the session in
lists) and how many interactions wait for the user (``waiting``: one more per
``InteractionRequested``, one fewer per ``InteractionResolved``, 0 once deleted), so a list
of every session reads the question timers of the waiting sessions only (issue 23).

**Turn counters.** TD-5 and PM-5 decide reminders from counts over the log (assistant
messages since the last todo write or reminder, real user messages since the last Plan
reminder, injections in this Plan period, a pending "you left Plan" notice, a compaction not
yet followed by a request). Counting them per request would replay the session; instead this
inline projection folds them, one small applier per event type, into one
:class:`TurnCounters` per session, updated in the append transaction like the other read
models, so a restarted service answers exactly as before. The rows live in a
:class:`~projections.tables.DocTable` named ``turn_counters``.

**What this process folded last** (:class:`ChainCache`, D74). Per-session projection state kept
in memory, valid exactly at a chain head, for these folds and the todo rows of
:mod:`projections.tools`. An inline projection folds each appended batch into its table, which
usually means reading the session's current row first. The hash chain says for free whether
what this process folded last is still current: a batch of a session chains from that session's
head hash, so the state folded up to event ``h`` is the session's state for the next batch
exactly when that batch's first event has ``prev_hash == h``. Anything else — another process
appended, the transaction that folded it rolled back, the cache was cleared — simply misses,
and the projection reads its table as before. Nothing needs invalidating but a purge (the
session's events go) and a rebuild (the table goes), whose hooks call :meth:`ChainCache.forget`
and :meth:`ChainCache.clear`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Generic, TypeVar

from eventlog import (
    ContextCompacted,
    GoalEnded,
    GoalStarted,
    InteractionRequested,
    InteractionResolved,
    MessageRecorded,
    RecordedEvent,
    ReminderInjected,
    SessionCreated,
    SessionDeleted,
    SessionModeChanged,
    TodosWritten,
)

from .tables import (
    FIRST_MESSAGE_CHARS,
    Doc,
    DocTable,
    SessionSummary,
    SummaryPage,
    SummaryTable,
    TableBacked,
)

__all__ = [
    "APPLIERS",
    "TURN_EVENTS",
    "ChainCache",
    "ExecutionStateProjection",
    "SummaryFold",
    "SummaryMemory",
    "TurnCounters",
    "TurnCountersProjection",
    "TurnFold",
    "apply_event",
    "apply_turn_event",
    "fold",
    "fold_turns",
    "session_spans",
]


# -- what this process folded last, valid at a chain head (D74) -----------------------------


T = TypeVar("T")
_CACHE_LIMIT = 4096
"""Sessions remembered before the cache starts afresh (a server's working set is far smaller;
starting afresh only costs reads). A todo list of 20 items is a few kilobytes."""


def session_spans(events: Iterable[RecordedEvent]) -> dict[str, tuple[str, str]]:
    """Per session of ``events``: the head its first event chains from, and its last hash."""
    spans: dict[str, tuple[str, str]] = {}
    for event in events:
        span = spans.get(event.session_id)
        spans[event.session_id] = (event.prev_hash if span is None else span[0], event.hash)
    return spans


class ChainCache(Generic[T]):
    """A value per session, each remembered with the head hash it is the state at."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, T]] = {}

    def get(self, session_id: str, head: str) -> tuple[bool, T | None]:
        """``(True, value)`` when the session's value at ``head`` is known, else
        ``(False, None)``."""
        held = self._values.get(session_id)
        if held is None or held[0] != head:
            return False, None
        return True, held[1]

    def put(self, session_id: str, head: str, value: T) -> None:
        if len(self._values) >= _CACHE_LIMIT and session_id not in self._values:
            self._values.clear()
        self._values[session_id] = (head, value)

    def advance(self, spans: dict[str, tuple[str, str]], skip: Sequence[str] = ()) -> None:
        """Carry each known value over a batch that did not change it: the value at the
        batch's first head is the value at its last (sessions in ``skip`` were put anew)."""
        values = self._values
        for session_id, (first, last) in spans.items():
            held = values.get(session_id)
            if held is not None and held[0] == first and session_id not in skip:
                values[session_id] = (last, held[1])

    def forget(self, session_id: str) -> None:
        self._values.pop(session_id, None)

    def clear(self) -> None:
        self._values.clear()


# -- execution state ------------------------------------------------------------------------


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
        client=data.client, external_session_id=data.external_session_id,
        plan_by=(data.client or "created") if state.plan_enabled else None,
    )


def _plan_by(summary: SessionSummary, data: SessionModeChanged) -> str | None:
    """Who holds Plan after ``data``: whoever turned it on, until it is off."""
    if not data.plan_enabled:
        return None
    return summary.plan_by if data.previous_plan_enabled else data.via


def _mode_changed(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    data = event.data
    assert isinstance(data, SessionModeChanged)
    if summary is None:
        return None
    return SessionSummary(  # not dataclasses.replace: a mode change is a common event
        summary.session_id, summary.version, summary.last_position, summary.workspace,
        summary.host, summary.parent_session_id, data.mode, data.plan_enabled,
        summary.goal, summary.created_at, summary.updated_at, summary.deleted,
        summary.todos_seq, summary.todos_updated_at, summary.client,
        summary.external_session_id, summary.first_message, summary.waiting,
        _plan_by(summary, data),
    )


def _goal_started(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    data = event.data
    assert isinstance(data, GoalStarted)
    return None if summary is None else _with_goal(summary, data.objective)


def _goal_ended(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    assert isinstance(event.data, GoalEnded)
    return None if summary is None else _with_goal(summary, None)


def _with_goal(summary: SessionSummary, goal: str | None) -> SessionSummary:
    return SessionSummary(  # not dataclasses.replace: goals come and go often
        summary.session_id, summary.version, summary.last_position, summary.workspace,
        summary.host, summary.parent_session_id, summary.mode, summary.plan_enabled, goal,
        summary.created_at, summary.updated_at, summary.deleted, summary.todos_seq,
        summary.todos_updated_at, summary.client, summary.external_session_id,
        summary.first_message, summary.waiting, summary.plan_by,
    )


def _deleted(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    assert isinstance(event.data, SessionDeleted)
    if summary is None:
        return None
    return replace(summary, deleted=True, todos_seq=None, todos_updated_at=None, waiting=0)


def _first_message(
    summary: SessionSummary | None, event: RecordedEvent
) -> SessionSummary | None:
    data = event.data
    assert isinstance(data, MessageRecorded)
    if (summary is None or summary.first_message is not None or summary.deleted
            or data.role != "user" or data.kind != "real"):
        return summary  # only the first real user message names the session
    return replace(summary, first_message=data.content[:FIRST_MESSAGE_CHARS])


def _requested(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    assert isinstance(event.data, InteractionRequested)
    if summary is None or summary.deleted:
        return summary
    return replace(summary, waiting=summary.waiting + 1)


def _resolved(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    assert isinstance(event.data, InteractionResolved)
    if summary is None or summary.deleted or summary.waiting == 0:
        return summary
    return replace(summary, waiting=summary.waiting - 1)


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
        event.recorded_at, summary.client, summary.external_session_id, summary.first_message,
        summary.waiting, summary.plan_by,
    )


APPLIERS: dict[str, Applier] = {
    "SessionCreated": _created,
    "SessionModeChanged": _mode_changed,
    "GoalStarted": _goal_started,
    "GoalEnded": _goal_ended,
    "SessionDeleted": _deleted,
    "TodosWritten": _todos_written,
    "MessageRecorded": _first_message,
    "InteractionRequested": _requested,
    "InteractionResolved": _resolved,
}


def _stamped(summary: SessionSummary, event: RecordedEvent) -> SessionSummary:
    """``summary`` as of ``event``: its version, log position and time."""
    return SessionSummary(
        summary.session_id, event.seq, event.global_position, summary.workspace, summary.host,
        summary.parent_session_id, summary.mode, summary.plan_enabled, summary.goal,
        summary.created_at, event.recorded_at, summary.deleted, summary.todos_seq,
        summary.todos_updated_at, summary.client, summary.external_session_id,
        summary.first_message, summary.waiting, summary.plan_by,
    )


def apply_event(summary: SessionSummary | None, event: RecordedEvent) -> SessionSummary | None:
    """The summary after ``event``; every event advances version, position and time."""
    applier = APPLIERS.get(event.type)
    after = applier(summary, event) if applier is not None else summary
    return None if after is None else _stamped(after, event)


def fold(events: Iterable[RecordedEvent]) -> SessionSummary | None:
    """A fresh fold of one session's events (audits compare the table with this): what
    :func:`apply_event` over each gives (:class:`SummaryFold`)."""
    folding = SummaryFold()
    see = folding.see
    for event in events:
        see(event)
    return folding.result()


class SummaryFold:
    """:func:`fold` one event at a time (an audit folds each event into every read model as
    it decodes it). Stamped once with the last event rather than at every event (no applier
    reads the stamped version, position or time, and each stamp overwrites the one before;
    the appliers of most events return the summary as it is)."""

    __slots__ = ("_last", "_summary")

    def __init__(self) -> None:
        self._summary: SessionSummary | None = None
        self._last: RecordedEvent | None = None

    def see(self, event: RecordedEvent) -> None:
        self._last = event
        kind = event.type
        summary = self._summary
        if kind == "MessageRecorded" and (
            summary is None or summary.first_message is not None or summary.deleted
        ):
            return  # what _first_message leaves as it is, without the call
        applier = APPLIERS.get(kind)
        if applier is not None:
            self._summary = applier(summary, event)

    def result(self) -> SessionSummary | None:
        summary, last = self._summary, self._last
        return None if summary is None or last is None else _stamped(summary, last)


class ExecutionStateProjection(TableBacked[SummaryTable]):
    """The inline projection the store runs: fold events, save the touched summaries."""

    name = "execution_state"
    version = 5
    """2: the todo list's seq and time (D70); no index on ``last_position`` (D74); 3: the
    creating client and its own session id (CC-2); 4: the first user message and the count
    of waiting interactions (issue 23.4, 23.6); 5: who turned Plan on (issue 39)."""

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

    def known(self, session_id: str, head: str) -> tuple[bool, SessionSummary | None]:
        """``(True, summary)`` when this projection folded the session up to ``head`` in its
        last apply of it (what it saved; ``None``: no session), else ``(False, None)``."""
        return self._known.get(session_id, head)

    def newest_first(self, tx: Any) -> list[SessionSummary]:
        return self.table.newest_first(tx)

    def page(self, tx: Any, query: SummaryPage) -> list[SessionSummary]:
        return self.table.page(tx, query)


class SummaryMemory:
    """Session summaries as of the last commit this process heard (issue 24): a decision
    guarded by the session's expected version may start from one instead of reading it.

    A summary enters from a fresh read (:meth:`put`) and moves with every batch the store
    commits (:meth:`observe`, subscribed to the store's publication, which tells batches in
    commit order before their appends return): the batch's events are folded onto it when
    they follow it (``seq`` = its ``version`` + 1), else it is dropped. What it cannot hear
    is another process's (or another store instance's) commit: then it is behind the log,
    and an append guarded by the version it names is refused (``ConcurrencyConflict``) and
    nothing is written; the caller forgets it (:meth:`forget`) and decides again on a fresh read.
    A version names one state only while the session's log only grows: a session whose id
    another writer may create again after a purge (an id given by the client that created
    it, ``client`` set: Claude Code's) is never held, nor is a deleted one.
    """

    __slots__ = ("_held", "_known", "_lock")

    def __init__(
        self, known: Callable[[str, str], tuple[bool, SessionSummary | None]] | None = None
    ) -> None:
        self._held: dict[str, SessionSummary] = {}
        self._known = known
        """The inline projection's summary at a head it folded
        (:meth:`ExecutionStateProjection.known`): a committed batch's result taken as
        saved rather than folded again."""
        self._lock = threading.Lock()

    def get(self, session_id: str) -> SessionSummary | None:
        """The summary as of the last commit heard, or ``None``."""
        return self._held.get(session_id)

    def put(self, summary: SessionSummary) -> None:
        """Hold ``summary`` (just read), unless a later one is held already."""
        if summary.deleted or summary.client is not None:
            return
        with self._lock:
            held = self._held.get(summary.session_id)
            if held is not None and held.version >= summary.version:
                return
            if held is None and len(self._held) >= _CACHE_LIMIT:
                self._held.clear()
            self._held[summary.session_id] = summary

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._held.pop(session_id, None)

    def clear(self) -> None:
        with self._lock:
            self._held.clear()

    def observe(self, events: Sequence[RecordedEvent]) -> None:
        """Fold a committed group's events onto the summaries held (the store's listener)."""
        held = self._held
        if not held:
            return
        with self._lock:
            known = self._known
            if known is not None:
                unknown: set[str] = set()
                last = {e.session_id: e for e in events if e.session_id in held}
                for session_id, event in last.items():
                    found, summary = known(session_id, event.hash)
                    if not found:
                        unknown.add(session_id)
                    elif summary is None or summary.deleted:
                        held.pop(session_id, None)
                    else:
                        held[session_id] = summary
                if not unknown:
                    return
                events = [e for e in events if e.session_id in unknown]
            self._fold(events)

    def _fold(self, events: Sequence[RecordedEvent]) -> None:
        held = self._held
        appliers = APPLIERS
        # As ExecutionStateProjection.apply: appliers per event, stamped once per session.
        folded: dict[str, tuple[SessionSummary | None, RecordedEvent]] = {}
        for event in events:
            session_id = event.session_id
            seen = folded.get(session_id)
            if seen is None:
                summary = held.get(session_id)
                if summary is None:
                    continue
                follows = event.seq == summary.version + 1
            else:
                summary, previous = seen
                if summary is None:
                    continue
                follows = event.seq == previous.seq + 1
            if follows:
                applier = appliers.get(event.type)
                if applier is not None:
                    summary = applier(summary, event)
            folded[session_id] = (summary if follows else None, event)
        for session_id, (after, last) in folded.items():
            if after is None or after.deleted:
                held.pop(session_id, None)
            else:
                held[session_id] = _stamped(after, last)


# -- turn counters (TD-5, PM-5) ------------------------------------------------------------


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
        return {name: getattr(self, name) for name in _TURN_FIELDS}

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> TurnCounters:
        return cls(**body)


_TURN_FIELDS = tuple(f.name for f in fields(TurnCounters))

TurnApplier = Callable[[TurnCounters, RecordedEvent], TurnCounters]


def _turn_mode_changed(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    data = event.data
    assert isinstance(data, SessionModeChanged)
    # Not dataclasses.replace: a mode change is a common event.
    if data.plan_enabled and not counters.plan_enabled:
        # A new Plan period: counted afresh (full reminder first); a pending exit is void.
        return TurnCounters(counters.session_id, counters.assistant_since_todo, True, 0, 0,
                            False, counters.compacted)
    if counters.plan_enabled and not data.plan_enabled:
        return TurnCounters(counters.session_id, counters.assistant_since_todo, False, 0, 0,
                            True, counters.compacted)
    return counters


def _message_counts(data: MessageRecorded) -> tuple[int, int]:
    """What one message adds to the counters: (assistant turns, real user messages)."""
    if data.role == "assistant" and not data.continuation:
        return 1, 0
    if data.role == "user" and data.kind == "real":
        return 0, 1
    return 0, 0


def _message(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
    data = event.data
    assert isinstance(data, MessageRecorded)
    assistants, users = _message_counts(data)
    if not assistants and not users:
        return counters
    return _counted(counters, assistants, users)


def _turn_todos_written(counters: TurnCounters, event: RecordedEvent) -> TurnCounters:
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


TURN_APPLIERS: dict[str, TurnApplier] = {
    "SessionModeChanged": _turn_mode_changed,
    "MessageRecorded": _message,
    "TodosWritten": _turn_todos_written,
    "ReminderInjected": _reminder,
    "ContextCompacted": _compacted,
}
TURN_EVENTS = frozenset({"SessionCreated", *TURN_APPLIERS})
"""The event types the counters fold; every other event is skipped without a look inside."""


def apply_turn_event(counters: TurnCounters | None, event: RecordedEvent) -> TurnCounters | None:
    """The counters after ``event`` (``SessionCreated`` starts them, Plan maybe on)."""
    data = event.data
    if isinstance(data, SessionCreated):
        return TurnCounters(event.session_id, plan_enabled=data.execution_state.plan_enabled)
    applier = TURN_APPLIERS.get(event.type)
    if counters is None or applier is None:
        return counters
    return applier(counters, event)


def fold_turns(events: Iterable[RecordedEvent]) -> TurnCounters | None:
    """A fresh fold of one session's events (audits compare the table with this): what
    :func:`apply_turn_event` over each gives (:class:`TurnFold`)."""
    folding = TurnFold()
    see = folding.see
    for event in events:
        see(event)
    return folding.result()


class TurnFold:
    """:func:`fold_turns` one event at a time. A message only adds one to a count
    (:func:`_message`), so a run of messages is counted, then added at once before the next
    other event and at the end, instead of a new ``TurnCounters`` per message (issue 24)."""

    __slots__ = ("_assistants", "_counters", "_users")

    def __init__(self) -> None:
        self._counters: TurnCounters | None = None
        self._assistants = 0
        self._users = 0

    def see(self, event: RecordedEvent) -> None:
        kind = event.type
        if kind == "MessageRecorded":
            if self._counters is not None:
                data = event.data
                assert isinstance(data, MessageRecorded)
                assistants, users = _message_counts(data)
                self._assistants += assistants
                self._users += users
            return
        if kind in TURN_EVENTS:
            self._counters = apply_turn_event(self.result(), event)

    def result(self) -> TurnCounters | None:
        """The counters so far (the messages counted since the last other event added)."""
        if self._counters is not None and (self._assistants or self._users):
            self._counters = _counted(self._counters, self._assistants, self._users)
        self._assistants = self._users = 0
        return self._counters


def _counted(counters: TurnCounters, assistants: int, users: int) -> TurnCounters:
    """``counters`` after ``assistants`` assistant turns and ``users`` real user messages
    (:func:`_message_counts`). Not dataclasses.replace (a tenth of an audit's time once):
    this runs for every message."""
    return TurnCounters(
        counters.session_id, counters.assistant_since_todo + assistants,
        counters.plan_enabled, counters.plan_reminders,
        counters.users_since_plan_reminder + users, counters.plan_exit_armed,
        counters.compacted,
    )


def _counters_doc(counters: TurnCounters, seq: int) -> Doc:
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
            _counters_doc(counters, last_seq[sid]) for sid, counters in current.items()
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

    def differences_of(self, stored: TurnCounters | None, fresh: TurnCounters | None,
                       session_id: str) -> list[str]:
        """How ``stored`` differs from ``fresh``, the session's counters folded afresh."""
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
