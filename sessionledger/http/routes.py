"""Every route of the JSON API and the page (docs/spec.md), one factory per group of routes.

Each route validates its input with pydantic or FastAPI's parameter parsing, calls one method
of :class:`~sessionledger.service.sessions.SessionService` (or its ``tools``, ``turns``,
``timers``, ``models``, ``settings``) and returns its document.

Two ways to call the service (issue 24). The commands — a tool call, an answer, a permission
check, a message, a model request's reminders, a compaction, a mode or goal change, creating
and deleting a session, user activity — are ``async`` routes calling it through
:func:`~sessionledger.ledger.on_loop`: it runs on the event loop's thread and awaits its
appends, retry pauses and writer turns, so the request costs no hop to a worker thread and
the loop serves other requests while its group commits. Only calls that block on nothing
else may run there (:data:`LOOP_TOOLS`, :func:`_answers_on_loop`). Everything that may
block otherwise stays a plain ``def`` route, run by FastAPI in a worker thread: the service
tools that reach a port (ListModels and the model routes: the model catalog;
ReadSessionContext: the auxiliary model, waited for on a thread up to its budget; the
schedule tools: the cron and off-peak ports) or write a file (ExitPlanMode and its answer:
the approved plan, fsynced), the reads that may be large (the session list, an events page,
the timeline, an audit, the document), the settings (they pause countdowns across sessions)
and the Claude Code hook (one transaction of many batches, ``append_many``). An error the
service raises is answered alike either way (``app.py``'s handlers).

The groups, in order: execution state (mode, goal), interactions (user activity, settings),
models, tool calls, the turn loop, the web client, and the sessions themselves. A deleted
session answers 410 ``session_deleted`` on its document, its stream and its commands; its
events page and its audit stay readable until the session is purged.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote_to_bytes

import anyio
import anyio.to_thread
from fastapi import APIRouter, Body, FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    field_validator,
    model_validator,
)
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from eventlog import CATALOG, UNDECODABLE, HostKind, UserActivityAction, loads_json

from ..claude_code.hooks import HOOK_PATHS, NO_OPINION, HookAnswer, answer_hook
from ..claude_code.recorder import Recorder
from ..claude_code.wire import PROBLEM_HEADER, WORKSPACE_HEADER
from ..ledger import on_loop
from ..service.sessions import (
    AUDITS_AT_ONCE,
    DEFAULT_EVENTS_LIMIT,
    DEFAULT_SESSIONS_LIMIT,
    DEFAULT_TIMELINE_LIMIT,
    MAX_EVENTS_LIMIT,
    MAX_SESSIONS_LIMIT,
    MAX_TIMELINE_LIMIT,
    RequestedMode,
    SessionService,
)
from ..service.settings import SettingsUpdate
from ..service.turns import receipt
from ..web import INDEX_FILE, STATIC_DIR
from .middleware import JSONAnswer, api_router, header
from .schemas import (
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    TOO_LARGE,
    AnswerInRequest,
    AuditDocument,
    CallDocument,
    CallIdPath,
    CompletedCall,
    DeletedSession,
    EventsPage,
    EventTypes,
    Health,
    InteractionDocument,
    InteractionIdPath,
    ModelListing,
    ModelSelection,
    PendingCall,
    PermissionAnswer,
    PlainInt,
    ResolvedModelAnswer,
    SessionDocument,
    SessionIdPath,
    SessionList,
    SettingsDocument,
    TimelinePage,
    error_responses,
)

__all__ = [
    "ActivityRequest",
    "COMMAND_RESPONSES",
    "CONTENT_SECURITY_POLICY",
    "LOOP_TOOLS",
    "CompactRequest",
    "CreateSessionRequest",
    "GoalRequest",
    "MessageRequest",
    "ModeRequest",
    "ModelChoice",
    "PermissionCheckRequest",
    "PrepareRequest",
    "RecordedReceipt",
    "ReminderOut",
    "RemindersResponse",
    "RespondRequest",
    "STATIC_PREFIX",
    "ToolCallRequest",
    "execution_routes",
    "install_web_client",
    "interaction_routes",
    "model_routes",
    "session_routes",
    "tool_routes",
    "turn_routes",
    "web_routes",
]

_log = logging.getLogger("sessionledger.http")


# -- the execution-state routes: mode and goal (ES-1 … ES-6) -----------------------------------
#
# The execution-state commands over HTTP (ES-1 … ES-8, docs/spec.md): ``/mode`` and ``/goal``.
#
# ``POST /v1/sessions/{id}/mode`` takes ``{"mode": …, "task"?: …}`` (``/mode X``, or with mode
# ``plan`` and a task the desktop ``/plan [task]`` path, the task recorded as a user message) or
# ``{"cycle": true}`` (Shift+Tab). ``POST /v1/sessions/{id}/goal`` starts a goal and
# ``DELETE /v1/sessions/{id}/goal`` ends it. Each answers 200 with the session document; a
# change the state machine refuses is 409 ``refused`` with the machine's message (ES-5's exact
# sentence for Plan and Goal together) and appends nothing; a deleted session is 410.

COMMAND_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": SessionDocument},
    **error_responses({
        404: "no such session (`session_not_found`)",
        409: "the state machine refused the change (`refused`); nothing appended",
        410: "the session was deleted (`session_deleted`)",
        422: "the body failed validation (`invalid_input`)",
    }),
}
"""The answers every command route documents: the session document, or ``{"error": {…}}``."""


def _blank(text: str | None) -> bool:
    return text is not None and not text.strip()


class ModeRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/mode``: exactly one of ``mode`` and ``cycle``."""

    model_config = ConfigDict(extra="forbid")

    mode: RequestedMode | None = Field(
        default=None, description="plan enters Plan (keeping the mode); others leave it"
    )
    task: str | None = Field(
        default=None, min_length=1, max_length=MAX_TEXT_CHARS,
        description="with mode plan only: the /plan task, recorded as a user message",
    )
    cycle: StrictBool | None = Field(default=None, description="true: Shift+Tab")

    @model_validator(mode="after")
    def _one_command(self) -> ModeRequest:
        if (self.mode is None) == (self.cycle is None):
            raise ValueError("send exactly one of 'mode' and 'cycle'")
        if self.cycle is False:
            raise ValueError("'cycle' must be true")
        if self.task is not None and self.mode != "plan":
            raise ValueError("'task' goes with mode 'plan' only")
        if _blank(self.task):
            raise ValueError("'task' must not be blank")
        return self


class GoalRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/goal``."""

    model_config = ConfigDict(extra="forbid")

    objective: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS,
        description="what the agent pursues on its own",
    )

    @model_validator(mode="after")
    def _not_blank(self) -> GoalRequest:
        if _blank(self.objective):
            raise ValueError("'objective' must not be blank")
        return self


def execution_routes(service: SessionService) -> APIRouter:
    """The mode and goal routes over ``service`` (its one runtime keeps ES-6 order)."""
    router = api_router(tags=["execution state"], responses=COMMAND_RESPONSES)

    @router.post("/v1/sessions/{session_id}/mode", response_model=None, responses=TOO_LARGE)
    async def change_mode(
        session_id: SessionIdPath, body: Annotated[ModeRequest, Body()]
    ) -> dict[str, Any]:
        """Set the mode (`/mode X`, `/plan [task]`) or cycle it (Shift+Tab); the document."""
        if body.cycle:
            return await on_loop(service.cycle_mode, session_id)
        assert body.mode is not None  # the model allows nothing else
        return await on_loop(service.set_mode, session_id, body.mode, task=body.task)

    @router.post("/v1/sessions/{session_id}/goal", response_model=None, responses=TOO_LARGE)
    async def start_goal(
        session_id: SessionIdPath, body: Annotated[GoalRequest, Body()]
    ) -> dict[str, Any]:
        """Start a goal; 409 in Plan or while another goal is active."""
        return await on_loop(service.start_goal, session_id, body.objective)

    @router.delete("/v1/sessions/{session_id}/goal", response_model=None)
    async def end_goal(session_id: SessionIdPath) -> dict[str, Any]:
        """End the active goal; 409 when there is none."""
        return await on_loop(service.end_goal, session_id)

    @router.put("/v1/sessions/{session_id}/answer-in", response_model=None,
                responses={200: {"model": SessionDocument}, **TOO_LARGE})
    async def set_answer_in(
        session_id: SessionIdPath, body: Annotated[AnswerInRequest, Body()]
    ) -> dict[str, Any]:
        """Where a session another program runs has its questions and plan approvals
        answered: ``host`` (its own dialog) or ``here`` (these pages, while its hook waits);
        the document. 409 for a session this service runs itself."""
        return await on_loop(service.set_answer_in, session_id, body.answerIn)

    return router


# -- the interaction routes: user activity and the settings (HO-5, HO-6) -----------------------
#
# The auto-continue timer's routes (docs/spec.md, HO-5, HO-6): user activity and the settings.
#
# ``POST /v1/sessions/{id}/interactions/{iid}/activity`` tells the service the user is engaging
# with a waiting question (moving, selecting, typing). No body is needed; ``{"action": …}``
# may name what the user did. It answers 200 with the interaction as the session document
# lists it — its ``autoResolution`` now ``paused`` (times kept) if its clock was running, or
# ``null`` if it had not started (it will not start now) — 404 for an unknown interaction,
# 409 once it is resolved (a deadline that has passed counts: the auto-continue is appended
# first), 410 for a deleted session.
#
# ``GET /v1/settings`` answers ``{"autoContinueQuestions": bool}``; ``PUT`` takes the same shape,
# any subset (``{}`` changes nothing), unknown keys or non-boolean values are 422 and append
# nothing. Turning the setting off pauses running countdowns before the answer is sent.

_BODY_INVALID = "the body failed validation (`invalid_input`); nothing appended"
_ACTIVITY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": InteractionDocument},
    **error_responses({
        404: "no such session or interaction",
        409: "the interaction was already resolved (answered or auto-continued)",
        410: "the session was deleted (`session_deleted`)",
        422: _BODY_INVALID,
    }),
    **TOO_LARGE,
}


class ActivityRequest(BaseModel):
    """Optional body of ``POST …/interactions/{iid}/activity``."""

    model_config = ConfigDict(extra="forbid")

    action: UserActivityAction = Field(
        default="other", description="what the user did: move, select, type or other"
    )


def interaction_routes(service: SessionService) -> APIRouter:
    """The activity and settings routes over ``service``."""
    router = api_router(tags=["auto-continue"])

    @router.post(
        "/v1/sessions/{session_id}/interactions/{interaction_id}/activity",
        response_model=None, responses=_ACTIVITY_RESPONSES,
    )
    async def activity(
        session_id: SessionIdPath, interaction_id: InteractionIdPath,
        body: Annotated[ActivityRequest | None, Body()] = None,
    ) -> dict[str, Any]:
        """Record user activity on a waiting question; pauses its countdown for good."""
        action = (body or ActivityRequest()).action
        return await on_loop(service.timers.activity, session_id, interaction_id, action)

    @router.get(
        "/v1/settings", response_model=None, responses={200: {"model": SettingsDocument}}
    )
    def get_settings() -> dict[str, Any]:
        """The service-wide settings: whether unanswered questions auto-continue."""
        return service.settings.current()

    @router.put(
        "/v1/settings", response_model=None,
        responses={200: {"model": SettingsDocument}, **error_responses({422: _BODY_INVALID}),
                   **TOO_LARGE},
    )
    def put_settings(body: Annotated[SettingsUpdate, Body()]) -> dict[str, Any]:
        """Change settings (any subset); recorded as ``SettingChanged`` events."""
        return service.settings.update(body.model_dump(by_alias=True, exclude_none=True))

    return router


# -- the model routes (LM-1, LM-2) -------------------------------------------------------------
#
# The model catalog over HTTP (LM-1, LM-2, docs/spec.md): list, resolve, and the session's model.
#
# * ``GET /v1/models[?sessionId=…]`` — the ListModels text and the catalog as JSON
#   (``{"text", "current", "cutModels", "models": [...]}``), for the session's workspace or,
#   without a session, the server's workspace root. No catalog: 404
#   ``model_catalog_unavailable``.
# * ``GET /v1/models/resolve?ref=…[&sessionId=…]`` — LM-2: ``{"id": "provider/model",
#   "level": …}``, or 422 ``invalid_model_reference`` with the LM-2 message.
# * ``PUT /v1/sessions/{id}/model`` ``{"model": ref}`` — the user sets the session's model
#   (resolved by LM-2, recorded as ``SessionModelSelected``); 200 with the choice. Tools never
#   change it (LM-1).

_MODEL_RESPONSES = error_responses({
    404: "no model catalog (`model_catalog_unavailable`) or no such session",
    410: "the session was deleted (`session_deleted`)",
    422: "the reference does not resolve (`invalid_model_reference`, saying why) or "
         "the request failed validation; nothing appended",
})

SessionQuery = Annotated[
    str | None,
    Query(alias="sessionId", min_length=1, max_length=MAX_ID_CHARS,
          description="the session whose workspace catalog and current model apply"),
]


class ModelChoice(BaseModel):
    """Body of ``PUT /v1/sessions/{id}/model``: a model reference."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"model": "anthropic/sonnet"}, {"model": "sonnet$high"}],
    })

    model: str = Field(
        min_length=1, max_length=400,
        description="providerId/modelId or a bare modelId, optionally with $level",
    )


