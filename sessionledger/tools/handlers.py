"""The handler side of a tool: what the executor asks of every service tool.

A handler validates the model's input, says what to show the user when the call needs them,
and runs — returning a :class:`HandlerOutcome` (success, result, the text for the model, and
any extra events to append with the completion). Handlers do no I/O of their own: everything
they change is in the events they return (the plan file of PM-7 is the one exception, in its
issue: such a handler is :class:`DecidesFirst`, so its answer is on record before it runs).
A handler that reads a port bounds the call by its budget with :func:`call_with_timeout`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, cast, runtime_checkable

from eventlog import (
    Event,
    FollowUpData,
    HostKind,
    InteractionKind,
    PlanApprovalCancelCause,
    TurnControlData,
)
from projections import SessionSummary

from ..permission.descriptors import ToolDescriptor

__all__ = [
    "AbandonCause",
    "AskAware",
    "Asked",
    "DecidesFirst",
    "HandlerOutcome",
    "PortTimeout",
    "Resolution",
    "TodoFields",
    "ToolContext",
    "ToolHandler",
    "Withdrawable",
    "Withdrawal",
    "call_with_timeout",
]


class TodoFields(Protocol):
    """A todo's three fields: the catalog's :class:`~eventlog.TodoItemData`, or a stored row
    of the todo table read as it is (the executor's current list, never revalidated)."""

    @property
    def content(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def priority(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a handler may know about the session it runs in."""

    session: SessionSummary
    call_id: str
    todos: tuple[TodoFields, ...] = ()
    """The session's current todo list, in order (the todo table's rows, loaded by the
    executor for each step)."""
    todos_seq: int | None = None
    """The session seq of the ``TodosWritten`` that wrote :attr:`todos` (``None`` when the
    list is empty): what a TodoWrite's recorded result names as the list it replaced (D70)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    """The user's answer to an interaction, when the call needed one."""

    decision: Literal["modify", "approve", "deny", "feedback", "autoContinued"]
    input: Mapping[str, Any] | None = None
    feedback: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerOutcome:
    """What a run produced; ``events`` are appended in the completion's batch.

    ``result`` is what ``ToolCallCompleted`` records. ``answer``, when set, is the result the
    caller gets instead: the full result when the recorded one refers to data other events of
    the batch or the log already hold (TodoWrite's lists, D70); a reader of the log rebuilds
    it from those references.
    """

    success: bool
    model_content: str
    result: dict[str, Any] = field(default_factory=dict)
    answer: dict[str, Any] | None = None
    events: tuple[Event, ...] = ()
    turn_control: TurnControlData | None = None
    follow_up: FollowUpData | None = None


class ToolHandler(Protocol):
    """A service tool's contract and behaviour."""

    @property
    def descriptor(self) -> ToolDescriptor: ...

    @property
    def description(self) -> str: ...

    def model_schema(self) -> dict[str, Any]:
        """The JSON schema given to the model."""

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        """Raise ``pydantic.ValidationError`` when the model's input fails the schema."""

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` (e.g. ``pydantic.ValidationError``) when a user-modified input
        fails the handler's schema or does not answer the ``original`` call (the answer is
        refused with 422 and the call stays pending, HO-8)."""

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """The kind and payload shown to the user when the call waits for them."""

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        """Run with the (possibly user-modified) input; ``resolution`` if the user answered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Asked:
    """A waiting call as one host shows it (replaces :meth:`ToolHandler.interaction`)."""

    kind: InteractionKind
    payload: dict[str, Any]
    events: tuple[Event, ...] = ()


@runtime_checkable
class AskAware(Protocol):
    """A handler with something to record when its call needs the user (ExitPlanMode's
    ``PlanSubmitted``, PM-6) or when a deny broker refuses it (PM-9's turn stop)."""

    def asked(self, context: ToolContext, raw: Mapping[str, Any], host: HostKind) -> Asked:
        """What ``host`` shows the user, and the events appended with the interaction."""

    def broker_denied(self, context: ToolContext, raw: Mapping[str, Any]) -> HandlerOutcome:
        """Events and turn control appended with the broker's denial."""


AbandonCause = PlanApprovalCancelCause
"""Why a decided answer was not carried out: its run was ``cancelled`` (shutdown, deletion),
or a later access found it ``interrupted`` (decided, never completed)."""


@runtime_checkable
class DecidesFirst(Protocol):
    """A handler whose answer must be on record before it runs, because running does work
    outside the log (ExitPlanMode's approval writes the plan file, PM-7).

    For such an answer the executor appends ``InteractionResolved`` in a batch of its own,
    then runs the handler and appends its events with the completion in a second batch. An
    answer that never reaches the second batch — the run was cancelled, or the service
    stopped in between — is *abandoned*: the events of :meth:`abandoned` are appended with the
    same request asked again, then :meth:`undo` puts back what the run did outside the log.
    """

    def decides_first(self, resolution: Resolution) -> bool:
        """Whether this answer is recorded alone before :meth:`ToolHandler.run`."""

    def abandoned(
        self, context: ToolContext, raw: Mapping[str, Any], cause: AbandonCause
    ) -> tuple[Event, ...]:
        """The events recording that the answer to the call with input ``raw`` (as
        answered) was not carried out."""

    def undo(self, context: ToolContext, raw: Mapping[str, Any]) -> None:
        """After the abandonment is on record: make what the run may have done outside the
        log agree with the log again (idempotent, best effort)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Withdrawal:
    """What a handler adds when its waiting call is withdrawn (D157): events appended with
    the withdrawal, fields for the call's result, a sentence for the model."""

    events: tuple[Event, ...] = ()
    result: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@runtime_checkable
class Withdrawable(Protocol):
    """A handler with something to say or record when the host withdraws its waiting call
    (the caller cancelled the request; nobody answered): ExitPlanMode's plan stays
    unapproved. The handler itself never runs for a withdrawal."""

    def withdrawn(self, context: ToolContext, raw: Mapping[str, Any]) -> Withdrawal:
        """The events, result fields and note of the withdrawal of the call with ``raw``."""


# -- calling a port within a budget (the ports themselves: :mod:`sessionledger.tools.ports`) ---

T = TypeVar("T")


class PortTimeout(TimeoutError):
    """A port call did not answer within its budget."""


def call_with_timeout(function: Callable[[], T], timeout_s: float, *, name: str) -> T:
    """Run ``function`` on a daemon thread and wait at most ``timeout_s`` seconds for it.

    Its exception is re-raised here; past the budget :class:`PortTimeout` is raised and the
    call is abandoned (a port that hangs keeps only its own thread; nothing waits for it).
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the caller
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"port-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise PortTimeout(f"{name} did not answer within {timeout_s:g} s")
    if "error" in outcome:
        raise cast(BaseException, outcome["error"])
    return cast(T, outcome["value"])
