"""Plan mode end to end in process (SPEC §7 PM-1 … PM-10, ES-3, ES-7; issue 7).

Each test names the PM requirement it checks and compares the exact texts of SPEC §7. The
service runs over both store backends; the plan file lands in the session's workspace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tool_support import open_service

from eventlog import RecordedEvent
from sessionledger import SessionService
from sessionledger.errors import InvalidInput, ServiceUnavailable
from sessionledger.tools import plan_files
from sessionledger.tools.plan import ENTER_DESCRIPTION
from sessionledger.tools.plan_files import READ_LIMIT, plan_path

ENTER_REASON = "EnterPlanMode switches to plan mode without a permission prompt"
EXIT_OUTSIDE = "ExitPlanMode can only be used while plan mode is active"
GUIDANCE_END = "DO NOT write or edit any files yet"
APPROVED = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)
NOT_APPROVED = "The plan was not approved by the user."
HEADLESS = "No permission client configured for ExitPlanMode"
PLAN = "# Plan\n\n1. Écrire les tests 😀\n2. Then the code.  \n"
STOP = {"reason": "plan_exit_denied", "stopTurnAfterResult": True}


@pytest.fixture
def service(backend: str, tmp_path: Path) -> Iterator[SessionService]:
    with open_service(backend, tmp_path, config=None) as opened:
        yield opened


def in_plan(service: SessionService, *, host: str = "protocol", mode: str = "yolo") -> str:
    sid: str = service.create_session(mode=mode, host=host)["sessionId"]  # type: ignore[arg-type]
    assert service.tools.call(sid, "EnterPlanMode", {}).document["success"] is True
    return sid


def submit(service: SessionService, sid: str, plan: str = PLAN, **extra: Any) -> str:
    answer = service.tools.call(sid, "ExitPlanMode", {"plan": plan, **extra})
    assert answer.status_code == 202
    return str(answer.document["interactionId"])


def events(service: SessionService, sid: str) -> list[RecordedEvent]:
    return list(service.store.read_session(sid))


def types(service: SessionService, sid: str) -> list[str]:
    return [e.type for e in events(service, sid)]


def execution(service: SessionService, sid: str) -> dict[str, Any]:
    state: dict[str, Any] = service.document(sid)["executionState"]
    return state


def plan_file(service: SessionService, sid: str) -> Path:
    return plan_path(service.document(sid)["workspace"], sid)


# -- PM-1 / PM-2 ----------------------------------------------------------------------------


def test_pm1_enter_plan_mode_is_allowed_with_guidance_and_keeps_the_mode(
    service: SessionService,
) -> None:
    sid = service.create_session(mode="yolo")["sessionId"]
    done = service.tools.call(sid, "EnterPlanMode", {}).document
    assert done["status"] == "completed" and done["success"] is True
    assert done["modelContent"].endswith(GUIDANCE_END)
    assert done["modelContent"].count("\n1. ") == 1 and "\n6. " in done["modelContent"]
    assert execution(service, sid) == {"mode": "yolo", "planEnabled": True, "goal": None}
    decided = [e for e in events(service, sid) if e.type == "PermissionDecided"][-1]
    assert decided.data.decision.reason == ENTER_REASON  # type: ignore[attr-defined]
    assert decided.data.decision.rule_id == "tool.plan.enter"  # type: ignore[attr-defined]


def test_pm1_es3_enter_plan_mode_in_plan_succeeds_and_appends_no_state_event(
    service: SessionService,
) -> None:
    sid = in_plan(service)
    before = types(service, sid).count("SessionModeChanged")
    assert service.tools.call(sid, "EnterPlanMode", {}).document["success"] is True
    assert types(service, sid).count("SessionModeChanged") == before


def test_pm1_description_names_the_situations_and_claims_no_approval() -> None:
    for situation in ("New feature", "Multiple valid approaches", "Architectural",
                      "Multi-file", "Unclear requirements"):
        assert situation in ENTER_DESCRIPTION
    assert ENTER_DESCRIPTION.count("\n7. ") == 1
    assert "REQUIRES user approval" not in ENTER_DESCRIPTION
    assert "must consent" not in ENTER_DESCRIPTION


def test_es5_enter_plan_mode_with_a_goal_is_refused_as_a_failed_call(
    service: SessionService,
) -> None:
    sid = service.create_session()["sessionId"]
    service.start_goal(sid, "ship it")
    done = service.tools.call(sid, "EnterPlanMode", {}).document
    assert done["success"] is False
    assert done["modelContent"] == "Plan and Goal cannot be active at the same time."
    assert execution(service, sid)["planEnabled"] is False


def test_pm2_exit_plan_mode_outside_plan_is_denied(service: SessionService) -> None:
    sid = service.create_session(mode="yolo")["sessionId"]
    done = service.tools.call(sid, "ExitPlanMode", {"plan": PLAN}).document
    assert done["status"] == "denied"
    assert done["permission"] == {
        "behavior": "deny", "reason": EXIT_OUTSIDE, "ruleId": "mode.plan.exitOnly"
    }
    assert "PlanSubmitted" not in types(service, sid)


# -- PM-6: the input and the questionnaire ---------------------------------------------------


@pytest.mark.parametrize("bad", [
    {}, {"plan": ""}, {"plan": " \n\t "}, {"plan": "x" * 20001}, {"plan": 5},
    {"plan": "ok", "allowedPrompts": [{"tool": "Write", "prompt": "x"}]},
])
def test_pm6_invalid_input_is_422_and_appends_nothing(
    service: SessionService, bad: dict[str, Any]
) -> None:
    sid = in_plan(service)
    before = service.store.version(sid)
    with pytest.raises(InvalidInput):
        service.tools.call(sid, "ExitPlanMode", bad)
    assert service.store.version(sid) == before


def test_pm6_plan_of_20000_code_points_is_stored_verbatim(service: SessionService) -> None:
    sid = in_plan(service)
    plan = "😀" * 20000  # code points, not bytes or UTF-16 units
    prompts = [{"tool": "Bash", "prompt": "run the tests"}]
    iid = submit(service, sid, plan, allowedPrompts=prompts, extra={"kept": True})
    submitted = [e for e in events(service, sid) if e.type == "PlanSubmitted"]
    assert submitted[0].data.plan == plan  # type: ignore[attr-defined]
    done = service.tools.respond(sid, iid, "approve")
    assert done["result"]["allowedPrompts"] == prompts
    assert done["modelContent"] == APPROVED + plan


def test_pm6_protocol_questionnaire_and_blank_feedback_is_422(service: SessionService) -> None:
    sid = in_plan(service)
    iid = submit(service, sid)
    [interaction] = service.document(sid)["interactions"]
    assert interaction["kind"] == "planApproval"
    [question] = interaction["payload"]["questions"]
    assert question["question"] == "Review this implementation plan."
    assert [o["label"] for o in question["options"]] == ["Approve"]
    assert interaction["payload"]["plan"] == PLAN
    assert interaction["autoResolution"] is None  # plan approvals never auto-continue
    before = service.store.version(sid)
    with pytest.raises(InvalidInput):
        service.tools.respond(sid, iid, "feedback", feedback="   ")
    assert service.store.version(sid) == before


def _read_only(*_args: Any, **_kwargs: Any) -> tuple[int, str]:
    raise PermissionError(13, "Permission denied")


# -- PM-7: approval ---------------------------------------------------------------------------


def test_pm7_es3_approve_writes_the_file_and_leaves_plan_in_one_batch(
    service: SessionService,
) -> None:
    sid = in_plan(service, mode="yolo")
    iid = submit(service, sid)
    done = service.tools.respond(sid, iid, "approve")
    assert done["success"] is True and done["modelContent"] == APPROVED + PLAN
    assert plan_file(service, sid).read_bytes() == PLAN.encode("utf-8")
    assert execution(service, sid) == {"mode": "yolo", "planEnabled": False, "goal": None}
    log = events(service, sid)
    approved = next(e for e in log if e.type == "PlanApproved")
    changed = next(e for e in log if e.type == "SessionModeChanged" and e.seq > approved.seq)
    resolved = next(e for e in log if e.type == "InteractionResolved")
    assert resolved.seq < approved.seq and changed.seq == approved.seq + 1
    assert approved.actor == "user" and approved.data.file_written  # type: ignore[attr-defined]
    assert changed.data.via == "plan_approval"  # type: ignore[attr-defined]
    assert not list(plan_file(service, sid).parent.glob(".plan-*"))  # no temp file left


def test_pm7_read_only_plans_directory_is_recorded_and_plan_is_left_anyway(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = in_plan(service)
    plans = plan_file(service, sid).parent
    plans.mkdir(parents=True)
    plans.chmod(0o500)
    if os.geteuid() == 0:  # root ignores the mode bits: fail the way a user would
        monkeypatch.setattr(plan_files, "_new_temp", _read_only)
    try:
        done = service.tools.respond(sid, submit(service, sid), "approve")
    finally:
        plans.chmod(0o700)
    assert done["success"] is True and done["modelContent"] == APPROVED + PLAN
    assert not plan_file(service, sid).exists()
    assert execution(service, sid)["planEnabled"] is False
    failed = [e for e in events(service, sid) if e.type == "PlanFileWriteFailed"]
    assert len(failed) == 1 and "Permission" in failed[0].data.error  # type: ignore[attr-defined]
    report = service.audit(sid)
    assert report["ok"] is True and "not written" in report["notes"][0]


def test_pm7_cancelled_write_appends_no_exit_and_asks_again(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision is on record before the write; the cancelled write appends no exit, the
    approval is abandoned at once (``cancelled``) and the plan asked again (D64, D65)."""
    sid = in_plan(service)
    iid = submit(service, sid)
    before = service.store.version(sid)
    handler = service.tools.executor._registry.handler("ExitPlanMode")
    monkeypatch.setattr(handler, "_gone", lambda _sid: True)  # deleted during the write
    with pytest.raises(ServiceUnavailable) as cancelled:
        service.tools.respond(sid, iid, "approve")
    monkeypatch.undo()
    log = events(service, sid)[before:]
    assert [e.type for e in log] == [
        "InteractionResolved", "PlanApprovalCancelled", "InteractionRequested",
    ]
    assert log[1].data.cause == "cancelled" and log[1].actor == "system"  # type: ignore[attr-defined]
    assert execution(service, sid)["planEnabled"] is True
    assert not plan_file(service, sid).exists()
    again = cancelled.value.details["interactionId"]
    assert again != iid
    assert [i["interactionId"] for i in service.document(sid)["interactions"]] == [again]
    done = service.tools.respond(sid, again, "approve")  # the user answers it anew
    assert done["success"] is True and execution(service, sid)["planEnabled"] is False


