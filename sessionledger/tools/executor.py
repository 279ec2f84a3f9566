"""The path every service tool call takes (docs/spec.md tool calls, HO-1 … HO-3, HO-8).

validate input → permission → allow: run the handler; deny: complete as denied; ask: hand the
call to the session's broker, which either denies at once (headless) or leaves it pending in
the session's interaction queue until the user answers. Each step is one appended batch
(``ToolCallRequested`` … ``ToolCallCompleted``), guarded by the session's expected version, so a
pending call lives in the log: it survives a restart and completes when answered afterwards.
Re-sending a ``callId`` returns the original call and never runs it twice.

An answer to a :class:`~sessionledger.tools.handlers.DecidesFirst` handler (ExitPlanMode's
approval, PM-7) takes two batches: the decision alone, then the handler's events with the
completion. One that never gets its second batch is abandoned — at once when its run was
cancelled, else by :meth:`ToolExecutor.resume` on the session's next access — and its
request asked again, so no call waits for an interaction that is no longer pending.

The module holds the whole path, in the order a call meets it: the brokers (how each kind of
host answers a call that needs the user: a pending interaction for protocol hosts and the TUI,
a refusal at once for a headless run), a recorded call as its caller sees it (a TodoWrite's
result is recorded by reference, D70, and completed here from its two ``TodosWritten``), the
answers decided first (the decision on record, then the run and its completion, and the
abandonment of one that never got its second batch), and the executor itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from pydantic import ValidationError

from eventlog import (
    Event,
    EventLogError,
    EventStore,
    HostKind,
    InteractionRequested,
    InteractionResolved,
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    RecordedEvent,
    TodoItemData,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
    new_id,
)
from eventlog.envelope import Actor
from projections import SessionSummary
from projections.session import SummaryMemory
from projections.tables import Doc
from projections.tools import call_document, call_key, call_wire
from statemachine.execution import ExecutionState

from ..errors import Conflict, InvalidInput, NotFound, ServiceUnavailable, SessionLedgerError
from ..ledger import Ledger
from ..logs import log_event
from ..permission.descriptors import ToolDescriptor
from .handlers import (
    AbandonCause,
    AskAware,
    DecidesFirst,
    HandlerOutcome,
    Resolution,
    TodoFields,
    ToolContext,
    ToolHandler,
    Withdrawable,
    Withdrawal,
)
from .registry import SurfaceOptions, ToolRegistry
from .todo import answer_result, is_recorded_by_reference, recorded_old_seq

__all__ = [
    "BROKERS",
    "Broker",
    "CallAnswer",
    "DecidedAnswers",
    "Decision",
    "DenyBroker",
    "Pending",
    "PendingBroker",
    "PermissionAuthority",
    "ToolExecutor",
    "broker_for",
    "call_answer",
    "check_input",
    "completed_event",
    "host_interaction_id",
    "resolved_event",
    "summarize",
    "validation_details",
    "withdrawn_text",
    "written_list",
]


def host_interaction_id(call_id: str) -> str:
    """The id of the question or plan approval a host's hook put to a person here for its call
    ``call_id``: named after the call, so the host's event sent again finds it. What tells it
    from the ledger's own calls in a hooked session (its tool route): once answered, the host
    runs its call and reports the result, while the ledger's own call is completed here."""
    text = json.dumps(call_id, ensure_ascii=False)
    return f"int_{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:26]}"


def _hosts_own(session: SessionSummary, interaction_id: str, call_id: str) -> bool:
    """Whether the answer goes to the program that asked (its hook hands it over, the program
    runs the call): a hooked session's host asked it."""
    return session.client is not None and interaction_id == host_interaction_id(call_id)


# -- brokers: how each kind of host answers a call that needs the user (HO-1 … HO-3) -----------

@dataclass(frozen=True, slots=True)
class Pending:
    """The call waits for the user."""


class Broker(Protocol):
    """Answers "this call needs the user" for one kind of host."""

    def on_ask(self, tool: str) -> Pending | PermissionVerdict: ...


class PendingBroker:
    """Protocol and TUI hosts: the call waits in the session's interaction queue."""

    def on_ask(self, tool: str) -> Pending | PermissionVerdict:
        return Pending()


class DenyBroker:
    """Headless hosts: no permission client, so every ask is denied at once (HO-3)."""

    def on_ask(self, tool: str) -> Pending | PermissionVerdict:
        return PermissionVerdict(
            behavior="deny",
            reason=f"No permission client configured for {tool}",
            rule_id="host.headless.noPermissionClient",
        )


