"""The turn loop's record: messages, compactions, and the reminders each model request gets.

A host tells the service what happened in the conversation (:meth:`TurnService.record_message`,
:meth:`TurnService.compact`) and, before each model request, asks which reminders to inject
(:meth:`TurnService.prepare_request`). The decision is :func:`decide_reminders`
over the session's turn counters (an inline projection, so a restart answers the same); every
reminder it returns is recorded as ``ReminderInjected`` — the todo reminder also as a
synthetic user message (TD-5) — in one batch guarded by the session's version, so two hosts
preparing at once never both inject the same reminder. Recording moves the counters, which
is why ``prepare-request`` is not idempotent (PM-5).

The todo list comes through the narrow :class:`TodoSource`; :class:`ProjectedTodos` reads it
from the todo projection (:mod:`projections.tools`), and only when a todo reminder is due.

The reminders are here too, in two sections: their model-facing texts (the opening sentences
TD-5 and PM-5 fix) and the pure decision of which a request gets
(:func:`decide_reminders`), then the service that records them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from eventlog import (
    AppendResult,
    ContextCompacted,
    EventStore,
    MessageRecorded,
    NewEvent,
    ReminderInjected,
    ReminderKind,
    TodoItemData,
    new_id,
)
from projections import Projections, SessionSummary, TurnCounters
from projections.session import fold_turns
from projections.tools import current_todos

from ..errors import (
    InvalidInput,
)
from ..ledger import Ledger, eventlog_errors
from ..tools.plan_files import read_plan_file

__all__ = [
    "MESSAGE_KEY_PREFIX",
    "PLAN_EXIT",
    "PLAN_FULL_EVERY",
    "PLAN_MODE_FULL",
    "PLAN_MODE_FULL_OPENING",
    "PLAN_MODE_SPARSE",
    "PLAN_USER_MESSAGES",
    "ProjectedTodos",
    "Reminder",
    "ReminderContext",
    "ReminderSource",
    "Role",
    "TODO_ASSISTANT_MESSAGES",
    "TODO_EMPTY",
    "TODO_REMINDER_HEADER",
    "TODO_REMINDER_OPENING",
    "TODO_TOOL",
    "TodoList",
    "TodoSource",
    "TurnRequest",
    "TurnService",
    "decide_reminders",
    "plan_file_reference_text",
    "plan_file_source",
    "plan_reminder",
    "receipt",
    "todo_due",
    "todo_line",
    "todo_reminder",
    "todo_reminder_text",
]


# -- the reminders' texts (TD-5, PM-5, PM-10) --------------------------------------------------
#
# The model-facing texts of the turn-loop reminders, kept apart from the rules that pick them.
#
# TD-5 and PM-5 fix the opening sentences (marked **exact** there; tests compare them
# literally) and what the rest must say; the remainder is ours (docs/decisions.md D32). Texts
# only: the next section (:func:`decide_reminders`) decides when each is injected. The todo text is
# built from the current list by :func:`todo_reminder_text`.

TODO_REMINDER_OPENING = "The TodoWrite tool hasn't been used recently."
"""TD-5: every todo reminder starts with this sentence (**exact**)."""

TODO_REMINDER_HEADER = (
    f"{TODO_REMINDER_OPENING} If you are working on tasks that would benefit from tracking "
    "progress, consider using the TodoWrite tool to track it, and clean up the list if it has "
    "become stale and no longer matches what you are working on. Only use it if it is "
    "relevant to the current work; this is a gentle reminder, ignore it if not applicable, "
    "and never mention it to the user. Here is your current todo list:"
)
"""The header sentences; the list follows after a blank line (TD-5 layout)."""

TODO_EMPTY = "The todo list is empty."
"""What stands in place of the numbered lines when the list has no items."""

PLAN_MODE_FULL_OPENING = (
    "Plan mode is active. The user indicated that they do not want you to execute yet -- "
    "you MUST NOT make any edits, run any non-readonly tools (including changing configs or "
    "making commits), or otherwise make any changes to the system."
)
"""PM-5: the full Plan reminder starts with this paragraph (**exact**)."""

PLAN_MODE_FULL = f"""{PLAN_MODE_FULL_OPENING} This supersedes any other instructions you \
have received.

