"""The path every service tool call takes (SPEC §11 tool calls, HO-1 … HO-3, HO-8).

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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from pydantic import ValidationError

from eventlog import (
    Event,
    EventStore,
    HostKind,
    InteractionRequested,
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    RecordedEvent,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
    new_id,
)
from eventlog.envelope import Actor
from projections import Projections, SessionSummary
from projections.tools import call_document, call_key, call_wire
from statemachine.execution import ExecutionState

from ..errors import Conflict, InvalidInput, NotFound
from ..ledger import retry_overtaken
from ..permission.descriptors import ToolDescriptor
from ..service import ExecutionRuntime
from .answers import DecidedAnswers, completed_event, resolved_event
from .brokers import Pending, broker_for
from .handlers import AskAware, DecidesFirst, Resolution, ToolContext, ToolHandler
from .registry import SurfaceOptions, ToolRegistry
from .results import call_answer
from .todo_contract import TodoFields

__all__ = [
    "CallAnswer",
    "Decision",
    "PermissionAuthority",
    "ToolExecutor",
    "summarize",
    "validation_details",
]

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
        store: EventStore,
        projections: Projections,
        runtime: ExecutionRuntime,
        registry: ToolRegistry,
        permissions: PermissionAuthority,
        surface: Callable[[SessionSummary, HostKind | None], SurfaceOptions] | None = None,
    ) -> None:
        self._store = store
        self._projections = projections
        self._runtime = runtime
        self._registry = registry
        self._permissions = permissions
        self._surface = surface
        """The session's flags and ports (dynamic workflows, off-peak) when the service
        knows them; otherwise only its host and parent decide."""
        self._paths: dict[str, Path] = {}
        self._lists: dict[str, tuple[int, tuple[TodoFields, ...]]] = {}
        """Per session, the last todo list a batch of this executor wrote, by its seq."""
        self._decided = DecidedAnswers(
            store=store, projections=projections, runtime=runtime, registry=registry,
            context=self._context,
        )

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
        """Run one call; ``host`` overrides the session's host (``sessionledger call``)."""
        def attempt() -> CallAnswer:
            session = self._runtime.summary(session_id)
            if call_id is not None:
                existing = self._projections.call(self._store, session_id, call_id)
                if existing is not None:
                    return _answer(call_answer(self._store, existing))
            handler = self._handler(tool, session, host)
            try:
                handler.validate_input(raw_input)
            except ValidationError as exc:
                raise InvalidInput(
                    f"{tool} input is invalid: {summarize(exc)}",
                    details=validation_details(exc),
                ) from exc
            cid = call_id or new_id("call")
            events, answer = self._first_step(
                session, handler, raw_input, cid, host or cast(HostKind, session.host)
            )
            appended = self._store.append(  # overtaken: decided again afresh
                session_id, [NewEvent(e, actor=actor, causation_id=cid) for e in events],
                expected_version=session.version,
            )
            self._runtime.observe(session_id, appended.events)  # EnterPlanMode (#7)
            self._hold_lists(session_id, appended.events)
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

        return retry_overtaken(session_id, attempt, unconditional=True)

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
                todos = self._projections.todo_rows(self._store, session.session_id)
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
        self._runtime.summary(session_id)
        found = self._projections.call(self._store, session_id, call_id)
        if found is None:
            raise NotFound(f"no tool call {call_id!r} in session {session_id!r}")
        return _answer(call_answer(self._store, found))

    def resume(self, session_id: str) -> int:
        """Abandon the session's answers that are on record but never completed (the service
        stopped between a decided-first answer's two batches) and ask them again; the
        number abandoned (:class:`~sessionledger.tools.answers.DecidedAnswers`)."""
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
        """Record the user's answer and complete the call; the call document afterwards."""
        def attempt() -> dict[str, Any]:
            session = self._runtime.summary(session_id)
            interaction = self._projections.interaction(self._store, interaction_id)
            if interaction is None or interaction.session_id != session_id:
                raise NotFound(f"no interaction {interaction_id!r} in session {session_id!r}")
            if interaction.status != "pending":
                raise Conflict(f"interaction {interaction_id!r} was already resolved")
            call_id = interaction.body["callId"]
            call = self._projections.call(self._store, session_id, call_id)
            assert call is not None
            handler = self._registry.handler(call.body["tool"])
            assert handler is not None
            raw, resolution = _resolution(
                handler, call.body["input"], interaction, decision, input, feedback
            )
            first = isinstance(handler, DecidesFirst) and handler.decides_first(resolution)
            events = (
                [resolved_event(interaction.key, call_id, resolution)] if first
                else self._answer_step(session, handler, raw, call_id, interaction.key, resolution)
            )
            appended = self._store.append(  # overtaken: decided again afresh
                session_id, [NewEvent(e, actor="user", causation_id=call_id) for e in events],
                expected_version=session.version,
            )
            self._runtime.observe(session_id, appended.events)  # a plan approval's exit (#7)
            self._hold_lists(session_id, appended.events)
            if first:  # the decision is on record; now run and complete (PM-7)
                return self._decided.carry_out(
                    session_id, handler, raw, call_id, interaction.key, resolution
                )
            done = self._projections.call(self._store, session_id, call_id)
            assert done is not None
            return call_answer(self._store, done)

        return retry_overtaken(session_id, attempt)

    def auto_continue(
        self, session_id: str, interaction_id: str, *, expected_version: int,
        idempotency_key: str,
    ) -> dict[str, Any] | None:
        """The timer's answer at the deadline (HO-4, HO-8): accept with ``{}`` through the
        same answer step as a user's, recorded as ``autoContinued`` by the ``timer`` in one
        batch guarded by ``expected_version`` and ``idempotency_key`` (a conflict is raised
        for the caller to decide again). ``None`` when the interaction is not pending."""
        session = self._runtime.summary(session_id)
        interaction = self._projections.interaction(self._store, interaction_id)
        if interaction is None or interaction.session_id != session_id:
            return None
        if interaction.status != "pending":
            return None
        call_id = interaction.body["callId"]
        call = self._projections.call(self._store, session_id, call_id)
        if call is not None and "input" not in call.body:
            # Another process answered it between the two reads (each read sees the latest
            # commit): the call completed and its input went with it (D71); nothing is due.
            return None
        handler = self._registry.handler(call.body["tool"]) if call is not None else None
        assert call is not None and handler is not None
        raw, resolution = _resolution(
            handler, call.body["input"], interaction, "autoContinued", None, None
        )
        events = self._answer_step(session, handler, raw, call_id, interaction.key, resolution)
        self._store.append(
            session_id, [NewEvent(e, actor="timer", causation_id=call_id) for e in events],
            expected_version=expected_version, idempotency_key=idempotency_key,
        )
        done = self._projections.call(self._store, session_id, call_id)
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