BROKERS: dict[HostKind, Broker] = {
    "protocol": PendingBroker(),
    "tui": PendingBroker(),
    "headless": DenyBroker(),
}


def broker_for(host: HostKind) -> Broker:
    """The broker of a host kind."""
    return BROKERS[host]


# -- a recorded call as its caller sees it (D70) -----------------------------------------------

def written_list(store: EventStore, session_id: str, seq: int) -> tuple[TodoItemData, ...]:
    """The list the ``TodosWritten`` at ``seq`` of the session wrote."""
    for event in store.read_session(session_id, after=seq - 1, limit=1):
        if isinstance(event.data, TodosWritten):
            return event.data.todos
    raise LookupError(f"{session_id} seq {seq} is not the TodosWritten a TodoWrite names")


def call_answer(store: EventStore, doc: Doc) -> dict[str, Any]:
    """The docs/spec.md tool-call document of ``doc``, its result complete."""
    wire = call_wire(doc)
    result = wire.get("result")
    todos_seq = doc.body.get("todosSeq")
    if todos_seq is None or result is None or not is_recorded_by_reference(result):
        return wire
    old_seq = recorded_old_seq(result)
    old = () if old_seq is None else written_list(store, doc.session_id, old_seq)
    wire["result"] = answer_result(result, old, written_list(store, doc.session_id, todos_seq))
    return wire


# -- answers decided first: the decision on record, then the run (PM-7) ------------------------

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
        self, *, ledger: Ledger, registry: ToolRegistry, context: ContextOf,
    ) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._projections = ledger.projections
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
            session = self._ledger.find(session_id)
            call = self._ledger.call(session_id, call_id)
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
            appended = self._ledger.append(  # overtaken: run again from the new state
                session_id, [NewEvent(e, actor="user", causation_id=call_id) for e in events],
                expected_version=session.version,
            )
            done = call_document(appended.events, session_id, call_id, before=call)
            assert done is not None
            return call_wire(done)

        return self._ledger.retry(session_id, attempt, unconditional=True)

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
            session = self._ledger.find(session_id)
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
            self._ledger.append(session_id, batch, expected_version=session.version)
            for undoer, context, raw in undo:
                undoer.undo(context, raw)
            return [e.event.interaction_id for e in batch
                    if isinstance(e.event, InteractionRequested)]

        return self._ledger.retry(session_id, attempt)

    def _unfinished(self, session_id: str, only: str | None) -> list[tuple[Doc, Doc]]:
        """Pending calls whose interaction is resolved, each with that interaction — but a
        host's (its hook put it to a person here): the host runs it and reports the result."""
        view = self._projections.tool_calls
        pending = self._store.read_view(lambda tx: view.of_session(tx, session_id, "pending"))
        found = []
        for call in pending:
            interaction_id = call.body.get("interactionId")
            if interaction_id is None or only not in (None, call.body["callId"]) \
                    or interaction_id == host_interaction_id(call.body["callId"]):
                continue
            interaction = self._ledger.interaction(interaction_id)
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


# -- the executor ------------------------------------------------------------------------------

_LISTS_HELD = 4096
Decision = Literal["modify", "approve", "deny", "feedback"]


class PermissionAuthority(Protocol):
    """Decides allow / ask / deny for one call (the permission service of PM-3)."""

    def decide(
        self, *, tool: ToolDescriptor, input: Mapping[str, Any], state: ExecutionState,
        workspace: Path,
    ) -> PermissionVerdict: ...


@dataclass(frozen=True, slots=True)
class CallAnswer:
    """The tool-call document and the HTTP status it is answered with (200 or 202)."""

    status_code: int
    document: dict[str, Any]


def check_input(handler: ToolHandler, tool: str, raw_input: Mapping[str, Any]) -> None:
    """``raw_input`` as ``handler`` takes it, else :class:`InvalidInput` naming what is wrong
    (before any session is touched: a refused call appends nothing)."""
    try:
        handler.validate_input(raw_input)
    except ValidationError as exc:
        raise InvalidInput(
            f"{tool} input is invalid: {summarize(exc)}", details=validation_details(exc),
        ) from exc


