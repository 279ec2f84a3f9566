"""Resources, subscriptions, list-changed notices and prompts of the MCP server (issue 21).

**Resources.** A ledger session reads as four resources, built by the service's own reads
(the documents of the HTTP routes):

* ``sessionledger://sessions/{sessionId}/state`` — the session document of
  ``GET /v1/sessions/{id}`` (mode, Plan switch, goal, todos, pending interactions), JSON;
* ``…/todos`` — the todo list as JSON (``TodoRead``'s list) and as a markdown checklist;
* ``…/plan`` — the last approved plan, markdown; listed only once a plan was approved, and
  reading it before is "resource not found";
* ``…/events`` — the last :data:`EVENTS_SHOWN` events of ``GET /v1/sessions/{id}/events``.

``resources/list`` lists the connection's session (nothing before it has one);
``resources/templates/list`` gives the four URI templates. Any session the connection could
read with ReadSessionContext can be read by URI: the bound one and the live sessions of its
workspace (without a bound session: of the served workspace root). Anything else — an
unknown URI, a deleted session, another workspace's — is the spec's "resource not found":
JSON-RPC ``-32002`` on the handshake era, ``-32602`` (``INVALID_PARAMS``) on 2026-07-28, which
retired ``-32002``; ``data`` names the URI either way.

**Subscriptions.** On the handshake era ``resources/subscribe`` registers the URI for the
connection, and ``notifications/resources/updated`` follows each change of it; the
subscriptions end with the connection (its exit stack) or ``resources/unsubscribe``. On
2026-07-28 ``subscriptions/listen`` (the SDK's :class:`~mcp.server.subscriptions.ListenHandler`
over an in-memory bus) carries the same notices for the URIs a stream asked for. Either way
:class:`ChangeWatcher` finds the changes: the store's commit notice
(:meth:`Ledger.on_commit <sessionledger.ledger.Ledger.on_commit>`: every append of this
process, whichever face made it, and other processes' on PostgreSQL) wakes it at once, and a
slow poll of the watched sessions' versions (``change_poll_s``) finds appends of other
processes on the same SQLite file. It reads the events after the last version it looked at:
every event changes ``state`` (its version) and ``events``, a ``TodosWritten`` changes
``todos``, a ``PlanApproved`` ``plan``, a ``SessionDeleted`` all four.

**List changes.** A connection's tool list depends on its session (a subagent has no Plan
tools) and on the workspace's ``[features] dynamicWorkflows`` (ListModels), read again at
each call; its resource list grows a ``plan`` once one is approved. After each tool call
the listings are computed again and compared with the last ones that connection (or, on a
2026-07-28 request, which has no lasting connection, the session the call named) was given;
a difference is ``notifications/tools/list_changed`` /
``notifications/resources/list_changed`` — on the call's own response stream on the
handshake era, on the listen streams on 2026-07-28.

**Prompts.** ``plan`` (argument ``task``) asks the agent to plan the task in Plan mode with
EnterPlanMode and ExitPlanMode, in the words EnterPlanMode itself answers; ``continue-session``
(argument ``sessionId``) gives another session's continuation handoff as ReadSessionContext
frames it (background, not instructions) and asks the agent to continue that work.
``completion/complete`` offers the readable sessions' ids for ``sessionId``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp.server import NotificationOptions, Server
from mcp.server.connection import Connection
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceListChangedNotification,
    ResourceTemplate,
    ResourceUpdatedNotification,
    ResourceUpdatedNotificationParams,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    TextContent,
    TextResourceContents,
    ToolListChangedNotification,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from eventlog import RecordedEvent
from projections import SessionSummary

from ..errors import SessionLedgerError
from ..logs import logger
from ..service.sessions import SessionService
from ..tools.plan import ENTER_GUIDANCE
from ..tools.plan_files import last_approved_plan
from ..tools.session_context import digest, frame, handoff_text
from .asking import Ctx, in_thread

__all__ = [
    "CHANGE_POLL_S",
    "EVENTS_SHOWN",
    "KINDS",
    "LISTED_HELD",
    "NOTIFICATIONS",
    "PROMPTS",
    "RESOURCE_NOT_FOUND",
    "URI_PREFIX",
    "ChangeWatcher",
    "LedgerServer",
    "McpFeatures",
    "SessionResources",
    "parse_uri",
    "resource_uri",
    "todos_markdown",
]

URI_PREFIX = "sessionledger://sessions/"
KINDS = ("state", "todos", "plan", "events")
"""The resources of a session, in listing order."""
EVENTS_SHOWN = 100
"""How many of the session's last events the ``events`` resource holds."""
RESOURCE_NOT_FOUND = -32002
"""The handshake era's "resource not found" (2026-07-28 answers ``INVALID_PARAMS``)."""
CHANGE_POLL_S = 2.0
"""How often watched sessions' versions are read for appends of other processes."""
LISTED_HELD = 4096
"""Sessions whose last listings are kept for 2026-07-28 requests (which have no lasting
connection to keep them on); the least recently used are forgotten."""
NOTIFICATIONS = NotificationOptions(tools_changed=True, resources_changed=True)
"""What the handshake era advertises: both lists change; the prompts do not."""
_log = logger.getChild("mcp")
_TOOLS_KEY = "sessionledger/listedTools"
_RESOURCES_KEY = "sessionledger/listedResources"

