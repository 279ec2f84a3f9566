"""What it means now: folds of the event log into read models, updated inline on append.

:func:`open_projected_store` opens an event store with every inline projection attached,
choosing each projection's tables for the backend the URL names. :func:`compare_session`
is the projection half of an audit: the stored read model against a fresh fold of the log.
"""

from __future__ import annotations

import marshal
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from eventlog import (
    Clock,
    EventStore,
    InlineProjection,
    RecordedEvent,
    backend_of,
    open_store,
)

from .session import (
    ExecutionStateProjection,
    SummaryFold,
    TurnCounters,
    TurnCountersProjection,
    TurnFold,
)
from .tables import (
    Doc,
    MemoryDocTable,
    MemorySummaryTable,
    MemoryTimerTable,
    MemoryTodoTable,
    SessionSummary,
    SqliteDocTable,
    SqliteSessionDocTable,
    SqliteSummaryTable,
    SqliteTimerTable,
    SqliteTodoTable,
    SummaryPage,
    TimerRow,
    TodoRow,
)
from .tools import (
    INTERACTION_EVENTS,
    TIMER_EVENTS,
    TODO_EVENTS,
    DocProjection,
    InteractionTimersProjection,
    TodoFold,
    TodoProjection,
    ToolRecordsProjection,
    call_key,
    fold_call,
    fold_interaction,
    fold_timers,
    todo_differences_of,
)

__all__ = [
    "ExecutionStateProjection",
    "InteractionTimersProjection",
    "Projections",
    "SessionFold",
    "SessionSummary",
    "SummaryPage",
    "TodoProjection",
    "ToolRecordsProjection",
    "TurnCounters",
    "compare_session",
    "open_projected_store",
]


@dataclass(frozen=True, slots=True)
class Projections:
    """The inline projections of one store, for reading through ``store.read_view``."""

    execution_state: ExecutionStateProjection
    tool_calls: DocProjection
    interactions: DocProjection
    turns: TurnCountersProjection
    todos: TodoProjection
    timers: InteractionTimersProjection | None = None
    """Question timers (HO-4); ``None`` only where a store is opened without them (tests)."""
    records: ToolRecordsProjection = field(
        default_factory=lambda: ToolRecordsProjection(MemoryDocTable("tool_records"))
    )

    def all(self) -> tuple[InlineProjection, ...]:
        views = (self.execution_state, self.tool_calls, self.interactions, self.turns,
                 self.todos, self.timers, self.records)
        return tuple(v for v in views if v is not None)

    def call(self, store: EventStore, session_id: str, call_id: str) -> Doc | None:
        """One tool call's document, or ``None``."""
        key = call_key(session_id, call_id)
        return store.read_view(lambda tx: self.tool_calls.get(tx, key))

    def interaction(self, store: EventStore, interaction_id: str) -> Doc | None:
        """One interaction's document, or ``None``."""
        return store.read_view(lambda tx: self.interactions.get(tx, interaction_id))

    def pending_interactions(self, store: EventStore, session_id: str) -> list[Doc]:
        """The session's pending interactions in queue (FIFO) order."""
        return store.read_view(
            lambda tx: self.interactions.of_session(tx, session_id, "pending")
        )

    def summary(self, store: EventStore, session_id: str) -> SessionSummary | None:
        """The session's stored summary, or ``None`` if it has none."""
        projection = self.execution_state
        return store.read_view(lambda tx: projection.get(tx, session_id))

    def turn_counters(self, store: EventStore, session_id: str) -> TurnCounters | None:
        """The session's reminder counters (TD-5, PM-5), or ``None``."""
        return store.read_view(lambda tx: self.turns.get(tx, session_id))

    def todo_rows(self, store: EventStore, session_id: str) -> tuple[TodoRow, ...]:
        """The session's stored todo rows in list order, as read (no revalidation)."""
        projection = self.todos
        return tuple(store.read_view(lambda tx: projection.of_session(tx, session_id)))

    def timer_row(self, store: EventStore, key: str) -> TimerRow | None:
        """A session's queue with its timers, or the settings stream's history of changes."""
        timers = self.timers
        return None if timers is None else store.read_view(lambda tx: timers.get(tx, key))

    def timer_rows(self, store: EventStore, keys: list[str]) -> dict[str, TimerRow]:
        """The timer rows of several sessions at once (missing ones are left out)."""
        timers = self.timers
        if timers is None or not keys:
            return {}
        return store.read_view(lambda tx: timers.rows(tx, keys))

    def watched_timers(self, store: EventStore) -> list[TimerRow]:
        """The rows of sessions with a question whose timer may still move (HO-4)."""
        return [] if self.timers is None else store.read_view(self.timers.watched)

    def summaries(self, store: EventStore) -> list[SessionSummary]:
        """Every session's summary, most recently written first."""
        projection = self.execution_state
        return store.read_view(projection.newest_first)

    def summary_page(self, store: EventStore, query: SummaryPage) -> list[SessionSummary]:
        """A page of the session list (:class:`~.tables.SummaryPage`)."""
        projection = self.execution_state
        return store.read_view(lambda tx: projection.page(tx, query))


