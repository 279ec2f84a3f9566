"""The turn loop through ``SessionService.turns`` over both store backends (TD-5, PM-5, PM-10).

Messages and compactions are recorded, ``prepare_request`` decides and records reminders,
and the counters behind the decision come from the inline projection: so they must survive
a restart (SQLite closed and reopened) and a rebuild, and audit compares them with a fresh
fold. A todo list is written by appending ``TodosWritten`` straight to the store (the todo
tools are the other half of issue 5).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog import MessageRecorded, NewEvent, RecordedEvent, TodoItemData, TodosWritten
from projections import TurnCounters
from sessionledger import SessionService
from sessionledger.errors import InvalidInput, SessionDeleted, SessionNotFound
from sessionledger.service import Reminder, ReminderContext
from sessionledger.service.turns import PLAN_MODE_FULL, PLAN_MODE_SPARSE, Role

TODO = ["TodoWrite", "Read"]
TODO_OPENING = "The TodoWrite tool hasn't been used recently."
ITEMS = (
    TodoItemData(content="sketch the API", status="completed", priority="high"),
    TodoItemData(content="build the fold", status="in_progress", priority="medium"),
)


class Ledger:
    """A service over one backend; ``restart`` closes it and opens the same file again."""

    def __init__(self, backend: str, directory: Path) -> None:
        self.backend = backend
        self.directory = directory
        self.url = "memory://" if backend == "memory" else f"sqlite:///{directory}/ledger.db"
        self.service = SessionService.open(self.url, workspace_root=directory)

    def restart(self) -> SessionService:
        assert self.backend == "sqlite", "only a file survives a restart"
        self.service.close()
        self.service = SessionService.open(self.url, workspace_root=self.directory)
        return self.service

    def close(self) -> None:
        self.service.close()


@pytest.fixture
def ledger(backend: str, tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(backend, tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def service(ledger: Ledger) -> SessionService:
    return ledger.service


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger("sqlite", tmp_path)
    yield opened
    opened.close()


def new_session(service: SessionService, **options: Any) -> str:
    return str(service.create_session(**options)["sessionId"])


def say(service: SessionService, sid: str, role: Role, count: int = 1, **kw: Any) -> None:
    for i in range(count):
        service.turns.record_message(sid, role, f"{role} message {i}", **kw)


def prepare(
    service: SessionService, sid: str, tools: list[str] | None = None, *,
    continuation: bool = False,
) -> list[Reminder]:
    return service.turns.prepare_request(sid, TODO if tools is None else tools,
                                         continuation=continuation)


def kinds(reminders: list[Reminder]) -> list[str]:
    return [r.kind for r in reminders]


def variants(reminders: list[Reminder]) -> list[str | None]:
    return [r.variant for r in reminders]


def write_todos(service: SessionService, sid: str, items: tuple[TodoItemData, ...]) -> None:
    service.store.append(sid, [NewEvent(TodosWritten(todos=items), actor="model")])


def log(service: SessionService, sid: str) -> list[RecordedEvent]:
    return list(service.store.read_session(sid))


# -- TD-5 ----------------------------------------------------------------------------------


def test_td5_exactly_nine_assistant_messages_give_none_ten_give_one(
    service: SessionService,
) -> None:
    sid = new_session(service)
    say(service, sid, "assistant", 9)
    assert prepare(service, sid) == []
    say(service, sid, "assistant")
    (reminder,) = prepare(service, sid)
    assert reminder.kind == "todo_reminder" and reminder.text.startswith(TODO_OPENING)
    assert reminder.text.endswith("\n\nThe todo list is empty.")


def test_td5_user_and_continuation_messages_never_count(service: SessionService) -> None:
    sid = new_session(service)
    say(service, sid, "assistant", 9)
    say(service, sid, "user", 20)
    say(service, sid, "assistant", 20, continuation=True)
    assert prepare(service, sid) == []
    say(service, sid, "assistant")
    assert kinds(prepare(service, sid)) == ["todo_reminder"]


def test_td5_synthetic_assistant_messages_count(service: SessionService) -> None:  # D34
    sid = new_session(service)
    say(service, sid, "assistant", 9)
    synthetic = MessageRecorded(role="assistant", kind="synthetic", content="injected")
    service.store.append(sid, [NewEvent(synthetic, actor="system")])
    assert kinds(prepare(service, sid)) == ["todo_reminder"]


def test_td5_a_reminder_resets_the_count_like_a_todo_write(service: SessionService) -> None:
    sid = new_session(service)
    say(service, sid, "assistant", 10)
    assert kinds(prepare(service, sid)) == ["todo_reminder"]
    say(service, sid, "assistant", 9)
    assert prepare(service, sid) == []  # 9 since the reminder
    write_todos(service, sid, ITEMS)
    say(service, sid, "assistant", 9)
    assert prepare(service, sid) == []  # 18 since the reminder, 9 since the write
    say(service, sid, "assistant")
    (reminder,) = prepare(service, sid)
    assert reminder.text.split("\n\n")[1] == (
        "1. [completed] sketch the API\n2. [in_progress] build the fold"
    )


def test_td5_a_todowrite_call_resets_the_count_and_an_invalid_one_does_not(
    service: SessionService,
) -> None:
    sid = new_session(service)
    say(service, sid, "assistant", 10)
    todos = [{"content": "ship it", "status": "in_progress", "priority": "high"}]
    with pytest.raises(InvalidInput):  # refused as invalid: nothing recorded, nothing reset
        service.tools.call(sid, "TodoWrite", {"todos": todos, "extra": 1})
    assert service.turns.counters(sid).assistant_since_todo == 10
    answer = service.tools.call(sid, "TodoWrite", {"todos": todos})
    assert answer.document["success"] is True
    say(service, sid, "assistant", 9)
    assert prepare(service, sid) == []
    say(service, sid, "assistant")
    (reminder,) = prepare(service, sid)
    assert reminder.text.endswith("\n\n1. [in_progress] ship it")


def test_td5_no_todo_reminder_without_todowrite_or_in_a_continuation(
    service: SessionService,
) -> None:
    sid = new_session(service)
    say(service, sid, "assistant", 12)
    assert prepare(service, sid, ["Read", "TodoRead"]) == []
    assert prepare(service, sid, continuation=True) == []
    assert service.store.version(sid) == 13  # nothing recorded, the count is kept
    assert kinds(prepare(service, sid)) == ["todo_reminder"]


def test_td5_the_reminder_is_stored_with_a_synthetic_user_notification(
    service: SessionService,
) -> None:
    sid = new_session(service)
    write_todos(service, sid, ITEMS)
    say(service, sid, "assistant", 10)
    before = service.store.version(sid)
    (reminder,) = prepare(service, sid)
    injected, notice = log(service, sid)[before:]
    assert injected.type == "ReminderInjected" and notice.type == "MessageRecorded"
    assert injected.data.model_dump() == {
        "type": "ReminderInjected", "kind": "todo_reminder", "text": reminder.text,
        "variant": None,
    }
    assert notice.data.model_dump() == {
        "type": "MessageRecorded", "role": "user", "kind": "synthetic", "continuation": False,
        "content": reminder.text, "source": "todo_reminder",
    }
    assert injected.correlation_id is not None
    assert injected.correlation_id == notice.correlation_id
    assert service.turns.counters(sid).users_since_plan_reminder == 0  # synthetic: not counted


# -- PM-5 ----------------------------------------------------------------------------------


def test_pm5_1st_6th_and_11th_plan_reminders_are_full_the_others_sparse(
    service: SessionService,
) -> None:
    sid = new_session(service, mode="plan")
    seen: list[str | None] = []
    for _ in range(12):
        (reminder,) = prepare(service, sid, [])
        seen += variants([reminder])
        assert reminder.text == (PLAN_MODE_FULL if reminder.variant == "full" else PLAN_MODE_SPARSE)
        say(service, sid, "user", 5)
    assert seen == ["full", *["sparse"] * 4, "full", *["sparse"] * 4, "full", "sparse"]


def test_pm5_four_real_user_messages_are_not_enough_synthetic_ones_never_count(
    service: SessionService,
) -> None:
    sid = new_session(service, mode="plan")
    assert variants(prepare(service, sid, [])) == ["full"]
    assert prepare(service, sid, []) == []  # not idempotent: the first was recorded
    say(service, sid, "user", 4)
    notice = MessageRecorded(role="user", kind="synthetic", content="a notice")
    service.store.append(sid, [NewEvent(notice, actor="system")] * 3)
    say(service, sid, "assistant", 5)
    assert prepare(service, sid, []) == []
    say(service, sid, "user")
    assert variants(prepare(service, sid, [])) == ["sparse"]


def test_pm5_reentering_plan_starts_a_new_period_with_a_full_reminder(
    service: SessionService,
) -> None:
    sid = new_session(service, mode="plan")
    prepare(service, sid, [])
    say(service, sid, "user", 5)
    assert variants(prepare(service, sid, [])) == ["sparse"]
    service.set_mode(sid, "build")
    assert kinds(prepare(service, sid, [])) == ["plan_exit"]
    service.set_mode(sid, "plan")
    (reminder,) = prepare(service, sid, [])
    assert (reminder.kind, reminder.variant) == ("runtime_mode", "full")


def test_pm5_exactly_one_plan_exit_after_leaving(service: SessionService) -> None:
    sid = new_session(service, mode="plan")
    prepare(service, sid, [])
    service.approve_plan_exit(sid)  # ExitPlanMode approved: the switch only (ES-3)
    (reminder,) = prepare(service, sid, [])
    assert reminder.kind == "plan_exit" and reminder.variant is None
    assert "may now make edits, run tools" in reminder.text
    assert prepare(service, sid, []) == []
    say(service, sid, "user", 10)
    assert prepare(service, sid, []) == []


def test_pm5_no_plan_exit_when_plan_was_reentered_before_the_next_request(
    service: SessionService,
) -> None:
    sid = new_session(service, mode="plan")
    prepare(service, sid, [])
    service.cycle_mode(sid)  # plan → build
    service.set_mode(sid, "plan")
    assert variants(prepare(service, sid, [])) == ["full"]
    assert service.turns.counters(sid).plan_exit_armed is False


def test_pm5_plan_reminders_still_come_during_a_continuation(service: SessionService) -> None:
    sid = new_session(service, mode="plan")
    say(service, sid, "assistant", 10)
    assert kinds(prepare(service, sid, continuation=True)) == ["runtime_mode"]
    service.set_mode(sid, "edit")
    assert kinds(prepare(service, sid, continuation=True)) == ["plan_exit"]
    assert kinds(prepare(service, sid)) == ["todo_reminder"]


def test_pm5_order_when_several_fire(service: SessionService) -> None:
    seen: list[ReminderContext] = []

    def plan_file(context: ReminderContext) -> Reminder | None:
        seen.append(context)
        if not context.counters.compacted:
            return None
        return Reminder("plan_file_reference", "A plan file exists from plan mode at: x")

    service.turns.sources.append(plan_file)
    sid = new_session(service, mode="plan")
    say(service, sid, "assistant", 10)
    service.turns.compact(sid)
    assert kinds(prepare(service, sid)) == ["runtime_mode", "plan_file_reference", "todo_reminder"]
    events = log(service, sid)[-4:]
    assert [e.type for e in events] == ["ReminderInjected"] * 3 + ["MessageRecorded"]
    assert len({e.correlation_id for e in events}) == 1  # one batch, one request
    service.set_mode(sid, "build")
    say(service, sid, "assistant", 10)
    service.turns.compact(sid)
    assert kinds(prepare(service, sid)) == ["plan_exit", "plan_file_reference", "todo_reminder"]
    assert seen[-1].workspace == service.summary(sid).workspace


# -- PM-10: the compaction flag --------------------------------------------------------------


def test_pm10_a_compaction_is_remembered_until_a_request_records_a_reminder(
    service: SessionService,
) -> None:
    sid = new_session(service)
    receipt = service.turns.compact(sid)
    assert receipt["seq"] == receipt["version"] == 2
    assert service.turns.counters(sid).compacted
    assert prepare(service, sid) == []
    assert service.turns.counters(sid).compacted  # nothing recorded for that request
    service.set_mode(sid, "plan")
    assert kinds(prepare(service, sid)) == ["runtime_mode"]
    assert not service.turns.counters(sid).compacted


# -- the record and its guards -------------------------------------------------------------


def test_a_message_lands_as_one_real_event(service: SessionService) -> None:
    sid = new_session(service)
    receipt = service.turns.record_message(sid, "assistant", "done", continuation=True)
    assert receipt["sessionId"] == sid and receipt["seq"] == receipt["version"] == 2
    (event,) = log(service, sid)[1:]
    assert event.actor == "model" and event.data.model_dump() == {
        "type": "MessageRecorded", "role": "assistant", "kind": "real", "continuation": True,
        "content": "done", "source": None,
    }


def test_nothing_appended_when_there_are_no_reminders(service: SessionService) -> None:
    sid = new_session(service)
    say(service, sid, "assistant", 3)
    assert prepare(service, sid) == []
    assert service.store.version(sid) == 4


@pytest.mark.parametrize(
    "call",
    [
        lambda s, sid: s.turns.record_message(sid, "assistant", "   \n"),
        lambda s, sid: s.turns.record_message(sid, "system", "hi"),
        lambda s, sid: s.turns.prepare_request(sid, ["TodoWrite", " "]),
    ],
)
def test_bad_input_is_refused_and_appends_nothing(service: SessionService, call: Any) -> None:
    sid = new_session(service, mode="plan")
    with pytest.raises(InvalidInput):
        call(service, sid)
    assert service.store.version(sid) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda s, sid: s.turns.record_message(sid, "user", "hi"),
        lambda s, sid: s.turns.compact(sid),
        lambda s, sid: s.turns.prepare_request(sid, ["TodoWrite"]),
        lambda s, sid: s.turns.counters(sid),
    ],
)
def test_unknown_and_deleted_sessions_are_404_and_410(service: SessionService, call: Any) -> None:
    with pytest.raises(SessionNotFound):
        call(service, "sess_unknown")
    sid = new_session(service, mode="plan")
    service.delete_session(sid)
    with pytest.raises(SessionDeleted):
        call(service, sid)
    assert service.store.version(sid) == 2


def test_concurrent_requests_inject_a_reminder_once(sqlite_ledger: Ledger) -> None:
    service = sqlite_ledger.service
    sid = new_session(service, mode="plan")
    say(service, sid, "assistant", 10)
    results: list[list[Reminder]] = []
    start = threading.Barrier(4)

    def worker() -> None:
        start.wait()
        results.append(prepare(service, sid))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(kinds(r) for r in results) == [[], [], [], ["runtime_mode", "todo_reminder"]]
    injected = [e for e in log(service, sid) if e.type == "ReminderInjected"]
    assert len(injected) == 2


# -- restart, rebuild, audit ---------------------------------------------------------------


def midway(service: SessionService) -> str:
    """A session with every counter away from its start value."""
    sid = new_session(service, mode="plan")
    prepare(service, sid, [])
    say(service, sid, "user", 5)
    prepare(service, sid, [])
    say(service, sid, "user", 3)
    say(service, sid, "assistant", 7)
    service.turns.compact(sid)
    return sid


EXPECTED_MIDWAY = dict(assistant_since_todo=7, plan_enabled=True, plan_reminders=2,
                       users_since_plan_reminder=3, plan_exit_armed=False, compacted=True)


def test_counters_survive_a_restart(sqlite_ledger: Ledger) -> None:
    sid = midway(sqlite_ledger.service)
    service = sqlite_ledger.restart()
    assert service.turns.counters(sid) == TurnCounters(sid, **EXPECTED_MIDWAY)
    say(service, sid, "user", 2)
    say(service, sid, "assistant", 3)
    assert kinds(prepare(service, sid)) == ["runtime_mode", "todo_reminder"]
    service.set_mode(sid, "build")
    service = sqlite_ledger.restart()
    assert kinds(prepare(service, sid)) == ["plan_exit"]


def test_counters_survive_a_rebuild_and_audit_compares_them(service: SessionService) -> None:
    sid = midway(service)
    before = service.turns.counters(sid)
    assert service.rebuild_projections() == service.store.head_position()
    assert service.turns.counters(sid) == before == TurnCounters(sid, **EXPECTED_MIDWAY)
    assert service.audit(sid)["ok"] is True


def test_audit_names_drifted_counters_and_a_rebuild_repairs_them(sqlite_ledger: Ledger) -> None:
    service = sqlite_ledger.service
    sid = midway(service)
    path = sqlite_ledger.directory / "ledger.db"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE turn_counters SET body = json_set(body, '$.plan_reminders', 9)")
    conn.close()
    report = service.audit(sid)
    assert report["ok"] is False
    assert report["projections"]["differences"] == [
        "turn_counters.plan_reminders: stored 9, log says 2"
    ]
    service.rebuild_projections()
    assert service.audit(sid)["ok"] is True


def test_purge_forgets_the_counters(service: SessionService) -> None:
    sid = midway(service)
    service.delete_session(sid)
    service.purge_session(sid)
    assert service.projections.turn_counters(service.store, sid) is None
