"""The view tables: each read model's rows and where they are kept, per backend.

Every projection keeps its rows in one table object with the same small lifecycle
(:class:`Table`: ``create``, ``is_present``, ``drop``), which :class:`TableBacked` hands on to
the store; each row type has a protocol for its reads and writes, a SQLite table and a dict
twin for the in-memory store (:mod:`projections.pg_tables` is the PostgreSQL twin). The rows:
execution-state summaries, keyed JSON documents (tool calls, interactions, turn counters,
tool records), todo rows and interaction-timer rows. The SQLite SQL of the projections is here.

SQLite tables are versioned by the store (``projection_versions``): when a projection's
``version`` changes its table is dropped and rebuilt from the log at start (EL-9).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from itertools import chain
from operator import attrgetter
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from pydantic_core import to_json

from eventlog import PermissionMode
from statemachine.execution import ExecutionState

__all__ = [
    "FIRST_MESSAGE_CHARS",
    "Doc",
    "DocTable",
    "MemoryDocTable",
    "MemorySummaryTable",
    "MemoryTimerTable",
    "MemoryTodoTable",
    "SessionSummary",
    "SqliteDocTable",
    "SqliteSessionDocTable",
    "SqliteSummaryTable",
    "SqliteTimerTable",
    "SqliteTodoTable",
    "SummaryTable",
    "Table",
    "TableBacked",
    "TimerRow",
    "TimerTable",
    "TodoRow",
    "TodoTable",
]


class Table(Protocol):
    """The lifecycle every view table has on every backend; ``tx`` is the store's
    transaction or read handle (a SQLite or psycopg connection, unused by the twins)."""

    def create(self, tx: Any) -> None: ...
    def is_present(self, tx: Any) -> bool: ...
    def drop(self, tx: Any) -> None: ...


T = TypeVar("T", bound=Table)


class TableBacked(Generic[T]):
    """Mixin: ``create``, ``is_present`` and ``drop`` of an inline projection via ``table``."""

    table: T

    def create(self, tx: Any) -> None:
        self.table.create(tx)

    def is_present(self, tx: Any) -> bool:
        return self.table.is_present(tx)

    def drop(self, tx: Any) -> None:
        self.table.drop(tx)


# -- execution_state: the session summaries -------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What one session is now: its execution state and where its log ends."""

    session_id: str
    version: int
    last_position: int
    workspace: str
    host: str
    parent_session_id: str | None
    mode: PermissionMode
    plan_enabled: bool
    goal: str | None
    created_at: str
    updated_at: str
    deleted: bool = False
    todos_seq: int | None = None
    """The seq of the session's last ``TodosWritten`` (``None``: never written, or deleted)."""
    todos_updated_at: str | None = None
    """When that write was recorded."""
    client: str | None = None
    """The host program that created the session, when it said (``claude-code``: CC-2)."""
    external_session_id: str | None = None
    """That program's own id for the session (Claude Code's ``session_id``: CC-2)."""
    first_message: str | None = None
    """The start of the session's first real user message (at most
    :data:`FIRST_MESSAGE_CHARS` characters), which names the session in lists (issue 23.6)."""
    waiting: int = 0
    """How many interactions wait for the user (requested, not resolved; 0 once deleted): a
    session list reads the timers of these sessions only (issue 23.4)."""
    plan_by: str | None = None
    """While Plan is on: the path that turned it on (a ``SessionModeChanged``'s ``via``;
    ``created`` when the session began in Plan, ``claude-code`` when Claude Code created it
    so): Plan a host turned on follows the host's modes, Plan turned on here stays on whatever
    mode the host reports until it is turned off here (issue 39)."""

    @property
    def execution(self) -> ExecutionState:
        return ExecutionState(self.mode, self.plan_enabled, self.goal)

    @property
    def display_mode(self) -> str:
        return self.execution.display_mode


class SummaryTable(Table, Protocol):
    """Where summaries live for one backend; ``tx`` is the store's transaction handle."""

    def load(self, tx: Any, session_ids: Sequence[str]) -> dict[str, SessionSummary]: ...
    def save(self, tx: Any, summaries: Sequence[SessionSummary]) -> None: ...
    def delete(self, tx: Any, session_id: str) -> None: ...
    def get(self, tx: Any, session_id: str) -> SessionSummary | None: ...
    def newest_first(self, tx: Any) -> list[SessionSummary]: ...
    def page(self, tx: Any, query: SummaryPage) -> list[SessionSummary]: ...