def open_projected_store(
    url: str, *, clock: Clock | None = None
) -> tuple[EventStore, Projections]:
    """Open the store at ``url`` with every inline projection attached."""
    backend = backend_of(url)
    if backend == "postgresql":
        on_postgres = _on_postgres()
        return open_store(url, clock=clock, projections=on_postgres.all()), on_postgres
    sqlite = backend == "sqlite"
    table = SqliteSummaryTable() if sqlite else MemorySummaryTable()
    docs: Any = SqliteDocTable if sqlite else MemoryDocTable
    summaries = ExecutionStateProjection(table)  # the todo rows reference its rows
    projections = Projections(
        summaries,
        DocProjection(
            name="tool_calls", version=2, fold=fold_call,
            table=SqliteSessionDocTable("tool_calls") if sqlite else docs("tool_calls"),
        ),
        DocProjection(
            name="interactions", version=1, table=docs("interactions"), fold=fold_interaction,
            types=INTERACTION_EVENTS,
        ),
        TurnCountersProjection(docs("turn_counters")),
        TodoProjection(SqliteTodoTable() if sqlite else MemoryTodoTable(), summaries),
        InteractionTimersProjection(SqliteTimerTable() if sqlite else MemoryTimerTable()),
        records=ToolRecordsProjection(docs("tool_records")),
    )
    return open_store(url, clock=clock, projections=projections.all()), projections


def _on_postgres() -> Projections:
    """The projections with their PostgreSQL tables (:mod:`projections.pg_tables`, imported
    here: a process on SQLite, like a command hook, never loads it)."""
    from .pg_tables import PgDocTable, PgSummaryTable, PgTimerTable, PgTodoTable

    summaries = ExecutionStateProjection(PgSummaryTable())
    return Projections(
        summaries,
        DocProjection(name="tool_calls", version=2, fold=fold_call,
                      table=PgDocTable("tool_calls")),
        DocProjection(
            name="interactions", version=1, table=PgDocTable("interactions"),
            fold=fold_interaction, types=INTERACTION_EVENTS,
        ),
        TurnCountersProjection(PgDocTable("turn_counters")),
        TodoProjection(PgTodoTable(), summaries),
        InteractionTimersProjection(PgTimerTable()),
        records=ToolRecordsProjection(PgDocTable("tool_records")),
    )


def compare_session(
    store: EventStore, projections: Projections, session_id: str,
    events: Sequence[RecordedEvent] | None = None,
) -> list[str]:
    """Differences between the stored read models and a fresh fold of the session's log
    (``events``: the session's events already read, in seq order; read here when ``None``)."""
    folding = SessionFold(projections)
    see = folding.see
    for event in store.read_session(session_id) if events is None else events:
        see(event)
    return folding.differences(store, session_id)