# -- PM-8 / PM-9 ------------------------------------------------------------------------------


def test_pm8_feedback_is_a_real_user_message_and_plan_stays_on(
    service: SessionService,
) -> None:
    sid = in_plan(service)
    done = service.tools.respond(sid, submit(service, sid), "feedback", feedback="Add tests.")
    assert done["status"] == "completed" and done["success"] is False
    assert done["modelContent"] == NOT_APPROVED
    assert done["followUpUserInput"] == {
        "input": "Add tests.", "reasonSource": "plan_approval_feedback"
    }
    assert done["turnControl"] is None
    log = events(service, sid)
    message = next(e for e in log if e.type == "MessageRecorded")
    given = next(e for e in log if e.type == "PlanFeedbackGiven")
    assert message.data.role == "user" and message.data.kind == "real"  # type: ignore[attr-defined]
    assert message.data.source == "plan_approval_feedback"  # type: ignore[attr-defined]
    assert message.data.content == "Add tests."  # type: ignore[attr-defined]
    completed = next(e for e in log if e.type == "ToolCallCompleted" and e.seq > given.seq)
    assert completed.global_position - message.global_position == completed.seq - message.seq
    assert execution(service, sid)["planEnabled"] is True
    assert service.turns.counters(sid).users_since_plan_reminder == 1


