"""A recorded call as its caller sees it: the call view's document with its result complete.

Most results are recorded as they are answered. A TodoWrite's is recorded without the two
lists (docs/decisions.md D70): its own ``TodosWritten`` holds the new list (the document's
``todosSeq``) and the ``TodosWritten`` at the result's ``oldTodosSeq`` the list it replaced.
:func:`call_answer` reads those two events back, by seq, for the documents that need them,
so a re-sent ``callId``, ``GET …/tool-calls/{id}`` and the answers to a pending call give the
same result the call answered with. A result recorded before D70 holds its lists and is
answered as it is.
"""

from __future__ import annotations

from typing import Any

from eventlog import EventStore, TodoItemData, TodosWritten
from projections.tables import Doc
from projections.tools import call_wire

from .todo_contract import answer_result, is_recorded_by_reference, recorded_old_seq

__all__ = ["call_answer", "written_list"]


def written_list(store: EventStore, session_id: str, seq: int) -> tuple[TodoItemData, ...]:
    """The list the ``TodosWritten`` at ``seq`` of the session wrote."""
    for event in store.read_session(session_id, after=seq - 1, limit=1):
        if isinstance(event.data, TodosWritten):
            return event.data.todos
    raise LookupError(f"{session_id} seq {seq} is not the TodosWritten a TodoWrite names")


def call_answer(store: EventStore, doc: Doc) -> dict[str, Any]:
    """The SPEC §11 tool-call document of ``doc``, its result complete."""
    wire = call_wire(doc)
    result = wire.get("result")
    todos_seq = doc.body.get("todosSeq")
    if todos_seq is None or result is None or not is_recorded_by_reference(result):
        return wire
    old_seq = recorded_old_seq(result)
    old = () if old_seq is None else written_list(store, doc.session_id, old_seq)
    wire["result"] = answer_result(result, old, written_list(store, doc.session_id, todos_seq))
    return wire
