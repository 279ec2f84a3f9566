"""Recording what Claude Code says: observations in, events appended at most once (CC-2 … CC-8).

One :class:`Recorder` serves the hooks and the import alike. A :class:`~.observations.Seen`
becomes one batch: the mode change its ``permission_mode`` implies (CC-3) first, then what the
observation itself records — a message, a tool call, its permission decision (hooks only), its
result with the todos, questions and plan outcome it carries (CC-5), a compaction (CC-7) —
appended under the observation's idempotency key (CC-8), so a batch seen twice is appended
once however it arrives.

What the batch holds is decided from a :class:`Tally` of the session (its execution state, its
todo list, how many tool calls it has): a hook reads it from the read models afresh for every
event; an import reads it once and carries it along the transcript, appending in chunks of
batches in one transaction each. The state machine still decides every mode change
(:func:`statemachine.execution.decide_events`): a Claude Code mode this ledger cannot reach
from where it is (Plan while a goal runs) is not mirrored.

Claude Code asks its user itself: a question or a plan approval is recorded when its answer
is known (PostToolUse), request and resolution in one batch, so nothing waits here and no
auto-continue timer runs for it. No plan file is written for these sessions (CC-5).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from eventlog import (
    AppendBatch,
    ContextCompacted,
    Event,
    EventLogError,
    InteractionRequested,
    InteractionResolved,
    MessageRecorded,
    ModeChangeVia,
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    PlanApproved,
    PlanFeedbackGiven,
    PlanRejected,
    PlanSubmitted,
    RecordedEvent,
    SessionModeChanged,
    TodoItemData,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
    parse_instant,
)
from statemachine.execution import (
    Command,
    ExecutionState,
    LeavePlan,
    Refusal,
    SetMode,
    UnderPlan,
    decide_events,
)

from ..errors import Conflict, SessionLedgerError
from ..ledger import eventlog_errors
from ..permission.descriptors import OWN_MCP_NAME, SERVICE_TOOLS
from ..service.sessions import RequestedMode, SessionService
from ..tools.executor import host_interaction_id
from ..tools.todo import MAX_TODO_CHARS, MAX_TODOS, dropped_unfinished
from .observations import (
    REFUSED_HERE,
    AssistantText,
    Compacted,
    Noted,
    Observation,
    Origin,
    PermissionAsked,
    Prompt,
    Seen,
    SessionBegan,
    ToolResult,
    ToolUse,
    content_key,
    gemini_call_id,
    ledger_session_id,
    observation_key,
)
from .transcripts import read_transcript

__all__ = [
    "IMPORT_CHUNK",
    "MODES",
    "Imported",
    "Recorded",
    "Recorder",
    "Tally",
    "approved_plan",
    "call_id_of",
    "plan_outcome",
    "todo_list_refusal",
    "unheld_todo_list",
]

MODES: dict[str, RequestedMode] = {
    "default": "build", "acceptEdits": "edit", "bypassPermissions": "yolo", "plan": "plan",
}
"""Claude Code's ``permission_mode`` values and the ledger mode each mirrors as (CC-3);
anything else is recorded as given (``hostMode``) with ``build`` underneath."""

IMPORT_CHUNK = 500
"""Batches an import appends per transaction."""

REJECTED = "The user doesn't want to proceed with this tool use"
"""How Claude Code's result of a call the user refused begins."""
FEEDBACK = "the user said:"
"""What precedes the user's words when they refused with feedback."""

PlanOutcome = Literal["approved", "rejected", "feedback"]


def refusal_text(reason: str, rule_id: str) -> str:
    """The reason Claude Code is given for a ``deny`` or ``ask`` (and shows the model)."""
    return f"{REFUSED_HERE}{reason} ({rule_id})"


def call_id_of(observation: ToolUse | PermissionAsked | ToolResult) -> str:
    """The ledger call id of a Claude Code tool call: its ``tool_use_id`` (or the hook's
    digest where it has none)."""
    if observation.tool_use_id:
        return observation.tool_use_id
    return f"cc~{observation.fallback_key or content_key(observation.tool, observation.input)}"


def plan_outcome(result: ToolResult) -> tuple[PlanOutcome, str | None]:
    """What the user answered to ExitPlanMode: approved (the call succeeded), rejected, or
    feedback (rejected with words, which are returned)."""
    if not result.error:
        return "approved", None
    text = result.content
    at = text.find(FEEDBACK)
    if at >= 0:
        words = text[at + len(FEEDBACK):].strip()
        if words:
            return "feedback", words
    return "rejected", None


