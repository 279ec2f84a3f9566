"""How a session reads from outside: its wire documents (docs/spec.md) and one-line event notes.

The state itself is the execution-state projection's (:mod:`projections.session`
owns the fold); this module only renders a :class:`~projections.SessionSummary` as the JSON
documents clients compare field by field, and an event as the short human description the
``replay`` timeline prints. Describers are one small function per event type; an
event type without one is described by its payload.

Here too: the plan story of ``replay`` (one line per plan event, issue 7) and the todo
list read from outside the tools (:class:`TodoService`, the document the CLI and hosts read).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from eventlog import (
    UNDECODABLE,
    AnswerInChanged,
    CronScheduleCreated,
    CronScheduleDeleted,
    CronScheduleUpdated,
    GoalEnded,
    GoalStarted,
    InteractionAutoResolutionChanged,
    InteractionRequested,
    InteractionResolved,
    InteractionUserActivity,
    MessageRecorded,
    OffPeakPromptCreated,
    PermissionDecided,
    PlanApprovalCancelled,
    PlanApproved,
    PlanFeedbackGiven,
    PlanFileWriteFailed,
    PlanRejected,
    PlanSubmitted,
    RecordedEvent,
    ReminderInjected,
    SessionCreated,
    SessionModeChanged,
    SessionModelSelected,
    SettingChanged,
    TodoItemData,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
    Undecodable,
    parse_instant,
)
from projections import SessionSummary
from projections.tools import as_item
from statemachine.execution import ExecutionState

from ..ledger import Ledger, eventlog_errors
from ..tools.ask import visible
from ..tools.todo import item_wire, list_lines, summary

__all__ = [
    "DESCRIBERS",
    "DisplayMode",
    "PLAN_DESCRIBERS",
    "PLAN_TOOLS",
    "TodoList",
    "TodoService",
    "WAITING_KINDS",
    "describe_event",
    "client_name",
    "client_note",
    "execution_state_wire",
    "list_entry",
    "pending_wire",
    "session_name",
    "occurred_at",
    "plan_note",
    "progress_text",
    "session_document",
    "state_document",
    "state_note",
    "timeline_entry",
]


# -- the plan story of replay (issue 7) --------------------------------------------------------
#
# The plan story in ``sessionledger replay``: one line per plan event (issue 7).
#
# ``replay`` prints each event as *seq, when, who (the envelope's actor), type, note*. For the
# plan events the note says which plan (its call, length and opening), the mode underneath at
# the time, what the user decided, where the plan file went, and — on the ExitPlanMode and
# EnterPlanMode completions — the exact text the model received, JSON-quoted so line breaks show.
# An approval takes two batches (PM-7, D64): the user's ``InteractionResolved`` first (the
# generic note), then ``PlanApproved`` with the exit; one that never got its second batch is told
# by ``PlanApprovalCancelled`` (why, and that Plan stayed on and the plan was asked again).
# These describers are merged into :data:`sessionledger.service.documents.DESCRIBERS`; the
# other tools'
# completions keep the generic payload note.

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


# -- a session's todo list read from outside the tools (TD-6) ----------------------------------
#
# Reading a session's todo list from outside the tools: the document, the CLI, hosts (TD-6).
#
# The list itself is the todo projection's (:mod:`projections.tools`, kept inline by the store);
# writes only ever come through the TodoWrite tool. This module answers the readers: the
# session document's ``todos`` (docs/spec.md, in list order), and the "completed/total" progress a
# host shows beside the list (TD-6) — the ``sessionledger todos`` command prints the same. It
# lives apart from :mod:`sessionledger.service.sessions` so that module stays about sessions.
#
# An unknown session is 404 (``session_not_found``) and a deleted one 410
# (``session_deleted``): a deleted session has no todos (docs/decisions.md D30).

def progress_text(todos: Sequence[TodoItemData]) -> str:
    """``"2/5 completed"``: the progress a host shows beside the list (TD-6)."""
    counts = summary(todos)
    return f"{counts['completed']}/{counts['total']} completed"


@dataclass(frozen=True, slots=True)
class TodoList:
    """One session's current list, as a reader sees it."""

    session_id: str
    items: tuple[TodoItemData, ...]
    updated_at: str | None
    """When the list was last written (``None`` when it never was, or was emptied)."""

    @property
    def completed(self) -> int:
        return sum(1 for t in self.items if t.status == "completed")

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def progress(self) -> str:
        return progress_text(self.items)

    def wire(self) -> list[dict[str, str]]:
        """The session document's ``todos``: ``{"content", "status", "priority"}`` in order."""
        return [item_wire(t) for t in self.items]

    def lines(self) -> list[str]:
        """``1. [in_progress] content`` per item."""
        return list_lines(self.items)

    def to_json(self) -> dict[str, Any]:
        """What ``sessionledger todos --json`` prints."""
        return {
            "sessionId": self.session_id, "todos": self.wire(), "summary": summary(self.items),
            "progress": {"completed": self.completed, "total": self.total},
            "updatedAt": self.updated_at,
        }


