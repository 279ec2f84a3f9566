"""Random todo writes, deletes and restarts against a plain model, on both backends (§4).

Issue 5's acceptance 2 (SPEC TD-3, TD-4): a hypothesis ``RuleBasedStateMachine`` creates up to
four sessions, writes random lists through the TodoWrite tool (duplicates, renames, reorders
and several ``in_progress`` items included), deletes sessions and restarts — the SQLite file
closed and opened again, the in-memory store kept under a new service. The model is one dict:
each session's last written list, or nothing once deleted. After every step the ``todo``
table equals the model for every session (and, on SQLite, holds nothing else), the session
document and TodoRead show the same list, and the audit finds no difference; a full
``rebuild_projections`` leaves exactly the same rows. Each write's result is checked against
a reference written out here (``oldTodos``, ``summary``, ``droppedUnfinished``). A second
property: any TodoWrite input that breaks the schema is refused and appends nothing (TD-1).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from projections import compare_session, open_projected_store
from projections.tables import TodoRow
from sessionledger import SessionService
from sessionledger.errors import InvalidInput, SessionDeleted
from sessionledger.tools.ask import visible

Item = dict[str, str]

contents = st.one_of(
    st.sampled_from(["write tests", "fix the parser", "ship", "a", "A", "日本語のタスク"]),
    st.text(min_size=1, max_size=10).filter(lambda s: visible(s) != ""),
)
items = st.fixed_dictionaries({
    "content": contents,
    "status": st.sampled_from(["pending", "in_progress", "completed"]),
    "priority": st.sampled_from(["high", "medium", "low"]),
})
lists = st.lists(items, max_size=7)


def reference_dropped(old: list[Item], new: list[Item]) -> list[Item]:
    """Unfinished old items no new item accounts for (one new item, one old item)."""
    remaining = [t["content"] for t in new]
    dropped = []
    for todo in old:
        if todo["status"] == "completed":
            continue
        if todo["content"] in remaining:
            remaining.remove(todo["content"])
        else:
            dropped.append(todo)
    return dropped


def reference_summary(todos: list[Item]) -> dict[str, int]:
    counts = Counter(t["status"] for t in todos)
    return {"pending": counts["pending"], "in_progress": counts["in_progress"],
            "completed": counts["completed"], "total": len(todos)}


def as_items(rows: list[TodoRow]) -> list[Item]:
    return [{"content": r.content, "status": r.status, "priority": r.priority} for r in rows]


class TodoLedger(RuleBasedStateMachine):
    """The service over one backend, compared step by step with a dict of lists."""

    backend: ClassVar[str] = "sqlite"
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory(prefix="sessionledger-todos-")
        self.root = Path(self._tmp.name)
        self.db_path = self.root / "ledger.db"
        self.url = "memory://" if self.backend == "memory" else f"sqlite:///{self.db_path}"
        self.model: dict[str, list[Item] | None] = {}
        self.service: SessionService | None = SessionService.open(
            self.url, workspace_root=self.root
        )

    def _service(self) -> SessionService:
        assert self.service is not None
        return self.service

    def teardown(self) -> None:
        try:
            if self.service is not None:
                self.service.close()
        finally:
            self._tmp.cleanup()

    # -- rules -------------------------------------------------------------------------------

    @precondition(lambda self: len(self.model) < 4)
    @rule(target=sessions, mode=st.sampled_from(["build", "plan", "yolo"]))
    def create_session(self, mode: Any) -> str:
        sid = str(self._service().create_session(mode=mode)["sessionId"])
        self.model[sid] = []
        return sid

    @rule(session=sessions, todos=lists)
    def todo_write(self, session: str, todos: list[Item]) -> None:
        service = self._service()
        before = self.model[session]
        version = service.store.version(session)
        if before is None:
            with pytest.raises(SessionDeleted):
                service.tools.call(session, "TodoWrite", {"todos": todos})
            assert service.store.version(session) == version
            return
        doc = service.tools.call(session, "TodoWrite", {"todos": todos}).document
        assert doc["status"] == "completed" and doc["success"] is True
        assert doc["result"] == {
            "oldTodos": before, "todos": todos, "summary": reference_summary(todos),
            "droppedUnfinished": reference_dropped(before, todos),
        }
        assert service.store.version(session) == version + 4  # one batch of four events
        self.model[session] = todos

    @rule(session=sessions)
    def delete_session(self, session: str) -> None:
        service = self._service()
        if self.model[session] is None:
            with pytest.raises(SessionDeleted):
                service.delete_session(session)
            return
        service.delete_session(session)
        self.model[session] = None

    @rule()
    def restart(self) -> None:
        service = self._service()
        if self.backend == "memory":  # the store lives on; the service above it restarts
            self.service = SessionService(
                service.store, service.projections, workspace_root=self.root
            )
            return
        service.close()
        self.service = None
        self.service = SessionService.open(self.url, workspace_root=self.root)

    @rule()
    def rebuild_gives_identical_rows(self) -> None:
        service = self._service()
        before = self._all_rows()
        service.rebuild_projections()
        assert self._all_rows() == before

    # -- invariants --------------------------------------------------------------------------

    def _rows(self, session: str) -> list[TodoRow]:
        service = self._service()
        projection = service.projections.todos
        return service.store.read_view(lambda tx: projection.of_session(tx, session))

    def _all_rows(self) -> dict[str, list[TodoRow]]:
        return {sid: self._rows(sid) for sid in self.model}

    @invariant()
    def table_equals_the_last_written_lists(self) -> None:
        service = self._service()
        for sid, todos in self.model.items():
            rows = self._rows(sid)
            assert as_items(rows) == (todos or [])
            assert [r.position for r in rows] == list(range(len(rows)))
            assert compare_session(service.store, service.projections, sid) == []
            if todos is not None:
                assert service.document(sid)["todos"] == todos
                assert service.todos.current(sid).wire() == todos
        if self.backend == "sqlite":
            with closing(sqlite3.connect(self.db_path)) as conn:
                count = conn.execute("SELECT count(*) FROM todo").fetchone()[0]
            assert count == sum(len(t or []) for t in self.model.values())


class MemoryTodoLedger(TodoLedger):
    backend = "memory"


class SqliteTodoLedger(TodoLedger):
    backend = "sqlite"


MACHINES: dict[str, type[TodoLedger]] = {"memory": MemoryTodoLedger, "sqlite": SqliteTodoLedger}


@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_acceptance2_td4_todo_table_equals_the_last_write_through_deletes_and_restarts(
    backend: str, depth: str
) -> None:
    """Fast: 25 examples x 20 steps; slow (``make verify``): the profile's examples x 60."""
    if depth == "fast":
        overrides: dict[str, Any] = {"stateful_step_count": 20, "max_examples": 25}
    else:
        overrides = {"stateful_step_count": 60,
                     "max_examples": min(settings.default.max_examples, 300)}
    run_state_machine_as_test(MACHINES[backend],
                              settings=settings(settings.default, **overrides))