def model_routes(service: SessionService) -> APIRouter:
    """The model catalog routes over ``service``."""
    router = api_router(tags=["models"], responses=_MODEL_RESPONSES)

    @router.get("/v1/models", response_model=None, responses={200: {"model": ModelListing}})
    def list_models(session_id: SessionQuery = None) -> dict[str, Any]:
        """The ListModels text and the catalog as JSON."""
        return service.models.listing(session_id)

    @router.get(
        "/v1/models/resolve", response_model=None,
        responses={200: {"model": ResolvedModelAnswer}},
    )
    def resolve_model(
        ref: Annotated[str, Query(min_length=1, max_length=400,
                                  description="the model reference to resolve")],
        session_id: SessionQuery = None,
    ) -> dict[str, Any]:
        """Resolve a model reference: ``{"id", "level"}``."""
        return service.models.resolve(ref, session_id).to_wire()

    @router.put(
        "/v1/sessions/{session_id}/model", response_model=None,
        responses={200: {"model": ModelSelection}, **error_responses(
            {409: "the session kept changing under the request (`conflict`)"}), **TOO_LARGE},
    )
    def select_model(
        session_id: SessionIdPath, body: Annotated[ModelChoice, Body()]
    ) -> dict[str, Any]:
        """The user's choice of the session's model, recorded on the session."""
        return service.models.select(session_id, body.model)

    return router


# -- the tool-call routes (docs/spec.md) -------------------------------------------------------
#
# Tool calls and the user's answers over HTTP (docs/spec.md).
#
# ``POST /v1/sessions/{id}/tool-calls`` runs a service tool: 200 when it completed or was
# denied, 202 while it waits for the user; re-sending a ``callId`` returns the original call.
# ``POST …/interactions/{iid}/respond`` answers a waiting call and returns the call document once
# its completion is committed. ``POST …/permission-check`` decides for the host's own tools.