@dataclass(slots=True)
class Tally:
    """What the recorder needs to know of a session between observations."""

    session_id: str
    version: int
    workspace: Path
    host: Any
    execution: ExecutionState
    todos: tuple[TodoItemData, ...] = ()
    calls: int = 0
    known_calls: set[str] = field(default_factory=set)
    plan_by: str | None = None
    """Who turned Plan on (the summary's ``plan_by``), while it is on."""
    done_calls: set[str] = field(default_factory=set)
    """Calls the session holds an outcome of (completed, refused, cancelled)."""
    refused: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """Calls refused here (``deny``, or ``ask``, which a headless run refuses) with no
    outcome yet: their tool, the decision and what Claude Code showed the model."""
    asking: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Calls Claude Code asks its user about itself (a question, a plan approval) with no
    outcome yet: their tool and input."""
    interactions: dict[str, tuple[str, dict[str, Any] | None]] = field(default_factory=dict)
    """Calls with no outcome yet whose question or plan was put to the user here (answer
    here: the hook waits): the interaction and its resolution once there is one."""
    waiting: dict[str, str] = field(default_factory=dict)
    """The calls with no outcome yet by their tool and input (:func:`content_key`): how a
    PermissionRequest, which carries no ``tool_use_id``, finds the call it asks about."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """What recording one observation did: the batch (as appended, or as found when it was
    appended before) and whether it was there already."""

    session_id: str
    events: tuple[RecordedEvent, ...] = ()
    replayed: bool = False


Decider = Callable[[Tally, ToolUse], PermissionVerdict]
AskHere = tuple[Literal["askUserQuestion", "planApproval"], dict[str, Any]]
"""A question or plan approval put to the user here: the interaction's kind and payload."""


class Recorder:
    """Appends Claude Code's observations to the ledger sessions they belong to."""

    def __init__(self, service: SessionService, *, workspace: str | Path | None = None,
                 root: Path | None = None) -> None:
        self._service = service
        self._ledger = service.ledger
        self._workspace = None if workspace is None else str(workspace)
        """Where imported sessions live regardless of the ``cwd`` they recorded (a transcript
        from another machine); ``None``: their ``cwd``, which must lie inside the root."""
        self._root = root
        """The root (resolved) new sessions lie inside when it is not the service's: the
        command hook's own, for the hook's writer recording the hooks of any workspace."""

    @property
    def service(self) -> SessionService:
        return self._service

    # -- sessions (CC-2) ---------------------------------------------------------------

    def bind(self, origin: Origin) -> str | None:
        """The ledger session of ``origin``, created on its first event; ``None`` when it
        cannot be recorded (its ``cwd`` lies outside the root or is missing, or the session
        was deleted) — the hook then has no opinion and nothing is recorded."""
        parent = None
        if origin.agent_id is not None:
            parent = self.bind(replace(origin, agent_id=None, permission_mode=None))
            if parent is None:
                return None
        session_id = ledger_session_id(origin.session_id, origin.agent_id, origin.client)
        found = self._service.find_summary(session_id)
        if found is not None:
            return None if found.deleted else session_id
        workspace = self._workspace or origin.cwd
        if not workspace:
            return None
        external = origin.session_id if origin.agent_id is None else (
            f"{origin.session_id}/{origin.agent_id}"
        )
        try:
            self._service.create_session(
                session_id=session_id, workspace=workspace, parent_session_id=parent,
                mode=MODES.get(origin.permission_mode or "") if parent is None else None,
                client=origin.client, external_session_id=external,
                occurred_at=origin.occurred_at, root=self._root,
            )
        except Conflict:  # another hook process created it first
            pass
        except SessionLedgerError:  # outside the root, not a directory, a broken config
            return None
        return session_id

    def tally(self, session_id: str) -> Tally:
        """The session's tally from the read models (a hook's view, read afresh)."""
        with eventlog_errors(payloads=True):
            summary = self._ledger.live(session_id)
            written = None if summary.todos_seq is None else next(iter(
                self._service.store.read_session(session_id, after=summary.todos_seq - 1,
                                                 limit=1)), None)
            calls = self._service.store.read_view(
                lambda tx: self._service.projections.tool_calls.of_session(tx, session_id)
            )
        todos = written.data.todos if written is not None and isinstance(
            written.data, TodosWritten) else ()
        refused, asking, waiting, interactions = {}, {}, {}, {}
        for doc in calls:
            if doc.status != "pending":
                continue
            call_id, tool = doc.body["callId"], doc.body["tool"]
            asked_by = doc.body.get("interactionId")
            if asked_by and asked_by != host_interaction_id(call_id):
                continue  # the ledger's own call (its tool route, MCP): not the host's to close
            given = doc.body.get("input") or {}
            waiting[content_key(tool, given)] = call_id
            if doc.body.get("interactionId"):
                interactions[call_id] = (doc.body["interactionId"], doc.body.get("resolution"))
            permission = doc.body.get("permission") or {}
            if permission.get("behavior") in ("deny", "ask"):
                refused[call_id] = (tool, permission["behavior"], refusal_text(
                    permission.get("reason", ""), permission.get("ruleId", "")))
            elif tool in _ASKS_ITSELF:
                asking[call_id] = (tool, dict(given))
        return Tally(
            session_id=session_id, version=summary.version, workspace=Path(summary.workspace),
            host=summary.host, execution=summary.execution, todos=todos,
            calls=len(calls) if summary.client not in OUR_SERVER_KNOWS_ITS_SESSION else sum(
                1 for d in calls if d.body["tool"] not in SERVICE_TOOLS),
            known_calls={d.body["callId"] for d in calls},
            plan_by=summary.plan_by,
            done_calls={d.body["callId"] for d in calls if d.status != "pending"},
            refused=refused, asking=asking, waiting=waiting, interactions=interactions,
        )

    # -- one observation (hooks) -----------------------------------------------------------

    def record(self, session_id: str, seen: Seen, *, decide: Decider | None = None,
               ask_here: AskHere | None = None) -> Recorded:
        """Append what ``seen`` says to ``session_id`` at most once; ``decide`` answers a
        ToolUse's permission (PreToolUse), recorded as ``PermissionDecided``; ``ask_here``
        puts its question or plan to the user here (the interaction's kind and payload).
        Overtaken by another process's append (two command hooks at once), it reads and
        decides again."""
        def attempt() -> Recorded:
            tally = self.tally(session_id)
            events, key = batch_for(tally, seen, decide=decide, ask_here=ask_here,
                                    outcomes=asked_outcomes(tally, seen))
            if not events:
                return Recorded(session_id)
            result = self._ledger.append(  # overtaken: the retry policy decides again
                session_id, events, expected_version=tally.version, idempotency_key=key
            )
            return Recorded(session_id, tuple(result.events), result.replayed)

        with eventlog_errors():
            return self._ledger.retry(session_id, attempt)

    # -- many observations (an import) --------------------------------------------------------

    def record_all(
        self, seens: Iterable[Seen], *, progress: Callable[[int], None] | None = None
    ) -> Imported:
        """Append a transcript's observations in order, each batch at most once, in chunks
        of :data:`IMPORT_CHUNK` batches per transaction. ``progress(n)`` is told as
        observations are handled."""
        tallies: dict[str, Tally | None] = {}
        floors: dict[str, tuple[str, set[str]]] = {}
        outcome = Imported()
        pending: list[tuple[AppendBatch, str]] = []

        def flush() -> None:
            if not pending:
                return
            with eventlog_errors():
                results = self._ledger.append_many([batch for batch, _where in pending])
            for (batch, where), result in zip(pending, results, strict=True):
                if isinstance(result, EventLogError):
                    outcome.failed.append((where, str(result)))
                elif not result.replayed:
                    outcome.appended[batch.session_id] += len(result.events)
            pending.clear()

        for seen in seens:
            origin = seen.origin
            slot = ledger_session_id(origin.session_id, origin.agent_id, origin.client)
            if slot not in tallies:
                flush()
                existed = self._service.find_summary(slot) is not None
                bound = self.bind(origin)
                tallies[slot] = None if bound is None else self.tally(bound)
                if bound is None:
                    outcome.refused.append(origin.session_id)
                else:
                    outcome.appended.setdefault(bound, 0 if existed else 1)
                    if existed:
                        floors[bound] = self._floor(bound)
                    if origin.agent_id is not None:
                        parent = ledger_session_id(origin.session_id, None, origin.client)
                        outcome.appended.setdefault(parent, 0)
            tally = tallies[slot]
            if tally is not None and _before_the_log(seen, floors.get(tally.session_id)):
                outcome.late.append(seen.where)
            elif tally is not None:
                events, key = batch_for(tally, seen, decide=None)
                if events:
                    pending.append(
                        (AppendBatch(tally.session_id, tuple(events), None, key), seen.where)
                    )
                if len(pending) >= IMPORT_CHUNK:
                    flush()
            if progress is not None:
                progress(1)
        flush()
        return outcome


    def _floor(self, session_id: str) -> tuple[str, set[str]]:
        """When the last event of a session the import finds already there happened, and
        the assistant texts it holds (for :func:`_before_the_log`)."""
        last = ""
        texts: set[str] = set()
        with eventlog_errors(payloads=True):
            for event in self._service.store.read_session(session_id):
                data = event.data
                last = getattr(data, "occurred_at", None) or event.recorded_at
                if isinstance(data, MessageRecorded) and data.role == "assistant":
                    texts.add(data.content)
        return last, texts


