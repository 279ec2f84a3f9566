"""TodoWrite and TodoRead, whole: their words, their contract with the handlers, the handlers
(TD-1 … TD-5).

What the model reads (:data:`WRITE_DESCRIPTION`, :data:`READ_DESCRIPTION`, the model schemas),
what it may write (:class:`TodoWriteInput`, :class:`TodoReadInput`), what comes back
(:func:`write_result`, :func:`read_result`) and how the log keeps it (:func:`answer_result`,
D70), and :class:`TodoWriteHandler` / :class:`TodoReadHandler`, the executor's view of all this.
Pure code, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eventlog import InteractionKind, TodoItemData, TodosWritten

from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .ask import blank
from .handlers import HandlerOutcome, Resolution, TodoFields, ToolContext

__all__ = [
    "MAX_TODOS",
    "MAX_TODO_CHARS",
    "READ_DESCRIPTION",
    "STATUSES",
    "TODOS_DESCRIPTION",
    "UNFINISHED",
    "WRITE_DESCRIPTION",
    "TodoItem",
    "TodoReadHandler",
    "TodoReadInput",
    "TodoResult",
    "TodoWriteHandler",
    "TodoWriteInput",
    "answer_result",
    "dropped_unfinished",
    "is_recorded_by_reference",
    "item_wire",
    "list_lines",
    "parse_read_input",
    "parse_write_input",
    "read_model_schema",
    "read_result",
    "recorded_old_seq",
    "summary",
    "write_model_schema",
    "write_result",
]


# -- the words (TD-2, TD-3) --------------------------------------------------------------------

TODOS_DESCRIPTION = (
    "The complete updated todo list. At most one item may be in_progress at a time."
)
"""The exact schema description of ``todos`` (TD-2)."""

STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")
UNFINISHED = frozenset({"pending", "in_progress"})

WRITE_DESCRIPTION = (
    "Create and manage the structured todo list of this session: track progress on "
    "multi-step work and show the user what you are doing.\n\n"
    "Send the COMPLETE list every time: each call replaces the whole list, so an item you "
    "leave out is removed. Keep at most one item in_progress at a time; mark an item "
    "completed as soon as it is done, before starting the next. Each item has `content` "
    "(what to do, non-empty), `status` (pending, in_progress or completed) and `priority` "
    "(high, medium or low); items have no id."
)
"""What the model is told about TodoWrite (TD-2)."""

READ_DESCRIPTION = (
    "Read the current todo list of this session: every item with its status and priority, "
    "in order, and how many are pending, in progress and completed. Takes no input."
)
"""What the model is told about TodoRead (TD-3)."""


# -- the contract: input schemas (TD-1, TD-2) ------------------------------------------------
#
# TodoWriteInput is ``{"todos": [item…]}`` (TD-1), strict: no coercion, unknown fields rejected
# at both levels. An item has no id: ``content`` (non-empty, not blank as :func:`.ask.visible`
# sees it: only zero-width characters is blank), ``status`` and ``priority``. The schema
# description of ``todos`` is the exact TD-2 sentence. More than one ``in_progress`` item is
# accepted: the rule is advisory (parallel subagents). TodoReadInput is ``{}``, strict.


MAX_TODOS = 1_000
"""Items a todo list holds at most, whoever writes it (TodoWrite here, a host's todo tool
through its hooks or an import): a longer list is refused naming this bound (issue 41)."""
MAX_TODO_CHARS = 10_000
"""Characters one item's text holds at most."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TodoItem(_Strict):
    """One todo as the model writes it: no id."""

    content: str = Field(min_length=1, max_length=MAX_TODO_CHARS, description="What to do.")
    status: Literal["pending", "in_progress", "completed"]
    priority: Literal["high", "medium", "low"]

    @field_validator("content")
    @classmethod
    def _not_blank(cls, content: str) -> str:
        if blank(content):  # only zero-width characters is blank too (EG-7)
            raise ValueError("content must not be blank (nothing in it is visible)")
        return content

    def to_data(self) -> TodoItemData:
        return TodoItemData(content=self.content, status=self.status, priority=self.priority)


class TodoWriteInput(_Strict):
    """TodoWrite's input: the whole new list (TD-1)."""

    todos: list[TodoItem] = Field(max_length=MAX_TODOS, description=TODOS_DESCRIPTION)


class TodoReadInput(_Strict):
    """TodoRead's input: nothing."""


