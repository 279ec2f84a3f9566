"""The MCP server: one MCP connection is one ledger session (issue 12).

:class:`LedgerMcp` builds a low-level ``mcp`` :class:`~mcp.server.Server` over a
:class:`~sessionledger.service.sessions.SessionService`. Every tool call goes through
:meth:`ToolService.call <sessionledger.tools.service.ToolService.call>` with the configured host
kind (``protocol`` by default), the same path as ``POST /v1/sessions/{id}/tool-calls``, so it
is recorded identically. A call that waits for the user (AskUserQuestion, ExitPlanMode in
Plan) is asked through MCP elicitation when the client declared that capability (one form
per questionnaire, :mod:`.forms`) and answered through :meth:`ToolService.respond`, the path of
``POST …/interactions/{iid}/respond``; otherwise it answers at once that it is pending and
``InteractionStatus`` reports the outcome later. The service is synchronous: calls run in
worker threads.

Here too, in their sections: which tools are offered over MCP and their descriptors (D119),
and how a call's answer becomes a result — the model's text plus the call document (D122).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final, cast, get_args

import anyio
import anyio.to_thread
from mcp.server import Server
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    InputRequiredResult,
    ListToolsResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    PaginatedRequestParams,
    SetLevelRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eventlog import HostKind
from projections import SessionSummary

from .. import __version__
from ..errors import InvalidInput, NotFound, SessionDeleted, SessionLedgerError, SessionNotFound
from ..permission.descriptors import ToolDescriptor
from ..service.sessions import SessionService
from ..tools.executor import check_input
from ..tools.registry import ToolRegistry
from .asking import (
    ANSWER_POLL_ENV,
    DEFAULT_ANSWER_POLL_S,
    DEFAULT_PROGRESS_S,
    DEFAULT_UNATTENDED_S,
    FORMS,
    MAX_PROGRESS_S,
    PROGRESS_ENV,
    UNATTENDED_ENV,
    Asking,
    Ctx,
    can_ask_in_rounds,
    can_elicit,
    env_seconds,
    in_thread,
)
from .early import EarlyWire, active
from .forms import Round, asking_round, returned_round
from .resources import CHANGE_POLL_S, LedgerServer, McpFeatures
from .tasks import TaskRequests, task_augmented

__all__ = [
    "CALLER_ARGUMENT",
    "CALL_DOCUMENT_SCHEMA",
    "DEFAULT_WEB_URL",
    "IDEMPOTENT",
    "INSTRUCTIONS",
    "INTERACTION_STATUS",
    "InteractionStatusInput",
    "LOGGER",
    "LedgerMcp",
    "MCP_TOOLS",
    "McpOptions",
    "SESSION_ARGUMENT",
    "SESSION_ID_PROPERTY",
    "SESSION_META",
    "TITLES",
    "call_result",
    "error_result",
    "handle_argument",
    "handle_line",
    "interaction_status_tool",
    "mcp_tool_entry",
    "offered_tools",
    "pending_text",
    "run_stdio",
    "session_page",
    "with_session_id",
]


# -- the tools offered over MCP (D119) ---------------------------------------------------------
#
# The tools an MCP client is offered: the session's surface, as MCP ``Tool`` entries.
#
# The MCP server offers the session tools of TR-1 that an agent can use without running
# prompts for the service — TodoRead, TodoWrite, AskUserQuestion, EnterPlanMode, ExitPlanMode,
# ReadSessionContext and ListModels (when the dynamic-workflow flag is on) — as far as the
# session's surface holds them (a subagent has no Plan tools), plus ``InteractionStatus``.
# Each entry's input schema and description are the ones the HTTP service gives the model
# (:meth:`ToolHandler.model_schema`, from the pydantic contracts); its annotations come from
# the tool's descriptor (``readOnlyHint``, ``destructiveHint``).

MCP_TOOLS = (
    "TodoRead", "TodoWrite", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode",
    "ReadSessionContext", "ListModels",
)
"""The session tools exposed over MCP, in listing order (the cron and off-peak tools are
left to hosts that run prompts, D119)."""
INTERACTION_STATUS = "InteractionStatus"


class InteractionStatusInput(BaseModel):
    """Input of ``InteractionStatus``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    interaction_id: str = Field(
        alias="interactionId", min_length=1, max_length=200,
        description="The id of a pending question or plan approval, as a pending call named it "
                    "(int_…).",
    )


_STATUS_DESCRIPTION = (
    "Check a question or plan approval that is waiting for the user. When AskUserQuestion or "
    "ExitPlanMode answers that it is pending (this client cannot ask the user itself), a person "
    "answers it elsewhere — on the sessionledger web page, for example. Call this with the "
    "interactionId it named: while it waits you are told so; once it is resolved you get the "
    "tool's result, exactly as if the call had just completed."
)


