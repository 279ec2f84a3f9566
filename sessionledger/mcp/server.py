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

import sys
import threading
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eventlog import HostKind

from .. import __version__
from ..errors import InvalidInput, NotFound, SessionLedgerError
from ..permission.descriptors import ToolDescriptor
from ..service.sessions import SessionService
from ..tools.registry import PLAN_TOOLS, ToolRegistry
from .asking import FORMS, Asking, Ctx, can_ask_in_rounds, can_elicit, in_thread
from .forms import asking_round, returned_round
from .resources import CHANGE_POLL_S, LedgerServer, McpFeatures

__all__ = [
    "DEFAULT_WEB_URL",
    "INTERACTION_STATUS",
    "InteractionStatusInput",
    "LedgerMcp",
    "MCP_TOOLS",
    "McpOptions",
    "SESSION_META",
    "call_result",
    "error_result",
    "interaction_status_tool",
    "mcp_tool_entry",
    "offered_tools",
    "pending_text",
    "run_stdio",
    "session_page",
]


# -- the tools offered over MCP (D119) ---------------------------------------------------------
#
# The tools an MCP client is offered: the session's surface, as MCP ``Tool`` entries.
#
# The MCP server offers the session tools of SPEC TR-1 that an agent can use without running
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


def _annotations(descriptor: ToolDescriptor) -> ToolAnnotations:
    return ToolAnnotations(
        title=descriptor.name, read_only_hint=descriptor.read_only,
        destructive_hint=descriptor.destructive,
    )


def mcp_tool_entry(
    name: str, description: str, schema: dict[str, Any], descriptor: ToolDescriptor
) -> Tool:
    """One MCP tool entry."""
    return Tool(
        name=name, description=description, input_schema=schema,
        annotations=_annotations(descriptor),
    )


def interaction_status_tool() -> Tool:
    """The extra tool of the no-elicitation path: read-only, not destructive."""
    schema = InteractionStatusInput.model_json_schema(by_alias=True)
    descriptor = ToolDescriptor(name=INTERACTION_STATUS, kind="service", read_only=True)
    return mcp_tool_entry(INTERACTION_STATUS, _STATUS_DESCRIPTION, schema, descriptor)


def offered_tools(registry: ToolRegistry, surface: list[str]) -> list[Tool]:
    """The MCP entries of the tools in ``surface``, then ``InteractionStatus``."""
    entries: list[Tool] = []
    for name in MCP_TOOLS:
        handler = registry.handler(name)
        if name in surface and handler is not None:
            entries.append(mcp_tool_entry(
                name, handler.description, handler.model_schema(), handler.descriptor
            ))
    return [*entries, interaction_status_tool()]


# -- a result: the model's text plus the call document (D122) ----------------------------------
#
# A tool-call document (SPEC §11 wire shape) as an MCP tool result.
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
    """A refused call (bad input, unknown tool, …): the message and the SPEC §11 error body."""
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
"""The ``_meta`` key of every tool result that names the connection's ledger session."""
_SESSION_HEADER = "mcp-session-id"
_BINDINGS_HELD = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class McpOptions:
    """How MCP connections map to ledger sessions."""

    session_id: str | None = None
    """Resume this session; else each connection gets a new one."""
    host: HostKind = "protocol"
    web_url: str | None = None
    """Where the web page is served; ``None``: the HTTP request's own base URL (the HTTP
    transport is mounted on ``serve``), else :data:`DEFAULT_WEB_URL`."""
    change_poll_s: float = CHANGE_POLL_S
    """How often subscribed sessions are checked for appends of other processes."""