def _before_the_log(seen: Seen, floor: tuple[str, set[str]] | None) -> bool:
    """Whether ``seen`` is an assistant text new to a session that was recorded past its
    time (by the hooks, which never see the assistant's text): appended, it would put the
    log's times out of order, so an import leaves it out and says so."""
    if floor is None or not isinstance(seen.observation, AssistantText):
        return False
    at = seen.origin.occurred_at
    last, texts = floor
    return (at is not None and bool(last) and parse_instant(at) < parse_instant(last)
            and seen.observation.text not in texts)


@dataclass(slots=True)
class Imported:
    """What recording a transcript did: events appended per ledger session (its creation
    counted), the batches the log refused (``where``, why), the Claude Code sessions that
    could not be recorded (their ``cwd`` outside the root) and the assistant texts left out
    because the session's log is already past their time (``where``)."""

    appended: dict[str, int] = field(default_factory=dict)
    failed: list[tuple[str, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)


# -- from an observation to its batch: the same for every source --------------------------------


def batch_for(
    tally: Tally, seen: Seen, *, decide: Decider | None,
    outcomes: Mapping[str, ToolResult] | None = None, ask_here: AskHere | None = None,
) -> tuple[list[NewEvent], str | None]:
    """The events ``seen`` records and its idempotency key; ``tally`` moves on with them.
    ``outcomes``: what the transcript says became of the questions and plans still open;
    ``ask_here``: the call's question or plan is put to the user here."""
    observation = seen.observation
    at = seen.origin.occurred_at
    if isinstance(observation, PermissionAsked | ToolResult) and observation.tool_use_id is None:
        # PermissionRequest names no tool_use_id (nor does Gemini CLI's AfterTool): it is about
        # the latest waiting call with its tool and input (a plan submitted again is a new call
        # with the same input)
        waiting = tally.waiting.get(content_key(observation.tool, observation.input))
        if waiting is not None:
            observation = replace(observation, tool_use_id=waiting)
    if isinstance(observation, ToolUse) and observation.tool_use_id is None \
            and seen.origin.client == "gemini":
        observation = replace(observation, tool_use_id=_gemini_call(tally, observation))
    key = observation_key(observation, tally.calls)
    # The mode a plan tool's result reports is that tool's doing: recorded as such first
    # (via enter_plan_tool, plan_approval), then whatever of the mode is left to mirror.
    moved_by_tool = isinstance(observation, ToolResult) and observation.tool in _PLAN_TOOLS
    client = seen.origin.client
    events = [] if moved_by_tool else _mirrored_mode(tally, seen.origin.permission_mode, at,
                                                      client)
    events += _closed_refusals(tally, observation, at)
    events += _closed_asks(tally, observation, at, outcomes or {})
    match observation:
        case Prompt(text=text):
            if text.strip():
                events.append(NewEvent(MessageRecorded(
                    role="user", content=text, source=client, occurred_at=at,
                ), actor="user"))
        case AssistantText(text=text):
            if text.strip():
                events.append(NewEvent(MessageRecorded(
                    role="assistant", content=text, source=client, occurred_at=at,
                ), actor="model"))
        case ToolUse():
            events += _requested(tally, observation, at)
            if decide is not None and observation.tool not in _ASKS_ITSELF:
                verdict = decide(tally, observation)
                call_id = call_id_of(observation)
                if verdict.behavior != "allow":
                    tally.refused[call_id] = (observation.tool, verdict.behavior, refusal_text(
                        verdict.reason, verdict.rule_id))
                events.append(NewEvent(PermissionDecided(
                    call_id=call_id, tool=observation.tool, decision=verdict, occurred_at=at,
                ), actor="system", causation_id=call_id))
            if ask_here is not None:
                events += _asked_here(tally, observation, ask_here, at)
        case PermissionAsked():
            events += _requested(tally, observation, at)
            if decide is not None and observation.tool not in _ASKS_ITSELF:
                events += _permission_asked(tally, observation, decide, at)
            if ask_here is not None:
                events += _asked_here(tally, observation, ask_here, at)
        case ToolResult() if call_id_of(observation) not in tally.done_calls:
            events += _requested(tally, observation, at)
            events += _completed(tally, observation, at)
        case Compacted():
            events.append(NewEvent(ContextCompacted(occurred_at=at), actor="host"))
        case SessionBegan() | Noted():
            pass
    if moved_by_tool and seen.origin.permission_mode != "plan":  # "plan": said before it
        events += _mirrored_mode(tally, seen.origin.permission_mode, at, client)
    return events, key if events else None


def _gemini_call(tally: Tally, use: ToolUse) -> str:
    """The id of a Gemini call: the waiting one with its tool and input (its event sent
    again), else a new one numbered by the session's calls with that tool and input — the
    first number whose id the session does not hold (a finished call's input is the log's
    alone, D71, so its ids are what tells)."""
    waiting = tally.waiting.get(content_key(use.tool, use.input))
    if waiting is not None and waiting not in tally.refused:
        return waiting
    earlier = 0
    while (call_id := gemini_call_id(use.tool, use.input, earlier)) in tally.known_calls:
        earlier += 1
    return call_id


def _asked_here(
    tally: Tally, call: ToolUse | PermissionAsked, ask_here: AskHere, at: str | None
) -> list[NewEvent]:
    """The question or plan approval put to the user here (once per call): a plan is
    submitted with it."""
    call_id = call_id_of(call)
    if call_id in tally.interactions or call_id in tally.done_calls:
        return []
    kind, payload = ask_here
    interaction_id = host_interaction_id(call_id)
    tally.interactions[call_id] = (interaction_id, None)
    events: list[Event] = []
    if kind == "planApproval":
        events.append(PlanSubmitted(call_id=call_id, plan=str(payload.get("plan", "")),
                                    allowed_prompts=_allowed_prompts(call.input)))
    events.append(InteractionRequested(interaction_id=interaction_id, call_id=call_id,
                                       kind=kind, payload=payload))
    return [NewEvent(_stamped(e, at), actor="host", causation_id=call_id) for e in events]


def _allowed_prompts(given: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    prompts = given.get("allowedPrompts")
    return tuple(p for p in prompts if isinstance(p, dict)) if isinstance(prompts, list) else ()


def _permission_asked(
    tally: Tally, asked: PermissionAsked, decide: Decider, at: str | None
) -> list[NewEvent]:
    """PermissionRequest: the same authority as PreToolUse decides. A ``deny`` or ``allow``
    is recorded (and answered for the user); an ``ask`` leaves the question to Claude Code's
    own prompt, with nothing new to record."""
    call_id = call_id_of(asked)
    verdict = decide(tally, ToolUse(tool=asked.tool, input=asked.input,
                                    tool_use_id=asked.tool_use_id,
                                    fallback_key=asked.fallback_key))
    if verdict.behavior == "ask":
        return []
    if verdict.behavior == "deny":
        tally.refused[call_id] = (asked.tool, "deny", refusal_text(verdict.reason,
                                                                    verdict.rule_id))
    else:
        tally.refused.pop(call_id, None)
    return [NewEvent(PermissionDecided(
        call_id=call_id, tool=asked.tool, decision=verdict, occurred_at=at,
    ), actor="system", causation_id=call_id)]


_PLAN_TOOLS = frozenset({"EnterPlanMode", "ExitPlanMode"})
"""Claude Code's tools that move its mode into Plan and out of it."""

OUR_SERVER_KNOWS_ITS_SESSION = frozenset({"codex"})
"""Hosts whose calls of the ledger's own MCP tools name the host's session (Codex CLI's
``_meta``): the ledger's MCP server runs each such call in the session the host's hooks record
into, so neither a hook nor an import records it a second time, and neither counts it among
the session's calls (the count keys a prompt: a call the server refused records nothing)."""


def ledger_tool(tool: str) -> bool:
    """Whether ``tool`` is one of the ledger's own MCP tools as a host names it."""
    return OWN_MCP_NAME.match(tool.replace(".", "__")) is not None


def recorded_by_our_server(client: str, observation: Observation) -> bool:
    """Whether ``observation`` is about a call of the ledger's own MCP tools that the
    ledger's MCP server records in this same session (:data:`OUR_SERVER_KNOWS_ITS_SESSION`):
    a hook leaves it to the server (the Codex rollout reader drops such calls too)."""
    return client in OUR_SERVER_KNOWS_ITS_SESSION and isinstance(
        observation, ToolUse | PermissionAsked | ToolResult) and ledger_tool(observation.tool)


_ASKS_ITSELF = frozenset({"AskUserQuestion", "ExitPlanMode", "request_user_input"})
"""Tools the host asks its user about itself (Claude Code's question and plan, Codex CLI's
question): no permission decision from here (CC-4)."""


HOST_PLAN = frozenset({"claude-code", "codex", "enter_plan_tool"})
"""How Plan was turned on when Claude Code turned it on (its mode; its EnterPlanMode): such a
Plan follows Claude Code's mode. Plan turned on here any other way is the ledger's."""


def _mirrored_mode(tally: Tally, mode: str | None, at: str | None,
                   client: str = "claude-code") -> list[NewEvent]:
    """CC-3: the mode change ``permission_mode`` implies, if the state differs. While Plan
    turned on here is on, the host's mode is recorded underneath it and Plan stays. (Claude
    Code and Codex CLI report a ``permission_mode``; Gemini CLI none.)"""
    if mode is None:
        return []
    via: ModeChangeVia = "codex" if client == "codex" else "claude-code"
    requested = MODES.get(mode, "build")
    if requested == "plan" and tally.execution.plan_enabled:
        return []
    command: Command = SetMode(requested)
    if (requested != "plan" and tally.execution.plan_enabled
            and tally.plan_by not in HOST_PLAN):
        command = UnderPlan(requested)
    outcome = decide_events(tally.execution, command, via=via)
    if isinstance(outcome, Refusal):
        return []
    state, events = outcome
    if state.plan_enabled and not tally.execution.plan_enabled:
        tally.plan_by = via
    elif not state.plan_enabled:
        tally.plan_by = None
    tally.execution = state
    host_mode = None if mode in MODES else mode
    return [NewEvent(_stamped(e, at, host_mode=host_mode), actor="host") for e in events]


_STOPS = frozenset({"Stop", "SubagentStop"})
_TURN_ENDS = _STOPS | {"SessionEnd"}
"""Events after which no call of the turn is still waiting for its user's yes."""


def _closed_refusals(
    tally: Tally, observation: Observation, at: str | None
) -> list[NewEvent]:
    """Outcomes for the calls refused here that Claude Code will never report (it sends no
    PostToolUse for a refused call): a ``deny`` is closed by the session's next event, an
    ``ask`` — which an interactive user may still grant at Claude Code's own prompt — by the
    end of the turn (``Stop``), the next prompt, a compaction or a (re)start."""
    if not tally.refused:
        return []
    ended = _ends_turn(observation)
    own = call_id_of(observation) if isinstance(
        observation, ToolUse | PermissionAsked | ToolResult) else None
    closed: list[NewEvent] = []
    for call_id, (tool, behavior, shown) in list(tally.refused.items()):
        if call_id == own or not (behavior == "deny" or ended):
            continue
        del tally.refused[call_id]
        tally.done_calls.add(call_id)
        closed.append(NewEvent(_stamped(ToolCallCompleted(
            call_id=call_id, tool=tool, status="denied", success=False, result={},
            model_content=shown,
        ), at), actor="host", causation_id=call_id))
    return closed


def _ends_turn(observation: Observation) -> bool:
    """Whether nothing of the turn before ``observation`` can still be answered in Claude
    Code's own dialogs."""
    if isinstance(observation, Compacted) and observation.summary_turns:
        return False  # Gemini's, seen before a model call: within the turn
    return isinstance(observation, Prompt | Compacted | SessionBegan) or (
        isinstance(observation, Noted) and observation.event in _TURN_ENDS)


def asked_outcomes(tally: Tally, seen: Seen) -> dict[str, ToolResult]:
    """The results the session's transcript holds for the questions and plans still open,
    read when ``seen`` ends their turn: Claude Code reports a plan the user rejected, or a
    question dismissed, to no hook — only its transcript has the outcome (and the words)."""
    path = seen.origin.transcript
    if not tally.asking or path is None or not _ends_turn(seen.observation):
        return {}
    try:
        transcript = read_transcript(path)
    except (OSError, ValueError):
        return {}
    found: dict[str, ToolResult] = {}
    for line in transcript.seen:
        if isinstance(line.observation, ToolResult):
            call_id = call_id_of(line.observation)
            if call_id in tally.asking:
                found[call_id] = line.observation
    return found


def _closed_asks(
    tally: Tally, observation: Observation, at: str | None, outcomes: Mapping[str, ToolResult]
) -> list[NewEvent]:
    """Outcomes for the questions and plan approvals Claude Code asked its user and reported
    no answer to, once their turn is over: what the transcript says (``outcomes``). Claude
    Code may not have written it yet when ``Stop`` comes (it writes its transcript behind), so
    a call is left open there; a later prompt, compaction, start or end closes it with what
    the transcript says by then, else as turned down without words."""
    if not tally.asking or not _ends_turn(observation):
        return []
    stopped = isinstance(observation, Noted) and observation.event in _STOPS
    closed: list[NewEvent] = []
    for call_id, (tool, given) in list(tally.asking.items()):
        found = outcomes.get(call_id)
        answered_here = (tally.interactions.get(call_id) or ("", None))[1] is not None
        if found is None and stopped and not answered_here:
            continue
        result = ToolResult(  # the input as the hook had it: Claude Code adds the plan there
            tool=tool, input={**(found.input if found else {}), **given},
            response=found.response if found else None,
            content=found.content if found else "", error=found.error if found else True,
            tool_use_id=call_id)
        closed += _completed(tally, result, at)
    return closed


def _stamped(event: Event, at: str | None, *, host_mode: str | None = None) -> Event:
    update: dict[str, Any] = {}
    if at is not None and "occurred_at" in type(event).model_fields:
        update["occurred_at"] = at
    if host_mode is not None and isinstance(event, SessionModeChanged):
        update["host_mode"] = host_mode
    return event.model_copy(update=update) if update else event


def _requested(
    tally: Tally, call: ToolUse | PermissionAsked | ToolResult, at: str | None
) -> list[NewEvent]:
    """``ToolCallRequested`` unless the session holds the call already."""
    call_id = call_id_of(call)
    if call_id in tally.known_calls:
        return []
    tally.known_calls.add(call_id)
    tally.calls += 1
    key = content_key(call.tool, call.input)
    tally.waiting[key] = call_id
    if call.tool in _ASKS_ITSELF and not isinstance(call, ToolResult):
        tally.asking[call_id] = (call.tool, dict(call.input))
    return [NewEvent(ToolCallRequested(
        call_id=call_id, tool=call.tool, input=dict(call.input), host=tally.host, occurred_at=at,
    ), actor="model", causation_id=call_id)]


def _result_data(response: Any) -> dict[str, Any]:
    if isinstance(response, Mapping):
        return dict(response)
    if response is None:
        return {}
    return {"response": response}


def _completed(tally: Tally, result: ToolResult, at: str | None) -> list[NewEvent]:
    """The result's events: what the tool carried (todos, questions, a plan), then the
    completion of the call (CC-5)."""
    call_id = call_id_of(result)
    tally.done_calls.add(call_id)
    tally.refused.pop(call_id, None)
    tally.asking.pop(call_id, None)
    asked = tally.interactions.pop(call_id, None)
    for key in [k for k, waiting in tally.waiting.items() if waiting == call_id]:
        del tally.waiting[key]
    carried: list[Event] = []
    here = result.error and result.content.startswith(REFUSED_HERE)
    refused = here or (result.error and result.content.startswith(REJECTED))
    match result.tool:
        case "TodoWrite" | "update_plan" | "write_todos" if not result.error:
            carried += _todos(tally, result)
        case "TaskCreate" | "TaskUpdate" | "TaskList" if not result.error:
            carried += _tasks(tally, result)
        case "AskUserQuestion":
            carried += _question(call_id, result, asked)
        case "request_user_input":
            answered = _codex_question(result)
            if answered is not None:  # else it never reached the user (exec refuses it)
                carried += _question(call_id, answered, asked)
        case "ExitPlanMode":
            carried += _plan(tally, call_id, result, asked)
            refused = False  # its refusal is the plan's outcome, recorded above
        case "EnterPlanMode" if not result.error and not tally.execution.plan_enabled:
            entered = decide_events(tally.execution, SetMode("plan"), via="enter_plan_tool")
            if not isinstance(entered, Refusal):
                tally.execution = entered[0]
                tally.plan_by = "enter_plan_tool"
                carried += entered[1]
    completed = ToolCallCompleted(
        call_id=call_id, tool=result.tool, status="denied" if refused else "completed",
        success=not result.error, result={} if here else _result_data(result.response),
        model_content=result.content, occurred_at=at,
    )
    return [NewEvent(_stamped(e, at), actor="host", causation_id=call_id)
            for e in (*carried, completed)]


TODO_LISTS: dict[str, tuple[str, str]] = {
    "TodoWrite": ("todos", "content"),
    "update_plan": ("plan", "step"),
    "write_todos": ("todos", "description"),
}
"""Each host's todo tool (Claude Code's TodoWrite, Codex CLI's ``update_plan``, Gemini CLI's
``write_todos``): the input's list and each item's text. Each sends the whole list."""


def unheld_todo_list(observation: Observation) -> str | None:
    """Why a host's todo tool call that ran (an imported result) does not become the session's
    list — it is over the bounds (:func:`todo_list_refusal`) — or ``None``."""
    if not isinstance(observation, ToolResult) or observation.tool not in TODO_LISTS:
        return None
    return todo_list_refusal(observation.tool, observation.input, 0)


def todo_list_refusal(tool: str, tool_input: Mapping[str, Any], held: int) -> str | None:
    """Why a host's todo tool call would make a list longer than the ledger holds
    (:data:`MAX_TODOS` items of :data:`MAX_TODO_CHARS` characters), or ``None``; ``held``:
    items in the session's list now (Claude Code's TaskCreate adds one)."""
    texts: list[Any] = []
    if tool in TODO_LISTS:
        list_key, text_key = TODO_LISTS[tool]
        raw = tool_input.get(list_key)
        if not isinstance(raw, list):
            return None
        if len(raw) > MAX_TODOS:
            return (f"a todo list holds at most {MAX_TODOS:,} items; this one has "
                    f"{len(raw):,}")
        texts = [item.get(text_key) for item in raw if isinstance(item, Mapping)]
    elif tool in ("TaskCreate", "TaskUpdate"):
        if tool == "TaskCreate" and held >= MAX_TODOS:
            return f"a todo list holds at most {MAX_TODOS:,} items; this one is full"
        texts = [tool_input.get("subject")]
    longest = max((len(t) for t in texts if isinstance(t, str)), default=0)
    if longest > MAX_TODO_CHARS:
        return (f"a todo item holds at most {MAX_TODO_CHARS:,} characters; one has "
                f"{longest:,}")
    return None


def _todos(tally: Tally, result: ToolResult) -> list[Event]:
    """A todo tool's list as TD-1 items (``priority`` medium when the host sends none).
    Gemini's ``cancelled`` items leave the list: the model chose to drop them, so they are
    not pointed out as dropped unfinished."""
    list_key, text_key = TODO_LISTS[result.tool]
    raw = result.input.get(list_key)
    if not isinstance(raw, list) or todo_list_refusal(result.tool, result.input, 0):
        return []  # a list over the bounds (refused before it ran) is not held
    cancelled = [item for item in raw if isinstance(item, Mapping)
                 and item.get("status") == "cancelled"]
    try:
        items = tuple(
            TodoItemData(
                content=item.get(text_key), status=item.get("status"),
                priority=item.get("priority") or "medium",
            )
            for item in raw if isinstance(item, Mapping) and item not in cancelled
        )
    except ValidationError:
        return []  # recorded as a call; the list is not one this ledger can hold
    gone = {str(item.get(text_key)) for item in cancelled}
    dropped = tuple(d for d in dropped_unfinished(tally.todos, items) if d.content not in gone)
    tally.todos = items
    return [TodosWritten(todos=items, dropped_unfinished=dropped)]


_TASK_STATUSES = frozenset({"pending", "in_progress", "completed"})


def _tasks(tally: Tally, result: ToolResult) -> list[Event]:
    """Claude Code's task list (TaskCreate, TaskUpdate, TaskList) as the session's todo list,
    each item with its task id: a created task is added ``pending``; an update changes its
    status or subject, and ``deleted`` takes it out (dropped, if unfinished); a listing adds
    the tasks this ledger had not seen and takes the statuses it shows."""
    items = list(tally.todos)
    at = {item.id: n for n, item in enumerate(items) if item.id is not None}
    response = result.response if isinstance(result.response, Mapping) else {}
    dropped: list[TodoItemData] = []
    deleted: set[int] = set()

    def put(task_id: Any, subject: Any, status: Any) -> None:
        if not isinstance(task_id, str | int) or isinstance(task_id, bool):
            return
        key = str(task_id)
        known = at.get(key)
        if status == "deleted":
            if known is not None and known not in deleted:
                deleted.add(known)
                if items[known].status != "completed":
                    dropped.append(items[known])
            return
        update: dict[str, Any] = {}
        if isinstance(subject, str) and subject.strip() and len(subject) <= MAX_TODO_CHARS:
            update["content"] = subject
        if status in _TASK_STATUSES:
            update["status"] = status
        if known is not None:
            items[known] = items[known].model_copy(update=update)
        elif "content" in update and len(items) - len(deleted) < MAX_TODOS:
            at[key] = len(items)
            items.append(TodoItemData(id=key, content=update["content"],
                                      status=update.get("status", "pending"), priority="medium"))

    match result.tool:
        case "TaskCreate":
            task = response.get("task")
            if isinstance(task, Mapping):
                put(task.get("id"), task.get("subject") or result.input.get("subject"),
                    "pending")
        case "TaskUpdate":
            put(result.input.get("taskId"), result.input.get("subject"),
                result.input.get("status"))
        case "TaskList":
            listed = response.get("tasks")
            for task in listed if isinstance(listed, list) else ():
                if isinstance(task, Mapping):
                    put(task.get("id"), task.get("subject"), task.get("status"))
    kept = tuple(item for n, item in enumerate(items) if n not in deleted)
    if kept == tally.todos and not dropped:
        return []
    tally.todos = kept
    return [TodosWritten(todos=kept, dropped_unfinished=tuple(dropped))]


def _question(
    call_id: str, result: ToolResult, asked: tuple[str, dict[str, Any] | None] | None
) -> list[Event]:
    """AskUserQuestion's questions and the user's answers (declined: ``deny``); for a
    question put to the user here, only what is not recorded yet (its answer, when it was
    answered in Claude Code's dialog after the hook stopped waiting)."""
    questions = result.input.get("questions")
    interaction_id = host_interaction_id(call_id)
    payload = {"questions": questions if isinstance(questions, list) else []}
    response = result.response if isinstance(result.response, Mapping) else {}
    answers = response.get("answers")
    if result.error or not isinstance(answers, Mapping):
        resolved = InteractionResolved(
            interaction_id=interaction_id, call_id=call_id, decision="deny",
            feedback=result.content or None,
        )
    else:
        resolved = InteractionResolved(
            interaction_id=interaction_id, call_id=call_id, decision="modify",
            input={**result.input, "answers": dict(answers)},
        )
    if asked is not None:
        return [] if asked[1] is not None else [resolved]
    return [InteractionRequested(
        interaction_id=interaction_id, call_id=call_id, kind="askUserQuestion", payload=payload,
    ), resolved]


def _codex_question(result: ToolResult) -> ToolResult | None:
    """Codex CLI's ``request_user_input`` result read as AskUserQuestion's, or ``None`` when
    it holds no answers (Codex refused the call: *unavailable in Default mode*). Codex answers
    ``{"answers": {ID: {"answers": [LABEL, …]}}}`` (as JSON text), keyed by each question's
    ``id``; AskUserQuestion's answers are keyed by the question's text."""
    response = result.response
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            response = None
    given = response.get("answers") if isinstance(response, Mapping) else None
    questions = result.input.get("questions")
    if result.error or not isinstance(given, Mapping) or not isinstance(questions, list):
        return None
    answers: dict[str, str] = {}
    for question in questions:
        if not isinstance(question, Mapping) or not isinstance(question.get("id"), str):
            continue
        chosen = given.get(question["id"])
        labels = chosen.get("answers") if isinstance(chosen, Mapping) else None
        if isinstance(labels, list) and isinstance(question.get("question"), str):
            answers[question["question"]] = ", ".join(str(label) for label in labels)
    return replace(result, response={"answers": answers})


def _plan(
    tally: Tally, call_id: str, result: ToolResult,
    asked: tuple[str, dict[str, Any] | None] | None = None,
) -> list[Event]:
    """ExitPlanMode's plan and its outcome: approved leaves Plan; rejected or feedback is
    recorded and Plan stays (CC-5). No plan file is written. A plan put to the user here was
    submitted then, and its outcome is the answer given here when there is one."""
    response = result.response if isinstance(result.response, Mapping) else {}
    plan = result.input.get("plan") or response.get("plan") or ""
    if not isinstance(plan, str):
        plan = str(plan)
    path = response.get("filePath")
    path = path if isinstance(path, str) else ""  # Claude Code's own plan file, if it says
    interaction_id = host_interaction_id(call_id)
    outcome, words = plan_outcome(result)
    answered = asked[1] if asked is not None else None
    if answered is not None:  # answered here: that answer is the outcome
        decision = answered.get("decision")
        outcome = ("approved" if decision == "approve" else
                   "feedback" if decision == "feedback" else "rejected")
        words = answered.get("feedback") if outcome == "feedback" else None
    mode = tally.execution.mode
    events: list[Event] = [] if asked is not None else [
        PlanSubmitted(call_id=call_id, plan=plan, allowed_prompts=_allowed_prompts(result.input)),
        InteractionRequested(
            interaction_id=interaction_id, call_id=call_id, kind="planApproval",
            payload={"plan": plan},
        ),
    ]
    resolve = answered is None  # not yet resolved: its resolution is recorded now
    if outcome == "approved":
        if resolve:
            events.append(InteractionResolved(interaction_id=interaction_id, call_id=call_id,
                                              decision="approve"))
        events.append(
            PlanApproved(call_id=call_id, file_written=False, mode=mode, path=path, plan=plan))
        left = decide_events(tally.execution, LeavePlan(), via="plan_approval")
        if not isinstance(left, Refusal):
            tally.execution = left[0]
            tally.plan_by = None
            events += left[1]
    elif outcome == "feedback" and words:
        if resolve:
            events.append(InteractionResolved(interaction_id=interaction_id, call_id=call_id,
                                              decision="feedback", feedback=words))
        events.append(PlanFeedbackGiven(call_id=call_id, feedback=words, mode=mode, plan=plan))
    else:
        if resolve:
            events.append(InteractionResolved(interaction_id=interaction_id, call_id=call_id,
                                              decision="deny"))
        events.append(PlanRejected(by="user", call_id=call_id, mode=mode, plan=plan))
    return events


def approved_plan(events: Sequence[RecordedEvent]) -> tuple[str, str] | None:
    """The path and plan of the last ``PlanApproved`` among ``events``."""
    found = None
    for event in events:
        if isinstance(event.data, PlanApproved):
            found = (event.data.path, event.data.plan)
    return found
