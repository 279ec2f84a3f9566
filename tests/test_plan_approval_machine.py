"""The plan-approval machine (SPEC PM-6 … PM-9): every answer's one destination, as data.

A submitted plan ends approved, with feedback or rejected; an approval passes through
``approving`` (the decision on record, the file being written, PM-7), which either finishes or
is abandoned back to ``submitted``; an end state takes no answer, and the auto-continue timer
has no move at all (plan approvals never auto-continue).
"""

from __future__ import annotations

import pytest

from eventlog import PlanApprovalCancelled, PlanFeedbackGiven, PlanRejected
from statemachine.plan_approval import (
    INITIAL,
    STATES,
    TRANSITIONS,
    PlanOutcome,
    PlanRefusal,
    abandon_plan,
    build_machine,
    decide_plan,
    next_state,
)


@pytest.mark.parametrize(("answer", "state"), [
    ("approve", "approving"), ("modify", "approving"), ("feedback", "feedback"),
    ("deny", "rejected"), ("headless", "rejected"), ("withdrawn", "withdrawn"),
])
def test_pm7_pm8_pm9_each_answer_has_one_destination(answer: str, state: str) -> None:
    assert next_state(INITIAL, answer) == state


@pytest.mark.parametrize("end", ["approving", "approved", "feedback", "rejected", "withdrawn"])
@pytest.mark.parametrize("answer", ["approve", "feedback", "deny", "headless", "withdrawn"])
def test_an_answered_plan_takes_no_second_answer(end: str, answer: str) -> None:
    refused = next_state(end, answer)
    assert isinstance(refused, PlanRefusal) and end in refused.message


def test_pm7_an_approval_on_record_finishes_or_is_abandoned_back_to_submitted() -> None:
    assert next_state("approving", "finish") == "approved"
    assert next_state("approving", "abandon") == INITIAL
    for state in ("submitted", "approved", "feedback", "rejected"):
        assert isinstance(next_state(state, "finish"), PlanRefusal)
        assert isinstance(next_state(state, "abandon"), PlanRefusal)
    abandoned = abandon_plan("interrupted", call_id="c", plan="p", mode="edit")
    assert abandoned == PlanOutcome("submitted", PlanApprovalCancelled(
        call_id="c", cause="interrupted", mode="edit", plan="p"
    ))


def test_a_withdrawn_plan_records_nothing_of_its_own() -> None:  # issue 21 finding 6, D157
    withdrawn = decide_plan("withdrawn", call_id="c", plan="p", mode="build")
    assert withdrawn == PlanOutcome("withdrawn", None)  # the resolution and the completion do


def test_ho4_the_timer_cannot_answer_a_plan() -> None:
    assert isinstance(next_state(INITIAL, "autoContinued"), PlanRefusal)
    assert not any(t["trigger"] == "auto_continue" for t in TRANSITIONS)


def test_pm8_feedback_and_pm9_rejection_record_their_events() -> None:
    fed = decide_plan("feedback", call_id="c", plan="p", mode="yolo", feedback="more")
    assert fed == PlanOutcome("feedback", PlanFeedbackGiven(
        call_id="c", feedback="more", mode="yolo", plan="p"
    ))
    rejected = decide_plan("headless", call_id="c", plan="p", mode="build")
    assert isinstance(rejected, PlanOutcome)
    assert rejected.event == PlanRejected(by="headless", call_id="c", mode="build", plan="p")
    approved = decide_plan("approve", call_id="c", plan="p", mode="build")
    assert approved == PlanOutcome("approving", None)  # PlanApproved carries the file outcome


def test_the_machine_is_declared_as_data() -> None:
    machine = build_machine()
    assert sorted(machine.states) == sorted(STATES)
    assert {t["dest"] for t in TRANSITIONS} == set(STATES)  # abandon returns to submitted