def test_pm9_deny_stops_the_turn_and_plan_stays_on(service: SessionService) -> None:
    sid = in_plan(service)
    done = service.tools.respond(sid, submit(service, sid), "deny")
    assert done["success"] is False and done["turnControl"] == STOP
    assert execution(service, sid)["planEnabled"] is True
    assert not plan_file(service, sid).exists()
    assert "PlanRejected" in types(service, sid)


def test_pm9_headless_is_denied_with_the_turn_stop(service: SessionService) -> None:
    sid = in_plan(service, host="headless")
    done = service.tools.call(sid, "ExitPlanMode", {"plan": PLAN}).document
    assert done["status"] == "denied" and done["modelContent"] == HEADLESS
    assert done["turnControl"] == STOP
    rejected = [e for e in events(service, sid) if e.type == "PlanRejected"]
    assert rejected[0].data.by == "headless"  # type: ignore[attr-defined]
    assert execution(service, sid)["planEnabled"] is True


# -- PM-10: the plan file after a compaction ------------------------------------------------


def test_pm10_plan_file_reference_after_each_compaction_only(service: SessionService) -> None:
    sid = in_plan(service)
    service.tools.respond(sid, submit(service, sid), "approve")
    assert all(r.kind != "plan_file_reference" for r in service.turns.prepare_request(sid, []))
    service.turns.compact(sid)
    reminders = service.turns.prepare_request(sid, ["TodoWrite"])
    [ref] = [r for r in reminders if r.kind == "plan_file_reference"]
    assert ref.text.startswith(f"A plan file exists from plan mode at: {plan_file(service, sid)}")
    assert PLAN in ref.text and ref.text.rstrip().endswith("continue working on it.")
    assert all(r.kind != "plan_file_reference" for r in service.turns.prepare_request(sid, []))


