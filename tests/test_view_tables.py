"""One conformance suite over the view tables of every backend (issue 20, SPEC EL-8/EL-9).

Each table kind of :mod:`projections.tables` — summaries, documents, todo rows, interaction
timers — is driven through the same operations on the in-memory twin, SQLite and PostgreSQL
(:mod:`projections.pg_tables`), and every backend must give the same answers. ``tx`` is what
the store hands a table: nothing for the twins, the store's kind of ``sqlite3`` connection
(autocommit, WAL, ``foreign_keys`` on) over a file under ``tmp_path``, and a psycopg autocommit
connection whose ``search_path`` is a schema of its own in the module's database.

Where the backends differ by design, the test says so: the twins are always present (there is
nothing to create, ``drop`` empties them) and the twin todo table has no cascade from the
summaries (its projection deletes a session's rows itself, and is dropped with the others).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pg_support
import pytest

from projections.pg_tables import PgDocTable, PgSummaryTable, PgTimerTable, PgTodoTable
from projections.tables import (
    Doc,
    DocTable,
    MemoryDocTable,
    MemorySummaryTable,
    MemoryTimerTable,
    MemoryTodoTable,
    SessionSummary,
    SqliteDocTable,
    SqliteSessionDocTable,
    SqliteSummaryTable,
    SqliteTimerTable,
    SqliteTodoTable,
    SummaryTable,
    Table,
    TimerRow,
    TimerTable,
    TodoRow,
    TodoTable,
)

BACKENDS = ["memory", "sqlite", pg_support.PG_BACKEND]
DOC_KINDS = ["memory", "sqlite", "sqlite_session", pg_support.PG_BACKEND]
"""The document tables: ``sqlite_session`` is the call view's session-keyed SQLite table."""

UNICODE = "zoë ✓ 项目 🚀 \u00a0tab\tquote' \"dq\" back\\slash"


@dataclass
class Views:
    """One backend's tables over one handle."""

    backend: str
    tx: Any
    summaries: SummaryTable
    todos: TodoTable
    timers: TimerTable
    docs: Callable[[str], DocTable]

    @property
    def twin(self) -> bool:
        return self.backend == "memory"


