"""The ``todo`` table behind TodoWrite: one batch per call, rows, cascade, rebuilds (SPEC TD-4).

Rows in list order keyed by (session, position) with a cascading foreign key to the session's
summary row; written in the append's own transaction (a failure after them undoes them); the
session's ``updated_at`` touched; kept by the summary's upsert; emptied by a delete; gone on
purge through the cascade; rebuilt whenever the summary projection is rebuilt (its version
changed, or its table is missing); compared by ``audit`` with a fresh fold.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from todo_support import as_items, events, item, reopen, stored, write

from eventlog import NewEvent, RecordedEvent, TodoItemData, TodosWritten, open_store
from projections import ExecutionStateProjection, compare_session, open_projected_store
from projections.tables import SqliteSummaryTable, SqliteTodoTable
from projections.tools import TodoProjection
from sessionledger import SessionService
from sessionledger.errors import SessionDeleted, SessionNotFound

pytest_plugins = ["todo_fixtures"]


# -- TD-4: one batch, the todo table ---------------------------------------------------------


def test_td4_one_todo_write_is_one_batch_one_append(
    service: SessionService, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = service.store
    appends: list[list[str]] = []
    real_append = store.append

    def counting(session_id: str, batch: Sequence[Any], **options: Any) -> Any:
        appends.append([e.event.type for e in batch])
        return real_append(session_id, batch, **options)

    monkeypatch.setattr(store, "append", counting)
    commits: list[list[str]] = []
    unsubscribe = store.subscribe(lambda committed: commits.append([e.type for e in committed]))
    try:
        write(service, session, [item("a"), item("b")])
    finally:
        unsubscribe()
    expected = ["ToolCallRequested", "PermissionDecided", "TodosWritten", "ToolCallCompleted"]
    assert appends == [expected] and commits == [expected]
    written = [e for e in events(service, session) if e.type == "TodosWritten"]
    assert len(written) == 1 and written[0].actor == "model"
    assert written[0].causation_id is not None


def test_td4_rows_in_list_order_keyed_by_session_and_position(
    service: SessionService, session: str, db_path: Path
) -> None:
    todos = [item(f"step {n}", "pending", ("high", "medium", "low")[n % 3]) for n in range(7)]
    write(service, session, todos)
    other = service.create_session()["sessionId"]
    write(service, other, [item("elsewhere")])
    with closing(sqlite3.connect(db_path)) as conn:
        columns = [(r[1], r[5]) for r in conn.execute("PRAGMA table_info(todo)")]
        (fk,) = conn.execute("PRAGMA foreign_key_list(todo)").fetchall()
        rows = conn.execute(
            "SELECT position, content, status, priority FROM todo WHERE session_id = ? "
            "ORDER BY position", (session,),
        ).fetchall()
    assert columns == [("session_id", 1), ("position", 2), ("content", 0), ("status", 0),
                       ("priority", 0)]
    assert (fk[2], fk[3], fk[4], fk[6]) == ("execution_state", "session_id", "session_id",
                                            "CASCADE")
    assert rows == [(n, t["content"], t["status"], t["priority"]) for n, t in enumerate(todos)]


def test_td4_a_write_touches_the_sessions_updated_at(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    write(any_service, sid, [item("a"), item("b")])
    (written,) = [e for e in events(any_service, sid) if e.type == "TodosWritten"]
    summary = any_service.summary(sid)
    assert summary.todos_seq == written.seq and summary.todos_updated_at == written.recorded_at
    assert any_service.todos.current(sid).updated_at == written.recorded_at
    assert summary.updated_at == written.recorded_at
    assert summary.version == any_service.store.version(sid)


def test_td4_other_events_keep_the_rows(any_service: SessionService) -> None:
    """The summary is upserted, never replaced: a replace would cascade to the todo rows."""
    sid = any_service.create_session()["sessionId"]
    todos = [item("a", "in_progress"), item("b")]
    write(any_service, sid, todos)
    any_service.set_mode(sid, "plan")
    any_service.cycle_mode(sid)
    any_service.tools.call(sid, "TodoRead", {})
    assert as_items(stored(any_service, sid)) == todos
    assert any_service.document(sid)["todos"] == todos
    assert compare_session(any_service.store, any_service.projections, sid) == []


def test_td4_a_deleted_session_has_no_todos(any_service: SessionService) -> None:
    sid = any_service.create_session()["sessionId"]
    keep = any_service.create_session()["sessionId"]
    write(any_service, sid, [item("a")])
    write(any_service, keep, [item("b")])
    any_service.delete_session(sid)
    assert stored(any_service, sid) == []
    assert as_items(stored(any_service, keep)) == [item("b")]
    with pytest.raises(SessionDeleted):
        any_service.tools.call(sid, "TodoWrite", {"todos": [item("late")]})
    with pytest.raises(SessionDeleted):
        any_service.todos.current(sid)
    assert compare_session(any_service.store, any_service.projections, sid) == []
    any_service.rebuild_projections()
    assert stored(any_service, sid) == [] and len(stored(any_service, keep)) == 1


def test_td4_purge_removes_the_rows(any_service: SessionService) -> None:
    sid = any_service.create_session()["sessionId"]
    write(any_service, sid, [item("a")])
    any_service.delete_session(sid)
    any_service.purge_session(sid)
    assert stored(any_service, sid) == []
    with pytest.raises(SessionNotFound):
        any_service.todos.current(sid)


def test_td4_rows_cascade_with_the_summary_row(
    service: SessionService, session: str, db_path: Path
) -> None:
    write(service, session, [item("a"), item("b")])
    other = service.create_session()["sessionId"]
    write(service, other, [item("c")])
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM execution_state WHERE session_id = ?", (session,))
    with closing(sqlite3.connect(db_path)) as conn:
        left = conn.execute("SELECT session_id, count(*) FROM todo GROUP BY session_id")
        assert left.fetchall() == [(other, 1)]


def test_td4_purge_relies_on_the_cascade(
    service: SessionService, session: str, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the todo projection's own delete switched off, the summary row's delete still
    takes the session's rows with it on purge."""
    write(service, session, [item("a"), item("b")])
    service.delete_session(session)  # empties the rows; put one back behind its back
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("INSERT INTO todo VALUES (?, 0, 'stale', 'pending', 'low')",
                     (session,))
    monkeypatch.setattr(service.projections.todos, "forget", lambda tx, sid: None)
    service.purge_session(session)
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT count(*) FROM todo").fetchone() == (0,)