class TodoService:
    """The todo lists of one store's sessions, read from the todo projection."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._projections = ledger.projections

    def _require_live(self, session_id: str) -> SessionSummary:
        return self._ledger.live(session_id)

    def current(self, session_id: str) -> TodoList:
        """The live session's list (404 unknown, 410 deleted)."""
        live = self._require_live(session_id)
        projection = self._projections.todos
        with eventlog_errors():
            rows = self._store.read_view(lambda tx: projection.of_session(tx, session_id))
        return TodoList(
            session_id, tuple(as_item(r) for r in rows),
            live.todos_updated_at if rows else None,
        )

    def wire(self, session_id: str) -> list[dict[str, str]]:
        """The session document's ``todos`` (docs/spec.md)."""
        return self.current(session_id).wire()


# -- the wire documents (docs/spec.md) ---------------------------------------------------------
#
# How a session reads from outside: its wire documents (docs/spec.md) and one-line event notes.
#
# The state itself is the execution-state projection's (:mod:`projections.session`
# owns the fold); this module only renders a :class:`~projections.SessionSummary` as the JSON
# documents clients compare field by field, and an event as the short human description the
# ``replay`` timeline prints. Describers are one small function per event type; an
# event type without one is described by its payload.

DisplayMode = Literal["plan", "build", "edit", "yolo", "auto"]

NOTE_WIDTH = 80
"""Longest quoted text (objective, message) a timeline line shows before eliding it."""


def execution_state_wire(state: ExecutionState) -> dict[str, Any]:
    """Exactly ``mode``, ``planEnabled`` and ``goal`` (``null`` or ``{"objective"}``)."""
    goal = None if state.goal is None else {"objective": state.goal}
    return {"mode": state.mode, "planEnabled": state.plan_enabled, "goal": goal}


def session_document(
    summary: SessionSummary, *, interactions: list[dict[str, Any]] | None = None,
    todos: list[dict[str, str]] | None = None, answer_in: str | None = None,
) -> dict[str, Any]:
    """The ``GET /v1/sessions/{id}`` shape: todos in list order, pending interactions in
    queue order; for a session another program runs, where its questions are answered."""
    return {
        "sessionId": summary.session_id,
        "version": summary.version,
        "workspace": summary.workspace,
        "parentSessionId": summary.parent_session_id,
        "executionState": execution_state_wire(summary.execution),
        "displayMode": summary.display_mode,
        "todos": todos or [],
        "interactions": interactions or [],
        **origin_wire(summary),
        **({} if answer_in is None else {"answerIn": answer_in}),
    }


def origin_wire(summary: SessionSummary) -> dict[str, str]:
    """``client`` and ``externalSessionId`` of a session another program created (CC-2);
    nothing for the service's own sessions."""
    if summary.client is None:
        return {}
    wire = {"client": summary.client}
    if summary.external_session_id is not None:
        wire["externalSessionId"] = summary.external_session_id
    return wire


