"""Reading a session's todo list from outside the tools: the document, the CLI, hosts (§4).

The list itself is the todo projection's (:mod:`projections.tools`, kept inline by the store);
writes only ever come through the TodoWrite tool. This module answers the readers: the
session document's ``todos`` (SPEC §11, in list order), and the "completed/total" progress a
host shows beside the list (TD-6) — the ``sessionledger todos`` command prints the same. It
lives apart from :mod:`sessionledger.service.sessions` so that module stays about sessions.

An unknown session is 404 (``session_not_found``) and a deleted one 410
(``session_deleted``): a deleted session has no todos (docs/decisions.md D30).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventlog import TodoItemData
from projections import SessionSummary
from projections.tools import as_item

from ..ledger import Ledger, eventlog_errors
from ..tools.todo import item_wire, list_lines, summary

__all__ = ["TodoList", "TodoService", "progress_text"]


def progress_text(todos: Sequence[TodoItemData]) -> str:
    """``"2/5 completed"``: the progress a host shows beside the list (TD-6)."""
    counts = summary(todos)
    return f"{counts['completed']}/{counts['total']} completed"


@dataclass(frozen=True, slots=True)
class TodoList:
    """One session's current list, as a reader sees it."""

    session_id: str
    items: tuple[TodoItemData, ...]
    updated_at: str | None
    """When the list was last written (``None`` when it never was, or was emptied)."""

    @property
    def completed(self) -> int:
        return sum(1 for t in self.items if t.status == "completed")

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def progress(self) -> str:
        return progress_text(self.items)

    def wire(self) -> list[dict[str, str]]:
        """The session document's ``todos``: ``{"content", "status", "priority"}`` in order."""
        return [item_wire(t) for t in self.items]

    def lines(self) -> list[str]:
        """``1. [in_progress] content`` per item."""
        return list_lines(self.items)

    def to_json(self) -> dict[str, Any]:
        """What ``sessionledger todos --json`` prints."""
        return {
            "sessionId": self.session_id, "todos": self.wire(), "summary": summary(self.items),
            "progress": {"completed": self.completed, "total": self.total},
            "updatedAt": self.updated_at,
        }


class TodoService:
    """The todo lists of one store's sessions, read from the todo projection."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._projections = ledger.projections

    def _require_live(self, session_id: str) -> SessionSummary:
        return self._ledger.live(session_id)

    def current(self, session_id: str) -> TodoList:
        """The live session's list (404 unknown, 410 deleted)."""
        live = self._require_live(session_id)
        projection = self._projections.todos
        with eventlog_errors():
            rows = self._store.read_view(lambda tx: projection.of_session(tx, session_id))
        return TodoList(
            session_id, tuple(as_item(r) for r in rows),
            live.todos_updated_at if rows else None,
        )

    def wire(self, session_id: str) -> list[dict[str, str]]:
        """The session document's ``todos`` (SPEC §11)."""
        return self.current(session_id).wire()
