"""Where the todo rows are kept: the SQLite ``todo`` table, or a dict for the in-memory twin.

The only SQL of the todo projection lives here (SPEC TD-4): table ``todo`` keyed by
``(session_id, position)``, rows in list order (position 0, 1, 2 …), each with its
``content``, ``status`` and ``priority``. When and by which event the list was written is the
session summary's (``todos_seq``, ``todos_updated_at``, D70), so a row changes only when its
item does. The session column references the execution-state summary row with ``ON DELETE
CASCADE``, so a session's todos go with its summary row — on purge, or when the summary table
is dropped for a rebuild (the todo projection is then rebuilt too, see
:mod:`projections.todos`). The store's write connection has ``PRAGMA foreign_keys = ON``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import Any, NamedTuple, Protocol

__all__ = ["MemoryTodoTable", "SqliteTodoTable", "TodoRow", "TodoTable"]


class TodoRow(NamedTuple):
    """One stored todo: its place in its session's list and what it says.

    A named tuple in the table's column order: a row read is one cheap tuple, and a row
    written is already its statement's values.
    """

    session_id: str
    position: int
    content: str
    status: str
    priority: str


class TodoTable(Protocol):
    """Where todo rows live for one backend; ``tx`` is the store's transaction handle."""

    def create(self, tx: Any) -> None: ...
    def is_present(self, tx: Any) -> bool: ...
    def drop(self, tx: Any) -> None: ...
    def replace(
        self, tx: Any, session_id: str, rows: Sequence[TodoRow],
        old: Sequence[TodoRow] | None = None,
    ) -> None: ...
    def delete_session(self, tx: Any, session_id: str) -> None: ...
    def of_session(self, tx: Any, session_id: str) -> list[TodoRow]: ...


_COLUMNS = "session_id, position, content, status, priority"
_ROWS_PER_STATEMENT = 64
"""Rows per multi-row upsert: 5 x 64 = 320 variables, and few distinct statement texts."""


@lru_cache(maxsize=_ROWS_PER_STATEMENT)
def _upsert_sql(count: int) -> str:
    marks = ", ".join(["(?, ?, ?, ?, ?)"] * count)
    # A row whose item is unchanged is left as it is (its page is not written for it).
    return (
        f"INSERT INTO todo ({_COLUMNS}) VALUES {marks} "
        "ON CONFLICT (session_id, position) DO UPDATE SET content = excluded.content, "
        "status = excluded.status, priority = excluded.priority "
        "WHERE content IS NOT excluded.content OR status IS NOT excluded.status "
        "OR priority IS NOT excluded.priority"
    )


class SqliteTodoTable:
    """Todo rows in the ``todo`` table beside ``execution_state``."""

    def create(self, tx: sqlite3.Connection) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS todo ("
            "session_id TEXT NOT NULL, position INTEGER NOT NULL, content TEXT NOT NULL, "
            "status TEXT NOT NULL, priority TEXT NOT NULL, PRIMARY KEY (session_id, position), "
            "FOREIGN KEY (session_id) REFERENCES execution_state(session_id) "
            "ON DELETE CASCADE)"
        )

    def is_present(self, tx: sqlite3.Connection) -> bool:
        found = tx.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'todo'"
        ).fetchone()
        return found is not None

    def drop(self, tx: sqlite3.Connection) -> None:
        tx.execute("DROP TABLE IF EXISTS todo")

    def replace(
        self, tx: sqlite3.Connection, session_id: str, rows: Sequence[TodoRow],
        old: Sequence[TodoRow] | None = None,
    ) -> None:
        """Make ``rows`` (positions 0 … n-1) the session's rows, in the caller's transaction.

        Each position is upserted in place and the positions past the new end deleted: the
        same rows as deleting them all and inserting the list, but the rows and the key
        index stay where they were and an unchanged row is not rewritten. ``old``, when the
        caller knows the stored rows, narrows the upsert to the rows that differ and skips
        the delete when the list did not shrink.
        """
        assert not rows or rows[-1].position == len(rows) - 1, "positions must be 0 … n-1"
        length = len(rows)
        if old is not None:
            kept = len(old)
            rows = [r for r in rows if r.position >= kept or old[r.position] != r]
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            part = rows[start : start + _ROWS_PER_STATEMENT]
            tx.execute(_upsert_sql(len(part)), list(chain.from_iterable(part)))
        if old is None or len(old) > length:
            tx.execute(
                "DELETE FROM todo WHERE session_id = ? AND position >= ?", (session_id, length)
            )

    def delete_session(self, tx: sqlite3.Connection, session_id: str) -> None:
        tx.execute("DELETE FROM todo WHERE session_id = ?", (session_id,))

    def of_session(self, tx: sqlite3.Connection, session_id: str) -> list[TodoRow]:
        rows = tx.execute(
            f"SELECT {_COLUMNS} FROM todo WHERE session_id = ? ORDER BY position", (session_id,)
        )
        return list(map(TodoRow._make, rows))


class MemoryTodoTable:
    """Todo rows in a dict by session, for the in-memory store (``tx`` is unused).

    There is no cascade here: the projection deletes a session's rows itself (on
    ``SessionDeleted`` and on ``forget``), which the SQLite table's cascade only backs up.
    """

    def __init__(self) -> None:
        self.rows: dict[str, tuple[TodoRow, ...]] = {}

    def create(self, tx: Any) -> None:
        return None

    def is_present(self, tx: Any) -> bool:
        return True

    def drop(self, tx: Any) -> None:
        self.rows.clear()

    def replace(
        self, tx: Any, session_id: str, rows: Sequence[TodoRow],
        old: Sequence[TodoRow] | None = None,
    ) -> None:
        if rows:
            self.rows[session_id] = tuple(sorted(rows, key=lambda r: r.position))
        else:
            self.rows.pop(session_id, None)

    def delete_session(self, tx: Any, session_id: str) -> None:
        self.rows.pop(session_id, None)

    def of_session(self, tx: Any, session_id: str) -> list[TodoRow]:
        return list(self.rows.get(session_id, ()))
