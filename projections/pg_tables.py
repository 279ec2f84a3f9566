"""The projections' tables on PostgreSQL: the same tables and rows as on SQLite (issue 11).

One class per SQLite table class of :mod:`projections.tables`, behind the same protocols,
with PostgreSQL's types and psycopg's ``%s`` placeholders; ``tx`` is the store's psycopg
connection (the append transaction, or an autocommit read connection). Tables live in the
connection's ``search_path`` (the store URL's ``schema``), so presence is checked with
``to_regclass``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

from pydantic_core import to_json

from .tables import Doc, SessionSummary, SummaryPage, TimerRow, TodoRow

__all__ = ["PgDocTable", "PgSummaryTable", "PgTimerTable", "PgTodoTable"]


def _present(tx: Any, table: str) -> bool:
    (found,) = tx.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(found)


def _many(tx: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    if len(rows) == 1:
        tx.execute(sql, rows[0])
    elif rows:
        with tx.cursor() as cursor:
            cursor.executemany(sql, rows)


# -- execution_state --------------------------------------------------------------------

_FIELDS = tuple(f.name for f in fields(SessionSummary))
_COLUMNS = ", ".join(_FIELDS)
_SELECT = f"SELECT {_COLUMNS} FROM execution_state"
_VALUES = attrgetter(*_FIELDS)
_UPSERT = (
    f"INSERT INTO execution_state ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(_FIELDS))}) "
    "ON CONFLICT (session_id) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in _FIELDS if f != "session_id")
)


class PgSummaryTable:
    """Summaries in the ``execution_state`` table beside ``events``."""

    def create(self, tx: Any) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS execution_state ("
            "session_id TEXT PRIMARY KEY, version BIGINT NOT NULL, "
            "last_position BIGINT NOT NULL, workspace TEXT NOT NULL, host TEXT NOT NULL, "
            "parent_session_id TEXT, mode TEXT NOT NULL, plan_enabled BOOLEAN NOT NULL, "
            "goal TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, "
            "deleted BOOLEAN NOT NULL, todos_seq BIGINT, todos_updated_at TEXT, client TEXT, "
            "external_session_id TEXT, first_message TEXT, waiting BIGINT NOT NULL, plan_by TEXT)"
        )

    def is_present(self, tx: Any) -> bool:
        return _present(tx, "execution_state")

    def drop(self, tx: Any) -> None:
        # The todo rows go with their summaries, as SQLite's cascade empties them; the todo
        # projection's version follows ours, so it is recreated and refolded right after.
        tx.execute("DROP TABLE IF EXISTS todo")
        tx.execute("DROP TABLE IF EXISTS execution_state")

    def load(self, tx: Any, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        rows = tx.execute(f"{_SELECT} WHERE session_id = ANY(%s)", (list(session_ids),))
        return {row[0]: SessionSummary(*row) for row in rows.fetchall()}

    def save(self, tx: Any, summaries: Sequence[SessionSummary]) -> None:
        _many(tx, _UPSERT, [_VALUES(s) for s in summaries])

    def delete(self, tx: Any, session_id: str) -> None:
        tx.execute("DELETE FROM execution_state WHERE session_id = %s", (session_id,))

    def get(self, tx: Any, session_id: str) -> SessionSummary | None:
        row = tx.execute(f"{_SELECT} WHERE session_id = %s", (session_id,)).fetchone()
        return SessionSummary(*row) if row else None

    def newest_first(self, tx: Any) -> list[SessionSummary]:
        rows = tx.execute(f"{_SELECT} ORDER BY last_position DESC").fetchall()
        return [SessionSummary(*r) for r in rows]

    def page(self, tx: Any, query: SummaryPage) -> list[SessionSummary]:
        where, params = query.where("%s")
        sql = f"{_SELECT} WHERE {where} ORDER BY last_position DESC LIMIT %s"
        return [SessionSummary(*r) for r in tx.execute(sql, (*params, query.limit)).fetchall()]


# -- documents (tool calls, interactions, turn counters, tool records) -------------------


class PgDocTable:
    """Documents in one table named by the view."""

    def __init__(self, name: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"bad table name {name!r}")
        self.name = name

    def create(self, tx: Any) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {self.name} (key TEXT PRIMARY KEY, "
            "session_id TEXT NOT NULL, status TEXT NOT NULL, ord BIGINT NOT NULL, "
            "body TEXT NOT NULL)"
        )
        tx.execute(
            f"CREATE INDEX IF NOT EXISTS {self.name}_session "
            f"ON {self.name} (session_id, status, ord)"
        )

    def is_present(self, tx: Any) -> bool:
        return _present(tx, self.name)

    def drop(self, tx: Any) -> None:
        tx.execute(f"DROP TABLE IF EXISTS {self.name}")

    @staticmethod
    def _doc(row: tuple[Any, ...]) -> Doc:
        return Doc(row[0], row[1], row[2], row[3], json.loads(row[4]))

    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, Doc]:
        rows = tx.execute(
            f"SELECT key, session_id, status, ord, body FROM {self.name} WHERE key = ANY(%s)",
            (list(keys),),
        ).fetchall()
        return {row[0]: self._doc(row) for row in rows}

    def save(self, tx: Any, docs: Sequence[Doc]) -> None:
        sql = (
            f"INSERT INTO {self.name} (key, session_id, status, ord, body) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
            "session_id = excluded.session_id, status = excluded.status, ord = excluded.ord, "
            "body = excluded.body"
        )
        _many(tx, sql, [(d.key, d.session_id, d.status, d.order,
                         to_json(d.body).decode("utf-8")) for d in docs])

    def delete_session(self, tx: Any, session_id: str) -> None:
        tx.execute(f"DELETE FROM {self.name} WHERE session_id = %s", (session_id,))

    def of_session(self, tx: Any, session_id: str, status: str | None = None) -> list[Doc]:
        sql = f"SELECT key, session_id, status, ord, body FROM {self.name} WHERE session_id = %s"
        params: tuple[Any, ...] = (session_id,)
        if status is not None:
            sql += " AND status = %s"
            params += (status,)
        return [self._doc(r) for r in tx.execute(sql + " ORDER BY ord", params).fetchall()]

    def keys_of(self, tx: Any, session_id: str) -> list[str]:
        sql = f"SELECT key FROM {self.name} WHERE session_id = %s"
        return [r[0] for r in tx.execute(sql, (session_id,)).fetchall()]


# -- todo ------------------------------------------------------------------------------

_TODO_COLUMNS = "session_id, position, content, status, priority"
_TODO_UPSERT = (
    f"INSERT INTO todo ({_TODO_COLUMNS}) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (session_id, position) DO UPDATE SET content = excluded.content, "
    "status = excluded.status, priority = excluded.priority "
    "WHERE (todo.content, todo.status, todo.priority) IS DISTINCT FROM "
    "(excluded.content, excluded.status, excluded.priority)"
)


class PgTodoTable:
    """Todo rows in the ``todo`` table, cascading from ``execution_state`` (TD-4)."""

    def create(self, tx: Any) -> None:
        tx.execute(
            "CREATE TABLE IF NOT EXISTS todo ("
            "session_id TEXT NOT NULL REFERENCES execution_state(session_id) "
            "ON DELETE CASCADE, position INTEGER NOT NULL, content TEXT NOT NULL, "
            "status TEXT NOT NULL, priority TEXT NOT NULL, PRIMARY KEY (session_id, position))"
        )

    def is_present(self, tx: Any) -> bool:
        return _present(tx, "todo")

    def drop(self, tx: Any) -> None:
        tx.execute("DROP TABLE IF EXISTS todo")

    def replace(
        self, tx: Any, session_id: str, rows: Sequence[TodoRow],
        old: Sequence[TodoRow] | None = None,
    ) -> None:
        """Make ``rows`` (positions 0 … n-1) the session's rows (see the SQLite table)."""
        length = len(rows)
        if old is not None:
            kept = len(old)
            rows = [r for r in rows if r.position >= kept or old[r.position] != r]
        _many(tx, _TODO_UPSERT, list(rows))
        if old is None or len(old) > length:
            tx.execute(
                "DELETE FROM todo WHERE session_id = %s AND position >= %s", (session_id, length)
            )

    def delete_session(self, tx: Any, session_id: str) -> None:
        tx.execute("DELETE FROM todo WHERE session_id = %s", (session_id,))

    def of_session(self, tx: Any, session_id: str) -> list[TodoRow]:
        rows = tx.execute(
            f"SELECT {_TODO_COLUMNS} FROM todo WHERE session_id = %s ORDER BY position",
            (session_id,),
        ).fetchall()
        return list(map(TodoRow._make, rows))