@dataclass(frozen=True, slots=True)
class SummaryPage:
    """Which summaries a page of the session list holds: newest first (by the global position
    of each session's last event), those with ``last_position`` below ``before`` when given,
    at most ``limit``; only sessions something waits in when ``waiting``; deleted ones only
    when ``deleted``."""

    limit: int
    before: int | None = None
    waiting: bool = False
    deleted: bool = False

    def where(self, mark: str) -> tuple[str, tuple[Any, ...]]:
        """The SQL condition and its parameters, with ``mark`` the driver's placeholder."""
        conditions: list[str] = ["1 = 1"]
        params: list[Any] = []
        if not self.deleted:
            conditions.append(f"deleted = {mark}")
            params.append(False)
        if self.waiting:
            conditions.append("waiting > 0")
        if self.before is not None:
            conditions.append(f"last_position < {mark}")
            params.append(self.before)
        return " AND ".join(conditions), tuple(params)

    def holds(self, summary: SessionSummary) -> bool:
        return ((self.deleted or not summary.deleted) and (not self.waiting or summary.waiting > 0)
                and (self.before is None or summary.last_position < self.before))


FIRST_MESSAGE_CHARS = 200
"""How much of the first user message a summary keeps (a list shows less)."""

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
            "deleted INTEGER NOT NULL, todos_seq INTEGER, todos_updated_at TEXT, client TEXT, "
            "external_session_id TEXT, first_message TEXT, waiting INTEGER NOT NULL, plan_by TEXT)"
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
        # delete would cascade to the session's todo rows (TD-4).
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

    def page(self, tx: sqlite3.Connection, query: SummaryPage) -> list[SessionSummary]:
        where, params = query.where("?")
        sql = f"{_SELECT} WHERE {where} ORDER BY last_position DESC LIMIT ?"
        return [_summary(r) for r in tx.execute(sql, (*params, query.limit))]


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

    def page(self, tx: Any, query: SummaryPage) -> list[SessionSummary]:
        return [s for s in self.newest_first(tx) if query.holds(s)][: query.limit]


# -- documents: tool calls, interactions, turn counters, tool records -----------------
# Each row is a document (a dict) under a key, with its session, a status and an ordering
# number; views ask for one document, or a session's documents of a status in order.

@dataclass(frozen=True, slots=True)
class Doc:
    """One stored document with its index columns."""

    key: str
    session_id: str
    status: str
    order: int
    body: dict[str, Any]


class DocTable(Table, Protocol):
    """Where documents live for one backend; ``tx`` is the store's transaction handle."""

    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, Doc]: ...
    def save(self, tx: Any, docs: Sequence[Doc]) -> None: ...
    def delete_session(self, tx: Any, session_id: str) -> None: ...
    def of_session(self, tx: Any, session_id: str, status: str | None = None) -> list[Doc]: ...
    def keys_of(self, tx: Any, session_id: str) -> list[str]: ...


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

    def keys_of(self, tx: sqlite3.Connection, session_id: str) -> list[str]:
        """The keys of the session's documents (an audit compares the documents by key)."""
        sql = f"SELECT key FROM {self.name} WHERE session_id = ?"
        return [r[0] for r in tx.execute(sql, (session_id,))]


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

    def keys_of(self, tx: sqlite3.Connection, session_id: str) -> list[str]:
        sql = f"SELECT key FROM {self.name} WHERE key >= ? AND key < ? AND session_id = ?"
        return [r[0] for r in tx.execute(sql, self._range(session_id))]


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

    def keys_of(self, tx: Any, session_id: str) -> list[str]:
        return [k for k, d in self.rows.items() if d.session_id == session_id]


# -- todo (TD-4) ----------------------------------------------------------------------
# Table ``todo`` keyed by ``(session_id, position)``, rows in list order (position 0, 1, 2 …),
# each with its ``content``, ``status`` and ``priority``. When and by which event the list was
# written is the session summary's (``todos_seq``, ``todos_updated_at``, D70), so a row
# changes only when its item does. The session column references the execution-state summary
# row with ``ON DELETE CASCADE``, so a session's todos go with its summary row — on purge, or
# when the summary table is dropped for a rebuild (the todo projection is then rebuilt too,
# see :mod:`projections.tools`). The store's write connection has ``PRAGMA foreign_keys =
# ON``.

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


