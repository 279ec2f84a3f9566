"""Where the execution-state summaries are kept: a SQLite table, or a dict for the twin.

The only SQL of the projections lives here. The SQLite table is versioned by the store
(``projection_versions``): when :attr:`ExecutionStateProjection.version` changes it is dropped
and rebuilt from the log at start (SPEC EL-9).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

from .execution_state import SessionSummary

__all__ = ["MemorySummaryTable", "SqliteSummaryTable"]

_FIELDS = tuple(f.name for f in fields(SessionSummary))
_COLUMNS = ", ".join(_FIELDS)
_SELECT = f"SELECT {_COLUMNS} FROM execution_state"
_VALUES = attrgetter(*_FIELDS)
_UPSERT = (
    f"INSERT INTO execution_state ({_COLUMNS}) VALUES ({','.join('?' * len(_FIELDS))}) "
    "ON CONFLICT(session_id) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in _FIELDS if f != "session_id")
)


_PLAN_ENABLED = _FIELDS.index("plan_enabled")
_DELETED = _FIELDS.index("deleted")


def _summary(row: tuple[Any, ...]) -> SessionSummary:
    values = list(row)
    values[_PLAN_ENABLED] = bool(values[_PLAN_ENABLED])
    values[_DELETED] = bool(values[_DELETED])
    return SessionSummary(*values)


class SqliteSummaryTable:
    """Summaries in the ``execution_state`` table beside ``events``."""

    def create(self, tx: sqlite3.Connection) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS execution_state ("
            "session_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "last_position INTEGER NOT NULL, workspace TEXT NOT NULL, host TEXT NOT NULL, "
            "parent_session_id TEXT, mode TEXT NOT NULL, plan_enabled INTEGER NOT NULL, "
            "goal TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
            "deleted INTEGER NOT NULL, todos_seq INTEGER, todos_updated_at TEXT)"
        )
        # No index on last_position: every append moves the session's entry in it (one more
        # page per commit), and listing the sessions newest first reads every row anyway.

    def is_present(self, tx: sqlite3.Connection) -> bool:
        found = tx.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'execution_state'"
        ).fetchone()
        return found is not None

    def drop(self, tx: sqlite3.Connection) -> None:
        tx.execute("DROP TABLE IF EXISTS execution_state")

    def load(self, tx: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        found: dict[str, SessionSummary] = {}
        for start in range(0, len(session_ids), 500):
            part = session_ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for row in tx.execute(f"{_SELECT} WHERE session_id IN ({marks})", part):
                found[row[0]] = _summary(row)
        return found

    def save(self, tx: sqlite3.Connection, summaries: Sequence[SessionSummary]) -> None:
        # An upsert, never INSERT OR REPLACE: a replace deletes the row first, and that
        # delete would cascade to the session's todo rows (SPEC TD-4).
        if len(summaries) == 1:
            tx.execute(_UPSERT, _VALUES(summaries[0]))
        elif summaries:
            tx.executemany(_UPSERT, [_VALUES(s) for s in summaries])

    def delete(self, tx: sqlite3.Connection, session_id: str) -> None:
        tx.execute("DELETE FROM execution_state WHERE session_id = ?", (session_id,))

    def get(self, tx: sqlite3.Connection, session_id: str) -> SessionSummary | None:
        row = tx.execute(f"{_SELECT} WHERE session_id = ?", (session_id,)).fetchone()
        return _summary(row) if row else None

    def newest_first(self, tx: sqlite3.Connection) -> list[SessionSummary]:
        return [_summary(r) for r in tx.execute(f"{_SELECT} ORDER BY last_position DESC")]


class MemorySummaryTable:
    """Summaries in a dict, for the in-memory store (``tx`` is unused)."""

    def __init__(self) -> None:
        self.rows: dict[str, SessionSummary] = {}

    def create(self, tx: Any) -> None:
        return None

    def is_present(self, tx: Any) -> bool:
        return True

    def drop(self, tx: Any) -> None:
        self.rows.clear()

    def load(self, tx: Any, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        return {sid: self.rows[sid] for sid in session_ids if sid in self.rows}

    def save(self, tx: Any, summaries: Sequence[SessionSummary]) -> None:
        self.rows.update((s.session_id, s) for s in summaries)

    def delete(self, tx: Any, session_id: str) -> None:
        self.rows.pop(session_id, None)

    def get(self, tx: Any, session_id: str) -> SessionSummary | None:
        return self.rows.get(session_id)

    def newest_first(self, tx: Any) -> list[SessionSummary]:
        return sorted(self.rows.values(), key=lambda s: s.last_position, reverse=True)
