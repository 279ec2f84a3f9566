"""Question timers through the service with a fake clock, over both backends (HO-1 … HO-6, HO-8).

Issue 6's acceptance 2: every scenario asserts the exact absolute times. The clock starts at
``T0`` (a fixed instant); a question asked then is at the head at once, so its timer runs
from ``T0``: ``visibleAt`` is ``T0 + 60 s`` and ``deadlineAt`` is ``T0 + 300 s``. The
scheduler's work is done by calling :meth:`TimerService.run_due` after advancing the clock,
exactly what the scheduler thread does. Restarts, the scheduler thread itself and two
processes on one database are in ``test_interaction_timer_restarts.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from timer_support import ASK, TEXTS, Ledger, iso, question, timer

from eventlog import (
    InteractionRequested,
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    ToolCallRequested,
)
from sessionledger.errors import Conflict, NotFound, SessionDeleted
from sessionledger.tools.ask import result_text

MISSING_ANSWERS = "AskUserQuestion requires user answers before execution"


@pytest.fixture(params=["memory", "sqlite"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    subject = Ledger(str(request.param), tmp_path)
    try:
        yield subject
    finally:
        subject.close()


# -- HO-4: the clock starts at the head of the queue ---------------------------------------


def test_ho4_ho7_a_question_counts_down_and_auto_continues_with_absolute_times(
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    assert ledger.timers(sid) == [timer("hiddenGrace", 0)]
    ledger.tick(59.999)
    assert ledger.timers(sid) == [timer("hiddenGrace", 0)]
    ledger.tick(0.001)
    assert ledger.timers(sid) == [timer("countdown", 0)]
    ledger.tick(239.999)
    assert ledger.timers(sid) == [timer("countdown", 0)]
    ledger.tick(0.001)
    assert ledger.timers(sid) == []
    # HO-7: every change is an event carrying the three times; the countdown took effect at
    # visibleAt, and it is the timer that recorded it
    assert ledger.changes(sid) == [
        {"interactionId": pending["interactionId"], "state": "hiddenGrace", "reason": None,
         "effectiveAt": iso(0), "startedAt": iso(0), "visibleAt": iso(60),
         "deadlineAt": iso(300)},
        {"interactionId": pending["interactionId"], "state": "countdown", "reason": None,
         "effectiveAt": iso(60), "startedAt": iso(0), "visibleAt": iso(60),
         "deadlineAt": iso(300)},
    ]
    timed = ledger.events(sid, "InteractionAutoResolutionChanged", "InteractionResolved",
                          "ToolCallCompleted")
    assert [(e.type, e.actor, e.recorded_at) for e in timed] == [
        ("InteractionAutoResolutionChanged", "timer", iso(0)),
        ("InteractionAutoResolutionChanged", "timer", iso(60)),
        ("InteractionResolved", "timer", iso(300)),
        ("ToolCallCompleted", "timer", iso(300)),
    ]


def test_ho4_ho8_the_deadline_completes_the_call_with_the_none_answered_text(
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.tick(300)
    done = ledger.service.tools.get(sid, pending["callId"]).document
    assert done["status"] == "completed" and done["success"] is True
    assert done["modelContent"] == result_text([TEXTS[0]], {})
    assert done["result"]["answers"] == {}
    (resolved,) = ledger.events(sid, "InteractionResolved")
    assert resolved.data.decision == "autoContinued"  # type: ignore[attr-defined]
    assert resolved.causation_id == pending["callId"]


def test_ho8_an_old_client_approve_is_never_taken_as_an_auto_continue(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    done = ledger.service.tools.respond(sid, pending["interactionId"], "approve")
    assert done["success"] is False and done["modelContent"] == MISSING_ANSWERS
    (resolved,) = ledger.events(sid, "InteractionResolved")
    assert resolved.data.decision == "approve"  # type: ignore[attr-defined]
    ledger.tick(600)
    assert len(ledger.events(sid, "InteractionResolved")) == 1


def test_ho4_the_second_question_gets_no_timer_until_the_first_resolves(ledger: Ledger) -> None:
    sid = ledger.session()
    first = ledger.ask(sid, TEXTS[0])
    ledger.advance(10)
    ledger.ask(sid, TEXTS[1])
    assert ledger.timers(sid) == [timer("hiddenGrace", 0), None]
    ledger.tick(290)  # t = 300: the first auto-continues, the second reaches the head now
    assert ledger.timers(sid) == [timer("hiddenGrace", 300)]
    (resolved,) = ledger.events(sid, "InteractionResolved")
    assert resolved.data.interaction_id == first["interactionId"]  # type: ignore[attr-defined]


def test_ho4_an_answer_lets_the_next_question_start_at_the_answer(ledger: Ledger) -> None:
    sid = ledger.session()
    first = ledger.ask(sid, TEXTS[0])
    ledger.ask(sid, TEXTS[1])
    ledger.advance(42.5)
    ledger.service.tools.respond(
        sid, first["interactionId"], "modify",
        input={**question(TEXTS[0]), "answers": {TEXTS[0]: "SQLite"}},
    )
    assert ledger.timers(sid) == [timer("hiddenGrace", 42.5)]
    assert [c["state"] for c in ledger.changes(sid)] == ["hiddenGrace", "hiddenGrace"]


def test_ho4_an_answer_after_the_deadline_finds_it_auto_continued(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.advance(300)  # the scheduler has not run yet; the deadline is the log's
    with pytest.raises(Conflict, match="already resolved"):
        ledger.service.tools.respond(sid, pending["interactionId"], "deny")
    (resolved,) = ledger.events(sid, "InteractionResolved")
    assert resolved.data.decision == "autoContinued"  # type: ignore[attr-defined]


def test_ho4_eligibility_is_fixed_when_the_question_is_registered(ledger: Ledger) -> None:
    sid = ledger.session()
    ledger.service.settings.update({"autoContinueQuestions": False})
    ledger.ask(sid)
    assert ledger.timers(sid) == [None]
    ledger.service.settings.update({"autoContinueQuestions": True})
    ledger.tick(1000)
    assert ledger.timers(sid) == [None]  # registered while off: never counts down
    assert [(c["state"], c["reason"]) for c in ledger.changes(sid)] == [
        ("ineligible", "settingOff")]


# -- HO-1, HO-3: hosts without a clock; plan and tool approvals -------------------------------


def test_ho1_a_tui_question_waits_forever(ledger: Ledger) -> None:
    sid = ledger.session(host="tui")
    ledger.ask(sid)
    ledger.tick(10_000)
    assert ledger.timers(sid) == [None]
    assert ledger.changes(sid) == []


def test_ho3_a_headless_question_is_denied_and_never_timed(ledger: Ledger) -> None:
    sid = ledger.session(host="headless")
    answer = ledger.service.tools.call(sid, ASK, question())
    assert answer.document["status"] == "denied"
    ledger.tick(10_000)
    assert ledger.changes(sid) == [] and ledger.service.document(sid)["interactions"] == []


def _plan_approval(ledger: Ledger, sid: str) -> str:
    """A plan approval as the ExitPlanMode handler will register it (issue 7)."""
    verdict = PermissionVerdict(behavior="ask", reason="needs the user", rule_id="plan.exit")
    events = (
        ToolCallRequested(call_id="call_plan", tool="ExitPlanMode", input={"plan": "do it"},
                          host="protocol"),
        PermissionDecided(call_id="call_plan", tool="ExitPlanMode", decision=verdict),
        InteractionRequested(interaction_id="int_plan", call_id="call_plan",
                             kind="planApproval", payload={"plan": "do it"}),
    )
    ledger.service.store.append(
        sid, [NewEvent(e, actor="model", causation_id="call_plan") for e in events])
    return "int_plan"


def test_ho4_plan_approvals_never_auto_continue_and_block_the_queue(ledger: Ledger) -> None:
    sid = ledger.session()
    _plan_approval(ledger, sid)
    ledger.service.timers.settle(sid)
    ledger.ask(sid)
    ledger.tick(10_000)
    assert ledger.timers(sid) == [None, None]  # the question waits behind the plan
    assert ledger.changes(sid) == []


def test_ho4_tool_approvals_never_auto_continue(ledger: Ledger) -> None:
    (ledger.root / ".sessionledger").mkdir()
    (ledger.root / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["TodoWrite"]\n', encoding="utf-8")
    sid = ledger.session()
    answer = ledger.service.tools.call(sid, "TodoWrite", {"todos": []})
    assert answer.status_code == 202
    ledger.tick(10_000)
    assert ledger.timers(sid) == [None] and ledger.changes(sid) == []


# -- HO-5: activity ------------------------------------------------------------------------


def test_ho5_activity_pauses_the_countdown_for_good_keeping_its_times(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.tick(75)
    wire = ledger.service.timers.activity(sid, pending["interactionId"], "select")
    assert wire["autoResolution"] == timer("paused", 0)
    assert wire["interactionId"] == pending["interactionId"]
    ledger.service.timers.activity(sid, pending["interactionId"], "type")
    ledger.tick(10_000)
    assert ledger.timers(sid) == [timer("paused", 0)]
    assert ledger.service.tools.get(sid, pending["callId"]).document["status"] == "pending"
    assert [(c["state"], c["reason"], c["effectiveAt"]) for c in ledger.changes(sid)] == [
        ("hiddenGrace", None, iso(0)), ("countdown", None, iso(60)),
        ("paused", "userActivity", iso(75))]
    activity = ledger.events(sid, "InteractionUserActivity")
    assert [(e.actor, e.data.action) for e in activity] == [  # type: ignore[attr-defined]
        ("user", "select"), ("user", "type")]


def test_ho5_activity_during_the_silent_grace_pauses_too(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.advance(5)
    ledger.service.timers.activity(sid, pending["interactionId"])
    ledger.tick(400)
    assert ledger.timers(sid) == [timer("paused", 0)]


def test_ho5_activity_on_a_queued_question_makes_it_ineligible(ledger: Ledger) -> None:
    sid = ledger.session()
    first = ledger.ask(sid, TEXTS[0])
    second = ledger.ask(sid, TEXTS[1])
    wire = ledger.service.timers.activity(sid, second["interactionId"], "move")
    assert wire["autoResolution"] is None
    ledger.advance(30)
    ledger.service.tools.respond(sid, first["interactionId"], "deny")
    ledger.tick(10_000)
    assert ledger.timers(sid) == [None]  # it reached the head, engaged: no clock
    assert [(c["interactionId"], c["state"], c["reason"]) for c in ledger.changes(sid)] == [
        (first["interactionId"], "hiddenGrace", None),
        (second["interactionId"], "ineligible", "userActivity")]


def test_ho5_activity_on_a_resolved_or_unknown_question_is_refused(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.service.tools.respond(sid, pending["interactionId"], "deny")
    version = ledger.service.store.version(sid)
    with pytest.raises(Conflict, match="already resolved") as refused:
        ledger.service.timers.activity(sid, pending["interactionId"])
    assert refused.value.status == 409
    with pytest.raises(NotFound):
        ledger.service.timers.activity(sid, "int_unknown")
    other = ledger.session()
    with pytest.raises(NotFound):  # an interaction of another session
        ledger.service.timers.activity(other, pending["interactionId"])
    assert ledger.service.store.version(sid) == version


def test_ho5_activity_after_the_deadline_is_409_the_question_auto_continued(
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.advance(300)
    with pytest.raises(Conflict):
        ledger.service.timers.activity(sid, pending["interactionId"])
    (resolved,) = ledger.events(sid, "InteractionResolved")
    assert resolved.data.decision == "autoContinued"  # type: ignore[attr-defined]


def test_ho5_activity_on_a_deleted_session_is_410(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.service.delete_session(sid)
    with pytest.raises(SessionDeleted):
        ledger.service.timers.activity(sid, pending["interactionId"])
    ledger.tick(1000)  # a deleted session's timers never move again
    assert [c["state"] for c in ledger.changes(sid)] == ["hiddenGrace"]


# -- HO-6: the setting -----------------------------------------------------------------------


def test_ho6_turning_off_pauses_running_timers_and_makes_queued_ones_ineligible(
    ledger: Ledger,
) -> None:
    grace, counting = ledger.session(), ledger.session()
    ledger.ask(counting)
    ledger.tick(61)
    ledger.ask(grace)              # at t = 61: hiddenGrace from 61
    ledger.ask(grace, TEXTS[1])    # queued behind it
    ledger.ask(counting, TEXTS[1])  # queued behind the countdown
    ledger.advance(9)              # t = 70
    assert ledger.service.settings.update({"autoContinueQuestions": False}) == {
        "autoContinueQuestions": False}
    assert ledger.timers(grace) == [timer("paused", 61), None]
    assert ledger.timers(counting) == [timer("paused", 0), None]
    for sid in (grace, counting):
        assert [(c["state"], c["reason"], c["effectiveAt"]) for c in ledger.changes(sid)][-2:] == [
            ("paused", "settingTurnedOff", iso(70)), ("ineligible", "settingTurnedOff", iso(70))]
    (change,) = ledger.events("sys_settings")
    assert change.to_wire()["data"] == {
        "name": "autoContinueQuestions", "previous": True, "value": False}
    assert change.actor == "user"


def test_ho6_turning_on_again_restarts_nothing_and_applies_to_new_questions(
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    first = ledger.ask(sid, TEXTS[0])
    ledger.ask(sid, TEXTS[1])
    ledger.advance(10)
    ledger.service.settings.update({"autoContinueQuestions": False})
    ledger.advance(10)
    ledger.service.settings.update({"autoContinueQuestions": True})
    ledger.service.tools.respond(sid, first["interactionId"], "deny")
    ledger.tick(1000)
    assert ledger.timers(sid) == [None]  # queued when it was turned off: ineligible
    ledger.ask(sid, TEXTS[2])
    assert ledger.timers(sid) == [None, None]  # behind the ineligible one
    assert len(ledger.events("sys_settings")) == 2
    assert ledger.service.settings.update({"autoContinueQuestions": True}) == {
        "autoContinueQuestions": True}
    assert len(ledger.events("sys_settings")) == 2  # no change, nothing appended


def test_ho6_a_new_session_after_turning_on_counts_down_again(ledger: Ledger) -> None:
    ledger.service.settings.update({"autoContinueQuestions": False})
    ledger.advance(1)
    ledger.service.settings.update({"autoContinueQuestions": True})
    sid = ledger.session()
    ledger.ask(sid)
    assert ledger.timers(sid) == [timer("hiddenGrace", 1)]