@contextmanager
def _handle(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The ``tx`` the store would pass: none, a SQLite connection, or a psycopg connection."""
    if backend == "memory":
        yield None
    elif backend == "sqlite":
        # As the SQLite store opens its connections (eventlog.sqlite): autocommit, WAL, FKs
        # on; not synced, as each statement here commits on its own.
        conn = sqlite3.connect(tmp_path / "views.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA foreign_keys = ON")
        with closing(conn):
            yield conn
    else:
        import psycopg

        url = str(request.getfixturevalue("pg_database"))
        schema = f"views_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(f'SET search_path TO "{schema}"')
            try:
                yield conn
            finally:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _views(backend: str, tx: Any) -> Views:
    if backend == "memory":
        return Views(backend, tx, MemorySummaryTable(), MemoryTodoTable(), MemoryTimerTable(),
                     MemoryDocTable)
    if backend == "sqlite":
        return Views(backend, tx, SqliteSummaryTable(), SqliteTodoTable(), SqliteTimerTable(),
                     SqliteDocTable)
    return Views(backend, tx, PgSummaryTable(), PgTodoTable(), PgTimerTable(), PgDocTable)


@pytest.fixture(params=BACKENDS)
def views(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Views]:
    """The summary, todo and timer tables of one backend, not yet created."""
    backend = str(request.param)
    with _handle(backend, request, tmp_path) as tx:
        yield _views(backend, tx)


@pytest.fixture(params=DOC_KINDS)
def docs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[DocTable, Any]]:
    """One document table (``tool_calls``) of one backend, created, and its handle."""
    kind = str(request.param)
    with _handle("sqlite" if kind == "sqlite_session" else kind, request, tmp_path) as tx:
        table: DocTable = (
            SqliteSessionDocTable("tool_calls") if kind == "sqlite_session"
            else _views(kind, tx).docs("tool_calls")
        )
        table.create(tx)
        yield table, tx


def summary(session_id: str, last_position: int, **changes: Any) -> SessionSummary:
    base = SessionSummary(
        session_id=session_id, version=1, last_position=last_position, workspace="/w",
        host="claude-code", parent_session_id=None, mode="build", plan_enabled=False,
        goal=None, created_at="2025-01-01T00:00:00Z", updated_at="2025-01-01T00:00:01Z",
    )
    return replace(base, **changes)


def _lifecycle(table: Table, tx: Any, twin: bool) -> None:
    """create → present (twice is fine), drop → gone (a twin stays present, emptied)."""
    assert table.is_present(tx) is twin
    table.create(tx)
    table.create(tx)
    assert table.is_present(tx)
    table.drop(tx)
    assert table.is_present(tx) is twin
    table.drop(tx)
    table.create(tx)
    assert table.is_present(tx)


# -- the lifecycle of every table ------------------------------------------------------


def test_every_table_has_the_table_lifecycle(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (the Table protocol); EL-9 rebuild
    tables: list[Table] = [views.summaries, views.todos, views.timers,
                           views.docs("interactions")]
    for table in tables:
        _lifecycle(table, views.tx, views.twin)


def test_session_doc_table_has_the_table_lifecycle(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # issue 20: one conformance suite over the view tables (SqliteSessionDocTable too)
    with _handle("sqlite", request, tmp_path) as tx:
        _lifecycle(SqliteSessionDocTable("tool_calls"), tx, twin=False)


def test_drop_empties_the_table(views: Views) -> None:
    # issue 20: one conformance suite over the view tables; EL-9: a dropped table is rebuilt
    # from empty, on every backend
    tx = views.tx
    views.summaries.create(tx)
    views.timers.create(tx)
    views.summaries.save(tx, [summary("s1", 1)])
    views.timers.save(tx, [TimerRow("s1", "watch", {})])
    for table in (views.summaries, views.timers):
        table.drop(tx)
        table.create(tx)
    assert views.summaries.newest_first(tx) == []
    assert views.timers.load(tx, ["s1"]) == {}


# -- summaries (execution_state) --------------------------------------------------------


def test_summaries_save_get_load_round_trip(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (SummaryTable round-trips)
    tx, table = views.tx, views.summaries
    table.create(tx)
    a = summary("s1", 3, workspace=f"/home/{UNICODE}", goal=UNICODE, host="codex",
                mode="auto", plan_enabled=True, parent_session_id="s0", todos_seq=7,
                todos_updated_at="2025-01-02T00:00:00Z")
    b = summary("s2", 5)
    table.save(tx, [])
    table.save(tx, [a, b])
    assert table.get(tx, "s1") == a and table.get(tx, "s2") == b
    assert table.get(tx, "missing") is None
    assert table.load(tx, ["s2", "missing", "s1"]) == {"s1": a, "s2": b}
    assert table.load(tx, []) == {}
    loaded = table.get(tx, "s1")
    assert loaded is not None
    assert type(loaded.plan_enabled) is bool and type(loaded.deleted) is bool
    assert loaded.execution == a.execution


def test_summaries_update_an_existing_session(views: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4: an upsert keeps the row
    tx, table = views.tx, views.summaries
    table.create(tx)
    table.save(tx, [summary("s1", 1), summary("s2", 2)])
    changed = summary("s1", 9, version=4, mode="edit", plan_enabled=True, goal="g",
                      deleted=True, todos_seq=8, todos_updated_at="t",
                      updated_at="2025-02-01T00:00:00Z")
    table.save(tx, [changed])
    assert table.get(tx, "s1") == changed
    assert table.get(tx, "s2") == summary("s2", 2)
    cleared = replace(changed, goal=None, todos_seq=None, todos_updated_at=None, deleted=False)
    table.save(tx, [cleared])
    assert table.load(tx, ["s1"]) == {"s1": cleared}
    assert len(table.newest_first(tx)) == 2


def test_summaries_newest_first(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (sessions listed newest first)
    tx, table = views.tx, views.summaries
    table.create(tx)
    assert table.newest_first(tx) == []
    table.save(tx, [summary("b", 20), summary("a", 10), summary("c", 30)])
    table.save(tx, [summary("d", 5)])
    assert [s.session_id for s in table.newest_first(tx)] == ["c", "b", "a", "d"]
    table.save(tx, [summary("a", 40)])
    assert [s.session_id for s in table.newest_first(tx)] == ["a", "c", "b", "d"]


def test_summaries_delete_removes_only_that_session(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (purge removes one summary)
    tx, table = views.tx, views.summaries
    table.create(tx)
    table.save(tx, [summary("s1", 1), summary("s2", 2)])
    table.delete(tx, "s1")
    table.delete(tx, "missing")
    assert table.get(tx, "s1") is None
    assert table.newest_first(tx) == [summary("s2", 2)]


def test_summaries_load_many(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (loads past SQLite's 500-id chunks)
    tx, table = views.tx, views.summaries
    table.create(tx)
    rows = [summary(f"s{i:04d}", i) for i in range(1100)]
    table.save(tx, rows)
    wanted = [r.session_id for r in rows[::-1]] + ["missing"]
    assert table.load(tx, wanted) == {r.session_id: r for r in rows}


# -- documents --------------------------------------------------------------------------

# Keys begin with "<session>/" (the session-keyed table's rule); s1-b and s10 share a prefix.
SESSIONS = ("s1", "s1-b", "s10", "s2")


def doc(session_id: str, name: str, status: str, order: int, **body: Any) -> Doc:
    return Doc(f"{session_id}/{name}", session_id, status, order, body or {"name": name})


def test_docs_save_load_round_trip(docs: tuple[DocTable, Any]) -> None:
    # issue 20: one conformance suite over the view tables (DocTable round-trips)
    table, tx = docs
    body = {"text": UNICODE, "n": 2**53, "f": 1.5, "ok": True, "none": None,
            "list": [1, "二", {"deep": [UNICODE]}], UNICODE: "key"}
    a = doc("s1", "c1", "pending", 1, **body)
    b = doc("s2", "c2", "done", 2)
    table.save(tx, [])
    table.save(tx, [a, b])
    assert table.load(tx, [b.key, "s1/missing", a.key]) == {a.key: a, b.key: b}
    assert table.load(tx, []) == {}
    assert table.load(tx, ["s3/none"]) == {}


def test_docs_update_an_existing_key(docs: tuple[DocTable, Any]) -> None:
    # issue 20: one conformance suite over the view tables (an upsert of a document)
    table, tx = docs
    table.save(tx, [doc("s1", "c1", "pending", 1), doc("s1", "c2", "pending", 2)])
    moved = doc("s1", "c1", "done", 3, result=UNICODE)
    table.save(tx, [moved])
    assert table.load(tx, [moved.key]) == {moved.key: moved}
    assert [d.key for d in table.of_session(tx, "s1")] == ["s1/c2", "s1/c1"]
    assert table.of_session(tx, "s1", "pending") == [doc("s1", "c2", "pending", 2)]
    assert table.of_session(tx, "s1", "done") == [moved]


def test_docs_of_session_in_order_with_and_without_status(docs: tuple[DocTable, Any]) -> None:
    # issue 20: one conformance suite over the view tables (a session's documents by status)
    table, tx = docs
    rows = [doc(s, f"c{n}", "done" if n % 2 else "pending", order)
            for s in SESSIONS for n, order in enumerate((30, 10, 20, 40))]
    table.save(tx, rows[::-1])
    for s in SESSIONS:
        assert [d.key for d in table.of_session(tx, s)] == [
            f"{s}/c1", f"{s}/c2", f"{s}/c0", f"{s}/c3"]
        assert [d.key for d in table.of_session(tx, s, "done")] == [f"{s}/c1", f"{s}/c3"]
        assert [d.key for d in table.of_session(tx, s, "pending")] == [f"{s}/c2", f"{s}/c0"]
        assert table.of_session(tx, s, "other") == []
    assert table.of_session(tx, "s3") == []
    assert table.of_session(tx, "s") == []


def test_docs_delete_session_removes_only_that_session(docs: tuple[DocTable, Any]) -> None:
    # issue 20: one conformance suite over the view tables (a purge removes one session's)
    table, tx = docs
    rows = [doc(s, f"c{n}", "pending", n) for s in SESSIONS for n in range(3)]
    table.save(tx, rows)
    table.delete_session(tx, "s1")
    table.delete_session(tx, "missing")
    assert table.of_session(tx, "s1") == []
    assert table.load(tx, [r.key for r in rows]) == {r.key: r for r in rows
                                                      if r.session_id != "s1"}
    for s in ("s1-b", "s10", "s2"):
        assert table.of_session(tx, s) == [r for r in rows if r.session_id == s]


def test_docs_load_many(docs: tuple[DocTable, Any]) -> None:
    # issue 20: one conformance suite over the view tables (loads past SQLite's 500-key chunks)
    table, tx = docs
    rows = [doc("s1", f"c{n:04d}", "pending", n) for n in range(1100)]
    table.save(tx, rows)
    assert table.load(tx, [r.key for r in rows]) == {r.key: r for r in rows}
    assert len(table.of_session(tx, "s1")) == 1100


# -- todo rows (SPEC TD-4) --------------------------------------------------------------


def todo(session_id: str, *contents: str, status: str = "pending") -> list[TodoRow]:
    return [TodoRow(session_id, n, c, status, "medium") for n, c in enumerate(contents)]


@pytest.fixture
def todos(views: Views) -> Views:
    """Created summary and todo tables, with summaries for s1 and s2 (the rows' parents)."""
    views.summaries.create(views.tx)
    views.todos.create(views.tx)
    views.summaries.save(views.tx, [summary("s1", 1), summary("s2", 2)])
    return views


def test_td4_todo_replace_keeps_list_order(todos: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4: rows in list order
    tx, table = todos.tx, todos.todos
    assert table.of_session(tx, "s1") == []
    first = todo("s1", "b", UNICODE, "a")
    table.replace(tx, "s1", first)
    table.replace(tx, "s2", todo("s2", "only", status="done"))
    assert table.of_session(tx, "s1") == first
    assert table.of_session(tx, "s2") == todo("s2", "only", status="done")


def test_td4_a_second_replace_replaces(todos: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4: a write replaces the list
    tx, table = todos.tx, todos.todos
    table.replace(tx, "s2", todo("s2", "other"))
    table.replace(tx, "s1", todo("s1", "a", "b", "c", "d"))
    shorter = [*todo("s1", "a"), TodoRow("s1", 1, "B", "in_progress", "high")]
    table.replace(tx, "s1", shorter)
    assert table.of_session(tx, "s1") == shorter
    longer = todo("s1", "x", "y", "z", "w", "v")
    table.replace(tx, "s1", longer)
    assert table.of_session(tx, "s1") == longer
    table.replace(tx, "s1", [])
    assert table.of_session(tx, "s1") == []
    assert table.of_session(tx, "s2") == todo("s2", "other")


def test_td4_replace_with_the_old_rows_gives_the_same_rows(todos: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4: ``old`` only narrows writes
    tx, table = todos.tx, todos.todos
    old = todo("s1", "a", "b", "c")
    table.replace(tx, "s1", old)
    for new in (todo("s1", "a", "B", "c", "d"), todo("s1", "a"), todo("s1", "a"), []):
        table.replace(tx, "s1", new, old=table.of_session(tx, "s1"))
        assert table.of_session(tx, "s1") == new


def test_td4_todo_delete_session_removes_only_that_session(todos: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4: emptied by a delete
    tx, table = todos.tx, todos.todos
    table.replace(tx, "s1", todo("s1", "a", "b"))
    table.replace(tx, "s2", todo("s2", "c"))
    table.delete_session(tx, "s1")
    table.delete_session(tx, "missing")
    assert table.of_session(tx, "s1") == []
    assert table.of_session(tx, "s2") == todo("s2", "c")


def test_td4_summary_delete_cascades_to_todo_rows(todos: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4: gone on purge (the cascade)
    if todos.twin:
        pytest.skip("the twin has no cascade: TodoProjection.forget deletes the rows itself")
    tx = todos.tx
    todos.todos.replace(tx, "s1", todo("s1", "a"))
    todos.todos.replace(tx, "s2", todo("s2", "b"))
    todos.summaries.delete(tx, "s1")
    assert todos.todos.of_session(tx, "s1") == []
    assert todos.todos.of_session(tx, "s2") == todo("s2", "b")


def test_td4_todo_rows_go_with_a_summary_rebuild(todos: Views) -> None:
    # issue 20: one conformance suite over the view tables; TD-4/EL-9: dropping the summaries
    # for a rebuild empties the todo rows (SQLite: the cascade; PostgreSQL: drops the table)
    if todos.twin:
        pytest.skip("the twin's todo rows go with its own drop (the memory store's rebuild "
                    "drops every projection), not with the summaries'")
    tx = todos.tx
    todos.todos.replace(tx, "s1", todo("s1", "a"))
    todos.summaries.drop(tx)
    todos.summaries.create(tx)
    todos.todos.create(tx)
    assert todos.todos.of_session(tx, "s1") == []


# -- interaction timers (SPEC HO-4) -----------------------------------------------------

# Keys whose order differs between collations: code points (= UTF-8 bytes) put "B" < "Z" <
# "_x" < "a" < "~settings" < "é"; a locale-aware order would not.
TIMER_KEYS = ("a", "B", "é", "~settings", "Z", "_x")


def test_ho4_timers_save_load_round_trip(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (TimerTable round-trips)
    tx, table = views.tx, views.timers
    table.create(tx)
    a = TimerRow("s1", "watch", {"queue": [UNICODE], "due": 1.25, "n": None, "z": {"a": 1}})
    b = TimerRow("~settings", "idle", {"history": []})
    table.save(tx, [])
    table.save(tx, [a, b])
    assert table.load(tx, ["~settings", "missing", "s1"]) == {"s1": a, "~settings": b}
    assert table.load(tx, []) == {}


def test_ho4_timers_update_moves_a_row_between_statuses(views: Views) -> None:
    # issue 20: one conformance suite over the view tables; HO-4: "watch" rows may be due
    tx, table = views.tx, views.timers
    table.create(tx)
    table.save(tx, [TimerRow("s1", "watch", {"v": 1}), TimerRow("s2", "watch", {"v": 2})])
    table.save(tx, [TimerRow("s1", "idle", {"v": 3})])
    assert table.with_status(tx, "watch") == [TimerRow("s2", "watch", {"v": 2})]
    assert table.with_status(tx, "idle") == [TimerRow("s1", "idle", {"v": 3})]
    assert table.load(tx, ["s1"]) == {"s1": TimerRow("s1", "idle", {"v": 3})}


def test_ho4_timers_with_status_in_key_order(views: Views) -> None:
    # issue 20: one conformance suite over the view tables; HO-4: one indexed read, in order
    tx, table = views.tx, views.timers
    table.create(tx)
    assert table.with_status(tx, "watch") == []
    table.save(tx, [TimerRow(k, "watch", {"k": k}) for k in TIMER_KEYS])
    table.save(tx, [TimerRow(f"{k}-idle", "idle", {}) for k in TIMER_KEYS])
    assert [r.key for r in table.with_status(tx, "watch")] == sorted(TIMER_KEYS)
    assert [r.key for r in table.with_status(tx, "watch")] == ["B", "Z", "_x", "a",
                                                                 "~settings", "é"]
    assert len(table.with_status(tx, "idle")) == len(TIMER_KEYS)
    assert table.with_status(tx, "other") == []


def test_ho4_timers_delete_removes_only_that_key(views: Views) -> None:
    # issue 20: one conformance suite over the view tables (a session's timers forgotten)
    tx, table = views.tx, views.timers
    table.create(tx)
    table.save(tx, [TimerRow("s1", "watch", {}), TimerRow("s10", "watch", {})])
    table.delete(tx, "s1")
    table.delete(tx, "missing")
    assert table.load(tx, ["s1", "s10"]) == {"s10": TimerRow("s10", "watch", {})}
    assert table.with_status(tx, "watch") == [TimerRow("s10", "watch", {})]
