"""Helpers the todo tests share: items, a TodoWrite through the service, the stored rows.

Plain functions (no fixtures), imported by ``test_todos.py`` and ``test_todo_table.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventlog import RecordedEvent
from projections.tables import TodoRow
from sessionledger import SessionService

__all__ = ["as_items", "events", "item", "reopen", "stored", "write"]


def item(content: str, status: str = "pending", priority: str = "medium") -> dict[str, str]:
    return {"content": content, "status": status, "priority": priority}


def write(service: SessionService, sid: str, todos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    answer = service.tools.call(sid, "TodoWrite", {"todos": list(todos)})
    assert answer.status_code == 200, answer.document
    assert answer.document["status"] == "completed" and answer.document["success"] is True
    # The answer is folded from the appended events; the call view must hold the same (D40).
    assert service.tools.get(sid, answer.document["callId"]).document == answer.document
    return answer.document


def stored(service: SessionService, sid: str) -> list[TodoRow]:
    projection = service.projections.todos
    return service.store.read_view(lambda tx: projection.of_session(tx, sid))


def as_items(rows: Sequence[TodoRow]) -> list[dict[str, str]]:
    return [item(r.content, r.status, r.priority) for r in rows]


def events(service: SessionService, sid: str) -> list[RecordedEvent]:
    return list(service.store.read_session(sid))


def reopen(db_path: Path, root: Path) -> SessionService:
    """A service over the SQLite file at ``db_path`` (close it when done)."""
    return SessionService.open(f"sqlite:///{db_path}", workspace_root=root)