def validation_details(error: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors as JSON-safe ``details`` of a 422."""
    return [
        {"loc": list(e["loc"]), "message": e["msg"], "type": e["type"]}
        for e in error.errors(include_url=False, include_context=False, include_input=False)
    ]


def summarize(error: ValidationError, *, limit: int = 3) -> str:
    """The first few problems of a validation error, each as ``where: what``."""
    parts = [
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
        for e in error.errors(include_url=False)[:limit]
    ]
    return "; ".join(parts)


def _answer(doc_wire: dict[str, Any]) -> CallAnswer:
    return CallAnswer(202 if doc_wire["status"] == "pending" else 200, doc_wire)


class ToolExecutor:
    """Runs service tool calls for the sessions of one store."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        registry: ToolRegistry,
        permissions: PermissionAuthority,
        surface: Callable[[SessionSummary, HostKind | None], SurfaceOptions] | None = None,
    ) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._projections = ledger.projections
        self._registry = registry
        self._permissions = permissions
        self._surface = surface
        """The session's flags and ports (dynamic workflows, off-peak) when the service
        knows them; otherwise only its host and parent decide."""
        self._paths: dict[str, Path] = {}
        self._lists: dict[str, tuple[int, tuple[TodoFields, ...]]] = {}
        """Per session, the last todo list a batch through the ledger wrote, by its seq."""
        ledger.after_append(self._hold_lists, types=frozenset({"TodosWritten"}))
        self._summaries = SummaryMemory(known=self._projections.execution_state.known)
        """Per session, the summary as of the last commit this process heard (issue 24)."""
        ledger.on_commit(self._summaries.observe)
        self._decided = DecidedAnswers(ledger=ledger, registry=registry, context=self._context)

    @property
    def registry(self) -> ToolRegistry:
        """The tools this executor runs (their contracts and descriptors)."""
        return self._registry

    # -- calls -----------------------------------------------------------------------------

    def surface(self, session: SessionSummary) -> list[str]:
        """The tools this session is offered."""
        return self._registry.surface(self._options(session))

    def _options(
        self, session: SessionSummary, host: HostKind | None = None
    ) -> SurfaceOptions:
        if self._surface is not None:
            return self._surface(session, host)
        return SurfaceOptions(
            host=host or cast(HostKind, session.host),
            subagent=session.parent_session_id is not None,
        )

    def call(
        self,
        session_id: str,
        tool: str,
        raw_input: Mapping[str, Any],
        *,
        call_id: str | None = None,
        host: HostKind | None = None,
        actor: Actor = "model",
    ) -> CallAnswer:
        """Run one call; ``host`` overrides the session's host (``sessionledger call``).

        A new call (no ``call_id``) starts from the session's summary as of the last commit
        this process heard (:class:`~projections.session.SummaryMemory`) instead of reading
        it: every outcome it decides is appended guarded by that summary's version, so a
        summary another process's commit made stale is refused by the store and the call is
        decided again on a fresh read; an outcome that appends nothing (a refusal) stands
        only when a fresh read finds that version still current."""
        summaries = self._summaries

        def attempt() -> CallAnswer:
            held = summaries.get(session_id) if call_id is None else None
            if held is not None:
                try:
                    return decide(held)
                except SessionLedgerError:
                    summaries.forget(session_id)
                    session = self._fresh(session_id)
                    if session.version == held.version:
                        raise  # refused on what the session still is: the refusal stands
                    # the session had moved on: decided below on what it is now
                except BaseException:
                    # Overtaken (the version guard refused a stale summary: the retry reads
                    # afresh) or failed: what memory holds is not trusted again.
                    summaries.forget(session_id)
                    raise
            else:
                session = self._fresh(session_id)
            try:
                return decide(session)
            except BaseException:
                summaries.forget(session_id)
                raise

        def decide(session: SessionSummary) -> CallAnswer:
            if call_id is not None:
                existing = self._ledger.call(session_id, call_id)
                if existing is not None:
                    return _answer(call_answer(self._store, existing))
            handler = self._handler(tool, session, host)
            check_input(handler, tool, raw_input)
            cid = call_id or new_id("call")
            events, answer = self._first_step(
                session, handler, raw_input, cid, host or cast(HostKind, session.host)
            )
            appended = self._ledger.append(  # overtaken: decided again afresh
                session_id, [NewEvent(e, actor=actor, causation_id=cid) for e in events],
                expected_version=session.version,
            )
            # The id was free at this version, so the view folded the call from nothing:
            # what it saved for this batch, or the same fold of the appended events.
            found = self._projections.tool_calls.folded(
                call_key(session_id, cid), appended.events[-1]
            ) or call_document(appended.events, session_id, cid)
            assert found is not None
            wire = call_wire(found)
            if answer is not None and found.status == "completed":
                wire["result"] = answer  # what the log refers to rather than repeats (D70)
            return _answer(wire)

        return self._ledger.retry(session_id, attempt, unconditional=True)

    def _fresh(self, session_id: str) -> SessionSummary:
        """The session's summary read now (404/410 when unusable), held for the next call."""
        session = self._ledger.live(session_id)
        self._summaries.put(session)
        return session

    def _handler(
        self, tool: str, session: SessionSummary, host: HostKind | None
    ) -> ToolHandler:
        handler = self._registry.handler(tool)
        registry = self._registry
        if handler is None or not (
            registry.always_offered(tool) or registry.offered(tool, self._options(session, host))
        ):
            raise InvalidInput(
                f"unknown tool {tool!r} for this session",
                details=[{"loc": ["tool"], "message": "not offered to this session"}],
            )
        return handler

    def _first_step(
        self, session: SessionSummary, handler: ToolHandler, raw: Mapping[str, Any],
        call_id: str, host: HostKind,
    ) -> tuple[list[Event], dict[str, Any] | None]:
        """The call's first batch, and the result to answer with when the recorded one
        refers to its data rather than holding it (``HandlerOutcome.answer``)."""
        name = handler.descriptor.name
        verdict = self._permissions.decide(
            tool=handler.descriptor, input=raw, state=session.execution,
            workspace=self._workspace(session.workspace),
        )
        events: list[Event] = [
            ToolCallRequested(call_id=call_id, tool=name, input=dict(raw), host=host),
            PermissionDecided(call_id=call_id, tool=name, decision=verdict),
        ]
        if verdict.behavior == "allow":
            outcome = handler.run(self._context(session, call_id), raw, None)
            completed = completed_event(name, call_id, outcome)
            return [*events, *outcome.events, completed], outcome.answer
        turn_control = None
        if verdict.behavior == "ask":
            answer = broker_for(host).on_ask(name)
            aware = handler if isinstance(handler, AskAware) else None
            if isinstance(answer, Pending):
                kind, payload = handler.interaction(raw)
                if aware is not None:  # the host's view of the request, and its records
                    asked = aware.asked(self._context(session, call_id), raw, host)
                    kind, payload = asked.kind, asked.payload
                    events.extend(asked.events)
                return [*events, InteractionRequested(
                    interaction_id=new_id("int"), call_id=call_id, kind=kind, payload=payload,
                )], None
            events.append(PermissionDecided(
                call_id=call_id, tool=name, decision=answer, decided_by="broker"
            ))
            verdict = answer
            if aware is not None:  # e.g. headless ExitPlanMode ends the turn (PM-9)
                denied = aware.broker_denied(self._context(session, call_id), raw)
                events.extend(denied.events)
                turn_control = denied.turn_control
        return [*events, ToolCallCompleted(
            call_id=call_id, tool=name, status="denied", success=False,
            model_content=verdict.reason, permission=verdict, turn_control=turn_control,
        )], None

    def _workspace(self, workspace: str) -> Path:
        """The session's workspace as a path, built once per workspace."""
        path = self._paths.get(workspace)
        if path is None:
            if len(self._paths) >= 4096:
                self._paths.clear()
            path = self._paths[workspace] = Path(workspace)
        return path

    def _context(self, session: SessionSummary, call_id: str) -> ToolContext:
        """What the handler may know: the summary and the session's current todo list —
        none when the summary says no list was written; the list this process appended
        when the summary says it is still the current one (D74); else the todo rows."""
        seq = session.todos_seq
        todos: tuple[TodoFields, ...] = ()
        if seq is not None:
            held = self._lists.get(session.session_id)
            if held is not None and held[0] == seq:
                todos = held[1]
            else:
                todos = self._ledger.todo_rows(session.session_id)
        return ToolContext(session=session, call_id=call_id, todos=todos, todos_seq=seq)

    def _hold_lists(self, session_id: str, events: Sequence[RecordedEvent]) -> None:
        """Remember the todo list an appended batch wrote, by the seq of its write: the
        log never changes what that write was, so it is the current list for as long as
        the summary names that seq."""
        for event in events:
            if event.type == "TodosWritten":
                data = event.data
                assert isinstance(data, TodosWritten)
                if len(self._lists) >= _LISTS_HELD:
                    self._lists.clear()
                self._lists[session_id] = (event.seq, data.todos)

    def get(self, session_id: str, call_id: str) -> CallAnswer:
        """The call's document as it is now."""
        self._ledger.live(session_id)
        found = self._ledger.call(session_id, call_id)
        if found is None:
            raise NotFound(f"no tool call {call_id!r} in session {session_id!r}")
        return _answer(call_answer(self._store, found))

    def resume(self, session_id: str) -> int:
        """Abandon the session's answers that are on record but never completed (the service
        stopped between a decided-first answer's two batches) and ask them again; the
        number abandoned (:class:`~DecidedAnswers`)."""
        return self._decided.resume(session_id)

    # -- answers ---------------------------------------------------------------------------

    def respond(
        self,
        session_id: str,
        interaction_id: str,
        decision: Decision,
        *,
        input: Mapping[str, Any] | None = None,
        feedback: str | None = None,
    ) -> dict[str, Any]:
        """Record the user's answer and complete the call; the call document afterwards.
        For a call another program's hook put to a person here (a ``client``'s, such as
        Claude Code's) only the answer is recorded: that program's hook, waiting for it, hands
        it over, the program runs the call and its result completes it."""
        def attempt() -> dict[str, Any]:
            session = self._ledger.live(session_id)
            interaction = self._ledger.interaction(interaction_id)
            if interaction is None or interaction.session_id != session_id:
                raise NotFound(f"no interaction {interaction_id!r} in session {session_id!r}")
            if interaction.status != "pending":
                raise Conflict(f"interaction {interaction_id!r} was already resolved")
            call_id = interaction.body["callId"]
            call = self._ledger.call(session_id, call_id)
            assert call is not None
            handler = self._registry.handler(call.body["tool"])
            assert handler is not None
            raw, resolution = _resolution(
                handler, call.body["input"], interaction, decision, input, feedback
            )
            first = isinstance(handler, DecidesFirst) and handler.decides_first(resolution)
            hosted = _hosts_own(session, interaction_id, call_id)
            events = (
                [resolved_event(interaction.key, call_id, resolution)] if first or hosted
                else self._answer_step(session, handler, raw, call_id, interaction.key, resolution)
            )
            self._ledger.append(  # overtaken: decided again afresh
                session_id, [NewEvent(e, actor="user", causation_id=call_id) for e in events],
                expected_version=session.version,
            )
            if first and not hosted:  # the decision is on record; now run and complete (PM-7)
                return self._decided.carry_out(
                    session_id, handler, raw, call_id, interaction.key, resolution
                )
            done = self._ledger.call(session_id, call_id)
            assert done is not None
            return call_answer(self._store, done)

        return self._ledger.retry(session_id, attempt)

    def withdraw(self, session_id: str, interaction_id: str, *, reason: str) -> dict[str, Any]:
        """The host withdraws a waiting call whose caller cancelled its request (D157): the
        interaction is resolved ``withdrawn`` and the call completes ``cancelled`` in one
        batch by the ``host``, so the session's queue moves on; the call document. Nobody
        answered: the handler does not run (a :class:`Withdrawable` one adds its note — a
        withdrawn plan stays unapproved, Plan stays on). 409 when already resolved."""
        def attempt() -> dict[str, Any]:
            session = self._ledger.live(session_id)
            interaction = self._ledger.interaction(interaction_id)
            if interaction is None or interaction.session_id != session_id:
                raise NotFound(f"no interaction {interaction_id!r} in session {session_id!r}")
            if interaction.status != "pending":
                raise Conflict(f"interaction {interaction_id!r} was already resolved")
            call_id = interaction.body["callId"]
            call = self._ledger.call(session_id, call_id)
            handler = self._registry.handler(call.body["tool"]) if call is not None else None
            assert call is not None and handler is not None
            added = (handler.withdrawn(self._context(session, call_id), call.body["input"])
                     if isinstance(handler, Withdrawable) else Withdrawal())
            events: list[Event] = [
                InteractionResolved(
                    interaction_id=interaction.key, call_id=call_id, decision="withdrawn"
                ),
                *added.events,
                ToolCallCompleted(
                    call_id=call_id, tool=handler.descriptor.name, status="cancelled",
                    success=False, model_content=withdrawn_text(reason, added.note),
                    result={"withdrawn": True, "reason": reason, **added.result},
                ),
            ]
            self._ledger.append(  # overtaken: decided again afresh (an answer wins: 409)
                session_id, [NewEvent(e, actor="host", causation_id=call_id) for e in events],
                expected_version=session.version,
            )
            done = self._ledger.call(session_id, call_id)
            assert done is not None
            return call_answer(self._store, done)

        return self._ledger.retry(session_id, attempt)

    def auto_continue(
        self, session_id: str, interaction_id: str, *, expected_version: int,
        idempotency_key: str,
    ) -> dict[str, Any] | None:
        """The timer's answer at the deadline (HO-4, HO-8): accept with ``{}`` through the
        same answer step as a user's, recorded as ``autoContinued`` by the ``timer`` in one
        batch guarded by ``expected_version`` and ``idempotency_key`` (a conflict is raised
        for the caller to decide again). ``None`` when the interaction is not pending."""
        session = self._ledger.live(session_id)
        interaction = self._ledger.interaction(interaction_id)
        if interaction is None or interaction.session_id != session_id:
            return None
        if interaction.status != "pending":
            return None
        call_id = interaction.body["callId"]
        call = self._ledger.call(session_id, call_id)
        if call is not None and "input" not in call.body:
            # Another process answered it between the two reads (each read sees the latest
            # commit): the call completed and its input went with it (D71); nothing is due.
            return None
        handler = self._registry.handler(call.body["tool"]) if call is not None else None
        assert call is not None and handler is not None
        raw, resolution = _resolution(
            handler, call.body["input"], interaction, "autoContinued", None, None
        )
        events: list[Event] = (
            [resolved_event(interaction.key, call_id, resolution)]
            if _hosts_own(session, interaction_id, call_id)
            else self._answer_step(session, handler, raw, call_id, interaction.key, resolution))
        self._ledger.append(
            session_id, [NewEvent(e, actor="timer", causation_id=call_id) for e in events],
            expected_version=expected_version, idempotency_key=idempotency_key,
        )
        done = self._ledger.call(session_id, call_id)
        assert done is not None
        return call_answer(self._store, done)

    def _answer_step(
        self, session: SessionSummary, handler: ToolHandler, raw: Mapping[str, Any],
        call_id: str, interaction_id: str, resolution: Resolution,
    ) -> list[Event]:
        """One batch: the decision, the handler's events and the completion (D21)."""
        outcome = handler.run(self._context(session, call_id), raw, resolution)
        return [
            resolved_event(interaction_id, call_id, resolution), *outcome.events,
            completed_event(handler.descriptor.name, call_id, outcome),
        ]