_TOOL_RESPONSES = error_responses({
    404: "no such session, call or interaction",
    409: "the interaction was already resolved, or the call id is taken",
    410: "the session was deleted (`session_deleted`)",
    422: "the input failed the tool's schema (`invalid_input`), or the workspace's config.toml "
         "cannot be used (`invalid_configuration`, naming the key); nothing appended",
})


class ToolCallRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/tool-calls``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra={
        "examples": [
            {"tool": "TodoWrite", "input": {"todos": [
                {"content": "Write the tests", "status": "in_progress", "priority": "high"}]}},
            {"tool": "AskUserQuestion", "callId": "call_1", "input": {"questions": [{
                "question": "Which database?", "header": "Database", "multiSelect": False,
                "options": [{"label": "SQLite (Recommended)", "description": "one file"},
                            {"label": "Postgres", "description": "a server"}]}]}},
            {"tool": "EnterPlanMode", "input": {}},
        ],
    })

    tool: str = Field(min_length=1, max_length=200)
    input: dict[str, Any]
    call_id: str | None = Field(
        default=None, alias="callId", min_length=1, max_length=MAX_ID_CHARS,
        description="the host's id for the call; re-sending it returns the original call",
    )


class RespondRequest(BaseModel):
    """Body of ``POST …/interactions/{iid}/respond``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"decision": "approve"}, {"decision": "deny"},
        {"decision": "feedback", "feedback": "Split the second step in two."},
    ]})

    decision: Literal["modify", "approve", "deny", "feedback"]
    input: dict[str, Any] | None = Field(
        default=None, description="with modify: the new tool input (answers filled in)"
    )
    feedback: str | None = Field(
        default=None, max_length=MAX_TEXT_CHARS, description="with feedback: the user's text"
    )


class PermissionCheckRequest(BaseModel):
    """Body of ``POST …/permission-check`` for one of the host's own tools."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra={
        "examples": [{"tool": "Bash", "input": {"command": "git status"}}],
    })

    tool: str = Field(min_length=1, max_length=200)
    input: dict[str, Any] = Field(default_factory=dict)
    read_only: bool | None = Field(default=None, alias="readOnly")
    destructive: bool | None = None
    call_id: str | None = Field(default=None, alias="callId", max_length=MAX_ID_CHARS)


LOOP_TOOLS = frozenset({"TodoWrite", "TodoRead", "AskUserQuestion", "EnterPlanMode"})
"""The service tools whose calls and answers run on the event loop (:func:`on_loop`): they
read the session, decide and append, and nothing else. Every other tool's call and answer
runs in a worker thread: it may wait for a port or write a file (the module's docstring)."""


def _answers_on_loop(service: SessionService, session_id: str, interaction_id: str) -> bool:
    """Whether answering the interaction runs only a :data:`LOOP_TOOLS` tool. An interaction
    that is not the session's is refused before anything runs (either way); what a read
    raises is left to the answer itself, in a worker thread, to raise again."""
    try:
        interaction = service.ledger.interaction(interaction_id)
        if interaction is None or interaction.session_id != session_id:
            return True
        call = service.ledger.call(session_id, interaction.body["callId"])
    except Exception:  # answered by the call itself, in a worker thread
        return False
    return call is not None and call.body.get("tool") in LOOP_TOOLS


async def _run_tool_call(
    service: SessionService, session_id: str, body: ToolCallRequest
) -> JSONResponse:
    """A validated tool call run and answered (the route's body, and the hot path's)."""
    run = on_loop if body.tool in LOOP_TOOLS else run_in_threadpool
    answer = await run(service.tools.call, session_id, body.tool, body.input, call_id=body.call_id)
    return JSONAnswer(answer.document, status_code=answer.status_code)


TOOL_CALLS_PATH = "/v1/sessions/{session_id}/tool-calls"
_SESSION_ID = TypeAdapter(SessionIdPath)


class HotToolCalls:
    """``POST /v1/sessions/{id}/tool-calls`` without FastAPI's per-request machinery
    (issue 24, D193): the ASGI app of the route the app's router tries first.

    A request whose ``Content-Type`` is ``application/json``, whose session id the path
    parameter's type takes and whose body :func:`eventlog.loads_json` reads into a
    :class:`ToolCallRequest` is run by the FastAPI route's own code (:func:`_run_tool_call`).
    Anything else is handed, body and all, to the FastAPI route itself (``route``, which
    OpenAPI documents), so every refusal is the one it gives. Errors of the call pass to the
    app's handlers as the route's would; the middleware around the router runs for both.
    The route's dependency solving, body field and response wrapping cost ~60 µs a call."""

    def __init__(self, service: SessionService, route: APIRoute) -> None:
        self._service = service
        self._route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"], scope["endpoint"] = self._route, self._route.endpoint
        try:
            body = await Request(scope, receive).body()
        except ClientDisconnect:  # gone mid-body: the route answers that its own way too
            await self._route.handle(scope, receive, send)
            return
        parsed = self._parsed(scope, body)
        if parsed is None:
            await self._route.handle(scope, _replaying(body, receive), send)
            return
        session_id, call = parsed
        response = await _run_tool_call(self._service, session_id, call)
        await response(scope, receive, send)

    @staticmethod
    def _parsed(scope: Scope, body: bytes) -> tuple[str, ToolCallRequest] | None:
        kind = (header(scope, b"content-type") or "").partition(";")[0].strip().lower()
        if kind != "application/json":
            return None
        try:
            session_id = _SESSION_ID.validate_python(scope["path_params"]["session_id"])
            return session_id, ToolCallRequest.model_validate(loads_json(body))
        except (ValueError, TypeError, RecursionError):  # refused by the route, its way
            return None


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read given again first."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def hot_tool_calls(service: SessionService, routes: Sequence[BaseRoute]) -> Route:
    """The route answering tool calls by :class:`HotToolCalls`, for the front of the app's
    routes; ``routes`` holds the FastAPI route it hands the rest to."""
    (route,) = (r for r in routes if isinstance(r, APIRoute) and r.path == TOOL_CALLS_PATH
                and r.methods == {"POST"})
    return Route(TOOL_CALLS_PATH, HotToolCalls(service, route), methods=["POST"],
                 include_in_schema=False)