class LedgerMcp:
    """The session tools over MCP for one service; bound to one session per connection.

    On stdio the process is the connection: :meth:`bind` fixes its session. Over streamable
    HTTP each MCP session (its ``mcp-session-id``) gets its own ledger session at its first
    tool request, or resumes the one its URL names (``/mcp?session=sess_…``).
    """

    def __init__(self, service: SessionService, options: McpOptions | None = None) -> None:
        self._service = service
        self._options = options or McpOptions()
        self._session_id = self._options.session_id
        self._bindings: dict[str, str] = {}
        self._lock = threading.Lock()
        self._asking = Asking(service)
        self._features = McpFeatures(service, self.known_session,
                                     poll_s=self._options.change_poll_s)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def bind(self) -> str:
        """The connection's session: the resumed one (it must be live), else a new one."""
        if self._session_id is None:
            created = self._service.create_session(host=self._options.host)
            self._session_id = str(created["sessionId"])
        else:
            self._service.require_live(self._session_id)
        return self._session_id

    @property
    def features(self) -> McpFeatures:
        """Resources, subscriptions, list-changed notices and prompts (:mod:`.resources`)."""
        return self._features

    def server(self) -> Server[Any]:
        """The low-level MCP server with the tool, resource and prompt handlers."""
        features = self._features
        server = LedgerServer(
            "sessionledger", version=__version__,
            instructions=f"Session tools recorded in the sessionledger event log "
                         f"(session {self._session_id or 'created per connection'}).",
            on_list_tools=features.listing_tools(self._list_tools),
            on_call_tool=features.after_call(self._call_tool, self._list_tools),
            **features.handlers(),
        )
        features.register(server)
        return server

    async def known_session(self, ctx: Ctx) -> str | None:
        """The connection's ledger session if it has one already (none is created): what
        resources and prompts read."""
        if self._session_id is not None:
            return self._session_id
        key, wanted = _binding_of(ctx)
        if wanted is not None:
            return wanted
        with self._lock:
            return self._bindings.get(key) if key is not None else None

    # -- handlers --------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        registry = self._service.tools.executor.registry
        if self._session_id is None and _binding_of(ctx) == (None, None):
            # a sessionless request (2026-07-28 HTTP) names no session: the tools every
            # protocol session has; its calls are refused until the URL names one
            surface = [n for n in MCP_TOOLS if registry.always_offered(n) or n in PLAN_TOOLS]
            return ListToolsResult(tools=offered_tools(registry, surface))
        session_id = await self._bound(ctx)
        surface = await in_thread(lambda: self._service.tools.surface(session_id))
        return ListToolsResult(tools=offered_tools(registry, surface))

    async def _call_tool(
        self, ctx: Ctx, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        arguments = dict(params.arguments or {})
        session_id = ""
        try:
            session_id = await self._bound(ctx)
            if params.name == INTERACTION_STATUS:
                return await self._status(ctx, session_id, arguments)
            if params.name not in MCP_TOOLS:
                raise InvalidInput(f"unknown tool {params.name!r} for this session")
            form = FORMS[params.name](arguments) if params.name in FORMS else None
            returned = returned_round(params)
            if returned is not None and form is not None:
                document = await self._asking.answer_round(session_id, form, returned)
            else:
                document = await self._call(session_id, params.name, arguments)
            if document["status"] == "pending" and form is not None and returned is None:
                if can_elicit(ctx):
                    document = await self._asking.elicit(ctx, session_id, form, document)
                elif can_ask_in_rounds(ctx):
                    return asking_round(form, document)
        except SessionLedgerError as exc:
            return _tagged(error_result(exc), session_id)
        return _tagged(call_result(document, page=self._page(ctx, session_id)), session_id)

    # -- steps -----------------------------------------------------------------------------

    async def _bound(self, ctx: Ctx) -> str:
        if self._session_id is not None:
            return self._session_id
        key, wanted = _binding_of(ctx)
        if key is None and wanted is None:
            raise InvalidInput(
                "this request names no session: a 2026-07-28 client has no MCP session to "
                "bind one to; connect to /mcp?session=SESSION (create one with POST "
                "/v1/sessions), or negotiate a 2025 protocol version"
            )
        return await in_thread(lambda: self._connection_session(key, wanted))

    def _connection_session(self, key: str | None, wanted: str | None) -> str:
        """The ledger session of the HTTP transport's MCP session ``key``: the one the URL
        names (checked live), the one bound before, or a new one."""
        with self._lock:
            found = self._bindings.get(key) if key is not None else None
            if wanted is not None and found != wanted:
                self._service.require_live(wanted)
                found = wanted
            elif found is None:
                found = str(self._service.create_session(host=self._options.host)["sessionId"])
            if key is not None:
                if len(self._bindings) >= _BINDINGS_HELD:
                    self._bindings.pop(next(iter(self._bindings)))
                self._bindings[key] = found
            return found

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


def _binding_of(ctx: Ctx) -> tuple[str | None, str | None]:
    """The HTTP request's MCP session id and the ledger session its URL names, if any."""
    headers = getattr(ctx.request, "headers", None)
    query = getattr(ctx.request, "query_params", None)
    key = headers.get(_SESSION_HEADER) if headers is not None else None
    wanted = query.get("session") if query is not None else None
    return key, wanted


def _tagged(result: CallToolResult, session_id: str) -> CallToolResult:
    """The result with the ledger session named in its ``_meta`` (to resume it later)."""
    if not session_id:
        return result
    return result.model_copy(update={"meta": {SESSION_META: session_id}})


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(ledger: LedgerMcp) -> None:
    """Serve one MCP connection over standard input and output until the client leaves."""
    session_id = ledger.bind()
    print(f"sessionledger mcp: session {session_id} (resume with --session {session_id})",
          file=sys.stderr, flush=True)
    anyio.run(_serve_stdio, ledger.server())
