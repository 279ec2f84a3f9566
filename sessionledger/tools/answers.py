"""Answers decided first: the decision on record, then the run and its completion (PM-7).

Most answers are one batch (D21): ``InteractionResolved``, the handler's events and
``ToolCallCompleted``. A :class:`~sessionledger.tools.handlers.DecidesFirst` handler does work
outside the log when it runs (ExitPlanMode's approval writes the plan file), and PM-7 wants the
user's decision recorded before that work: the executor appends the decision alone and hands
the rest to :meth:`DecidedAnswers.carry_out` — run the handler, then append its events with
the completion in a second batch, guarded by the session's version.

Between the two batches the log holds a pending call whose interaction is resolved. Such an
answer is *abandoned* when it cannot finish: at once when its run was cancelled and the store
still takes appends (``cancelled``), else on the session's next access after a restart
(:meth:`DecidedAnswers.resume`, ``interrupted``). Abandoning appends the handler's own record
of it and the same request again (a new interaction with the old kind and payload) in one
batch, then lets the handler undo what its run did outside the log. So a call never waits for
an interaction that is no longer pending, and Plan is never left without ``PlanApproved``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from eventlog import (
    EventLogError,
    EventStore,
    InteractionRequested,
    InteractionResolved,
    NewEvent,
    ToolCallCompleted,
    new_id,
)
from projections import Projections, SessionSummary
from projections.tables import Doc
from projections.tools import call_document, call_wire

from ..errors import ServiceUnavailable, SessionLedgerError
from ..ledger import retry_overtaken
from ..logs import log_event
from ..service import ExecutionRuntime
from .handlers import (
    AbandonCause,
    DecidesFirst,
    HandlerOutcome,
    Resolution,
    ToolContext,
    ToolHandler,
)
from .registry import ToolRegistry

__all__ = ["DecidedAnswers", "completed_event", "resolved_event"]

_log = logging.getLogger("sessionledger.executor")

ContextOf = Callable[[SessionSummary, str], ToolContext]


def resolved_event(
    interaction_id: str, call_id: str, resolution: Resolution
) -> InteractionResolved:
    """The user's (or the timer's) decision on an interaction."""
    return InteractionResolved(
        interaction_id=interaction_id, call_id=call_id, decision=resolution.decision,
        input=dict(resolution.input) if resolution.input is not None else None,
        feedback=resolution.feedback,
    )


def completed_event(tool: str, call_id: str, outcome: HandlerOutcome) -> ToolCallCompleted:
    """The call's completion with what the handler produced."""
    return ToolCallCompleted(
        call_id=call_id, tool=tool, status="completed", success=outcome.success,
        result=outcome.result, model_content=outcome.model_content,
        turn_control=outcome.turn_control, follow_up_user_input=outcome.follow_up,
    )


