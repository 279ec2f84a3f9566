"""Where the interaction-timer rows live: one SQLite table, or a dict for the in-memory twin.

Each row is a JSON body under a key (a session id, or the reserved settings stream) with a
status the scheduler asks for: ``watch`` rows hold a question whose timer may still move, so
"which sessions may have something due" is one indexed read however many sessions are idle.
The only SQL of the timer projection is here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["MemoryTimerTable", "SqliteTimerTable", "TimerRow", "TimerTable"]

_TABLE = "interaction_timers"


@dataclass(frozen=True, slots=True)
class TimerRow:
    """One stored row: a session's queue and timers, or the setting's history."""

    key: str
    status: str
    body: dict[str, Any]


class TimerTable(Protocol):
    """The rows for one backend; ``tx`` is the store's transaction or read handle."""

    def create(self, tx: Any) -> None: ...
    def is_present(self, tx: Any) -> bool: ...
    def drop(self, tx: Any) -> None: ...
    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, TimerRow]: ...
    def save(self, tx: Any, rows: Sequence[TimerRow]) -> None: ...
    def delete(self, tx: Any, key: str) -> None: ...
    def with_status(self, tx: Any, status: str) -> list[TimerRow]: ...


def _row(raw: tuple[Any, ...]) -> TimerRow:
    return TimerRow(raw[0], raw[1], json.loads(raw[2]))


class SqliteTimerTable:
    """Rows in the ``interaction_timers`` table beside ``events``."""

    def create(self, tx: sqlite3.Connection) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (key TEXT PRIMARY KEY, "
            "status TEXT NOT NULL, body TEXT NOT NULL)"
        )
        tx.execute(f"CREATE INDEX IF NOT EXISTS {_TABLE}_status ON {_TABLE} (status)")

    def is_present(self, tx: sqlite3.Connection) -> bool:
        found = tx.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_TABLE,)
        ).fetchone()
        return found is not None

    def drop(self, tx: sqlite3.Connection) -> None:
        tx.execute(f"DROP TABLE IF EXISTS {_TABLE}")

    def load(self, tx: sqlite3.Connection, keys: Sequence[str]) -> dict[str, TimerRow]:
        found: dict[str, TimerRow] = {}
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            marks = ",".join("?" * len(part))
            for raw in tx.execute(
                f"SELECT key, status, body FROM {_TABLE} WHERE key IN ({marks})", part
            ):
                found[raw[0]] = _row(raw)
        return found

    def save(self, tx: sqlite3.Connection, rows: Sequence[TimerRow]) -> None:
        tx.executemany(
            f"INSERT INTO {_TABLE} (key, status, body) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET status = excluded.status, body = excluded.body",
            [(r.key, r.status, json.dumps(r.body, sort_keys=True)) for r in rows],
        )

    def delete(self, tx: sqlite3.Connection, key: str) -> None:
        tx.execute(f"DELETE FROM {_TABLE} WHERE key = ?", (key,))

    def with_status(self, tx: sqlite3.Connection, status: str) -> list[TimerRow]:
        return [
            _row(raw) for raw in tx.execute(
                f"SELECT key, status, body FROM {_TABLE} WHERE status = ? ORDER BY key",
                (status,),
            )
        ]


class MemoryTimerTable:
    """Rows in a dict, for the in-memory store (``tx`` is unused)."""

    def __init__(self) -> None:
        self.rows: dict[str, TimerRow] = {}

    def create(self, tx: Any) -> None:
        return None

    def is_present(self, tx: Any) -> bool:
        return True

    def drop(self, tx: Any) -> None:
        self.rows.clear()

    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, TimerRow]:
        return {k: self.rows[k] for k in keys if k in self.rows}

    def save(self, tx: Any, rows: Sequence[TimerRow]) -> None:
        self.rows.update((r.key, r) for r in rows)

    def delete(self, tx: Any, key: str) -> None:
        self.rows.pop(key, None)

    def with_status(self, tx: Any, status: str) -> list[TimerRow]:
        return sorted((r for r in self.rows.values() if r.status == status),
                      key=lambda r: r.key)
