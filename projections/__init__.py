"""What it means now: folds of the event log into read models, updated inline on append.

:func:`open_projected_store` opens an event store with every inline projection attached,
choosing each projection's tables for the backend the URL names. :func:`compare_session`
is the projection half of an audit: the stored read model against a fresh fold of the log.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from eventlog import Clock, EventStore, backend_of, open_store

from .execution_state import ExecutionStateProjection, SessionSummary, fold
from .tables import MemorySummaryTable, SqliteSummaryTable

__all__ = [
    "ExecutionStateProjection",
    "Projections",
    "SessionSummary",
    "compare_session",
    "open_projected_store",
]


@dataclass(frozen=True, slots=True)
class Projections:
    """The inline projections of one store, for reading through ``store.read_view``."""

    execution_state: ExecutionStateProjection

    def all(self) -> tuple[ExecutionStateProjection, ...]:
        return (self.execution_state,)

    def summary(self, store: EventStore, session_id: str) -> SessionSummary | None:
        """The session's stored summary, or ``None`` if it has none."""
        projection = self.execution_state
        return store.read_view(lambda tx: projection.get(tx, session_id))

    def summaries(self, store: EventStore) -> list[SessionSummary]:
        """Every session's summary, most recently written first."""
        projection = self.execution_state
        return store.read_view(projection.newest_first)


def open_projected_store(
    url: str, *, clock: Clock | None = None
) -> tuple[EventStore, Projections]:
    """Open the store at ``url`` with every inline projection attached."""
    table = SqliteSummaryTable() if backend_of(url) == "sqlite" else MemorySummaryTable()
    projections = Projections(ExecutionStateProjection(table))
    return open_store(url, clock=clock, projections=projections.all()), projections


def compare_session(
    store: EventStore, projections: Projections, session_id: str
) -> list[str]:
    """Differences between the stored read models and a fresh fold of the session's log."""
    fresh = fold(store.read_session(session_id))
    stored = projections.summary(store, session_id)
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