_DESCRIPTIONS = {
    "state": ("Session state", "application/json",
              "The session document (GET /v1/sessions/{id}): mode, Plan switch, goal, todos "
              "and pending interactions."),
    "todos": ("Todo list", "application/json",
              "The session's todo list, as JSON and as a markdown checklist."),
    "plan": ("Approved plan", "text/markdown", "The plan the user last approved."),
    "events": ("Recent events", "application/json",
               f"The session's last {EVENTS_SHOWN} events and its version."),
}


def resource_uri(session_id: str, kind: str) -> str:
    return f"{URI_PREFIX}{session_id}/{kind}"


def parse_uri(uri: str) -> tuple[str, str] | None:
    """``(sessionId, kind)`` of one of this server's resource URIs, else ``None``."""
    if not uri.startswith(URI_PREFIX):
        return None
    session_id, _, kind = uri[len(URI_PREFIX):].partition("/")
    if not session_id.startswith("sess_") or kind not in KINDS or "/" in session_id:
        return None
    return session_id, kind


def not_found(ctx: Ctx, uri: str, why: str) -> MCPError:
    """The era's resource-not-found error."""
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    return MCPError(code=INVALID_PARAMS if modern else RESOURCE_NOT_FOUND,
                    message=f"Resource not found: {uri} ({why})", data={"uri": uri})


def todos_markdown(todos: Sequence[dict[str, str]]) -> str:
    """The todo list as a markdown checklist."""
    if not todos:
        return "No todos.\n"
    marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
    return "".join(
        f"- {marks.get(t['status'], '[ ]')} {t['content']} ({t['status']}, "
        f"{t.get('priority', 'medium')})\n" for t in todos
    )


def _json(uri: str, document: Any) -> TextResourceContents:
    return TextResourceContents(uri=uri, mime_type="application/json",
                                text=json.dumps(document, ensure_ascii=False, indent=2))