def withdrawn_text(reason: str, note: str = "") -> str:
    """What the model is told about a call withdrawn because its caller cancelled it."""
    text = (f"This request was withdrawn before anyone answered it: {reason}. The user gave "
            "no answer; do not assume one.")
    return f"{text} {note}" if note else text


def _resolution(
    handler: ToolHandler, original: Mapping[str, Any], interaction: Any,
    decision: Decision | Literal["autoContinued"], new_input: Mapping[str, Any] | None,
    feedback: str | None,
) -> tuple[Mapping[str, Any], Resolution]:
    """The answer checked (422 when it cannot be taken) and the input the handler runs
    with: the user's modified input, else the call's own."""
    if decision == "modify" and new_input is None:
        raise InvalidInput("modify needs the new tool input", details=[{"loc": ["input"]}])
    if decision == "feedback" and interaction.body["kind"] != "planApproval":
        raise InvalidInput("feedback answers only a plan approval")
    if decision == "feedback" and not (feedback or "").strip():
        raise InvalidInput("feedback must not be blank", details=[{"loc": ["feedback"]}])
    if decision == "modify" and new_input is not None:
        try:
            handler.validate_answer(new_input, original=original)
        except ValidationError as exc:
            raise InvalidInput(
                f"the modified input is invalid ({summarize(exc)}); the call stays pending",
                details=validation_details(exc),
            ) from exc
        except ValueError as exc:
            raise InvalidInput(
                f"the modified input is invalid ({exc}); the call stays pending",
                details=[{"loc": ["input"], "message": str(exc)}],
            ) from exc
    resolution = Resolution(decision=decision, input=new_input, feedback=feedback)
    raw = new_input if decision == "modify" and new_input is not None else original
    return raw, resolution