class TodoTable(Table, Protocol):
    """Where todo rows live for one backend; ``tx`` is the store's transaction handle."""

    def replace(
        self, tx: Any, session_id: str, rows: Sequence[TodoRow],
        old: Sequence[TodoRow] | None = None,
    ) -> None: ...
    def delete_session(self, tx: Any, session_id: str) -> None: ...
    def of_session(self, tx: Any, session_id: str) -> list[TodoRow]: ...


_TODO_COLUMNS = "session_id, position, content, status, priority"
_ROWS_PER_STATEMENT = 64
"""Rows per multi-row upsert: 5 x 64 = 320 variables, and few distinct statement texts."""


@lru_cache(maxsize=_ROWS_PER_STATEMENT)
def _todo_upsert_sql(count: int) -> str:
    marks = ", ".join(["(?, ?, ?, ?, ?)"] * count)
    # A row whose item is unchanged is left as it is (its page is not written for it).
    return (
        f"INSERT INTO todo ({_TODO_COLUMNS}) VALUES {marks} "
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
            tx.execute(_todo_upsert_sql(len(part)), list(chain.from_iterable(part)))
        if old is None or len(old) > length:
            tx.execute(
                "DELETE FROM todo WHERE session_id = ? AND position >= ?", (session_id, length)
            )

    def delete_session(self, tx: sqlite3.Connection, session_id: str) -> None:
        tx.execute("DELETE FROM todo WHERE session_id = ?", (session_id,))

    def of_session(self, tx: sqlite3.Connection, session_id: str) -> list[TodoRow]:
        rows = tx.execute(
            f"SELECT {_TODO_COLUMNS} FROM todo WHERE session_id = ? ORDER BY position",
            (session_id,),
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


# -- interaction timers (HO-4) --------------------------------------------------------
# Each row is a JSON body under a key (a session id, or the reserved settings stream) with a
# status the scheduler asks for: ``watch`` rows hold a question whose timer may still move, so
# "which sessions may have something due" is one indexed read however many sessions are idle.

_TIMERS = "interaction_timers"


@dataclass(frozen=True, slots=True)
class TimerRow:
    """One stored row: a session's queue and timers, or the setting's history."""

    key: str
    status: str
    body: dict[str, Any]


class TimerTable(Table, Protocol):
    """The rows for one backend; ``tx`` is the store's transaction or read handle."""

    def load(self, tx: Any, keys: Sequence[str]) -> dict[str, TimerRow]: ...
    def save(self, tx: Any, rows: Sequence[TimerRow]) -> None: ...
    def delete(self, tx: Any, key: str) -> None: ...
    def with_status(self, tx: Any, status: str) -> list[TimerRow]: ...


def _timer_row(raw: tuple[Any, ...]) -> TimerRow:
    return TimerRow(raw[0], raw[1], json.loads(raw[2]))


class SqliteTimerTable:
    """Rows in the ``interaction_timers`` table beside ``events``."""

    def create(self, tx: sqlite3.Connection) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {_TIMERS} (key TEXT PRIMARY KEY, "
            "status TEXT NOT NULL, body TEXT NOT NULL)"
        )
        tx.execute(f"CREATE INDEX IF NOT EXISTS {_TIMERS}_status ON {_TIMERS} (status)")

    def is_present(self, tx: sqlite3.Connection) -> bool:
        found = tx.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_TIMERS,)
        ).fetchone()
        return found is not None

    def drop(self, tx: sqlite3.Connection) -> None:
        tx.execute(f"DROP TABLE IF EXISTS {_TIMERS}")

    def load(self, tx: sqlite3.Connection, keys: Sequence[str]) -> dict[str, TimerRow]:
        found: dict[str, TimerRow] = {}
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            marks = ",".join("?" * len(part))
            for raw in tx.execute(
                f"SELECT key, status, body FROM {_TIMERS} WHERE key IN ({marks})", part
            ):
                found[raw[0]] = _timer_row(raw)
        return found

    def save(self, tx: sqlite3.Connection, rows: Sequence[TimerRow]) -> None:
        tx.executemany(
            f"INSERT INTO {_TIMERS} (key, status, body) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET status = excluded.status, body = excluded.body",
            [(r.key, r.status, json.dumps(r.body, sort_keys=True)) for r in rows],
        )

    def delete(self, tx: sqlite3.Connection, key: str) -> None:
        tx.execute(f"DELETE FROM {_TIMERS} WHERE key = ?", (key,))

    def with_status(self, tx: sqlite3.Connection, status: str) -> list[TimerRow]:
        return [
            _timer_row(raw) for raw in tx.execute(
                f"SELECT key, status, body FROM {_TIMERS} WHERE status = ? ORDER BY key",
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
