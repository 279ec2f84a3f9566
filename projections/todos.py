"""The todo projection: each live session's current todo list, one row per item (SPEC TD-4).

A fold over the log: ``TodosWritten`` replaces the session's whole list (delete its rows,
insert the new ones in order), ``SessionDeleted`` empties it — a deleted session has no
todos — and a write to a session that was never created or is already deleted changes
nothing. The store runs :meth:`TodoProjection.apply` inside the append transaction, after
the execution-state projection, so one TodoWrite call is one atomic unit that appends its
events, replaces the rows and touches the session's ``updated_at`` (the summary stamps
every event, and notes which write the list is: ``todos_seq``). The rows live in
:mod:`projections.tables`; only the rows whose item changed are written, the session's
stored rows being known from the last batch this process folded when the new batch chains
from it (D74), and compared in SQL otherwise.

The projection is tied to the execution-state projection it follows: its rows reference the
summary rows (``ON DELETE CASCADE``), so whenever the summary table is rebuilt — its version
changed, or it is missing — the cascade empties the todo table and the todos must be refolded
too. :attr:`TodoProjection.version` therefore includes the summary projection's version and
:meth:`TodoProjection.is_present` asks for the summary table as well: the store then rebuilds
both in one transaction (docs/decisions.md D31).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from eventlog import EventStore, RecordedEvent, TodoItemData, TodosWritten

from .chain_cache import ChainCache, session_spans
from .execution_state import ExecutionStateProjection
from .tables import TodoRow, TodoTable

__all__ = [
    "TODO_EVENTS",
    "TodoProjection",
    "TodoRow",
    "as_item",
    "current_todos",
    "fold_todos",
    "rows_for",
    "todo_differences",
]

TODO_EVENTS = frozenset({"SessionCreated", "TodosWritten", "SessionDeleted"})
"""The event types the fold looks at; every other event passes without a look inside."""

_OWN_VERSION = 2
"""The todo table's own schema version; :attr:`TodoProjection.version` adds the parent's.
(2: rows hold the item only; the write's seq and time are the summary's, D70.)"""


def rows_for(session_id: str, todos: Sequence[TodoItemData]) -> list[TodoRow]:
    """The rows of a written list: positions 0, 1, 2 … in list order."""
    return [
        TodoRow(session_id, position, t.content, t.status, t.priority)
        for position, t in enumerate(todos)
    ]


def fold_todos(events: Iterable[RecordedEvent]) -> dict[str, list[TodoRow]]:
    """A fresh fold: the rows of every live, created session (audits compare with this)."""
    lists: dict[str, list[TodoRow]] = {}
    deleted: set[str] = set()
    for event in events:
        kind = event.type
        if kind not in TODO_EVENTS:
            continue
        sid = event.session_id
        if kind == "SessionCreated":
            lists.setdefault(sid, [])
        elif kind == "SessionDeleted":
            if sid in lists:
                lists[sid] = []
                deleted.add(sid)
        elif sid in lists and sid not in deleted:
            data = event.data
            assert isinstance(data, TodosWritten)
            lists[sid] = rows_for(sid, data.todos)
    return lists


def as_item(row: TodoRow) -> TodoItemData:
    """A stored row as the catalog's item."""
    return TodoItemData.model_validate(
        {"content": row.content, "status": row.status, "priority": row.priority}
    )


class TodoProjection:
    """The inline projection the store runs: replace a session's rows on each write."""

    name = "todo"

    def __init__(self, table: TodoTable, parent: ExecutionStateProjection) -> None:
        self.table = table
        self.parent = parent
        self._known: ChainCache[tuple[TodoRow, ...]] = ChainCache()
        """Each session's stored rows as of the last batch this process folded (D74)."""

    @property
    def version(self) -> int:
        """Changes whenever the summary projection's does: its rebuild empties ours."""
        return _OWN_VERSION * 1000 + self.parent.version

    def create(self, tx: Any) -> None:
        self.table.create(tx)

    def is_present(self, tx: Any) -> bool:
        return self.table.is_present(tx) and self.parent.is_present(tx)

    def drop(self, tx: Any) -> None:
        self._known.clear()
        self.table.drop(tx)

    def forget(self, tx: Any, session_id: str) -> None:
        # On SQLite the summary row's delete has already cascaded; the twin needs this.
        self._known.forget(session_id)
        self.table.delete_session(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        # Only a session's last write in the batch matters; its summary (already folded
        # in this transaction) says whether the session exists and is still live.
        final: dict[str, list[TodoRow]] = {}
        for event in events:
            if event.type == "TodosWritten":
                data = event.data
                assert isinstance(data, TodosWritten)
                final[event.session_id] = rows_for(event.session_id, data.todos)
            elif event.type == "SessionDeleted":
                final[event.session_id] = []
        spans = session_spans(events)
        known = self._known
        for session_id, rows in final.items():
            summary = self.parent.applied(tx, events, session_id)
            head, last = spans[session_id]
            if summary is None:
                known.forget(session_id)
                continue
            if summary.deleted:
                self.table.delete_session(tx, session_id)
                known.put(session_id, last, ())
                continue
            found, old = known.get(session_id, head)
            self.table.replace(tx, session_id, rows, old if found else None)
            known.put(session_id, last, tuple(rows))
        known.advance(spans, skip=tuple(final))

    def of_session(self, tx: Any, session_id: str) -> list[TodoRow]:
        return self.table.of_session(tx, session_id)

    def items(self, tx: Any, session_id: str) -> tuple[TodoItemData, ...]:
        """The session's list as catalog items, in order."""
        return tuple(as_item(row) for row in self.table.of_session(tx, session_id))


def current_todos(
    store: EventStore, projection: TodoProjection, session_id: str
) -> tuple[TodoItemData, ...]:
    """The session's current todo list from the projection (empty when it has none)."""
    return store.read_view(lambda tx: projection.items(tx, session_id))


def todo_differences(
    store: EventStore, projection: TodoProjection, events: Sequence[RecordedEvent],
    session_id: str,
) -> list[str]:
    """Where the stored rows of ``session_id`` differ from a fresh fold of its ``events``."""
    fresh = fold_todos(events).get(session_id, [])
    stored = store.read_view(lambda tx: projection.of_session(tx, session_id))
    if fresh == stored:
        return []
    if len(fresh) != len(stored):
        return [f"todo: {session_id} has {len(stored)} stored rows, log says {len(fresh)}"]
    return [
        f"todo: {session_id} position {f.position} stored {s!r}, log says {f!r}"
        for f, s in zip(fresh, stored, strict=True) if f != s
    ]