NAME_CHARS = 60
"""Longest text after the workspace in a session's name before it is elided."""
WAITING_KINDS = (("askUserQuestion", "questions", "question"),
                 ("planApproval", "planApprovals", "plan approval"),
                 ("toolApproval", "toolApprovals", "tool approval"))
"""What waits for a person, by interaction kind: its count's key in a list entry's
``pending`` and the noun a person says it with."""
_COUNTED = {kind: key for kind, key, _noun in WAITING_KINDS}
_COUNTING = ("hiddenGrace", "countdown")
"""Timer states whose deadline is still ahead (a paused timer has none: HO-5)."""


_ASCII_INVISIBLE = {c: None for c in (*range(32), 127) if not chr(c).isspace()}


def _shown(text: str) -> str:
    """The start of ``text`` as :func:`~sessionledger.tools.ask.visible` shows it, cheaply:
    only what a name can hold is looked at, and ASCII (NFKC leaves it as it is) needs only
    its control characters dropped and its whitespace runs made one space."""
    text = text[: NAME_CHARS * 2]
    if not text.isascii():
        return visible(text)
    return " ".join((text if text.isprintable() else text.translate(_ASCII_INVISIBLE)).split())


def session_name(summary: SessionSummary) -> str:
    """What a list calls the session (issue 23.6): the workspace's last path part and the
    first real user message, else the active goal, else the session id, as a person sees it
    (no invisible characters, one line), elided after :data:`NAME_CHARS` characters."""
    text = _shown(summary.first_message or "") or _shown(summary.goal or "") or summary.session_id
    if len(text) > NAME_CHARS:
        text = text[: NAME_CHARS - 1].rstrip() + "…"
    place = _shown(os.path.basename(summary.workspace.rstrip("/\\")))
    return f"{place} · {text}" if place else text