TITLES: Final[Mapping[str, str]] = {
    "TodoRead": "Read the todo list",
    "TodoWrite": "Write the todo list",
    "AskUserQuestion": "Ask the user a question",
    "EnterPlanMode": "Enter plan mode",
    "ExitPlanMode": "Present the plan for approval",
    "ReadSessionContext": "Read another session's context",
    "ListModels": "List the available models",
    INTERACTION_STATUS: "Check a waiting question or plan approval",
}
"""The human title of each tool (``title`` and ``annotations.title``)."""
IDEMPOTENT: Final = frozenset({
    "TodoRead", "TodoWrite", "ReadSessionContext", "ListModels", INTERACTION_STATUS,
})
"""The tools a repeated call of has no further effect: a whole-list TodoWrite writes the
same list again; the others only read."""
SESSION_ARGUMENT = "sessionId"
"""The optional argument naming the ledger session on a request without an MCP session."""
CALLER_ARGUMENT = "callerSessionId"
"""Its name in a tool whose own input has a ``sessionId`` (ReadSessionContext)."""
SESSION_ID_PROPERTY: Final[dict[str, Any]] = {
    "type": "string", "minLength": 1, "maxLength": 200,
    "description": "The ledger session of earlier results (their "
                   '_meta["sessionledger/sessionId"], or structuredContent.sessionId): pass it '
                   "to continue that session; omit it on the first call, which starts a new "
                   "one.",
}
"""The optional argument every session tool takes on a request with no MCP session (D156)."""

_NULL_OR = {"type": "null"}
CALL_DOCUMENT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "description": "The tool-call document, as POST /v1/sessions/{id}/tool-calls "
                   "answers it, with the ledger session it belongs to (and, while it waits "
                   "for the user, the web page where a person can answer it).",
    "properties": {
        "sessionId": {"type": "string", "description": "the ledger session of the call"},
        "callId": {"type": "string"},
        "status": {"enum": ["completed", "pending", "denied"]},
        "success": {"type": "boolean"},
        "result": {"description": "the tool's result object"},
        "modelContent": {"type": "string"},
        "turnControl": {"anyOf": [_NULL_OR, {
            "type": "object", "required": ["reason", "stopTurnAfterResult"],
            "properties": {"reason": {"type": "string"},
                           "stopTurnAfterResult": {"type": "boolean"}},
        }]},
        "followUpUserInput": {"anyOf": [_NULL_OR, {
            "type": "object", "required": ["input", "reasonSource"],
            "properties": {"input": {"type": "string"}, "reasonSource": {"type": "string"}},
        }]},
        "interactionId": {"type": "string"},
        "webUrl": {"type": "string"},
        "permission": {
            "type": "object", "required": ["behavior", "reason", "ruleId"],
            "properties": {"behavior": {"enum": ["allow", "ask", "deny"]},
                           "reason": {"type": "string"}, "ruleId": {"type": "string"}},
        },
    },
    "anyOf": [
        {"required": ["sessionId", "callId", "status"], "oneOf": [
            {"properties": {"status": {"const": "completed"}},
             "required": ["success", "result", "modelContent", "turnControl",
                          "followUpUserInput"]},
            {"properties": {"status": {"const": "pending"}},
             "required": ["interactionId", "webUrl"]},
            {"properties": {"status": {"const": "denied"}},
             "required": ["modelContent", "permission", "turnControl", "followUpUserInput"]},
        ]},
        {"required": ["error"], "properties": {"error": {
            "type": "object", "required": ["code", "message", "details"],
            "description": "a refused call (an isError result; the call was not recorded): the "
                           "error body the HTTP API answers with",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                           "details": {"type": ["object", "array", "null"]}},
        }}},
    ],
}
"""The ``outputSchema`` of every tool: its ``structuredContent`` is the call document, or the
error body of a call refused before it was recorded (a client that validates the structured
content of an error result, as the TypeScript SDK does, must find it allowed)."""


def _annotations(descriptor: ToolDescriptor) -> ToolAnnotations:
    name = descriptor.name
    return ToolAnnotations(
        title=TITLES.get(name, name), read_only_hint=descriptor.read_only,
        destructive_hint=descriptor.destructive,
        idempotent_hint=True if name in IDEMPOTENT else None, open_world_hint=False,
    )


def mcp_tool_entry(
    name: str, description: str, schema: dict[str, Any], descriptor: ToolDescriptor
) -> Tool:
    """One MCP tool entry: its input schema, title, annotations and output schema."""
    return Tool(
        name=name, title=TITLES.get(name), description=description, input_schema=schema,
        output_schema=CALL_DOCUMENT_SCHEMA, annotations=_annotations(descriptor),
    )


def interaction_status_tool() -> Tool:
    """The extra tool of the no-elicitation path: read-only, not destructive."""
    schema = InteractionStatusInput.model_json_schema(by_alias=True)
    descriptor = ToolDescriptor(name=INTERACTION_STATUS, kind="service", read_only=True)
    return mcp_tool_entry(INTERACTION_STATUS, _STATUS_DESCRIPTION, schema, descriptor)