class DecidedAnswers:
    """The second step of answers decided first, and the abandonment of unfinished ones."""

    def __init__(
        self, *, store: EventStore, projections: Projections, runtime: ExecutionRuntime,
        registry: ToolRegistry, context: ContextOf,
    ) -> None:
        self._store = store
        self._projections = projections
        self._runtime = runtime
        self._registry = registry
        self._context = context

    def carry_out(
        self, session_id: str, handler: ToolHandler, raw: Mapping[str, Any], call_id: str,
        interaction_id: str, resolution: Resolution,
    ) -> dict[str, Any]:
        """Run the handler, then append its events with the completion, guarded (a lost race
        runs it again from the new state); the call document. A run that raises
        ServiceUnavailable (a cancellation) is abandoned; so is one whose request another
        writer asked again meanwhile (its run is then undone)."""
        assert isinstance(handler, DecidesFirst)
        ran = False

        def attempt() -> dict[str, Any]:
            nonlocal ran
            session = self._projections.summary(self._store, session_id)
            call = self._projections.call(self._store, session_id, call_id)
            assert session is not None and call is not None
            context = self._context(session, call_id)
            if call.body["interactionId"] != interaction_id:
                if ran:
                    handler.undo(context, raw)
                raise ServiceUnavailable(
                    "the answer was abandoned before it completed; it is asked again",
                    details={"callId": call_id, "interactionId": call.body["interactionId"]},
                )
            try:
                outcome = handler.run(context, raw, resolution)
            except ServiceUnavailable as exc:
                raise self._cancelled(session_id, call_id, exc) from exc
            ran = True
            events = [*outcome.events, completed_event(handler.descriptor.name, call_id, outcome)]
            appended = self._store.append(  # overtaken: run again from the new state
                session_id, [NewEvent(e, actor="user", causation_id=call_id) for e in events],
                expected_version=session.version,
            )
            self._runtime.observe(session_id, appended.events)
            done = call_document(appended.events, session_id, call_id, before=call)
            assert done is not None
            return call_wire(done)

        return retry_overtaken(session_id, attempt, unconditional=True)

    def _cancelled(
        self, session_id: str, call_id: str, error: ServiceUnavailable
    ) -> ServiceUnavailable:
        """The run was cancelled: abandon it now if the store still takes appends (a deleted
        session needs nothing; a closed store leaves it to :meth:`resume`)."""
        try:
            asked = self._abandon(session_id, "cancelled", only=call_id)
        except (EventLogError, SessionLedgerError) as exc:
            log_event(_log, "abandon deferred", sessionId=session_id, callId=call_id,
                      error=exc.__class__.__name__)
            asked = []
        details = {"callId": call_id, "interactionId": asked[0] if asked else None}
        return ServiceUnavailable(error.message, details=details)

    def resume(self, session_id: str) -> int:
        """Abandon the session's answers that are on record but were never completed (the
        service stopped between the two batches), as ``interrupted``; the number."""
        return len(self._abandon(session_id, "interrupted"))

    def _abandon(
        self, session_id: str, cause: AbandonCause, *, only: str | None = None
    ) -> list[str]:
        """Append each unfinished answer's abandonment and its request again, then let the
        handlers undo their runs; the new interaction ids."""
        def attempt() -> list[str]:
            session = self._projections.summary(self._store, session_id)
            if session is None or session.deleted:
                return []
            batch: list[NewEvent] = []
            undo: list[tuple[DecidesFirst, ToolContext, Mapping[str, Any]]] = []
            for call, interaction in self._unfinished(session_id, only):
                handler = self._registry.handler(call.body["tool"])
                if not isinstance(handler, DecidesFirst):
                    continue  # other answers are one batch: never unfinished
                call_id, raw = call.body["callId"], _answered_input(call)
                context = self._context(session, call_id)
                again = InteractionRequested(
                    interaction_id=new_id("int"), call_id=call_id,
                    kind=interaction.body["kind"], payload=interaction.body["payload"],
                )
                batch += [NewEvent(e, actor="system", causation_id=call_id)
                          for e in (*handler.abandoned(context, raw, cause), again)]
                undo.append((handler, context, raw))
            if not batch:
                return []
            appended = self._store.append(session_id, batch, expected_version=session.version)
            self._runtime.observe(session_id, appended.events)
            for undoer, context, raw in undo:
                undoer.undo(context, raw)
            return [e.event.interaction_id for e in batch
                    if isinstance(e.event, InteractionRequested)]

        return retry_overtaken(session_id, attempt)

    def _unfinished(self, session_id: str, only: str | None) -> list[tuple[Doc, Doc]]:
        """Pending calls whose interaction is resolved, each with that interaction."""
        view = self._projections.tool_calls
        pending = self._store.read_view(lambda tx: view.of_session(tx, session_id, "pending"))
        found = []
        for call in pending:
            interaction_id = call.body.get("interactionId")
            if interaction_id is None or only not in (None, call.body["callId"]):
                continue
            interaction = self._projections.interaction(self._store, interaction_id)
            if interaction is not None and interaction.status == "resolved":
                found.append((call, interaction))
        return found


def _answered_input(call: Doc) -> Mapping[str, Any]:
    """The input an answer on record runs with: the user's modified input, else the call's."""
    answer = call.body.get("resolution") or {}
    modified = answer.get("input")
    if answer.get("decision") == "modify" and isinstance(modified, Mapping):
        return modified
    original: Mapping[str, Any] = call.body["input"]
    return original
