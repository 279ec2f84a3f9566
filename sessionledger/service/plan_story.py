"""The plan story in ``sessionledger replay``: one line per plan event (issue 7).

``replay`` prints each event as *seq, when, who (the envelope's actor), type, note*. For the
plan events the note says which plan (its call, length and opening), the mode underneath at
the time, what the user decided, where the plan file went, and — on the ExitPlanMode and
EnterPlanMode completions — the exact text the model received, JSON-quoted so line breaks show.
An approval takes two batches (PM-7, D64): the user's ``InteractionResolved`` first (the
generic note), then ``PlanApproved`` with the exit; one that never got its second batch is told
by ``PlanApprovalCancelled`` (why, and that Plan stayed on and the plan was asked again).
These describers are merged into :data:`sessionledger.service.documents.DESCRIBERS`; the
other tools'
completions keep the generic payload note.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from eventlog import (
    PlanApprovalCancelled,
    PlanApproved,
    PlanFeedbackGiven,
    PlanFileWriteFailed,
    PlanRejected,
    PlanSubmitted,
    RecordedEvent,
    ToolCallCompleted,
)

__all__ = ["PLAN_DESCRIBERS", "PLAN_TOOLS", "plan_note"]

PLAN_TOOLS = frozenset({"EnterPlanMode", "ExitPlanMode"})
_OPENING = 60


def _opening(plan: str) -> str:
    flat = " ".join(plan.split())
    text = flat if len(flat) <= _OPENING else flat[: _OPENING - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def plan_note(call_id: str, plan: str) -> str:
    """``the plan of call_… (123 characters) "opening…"``: which plan."""
    return f"the plan of {call_id} ({len(plan)} characters) {_opening(plan)}"


def _in_mode(mode: str) -> str:
    return f"in plan mode (mode {mode} underneath)"


def _submitted(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PlanSubmitted)
    prompts = f", {len(data.allowed_prompts)} allowed prompts" if data.allowed_prompts else ""
    return f"{plan_note(data.call_id, data.plan)} submitted for approval{prompts}"


def _approved(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PlanApproved)
    written = "written" if data.file_written else "NOT written"
    return (f"{event.actor} approved {plan_note(data.call_id, data.plan)} {_in_mode(data.mode)};"
            f" plan file {data.path} {written}")


_CAUSES = {
    "cancelled": "its plan file write was cancelled",
    "interrupted": "the service stopped before it was carried out",
}


def _abandoned(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PlanApprovalCancelled)
    return (f"approval of {plan_note(data.call_id, data.plan)} not carried out: "
            f"{_CAUSES[data.cause]}; Plan stays on (mode {data.mode} underneath) and the "
            "plan is asked again")


def _write_failed(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PlanFileWriteFailed)
    return f"plan file {data.path} of {data.call_id} not written: {data.error}; Plan left anyway"


def _feedback(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PlanFeedbackGiven)
    return (f"{event.actor} did not approve {plan_note(data.call_id, data.plan)} "
            f"{_in_mode(data.mode)}; feedback {json.dumps(data.feedback, ensure_ascii=False)}")


def _rejected(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PlanRejected)
    who = "the headless host (nobody to ask)" if data.by == "headless" else event.actor
    return (f"{who} rejected {plan_note(data.call_id, data.plan)} {_in_mode(data.mode)}; "
            "the turn stops")


def _completed(event: RecordedEvent) -> str | None:
    data = event.data
    assert isinstance(data, ToolCallCompleted)
    if data.tool not in PLAN_TOOLS:
        return None
    outcome = "succeeded" if data.success else f"{data.status}, not successful"
    stop = "; the turn stops" if data.turn_control is not None else ""
    return (f"{data.tool} {data.call_id} {outcome}{stop}; the model received "
            f"{json.dumps(data.model_content, ensure_ascii=False)}")


PLAN_DESCRIBERS: dict[str, Callable[[RecordedEvent], str | None]] = {
    "PlanSubmitted": _submitted,
    "PlanApproved": _approved,
    "PlanApprovalCancelled": _abandoned,
    "PlanFileWriteFailed": _write_failed,
    "PlanFeedbackGiven": _feedback,
    "PlanRejected": _rejected,
    "ToolCallCompleted": _completed,
}
"""Describers of the plan story; ``None`` means "not a plan event: the generic note"."""
