"""PM-7's literal order over a real SQLite file: decision, then the file, then the exit.

The user's decision (``InteractionResolved``) is appended in a batch of its own; only then is
the plan file written; then ``PlanApproved`` (after ``PlanFileWriteFailed`` when the write
failed), the ``SessionModeChanged`` leaving Plan and the call's completion are appended in one
batch. The batches are seen by a spy on ``store.append``; the log is read back to check the
``seq`` order. A stop between the two batches is simulated by appending the decision alone and
reopening the service: the approval is abandoned on the session's first access
(``PlanApprovalCancelled``, ``interrupted``), Plan stays on, the plan file is put back as the
log says, and the plan is asked again (D64, D65).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog import AppendResult, InteractionResolved, NewEvent, RecordedEvent
from projections import compare_session
from sessionledger import SessionService
from sessionledger.errors import ServiceUnavailable
from sessionledger.service.documents import describe_event
from sessionledger.tools import plan_files
from sessionledger.tools.plan_files import plan_path

PLAN = "# Plan\n\n1. Tests first.\n2. Then the code.\n"
OLD_PLAN = "# The plan approved before\n"
APPROVED = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)
SECOND_BATCH = ["PlanApproved", "SessionModeChanged", "ToolCallCompleted"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def service(url: str, tmp_path: Path) -> Iterator[SessionService]:
    opened = SessionService.open(url, workspace_root=tmp_path)
    try:
        yield opened
    finally:
        opened.close()


class Batches:
    """Every batch appended through ``store.append``, as its event types."""

    def __init__(self, service: SessionService, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[list[str]] = []
        append = service.store.append

        def spy(session_id: str, events: Any, **options: Any) -> AppendResult:
            result = append(session_id, events, **options)
            self.seen.append([e.type for e in result.events])
            return result

        monkeypatch.setattr(service.store, "append", spy)


def in_plan(service: SessionService, *, host: str = "protocol") -> str:
    sid: str = service.create_session(mode="yolo", host=host)["sessionId"]  # type: ignore[arg-type]
    assert service.tools.call(sid, "EnterPlanMode", {}).document["success"] is True
    return sid


def submit(service: SessionService, sid: str, plan: str = PLAN) -> dict[str, Any]:
    answer = service.tools.call(sid, "ExitPlanMode", {"plan": plan})
    assert answer.status_code == 202
    return answer.document


def log(service: SessionService, sid: str) -> list[RecordedEvent]:
    return list(service.store.read_session(sid))


def one(events: list[RecordedEvent], kind: str) -> RecordedEvent:
    [found] = [e for e in events if e.type == kind]
    return found


def plan_on(service: SessionService, sid: str) -> bool:
    return bool(service.document(sid)["executionState"]["planEnabled"])


def assert_one_batch(events: list[RecordedEvent]) -> None:
    """Consecutive ``seq`` and global positions, one instant: how one batch lies in the log."""
    assert [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events)))
    first = events[0].global_position
    assert [e.global_position for e in events] == list(range(first, first + len(events)))
    assert len({e.recorded_at for e in events}) == 1


def assert_consistent(service: SessionService, sid: str) -> None:
    assert compare_session(service.store, service.projections, sid) == []
    assert all(report.ok for report in service.store.verify(sid))


# -- the order of one approval ----------------------------------------------------------------


def test_pm7_decision_is_on_record_before_the_file_then_approval_and_exit_in_one_batch(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PM-7, ES-3: (1) the decision alone; (2) the file; (3) PlanApproved + exit together."""
    sid = in_plan(service)
    iid = submit(service, sid)["interactionId"]
    at_rename: list[list[str]] = []
    replace = os.replace

    def look_then_replace(source: Any, target: Any, **dir_fds: Any) -> None:
        at_rename.append([e.type for e in log(service, sid)])
        replace(source, target, **dir_fds)

    monkeypatch.setattr(plan_files.os, "replace", look_then_replace)
    batches = Batches(service, monkeypatch)
    done = service.tools.respond(sid, iid, "approve")
    assert done["success"] is True and done["modelContent"] == APPROVED + PLAN
    assert batches.seen == [["InteractionResolved"], SECOND_BATCH]
    [seen] = at_rename  # while the file was renamed in place: decided, not yet approved
    assert seen[-1] == "InteractionResolved" and "PlanApproved" not in seen
    events = log(service, sid)
    decided, approved = one(events, "InteractionResolved"), one(events, "PlanApproved")
    left = [e for e in events if e.type == "SessionModeChanged"][-1]
    completed = [e for e in events if e.type == "ToolCallCompleted"][-1]
    assert decided.seq < approved.seq and decided.actor == "user"
    assert_one_batch([approved, left, completed])
    assert left.data.via == "plan_approval"  # type: ignore[attr-defined]
    assert approved.data.file_written is True  # type: ignore[attr-defined]
    assert plan_path(service.document(sid)["workspace"], sid).read_bytes() == PLAN.encode()
    assert not plan_on(service, sid)
    assert_consistent(service, sid)