## Plan workflow

### Phase 1: Understand
Build a thorough understanding of the request by reading the code and asking the user \
questions. In this phase use explore subagents only, and launch at most 3 of them in \
parallel.

### Phase 2: Design
Design an implementation approach from what you learned: the files to change, the steps in \
order, and the trade-offs between the options you considered.

### Phase 3: Review
Check the design against the user's request and the code you read. Use AskUserQuestion to \
clarify anything that is still open; do not guess what the user wants.

### Phase 4: Exit
When the plan is ready, call ExitPlanMode with the final plan; the user reviews and approves \
it there.

Your turn may only end with a call to AskUserQuestion (to clarify requirements) or to \
ExitPlanMode (to ask for approval of the plan). Never ask whether the plan is OK in any other \
way -- not in text and not with AskUserQuestion: any form of "is this plan OK?" must go \
through ExitPlanMode, because the user cannot see the plan until you call it."""
"""The 1st, 6th, 11th … Plan reminder of a Plan period: rules plus the four-phase workflow."""

PLAN_MODE_SPARSE = (
    "Plan mode is still active (see the full instructions earlier in this conversation): make "
    "no edits and run no non-readonly tools. Follow the workflow -- understand (explore "
    "subagents only, at most 3 in parallel), design, review (clarify with AskUserQuestion), "
    "then call ExitPlanMode. End your turn only with AskUserQuestion or ExitPlanMode, and ask "
    "for approval of the plan only through ExitPlanMode."
)
"""The Plan reminders between the full ones: the same rules, short."""

PLAN_EXIT = (
    "You have exited plan mode. You may now make edits, run tools and take actions. If a plan "
    "was approved, carry it out, starting with updating your todo list if applicable."
)
"""The one reminder after Plan was left (``plan_exit``)."""


def todo_line(position: int, item: TodoItemData) -> str:
    """``1. [in_progress] content`` — line breaks inside the content become spaces."""
    content = " ".join(item.content.splitlines())
    return f"{position}. [{item.status}] {content}"


def todo_reminder_text(todos: Sequence[TodoItemData]) -> str:
    """The header, a blank line, then one numbered line per item (or the empty-list note)."""
    lines = [todo_line(i, item) for i, item in enumerate(todos, start=1)]
    body = "\n".join(lines) if lines else TODO_EMPTY
    return f"{TODO_REMINDER_HEADER}\n\n{body}"


def plan_file_reference_text(path: Path, content: str) -> str:
    """PM-10's reminder: the exact opening, the path, the content, then carry on."""
    return (
        f"A plan file exists from plan mode at: {path}\n\n"
        f"Plan contents:\n\n{content}\n\n"
        "If this plan is relevant to the current work and not already complete, "
        "continue working on it."
    )


# -- which reminders a model request gets: the pure decision -----------------------------------
#
# Which reminders a model request gets: the pure decision of TD-5, PM-5 and PM-10.
#
# Given a session's :class:`~projections.session.TurnCounters` (folded from the log), the
# request (its tool names, whether it is an output-token continuation) and a way to read the
# current todo list, :func:`decide_reminders` returns the reminders in the order PM-5 fixes:
#
# 1. ``runtime_mode`` (Plan is on) or ``plan_exit`` (Plan was just left) — never both, since
#    entering Plan cancels a pending exit notice;
# 2. the pluggable *sources*, in the order given (issue 7 adds ``plan_file_reference`` here
#    without touching this module);
# 3. ``todo_reminder`` — the only one a continuation suppresses.
#
# No I/O and no clock: the caller records what is returned (:mod:`.turns`), and the counters
# move only when those records are folded, so this function is the whole rule.

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
        """``{"kind", "variant", "text"}`` as ``prepare-request`` answers it (docs/spec.md)."""
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


