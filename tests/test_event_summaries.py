"""One summary per event type, written once (issue 23.2, 23.8): ``describe_event`` gives
every type of the catalog a one-line description — the decision events included — which
``replay`` prints and ``GET /v1/sessions/{id}/timeline`` serves to the web page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eventlog import CATALOG, RecordedEvent
from sessionledger import SessionService
from sessionledger.errors import InvalidInput, SessionNotFound
from sessionledger.service.documents import (
    DESCRIBERS,
    PLAN_DESCRIBERS,
    describe_event,
    timeline_entry,
)

PLAN = "# Migrate\n\n1. Back up\n2. Move the table"
SAMPLES: dict[str, dict[str, Any]] = {
    "SessionCreated": {"workspace": "/w", "host": "protocol"},
    "SessionModeChanged": {"previousMode": "build", "previousPlanEnabled": False,
                           "mode": "yolo", "planEnabled": False, "via": "mode_command"},
    "GoalStarted": {"objective": "Ship it"},
    "GoalEnded": {"objective": "Ship it"},
    "MessageRecorded": {"role": "user", "content": "hello"},
    "SessionDeleted": {},
    "ToolCallRequested": {"callId": "call_1", "tool": "Bash", "input": {"command": "ls"},
                          "host": "protocol"},
    "PermissionDecided": {"callId": "call_1", "tool": "Bash", "decision": {
        "behavior": "ask", "reason": "Bash asks in build mode", "ruleId": "build.bash"}},
    "InteractionRequested": {"interactionId": "int_1", "callId": "call_1",
                             "kind": "askUserQuestion",
                             "payload": {"questions": [{"question": "Which format?"}]}},
    "InteractionResolved": {"interactionId": "int_1", "callId": "call_1",
                            "decision": "autoContinued"},
    "ToolCallCompleted": {"callId": "call_1", "tool": "Bash", "status": "completed",
                          "success": True, "modelContent": "file.txt"},
    "TodosWritten": {"todos": [{"content": "a", "priority": "high", "status": "completed"},
                               {"content": "b", "priority": "low", "status": "pending"}]},
    "ReminderInjected": {"kind": "todo_reminder", "text": "Remember the todos"},
    "ContextCompacted": {},
    "InteractionAutoResolutionChanged": {"interactionId": "int_1", "state": "countdown",
                                         "effectiveAt": "2025-01-01T00:00:01.000Z",
                                         "deadlineAt": "2025-01-01T00:00:05.000Z"},
    "InteractionUserActivity": {"interactionId": "int_1", "action": "select"},
    "SettingChanged": {"name": "autoContinueQuestions", "previous": True, "value": False},
    "SessionModelSelected": {"model": "openai/gpt-5", "level": "high"},
    "AnswerInChanged": {"answerIn": "here", "previous": "host"},
    "CronScheduleCreated": {"scheduleId": "cron_1", "cron": "0 9 * * 1",
                            "prompt": "Weekly report"},
    "CronScheduleUpdated": {"scheduleId": "cron_1", "enabled": False},
    "CronScheduleDeleted": {"scheduleId": "cron_1"},
    "OffPeakPromptCreated": {"offPeakId": "op_1", "prompt": "Reindex",
                             "dueAt": "2025-01-01T22:00:00.000Z",
                             "windowEndAt": "2025-01-02T06:00:00.000Z"},
    "PlanSubmitted": {"callId": "call_2", "plan": PLAN},
    "PlanApproved": {"callId": "call_2", "plan": PLAN, "mode": "build", "fileWritten": True,
                     "path": ".zcode/plans/p.md"},
    "PlanApprovalCancelled": {"callId": "call_2", "plan": PLAN, "mode": "build",
                              "cause": "interrupted"},
    "PlanFileWriteFailed": {"callId": "call_2", "path": "p.md", "error": "disk full"},
    "PlanFeedbackGiven": {"callId": "call_2", "plan": PLAN, "mode": "build",
                          "feedback": "smaller steps"},
    "PlanRejected": {"callId": "call_2", "plan": PLAN, "mode": "build", "by": "user"},
}


def recorded(type_name: str, data: dict[str, Any], seq: int = 1) -> RecordedEvent:
    return RecordedEvent(
        global_position=seq, session_id="sess_1", seq=seq, type=type_name, schema_version=1,
        data=CATALOG[type_name].model_validate(data), recorded_at="2025-01-01T00:00:00.000Z",
        actor="user", causation_id=None, correlation_id=None, prev_hash="0", hash="1",
    )


def test_every_catalog_type_has_a_one_line_summary() -> None:  # issue 23.2, 23.8
    assert set(SAMPLES) == set(CATALOG), "a new event type needs a sample and a describer"
    for type_name, data in SAMPLES.items():
        event = recorded(type_name, data)
        note = describe_event(event)
        raw = json.dumps(event.to_wire()["data"], ensure_ascii=False, separators=(",", ":"))
        assert type_name in DESCRIBERS or type_name in PLAN_DESCRIBERS, type_name
        assert note and "\n" not in note, (type_name, note)
        assert not raw.startswith(note.rstrip("…")), (type_name, note)  # not the raw payload
        assert not note.startswith("{"), (type_name, note)


def test_the_decision_events_read_as_sentences() -> None:  # issue 23.8
    notes = {t: describe_event(recorded(t, SAMPLES[t])) for t in SAMPLES}
    assert notes["ToolCallRequested"] == (
        'Bash call_1 requested (protocol host), input {"command":"ls"}')
    assert notes["PermissionDecided"] == (
        'Bash call_1: ask by rule build.bash (service), "Bash asks in build mode"')
    assert notes["InteractionRequested"] == 'askUserQuestion int_1 for call_1: "Which format?"'
    assert notes["InteractionResolved"] == "int_1 of call_1: unanswered — auto-continued"
    assert notes["ToolCallCompleted"] == 'Bash succeeded (call_1): "file.txt"'


def test_the_timeline_window(tmp_path: Path) -> None:  # issue 23.2
    service = SessionService.open(f"sqlite:///{tmp_path / 'l.db'}", workspace_root=tmp_path)
    try:
        sid = service.create_session()["sessionId"]
        for n in range(9):
            service.set_mode(sid, "yolo" if n % 2 == 0 else "build")  # seq 2..10
        newest = service.timeline(sid, limit=4)
        assert [e["seq"] for e in newest["entries"]] == [7, 8, 9, 10]
        assert newest["version"] == 10 and newest["hasEarlier"] is True
        assert set(newest["entries"][0]) == {"seq", "recordedAt", "actor", "type", "summary"}
        assert newest["entries"][0]["summary"] == describe_event(
            next(service.iter_events(sid, after=6)))
        earlier = service.timeline(sid, before=3, limit=4)
        assert [e["seq"] for e in earlier["entries"]] == [1, 2] and not earlier["hasEarlier"]
        later = service.timeline(sid, after=8, limit=4)
        assert [e["seq"] for e in later["entries"]] == [9, 10]
        assert service.timeline(sid, after=10)["entries"] == []
        assert service.timeline(sid, before=1)["entries"] == []
        service.delete_session(sid)
        assert service.timeline(sid, limit=1)["entries"][0]["type"] == "SessionDeleted"
        for bad in ({"limit": 0}, {"limit": 1001}, {"before": -1}, {"after": 1, "before": 2}):
            with pytest.raises(InvalidInput):
                service.timeline(sid, **bad)
        with pytest.raises(SessionNotFound):
            service.timeline("sess_missing")
    finally:
        service.close()


def test_an_entry_names_the_hosts_own_time() -> None:  # CC-9
    data = {**SAMPLES["MessageRecorded"], "occurredAt": "2024-12-31T23:00:00.000Z"}
    entry = timeline_entry(recorded("MessageRecorded", data, seq=3))
    assert entry["occurredAt"] == "2024-12-31T23:00:00.000Z" and entry["seq"] == 3