def test_pm7_a_failed_write_is_recorded_in_the_second_batch_and_plan_is_left(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PM-7: any other write error is PlanFileWriteFailed before PlanApproved, Plan left."""
    sid = in_plan(service)
    workspace = Path(service.document(sid)["workspace"])
    (workspace / ".zcode").write_text("a file where the directory should be", encoding="utf-8")
    iid = submit(service, sid)["interactionId"]
    batches = Batches(service, monkeypatch)
    done = service.tools.respond(sid, iid, "approve")
    assert done["success"] is True and done["result"]["fileWritten"] is False
    assert batches.seen == [["InteractionResolved"], ["PlanFileWriteFailed", *SECOND_BATCH]]
    events = log(service, sid)
    decided, failed = one(events, "InteractionResolved"), one(events, "PlanFileWriteFailed")
    assert decided.seq < failed.seq
    assert_one_batch(events[failed.seq - 1:])
    assert not plan_on(service, sid)


def test_pm7_a_tui_modify_records_the_edited_plan_before_writing_it(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = in_plan(service, host="tui")
    iid = submit(service, sid)["interactionId"]
    edited = PLAN + "3. One more step.\n"
    batches = Batches(service, monkeypatch)
    done = service.tools.respond(sid, iid, "modify", input={"plan": edited})
    assert done["modelContent"] == APPROVED + edited
    assert batches.seen == [["InteractionResolved"], SECOND_BATCH]
    decided = one(log(service, sid), "InteractionResolved")
    assert decided.data.input == {"plan": edited}  # type: ignore[attr-defined]
    assert one(log(service, sid), "PlanApproved").data.plan == edited  # type: ignore[attr-defined]


def test_pm7_feedback_and_denial_stay_one_batch(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an approval writes outside the log, so only it is decided first."""
    sid = in_plan(service)
    fed, denied = submit(service, sid), submit(service, sid)
    batches = Batches(service, monkeypatch)
    service.tools.respond(sid, fed["interactionId"], "feedback", feedback="More tests.")
    service.tools.respond(sid, denied["interactionId"], "deny")
    assert batches.seen == [
        ["InteractionResolved", "PlanFeedbackGiven", "MessageRecorded", "ToolCallCompleted"],
        ["InteractionResolved", "PlanRejected", "ToolCallCompleted"],
    ]


# -- a stop between the decision and the exit --------------------------------------------------


def decide_and_stop(
    url: str, root: Path, *, renamed: bool = False, approved_before: bool = False
) -> tuple[str, str, str]:
    """A service records the approval and stops before anything else: the decision alone is
    in the log (and, with ``renamed``, the plan file was already renamed in place)."""
    service = SessionService.open(url, workspace_root=root)
    try:
        sid = in_plan(service)
        if approved_before:
            first = submit(service, sid, OLD_PLAN)["interactionId"]
            service.tools.respond(sid, first, "approve")
            service.tools.call(sid, "EnterPlanMode", {})
        pending = submit(service, sid)
        iid, call_id = pending["interactionId"], pending["callId"]
        decision = InteractionResolved(interaction_id=iid, call_id=call_id, decision="approve")
        service.store.append(
            sid, [NewEvent(decision, actor="user", causation_id=call_id)],
            expected_version=service.store.version(sid),
        )
        if renamed:
            target = plan_path(service.summary(sid).workspace, sid)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(PLAN.encode())
    finally:
        service.close()
    return sid, iid, call_id


def test_pm7_a_stop_after_the_decision_is_abandoned_on_the_first_access_and_asked_again(
    url: str, tmp_path: Path
) -> None:
    """PM-7: no exit without PlanApproved; the decision stays, Plan stays on, and the user is
    asked again instead of the call waiting forever (D65)."""
    sid, iid, call_id = decide_and_stop(url, tmp_path)
    reopened = SessionService.open(url, workspace_root=tmp_path)
    try:
        assert log(reopened, sid)[-1].type == "InteractionResolved"  # nothing until accessed
        [again] = reopened.document(sid)["interactions"]
        assert again["callId"] == call_id and again["interactionId"] != iid
        assert again["kind"] == "planApproval" and again["payload"]["plan"] == PLAN
        events = log(reopened, sid)
        decided = one(events, "InteractionResolved")
        cancelled = one(events, "PlanApprovalCancelled")
        asked = events[-1]
        assert [decided.seq + 1, decided.seq + 2] == [cancelled.seq, asked.seq]
        assert_one_batch([cancelled, asked])
        assert asked.type == "InteractionRequested" and cancelled.actor == "system"
        assert cancelled.data.cause == "interrupted"  # type: ignore[attr-defined]
        assert cancelled.causation_id == call_id
        assert plan_on(reopened, sid) and "PlanApproved" not in [e.type for e in events]
        assert reopened.tools.get(sid, call_id).document == {
            "status": "pending", "callId": call_id, "interactionId": again["interactionId"],
        }
        assert reopened.tools.executor.resume(sid) == 0  # settled once
        assert_consistent(reopened, sid)

        done = reopened.tools.respond(sid, again["interactionId"], "approve")
        assert done["success"] is True and done["modelContent"] == APPROVED + PLAN
        events = log(reopened, sid)
        second = [e for e in events if e.type == "InteractionResolved"][-1]
        approved = one(events, "PlanApproved")
        assert cancelled.seq < second.seq < approved.seq
        assert_one_batch(events[approved.seq - 1:])
        assert [e.type for e in events[approved.seq - 1:]] == SECOND_BATCH
        assert not plan_on(reopened, sid)
        assert_consistent(reopened, sid)
    finally:
        reopened.close()


@pytest.mark.parametrize("approved_before", [False, True])
def test_pm7_a_stop_after_the_rename_puts_the_plan_file_back_as_the_log_says(
    url: str, tmp_path: Path, approved_before: bool
) -> None:
    """The file holds only approved plans: the earlier one again, or none (PM-10 reads it)."""
    sid, _iid, _call_id = decide_and_stop(
        url, tmp_path, renamed=True, approved_before=approved_before
    )
    reopened = SessionService.open(url, workspace_root=tmp_path)
    try:
        target = plan_path(reopened.document(sid)["workspace"], sid)  # the first access
        assert "PlanApprovalCancelled" in [e.type for e in log(reopened, sid)]
        if approved_before:
            assert target.read_bytes() == OLD_PLAN.encode()
        else:
            assert not target.exists()
    finally:
        reopened.close()


def test_pm7_a_deleted_session_with_a_decision_on_record_stays_as_it_is(
    url: str, tmp_path: Path
) -> None:
    sid, _iid, _call_id = decide_and_stop(url, tmp_path)
    reopened = SessionService.open(url, workspace_root=tmp_path)
    try:
        reopened.delete_session(sid)
        before = reopened.store.version(sid)
        assert reopened.tools.executor.resume(sid) == 0
        assert reopened.store.version(sid) == before
    finally:
        reopened.close()


def test_pm7_a_run_abandoned_by_another_writer_meanwhile_is_undone(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes on one log: while this one writes the file, another finds the decision
    unfinished and abandons it. This one's second batch then loses the version race, sees
    the plan asked again, removes the file it renamed in place and answers 503."""
    sid = in_plan(service)
    iid = submit(service, sid)["interactionId"]
    fsync = os.fsync

    def other_writer_then_sync(fd: int) -> None:
        monkeypatch.setattr(plan_files.os, "fsync", fsync)  # once
        assert service.tools.executor.resume(sid) == 1
        fsync(fd)

    monkeypatch.setattr(plan_files.os, "fsync", other_writer_then_sync)
    with pytest.raises(ServiceUnavailable) as abandoned:
        service.tools.respond(sid, iid, "approve")
    [again] = service.document(sid)["interactions"]
    assert abandoned.value.details["interactionId"] == again["interactionId"] != iid
    types = [e.type for e in log(service, sid)]
    assert types[-3:] == ["InteractionResolved", "PlanApprovalCancelled", "InteractionRequested"]
    assert "PlanApproved" not in types and plan_on(service, sid)
    assert not plan_path(service.document(sid)["workspace"], sid).exists()


def test_pm7_replay_tells_why_an_approval_was_not_carried_out(
    url: str, tmp_path: Path
) -> None:
    sid, _iid, call_id = decide_and_stop(url, tmp_path)
    reopened = SessionService.open(url, workspace_root=tmp_path)
    try:
        reopened.document(sid)
        note = describe_event(one(log(reopened, sid), "PlanApprovalCancelled"))
    finally:
        reopened.close()
    assert f"approval of the plan of {call_id}" in note
    assert "the service stopped before it was carried out" in note
    assert "Plan stays on (mode yolo underneath)" in note and "asked again" in note
