"""Which reminders a model request gets: the pure decision of SPEC TD-5, PM-5 and PM-10.

Given a session's :class:`~projections.session.TurnCounters` (folded from the log), the
request (its tool names, whether it is an output-token continuation) and a way to read the
current todo list, :func:`decide_reminders` returns the reminders in the order PM-5 fixes:

1. ``runtime_mode`` (Plan is on) or ``plan_exit`` (Plan was just left) — never both, since
   entering Plan cancels a pending exit notice;
2. the pluggable *sources*, in the order given (issue 7 adds ``plan_file_reference`` here
   without touching this module);
3. ``todo_reminder`` — the only one a continuation suppresses.

No I/O and no clock: the caller records what is returned (:mod:`.turns`), and the counters
move only when those records are folded, so this function is the whole rule.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from eventlog import ReminderKind, TodoItemData
from projections.session import TurnCounters

from .reminder_texts import PLAN_EXIT, PLAN_MODE_FULL, PLAN_MODE_SPARSE, todo_reminder_text

__all__ = [
    "PLAN_FULL_EVERY",
    "PLAN_USER_MESSAGES",
    "TODO_ASSISTANT_MESSAGES",
    "TODO_TOOL",
    "Reminder",
    "ReminderContext",
    "ReminderSource",
    "TodoList",
    "TurnRequest",
    "decide_reminders",
    "plan_reminder",
    "todo_due",
    "todo_reminder",
]

TODO_TOOL = "TodoWrite"
"""TD-5: the todo reminder only comes when this tool is in the request's tool list."""
TODO_ASSISTANT_MESSAGES = 10
"""TD-5: assistant messages since the last todo write and the last todo reminder."""
PLAN_USER_MESSAGES = 5
"""PM-5: real user messages since the last Plan reminder before the next one."""
PLAN_FULL_EVERY = 5
"""PM-5: the 1st, 6th, 11th … Plan reminder of a period is the full text."""

Variant = Literal["full", "sparse"]


@dataclass(frozen=True, slots=True)
class Reminder:
    """One reminder to inject into the model request, as recorded in ``ReminderInjected``."""

    kind: ReminderKind
    text: str
    variant: Variant | None = None

    def to_wire(self) -> dict[str, Any]:
        """``{"kind", "variant", "text"}`` as ``prepare-request`` answers it (SPEC §11)."""
        return {"kind": self.kind, "variant": self.variant, "text": self.text}


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """The model request being prepared: its tool names and whether it continues output."""

    tools: frozenset[str] = frozenset()
    continuation: bool = False

    @classmethod
    def of(cls, tools: Collection[str], *, continuation: bool = False) -> TurnRequest:
        return cls(frozenset(tools), continuation)


@dataclass(frozen=True, slots=True)
class ReminderContext:
    """What a pluggable source sees: the session, where it works, its counters, the request."""

    session_id: str
    workspace: str
    counters: TurnCounters
    request: TurnRequest


ReminderSource = Callable[[ReminderContext], Reminder | None]
"""A reminder slotted between the Plan reminders and the todo reminder (issue 7's plan file)."""

TodoList = Callable[[], Sequence[TodoItemData]]
"""Reads the session's current todo list; called only when a todo reminder is due."""


def plan_reminder(counters: TurnCounters) -> Reminder | None:
    """``runtime_mode`` while Plan is on and one is due, or the owed ``plan_exit`` (PM-5)."""
    if counters.plan_enabled:
        due = (
            counters.plan_reminders == 0
            or counters.users_since_plan_reminder >= PLAN_USER_MESSAGES
        )
        if not due:
            return None
        if counters.plan_reminders % PLAN_FULL_EVERY == 0:
            return Reminder("runtime_mode", PLAN_MODE_FULL, "full")
        return Reminder("runtime_mode", PLAN_MODE_SPARSE, "sparse")
    if counters.plan_exit_armed:
        return Reminder("plan_exit", PLAN_EXIT)
    return None


def todo_due(counters: TurnCounters, request: TurnRequest) -> bool:
    """TD-5: TodoWrite offered, not a continuation, and enough assistant messages passed."""
    return (
        TODO_TOOL in request.tools
        and not request.continuation
        and counters.assistant_since_todo >= TODO_ASSISTANT_MESSAGES
    )


def todo_reminder(
    counters: TurnCounters, request: TurnRequest, todos: TodoList
) -> Reminder | None:
    """The ``todo_reminder`` with the current list, when :func:`todo_due` says so."""
    if not todo_due(counters, request):
        return None
    return Reminder("todo_reminder", todo_reminder_text(todos()))


def decide_reminders(
    counters: TurnCounters,
    request: TurnRequest,
    todos: TodoList,
    *,
    sources: Sequence[ReminderSource] = (),
    workspace: str = "",
) -> list[Reminder]:
    """The reminders this request gets, in injection order (may be empty)."""
    reminders: list[Reminder] = []
    plan = plan_reminder(counters)
    if plan is not None:
        reminders.append(plan)
    context = ReminderContext(counters.session_id, workspace, counters, request)
    for source in sources:
        extra = source(context)
        if extra is not None:
            reminders.append(extra)
    todo = todo_reminder(counters, request, todos)
    if todo is not None:
        reminders.append(todo)
    return reminders