def pending_wire(queue: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What waits for the user in one session, from its question-timer queue (issue 23.4):
    the count of each kind and the earliest ``deadlineAt`` of a timer still counting
    (``hiddenGrace`` or ``countdown``), ``null`` when none is."""
    wire: dict[str, Any] = dict.fromkeys(_COUNTED.values(), 0)
    deadlines: list[str] = []
    for entry in queue:
        counted = _COUNTED.get(entry.get("kind", ""))
        if counted is not None:
            wire[counted] += 1
        if entry.get("state") in _COUNTING and entry.get("deadlineAt"):
            deadlines.append(entry["deadlineAt"])
    wire["deadlineAt"] = min(deadlines, key=parse_instant) if deadlines else None
    return wire


def list_entry(
    summary: SessionSummary, queue: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """One entry of ``GET /v1/sessions``; ``queue`` is the session's question-timer queue
    (its pending interactions in order)."""
    return {
        "sessionId": summary.session_id,
        "displayMode": summary.display_mode,
        "version": summary.version,
        "updatedAt": summary.updated_at,
        "parentSessionId": summary.parent_session_id,
        **origin_wire(summary),
        "name": session_name(summary),
        "workspace": summary.workspace,
        "pending": pending_wire(queue),
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


# -- timeline notes ---------------------------------------------------------------------------


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
    by = f" · {client_name(data.client)}" if data.client else ""
    note = f"created in {data.workspace} ({data.host} host{by}), {state_note(state)}"
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


# The decision events and the rest of the catalog, one line each (issue 23.8): ``replay`` and
# the web timeline (``GET /v1/sessions/{id}/timeline``) print the same text.

_INPUT_WIDTH = 60


def _compact(value: Any, width: int = _INPUT_WIDTH) -> str:
    """A JSON value on one line, elided past ``width`` characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


def _tool_requested(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, ToolCallRequested)
    return f"{data.tool} {data.call_id} requested ({data.host} host), input {_compact(data.input)}"


def _permission(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, PermissionDecided)
    verdict = data.decision
    return (f"{data.tool} {data.call_id}: {verdict.behavior} by rule {verdict.rule_id} "
            f"({data.decided_by}), {_quote(verdict.reason)}")


def _questions(payload: dict[str, Any]) -> list[str]:
    questions = payload.get("questions")
    if not isinstance(questions, list):
        return []
    return [str(q.get("question", "")) for q in questions if isinstance(q, dict)]


def _interaction_requested(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, InteractionRequested)
    head = f"{data.kind} {data.interaction_id} for {data.call_id}"
    if data.kind == "planApproval" and isinstance(data.payload.get("plan"), str):
        return f"{head}: {plan_note(data.call_id, data.payload['plan'])}"
    if data.kind == "toolApproval":
        tool = data.payload.get("tool", "?")
        return f"{head}: may {tool} run? input {_compact(data.payload.get('input', {}))}"
    asked = _questions(data.payload)
    return f"{head}: " + (" · ".join(_quote(q) for q in asked) if asked else "(no question text)")


def _interaction_resolved(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, InteractionResolved)
    head = f"{data.interaction_id} of {data.call_id}"
    if data.decision == "autoContinued":
        return f"{head}: unanswered — auto-continued"
    if data.decision == "withdrawn":
        return f"{head}: withdrawn — the agent cancelled its request; nobody answered"
    note = f"{head}: {event.actor} chose {data.decision}"
    if data.feedback is not None:
        note += f", feedback {_quote(data.feedback)}"
    if data.input is not None:
        note += f", input {_compact(data.input)}"
    return note


def _tool_completed(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, ToolCallCompleted)
    plan = _completed(event)
    if plan is not None:
        return plan
    if data.status == "completed":
        outcome = "succeeded" if data.success else "failed"
    else:
        outcome = data.status
    stop = "; the turn stops" if data.turn_control is not None else ""
    return f"{data.tool} {outcome} ({data.call_id}){stop}: {_quote(data.model_content)}"


def _todos(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, TodosWritten)
    dropped = len(data.dropped_unfinished)
    left = f", {dropped} unfinished dropped" if dropped else ""
    return f"todo list written: {progress_text(data.todos)}{left}"


def _reminder(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, ReminderInjected)
    variant = f" ({data.variant})" if data.variant else ""
    return f"{data.kind} reminder{variant} injected: {_quote(data.text)}"


def _timer(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, InteractionAutoResolutionChanged)
    why = f" ({data.reason})" if data.reason else ""
    deadline = f", deadline {data.deadline_at}" if data.deadline_at else ""
    return f"{data.interaction_id} auto-continue timer {data.state}{why}{deadline}"


def _activity(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, InteractionUserActivity)
    return f"user activity ({data.action}) on {data.interaction_id}: its timer pauses"


def _setting(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, SettingChanged)
    return f"setting {data.name}: {json.dumps(data.previous)} → {json.dumps(data.value)}"


def _model(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, SessionModelSelected)
    return f"model {data.model} selected" + (f" at level {data.level}" if data.level else "")


def _answer_in(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, AnswerInChanged)
    where = {"host": "in the host's own dialog", "here": "here"}
    return f"questions and plan approvals answered {where[data.answer_in]}"


def _cron_created(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, CronScheduleCreated)
    how = "recurring" if data.recurring else "once"
    return f"cron schedule {data.schedule_id} created: {data.cron} ({how}), {_quote(data.prompt)}"


def _cron_updated(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, CronScheduleUpdated)
    changes = []
    if data.cron is not None:
        changes.append(f"cron {data.cron}")
    if data.prompt is not None:
        changes.append(f"prompt {_quote(data.prompt)}")
    if data.enabled is not None:
        changes.append("enabled" if data.enabled else "disabled")
    return f"cron schedule {data.schedule_id} updated: {', '.join(changes) or 'nothing changed'}"


def _cron_deleted(event: RecordedEvent) -> str:
    assert isinstance(event.data, CronScheduleDeleted)
    return f"cron schedule {event.data.schedule_id} deleted"


def _off_peak(event: RecordedEvent) -> str:
    data = event.data
    assert isinstance(data, OffPeakPromptCreated)
    return (f"off-peak prompt {data.off_peak_id} due {data.due_at} until {data.window_end_at}: "
            f"{_quote(data.prompt)}")


DESCRIBERS: dict[str, Callable[[RecordedEvent], str]] = {
    "SessionCreated": _created,
    "SessionModeChanged": _mode_changed,
    "GoalStarted": _goal_started,
    "GoalEnded": _goal_ended,
    "MessageRecorded": _message,
    "SessionDeleted": lambda _event: "session deleted (events kept until purged)",
    "ToolCallRequested": _tool_requested,
    "PermissionDecided": _permission,
    "InteractionRequested": _interaction_requested,
    "InteractionResolved": _interaction_resolved,
    "ToolCallCompleted": _tool_completed,
    "TodosWritten": _todos,
    "ReminderInjected": _reminder,
    "ContextCompacted": lambda _event: "context compacted; the plan file is read back next",
    "InteractionAutoResolutionChanged": _timer,
    "InteractionUserActivity": _activity,
    "SettingChanged": _setting,
    "SessionModelSelected": _model,
    "AnswerInChanged": _answer_in,
    "CronScheduleCreated": _cron_created,
    "CronScheduleUpdated": _cron_updated,
    "CronScheduleDeleted": _cron_deleted,
    "OffPeakPromptCreated": _off_peak,
    UNDECODABLE: _undecodable,
}
"""One describer per event type of the catalog (a test checks none is missing)."""


def describe_event(event: RecordedEvent) -> str:
    """A short human description of what ``event`` did."""
    plan = PLAN_DESCRIBERS.get(event.type)  # the plan story, issue 7
    note = plan(event) if plan is not None else None
    if note is not None:
        return note
    describer = DESCRIBERS.get(event.type)
    if describer is not None:
        return describer(event)
    payload = event.data.model_dump(mode="json", by_alias=True, exclude={"type"})
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= NOTE_WIDTH else text[: NOTE_WIDTH - 1] + "…"


# -- who created a session, and when an event happened by its host's clock (CC-9) --------------

CLIENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}
"""The names people know the clients by; any other client is shown as it names itself."""