class SessionFold:
    """Every read model of one session folded afresh from its events, one event at a time
    (what :func:`compare_session` folds; an audit folds each event as it decodes it and holds
    no list of them, issue 24). :meth:`differences` reads the stored models and lists where
    they differ."""

    def __init__(self, projections: Projections) -> None:
        self._projections = projections
        self._summary = SummaryFold()
        self._turns = TurnFold()
        self._todos = TodoFold()
        views = (projections.tool_calls, projections.interactions, projections.records)
        self._docs: tuple[tuple[DocProjection, dict[str, Doc | None]], ...] = tuple(
            (view, PackedDocs()) for view in views
        )
        self._doc_types = frozenset().union(*(view.types for view in views))
        self._timers: dict[str, TimerRow | None] = {}
        self._messages_summary_only = "MessageRecorded" not in (
            self._doc_types | TODO_EVENTS | TIMER_EVENTS
        )

    def see(self, event: RecordedEvent) -> None:
        """Fold ``event``, the session's next."""
        self._summary.see(event)
        self._turns.see(event)
        kind = event.type
        if kind == "MessageRecorded" and self._messages_summary_only:
            return  # most of a log: only the summary and the counters fold it
        if kind in self._doc_types:
            for view, fresh in self._docs:
                if kind in view.types:  # what the view folds inline (DocProjection.apply)
                    view.fold(fresh, event)
        if kind in TODO_EVENTS:
            self._todos.see(event)
        if kind in TIMER_EVENTS:
            fold_timers(self._timers, event)

    def differences(self, store: EventStore, session_id: str) -> list[str]:
        """The stored read models of ``session_id`` against the events folded so far."""
        projections = self._projections
        differences = _summary_differences(
            self._summary.result(), projections.summary(store, session_id), session_id
        )
        for view, fresh in self._docs:
            differences += _doc_differences(store, view, fresh, session_id)
        differences += todo_differences_of(store, projections.todos, self._todos.lists,
                                           session_id)
        stored_turns = projections.turn_counters(store, session_id)
        differences += projections.turns.differences_of(
            stored_turns, self._turns.result(), session_id
        )
        if projections.timers is not None:
            differences += projections.timers.differences_of(store, self._timers, session_id)
        return differences


class PackedDocs(dict[str, Any]):
    """A session's freshly folded documents, each kept packed (``marshal``: one bytes object
    instead of its nested dicts), unpacked when a fold or the comparison reads it: an audit of
    a long session holds little per document (issue 41). A body ``marshal`` cannot pack (not
    plain JSON values) is kept as it is."""

    def __getitem__(self, key: str) -> Doc | None:
        packed = super().__getitem__(key)
        if type(packed) is not tuple:
            return packed  # type: ignore[no-any-return]
        session_id, status, order, body = packed
        return Doc(key, session_id, status, order, marshal.loads(body))

    def get(self, key: str, default: Any = None) -> Doc | None:
        return self[key] if key in self else default

    def __setitem__(self, key: str, doc: Doc | None) -> None:
        try:
            value: Any = None if doc is None else (
                doc.session_id, doc.status, doc.order, marshal.dumps(doc.body))
        except ValueError:
            value = doc
        super().__setitem__(key, value)


_COMPARED_AT_ONCE = 500
"""Documents read back from a view per query when an audit compares them."""


def _doc_differences(
    store: EventStore, view: DocProjection, fresh: dict[str, Doc | None], session_id: str
) -> list[str]:
    """The keys whose stored document is not the fresh one, read back a few hundred at a
    time by key, then the session's stored keys the fold does not have."""
    differing: list[str] = []
    keys = sorted(fresh)
    table = view.table
    for start in range(0, len(keys), _COMPARED_AT_ONCE):
        part = keys[start:start + _COMPARED_AT_ONCE]
        stored = store.read_view(lambda tx, part=part: table.load(tx, part))  # type: ignore[misc]
        differing += [k for k in part if fresh.get(k) != stored.get(k)]
    extra = set(store.read_view(lambda tx: table.keys_of(tx, session_id))).difference(fresh)
    return [f"{view.name}: {key} differs from the log" for key in sorted([*differing, *extra])]


def _summary_differences(
    fresh: SessionSummary | None, stored: SessionSummary | None, session_id: str
) -> list[str]:
    if fresh == stored:
        return []
    if fresh is None or stored is None:
        which = "the log" if fresh is None else "the projection"
        return [f"execution_state: {session_id} is missing from {which}"]
    return [
        f"execution_state.{f.name}: stored {getattr(stored, f.name)!r}, "
        f"log says {getattr(fresh, f.name)!r}"
        for f in fields(SessionSummary)
        if getattr(stored, f.name) != getattr(fresh, f.name)
    ]