def parse_write_input(raw: Mapping[str, Any]) -> TodoWriteInput:
    """Validate the model's TodoWrite input; raises ``pydantic.ValidationError``."""
    return TodoWriteInput.model_validate(dict(raw))


def parse_read_input(raw: Mapping[str, Any]) -> TodoReadInput:
    """Validate TodoRead's (empty) input; raises ``pydantic.ValidationError``."""
    return TodoReadInput.model_validate(dict(raw))


def _for_model(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's schema without titles and without the models' docstrings (written for
    maintainers, not the model); the field descriptions stay."""
    schema = {k: v for k, v in schema.items() if k not in ("title", "description")}
    for key, value in list(schema.items()):
        if key == "properties":
            schema[key] = {
                name: {k: v for k, v in prop.items() if k != "title"}
                for name, prop in value.items()
            }
        elif key == "$defs":
            schema[key] = {name: _for_model(d) for name, d in value.items()}
    return schema


def write_model_schema() -> dict[str, Any]:
    """The JSON schema TodoWrite gives the model."""
    return _for_model(TodoWriteInput.model_json_schema())


def read_model_schema() -> dict[str, Any]:
    """The JSON schema TodoRead gives the model: an object with no properties."""
    return _for_model(TodoReadInput.model_json_schema())


# -- results (TD-3, D28, D70) -----------------------------------------------------------------
#
# write_result builds what TodoWrite returns (TD-3): ``oldTodos``, ``todos``, ``summary`` keyed
# by the status values plus ``total``, and ``droppedUnfinished`` — the old pending or
# in-progress items whose content no longer appears in the new list, so the model notices an
# unfinished item it may have lost (the write still replaces the list). Contents are compared
# exactly, as a multiset: each new item covers at most one old item with the same content
# (docs/decisions.md D28).
#
# The log records that result without the two lists (D70): the new list is the call's own
# ``TodosWritten`` and the old one the ``TodosWritten`` at ``oldTodosSeq`` (``null`` when the
# list was empty), so ``ToolCallCompleted`` keeps only ``summary``, ``droppedUnfinished`` and
# that seq. answer_result puts the lists back for readers of a recorded call.


def item_wire(item: TodoFields) -> dict[str, str]:
    """An item as results and the session document show it."""
    return {"content": item.content, "status": item.status, "priority": item.priority}


def summary(todos: Sequence[TodoFields]) -> dict[str, int]:
    """Counts by status, keyed by the status values, plus ``total`` (TD-3)."""
    counts = dict.fromkeys(STATUSES, 0)
    for todo in todos:
        counts[todo.status] += 1
    counts["total"] = len(todos)
    return counts


def dropped_unfinished(
    old: Sequence[TodoFields], new: Sequence[TodoFields]
) -> list[TodoFields]:
    """Old pending/in-progress items whose content is not in ``new`` (matched exactly).

    A multiset match: each new item covers at most one old item of the same content, and
    unfinished old items are covered first, in list order; so with three unfinished "A"s
    before and one "A" after, the last two are reported. Renames count as dropped; reorders
    and status changes do not; completed items are never reported.
    """
    unfinished = [t for t in old if t.status in UNFINISHED]
    contents = {t.content for t in unfinished}
    if len(contents) == len(unfinished) and contents <= {t.content for t in new}:
        return []  # each distinct unfinished item is still there: nothing to match up
    available = Counter(t.content for t in new)
    dropped = []
    for item in old:
        if item.status not in UNFINISHED:
            continue
        if available[item.content] > 0:
            available[item.content] -= 1
        else:
            dropped.append(item)
    return dropped


def list_lines(todos: Sequence[TodoFields]) -> list[str]:
    """``1. [in_progress] content`` per item, in list order."""
    return [f"{i}. [{t.status}] {t.content}" for i, t in enumerate(todos, start=1)]


def _counts_text(counts: dict[str, int]) -> str:
    noun = "item" if counts["total"] == 1 else "items"
    return (f"{counts['total']} {noun}: {counts['in_progress']} in progress, "
            f"{counts['pending']} pending, {counts['completed']} completed")


@dataclass(frozen=True, slots=True)
class TodoResult:
    """A todo tool's result dict and the text the model gets; ``recorded`` is the result as
    the log keeps it when that differs (TodoWrite's, without the lists: D70)."""

    result: dict[str, Any]
    text: str
    recorded: dict[str, Any] | None = None


_OLD_SEQ = "oldTodosSeq"
"""The recorded result's reference to the ``TodosWritten`` that held the replaced list."""


def write_result(
    old: Sequence[TodoFields], new: Sequence[TodoFields], *, old_seq: int | None = None
) -> TodoResult:
    """TodoWrite's result (TD-3): the lists before and after, counts, dropped items; and the
    recorded form, which names ``old_seq`` (the write of ``old``) instead of the lists
    (``None`` when ``old`` is not empty and its seq is unknown: the full result is recorded)."""
    lost = dropped_unfinished(old, new)
    dropped = [item_wire(t) for t in lost]
    counts = summary(new)
    text = (f"Todo list updated ({_counts_text(counts)}). Keep it current: send the complete "
            "list with every change and keep at most one item in_progress.")
    if lost:
        text += ("\n\nThese unfinished items from the previous list are no longer in it:\n"
                 + "\n".join(list_lines(lost))
                 + "\nIf you did not mean to remove them, write the list again including them.")
    return TodoResult(
        result={  # item_wire's dicts, built inline: 40 of them per call of a 20-item list
            "oldTodos": [
                {"content": t.content, "status": t.status, "priority": t.priority} for t in old
            ],
            "todos": [
                {"content": t.content, "status": t.status, "priority": t.priority} for t in new
            ],
            "summary": counts,
            "droppedUnfinished": dropped,
        },
        text=text,
        # Without the seq of a non-empty old list there is nothing to refer to: record it all.
        recorded=None if old and old_seq is None else {
            "summary": counts, "droppedUnfinished": dropped,
            _OLD_SEQ: old_seq if old else None,
        },
    )


def is_recorded_by_reference(result: dict[str, Any]) -> bool:
    """Whether ``result`` is a TodoWrite result as the log records it since D70 (a result
    recorded before that holds the lists itself and is answered as it is)."""
    return _OLD_SEQ in result and "todos" not in result


def answer_result(
    recorded: dict[str, Any], old: Sequence[TodoFields], new: Sequence[TodoFields]
) -> dict[str, Any]:
    """The result a caller gets for a recorded TodoWrite: ``recorded`` with the replaced
    list ``old`` (the ``TodosWritten`` at ``oldTodosSeq``, empty for ``null``) and the
    written list ``new`` (the call's own ``TodosWritten``) put back."""
    return {
        "oldTodos": [item_wire(t) for t in old],
        "todos": [item_wire(t) for t in new],
        "summary": recorded["summary"],
        "droppedUnfinished": recorded["droppedUnfinished"],
    }


def recorded_old_seq(recorded: dict[str, Any]) -> int | None:
    """The seq of the ``TodosWritten`` holding the list a recorded TodoWrite replaced."""
    seq = recorded[_OLD_SEQ]
    return None if seq is None else int(seq)


def read_result(todos: Sequence[TodoFields]) -> TodoResult:
    """TodoRead's result: the current list and its counts."""
    counts = summary(todos)
    if todos:
        text = f"Current todo list ({_counts_text(counts)}):\n" + "\n".join(list_lines(todos))
    else:
        text = "The todo list is empty."
    return TodoResult(
        result={"todos": [item_wire(t) for t in todos], "summary": counts}, text=text,
    )


# -- the handlers: the executor's view of the contract (TD-3, TD-4) --------------------------
#
# Both tools are read-only and need no approval, so the permission service allows them in
# every mode, Plan included (TD-3; TodoWrite's side-effect scope is ``session`` and it is
# declared allowed in Plan). Neither ever waits for the user under the default rules; should a
# workspace rule make one ask, the answer step runs it like the first step would (a ``modify``
# must pass the same schema), and a ``deny`` completes it as declined.
#
# TodoWrite's outcome carries one ``TodosWritten`` event with the whole new list: the executor
# appends it in the call's one batch, and the store's todo projection replaces the session's
# rows in that same transaction (TD-4). Its recorded result refers to the lists instead of
# repeating them (D70); the caller gets them in the answer. The list before the write comes
# from :attr:`ToolContext.todos`, which the executor loads with the session's summary, so
# ``oldTodos`` is the list the write replaced (a concurrent write makes the append conflict and
# the executor runs the call again on the fresh list).


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
        dropped = answer.result["droppedUnfinished"]
        if dropped:  # the event names them too, the one rule of live and hooked sessions (CC-10)
            written = written.model_copy(update={"dropped_unfinished": tuple(
                TodoItemData.model_validate(item) for item in dropped
            )})
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