def tool_routes(service: SessionService) -> APIRouter:
    """The tool-call, answer and permission-check routes over ``service``."""
    router = api_router(tags=["tool calls"], responses=_TOOL_RESPONSES)

    @router.post(
        TOOL_CALLS_PATH, response_model=None,
        responses={200: {"model": CallDocument, "description": "completed or denied"},
                   202: {"model": PendingCall, "description": "waiting for the user"},
                   **TOO_LARGE},
    )
    async def call_tool(
        session_id: SessionIdPath, body: Annotated[ToolCallRequest, Body()]
    ) -> JSONResponse:
        """Run a tool call: 200 completed or denied, 202 pending on the user."""
        return await _run_tool_call(service, session_id, body)

    @router.get(
        "/v1/sessions/{session_id}/tool-calls/{call_id}", response_model=None,
        responses={200: {"model": CallDocument}},
    )
    async def get_call(session_id: SessionIdPath, call_id: CallIdPath) -> JSONResponse:
        """The call document as it is now (``pending`` until resolved)."""
        answer = await on_loop(service.tools.get, session_id, call_id)
        return JSONAnswer(answer.document, status_code=200)

    @router.post(
        "/v1/sessions/{session_id}/interactions/{interaction_id}/respond", response_model=None,
        responses={200: {"model": CompletedCall}, **TOO_LARGE},
    )
    async def respond(
        session_id: SessionIdPath, interaction_id: InteractionIdPath,
        body: Annotated[RespondRequest, Body()],
    ) -> dict[str, Any]:
        """Answer a waiting call; the completed call document."""
        run = (on_loop if _answers_on_loop(service, session_id, interaction_id)
               else run_in_threadpool)
        return await run(
            service.tools.respond, session_id, interaction_id, body.decision,
            input=body.input, feedback=body.feedback,
        )

    @router.post(
        "/v1/sessions/{session_id}/permission-check", response_model=None,
        responses={200: {"model": PermissionAnswer}, **TOO_LARGE},
    )
    async def permission_check(
        session_id: SessionIdPath, body: Annotated[PermissionCheckRequest, Body()]
    ) -> dict[str, Any]:
        """Decide allow / ask / deny for a host tool; recorded as an event."""
        return await on_loop(
            service.tools.permission_check,
            session_id, body.tool, body.input, read_only=body.read_only,
            destructive=body.destructive, call_id=body.call_id,
        )

    return router


# -- the turn-loop routes (TD-5, PM-5) ---------------------------------------------------------
#
# The turn loop over HTTP (docs/spec.md): messages, compaction, and preparing a model request.
#
# ``POST /v1/sessions/{id}/messages`` records one real message (201 with where it landed; with
# a ``messageId`` sent before, 200 with the original receipt and nothing appended, EG-6);
# ``POST /v1/sessions/{id}/compact`` records that the host compacted the context (200, same
# body); ``POST /v1/sessions/{id}/prepare-request`` decides the reminders for the next model
# request and records them (TD-5, PM-5, PM-10) — it is not idempotent: each call that returns
# reminders moves the counters. Bodies are strict: unknown fields, blank content or tool names
# and non-boolean flags are 422 ``invalid_input`` and append nothing; an unknown session is
# 404, a deleted one 410.

_TURN_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses({
        404: "no such session (`session_not_found`)",
        410: "the session was deleted (`session_deleted`)",
        422: "the body failed validation (`invalid_input`); nothing appended",
    }),
    **TOO_LARGE,
}
MAX_TOOLS = 1000
"""More tool names than any host offers in one request; a longer list is bad input."""


def _not_blank(value: str, name: str) -> str:
    if not value.strip():
        raise ValueError(f"'{name}' must not be blank")
    return value


class MessageRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/messages``: one real message of the conversation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    role: Literal["assistant", "user"]
    content: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS,
        description="the message text (not only whitespace)",
    )
    continuation: StrictBool = Field(
        default=False,
        description="true for an output-token continuation (not counted for the todo reminder)",
    )
    message_id: str | None = Field(
        default=None, alias="messageId", min_length=1, max_length=MAX_ID_CHARS,
        description="the host's id for the message; re-sending it appends nothing and "
        "answers the original receipt (200)",
    )

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        return _not_blank(value, "content")


class CompactRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/compact``: empty (``{}``) or no body at all."""

    model_config = ConfigDict(extra="forbid")


class PrepareRequest(BaseModel):
    """Body of ``POST /v1/sessions/{id}/prepare-request``."""

    model_config = ConfigDict(extra="forbid")

    tools: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        max_length=MAX_TOOLS, description="the tool names this model request offers"
    )
    continuation: StrictBool = Field(
        default=False,
        description="an output-token continuation: no todo reminder (Plan reminders still come)",
    )

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str]) -> list[str]:
        if any(not name.strip() for name in value):
            raise ValueError("tool names must not be blank")
        return value


class RecordedReceipt(BaseModel):
    """Where a recorded event landed: its ``seq`` and the session's version after it."""

    sessionId: str  # the wire names are camelCase
    seq: int
    version: int
    recordedAt: str


class ReminderOut(BaseModel):
    """One reminder to inject, in the order it goes into the request."""

    kind: Literal["todo_reminder", "runtime_mode", "plan_exit", "plan_file_reference"]
    variant: Literal["full", "sparse"] | None
    text: str


class RemindersResponse(BaseModel):
    """Answer of ``prepare-request``: the reminders, possibly none."""

    reminders: list[ReminderOut]


def turn_routes(service: SessionService) -> APIRouter:
    """The messages, compact and prepare-request routes over ``service.turns``."""
    router = api_router(tags=["turn loop"], responses=_TURN_RESPONSES)

    @router.post(
        "/v1/sessions/{session_id}/messages", status_code=201,
        response_model=RecordedReceipt,
        responses={200: {"model": RecordedReceipt,
                         "description": "the messageId was recorded before: the original "
                         "receipt, nothing appended"}},
    )
    async def record_message(
        session_id: SessionIdPath, body: Annotated[MessageRequest, Body()]
    ) -> JSONResponse:
        """Record a real message: 201 with its ``seq``, 200 for a ``messageId`` sent before.

        With a ``messageId`` already recorded in this session (also before a restart) nothing
        is appended and the answer is the original receipt, whatever the new role and content.
        """
        result = await on_loop(
            service.turns.message, session_id, body.role, body.content,
            continuation=body.continuation,
            message_id=body.message_id,
        )
        return JSONAnswer(receipt(result), status_code=200 if result.replayed else 201)

    @router.post("/v1/sessions/{session_id}/compact", response_model=RecordedReceipt)
    async def compact(
        session_id: SessionIdPath, body: Annotated[CompactRequest | None, Body()] = None
    ) -> dict[str, Any]:
        """Record a context compaction (``ContextCompacted``); 200 with its ``seq``."""
        return await on_loop(service.turns.compact, session_id)

    @router.post(
        "/v1/sessions/{session_id}/prepare-request", response_model=RemindersResponse
    )
    async def prepare_request(
        session_id: SessionIdPath, body: Annotated[PrepareRequest, Body()]
    ) -> dict[str, Any]:
        """Decide and record this model request's reminders, in injection order."""
        reminders = await on_loop(
            service.turns.prepare_request, session_id, body.tools,
            continuation=body.continuation,
        )
        return {"reminders": [r.to_wire() for r in reminders]}

    return router


# -- the web client's page and static files ----------------------------------------------------
#
# The web client's routes (docs/web-client.md): the page, its static files, the event types.
#
# ``GET /`` answers the page, ``/static/…`` its JavaScript modules, CSS and icon from the
# package's :data:`~sessionledger.web.STATIC_DIR`, each with ``Cache-Control: no-cache`` (the
# browser revalidates with the ETag, so an upgraded server never runs with an old module) and an
# explicit content type. The page carries a Content-Security-Policy that allows only this
# origin's scripts, styles and connections and no inline script, so text that reaches the page
# from the log can never run even if it were inserted as HTML by mistake.
#
# ``GET /v1/event-types`` lists the catalog's event type names, and ``Undecodable`` (a stored
# event this build cannot decode, EG-1). A browser's ``EventSource``
# delivers an SSE event whose ``event:`` line names a type only to a listener registered for
# that name, so the page asks the server which names exist instead of keeping a copy that
# would drift when the catalog grows.

STATIC_PREFIX = "/static"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
_PAGE_HEADERS = {
    **_HEADERS, "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
}


class _ClientFiles(StaticFiles):
    """Static files with the page's headers and a content type that does not depend on the
    host's ``mimetypes`` tables (a module script served as ``text/plain`` would not run)."""

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        media_type = _MEDIA_TYPES.get(os.path.splitext(str(full_path))[1])
        if media_type is not None and response.status_code != 304:
            response.headers["content-type"] = media_type
        response.headers.update(_HEADERS)
        return response


# -- the hosts' hooks: Claude Code (CC-1 … CC-8), Codex CLI, Gemini CLI -----------------------