class SessionResources:
    """The resources of one service's sessions: listing, reading, who may read what."""

    def __init__(self, service: SessionService) -> None:
        self._service = service

    def listed(self, session_id: str) -> list[Resource]:
        kinds = [k for k in KINDS if k != "plan" or self.plan(session_id) is not None]
        return [self._entry(session_id, kind) for kind in kinds]

    def uris(self, session_id: str) -> list[str]:
        return [r.uri for r in self.listed(session_id)]

    def _entry(self, session_id: str, kind: str) -> Resource:
        title, mime, description = _DESCRIPTIONS[kind]
        return Resource(uri=resource_uri(session_id, kind), name=kind,
                        title=f"{title} of {session_id}", mime_type=mime,
                        description=description)

    @staticmethod
    def templates() -> list[ResourceTemplate]:
        return [
            ResourceTemplate(uri_template=f"{URI_PREFIX}{{sessionId}}/{kind}", name=kind,
                             title=_DESCRIPTIONS[kind][0], mime_type=_DESCRIPTIONS[kind][1],
                             description=_DESCRIPTIONS[kind][2] + " Any live session of "
                             "this workspace.")
            for kind in KINDS
        ]

    def readable(self, bound: str | None, session_id: str) -> SessionSummary | str:
        """The session's summary if a connection bound to ``bound`` may read it, else why
        not: the rule of ReadSessionContext (live, the same workspace)."""
        other = self._service.find_summary(session_id)
        if other is None:
            return "no such session"
        if other.deleted:
            return "the session was deleted"
        if bound is not None and bound != session_id:
            mine = self._service.find_summary(bound)
            if mine is None or mine.workspace != other.workspace:
                return "the session belongs to another workspace"
        elif bound is None and not Path(other.workspace).is_relative_to(
                self._service.workspace_root):
            return "the session belongs to another workspace"
        return other

    def plan(self, session_id: str) -> str | None:
        return last_approved_plan(self._service.store.read_session(session_id))

    def read(self, session_id: str, kind: str) -> list[TextResourceContents] | None:
        """The contents (``None``: no approved plan yet)."""
        service = self._service
        uri = resource_uri(session_id, kind)
        if kind == "state":
            return [_json(uri, service.document(session_id))]
        if kind == "todos":
            todos = service.todos.wire(session_id)
            return [_json(uri, {"sessionId": session_id, "todos": todos}),
                    TextResourceContents(uri=uri, mime_type="text/markdown",
                                         text=todos_markdown(todos))]
        if kind == "plan":
            plan = self.plan(session_id)
            if plan is None:
                return None
            return [TextResourceContents(uri=uri, mime_type="text/markdown", text=plan)]
        version = service.store.version(session_id)
        return [_json(uri, service.events(
            session_id, after=max(0, version - EVENTS_SHOWN), limit=EVENTS_SHOWN))]


# -- watching for changes ----------------------------------------------------------------------

def changed_kinds(events: Sequence[RecordedEvent]) -> set[str]:
    """The resources a run of appended events changes."""
    if not events:
        return set()
    kinds = {"state", "events"}
    types = {e.type for e in events}
    if "TodosWritten" in types:
        kinds.add("todos")
    if "PlanApproved" in types:
        kinds.add("plan")
    if "SessionDeleted" in types:
        kinds.update(KINDS)
    return kinds


@dataclass(eq=False)
class _Subscriber:
    """One handshake-era connection's subscriptions."""

    session: ServerSession
    uris: set[str] = field(default_factory=set)