# -- TD-1: any broken input is refused and appends nothing -----------------------------------

NOT_A_STRING = st.one_of(st.none(), st.booleans(), st.integers(), st.lists(st.integers(),
                                                                            max_size=2))
NOT_A_LIST = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def broken_inputs(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {"todos": draw(st.lists(items, min_size=1, max_size=4))}
    todo = draw(st.sampled_from(raw["todos"]))
    kind = draw(st.sampled_from([
        "missing", "not_a_list", "item_not_object", "empty_content", "content_type",
        "status", "priority", "missing_field", "extra_item_field", "extra_top_field",
    ]))
    if kind == "missing":
        del raw["todos"]
    elif kind == "not_a_list":
        raw["todos"] = draw(NOT_A_LIST)
    elif kind == "item_not_object":
        raw["todos"].append(draw(st.one_of(NOT_A_STRING, st.text(max_size=4))))
    elif kind == "empty_content":
        todo["content"] = draw(st.sampled_from(["", " ", "\n\t"]))
    elif kind == "content_type":
        todo["content"] = draw(NOT_A_STRING)
    elif kind in ("status", "priority"):
        allowed = {"status": ("pending", "in_progress", "completed"),
                   "priority": ("high", "medium", "low")}[kind]
        todo[kind] = draw(st.one_of(NOT_A_STRING, st.text(max_size=12).filter(
            lambda s: s not in allowed)))
    elif kind == "missing_field":
        del todo[draw(st.sampled_from(["content", "status", "priority"]))]
    elif kind == "extra_item_field":
        todo[draw(st.sampled_from(["id", "activeForm", "notes", "Content"]))] = "x"
    else:
        raw[draw(st.sampled_from(["merge", "todo", "sessionId", "Todos"]))] = True
    return raw


def test_td1_any_broken_input_is_refused_and_appends_nothing(tmp_path: Path) -> None:
    store, projections = open_projected_store(f"sqlite:///{tmp_path / 'ledger.db'}")
    service = SessionService(store, projections, workspace_root=tmp_path)
    try:
        sid = service.create_session()["sessionId"]
        service.tools.call(sid, "TodoWrite", {"todos": [
            {"content": "kept", "status": "pending", "priority": "low"}]})

        @given(raw=broken_inputs())
        def check(raw: dict[str, Any]) -> None:
            head, version = store.head_position(), store.version(sid)
            with pytest.raises(InvalidInput) as refused:
                service.tools.call(sid, "TodoWrite", raw)
            assert refused.value.status == 422 and refused.value.code == "invalid_input"
            assert refused.value.details
            assert (store.head_position(), store.version(sid)) == (head, version)
            assert service.document(sid)["todos"] == [
                {"content": "kept", "status": "pending", "priority": "low"}]

        check()
    finally:
        service.close()