class ExplodingProjection:
    """An inline projection after the todo one that fails when armed (a disk error)."""

    name = "exploding"
    version = 1

    def __init__(self) -> None:
        self.armed = False

    def create(self, tx: Any) -> None:
        return None

    def is_present(self, tx: Any) -> bool:
        return True

    def drop(self, tx: Any) -> None:
        return None

    def forget(self, tx: Any, session_id: str) -> None:
        return None

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        if self.armed:
            raise OSError(5, "Input/output error")


def test_td4_a_failed_append_leaves_the_rows_untouched(db_path: Path, root: Path) -> None:
    """The rows are replaced in the append's transaction: a later failure undoes them."""
    url = f"sqlite:///{db_path}"
    first, projections = open_projected_store(url)
    first.close()
    exploding = ExplodingProjection()
    store = open_store(url, projections=(*projections.all(), exploding))
    service = SessionService(store, projections, workspace_root=root)
    try:
        sid = service.create_session()["sessionId"]
        write(service, sid, [item("kept")])
        version = store.version(sid)
        exploding.armed = True
        with pytest.raises(OSError):
            service.tools.call(sid, "TodoWrite", {"todos": [item("lost")]})
        assert as_items(stored(service, sid)) == [item("kept")]
        assert store.version(sid) == version
        exploding.armed = False
        write(service, sid, [item("next")])
        assert as_items(stored(service, sid)) == [item("next")]
    finally:
        service.close()


def test_td4_summary_version_change_rebuilds_the_todo_rows_too(
    db_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = reopen(db_path, root)
    try:
        sid = service.create_session()["sessionId"]
        todos = [item("a", "completed"), item("b", "in_progress"), item("c")]
        write(service, sid, todos)
        before = stored(service, sid)
    finally:
        service.close()
    monkeypatch.setattr(ExecutionStateProjection, "version", ExecutionStateProjection.version + 1)
    service = reopen(db_path, root)
    try:
        assert stored(service, sid) == before
        assert compare_session(service.store, service.projections, sid) == []
        with closing(sqlite3.connect(db_path)) as conn:
            versions = dict(conn.execute("SELECT name, version FROM projection_versions"))
        assert versions["execution_state"] == ExecutionStateProjection.version
        assert versions["todo"] == service.projections.todos.version
    finally:
        service.close()


def test_td4_a_missing_summary_table_rebuilds_the_todo_rows_too(
    db_path: Path, root: Path
) -> None:
    service = reopen(db_path, root)
    try:
        sid = service.create_session()["sessionId"]
        write(service, sid, [item("a"), item("b")])
        before = stored(service, sid)
    finally:
        service.close()
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DROP TABLE execution_state")  # cascades: the todo rows go too
        assert conn.execute("SELECT count(*) FROM todo").fetchone() == (0,)
    service = reopen(db_path, root)
    try:
        assert stored(service, sid) == before
    finally:
        service.close()


def test_td4_the_projection_skips_sessions_it_has_no_summary_for(db_path: Path) -> None:
    """A TodosWritten without a SessionCreated (a hand-made log) must not break the append."""
    summary = ExecutionStateProjection(SqliteSummaryTable())
    todos = TodoProjection(SqliteTodoTable(), summary)
    store = open_store(f"sqlite:///{db_path}", projections=(summary, todos))
    try:
        written = TodosWritten(todos=(TodoItemData(content="x", status="pending",
                                                   priority="low"),))
        store.append("sess_orphan", [NewEvent(written, actor="model")])
        assert store.read_view(lambda tx: todos.of_session(tx, "sess_orphan")) == []
    finally:
        store.close()


# -- audits ----------------------------------------------------------------------------------


def test_audit_names_a_tampered_todo_row(
    service: SessionService, session: str, db_path: Path
) -> None:
    write(service, session, [item("a"), item("b")])
    assert service.audit(session)["ok"] is True
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("UPDATE todo SET status = 'completed' WHERE position = 1")
    differences = service.audit(session)["projections"]["differences"]
    assert differences and all(d.startswith("todo:") for d in differences)
    assert "position 1" in differences[0]
    service.rebuild_projections()
    assert service.audit(session)["ok"] is True
