"""TodoRead and TodoWrite as service tools: the executor's view of the todo contract (§4).

Both are read-only and need no approval, so the permission service allows them in every mode,
Plan included (TD-3; TodoWrite's side-effect scope is ``session`` and it is declared allowed in
Plan). Neither ever waits for the user under the default rules; should a workspace rule make
one ask, the answer step runs it like the first step would (a ``modify`` must pass the same
schema), and a ``deny`` completes it as declined.

TodoWrite's outcome carries one ``TodosWritten`` event with the whole new list: the executor
appends it in the call's one batch, and the store's todo projection replaces the session's
rows in that same transaction (TD-4). Its recorded result refers to the lists instead of
repeating them (D70); the caller gets them in the answer. The list before the write comes from
:attr:`ToolContext.todos`, which the executor loads with the session's summary, so
``oldTodos`` is the list the write replaced (a concurrent write makes the append conflict
and the executor runs the call again on the fresh list).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eventlog import InteractionKind, TodosWritten

from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .handlers import HandlerOutcome, Resolution, ToolContext
from .todo_contract import (
    READ_DESCRIPTION,
    WRITE_DESCRIPTION,
    parse_read_input,
    parse_write_input,
    read_model_schema,
    read_result,
    write_model_schema,
    write_result,
)

__all__ = ["TodoReadHandler", "TodoWriteHandler"]


def _declined(tool: str, resolution: Resolution | None) -> HandlerOutcome | None:
    """The outcome of a call the user declined, or ``None`` when it may run."""
    if resolution is None or resolution.decision != "deny":
        return None
    return HandlerOutcome(
        success=False, model_content=f"The user declined the {tool} call.",
        result={"declined": True},
    )


class TodoWriteHandler:
    """Replaces the session's whole todo list (TD-3)."""

    descriptor: ToolDescriptor = SERVICE_TOOLS["TodoWrite"]
    description: str = WRITE_DESCRIPTION

    def model_schema(self) -> dict[str, Any]:
        return write_model_schema()

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        parse_write_input(raw)

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        parse_write_input(raw)

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """Only reached when a workspace rule makes TodoWrite ask: show the new list."""
        return "toolApproval", {"tool": "TodoWrite", "input": dict(raw)}

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        declined = _declined("TodoWrite", resolution)
        if declined is not None:
            return declined
        # ``raw`` passed validate_input (or validate_answer): its items only become the
        # catalog's, in one validation of the event.
        written = TodosWritten.model_validate({"todos": raw["todos"]})
        answer = write_result(context.todos, written.todos, old_seq=context.todos_seq)
        # The log keeps the result without the lists: TodosWritten holds the new one, the
        # write at ``oldTodosSeq`` the old one (D70). The caller gets them all the same.
        return HandlerOutcome(
            success=True, model_content=answer.text, result=answer.recorded or answer.result,
            answer=answer.result, events=(written,),
        )


class TodoReadHandler:
    """Returns the session's current todo list and its counts."""

    descriptor: ToolDescriptor = SERVICE_TOOLS["TodoRead"]
    description: str = READ_DESCRIPTION

    def model_schema(self) -> dict[str, Any]:
        return read_model_schema()

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        parse_read_input(raw)

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        parse_read_input(raw)

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """Only reached when a workspace rule makes TodoRead ask."""
        return "toolApproval", {"tool": "TodoRead", "input": dict(raw)}

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        declined = _declined("TodoRead", resolution)
        if declined is not None:
            return declined
        answer = read_result(context.todos)
        return HandlerOutcome(success=True, model_content=answer.text, result=answer.result)