class ChangeWatcher:
    """Who watches which resource, and the loop that tells them when it changed."""

    def __init__(self, service: SessionService, *, poll_s: float = CHANGE_POLL_S) -> None:
        self._service = service
        self._poll_s = poll_s
        self.bus = InMemorySubscriptionBus()
        self._subscribers: dict[int, _Subscriber] = {}
        self._listened: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- counts (for the tests and the docs: nothing leaks) ----------------------------------

    @property
    def subscription_count(self) -> int:
        """Handshake-era subscriptions held, over all connections."""
        return sum(len(s.uris) for s in self._subscribers.values())

    @property
    def listened_count(self) -> int:
        """URIs asked for by open 2026-07-28 listen streams (with repeats)."""
        return sum(self._listened.values())

    def _watched_sessions(self) -> set[str]:
        uris = {u for s in self._subscribers.values() for u in s.uris} | set(self._listened)
        return {parsed[0] for parsed in map(parse_uri, uris) if parsed is not None}

    def _start_watching(self, session_id: str) -> None:
        """Remember the version a new watch starts from (in a worker thread)."""
        version = self._service.store.version(session_id)
        with self._lock:
            self._seen.setdefault(session_id, version)

    def _forget_unwatched(self) -> None:
        watched = self._watched_sessions()
        with self._lock:
            for session_id in [s for s in self._seen if s not in watched]:
                del self._seen[session_id]

    # -- the handshake era: resources/subscribe ---------------------------------------------

    async def subscribe(self, ctx: Ctx, uri: str, session_id: str) -> None:
        await in_thread(lambda: self._start_watching(session_id))
        connection = _connection_of(ctx)
        key = id(connection)
        subscriber = self._subscribers.get(key)
        if subscriber is None:
            subscriber = self._subscribers[key] = _Subscriber(ctx.session)
            connection.exit_stack.callback(self._drop, key)
        subscriber.uris.add(uri)

    def unsubscribe(self, ctx: Ctx, uri: str) -> None:
        subscriber = self._subscribers.get(id(_connection_of(ctx)))
        if subscriber is not None:
            subscriber.uris.discard(uri)
        self._forget_unwatched()

    def _drop(self, key: int) -> None:
        self._subscribers.pop(key, None)
        self._forget_unwatched()

    # -- 2026-07-28: subscriptions/listen ---------------------------------------------------

    @asynccontextmanager
    async def listening(self, uris: Sequence[str]) -> AsyncIterator[None]:
        """The URIs a listen stream asked for are watched while it is open."""
        ours = [u for u in uris if parse_uri(u) is not None]
        for uri in ours:
            parsed = parse_uri(uri)
            assert parsed is not None
            await in_thread(partial(self._start_watching, parsed[0]))
            self._listened[uri] = self._listened.get(uri, 0) + 1
        try:
            yield
        finally:
            for uri in ours:
                left = self._listened.get(uri, 0) - 1
                if left > 0:
                    self._listened[uri] = left
                else:
                    self._listened.pop(uri, None)
            self._forget_unwatched()

    # -- the loop ---------------------------------------------------------------------------

    def _on_commit(self, events: Sequence[RecordedEvent]) -> None:
        # on the committing thread: only schedule a wake, and none for sessions nobody watches
        # (``_changes`` tells nothing of a session not in ``_seen``; a watch that starts as this
        # commit lands reads its version after it, or the next mark or poll finds it)
        loop = self._loop
        seen = self._seen
        if loop is None or not seen:
            return
        sessions = {e.session_id for e in events if e.session_id in seen}
        if not sessions:
            return
        try:
            loop.call_soon_threadsafe(self._mark, sessions)
        except RuntimeError:  # the loop closed during shutdown
            pass

    def _mark(self, sessions: set[str]) -> None:
        self._dirty |= sessions
        if self._wake is not None:
            self._wake.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Watch while the server runs (the server's lifespan)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        unsubscribe = self._service.ledger.on_commit(self._on_commit)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._run)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            unsubscribe()
            self._loop = None

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            with anyio.move_on_after(self._poll_s) as waited:
                await wake.wait()
            wake.clear()
            watched = self._watched_sessions()
            dirty = watched if waited.cancelled_caught else self._dirty & watched
            self._dirty.clear()
            for session_id in sorted(dirty):
                try:
                    kinds = await in_thread(partial(self._changes, session_id))
                    await self._tell(session_id, kinds)
                except Exception:  # a store fault or a broken client must not stop the loop
                    _log.exception("resource change notices of %s failed", session_id)

    def _changes(self, session_id: str) -> set[str]:
        """The resources of the session changed since the last look (a worker thread)."""
        service = self._service
        version = service.store.version(session_id)
        with self._lock:
            last = self._seen.get(session_id)
            if last is None or version <= last:
                return set()
            self._seen[session_id] = version
        events: list[RecordedEvent] = []
        while last < version:
            page = service.session_page(session_id, after=last, limit=500)
            if not page:
                break
            events.extend(page)
            last = page[-1].seq
        return changed_kinds(events)

    async def _tell(self, session_id: str, kinds: set[str]) -> None:
        uris = {resource_uri(session_id, kind) for kind in kinds}
        for subscriber in list(self._subscribers.values()):
            for uri in sorted(subscriber.uris & uris):
                notice = ResourceUpdatedNotification(
                    params=ResourceUpdatedNotificationParams(uri=uri))
                try:
                    await subscriber.session.send_notification(notice)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    break  # the connection is closing: its exit stack drops it
        for uri in sorted(uris & set(self._listened)):
            await self.bus.publish(ResourceUpdated(uri=uri))


def _connection_of(ctx: Ctx) -> Connection:
    """The request's connection. The SDK hands handlers a per-request
    :class:`ServerSession` and keeps its :class:`Connection` (its ``state`` and its
    ``exit_stack``, the only per-connection end hook) private; this is the one place that
    reaches it."""
    connection: Connection = ctx.session._connection
    return connection


# -- prompts -----------------------------------------------------------------------------------

_PLAN_STEPS = ENTER_GUIDANCE.split("In plan mode, you should:\n", 1)[1]
PROMPTS = (
    Prompt(name="plan", title="Plan a task",
           description="Plan the task in Plan mode and present the plan for approval "
                       "(EnterPlanMode, then ExitPlanMode).",
           arguments=[PromptArgument(name="task", description="What to plan.",
                                     required=True)]),
    Prompt(name="continue-session", title="Continue another session",
           description="Continue the work of another session of this workspace: its goal, "
                       "approved plan, todos and recent messages as a handoff.",
           arguments=[PromptArgument(name="sessionId", description="The session to "
                                     "continue (sess_…).", required=True)]),
)
_HANDOFF_BYTES = 6000 * 4


def plan_prompt(task: str) -> GetPromptResult:
    text = (
        f"{task}\n\n"
        "Plan this before changing anything. Call the EnterPlanMode tool first; then, in "
        f"plan mode:\n{_PLAN_STEPS}\n\n"
        "Present the whole plan, in markdown, by calling ExitPlanMode with it as `plan`: the "
        "user approves it there, or gives feedback to address before you call it again."
    )
    return GetPromptResult(
        description="Plan the task in Plan mode and ask for approval",
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


def continue_prompt(service: SessionService, other: SessionSummary) -> GetPromptResult:
    found = digest(service.iter_events(other.session_id))
    material, _ = handoff_text(other, found, _HANDOFF_BYTES)
    context = frame(other.session_id, "handoff", "local material", material)
    text = (
        f"{context}\n\nContinue the work of session {other.session_id} described above: pick "
        "up its approved plan and its unfinished todos (write them with TodoWrite first), and "
        "ask with AskUserQuestion where it left questions open."
    )
    return GetPromptResult(
        description=f"Continue session {other.session_id}",
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


# -- the server's features, wired --------------------------------------------------------------

Known = Callable[[Ctx], Awaitable[str | None]]
ListTools = Callable[[Ctx, PaginatedRequestParams | None], Awaitable[ListToolsResult]]
CallTool = Callable[[Ctx, CallToolRequestParams],
                    Awaitable[CallToolResult | InputRequiredResult]]
OfferedNow = Callable[[Ctx, CallToolResult | InputRequiredResult],
                      Awaitable[tuple[str, frozenset[str]] | None]]
"""The session a call's result names and the names of the tools it is offered now."""


class LedgerServer(Server[Any]):
    """The low-level server, advertising on the handshake era that its tool and resource
    lists change (the SDK's streamable-HTTP manager asks the server for its initialization
    options without passing any)."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NOTIFICATIONS, experimental_capabilities, extensions
        )


class McpFeatures:
    """Resources, subscriptions, list-changed notices and prompts for one :class:`LedgerMcp`.

    ``known`` answers the connection's ledger session without creating one (``None`` when
    it has none yet); the tool handlers are wrapped to learn what a connection was listed
    and to compare after each call.
    """

    def __init__(self, service: SessionService, known: Known, *,
                 poll_s: float = CHANGE_POLL_S) -> None:
        self._service = service
        self._known = known
        self.resources = SessionResources(service)
        self.watcher = ChangeWatcher(service, poll_s=poll_s)
        self._listen = ListenHandler(self.watcher.bus)
        self._listed: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()

    def handlers(self) -> dict[str, Any]:
        """The ``Server(...)`` keyword arguments of these features."""
        return {
            "on_list_resources": self._list_resources,
            "on_list_resource_templates": self._list_templates,
            "on_read_resource": self._read_resource,
            "on_subscriptions_listen": self._listen_stream,
            "on_list_prompts": self._list_prompts,
            "on_get_prompt": self._get_prompt,
            "on_completion": self._complete,
            "lifespan": self._lifespan,
        }

    def register(self, server: Server[Any]) -> None:
        """The handshake era's subscribe and unsubscribe (the SDK deprecates them as of
        2026-07-28; added directly so constructing the server warns nothing)."""
        server.add_request_handler("resources/subscribe", SubscribeRequestParams,
                                   self._subscribe)
        server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams,
                                   self._unsubscribe)

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with self.watcher.running():
            yield {}

    # -- resources --------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        session_id = await self._known(ctx)
        if session_id is None:
            return ListResourcesResult(resources=[])
        listed = await in_thread(lambda: self.resources.listed(session_id))
        self._remember(ctx, _RESOURCES_KEY, session_id, frozenset(r.uri for r in listed))
        return ListResourcesResult(resources=listed)

    async def _list_templates(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=self.resources.templates())

    async def _target(self, ctx: Ctx, uri: str) -> tuple[str, str]:
        parsed = parse_uri(uri)
        if parsed is None:
            raise not_found(ctx, uri, f"this server's resources are {URI_PREFIX}"
                                      "{sessionId}/" + "|".join(KINDS))
        bound = await self._known(ctx)
        readable = await in_thread(lambda: self.resources.readable(bound, parsed[0]))
        if isinstance(readable, str):
            raise not_found(ctx, uri, readable)
        return parsed

    async def _read_resource(
        self, ctx: Ctx, params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        session_id, kind = await self._target(ctx, uri)
        try:
            contents = await in_thread(lambda: self.resources.read(session_id, kind))
        except SessionLedgerError as exc:
            raise not_found(ctx, uri, exc.message) from exc
        if contents is None:
            raise not_found(ctx, uri, "no plan of this session was approved yet")
        return ReadResourceResult(contents=list(contents))

    async def _subscribe(self, ctx: Ctx, params: SubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        session_id, _ = await self._target(ctx, uri)
        await self.watcher.subscribe(ctx, uri, session_id)
        return EmptyResult()

    async def _unsubscribe(self, ctx: Ctx, params: UnsubscribeRequestParams) -> EmptyResult:
        self.watcher.unsubscribe(ctx, str(params.uri))
        return EmptyResult()

    async def _listen_stream(
        self, ctx: Ctx, params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        uris = list(params.notifications.resource_subscriptions or ())
        async with self.watcher.listening(uris):
            return await self._listen(ctx, params)

    # -- list changes -----------------------------------------------------------------------

    def _remember(self, ctx: Ctx, key: str, session_id: str | None,
                  listed: frozenset[str]) -> None:
        _connection_of(ctx).state[key] = listed
        if session_id is not None:
            self._listed[(key, session_id)] = listed
            self._listed.move_to_end((key, session_id))
            while len(self._listed) > LISTED_HELD:
                self._listed.popitem(last=False)

    def _changed(self, ctx: Ctx, key: str, session_id: str, now: frozenset[str]) -> bool:
        before = _connection_of(ctx).state.get(key)
        if before is None:
            before = self._listed.get((key, session_id))
        self._remember(ctx, key, session_id, now)
        return before is not None and before != now

    def listing_tools(self, list_tools: ListTools) -> ListTools:
        """``list_tools`` that remembers what the connection was given."""
        async def listed(ctx: Ctx, params: PaginatedRequestParams | None) -> ListToolsResult:
            result = await list_tools(ctx, params)
            session_id = await self._known(ctx)
            self._remember(ctx, _TOOLS_KEY, session_id, frozenset(t.name for t in result.tools))
            return result

        return listed

    def after_call(self, call_tool: CallTool, offered_now: OfferedNow) -> CallTool:
        """``call_tool``, then the list-changed notices the call's session now needs: the
        session the result names (a 2026-07-28 request over HTTP has no connection that
        knows it: the call names it in its arguments) and the tools it is offered now."""
        async def called(
            ctx: Ctx, params: CallToolRequestParams
        ) -> CallToolResult | InputRequiredResult:
            result = await call_tool(ctx, params)
            try:
                offered = await offered_now(ctx, result)
                if offered is not None:
                    await self._notice_changes(ctx, *offered)
            except SessionLedgerError:
                pass  # the session went away: the result says what happened
            return result

        return called

    async def _notice_changes(self, ctx: Ctx, session_id: str, tools: frozenset[str]) -> None:
        resources = frozenset(await in_thread(lambda: self.resources.uris(session_id)))
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if self._changed(ctx, _TOOLS_KEY, session_id, tools):
            if modern:
                await self.watcher.bus.publish(ToolsListChanged())
            else:
                await ctx.session.send_notification(
                    ToolListChangedNotification(), related_request_id=ctx.request_id)
        if self._changed(ctx, _RESOURCES_KEY, session_id, resources):
            if modern:
                await self.watcher.bus.publish(ResourcesListChanged())
            else:
                await ctx.session.send_notification(
                    ResourceListChangedNotification(), related_request_id=ctx.request_id)

    # -- prompts ----------------------------------------------------------------------------

    async def _list_prompts(
        self, ctx: Ctx, params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return ListPromptsResult(prompts=list(PROMPTS))

    async def _get_prompt(self, ctx: Ctx, params: GetPromptRequestParams) -> GetPromptResult:
        arguments = params.arguments or {}
        if params.name == "plan":
            task = arguments.get("task", "").strip()
            if not task:
                raise MCPError(INVALID_PARAMS, "the plan prompt needs its `task` argument: "
                                               "what to plan")
            return plan_prompt(task)
        if params.name == "continue-session":
            other_id = arguments.get("sessionId", "").strip()
            if not other_id:
                raise MCPError(INVALID_PARAMS, "the continue-session prompt needs its "
                                               "`sessionId` argument (sess_…)")
            bound = await self._known(ctx)
            if other_id == bound:
                raise MCPError(INVALID_PARAMS, f"{other_id} is this connection's own session; "
                                               "continue-session reads another one")
            readable = await in_thread(lambda: self.resources.readable(bound, other_id))
            if isinstance(readable, str):
                raise MCPError(INVALID_PARAMS, f"cannot continue session {other_id}: "
                                               f"{readable}")
            return await in_thread(lambda: continue_prompt(self._service, readable))
        names = ", ".join(p.name for p in PROMPTS)
        raise MCPError(INVALID_PARAMS, f"unknown prompt {params.name!r}; this server has {names}")

    async def _complete(self, ctx: Ctx, params: CompleteRequestParams) -> CompleteResult:
        if params.argument.name != "sessionId":
            return CompleteResult(completion=Completion(values=[]))
        bound = await self._known(ctx)
        prefix = params.argument.value

        def candidates() -> list[str]:
            found = []
            for summary in self._service.summaries():
                if summary.session_id == bound or not summary.session_id.startswith(prefix):
                    continue
                if not isinstance(self.resources.readable(bound, summary.session_id), str):
                    found.append(summary.session_id)
            return found

        values = await in_thread(candidates)
        return CompleteResult(completion=Completion(
            values=values[:100], total=len(values), has_more=len(values) > 100))
