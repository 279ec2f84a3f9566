"""A keyed table of JSON documents per session: storage for the call and interaction views.

Each row is a document (a dict) under a key, with its session, a status and an ordering
number; views ask for one document, or a session's documents of a status in order. One
implementation over SQLite (the only SQL of these views) and a dict twin for the in-memory
store.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import to_json

__all__ = ["Doc", "DocTable", "MemoryDocTable", "SqliteDocTable", "SqliteSessionDocTable"]


@dataclass(frozen=True, slots=True)
class Doc:
    """One stored document with its index columns."""

    key: str
    session_id: str
    status: str
    order: int
    body: dict[str, Any]


class DocTable(Protocol):
    """Where documents live for one backend; ``tx`` is the store's transaction handle."""

    def create(self, tx: Any) -> None: ...
    def is_present(self, tx: Any) -> bool: ...
    def drop(self, tx: Any) -> None: ...
    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, Doc]: ...
    def save(self, tx: Any, docs: Sequence[Doc]) -> None: ...
    def delete_session(self, tx: Any, session_id: str) -> None: ...
    def of_session(self, tx: Any, session_id: str, status: str | None = None) -> list[Doc]: ...


class SqliteDocTable:
    """Documents in one SQLite table named by the view."""

    def __init__(self, name: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"bad table name {name!r}")
        self.name = name

    def create(self, tx: sqlite3.Connection) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {self.name} (key TEXT PRIMARY KEY, "
            "session_id TEXT NOT NULL, status TEXT NOT NULL, ord INTEGER NOT NULL, "
            "body TEXT NOT NULL)"
        )
        tx.execute(
            f"CREATE INDEX IF NOT EXISTS {self.name}_session "
            f"ON {self.name} (session_id, status, ord)"
        )

    def is_present(self, tx: sqlite3.Connection) -> bool:
        found = tx.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.name,)
        ).fetchone()
        return found is not None

    def drop(self, tx: sqlite3.Connection) -> None:
        tx.execute(f"DROP TABLE IF EXISTS {self.name}")

    def _doc(self, row: tuple[Any, ...]) -> Doc:
        return Doc(row[0], row[1], row[2], row[3], json.loads(row[4]))

    def load(self, tx: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Doc]:
        found: dict[str, Doc] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            sql = f"SELECT key, session_id, status, ord, body FROM {self.name} WHERE key IN "
            for row in tx.execute(f"{sql}({marks})", part):
                found[row[0]] = self._doc(row)
        return found

    def save(self, tx: sqlite3.Connection, docs: Sequence[Doc]) -> None:
        # An upsert keeps a changed document's row where it was (a replace would delete and
        # re-insert it); the body is written by pydantic-core's JSON writer, several times
        # faster than ``json.dumps`` (a stored body need not be canonical, only loadable).
        if not docs:
            return
        sql = (
            f"INSERT INTO {self.name} (key, session_id, status, ord, body) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "session_id = excluded.session_id, status = excluded.status, ord = excluded.ord, "
            "body = excluded.body"
        )
        rows = [(d.key, d.session_id, d.status, d.order, to_json(d.body).decode("utf-8"))
                for d in docs]
        if len(rows) == 1:
            tx.execute(sql, rows[0])
        else:
            tx.executemany(sql, rows)

    def delete_session(self, tx: sqlite3.Connection, session_id: str) -> None:
        tx.execute(f"DELETE FROM {self.name} WHERE session_id = ?", (session_id,))

    def of_session(
        self, tx: sqlite3.Connection, session_id: str, status: str | None = None
    ) -> list[Doc]:
        sql = f"SELECT key, session_id, status, ord, body FROM {self.name} WHERE session_id = ?"
        params: tuple[Any, ...] = (session_id,)
        if status is not None:
            sql += " AND status = ?"
            params += (status,)
        return [self._doc(r) for r in tx.execute(sql + " ORDER BY ord", params)]


class SqliteSessionDocTable(SqliteDocTable):
    """Documents whose keys begin with their session id and ``/`` (the call view's
    ``session/call``): the key index keeps each session's documents together, so a session's
    documents are a range of keys and the table needs no session index of its own — a new
    document is written to two trees (rows, key) instead of three.
    """

    def create(self, tx: sqlite3.Connection) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {self.name} (key TEXT PRIMARY KEY, "
            "session_id TEXT NOT NULL, status TEXT NOT NULL, ord INTEGER NOT NULL, "
            "body TEXT NOT NULL)"
        )

    @staticmethod
    def _range(session_id: str) -> tuple[str, str, str]:
        # Every key of the session starts with "<session>/"; "0" follows "/" in code points.
        return (f"{session_id}/", f"{session_id}0", session_id)

    def delete_session(self, tx: sqlite3.Connection, session_id: str) -> None:
        tx.execute(
            f"DELETE FROM {self.name} WHERE key >= ? AND key < ? AND session_id = ?",
            self._range(session_id),
        )

    def of_session(
        self, tx: sqlite3.Connection, session_id: str, status: str | None = None
    ) -> list[Doc]:
        sql = (f"SELECT key, session_id, status, ord, body FROM {self.name} "
               "WHERE key >= ? AND key < ? AND session_id = ?")
        params: tuple[Any, ...] = self._range(session_id)
        if status is not None:
            sql += " AND status = ?"
            params += (status,)
        return [self._doc(r) for r in tx.execute(sql + " ORDER BY ord", params)]


class MemoryDocTable:
    """Documents in a dict, for the in-memory store (``tx`` is unused)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: dict[str, Doc] = {}

    def create(self, tx: Any) -> None:
        return None

    def is_present(self, tx: Any) -> bool:
        return True

    def drop(self, tx: Any) -> None:
        self.rows.clear()

    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, Doc]:
        return {k: self.rows[k] for k in keys if k in self.rows}

    def save(self, tx: Any, docs: Sequence[Doc]) -> None:
        self.rows.update((d.key, d) for d in docs)

    def delete_session(self, tx: Any, session_id: str) -> None:
        for key in [k for k, d in self.rows.items() if d.session_id == session_id]:
            del self.rows[key]

    def of_session(self, tx: Any, session_id: str, status: str | None = None) -> list[Doc]:
        docs = [d for d in self.rows.values()
                if d.session_id == session_id and (status is None or d.status == status)]
        return sorted(docs, key=lambda d: d.order)