# -- the turn loop's record --------------------------------------------------------------------
#
# The turn loop's record: messages, compactions, and the reminders each model request gets.
#
# A host tells the service what happened in the conversation (:meth:`TurnService.record_message`,
# :meth:`TurnService.compact`) and, before each model request, asks which reminders to inject
# (:meth:`TurnService.prepare_request`). The decision is :func:`decide_reminders`
# over the session's turn counters (an inline projection, so a restart answers the same); every
# reminder it returns is recorded as ``ReminderInjected`` — the todo reminder also as a
# synthetic user message (TD-5) — in one batch guarded by the session's version, so two hosts
# preparing at once never both inject the same reminder. Recording moves the counters, which
# is why ``prepare-request`` is not idempotent (PM-5).
#
# The todo list comes through the narrow :class:`TodoSource`; :class:`ProjectedTodos` reads it
# from the todo projection (:mod:`projections.tools`), and only when a todo reminder is due.

Role = Literal["assistant", "user"]
ROLES: tuple[str, ...] = ("assistant", "user")
MESSAGE_KEY_PREFIX = "message:"
"""A message's idempotency key is this and its ``messageId`` (apart from the timers' keys)."""

Decide = Callable[[SessionSummary, TurnCounters], list[NewEvent]]
"""Builds the batch from the session as it is now; an empty batch appends nothing."""


class TodoSource(Protocol):
    """Where the reminder engine reads a session's current todo list."""

    def todos(self, session_id: str) -> Sequence[TodoItemData]: ...


class ProjectedTodos:
    """The current todo list from the todo projection, kept inline by the store (TD-4)."""

    def __init__(self, store: EventStore, projections: Projections) -> None:
        self._store = store
        self._projections = projections

    def todos(self, session_id: str) -> Sequence[TodoItemData]:
        return current_todos(self._store, self._projections.todos, session_id)


def receipt(result: AppendResult) -> dict[str, Any]:
    """Where a message or compaction landed, as the routes answer it."""
    event = result.events[-1]
    return {"sessionId": result.session_id, "seq": event.seq, "version": result.version,
            "recordedAt": event.recorded_at}


