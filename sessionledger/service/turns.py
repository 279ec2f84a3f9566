"""The turn loop's record: messages, compactions, and the reminders each model request gets.

A host tells the service what happened in the conversation (:meth:`TurnService.record_message`,
:meth:`TurnService.compact`) and, before each model request, asks which reminders to inject
(:meth:`TurnService.prepare_request`). The decision is :func:`.reminders.decide_reminders`
over the session's turn counters (an inline projection, so a restart answers the same); every
reminder it returns is recorded as ``ReminderInjected`` — the todo reminder also as a
synthetic user message (TD-5) — in one batch guarded by the session's version, so two hosts
preparing at once never both inject the same reminder. Recording moves the counters, which
is why ``prepare-request`` is not idempotent (PM-5).

The todo list comes through the narrow :class:`TodoSource`; :class:`ProjectedTodos` reads it
from the todo projection (:mod:`projections.tools`), and only when a todo reminder is due.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, Protocol

from eventlog import (
    AppendResult,
    ContextCompacted,
    EventStore,
    MessageRecorded,
    NewEvent,
    ReminderInjected,
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
from .reminder_texts import plan_file_reference_text
from .reminders import (
    Reminder,
    ReminderContext,
    ReminderSource,
    TurnRequest,
    decide_reminders,
)

__all__ = [
    "MESSAGE_KEY_PREFIX", "ProjectedTodos", "Role", "TodoSource", "TurnService",
    "plan_file_source", "receipt",
]

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