def client_name(client: str) -> str:
    """``Claude Code`` for ``claude-code``; another client's own name unchanged."""
    return CLIENT_NAMES.get(client, client)


def client_note(client: str | None, external_session_id: str | None) -> str | None:
    """``client claude-code, session 8463c716-…``: the program that created the session and
    its own id for it (CC-2), as ``replay`` and the TUI name them; ``None`` for the service's
    own sessions."""
    if client is None:
        return None
    return f"client {client}" + (
        f", session {external_session_id}" if external_session_id is not None else ""
    )


def occurred_at(event: RecordedEvent) -> str | None:
    """When the host says ``event`` happened (``data.occurredAt``: an imported transcript's
    own time, CC-9); ``None`` when it happened as it was recorded (``recordedAt``)."""
    value = getattr(event.data, "occurred_at", None)
    return value if isinstance(value, str) else None


# -- the web timeline's entries (issue 23.2) ---------------------------------------------------


def timeline_entry(event: RecordedEvent) -> dict[str, Any]:
    """One entry of ``GET /v1/sessions/{id}/timeline``: the event's place, who, what, and the
    one-line summary ``replay`` prints; ``occurredAt`` only when the host gave one (CC-9)."""
    entry: dict[str, Any] = {
        "seq": event.seq, "recordedAt": event.recorded_at, "actor": event.actor,
        "type": event.type, "summary": describe_event(event),
    }
    occurred = occurred_at(event)
    if occurred is not None:
        entry["occurredAt"] = occurred
    return entry