def test_pm10_no_reference_without_a_file(service: SessionService) -> None:
    sid = in_plan(service)
    service.turns.compact(sid)
    assert all(r.kind != "plan_file_reference" for r in service.turns.prepare_request(sid, []))


def test_pm10_reference_is_capped_and_drops_a_partial_character(
    service: SessionService,
) -> None:
    sid = service.create_session()["sessionId"]
    path = plan_file(service, sid)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"a" + "é".encode() * READ_LIMIT)  # the cap falls inside a character
    service.turns.compact(sid)
    [ref] = [r for r in service.turns.prepare_request(sid, [])
             if r.kind == "plan_file_reference"]
    assert "a" + "é" * ((READ_LIMIT - 1) // 2) + "\n" in ref.text
    assert "\ufffd" not in ref.text


# -- ES-7: subagents ----------------------------------------------------------------------------


def test_es7_subagent_spawned_in_plan_starts_in_plan_without_the_plan_tools(
    service: SessionService,
) -> None:
    parent = in_plan(service)
    child = service.create_session(parent_session_id=parent, mode="edit")["sessionId"]
    assert execution(service, child) == {"mode": "edit", "planEnabled": True, "goal": None}
    surface = service.tools.surface(child)
    assert "EnterPlanMode" not in surface and "ExitPlanMode" not in surface
    assert {"EnterPlanMode", "ExitPlanMode"} <= set(service.tools.surface(parent))
    with pytest.raises(InvalidInput):
        service.tools.call(child, "ExitPlanMode", {"plan": PLAN})


def test_pm9_rules_apply_only_while_plan_is_on(service: SessionService) -> None:
    sid = in_plan(service)
    first, second = submit(service, sid), submit(service, sid)
    service.set_mode(sid, "build")  # Plan left by another path while both wait
    denied = service.tools.respond(sid, first, "deny")
    assert denied["success"] is False and denied["turnControl"] is None
    fed = service.tools.respond(sid, second, "feedback", feedback="later")
    assert fed["followUpUserInput"] is None
    assert "MessageRecorded" not in types(service, sid)


def test_pm6_tui_gets_an_ordinary_approval_request(service: SessionService) -> None:
    sid = in_plan(service, host="tui")
    iid = submit(service, sid, allowedPrompts=[{"tool": "Bash", "prompt": "run tests"}])
    [interaction] = service.document(sid)["interactions"]
    payload = interaction["payload"]
    assert interaction["kind"] == "planApproval" and "questions" not in payload
    assert payload["tool"] == "ExitPlanMode" and payload["input"]["plan"] == PLAN
    assert interaction["autoResolution"] is None
    done = service.tools.respond(sid, iid, "approve")
    assert done["modelContent"] == APPROVED + PLAN


def test_pm7_a_tui_modify_approves_the_edited_plan(service: SessionService) -> None:
    sid = in_plan(service, host="tui")
    iid = submit(service, sid)
    edited = PLAN + "3. One more step\n"
    done = service.tools.respond(sid, iid, "modify", input={"plan": edited})
    assert done["modelContent"] == APPROVED + edited
    assert plan_file(service, sid).read_text(encoding="utf-8") == edited


def test_rs2_handoff_finds_the_plan_of_a_real_approval(service: SessionService) -> None:
    sid = in_plan(service)
    service.tools.respond(sid, submit(service, sid, "the rejected one"), "deny")
    service.tools.respond(sid, submit(service, sid), "approve")
    caller = service.create_session()["sessionId"]
    document = service.tools.call(caller, "ReadSessionContext", {
        "sessionId": sid, "query": "continue", "strategy": "handoff",
    }).document
    assert document["success"] is True
    assert PLAN.strip() in document["modelContent"]
    assert "the rejected one" not in document["modelContent"]


def test_pm5_pm10_order_runtime_mode_then_plan_file_then_todo(service: SessionService) -> None:
    sid = in_plan(service)
    service.tools.respond(sid, submit(service, sid), "approve")
    service.tools.call(sid, "EnterPlanMode", {})  # a new Plan period, the old file stays
    for number in range(12):
        service.turns.record_message(sid, "assistant", f"step {number}")
    service.turns.compact(sid)
    continued = service.turns.prepare_request(sid, ["TodoWrite"], continuation=True)
    assert [r.kind for r in continued] == ["runtime_mode", "plan_file_reference"]
    service.turns.compact(sid)
    for number in range(12):
        service.turns.record_message(sid, "assistant", f"more {number}")
    reminders = service.turns.prepare_request(sid, ["TodoWrite"])
    assert [r.kind for r in reminders] == ["plan_file_reference", "todo_reminder"]


def test_pm7_session_deleted_during_the_write_leaves_plan_on(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance 3: the deletion lands between writing the temporary file and the rename."""
    sid = in_plan(service)
    iid = submit(service, sid)
    fsync = os.fsync

    def delete_then_sync(fd: int) -> None:
        service.delete_session(sid)
        fsync(fd)

    monkeypatch.setattr(plan_files.os, "fsync", delete_then_sync)
    target = plan_file(service, sid)
    with pytest.raises(ServiceUnavailable):
        service.tools.respond(sid, iid, "approve")
    assert not target.exists()
    assert not list(target.parent.iterdir())  # the temporary file is gone
    summary = service.summary(sid, allow_deleted=True)
    assert summary.execution.plan_enabled is True
    tail = [e.type for e in events(service, sid)][-2:]
    assert tail == ["InteractionResolved", "SessionDeleted"]  # the decision, then no exit
    assert "PlanApproved" not in types(service, sid)


def test_pm7_shutdown_during_the_write_leaves_plan_on_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance 3: the service stops while the plan is written; reopened, Plan is on and
    the approval waits again, asked anew on the session's first access (D65)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    service = SessionService.open(url, workspace_root=tmp_path)
    sid = in_plan(service)
    iid = submit(service, sid)
    fsync = os.fsync

    def stop_then_sync(fd: int) -> None:
        service.close()
        fsync(fd)

    monkeypatch.setattr(plan_files.os, "fsync", stop_then_sync)
    with pytest.raises(ServiceUnavailable):
        service.tools.respond(sid, iid, "approve")
    monkeypatch.undo()
    reopened = SessionService.open(url, workspace_root=tmp_path)
    try:
        assert execution(reopened, sid)["planEnabled"] is True
        [again] = reopened.document(sid)["interactions"]
        assert again["interactionId"] != iid and again["kind"] == "planApproval"
        cancelled = [e for e in events(reopened, sid) if e.type == "PlanApprovalCancelled"]
        assert [e.data.cause for e in cancelled] == ["interrupted"]  # type: ignore[attr-defined]
        assert not plan_path(reopened.document(sid)["workspace"], sid).exists()
        done = reopened.tools.respond(sid, again["interactionId"], "approve")  # after restart
        assert done["success"] is True and execution(reopened, sid)["planEnabled"] is False
    finally:
        reopened.close()


@pytest.mark.parametrize("sub", ["a b", "é 中文 😀", "x/../y", "deep/er"])
def test_pm7_awkward_session_workspaces_get_the_file_inside_their_plans_directory(
    service: SessionService, sub: str
) -> None:
    """Acceptance 2 through the service: the session's own workspace, resolved."""
    workspace = service.workspace_root / sub
    workspace.mkdir(parents=True, exist_ok=True)
    sid = service.create_session(mode="plan", workspace=str(workspace))["sessionId"]
    before = {p for p in service.workspace_root.rglob("*") if p.is_file()}
    service.tools.respond(sid, submit(service, sid), "approve")
    after = {p for p in service.workspace_root.rglob("*") if p.is_file()}
    expected = workspace.resolve() / ".zcode" / "plans" / f"plan-{sid}.md"
    assert after - before == {expected}
    assert expected.read_text(encoding="utf-8") == PLAN


def test_es6_plan_tools_update_the_runtime_memory_and_tell_its_subscribers(
    service: SessionService,
) -> None:
    sid = service.create_session(mode="edit")["sessionId"]
    assert service.runtime.state(sid).plan_enabled is False  # loaded into memory
    told: list[Any] = []
    service.runtime.subscribe(told.append)
    service.tools.call(sid, "EnterPlanMode", {})
    assert service.runtime.state(sid).plan_enabled is True
    service.tools.respond(sid, submit(service, sid), "approve")
    state = service.runtime.state(sid)
    assert (state.mode, state.plan_enabled) == ("edit", False)
    assert [[e.type for e in result.events] for result in told] == [
        ["SessionModeChanged"], ["SessionModeChanged"],
    ]
    assert told[-1].version == service.store.version(sid)