def handle_argument(schema: Mapping[str, Any]) -> str:
    """The name of the session handle in a tool's input: ``sessionId``, or ``callerSessionId``
    for a tool whose own input has a ``sessionId`` (ReadSessionContext: the session to read)."""
    own = schema.get("properties", {})
    return CALLER_ARGUMENT if SESSION_ARGUMENT in own else SESSION_ARGUMENT


def with_session_id(tool: Tool) -> Tool:
    """The entry with the optional session handle argument of a request without an MCP
    session (D156)."""
    schema = dict(tool.input_schema)
    argument = handle_argument(schema)
    schema["properties"] = {**schema.get("properties", {}), argument: SESSION_ID_PROPERTY}
    return tool.model_copy(update={"input_schema": schema})


def offered_tools(
    registry: ToolRegistry, surface: list[str], *, session_handle: bool = False
) -> list[Tool]:
    """The MCP entries of the tools in ``surface``, then ``InteractionStatus``; with
    ``session_handle`` each takes the optional ``sessionId`` argument."""
    entries: list[Tool] = []
    for name in MCP_TOOLS:
        handler = registry.handler(name)
        if name in surface and handler is not None:
            entries.append(mcp_tool_entry(
                name, handler.description, handler.model_schema(), handler.descriptor
            ))
    tools = [*entries, interaction_status_tool()]
    return [with_session_id(t) for t in tools] if session_handle else tools


# -- a result: the model's text plus the call document (D122) ----------------------------------
#
# A tool-call document (the wire shape of docs/spec.md) as an MCP tool result.
#
# The text the model gets is the call's ``modelContent``; the structured result is the whole
# call document, as ``POST …/tool-calls`` answers it. A completed call that did not succeed, or
# a denied one, is an error result (``isError``). A pending call says so at once, naming the
# interaction and the web page where a person can answer it, and how to ask for the outcome
# (``InteractionStatus``).

def session_page(web_url: str, session_id: str) -> str:
    """The web client's page of the session."""
    return f"{web_url.rstrip('/')}/#/sessions/{session_id}"


def pending_text(interaction_id: str, page: str) -> str:
    """What the model is told about a call waiting for the user."""
    return (
        f"Waiting for the user: this call is pending as interaction {interaction_id}. "
        f"A person can answer it on the sessionledger web page {page} (served by "
        "`sessionledger serve`). Call InteractionStatus with "
        f'{{"interactionId": "{interaction_id}"}} to get the outcome once it is resolved; '
        "until then, do not assume an answer."
    )


def call_result(document: dict[str, Any], *, page: str) -> CallToolResult:
    """The MCP result of a call document (completed, denied or pending)."""
    if document["status"] == "pending":
        structured = {**document, "webUrl": page}
        text = pending_text(str(document["interactionId"]), page)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured,
        )
    ok = document["status"] == "completed" and document.get("success") is True
    return CallToolResult(
        content=[TextContent(type="text", text=str(document.get("modelContent", "")))],
        structured_content=document, is_error=not ok,
    )


def error_result(error: SessionLedgerError) -> CallToolResult:
    """A refused call (bad input, unknown tool, …): the message and the docs/spec.md error body."""
    return CallToolResult(
        content=[TextContent(type="text", text=error.message)],
        structured_content=error.to_wire(), is_error=True,
    )


# -- the server --------------------------------------------------------------------------------
#
# The MCP server: one MCP connection is one ledger session (issue 12).
#
# :class:`LedgerMcp` builds a low-level ``mcp`` :class:`~mcp.server.Server` over a
# :class:`~sessionledger.service.sessions.SessionService`. Every tool call goes through
# :meth:`ToolService.call <sessionledger.tools.service.ToolService.call>` with the configured host
# kind (``protocol`` by default), the same path as ``POST /v1/sessions/{id}/tool-calls``, so it
# is recorded identically. A call that waits for the user (AskUserQuestion, ExitPlanMode in
# Plan) is asked through MCP elicitation when the client declared that capability (one form
# per questionnaire, :mod:`.forms`) and answered through :meth:`ToolService.respond`, the path of
# ``POST …/interactions/{iid}/respond``; otherwise it answers at once that it is pending and
# ``InteractionStatus`` reports the outcome later. The service is synchronous: calls run in
# worker threads.