HOST_TAGS = {"claude-code": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


def hook_routes(service: SessionService, *, hook_writer: bool = False) -> APIRouter:
    """``POST /v1/hooks/claude-code``, ``/v1/hooks/codex`` and ``/v1/hooks/gemini``: one hook
    event as the host sends it (Claude Code's ``"type": "http"`` hook; the others' command
    hooks forward here), answered 200 with the hook's output (``{}`` when it has no opinion,
    an event it cannot read included, so a broken hook never stops the agent).
    ``hook_writer``: this is a hook's writer, which creates the sessions of a forwarding hook
    inside the root the hook names (``WORKSPACE_HEADER``), not its own."""
    router = api_router()
    recorder = Recorder(service)

    def add(host: str, path: str) -> None:
        def answered(body: bytes, named: str | None) -> HookAnswer:
            root = None if named is None else _hook_root(named)  # a path lookup: not on the loop
            if isinstance(root, str):  # the hook named a root that cannot be one
                return HookAnswer(NO_OPINION, root)
            return answer_hook(recorder if root is None else Recorder(service, root=root), body,
                               host=host)

        async def host_hook(request: Request) -> JSONResponse:
            body = await request.body()
            named = request.headers.get(WORKSPACE_HEADER) if hook_writer else None
            answer = await run_in_threadpool(answered, body, named)
            if answer.problem is None:
                return JSONResponse(answer.output)
            _log.warning("%s hook answered {}: %s", host, answer.problem)
            # a forwarding command hook prints it on stderr, as it would have recording itself
            return JSONResponse(answer.output, headers={PROBLEM_HEADER: quote(answer.problem)})

        host_hook.__doc__ = f"Record a {HOST_TAGS[host]} hook event and answer it."
        router.add_api_route(path, host_hook, methods=["POST"], response_model=None,
                             responses=TOO_LARGE, tags=[host],
                             name=f"{host.replace('-', '_')}_hook")

    for host, path in HOOK_PATHS.items():
        add(host, path)
    return router


def _hook_root(named: str) -> Path | str:
    """The workspace root a forwarding hook names (percent-encoded, as the hook's
    ``forward._quoted`` writes it), resolved; what is wrong with it, as text, if it is none."""
    path = Path(os.fsdecode(unquote_to_bytes(named)))
    if not path.is_absolute():
        return f"the hook named a workspace root that is not absolute: {str(path)!r}"
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop, a NUL byte
        return f"the hook's workspace root {str(path)!r} cannot be resolved: {exc}"


def web_routes() -> APIRouter:
    """``GET /`` and ``GET /v1/event-types``."""
    router = api_router(tags=["web client"])

    @router.get("/", response_class=FileResponse)
    def index() -> FileResponse:
        """The web client: sessions, mode, todos, questions with their countdown, plans."""
        return FileResponse(INDEX_FILE, media_type=_MEDIA_TYPES[".html"], headers=_PAGE_HEADERS)

    @router.get("/v1/event-types", response_model=None, responses={200: {"model": EventTypes}})
    def event_types() -> dict[str, Any]:
        """The event catalog's names and ``Undecodable``: the ``event:`` values streams send."""
        return {"eventTypes": [*CATALOG, UNDECODABLE]}

    return router


def install_web_client(app: FastAPI) -> None:
    """Add the page, its files under :data:`STATIC_PREFIX` and the event-types route."""
    app.include_router(web_routes())
    app.mount(STATIC_PREFIX, _ClientFiles(directory=STATIC_DIR), name="static")


# -- the session routes ------------------------------------------------------------------------
#
# The JSON endpoints for sessions (docs/spec.md): create, list, read, delete, page events, audit.
#
# Each route validates its input with pydantic or FastAPI's parameter parsing, calls one
# :class:`~sessionledger.service.sessions.SessionService` method and returns its document:
# creating and deleting on the event loop (:func:`on_loop`), the reads (a list, a page, an
# audit may be large) in worker threads, as the module's docstring says.
#
# A deleted session answers 410 ``session_deleted`` on its document, its stream and its
# commands; its events page and its audit stay readable until the session is purged.

_NOT_FOUND = "no such session (`session_not_found`)"
_DELETED = "the session was deleted (`session_deleted`)"
_INVALID = "a parameter or the body failed validation (`invalid_input`); nothing appended"


class CreateSessionRequest(BaseModel):
    """Body of ``POST /v1/sessions``; every field optional, unknown fields rejected."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    mode: RequestedMode | None = Field(
        default=None, description="permission mode; 'plan' means build with Plan on"
    )
    workspace: str | None = Field(
        default=None, max_length=4096, description="inside the server's workspace root"
    )
    parent_session_id: str | None = Field(
        default=None, alias="parentSessionId", max_length=256,
        description="the spawning session, for a subagent",
    )
    host: HostKind = Field(default="protocol", description="protocol, tui or headless")


def session_routes(service: SessionService) -> APIRouter:
    """Routes over ``service``; the router is built per app, so tests can run several."""
    router = api_router(tags=["sessions"])
    audit_turns: anyio.CapacityLimiter | None = None

    @router.get("/healthz", tags=["health"], response_model=None,
                responses={200: {"model": Health}})
    async def healthz() -> dict[str, Any]:
        """Liveness and readiness: the store answers."""
        return {"status": "ok", "headPosition": service.store.head_position()}

    @router.post(
        "/v1/sessions", status_code=201, response_model=None,
        responses={201: {"model": SessionDocument}, **error_responses({
            404: "the parent session does not exist (`session_not_found`)",
            410: "the parent session was deleted (`session_deleted`)",
            422: "a field failed validation (`invalid_input`), the workspace resolves "
                 "outside the server's root (`workspace_outside_root`), or its config.toml "
                 "cannot be used (`invalid_configuration`, naming the key); nothing appended",
        }), **TOO_LARGE},
    )
    async def create_session(
        body: Annotated[CreateSessionRequest | None, Body()] = None,
    ) -> dict[str, Any]:
        """Create a session: exactly one ``SessionCreated`` event; 201 with its document."""
        request = body or CreateSessionRequest()
        return await on_loop(
            service.create_session,
            mode=request.mode,
            workspace=request.workspace,
            parent_session_id=request.parent_session_id,
            host=request.host,
        )

    @router.get("/v1/sessions", response_model=None, responses={
        200: {"model": SessionList}, **error_responses({422: _INVALID})})
    def list_sessions(
        limit: Annotated[PlainInt, Query(
            description=f"page size, 1 to {MAX_SESSIONS_LIMIT}")] = DEFAULT_SESSIONS_LIMIT,
        cursor: Annotated[str | None, Query(
            max_length=32, description="the `next` of the page before")] = None,
        waiting: Annotated[bool, Query(
            description="only sessions with something waiting for a person")] = False,
    ) -> dict[str, Any]:
        """A page of the sessions not deleted, most recently updated first, named, with what
        waits in each; ``next`` is the cursor of the page after (null on the last)."""
        return service.list_sessions(limit=limit, cursor=cursor, waiting=waiting)

    @router.get(
        "/v1/sessions/{session_id}", response_model=None,
        responses={200: {"model": SessionDocument}, **error_responses(
            {404: _NOT_FOUND, 410: _DELETED, 422: _INVALID})},
    )
    def get_session(session_id: SessionIdPath) -> dict[str, Any]:
        """The session document: execution state, todos, pending interactions, version."""
        return service.document(session_id)

    @router.delete(
        "/v1/sessions/{session_id}", response_model=None,
        responses={200: {"model": DeletedSession}, **error_responses({
            404: _NOT_FOUND, 409: "the session kept changing under the request (`conflict`)",
            410: "the session was already deleted (`session_deleted`)", 422: _INVALID})},
    )
    async def delete_session(session_id: SessionIdPath) -> dict[str, Any]:
        """Delete a session: one ``SessionDeleted`` event; its routes then answer 410."""
        return await on_loop(service.delete_session, session_id)

    @router.get(
        "/v1/sessions/{session_id}/events", response_model=None,
        responses={200: {"model": EventsPage}, **error_responses(
            {404: _NOT_FOUND, 422: _INVALID})},
    )
    def get_events(
        session_id: SessionIdPath,
        after: Annotated[PlainInt, Query(description="return events with seq > after")] = 0,
        limit: Annotated[
            PlainInt, Query(description=f"page size, 1 to {MAX_EVENTS_LIMIT}")
        ] = DEFAULT_EVENTS_LIMIT,
    ) -> dict[str, Any]:
        """One page of the session's envelopes and its version (also once deleted)."""
        return service.events(session_id, after=after, limit=limit)

    @router.get(
        "/v1/sessions/{session_id}/timeline", response_model=None,
        responses={200: {"model": TimelinePage}, **error_responses(
            {404: _NOT_FOUND, 422: _INVALID})},
    )
    def get_timeline(
        session_id: SessionIdPath,
        before: Annotated[
            PlainInt | None, Query(description="the entries just before this seq")
        ] = None,
        after: Annotated[
            PlainInt | None, Query(description="the entries after this seq")
        ] = None,
        limit: Annotated[
            PlainInt, Query(description=f"window size, 1 to {MAX_TIMELINE_LIMIT}")
        ] = DEFAULT_TIMELINE_LIMIT,
    ) -> dict[str, Any]:
        """A window of one-line entries in seq order (the newest without before/after; also
        once deleted); ``hasEarlier`` says whether entries precede it."""
        return service.timeline(session_id, before=before, after=after, limit=limit)

    @router.get(
        "/v1/sessions/{session_id}/audit", response_model=None,
        responses={200: {"model": AuditDocument}, **error_responses(
            {404: _NOT_FOUND, 422: _INVALID})},
    )
    async def audit(session_id: SessionIdPath) -> dict[str, Any]:
        """Hash chain, undecodable events, projections against a fresh fold (also once deleted)."""
        nonlocal audit_turns
        if audit_turns is None:  # made on the server's loop, at its first audit
            audit_turns = anyio.CapacityLimiter(AUDITS_AT_ONCE)
        # The audits beyond AUDITS_AT_ONCE wait here, on the loop, not in pool threads that
        # every other route needs (the service's own bound then never waits).
        answer: dict[str, Any] = await anyio.to_thread.run_sync(
            service.audit, session_id, limiter=audit_turns)
        return answer

    return router