# -- interaction timers ----------------------------------------------------------------

_TIMERS = "interaction_timers"


class PgTimerTable:
    """Rows in the ``interaction_timers`` table beside ``events``."""

    def create(self, tx: Any) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {_TIMERS} (key TEXT PRIMARY KEY, "
            "status TEXT NOT NULL, body TEXT NOT NULL)"
        )
        tx.execute(f"CREATE INDEX IF NOT EXISTS {_TIMERS}_status ON {_TIMERS} (status)")

    def is_present(self, tx: Any) -> bool:
        return _present(tx, _TIMERS)

    def drop(self, tx: Any) -> None:
        tx.execute(f"DROP TABLE IF EXISTS {_TIMERS}")

    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, TimerRow]:
        rows = tx.execute(
            f"SELECT key, status, body FROM {_TIMERS} WHERE key = ANY(%s)", (list(keys),)
        ).fetchall()
        return {r[0]: TimerRow(r[0], r[1], json.loads(r[2])) for r in rows}

    def save(self, tx: Any, rows: Sequence[TimerRow]) -> None:
        _many(
            tx,
            f"INSERT INTO {_TIMERS} (key, status, body) VALUES (%s, %s, %s) "
            "ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body",
            [(r.key, r.status, json.dumps(r.body, sort_keys=True)) for r in rows],
        )

    def delete(self, tx: Any, key: str) -> None:
        tx.execute(f"DELETE FROM {_TIMERS} WHERE key = %s", (key,))

    def with_status(self, tx: Any, status: str) -> list[TimerRow]:
        rows = tx.execute(
            f"SELECT key, status, body FROM {_TIMERS} WHERE status = %s "
            'ORDER BY key COLLATE "C"',
            (status,),
        ).fetchall()
        return [TimerRow(r[0], r[1], json.loads(r[2])) for r in rows]