DEFAULT_WEB_URL = "http://127.0.0.1:8765/"
"""Where ``sessionledger serve`` answers by default: the web page named in pending results."""
SESSION_META = "sessionledger/sessionId"
"""The ``_meta`` key of every tool result that names its ledger session; a request may name
its session there too (D156)."""
LOGGER = "sessionledger"
"""The ``logger`` of the server's ``notifications/message``."""
_LOG_LEVELS: Final[tuple[LoggingLevel, ...]] = get_args(LoggingLevel)
_LOG_LEVEL_STATE = "sessionledger/logLevel"
"""Where a connection's ``logging/setLevel`` is kept (the SDK connection's own state)."""
_HOST_SESSION_STATE = "sessionledger/hostSession"
"""The session the connection's last call that named its host's session ran in (HTTP): what
a listing, a resource or a task of that connection reads, as ``_host_session`` on stdio."""
INSTRUCTIONS = (
    "Session tools recorded in the sessionledger event log: the todo list, questions to the "
    "user and plan approvals live in a ledger session, so they survive restarts and are "
    "audited. Every tool result names its session in _meta[\"sessionledger/sessionId\"] and "
    "structuredContent.sessionId. A connection keeps one session for its whole life (created "
    "at its first tool call, or the one `--session` or the URL's ?session= names). A request "
    "with no MCP session (the 2026-07-28 protocol over HTTP, without ?session=) has no "
    "connection to keep it: each tool then takes an optional `sessionId` argument (also read "
    "from the request's _meta[\"sessionledger/sessionId\"]; `callerSessionId` in "
    "ReadSessionContext, whose own `sessionId` is the session it reads) — pass the sessionId "
    "of earlier results to continue that session, and omit it on the first call, which "
    "starts a new one."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpOptions:
    """How MCP connections map to ledger sessions."""

    session_id: str | None = None
    """Resume this session; else each connection gets a new one."""
    host: HostKind = "protocol"
    web_url: str | None = None
    """Where the web page is served; ``None``: the HTTP request's own base URL (the HTTP
    transport is mounted on ``serve``), else :data:`DEFAULT_WEB_URL`."""
    progress_interval_s: float = field(default_factory=lambda: env_seconds(
        PROGRESS_ENV, DEFAULT_PROGRESS_S, most=MAX_PROGRESS_S))
    """Seconds between progress notifications while a call waits for a person (D157)."""
    answer_poll_s: float = field(default_factory=lambda: env_seconds(
        ANSWER_POLL_ENV, DEFAULT_ANSWER_POLL_S))
    """Seconds between reads of a waiting call for an answer written by another process."""
    change_poll_s: float = CHANGE_POLL_S
    """How often subscribed sessions are checked for appends of other processes."""
    elicitation: bool = True
    """Ask through the client's forms (elicitation) where it offers them; ``False``: every
    question and plan approval waits as a pending call, for the web page or the respond route
    (a client that answers forms by itself, e.g. Codex's headless run)."""
    unattended_s: float = field(default_factory=lambda: env_seconds(
        UNATTENDED_ENV, DEFAULT_UNATTENDED_S))
    """A form declined sooner than this after it was sent was declined by no person: the call
    stays pending instead of being denied."""


class LedgerMcp:
    """The session tools over MCP for one service; one ledger session per connection (D156).

    A connection's session is created at its first tool call (listing creates none) and is
    held exactly as long as the connection: on stdio the process is the connection; over
    streamable HTTP each MCP session (the SDK's :class:`~mcp.server.connection.Connection`)
    is bound at its first call and unbound when it ends — DELETE, idle timeout, the manager
    stopping — through the connection's own ``exit_stack``. ``--session`` and
    ``/mcp?session=sess_…`` resume a session instead. A 2026-07-28 request over HTTP has no
    MCP session: without ``?session=`` its session is a handle, the ``sessionId`` argument.
    """

    def __init__(self, service: SessionService, options: McpOptions | None = None) -> None:
        self._service = service
        self._options = options or McpOptions()
        self._session_id = self._options.session_id
        self._host_session: str | None = None
        """The session the last call that named its host's session ran in (stdio: what a
        listing, a resource or a task of this process reads)."""
        self._bindings: dict[Connection, str] = {}
        self._lock = threading.Lock()
        self._asking = Asking(service, progress_interval_s=self._options.progress_interval_s,
                              answer_poll_s=self._options.answer_poll_s,
                              unattended_s=self._options.unattended_s)
        self._features = McpFeatures(service, self.known_session,
                                     poll_s=self._options.change_poll_s)

    @property
    def session_id(self) -> str | None:
        """The process's session (stdio): the resumed one, or the one its first call created."""
        return self._session_id

    @property
    def bound_connections(self) -> int:
        """How many open MCP connections hold a ledger session (over HTTP)."""
        return len(self._bindings)

    def resume(self) -> str | None:
        """The session ``--session`` names, checked live (404/410 otherwise); ``None``
        without one."""
        if self._options.session_id is not None:
            self._service.require_live(self._options.session_id)
        return self._options.session_id

    @property
    def features(self) -> McpFeatures:
        """Resources, subscriptions, list-changed notices and prompts (:mod:`.resources`)."""
        return self._features

    def server(self) -> Server[Any]:
        """The low-level MCP server with the tool, resource, prompt and task handlers."""
        features = self._features
        server = LedgerServer(
            "sessionledger", version=__version__, instructions=INSTRUCTIONS,
            on_list_tools=features.listing_tools(self._list_tools),
            on_call_tool=features.after_call(self._call_tool, self._offered_now),
            get_tool_input_schema=_no_param_headers,
            **features.handlers(),
        )
        features.register(server)
        # logging/setLevel (2025 era; deprecated in 2026-07-28, so registered this way)
        server.add_request_handler("logging/setLevel", SetLevelRequestParams, self._set_level)
        TaskRequests(  # 2025-11-25 tasks (D158)
            self._service, self._asking, bound=self._task_session,
            answer=lambda ctx, sid, doc: _tagged(call_result(doc, page=self._page(ctx, sid)), sid),
        ).install(server)
        return server

    async def known_session(self, ctx: Ctx) -> str | None:
        """The connection's ledger session if it has one already (none is created): what
        resources, prompts and tasks read."""
        return await in_thread(lambda: self._listed_session(ctx))

    # -- handlers --------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """The tools of the request's session, or of a new one if it has none yet: listing
        never binds and never creates a session."""
        registry = self._service.tools.executor.registry
        try:
            listed = self._listed_session(ctx)
            surface = await in_thread(lambda: self._surface(listed))
        except SessionLedgerError as exc:
            raise _rpc_error(exc) from None
        tools = offered_tools(registry, surface, session_handle=_is_handle(ctx))
        return ListToolsResult(tools=tools)

    async def _offered_now(
        self, _ctx: Ctx, result: CallToolResult | InputRequiredResult
    ) -> tuple[str, frozenset[str]] | None:
        """The session a call's result names and the names of the tools it is offered now
        (what a listing would show it); ``None`` for a call refused before it had one."""
        session_id = (result.meta or {}).get(SESSION_META)
        if not isinstance(session_id, str) or not session_id:
            return None
        registry = self._service.tools.executor.registry
        surface = await in_thread(lambda: self._surface(session_id))
        return session_id, frozenset(t.name for t in offered_tools(registry, surface))

    async def _call_tool(
        self, ctx: Ctx, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        if params.name != INTERACTION_STATUS and params.name not in MCP_TOOLS:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        arguments = dict(params.arguments or {})
        handle = _is_handle(ctx)
        session_id = ""
        try:
            named = _named_session(arguments, params, self._handle_argument(params.name)) \
                if handle else None
            returned = returned_round(params)
            handler = self._service.tools.executor.registry.handler(params.name)
            if handler is not None and returned is None:  # refused before a session is made
                try:
                    check_input(handler, params.name, arguments)
                except SessionLedgerError:
                    session_id = named or await in_thread(
                        lambda: self._existing(ctx, host_session(params))) or ""
                    raise
            session_id = await self._bound(ctx, params.name, arguments, named, returned,
                                           hosted=host_session(params))
            if params.name == INTERACTION_STATUS:
                status = await self._status(ctx, session_id, arguments)
                return _tagged(status, session_id, handle=handle)
            form = FORMS[params.name](arguments) if params.name in FORMS else None
            if returned is not None and form is not None:
                answered = await self._asking.answer_round(session_id, form, returned)
                if isinstance(answered, InputRequiredResult):  # an empty form, asked again
                    return _round_tagged(answered, session_id)
                document = answered
            else:
                document = await self._call(session_id, params.name, arguments)
            if document["status"] == "pending" and form is not None and returned is None \
                    and not task_augmented(ctx, params):  # a task answers at once (D158)
                if not self._options.elicitation:
                    pass  # it waits, pending, for the web page or the respond route
                elif can_elicit(ctx):
                    document = await self._asking.elicit(
                        ctx, session_id, form, document, page=self._page(ctx, session_id)
                    )
                elif can_ask_in_rounds(ctx):
                    return _round_tagged(asking_round(form, document), session_id)
        except SessionLedgerError as exc:
            await _log(ctx, "warning", {
                "event": "call refused", "tool": params.name, "sessionId": session_id or None,
                "code": exc.code, "message": exc.message,
            })
            return _tagged(error_result(exc), session_id, handle=handle)
        page = self._page(ctx, session_id)
        return _tagged(call_result(document, page=page), session_id, handle=handle)

    def _handle_argument(self, tool: str) -> str:
        handler = self._service.tools.executor.registry.handler(tool)
        return handle_argument(handler.model_schema()) if handler is not None else \
            SESSION_ARGUMENT

    async def _set_level(self, ctx: Ctx, params: SetLevelRequestParams) -> EmptyResult:
        """``logging/setLevel``: this connection's log lines at or above ``level``."""
        connection = _connection_of(ctx)
        if connection is not None:
            connection.state[_LOG_LEVEL_STATE] = params.level
        return EmptyResult()

    # -- which session ---------------------------------------------------------------------

    def _existing(self, ctx: Ctx, hosted: tuple[str, str] | None) -> str | None:
        """The session a call would run in (:meth:`_bound`), if there is one already and it is
        not deleted (none is created): for a call naming its host's session, that session's;
        for another, the process's or the connection's own (not the last host session)."""
        if hosted is not None and self._options.session_id is None and _url_session(ctx) is None:
            from ..claude_code.observations import ledger_session_id

            client, external = hosted
            wanted = ledger_session_id(external, None, client)
            found = self._service.find_summary(wanted)
            return wanted if found is not None and not found.deleted else None
        try:
            return self._listed_session(ctx, follow_host=False)
        except SessionLedgerError:
            return None

    def _listed_session(self, ctx: Ctx, *, follow_host: bool = True) -> str | None:
        """The session whose tools a listing shows; ``None``: a session not created yet.
        ``follow_host``: the session of the last call that named its host's session, when
        there was one (else only the process's or the connection's own)."""
        if self._options.session_id is not None:
            return self._options.session_id
        if ctx.request is None:
            return (self._host_session if follow_host else None) or self._session_id
        wanted = _url_session(ctx)
        if wanted is not None:
            self._url_session_live(wanted)
            return wanted
        connection = _connection_of(ctx)
        if connection is None:
            return None
        hosted = connection.state.get(_HOST_SESSION_STATE) if follow_host else None
        return hosted if isinstance(hosted, str) else self._bindings.get(connection)

    async def _task_session(self, ctx: Ctx) -> str:
        """The session whose tasks a request sees (D158): the process's, the URL's or the
        connection's; a connection that has made no call has none, so no tasks."""
        found = await self.known_session(ctx)
        if found is None:
            raise NotFound("this connection has made no tool call yet, so it has no session "
                           "and no tasks")
        return found

    def _surface(self, session_id: str | None) -> list[str]:
        """The session's surface, or the surface a session created now would have (the
        workspace's configuration, the configured host)."""
        if session_id is not None:
            return self._service.tools.surface(session_id)
        return self._service.tools.executor.surface(SessionSummary(
            session_id="", version=0, last_position=0,
            workspace=str(self._service.workspace_root), host=self._options.host,
            parent_session_id=None, mode="build", plan_enabled=False, goal=None,
            created_at="", updated_at="",
        ))

    async def _bound(
        self, ctx: Ctx, tool: str, arguments: Mapping[str, Any], named: str | None,
        returned: Round | None, *, hosted: tuple[str, str] | None = None,
    ) -> str:
        """The session a call runs in: the one ``--session`` resumes, the one the URL or the
        call names, the host's own session the call names (``hosted``: its hooks' session),
        the process's (stdio), the connection's (bound at its first call), or on a request
        without an MCP session a new one."""
        if self._options.session_id is not None:
            return self._options.session_id
        if hosted is not None and named is None and _url_session(ctx) is None:
            found = await in_thread(lambda: self._hosts_session(*hosted))
            connection = _connection_of(ctx)
            if ctx.request is None:  # what the process's listings, resources and tasks read
                self._host_session = found
            elif connection is not None and not _is_handle(ctx):  # the connection's
                connection.state[_HOST_SESSION_STATE] = found
            return found
        if ctx.request is None:  # stdio (or in process): the process is the connection
            return await in_thread(self._process_session)
        wanted = _url_session(ctx)
        connection = _connection_of(ctx)
        if wanted is None and (_is_handle(ctx) or connection is None):
            found, created = await in_thread(
                lambda: self._handle_session(tool, arguments, named, returned))
            if created:
                await _log(ctx, "info", {"event": "session created", "sessionId": found})
            return found
        if wanted is not None:
            if connection is not None and self._bindings.get(connection) == wanted:
                return wanted
            await in_thread(lambda: self._url_session_live(wanted))
            if connection is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return wanted  # a request of its own: nothing to bind
        assert connection is not None
        found, new = await in_thread(lambda: self._connection_session(connection, wanted))
        if new:
            connection.exit_stack.callback(self._unbind, connection)
            event = "session created" if wanted is None else "session bound"
            await _log(ctx, "info", {"event": event, "sessionId": found})
        return found

    def _hosts_session(self, client: str, external: str) -> str:
        """The ledger session of the host's session ``external`` — the one its hooks record
        into (the same id, :func:`~sessionledger.claude_code.observations.ledger_session_id`),
        created here when this call comes first. A deleted one refuses the call, saying so."""
        from ..claude_code.observations import Origin, ledger_session_id
        from ..claude_code.recorder import Recorder

        found = Recorder(self._service).bind(Origin(
            session_id=external, client=client, cwd=str(self._service.workspace_root)))
        if found is None:  # deleted (require_live says so) or its workspace is gone
            wanted = ledger_session_id(external, None, client)
            self._service.require_live(wanted)
            raise NotFound(f"session {wanted} of {client} session {external!r} cannot be "
                           "created in this workspace")
        return found

    def _process_session(self) -> str:
        with self._lock:
            if self._session_id is None:
                self._session_id = self._create()
                print(f"sessionledger mcp: session {self._session_id} created (resume with "
                      f"--session {self._session_id})", file=sys.stderr, flush=True)
            return self._session_id

    def _connection_session(self, connection: Connection, wanted: str | None) -> tuple[str, bool]:
        """The connection's session (the URL's, checked live before, or a new one) and
        whether the connection was bound just now."""
        with self._lock:
            found = self._bindings.get(connection)
            if found is not None and wanted in (None, found):
                return found, False
            self._bindings[connection] = wanted if wanted is not None else self._create()
            return self._bindings[connection], found is None

    def _unbind(self, connection: Connection) -> None:
        """The connection ended: its binding goes with it (the session stays in the log)."""
        with self._lock:
            self._bindings.pop(connection, None)

    def _handle_session(
        self, tool: str, arguments: Mapping[str, Any], named: str | None, returned: Round | None,
    ) -> tuple[str, bool]:
        """A request without an MCP session: the session it names (live), the session of the
        interaction it answers or asks about, else a new one; and whether it was created."""
        if named is not None:
            self._service.require_live(named)
            return named, False
        asked = returned.interaction_id if returned is not None else (
            arguments.get("interactionId") if tool == INTERACTION_STATUS else None)
        if isinstance(asked, str):
            found = self._service.projections.interaction(self._service.store, asked)
            if found is not None:
                return found.session_id, False
            if returned is not None:
                raise InvalidInput("requestState does not name a waiting call")
        if tool == INTERACTION_STATUS:
            raise InvalidInput(
                f"InteractionStatus needs the {SESSION_ARGUMENT!r} of the call that named the "
                "interaction, or a known interactionId"
            )
        return self._create(), True

    def _create(self) -> str:
        return str(self._service.create_session(host=self._options.host)["sessionId"])

    def _url_session_live(self, wanted: str) -> None:
        """The session the URL names must be live: else a JSON-RPC error (-32602) naming it."""
        try:
            self._service.require_live(wanted)
        except (SessionNotFound, SessionDeleted) as exc:
            raise _rpc_error(exc, hint=(
                " (named by the URL's ?session=; connect to /mcp without it for a new session)"
            )) from None

    # -- steps -----------------------------------------------------------------------------

    async def _call(self, session_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            answer = self._service.tools.call(
                session_id, tool, arguments, host=self._options.host
            )
            return answer.document

        return await in_thread(call)

    async def _status(
        self, ctx: Ctx, session_id: str, arguments: dict[str, Any]
    ) -> CallToolResult:
        try:
            parsed = InteractionStatusInput.model_validate(arguments)
        except ValidationError as exc:
            raise InvalidInput(f"InteractionStatus input is invalid: {exc.errors()[0]['msg']}") \
                from exc

        def status() -> dict[str, Any]:
            service = self._service
            found = service.projections.interaction(service.store, parsed.interaction_id)
            if found is None or found.session_id != session_id:
                raise NotFound(
                    f"no interaction {parsed.interaction_id!r} in session {session_id!r}"
                )
            return service.tools.get(session_id, str(found.body["callId"])).document

        document = await in_thread(status)
        return call_result(document, page=self._page(ctx, session_id))

    def _page(self, ctx: Ctx, session_id: str) -> str:
        base = self._options.web_url or getattr(ctx.request, "base_url", None)
        return session_page(str(base or DEFAULT_WEB_URL), session_id)


def _no_param_headers(_name: str) -> Mapping[str, Any] | None:
    """No tool declares ``Mcp-Param-*`` headers: nothing to validate (without this the SDK
    lists the tools again for every 2026-07-28 call over HTTP to find out)."""
    return None


def _connection_of(ctx: Ctx) -> Connection | None:
    """The SDK connection the request arrived on (the request's ``ServerSession`` holds it;
    the SDK offers no public accessor on this context yet)."""
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


CODEX_TURN_META: Final = "x-codex-turn-metadata"
"""The ``_meta`` entry in which Codex CLI names the thread of each tool call: its
``session_id`` is the one Codex's hooks send."""
MAX_HOST_SESSION_ID = 512


def host_session(params: CallToolRequestParams) -> tuple[str, str] | None:
    """The host's own session a call names, as (client, id): Codex CLI sends its session
    with every ``tools/call`` (:data:`CODEX_TURN_META`); no other client does. ``None``
    without one, or for a value that is no id."""
    turn = (params.meta or {}).get(CODEX_TURN_META)
    value = turn.get("session_id") if isinstance(turn, Mapping) else None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_HOST_SESSION_ID \
            or not value.isprintable():
        return None
    return "codex", value


def _url_session(ctx: Ctx) -> str | None:
    """The ledger session the HTTP request's URL names (``/mcp?session=…``), if any."""
    query = getattr(ctx.request, "query_params", None)
    wanted = query.get("session") if query is not None else None
    return wanted if isinstance(wanted, str) else None


def _is_handle(ctx: Ctx) -> bool:
    """A request with no MCP session to hold a ledger session: 2026-07-28 over HTTP, without
    ``?session=`` (D156)."""
    return (ctx.request is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            and _url_session(ctx) is None)


def _named_session(
    arguments: dict[str, Any], params: CallToolRequestParams, argument: str
) -> str | None:
    """Take the session handle ``argument`` out of ``arguments`` (the tool never sees it),
    else read the request's ``_meta``; ``None`` when neither names one."""
    value = arguments.pop(argument, None)
    if value is None and params.meta is not None:
        value = params.meta.get(SESSION_META)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(
            f"{argument} must be the id of a session (sess_…), as earlier results name it; "
            "omit it to start a new session",
            details=[{"loc": ["input", argument], "message": "not a session id",
                      "type": "session_id"}],
        )
    return value


def _rpc_error(error: SessionLedgerError, *, hint: str = "") -> MCPError:
    """A JSON-RPC error for a refusal outside any call: -32602 for what the request got wrong
    (with the HTTP status it would have, 404 or 410), -32603 otherwise."""
    code = INVALID_PARAMS if error.status < 500 else INTERNAL_ERROR
    data = {**error.to_wire()["error"], "status": error.status}
    return MCPError(code=code, message=error.message + hint, data=data)


def handle_line(session_id: str) -> str:
    """The first line of a result's text on a request without an MCP session."""
    return (f"[sessionledger session {session_id}: pass "
            f'"{SESSION_ARGUMENT}": "{session_id}" to continue it]')


def _tagged(result: CallToolResult, session_id: str, *, handle: bool = False) -> CallToolResult:
    """The result naming its ledger session: in ``_meta`` and ``structuredContent.sessionId``
    (to resume it later), and on a request without an MCP session in the text's first line."""
    if not session_id:
        return result
    update: dict[str, Any] = {"meta": {**(result.meta or {}), SESSION_META: session_id}}
    if isinstance(result.structured_content, dict):
        update["structured_content"] = {**result.structured_content, "sessionId": session_id}
    if handle and result.content and isinstance(result.content[0], TextContent):
        first = result.content[0]
        text = f"{handle_line(session_id)}\n{first.text}"
        update["content"] = [first.model_copy(update={"text": text}), *result.content[1:]]
    return result.model_copy(update=update)


def _round_tagged(result: InputRequiredResult, session_id: str) -> InputRequiredResult:
    return result.model_copy(update={"meta": {**(result.meta or {}), SESSION_META: session_id}})


def _log_levels(ctx: Ctx) -> frozenset[LoggingLevel]:
    """The levels this request's log lines may be sent at: on a handshake-era connection
    those at or above its ``logging/setLevel`` (none before one), on 2026-07-28 the
    request's own opt-in."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return allowed_log_levels(ctx.protocol_version, ctx.meta)
    connection = _connection_of(ctx)
    level = connection.state.get(_LOG_LEVEL_STATE) if connection is not None else None
    if level not in _LOG_LEVELS:
        return frozenset()
    return frozenset(_LOG_LEVELS[_LOG_LEVELS.index(level):])


async def _log(ctx: Ctx, level: LoggingLevel, data: dict[str, Any]) -> None:
    """Tell the client a log line of the server's about this request (best effort)."""
    if level not in _log_levels(ctx):
        return
    notice = LoggingMessageNotification(
        params=LoggingMessageNotificationParams(level=level, data=data, logger=LOGGER))
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await ctx.session.send_notification(notice, related_request_id=ctx.request_id)


async def _serve_stdio(server: Server[Any]) -> None:
    early = active()
    if early is None:  # nothing answered early: the same wire, screening every line
        early = EarlyWire(None)
        early.start()
    # the wire was taken at start and the handshake may have been answered already (.early)
    streams = stdio_server(stdin=cast(Any, early.lines()), stdout=cast(Any, early))
    try:
        async with streams as (read_stream, write_stream):
            early.handed_over()
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        early.release()


def run_stdio(ledger: LedgerMcp) -> None:
    """Serve one MCP connection over standard input and output until the client leaves.

    A resumed session (``--session``) is checked and named on stderr at once; otherwise the
    session is created, and named there, at the first tool call. A client that goes away
    ends the server quietly (exit 0), whether it closed standard input or stopped reading.
    """
    resumed = ledger.resume()
    if resumed is not None:
        print(f"sessionledger mcp: session {resumed} (resume with --session {resumed})",
              file=sys.stderr, flush=True)
    try:
        anyio.run(_serve_stdio, ledger.server())
    except* (BrokenPipeError, ConnectionResetError):
        _stdout_gone()


def _stdout_gone() -> None:
    """The reader left: point standard output at the null device, so nothing written at exit
    fails on the broken pipe again."""
    with suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
