"""The answers of the HTTP API as pydantic models, so ``/openapi.json`` documents them
(the wire shapes of docs/spec.md).

The routes return plain dicts built by the service (the wire shapes tests compare); these models
only *describe* those dicts in the OpenAPI document, through ``responses=`` in the route
decorators, and are not used to filter or re-validate answers at run time. schemathesis
(``tests/test_openapi_fuzz.py``) checks every answer against them, so a shape that drifts from
its description fails a test. Keys are the camelCase wire names; every key a document always
carries is required, and documents are closed (``additionalProperties: false``) except where
docs/spec.md leaves a payload open (event ``data``, a tool ``result``, an interaction ``payload``).

:func:`error_responses` builds the error entries: every error is the docs/spec.md body
``{"error": {"code", "message", "details"}}`` (:class:`ErrorResponse`), whatever its status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from eventlog import Actor, InteractionKind, PermissionMode, TodoPriority, TodoStatus

from ..permission.authority import Behavior
from ..service.documents import DisplayMode
from .middleware import OPEN_PATHS, SAFE_METHODS

__all__ = [
    "MAX_ID_CHARS",
    "MAX_TEXT_CHARS",
    "PlainInt",
    "AuditDocument",
    "AuditFinding",
    "CallIdPath",
    "CallDocument",
    "CancelledCall",
    "CompletedCall",
    "DeniedCall",
    "DeletedSession",
    "ErrorResponse",
    "EventTypes",
    "EventsPage",
    "Health",
    "InteractionDocument",
    "InteractionIdPath",
    "ModelListing",
    "ModelSelection",
    "PendingCall",
    "PermissionAnswer",
    "ResolvedModelAnswer",
    "SessionDocument",
    "SessionIdPath",
    "SessionList",
    "SettingsDocument",
    "TimelineEntry",
    "TimelinePage",
    "TOO_LARGE",
    "document_guards",
    "error_responses",
]

MAX_TEXT_CHARS = 100_000
"""Longest free text a body field takes (a message, a goal, a /plan task, plan feedback), in
code points; a longer one is 422 naming the field. The whole body is capped in bytes as well
(:data:`sessionledger.http.middleware.MAX_BODY_BYTES`, 413)."""

MAX_ID_CHARS = 200
"""Longest id a path or body field takes (session, call and interaction ids are far shorter)."""

_PLAIN_INTEGER = re.compile(r"-?[0-9]+")


def _plain_integer(value: object) -> object:
    if isinstance(value, str) and not _PLAIN_INTEGER.fullmatch(value):
        raise ValueError("must be an integer written in decimal digits")
    return value


PlainInt = Annotated[int, BeforeValidator(_plain_integer)]
"""An integer query parameter as its schema says: digits only, not ``1.0``, ``+1``, ``1_000``
or `` 1`` (which pydantic's lax mode would take), like the ``Last-Event-ID`` header."""

SessionIdPath = Annotated[str, Path(max_length=MAX_ID_CHARS, description="the session's id")]
CallIdPath = Annotated[str, Path(max_length=MAX_ID_CHARS, description="the tool call's id")]
InteractionIdPath = Annotated[
    str, Path(max_length=MAX_ID_CHARS, description="the interaction's id")
]


class _Wire(BaseModel):
    """A closed wire document: no key beyond those listed."""

    model_config = ConfigDict(extra="forbid")


# -- errors ----------------------------------------------------------------------------------


class ErrorBody(_Wire):
    """What went wrong: a machine ``code``, a sentence, and details or ``null``."""

    code: str = Field(description="e.g. invalid_input, session_not_found, session_deleted")
    message: str
    details: Any = Field(description="JSON-safe details (the failing fields for a 422) or null")


class ErrorResponse(_Wire):
    """Every error answer (docs/spec.md)."""

    error: ErrorBody


_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def error_responses(
    described: Mapping[int, str], *, streaming: bool = False
) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for the error statuses a route answers, each an ErrorResponse.

    A streaming route's errors are JSON, not events: ``streaming`` names the media type
    itself, since FastAPI would file a model under the route's ``text/event-stream``.
    """
    if streaming:
        content = {"application/json": {"schema": _ERROR_REF}}
        return {status: {"content": content, "description": text}
                for status, text in described.items()}
    return {
        status: {"model": ErrorResponse, "description": text}
        for status, text in described.items()
    }


UNAVAILABLE_TEXT = (
    "the store is busy or stopping (`service_unavailable`) or its disk failed "
    "(`storage_unavailable`); nothing was changed, the same request may be retried"
)
UNAUTHORIZED_TEXT = (
    "no valid `Authorization: Bearer <token>` header nor login cookie (`unauthorized`)"
)
MISDIRECTED_TEXT = (
    "the `Host` header names no name this server answers to (`misdirected_request`): "
    "nothing was read or changed"
)
FORBIDDEN_ORIGIN_TEXT = (
    "sent by a page of another origin (`Origin`, or `Sec-Fetch-Site`), not an "
    "`--allowed-origin` (`forbidden_origin`); nothing was changed"
)
STORE_FREE_OPERATIONS = frozenset({"/", "/v1/login", "/v1/logout"})
"""Paths that never read the store (the web page, the login routes)."""


def document_guards(document: dict[str, Any], *, token_required: bool) -> dict[str, Any]:
    """Add what the middleware and the store may answer on any route to ``document``.

    Every operation may answer 421 (a foreign ``Host``) and every one that is not GET, HEAD or
    OPTIONS 403 (a foreign ``Origin``, EG-3); every operation but the page may answer 503 (a
    busy, closing or failing store); with a token configured every operation but the
    middleware's :data:`OPEN_PATHS` may answer 401 and names the bearer scheme. Routes do not
    list these themselves: they come from outside the handler.
    """
    error = {"application/json": {"schema": _ERROR_REF}}
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            answers = operation.setdefault("responses", {})
            answers.setdefault("421", {"description": MISDIRECTED_TEXT, "content": error})
            if method.upper() not in SAFE_METHODS:
                answers.setdefault("403", {"description": FORBIDDEN_ORIGIN_TEXT, "content": error})
            if path not in STORE_FREE_OPERATIONS:
                answers.setdefault("503", {"description": UNAVAILABLE_TEXT, "content": error})
            if token_required and path not in OPEN_PATHS:
                answers.setdefault("401", {"description": UNAUTHORIZED_TEXT, "content": error})
                operation["security"] = [{"bearer": []}]
    if token_required:
        components = document.setdefault("components", {})
        components.setdefault("securitySchemes", {})["bearer"] = {
            "type": "http", "scheme": "bearer",
            "description": "the token given to `serve` by --token or SESSIONLEDGER_TOKEN",
        }
    return document


TOO_LARGE = error_responses(
    {413: "the body is larger than the server takes (`payload_too_large`); nothing appended"}
)
"""The 413 entry of every route that takes a body."""


# -- sessions --------------------------------------------------------------------------------


class Health(_Wire):
    status: Literal["ok"]
    headPosition: int = Field(description="the store's last global position")


class Goal(_Wire):
    objective: str


class ExecutionStateDocument(_Wire):
    """Exactly ``mode``, ``planEnabled`` and ``goal``."""

    mode: PermissionMode
    planEnabled: bool
    goal: Goal | None


class TodoDocument(_Wire):
    content: str
    status: TodoStatus
    priority: TodoPriority


class AutoResolution(_Wire):
    """A question's auto-continue clock: its state and three absolute times."""

    state: Literal["hiddenGrace", "countdown", "paused"]
    startedAt: str
    visibleAt: str
    deadlineAt: str


class InteractionDocument(_Wire):
    """A pending interaction as the session document lists it."""

    interactionId: str
    callId: str
    kind: InteractionKind
    payload: dict[str, Any]
    autoResolution: AutoResolution | None


class SessionDocument(_Wire):
    """``GET /v1/sessions/{id}``: the state, todos in order, pending interactions in order."""

    sessionId: str
    version: int
    workspace: str
    parentSessionId: str | None
    executionState: ExecutionStateDocument
    displayMode: DisplayMode
    todos: list[TodoDocument]
    interactions: list[InteractionDocument]
    client: str | None = None
    """Present for a session another program created (``claude-code``: CC-2)."""
    externalSessionId: str | None = None
    """That program's own id for the session (CC-2)."""
    answerIn: Literal["host", "here"] | None = None
    """For a session another program runs: where its questions and plan approvals are
    answered — ``host``, in its own dialog; ``here``, on this service's pages while its hook
    waits."""


class AnswerInRequest(_Wire):
    """``PUT /v1/sessions/{id}/answer-in``."""

    answerIn: Literal["host", "here"]


class PendingSummary(_Wire):
    """What waits for the user in a session (issue 23.4): pending interactions by kind and
    the earliest deadline of a question timer still counting (``hiddenGrace`` or
    ``countdown``; ``null`` when none is: not eligible, not at the head yet, or paused)."""

    questions: int
    planApprovals: int
    toolApprovals: int
    deadlineAt: str | None


class SessionEntry(_Wire):
    sessionId: str
    displayMode: DisplayMode
    version: int
    updatedAt: str
    parentSessionId: str | None
    client: str | None = None
    externalSessionId: str | None = None
    name: str = Field(description=(
        "The workspace's last path part, ` · `, and the first real user message, else the "
        "active goal's objective, else the session id (visible text, at most 60 characters)"))
    workspace: str
    pending: PendingSummary


class SessionList(_Wire):
    """``GET /v1/sessions``: a page of the live sessions, most recently updated first."""

    sessions: list[SessionEntry]
    next: str | None = Field(description="`cursor` of the next page; null on the last")


class DeletedSession(_Wire):
    sessionId: str
    deleted: Literal[True]
    version: int


class Envelope(_Wire):
    """One recorded event. One this build cannot decode has the type `Undecodable` and
    `data` `{"storedType", "storedData", "reason"}`."""

    seq: int
    globalPosition: int
    sessionId: str
    type: str
    schemaVersion: int
    data: dict[str, Any]
    recordedAt: str
    actor: Actor
    causationId: str | None
    correlationId: str | None
    prevHash: str
    hash: str


class EventsPage(_Wire):
    events: list[Envelope]
    version: int


class TimelineEntry(_Wire):
    """One event as the timeline shows it: the one-line summary ``replay`` prints; the
    event's data is on the events page (issue 23.2)."""

    seq: int
    recordedAt: str
    occurredAt: str | None = None
    actor: Actor
    type: str
    summary: str


class TimelinePage(_Wire):
    entries: list[TimelineEntry]
    version: int
    hasEarlier: bool


class AuditChain(_Wire):
    ok: bool
    firstBadSeq: int | None


class AuditProjections(_Wire):
    ok: bool
    differences: list[Any]


class AuditUndecodable(_Wire):
    """A stored event this build cannot decode: its seq, stored type and why."""

    seq: int
    type: str
    reason: str


class AuditFinding(_Wire):
    """What a reviewer looks for in a session, at the seq of the event that shows it;
    not a fault. Each kind has its own keys: ``write_in_plan`` ``tool``, ``callId`` and
    ``path`` or ``command`` when the call had one; ``dropped_unfinished_todos`` ``dropped``
    (the items' contents); ``unanswered_question`` ``interactionId``, ``callId``,
    ``decision`` (``autoContinued``, ``deny`` or ``withdrawn``) and ``questions`` (texts);
    ``clock_stepped_back`` ``recordedAt`` and ``previousRecordedAt``."""

    kind: Literal["write_in_plan", "dropped_unfinished_todos", "unanswered_question",
                  "clock_stepped_back"]
    seq: int
    tool: str | None = None
    callId: str | None = None
    path: str | None = None
    command: str | None = None
    dropped: list[str] | None = None
    interactionId: str | None = None
    decision: Literal["autoContinued", "deny", "withdrawn"] | None = None
    questions: list[str] | None = None
    recordedAt: str | None = None
    previousRecordedAt: str | None = None


class AuditDocument(_Wire):
    ok: bool
    events: int
    chain: AuditChain
    projections: AuditProjections
    findings: list[AuditFinding] = Field(
        description="always present; findings are not faults: ok does not count them"
    )
    undecodable: list[AuditUndecodable] = Field(
        default_factory=list, description="present only when not empty; each makes ok false"
    )
    notes: list[str] = Field(default_factory=list, description="present only when not empty")


# -- tool calls ------------------------------------------------------------------------------


class Permission(_Wire):
    behavior: Behavior
    reason: str
    ruleId: str


class TurnControl(_Wire):
    reason: Literal["plan_exit_denied"]
    stopTurnAfterResult: Literal[True]


class FollowUpUserInput(_Wire):
    input: str
    reasonSource: Literal["plan_approval_feedback"]


class CompletedCall(_Wire):
    status: Literal["completed"]
    callId: str
    success: bool
    result: Any = Field(description="the tool's result object")
    modelContent: str
    turnControl: TurnControl | None
    followUpUserInput: FollowUpUserInput | None


class PendingCall(_Wire):
    status: Literal["pending"]
    callId: str
    interactionId: str


class DeniedCall(_Wire):
    status: Literal["denied"]
    callId: str
    modelContent: str
    permission: Permission
    turnControl: TurnControl | None
    followUpUserInput: FollowUpUserInput | None


class CancelledCall(_Wire):
    """Withdrawn before anyone answered: its caller cancelled the request (D157)."""

    status: Literal["cancelled"]
    callId: str
    success: Literal[False]
    result: Any = Field(description='{"withdrawn": true, "reason": …}')
    modelContent: str
    turnControl: TurnControl | None
    followUpUserInput: FollowUpUserInput | None


CallDocument = Annotated[
    CompletedCall | PendingCall | DeniedCall | CancelledCall, Field(discriminator="status")
]
"""A tool call as it is now: completed, pending on the user, denied, or cancelled."""


class PermissionAnswer(_Wire):
    """``POST …/permission-check``: the decision for a host tool, recorded under ``callId``."""

    behavior: Behavior
    reason: str
    ruleId: str
    callId: str


# -- models, settings, event types -----------------------------------------------------------


class CatalogEntry(_Wire):
    id: str
    providerId: str
    providerName: str
    modelId: str
    name: str | None
    contextWindow: int | None
    reasoningLevels: list[str]
    defaultLevel: str | None
    disabled: str | None


class ModelListing(_Wire):
    text: str = Field(description="the ListModels text")
    current: str | None
    cutModels: int
    models: list[CatalogEntry]


class ResolvedModelAnswer(_Wire):
    id: str
    level: str | None


class ModelSelection(_Wire):
    sessionId: str
    model: str
    level: str | None
    version: int


class SettingsDocument(_Wire):
    autoContinueQuestions: bool


class EventTypes(_Wire):
    eventTypes: list[str]


# -- what the CLI prints with --json -------------------------------------------------------


class CliSessionEntry(SessionEntry):
    """One session of the list: the entry `GET /v1/sessions` gives, and whether the session
    is deleted (listed with `--all`)."""

    deleted: bool


class CliSessions(_Wire):
    """The sessions, most recently updated first, each named, with what waits in it."""

    sessions: list[CliSessionEntry]


class CliState(_Wire):
    """A session's execution state, where its log stands and whether it is deleted."""

    sessionId: str
    executionState: ExecutionStateDocument
    displayMode: DisplayMode
    version: int
    updatedAt: str
    deleted: bool


class TodoCounts(_Wire):
    pending: int
    in_progress: int
    completed: int
    total: int


class TodoProgress(_Wire):
    completed: int
    total: int


class CliTodos(_Wire):
    """A session's todo list in order, its counts by status and its progress."""

    sessionId: str
    todos: list[TodoDocument]
    summary: TodoCounts
    progress: TodoProgress
    updatedAt: str | None = Field(description="when the list last changed; null if never")


class CliReplay(_Wire):
    """The timeline up to `--until` (as `GET /v1/sessions/{id}/timeline` gives its entries)
    and the state as of its last event; `client` and `externalSessionId` for a session
    another program created."""

    sessionId: str
    client: str | None = None
    externalSessionId: str | None = None
    entries: list[TimelineEntry]
    state: CliState = Field(description="the state as of the last entry (`version`: its seq)")


class CliAuditedSession(AuditDocument):
    sessionId: str


class CliAudit(_Wire):
    """`ok` when every chain verifies and every projection equals a fresh fold; each
    session's audit document with its `sessionId` (the audit file `sessionledger export`
    writes is one of them)."""

    ok: bool
    sessions: list[CliAuditedSession]


CLI_OUTPUTS: dict[str, type[BaseModel]] = {
    "sessions": CliSessions, "state": CliState, "todos": CliTodos, "events": Envelope,
    "replay": CliReplay, "audit": CliAudit,
}
"""The shape each read command prints with ``--json`` (``events``: one per line)."""
