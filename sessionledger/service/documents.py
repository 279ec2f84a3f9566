"""How a session reads from outside: its wire documents (SPEC §11) and one-line event notes.

The state itself is the execution-state projection's (:mod:`projections.session`
owns the fold); this module only renders a :class:`~projections.SessionSummary` as the JSON
documents clients compare field by field, and an event as the short human description the
``replay`` timeline prints. Describers are one small function per event type (STYLE 3); an
event type without one is described by its payload.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from eventlog import (
    UNDECODABLE,
    GoalEnded,
    GoalStarted,
    MessageRecorded,
    RecordedEvent,
    SessionCreated,
    SessionModeChanged,
    Undecodable,
)
from projections import SessionSummary
from statemachine.execution import ExecutionState

from .plan_story import PLAN_DESCRIBERS

__all__ = [
    "DESCRIBERS",
    "DisplayMode",
    "describe_event",
    "execution_state_wire",
    "list_entry",
    "session_document",
    "state_document",
    "state_note",
]

DisplayMode = Literal["plan", "build", "edit", "yolo", "auto"]

NOTE_WIDTH = 80
"""Longest quoted text (objective, message) a timeline line shows before eliding it."""


def execution_state_wire(state: ExecutionState) -> dict[str, Any]:
    """Exactly ``mode``, ``planEnabled`` and ``goal`` (``null`` or ``{"objective"}``)."""
    goal = None if state.goal is None else {"objective": state.goal}
    return {"mode": state.mode, "planEnabled": state.plan_enabled, "goal": goal}


def session_document(
    summary: SessionSummary, *, interactions: list[dict[str, Any]] | None = None,
    todos: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The ``GET /v1/sessions/{id}`` shape: todos in list order, pending interactions in
    queue order."""
    return {
        "sessionId": summary.session_id,
        "version": summary.version,
        "workspace": summary.workspace,
        "parentSessionId": summary.parent_session_id,
        "executionState": execution_state_wire(summary.execution),
        "displayMode": summary.display_mode,
        "todos": todos or [],
        "interactions": interactions or [],
    }


def list_entry(summary: SessionSummary) -> dict[str, Any]:
    """One entry of ``GET /v1/sessions``."""
    return {
        "sessionId": summary.session_id,
        "displayMode": summary.display_mode,
        "version": summary.version,
        "updatedAt": summary.updated_at,
        "parentSessionId": summary.parent_session_id,
    }


def state_document(summary: SessionSummary) -> dict[str, Any]:
    """What ``sessionledger state --json`` prints: the execution state and where it stands."""
    return {
        "sessionId": summary.session_id,
        "executionState": execution_state_wire(summary.execution),
        "displayMode": summary.display_mode,
        "version": summary.version,
        "updatedAt": summary.updated_at,
        "deleted": summary.deleted,
    }


# -- timeline notes --------------------------------------------------------------------------


def _quote(text: str, width: int = NOTE_WIDTH) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= width else flat[: width - 1] + "…", ensure_ascii=False)


def state_note(state: ExecutionState) -> str:
    """``display plan (mode yolo, plan on, goal none)``: a state in one line."""
    plan = "on" if state.plan_enabled else "off"
    goal = "none" if state.goal is None else _quote(state.goal)
    return f"display {state.display_mode} (mode {state.mode}, plan {plan}, goal {goal})"


def _display(mode: str, plan_enabled: bool) -> str:
    return "plan" if plan_enabled else mode


def _created(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, SessionCreated)
    state = ExecutionState.from_data(data.execution_state)
    note = f"created in {data.workspace} ({data.host} host), {state_note(state)}"
    return note + (f", subagent of {data.parent_session_id}" if data.parent_session_id else "")


def _mode_changed(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, SessionModeChanged)
    before = _display(data.previous_mode, data.previous_plan_enabled)
    after = _display(data.mode, data.plan_enabled)
    underneath = f" (mode {data.mode} underneath)" if data.plan_enabled else ""
    return f"{before} → {after}{underneath} via {data.via}"


def _goal_started(event: RecordedEvent) -> str:
    assert isinstance(event.data, GoalStarted)
    return f"goal started: {_quote(event.data.objective)}"


def _goal_ended(event: RecordedEvent) -> str:
    assert isinstance(event.data, GoalEnded)
    return f"goal ended: {_quote(event.data.objective)}"


def _message(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, MessageRecorded)
    source = f" from {data.source}" if data.source else ""
    return f"{data.kind} {data.role} message{source}: {_quote(data.content)}"


def _undecodable(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, Undecodable)
    return f"undecodable {data.stored_type} event, passed over ({data.reason})"


DESCRIBERS: dict[str, Callable[[RecordedEvent], str]] = {
    "SessionCreated": _created,
    "SessionModeChanged": _mode_changed,
    "GoalStarted": _goal_started,
    "GoalEnded": _goal_ended,
    "MessageRecorded": _message,
    "SessionDeleted": lambda _event: "session deleted (events kept until purged)",
    UNDECODABLE: _undecodable,
}


def describe_event(event: RecordedEvent) -> str:
    """A short human description of what ``event`` did."""
    describer = DESCRIBERS.get(event.type)
    if describer is not None:
        return describer(event)
    plan = PLAN_DESCRIBERS.get(event.type)  # the plan story, issue 7
    note = plan(event) if plan is not None else None
    if note is not None:
        return note
    payload = event.data.model_dump(mode="json", by_alias=True, exclude={"type"})
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= NOTE_WIDTH else text[: NOTE_WIDTH - 1] + "…"