class TurnService:
    """Messages, compactions and reminder injection for the sessions of one store."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        todos: TodoSource | None = None,
        sources: Sequence[ReminderSource] = (),
    ) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._projections = ledger.projections
        self.todo_source: TodoSource = (
            todos if todos is not None else ProjectedTodos(ledger.store, ledger.projections)
        )
        self.sources: list[ReminderSource] = list(sources)
        """Reminders between the Plan and the todo reminder, in order (issue 7 adds one)."""

    def counters(self, session_id: str) -> TurnCounters:
        """The session's turn counters now; 404 unknown, 410 deleted."""
        summary = self._ledger.live(session_id)
        return self._counters(summary.session_id)

    def _counters(self, session_id: str) -> TurnCounters:
        with eventlog_errors():
            found = self._ledger.turn_counters(session_id)
            if found is None:  # only a damaged read model lacks them; the log still knows
                found = fold_turns(self._store.read_session(session_id))
        return found if found is not None else TurnCounters(session_id)

    def record_message(
        self, session_id: str, role: Role, content: str, *, continuation: bool = False,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """Append one real ``MessageRecorded``; where it landed (``seq``, ``version``)."""
        return receipt(self.message(session_id, role, content, continuation=continuation,
                                    message_id=message_id))

    def message(
        self, session_id: str, role: Role, content: str, *, continuation: bool = False,
        message_id: str | None = None,
    ) -> AppendResult:
        """Append one real ``MessageRecorded`` (EG-6: retried, never a 409).

        With ``message_id`` the batch carries the idempotency key ``message:<id>``, kept in
        the log: sending the id again appends nothing and answers the original message
        (``replayed``), also after a restart, whatever the new role and content.
        """
        if role not in ROLES:
            raise InvalidInput(
                f"role must be 'assistant' or 'user', not {role!r}",
                details=[{"loc": ["role"], "message": "unknown role"}],
            )
        if not content.strip():
            raise InvalidInput(
                "content must not be empty", details=[{"loc": ["content"], "message": "empty"}]
            )
        if message_id is not None and not message_id:
            raise InvalidInput(
                "messageId must not be empty",
                details=[{"loc": ["messageId"], "message": "empty"}],
            )
        event = MessageRecorded(role=role, kind="real", continuation=continuation,
                                content=content)
        actor: Literal["model", "user"] = "model" if role == "assistant" else "user"
        result = self._append(
            session_id, lambda _s, _c: [NewEvent(event, actor=actor)],
            idempotency_key=None if message_id is None else f"{MESSAGE_KEY_PREFIX}{message_id}",
        )
        assert result is not None  # one event, always appended
        return result

    def compact(self, session_id: str) -> dict[str, Any]:
        """Append ``ContextCompacted`` (the host compacted the context); where it landed."""
        batch = [NewEvent(ContextCompacted(), actor="host")]
        result = self._append(session_id, lambda _s, _c: batch)
        assert result is not None
        return receipt(result)

    def prepare_request(
        self, session_id: str, tools: Collection[str], *, continuation: bool = False
    ) -> list[Reminder]:
        """Decide this request's reminders and record them; nothing is appended for none."""
        for name in tools:
            if not name.strip():
                raise InvalidInput(
                    "tool names must not be empty",
                    details=[{"loc": ["tools"], "message": "empty tool name"}],
                )
        request = TurnRequest.of(tools, continuation=continuation)
        decided: list[Reminder] = []

        def decide(summary: SessionSummary, counters: TurnCounters) -> list[NewEvent]:
            decided[:] = decide_reminders(
                counters, request, lambda: self._todos(summary.session_id),
                sources=self.sources, workspace=summary.workspace,
            )
            return _reminder_events(decided)

        self._append(session_id, decide)
        return decided

    def _todos(self, session_id: str) -> Sequence[TodoItemData]:
        with eventlog_errors():
            return self.todo_source.todos(session_id)

    def _append(
        self, session_id: str, decide: Decide, *, idempotency_key: str | None = None
    ) -> AppendResult | None:
        """Decide on a fresh read and append guarded by its version; retry when overtaken
        (never a 409: nothing appended here depends on the state read, EG-6).

        The version is read before the counters, so counters newer than the version can only
        make the append conflict, never let a stale decision through.
        """
        def attempt() -> AppendResult | None:
            summary = self._ledger.live(session_id)  # 404 / 410
            batch = decide(summary, self._counters(session_id))
            if not batch:
                return None
            return self._ledger.append(
                session_id, batch, expected_version=summary.version,
                idempotency_key=idempotency_key,
            )

        with eventlog_errors():  # what the retry does not take (a busy or broken store)
            return self._ledger.retry(session_id, attempt, unconditional=True)


def _reminder_events(reminders: Sequence[Reminder]) -> list[NewEvent]:
    """``ReminderInjected`` per reminder; the todo reminder also as a synthetic user message."""
    correlation = new_id("req") if reminders else None
    batch: list[NewEvent] = []
    for reminder in reminders:
        injected = ReminderInjected(kind=reminder.kind, text=reminder.text,
                                    variant=reminder.variant)
        batch.append(NewEvent(injected, actor="system", correlation_id=correlation))
        if reminder.kind == "todo_reminder":
            notice = MessageRecorded(role="user", kind="synthetic", source="todo_reminder",
                                     content=reminder.text)
            batch.append(NewEvent(notice, actor="system", correlation_id=correlation))
    return batch


def plan_file_source() -> ReminderSource:
    """The ``plan_file_reference`` source: on the first request after a compaction, when
    the session's plan file exists."""

    def source(context: ReminderContext) -> Reminder | None:
        if not context.counters.compacted or not context.workspace:
            return None
        found = read_plan_file(context.workspace, context.session_id)
        if found is None:
            return None
        return Reminder("plan_file_reference", plan_file_reference_text(*found))

    return source
