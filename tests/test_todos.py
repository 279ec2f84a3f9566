"""TodoRead and TodoWrite through the service, and the ``todo`` table behind them (SPEC §4).

Covers TD-1 … TD-4 and TD-6: the strict contract and its exact schema description, the
result of a write (``oldTodos``, ``todos``, ``summary``, ``droppedUnfinished`` — issue 5's
acceptance 3), the tools allowed in every mode and on every host, one batch (one append) per
call, and the inline projection: rows in list order keyed by (session, position), written in
the append's transaction, emptied by a delete, cascaded away with the summary row on purge,
kept by the summary's upsert, and rebuilt whenever the summary projection is rebuilt. The
``sessionledger todos`` command prints the list with completed/total progress (TD-6).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from server_support import sessionledger_command

from eventlog import NewEvent, RecordedEvent, TodoItemData, TodosWritten, open_store
from projections import ExecutionStateProjection, compare_session, open_projected_store
from projections.tables import SqliteSummaryTable
from projections.todo_tables import SqliteTodoTable, TodoRow
from projections.todos import TodoProjection
from sessionledger import SessionService
from sessionledger.errors import InvalidInput, SessionDeleted, SessionNotFound
from sessionledger.tools.descriptors import SERVICE_TOOLS
from sessionledger.tools.todo_contract import (
    READ_DESCRIPTION,
    TODOS_DESCRIPTION,
    WRITE_DESCRIPTION,
    TodoItem,
    dropped_unfinished,
    parse_write_input,
    write_model_schema,
)
from sessionledger.tools.todo_handler import TodoReadHandler, TodoWriteHandler

EXACT_DESCRIPTION = (
    "The complete updated todo list. At most one item may be in_progress at a time."
)
MODES = ("plan", "build", "edit", "yolo", "auto")
HOSTS = ("protocol", "tui", "headless")


def item(content: str, status: str = "pending", priority: str = "medium") -> dict[str, str]:
    return {"content": content, "status": status, "priority": priority}


def write(service: SessionService, sid: str, todos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    answer = service.tools.call(sid, "TodoWrite", {"todos": list(todos)})
    assert answer.status_code == 200, answer.document
    assert answer.document["status"] == "completed" and answer.document["success"] is True
    return answer.document


def stored(service: SessionService, sid: str) -> list[TodoRow]:
    projection = service.projections.todos
    return service.store.read_view(lambda tx: projection.of_session(tx, sid))


def as_items(rows: Sequence[TodoRow]) -> list[dict[str, str]]:
    return [item(r.content, r.status, r.priority) for r in rows]


def events(service: SessionService, sid: str) -> list[RecordedEvent]:
    return list(service.store.read_session(sid))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def service(db_path: Path, root: Path) -> Iterator[SessionService]:
    opened = SessionService.open(f"sqlite:///{db_path}", workspace_root=root)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(params=["memory", "sqlite"])
def any_service(
    request: pytest.FixtureRequest, db_path: Path, root: Path
) -> Iterator[SessionService]:
    """The service over each backend (the todo table and its in-memory twin)."""
    url = "memory://" if request.param == "memory" else f"sqlite:///{db_path}"
    opened = SessionService.open(url, workspace_root=root)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def session(service: SessionService) -> str:
    return str(service.create_session()["sessionId"])


# -- TD-1, TD-2: the contract ----------------------------------------------------------------


def test_td1_an_item_is_content_status_priority_without_id() -> None:
    parsed = parse_write_input({"todos": [item("write the parser", "in_progress", "high")]})
    assert parsed.todos[0].model_dump() == item("write the parser", "in_progress", "high")
    schema = write_model_schema()
    todo = schema["$defs"]["TodoItem"]
    assert set(todo["properties"]) == {"content", "status", "priority"}
    assert set(todo["required"]) == {"content", "status", "priority"}
    assert todo["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert todo["properties"]["priority"]["enum"] == ["high", "medium", "low"]
    assert todo["additionalProperties"] is False and schema["additionalProperties"] is False
    assert schema["required"] == ["todos"]


@pytest.mark.parametrize("raw", [
    {"todos": [{**item("a"), "id": "1"}]},  # no id, no unknown field on an item
    {"todos": [item("a")], "merge": True},  # no unknown top-level field
    {"todos": [item("")]},
    {"todos": [item("   ")]},
    {"todos": [item("a", status="done")]},
    {"todos": [item("a", priority="urgent")]},
    {"todos": [{"content": 1, "status": "pending", "priority": "low"}]},  # strict: no coercion
    {"todos": ({"content": "a", "status": "pending", "priority": "low"},)},
    {"todos": "a, b"},
    {},
])
def test_td1_strict_input_rejects(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_write_input(raw)


def test_td2_the_exact_schema_description_of_todos() -> None:
    assert TODOS_DESCRIPTION == EXACT_DESCRIPTION
    assert write_model_schema()["properties"]["todos"]["description"] == EXACT_DESCRIPTION
    assert TodoWriteHandler().model_schema() == write_model_schema()


def test_td2_descriptions_ask_for_the_whole_list_and_one_in_progress() -> None:
    handler = TodoWriteHandler()
    assert handler.description == WRITE_DESCRIPTION
    text = WRITE_DESCRIPTION.lower()
    assert "complete list every time" in text and "replaces the whole list" in text
    assert "at most one item in_progress" in text
    assert "todo list" in READ_DESCRIPTION.lower()
    assert TodoReadHandler().model_schema()["properties"] == {}


def test_td2_more_than_one_in_progress_is_accepted(service: SessionService, session: str) -> None:
    todos = [item("a", "in_progress"), item("b", "in_progress"), item("c", "in_progress")]
    doc = write(service, session, todos)
    assert doc["result"]["summary"] == {
        "pending": 0, "in_progress": 3, "completed": 0, "total": 3,
    }
    assert as_items(stored(service, session)) == todos


# -- TD-3: a write replaces the list ---------------------------------------------------------


def test_td3_write_replaces_the_whole_list_and_returns_old_new_summary(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    first = [item("design", "completed", "high"), item("build", "in_progress"),
             item("ship", "pending", "low")]
    doc = write(any_service, sid, first)
    assert doc["result"] == {
        "oldTodos": [], "todos": first, "droppedUnfinished": [],
        "summary": {"pending": 1, "in_progress": 1, "completed": 1, "total": 3},
    }
    second = [item("build", "completed"), item("ship", "in_progress", "low")]
    result = write(any_service, sid, second)["result"]
    assert result["oldTodos"] == first and result["todos"] == second
    assert result["summary"] == {"pending": 0, "in_progress": 1, "completed": 1, "total": 2}
    assert as_items(stored(any_service, sid)) == second
    assert write(any_service, sid, [])["result"]["summary"]["total"] == 0
    assert stored(any_service, sid) == []


def test_td3_model_text_states_counts(service: SessionService, session: str) -> None:
    text = write(service, session, [item("a", "in_progress"), item("b"), item("c"),
                                    item("d", "completed")])["modelContent"]
    assert "4 items: 1 in progress, 2 pending, 1 completed" in text
    assert "no longer in it" not in text


def test_td3_todo_read_returns_the_current_list_and_summary(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    empty = any_service.tools.call(sid, "TodoRead", {}).document
    assert empty["success"] is True and empty["result"]["todos"] == []
    assert "empty" in empty["modelContent"]
    todos = [item("read the seed", "completed"), item("write tests", "in_progress", "high")]
    write(any_service, sid, todos)
    doc = any_service.tools.call(sid, "TodoRead", {}).document
    assert doc["result"] == {
        "todos": todos, "summary": {"pending": 0, "in_progress": 1, "completed": 1, "total": 2},
    }
    assert "1. [completed] read the seed\n2. [in_progress] write tests" in doc["modelContent"]
    assert not any(e.type == "TodosWritten" for e in events(any_service, sid)[-3:])


def test_td3_todo_read_takes_no_input(service: SessionService, session: str) -> None:
    version = service.store.version(session)
    with pytest.raises(InvalidInput):
        service.tools.call(session, "TodoRead", {"todos": []})
    assert service.store.version(session) == version


def test_td3_tr2_descriptors_read_only_session_scope_no_approval() -> None:
    write_tool, read_tool = SERVICE_TOOLS["TodoWrite"], SERVICE_TOOLS["TodoRead"]
    assert TodoWriteHandler.descriptor is write_tool and TodoReadHandler.descriptor is read_tool
    assert write_tool.read_only and write_tool.side_effect_scope == "session"
    assert write_tool.allowed_in_plan_mode and not write_tool.needs_approval
    assert not write_tool.requires_user_interaction and not write_tool.destructive
    assert read_tool.read_only and not read_tool.needs_approval


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("mode", MODES)
def test_td3_allowed_in_every_mode_including_plan(
    service: SessionService, mode: str, host: str
) -> None:
    sid = service.create_session(mode=mode, host=host)  # type: ignore[arg-type]
    session_id = sid["sessionId"]
    for tool, raw in (("TodoWrite", {"todos": [item("plan the work", "in_progress")]}),
                      ("TodoRead", {})):
        doc = service.tools.call(session_id, tool, raw).document
        assert doc["status"] == "completed" and doc["success"] is True, doc
        (decided,) = [e for e in events(service, session_id)
                      if e.type == "PermissionDecided" and e.data.call_id == doc["callId"]]
        assert decided.data.decision.behavior == "allow"
    assert as_items(stored(service, session_id)) == [item("plan the work", "in_progress")]


# -- acceptance 3: droppedUnfinished ---------------------------------------------------------


def dropped(service: SessionService, sid: str, old: list[dict[str, str]],
            new: list[dict[str, str]]) -> list[dict[str, str]]:
    write(service, sid, old)
    doc = write(service, sid, new)
    result: list[dict[str, str]] = doc["result"]["droppedUnfinished"]
    if result:
        assert "no longer in it" in doc["modelContent"]
        for gone in result:
            assert f"[{gone['status']}] {gone['content']}" in doc["modelContent"]
    else:
        assert "no longer in it" not in doc["modelContent"]
    return result


def test_acceptance3_a_rename_counts_as_dropped(service: SessionService, session: str) -> None:
    old = [item("write tests", "in_progress"), item("ship")]
    new = [item("write unit tests", "in_progress"), item("ship")]
    assert dropped(service, session, old, new) == [item("write tests", "in_progress")]
    assert as_items(stored(service, session)) == new  # the write still replaces the list


def test_acceptance3_reorders_and_status_changes_are_not_dropped(
    service: SessionService, session: str
) -> None:
    old = [item("a", "in_progress"), item("b"), item("c")]
    new = [item("c", "in_progress"), item("a", "completed"), item("b", priority="high")]
    assert dropped(service, session, old, new) == []


def test_acceptance3_removed_unfinished_items_are_named(
    service: SessionService, session: str
) -> None:
    old = [item("a", "completed"), item("b", "in_progress"), item("c"), item("d")]
    new = [item("d", "in_progress")]
    assert dropped(service, session, old, new) == [item("b", "in_progress"), item("c")]
    assert dropped(service, session, [item("x")], []) == [item("x")]


def test_acceptance3_empty_when_only_completed_items_go(
    service: SessionService, session: str
) -> None:
    old = [item("a", "completed"), item("b", "completed"), item("c")]
    assert dropped(service, session, old, [item("c", "in_progress")]) == []
    assert dropped(service, session, [item("a", "completed")], []) == []


def test_acceptance3_duplicates_match_as_a_multiset() -> None:
    # D28: each new item covers one old item of its content; the last unfinished are reported.
    def data(*items: dict[str, str]) -> list[Any]:
        return [TodoItem.model_validate(i).to_data() for i in items]

    old = data(item("A", "completed"), item("A"), item("A", "in_progress"), item("B"))
    assert dropped_unfinished(old, data(item("A"), item("B"))) == data(
        item("A", "in_progress")
    )
    assert dropped_unfinished(old, data(item("A"), item("A"), item("B"))) == []
    assert dropped_unfinished(old, data(item("a"), item("B"))) == data(  # exact match only
        item("A"), item("A", "in_progress")
    )


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
                       ("priority", 0), ("updated_at", 0)]
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
    assert {r.updated_at for r in stored(any_service, sid)} == {written.recorded_at}
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
        conn.execute("INSERT INTO todo VALUES (?, 0, 'stale', 'pending', 'low', 'x')",
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


def _reopen(db_path: Path, root: Path) -> SessionService:
    return SessionService.open(f"sqlite:///{db_path}", workspace_root=root)


def test_td4_summary_version_change_rebuilds_the_todo_rows_too(
    db_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _reopen(db_path, root)
    try:
        sid = service.create_session()["sessionId"]
        todos = [item("a", "completed"), item("b", "in_progress"), item("c")]
        write(service, sid, todos)
        before = stored(service, sid)
    finally:
        service.close()
    monkeypatch.setattr(ExecutionStateProjection, "version", ExecutionStateProjection.version + 1)
    service = _reopen(db_path, root)
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
    service = _reopen(db_path, root)
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
    service = _reopen(db_path, root)
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


# -- answer step: a workspace rule may make TodoWrite ask ------------------------------------


def test_td3_a_rule_that_asks_runs_the_write_on_the_list_at_answer_time(
    service: SessionService, root: Path
) -> None:
    workspace = root / "asks"
    (workspace / ".sessionledger").mkdir(parents=True)
    (workspace / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["TodoWrite"]\n', encoding="utf-8"
    )
    sid = service.create_session(workspace=str(workspace))["sessionId"]
    first = service.tools.call(sid, "TodoWrite", {"todos": [item("first")]}).document
    assert first["status"] == "pending"
    service.tools.respond(sid, first["interactionId"], "approve")
    second = service.tools.call(sid, "TodoWrite", {"todos": [item("second")]}).document
    (listed,) = service.document(sid)["interactions"]
    assert listed["kind"] == "toolApproval" and listed["payload"]["tool"] == "TodoWrite"
    done = service.tools.respond(
        sid, second["interactionId"], "modify", input={"todos": [item("modified")]}
    )
    assert done["result"]["oldTodos"] == [item("first")]
    assert done["result"]["droppedUnfinished"] == [item("first")]
    assert as_items(stored(service, sid)) == [item("modified")]
    third = service.tools.call(sid, "TodoWrite", {"todos": []}).document
    declined = service.tools.respond(sid, third["interactionId"], "deny")
    assert declined["success"] is False
    assert as_items(stored(service, sid)) == [item("modified")]


# -- TD-6: the CLI ---------------------------------------------------------------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=60, check=False,
    )


def test_td6_cli_prints_the_list_with_completed_total(
    db_path: Path, root: Path
) -> None:
    service = _reopen(db_path, root)
    try:
        sid = service.create_session()["sessionId"]
        empty = service.create_session()["sessionId"]
        gone = service.create_session()["sessionId"]
        write(service, sid, [item("design [schema]", "completed", "high"),
                             item("build it", "in_progress"), item("ship it", "pending", "low")])
        service.delete_session(gone)
    finally:
        service.close()
    db = f"sqlite:///{db_path}"
    shown = run_cli("todos", sid, "--db", db, cwd=root)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"{sid}: 1/3 completed" in out
    for text in ("design [schema]", "build it", "ship it", "in_progress", "high", "low"):
        assert text in out
    assert out.index("design [schema]") < out.index("build it") < out.index("ship it")
    as_json = json.loads(run_cli("todos", sid, "--json", "--db", db, cwd=root).stdout)
    assert as_json["progress"] == {"completed": 1, "total": 3}
    assert [t["content"] for t in as_json["todos"]] == ["design [schema]", "build it", "ship it"]
    nothing = run_cli("todos", empty, "--db", db, cwd=root)
    assert nothing.returncode == 0 and "0/0 completed" in nothing.stdout
    assert "no todos" in nothing.stdout
    deleted = run_cli("todos", gone, "--db", db, cwd=root)
    assert deleted.returncode == 1 and "was deleted" in deleted.stderr
    unknown = run_cli("todos", "sess_unknown", "--db", db, cwd=root)
    assert unknown.returncode == 2 and "not found" in unknown.stderr
    for failed in (deleted, unknown):
        assert "Traceback" not in failed.stderr and failed.stdout == ""
