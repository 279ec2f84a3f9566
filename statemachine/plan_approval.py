"""The outcomes of one ExitPlanMode call as a ``transitions`` machine (PM-6 … PM-9).

An ExitPlanMode call in Plan is *submitted* (waiting for the user). The user's answer, or a
headless host that has nobody to ask, moves it to exactly one end: *approved* (PM-7: the plan
file is written and Plan is left), *feedback* (PM-8: the feedback becomes a user message and
Plan stays on), *rejected* (PM-9: the turn ends and Plan stays on) or *withdrawn* (the
caller cancelled its request before anyone answered: nothing approved, Plan stays on, D157).
An approval passes through *approving*: the user's decision is on record, the plan file is
being written, and ``PlanApproved`` with the exit from Plan is not appended yet. From there
``finish`` leads to *approved*, and ``abandon`` — the write was cancelled, or the service
stopped in between — back to *submitted* (``PlanApprovalCancelled``; the plan is asked again
and Plan stays on). The machine is the one place that says which answer leads where;
:func:`decide_plan` and :func:`abandon_plan` are pure and return the outcome with the event
that records it, or a :class:`PlanRefusal` for an answer with no move (a second answer, or
``modify`` with no approval meaning). Auto-continue is not a move: plan approvals are never
answered by the timer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from transitions import Machine, MachineError

from eventlog import (
    Event,
    PermissionMode,
    PlanApprovalCancelCause,
    PlanApprovalCancelled,
    PlanFeedbackGiven,
    PlanRejected,
)

from . import quiet_machine

__all__ = [
    "INITIAL",
    "STATES",
    "TRANSITIONS",
    "Answer",
    "Cause",
    "PlanApprovalModel",
    "PlanOutcome",
    "PlanRefusal",
    "abandon_plan",
    "build_machine",
    "decide_plan",
    "next_state",
]

STATES: list[str] = ["submitted", "approving", "approved", "feedback", "rejected", "withdrawn"]
INITIAL = "submitted"

TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "approve", "source": "submitted", "dest": "approving"},
    {"trigger": "finish", "source": "approving", "dest": "approved"},
    {"trigger": "abandon", "source": "approving", "dest": "submitted"},
    {"trigger": "give_feedback", "source": "submitted", "dest": "feedback"},
    {"trigger": "reject", "source": "submitted", "dest": "rejected"},
    {"trigger": "headless_deny", "source": "submitted", "dest": "rejected"},
    {"trigger": "withdraw", "source": "submitted", "dest": "withdrawn"},
]
"""Every legal move, as data; anything else (a second answer, the timer) is refused."""

Answer: TypeAlias = Literal[
    "approve", "feedback", "deny", "headless", "autoContinued", "modify", "withdrawn",
]
_TRIGGERS: dict[str, str] = {
    "approve": "approve",
    "modify": "approve",  # the TUI's approval carries the (unchanged or edited) input
    "feedback": "give_feedback",
    "deny": "reject",
    "headless": "headless_deny",
    "withdrawn": "withdraw",  # the host's, when the caller cancelled (not the user's answer)
    "finish": "finish",  # the runtime's steps after an approval, not answers of the user
    "abandon": "abandon",
}
Cause: TypeAlias = PlanApprovalCancelCause
"""Why an approval was abandoned: its plan file write was cancelled, or a later access found
it decided and never finished (the service stopped in between)."""


class PlanApprovalModel:
    """The machine's model; triggers are declared so type checkers see them."""

    state: str

    def approve(self) -> bool: raise NotImplementedError
    def finish(self) -> bool: raise NotImplementedError
    def abandon(self) -> bool: raise NotImplementedError
    def give_feedback(self) -> bool: raise NotImplementedError
    def reject(self) -> bool: raise NotImplementedError
    def headless_deny(self) -> bool: raise NotImplementedError
    def withdraw(self) -> bool: raise NotImplementedError


def build_machine(
    model: PlanApprovalModel | None = None, *, initial: str = INITIAL
) -> Machine:
    """The plan-approval machine, optionally bound to ``model``."""
    return quiet_machine(model, states=STATES, transitions=TRANSITIONS, initial=initial)


_MODEL = PlanApprovalModel()
_MACHINE = build_machine(_MODEL)
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class PlanRefusal:
    """An answer with no move from ``state``."""

    state: str
    answer: str

    @property
    def message(self) -> str:
        return f"a plan approval that is {self.state} cannot take the answer {self.answer!r}"


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    """Where the answer led; ``event`` records it (an approval's ``PlanApproved`` is written
    by the handler once the file outcome is known, so ``approving`` has ``None`` here)."""

    state: Literal["submitted", "approving", "feedback", "rejected", "withdrawn"]
    event: Event | None


def next_state(state: str, answer: str) -> str | PlanRefusal:
    """The state after ``answer`` from ``state``, or a refusal."""
    trigger = _TRIGGERS.get(answer)
    if trigger is None:
        return PlanRefusal(state, answer)
    with _LOCK:
        _MACHINE.set_state(state)
        try:
            getattr(_MODEL, trigger)()
        except MachineError:
            return PlanRefusal(state, answer)
        return _MODEL.state


def decide_plan(
    answer: Answer, *, call_id: str, plan: str, mode: PermissionMode,
    feedback: str | None = None,
) -> PlanOutcome | PlanRefusal:
    """The outcome of answering a submitted plan, with the event recording it."""
    after = next_state(INITIAL, answer)
    if isinstance(after, PlanRefusal):
        return after
    if after == "feedback":
        assert feedback is not None
        return PlanOutcome("feedback", PlanFeedbackGiven(
            call_id=call_id, feedback=feedback, mode=mode, plan=plan
        ))
    if after == "withdrawn":  # recorded by the interaction's resolution and the call's end
        return PlanOutcome("withdrawn", None)
    if after == "rejected":
        by: Literal["user", "headless"] = "headless" if answer == "headless" else "user"
        return PlanOutcome("rejected", PlanRejected(by=by, call_id=call_id, mode=mode, plan=plan))
    return PlanOutcome("approving", None)


def abandon_plan(
    cause: Cause, *, call_id: str, plan: str, mode: PermissionMode
) -> PlanOutcome | PlanRefusal:
    """An approval that will not finish goes back to ``submitted``, recorded by
    ``PlanApprovalCancelled`` (the plan is asked again; Plan stays on)."""
    after = next_state("approving", "abandon")
    if isinstance(after, PlanRefusal):
        return after
    assert after == "submitted"
    return PlanOutcome("submitted", PlanApprovalCancelled(
        call_id=call_id, cause=cause, mode=mode, plan=plan
    ))
