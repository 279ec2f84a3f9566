"""MCP Tasks (protocol 2025-11-25) for the calls that wait for a person (D158).

A 2025-11-25 client may augment a ``tools/call`` of AskUserQuestion or ExitPlanMode with
``params.task``: the call is recorded as any call is, and the request answers at once with a
``CreateTaskResult`` instead of waiting for the user. The task id is the ledger call id and a
task's state is read from the log, never held in memory, so a task outlives the request that
created it, the connection, and a restart of the server:

=====================================  ==========================================
the call in the log                    the task's status
=====================================  ==========================================
pending, its interaction waiting       ``input_required`` (call ``tasks/result``)
pending, the answer recorded, running  ``working``
completed and successful               ``completed``
completed unsuccessfully, or denied    ``failed`` (its result is an ``isError`` one)
cancelled (its interaction withdrawn)  ``cancelled``
=====================================  ==========================================

``tasks/get`` gives the task; ``tasks/result`` waits until it is terminal — asking the user
through the same form as a call without a task when the client can elicit (the elicitation
tagged with the task in ``_meta["io.modelcontextprotocol/related-task"]``), else waiting for
an answer given elsewhere (the web page, the respond endpoint, the auto-continue timer; woken
by the ledger's commit notice for the call, with the slow poll of a waiting call for another
process's answer, D157) — and returns the tool result exactly as a call without a task would.
A ``tasks/result`` that is cancelled (by the client, or by its HTTP connection dropping)
closes its form and leaves the task pending (a cancelled call without a task withdraws its
interaction, D157; a task outlives the requests about it). ``tasks/cancel`` withdraws the
call's interaction through :meth:`ToolService.withdraw`; ``tasks/list`` pages the tasks
of the connection's session. Every AskUserQuestion and ExitPlanMode call of the session is one
of its tasks (the log does not record whether the request asked for one), and a task of
another session is not found (-32602).

The SDK does not implement tasks: the ``tasks/*`` methods are registered as custom request
methods (the runner hands a method outside the spec surface to its registered handler), and a
server middleware (:meth:`TaskRequests.middleware`) does what a handler cannot — it declares
``capabilities.tasks`` in the initialize result and ``execution.taskSupport`` on the task
tools of a listing, refuses ``params.task`` on the other tools (-32601, as the spec says for a
tool whose task support is forbidden), and turns the result of a task-augmented call into its
``CreateTaskResult`` (the runner would validate a handler's ``tools/call`` result as a
``CallToolResult``; a middleware's own result is sent as it is).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    ElicitRequest,
    ElicitRequestedSchema,
    ElicitRequestFormParams,
    ElicitResult,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    GetTaskResult,
    ListTasksResult,
    PaginatedRequestParams,
    Task,
    TaskStatus,
)
from mcp_types import methods as wire_methods

from projections.tables import Doc

from ..errors import SessionLedgerError
from ..service.sessions import SessionService
from .asking import FORMS, Asking, Ctx, can_elicit, in_thread
from .forms import Form

__all__ = [
    "IMMEDIATE_RESPONSE",
    "POLL_INTERVAL_MS",
    "RELATED_TASK",
    "TASKS_CAPABILITY",
    "TASKS_VERSION",
    "TASK_TOOLS",
    "TASK_TTL_MS",
    "TaskRequests",
    "task_augmented",
    "task_of",
]

TASKS_VERSION = "2025-11-25"
"""The one protocol version with tasks in its core (2026-07-28 moved them to an extension)."""
TASK_TOOLS = frozenset(FORMS)
"""The tools that may run as a task (``execution.taskSupport: "optional"``): the ones that
wait for a person. Every other tool's task support is forbidden (absent)."""
TASKS_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
TASK_TTL_MS = 24 * 60 * 60 * 1000
"""The retention a task is given (24 h, whatever the request asks). The log keeps every call
for ever, so a task stays retrievable after its ttl too: nothing is deleted."""
POLL_INTERVAL_MS = 2000
"""The polling interval suggested to the requestor."""
LIST_PAGE = 100
"""Tasks per ``tasks/list`` page."""
_SESSION_META = "sessionledger/sessionId"
_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

Bound = Callable[[Ctx], Awaitable[str]]
"""The connection's ledger session, bound as a tool call binds it."""
Answer = Callable[[Ctx, str, dict[str, Any]], CallToolResult]
"""A call document as the tool result a call without a task gets (with its session named)."""


def task_augmented(ctx: Ctx, params: CallToolRequestParams) -> bool:
    """Whether ``tools/call`` runs as a task: it asks for one, on a 2025-11-25 connection, of a
    tool that supports it. Such a call answers as soon as it is recorded (nobody is asked)."""
    return (params.task is not None and ctx.protocol_version == TASKS_VERSION
            and params.name in TASK_TOOLS)


def _status(doc: Doc, interaction: Doc | None) -> tuple[TaskStatus, str, str]:
    """The task status of a call document, its message, and when it last changed."""
    body = doc.body
    updated = str(body.get("completedAt") or body["requestedAt"])
    resolution = body.get("resolution")
    decision = resolution.get("decision") if isinstance(resolution, dict) else None
    if doc.status == "cancelled" or decision == "withdrawn":
        when = interaction.body.get("resolvedAt") if interaction is not None else None
        return "cancelled", "The call was withdrawn: nobody waits for its answer.", \
            str(body.get("completedAt") or when or updated)
    if doc.status == "pending":
        if interaction is None or resolution is not None:
            when = interaction.body.get("resolvedAt") if interaction is not None else None
            return "working", "The answer is recorded; the call is completing.", \
                str(when or updated)
        return "input_required", (
            f"Waiting for the user on interaction {body['interactionId']}: call tasks/result "
            "to be asked, or answer it on the sessionledger web page."
        ), str(interaction.body.get("requestedAt") or updated)
    message = str(body.get("modelContent") or "")
    if doc.status == "completed" and body.get("success") is True:
        return "completed", message, updated
    return "failed", message, updated


def task_of(doc: Doc, interaction: Doc | None) -> Task:
    """The task of a call: its id is the call id, its state the log's."""
    status, message, updated = _status(doc, interaction)
    return Task(
        task_id=str(doc.body["callId"]), status=status, status_message=message,
        created_at=str(doc.body["requestedAt"]), last_updated_at=updated, ttl=TASK_TTL_MS,
        poll_interval=POLL_INTERVAL_MS,
    )


def _task_wire(task: Task) -> dict[str, Any]:
    return task.model_dump(by_alias=True, mode="json", exclude_none=True)


def _not_found(task_id: str) -> MCPError:
    return MCPError(
        code=INVALID_PARAMS,
        message=f"Failed to retrieve task: no task {task_id!r} in this connection's session",
    )


def _refused(error: SessionLedgerError) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=error.message, data=error.to_wire())


def _text(result: Mapping[str, Any]) -> str:
    blocks = result.get("content") or []
    return " ".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))


class _TaskSession(ServerSession):
    """The request's server session for the form ``tasks/result`` opens: its elicitation is
    tagged with the task it serves (the spec's related-task metadata), and :meth:`give_up`
    closes it as a client that fails to ask does. Everything else is the session's own."""

    def __init__(self, inner: ServerSession, task_id: str) -> None:
        self.__dict__.update(vars(inner))
        self._related_task = task_id
        self._given_up = anyio.Event()

    def give_up(self) -> None:
        """Close the open form (and any later one): the call is left pending, not withdrawn."""
        self._given_up.set()

    async def elicit_form(
        self, message: str, requested_schema: ElicitRequestedSchema,
        related_request_id: Any = None,
    ) -> ElicitResult:
        params = ElicitRequestFormParams.model_validate({
            "message": message, "requestedSchema": requested_schema,
            "_meta": {RELATED_TASK: {"taskId": self._related_task}},
        })
        answered: list[ElicitResult] = []

        async def ask(scope: anyio.CancelScope) -> None:
            answered.append(await self.send_request(
                ElicitRequest(params=params), ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=related_request_id),
            ))
            scope.cancel()

        async def given_up(scope: anyio.CancelScope) -> None:
            await self._given_up.wait()
            scope.cancel()  # the SDK tells the client its request is cancelled: the form closes

        async with anyio.create_task_group() as group:
            group.start_soon(ask, group.cancel_scope)
            group.start_soon(given_up, group.cancel_scope)
        if not answered:
            raise MCPError(code=INTERNAL_ERROR, message="tasks/result ended: the form is closed")
        return answered[0]


class TaskRequests:
    """The ``tasks/*`` methods and the task-augmented ``tools/call`` of one MCP server."""

    def __init__(
        self, service: SessionService, asking: Asking, *, bound: Bound, answer: Answer
    ) -> None:
        self._service = service
        self._asking = asking
        self._bound = bound
        self._answer = answer

    def install(self, server: Server[Any]) -> None:
        """Register the methods and the middleware on ``server``."""
        server.add_request_handler("tasks/get", GetTaskRequestParams, self._get)
        server.add_request_handler("tasks/result", GetTaskPayloadRequestParams, self._result)
        server.add_request_handler("tasks/cancel", CancelTaskRequestParams, self._cancel)
        server.add_request_handler("tasks/list", PaginatedRequestParams, self._list)
        server.middleware.append(self.middleware)

    # -- the middleware ----------------------------------------------------------------------

    async def middleware(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """Declare tasks where the protocol has them; run a task-augmented call as a task."""
        if ctx.method == "initialize":
            return _with_capability(await call_next(ctx))
        if ctx.protocol_version != TASKS_VERSION or ctx.request_id is None:
            return await call_next(ctx)
        if ctx.method == "tools/list":
            return _with_task_support(await call_next(ctx))
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping) \
                and params.get("task") is not None:
            return await self._create(ctx, call_next, params)
        return await call_next(ctx)

    async def _create(
        self, ctx: Ctx, call_next: CallNext, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        name = params.get("name")
        if name not in TASK_TOOLS:
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"tool {name!r} does not run as a task (its execution.taskSupport is "
                        "forbidden): call it without params.task",
            )
        result = await call_next(ctx)  # recorded; it answers at once (task_augmented)
        if not isinstance(result, dict):
            raise MCPError(code=INTERNAL_ERROR, message="the call gave no tool result")
        structured = result.get("structuredContent")
        meta = result.get("_meta")
        call_id = structured.get("callId") if isinstance(structured, dict) else None
        session_id = meta.get(_SESSION_META) if isinstance(meta, dict) else None
        if not isinstance(call_id, str) or not isinstance(session_id, str):
            # refused before anything was recorded (bad input, no session): no task exists
            raise MCPError(code=INVALID_PARAMS, message=_text(result), data=structured)
        task = await in_thread(lambda: self._task(session_id, call_id))
        created = CreateTaskResult(
            task=task, meta={_SESSION_META: session_id, IMMEDIATE_RESPONSE: _text(result)},
        )
        return created.model_dump(by_alias=True, mode="json", exclude_none=True)

    # -- the methods -------------------------------------------------------------------------

    async def _session(self, ctx: Ctx) -> str:
        if ctx.protocol_version != TASKS_VERSION:
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"tasks are served on protocol {TASKS_VERSION} connections only "
                        f"(this one speaks {ctx.protocol_version})",
            )
        try:
            return await self._bound(ctx)
        except SessionLedgerError as exc:
            raise _refused(exc) from exc

    async def _get(self, ctx: Ctx, params: GetTaskRequestParams) -> dict[str, Any]:
        session_id = await self._session(ctx)
        task = await in_thread(lambda: self._task(session_id, params.task_id))
        return GetTaskResult.model_validate(_task_wire(task)).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )

    async def _list(self, ctx: Ctx, params: PaginatedRequestParams) -> dict[str, Any]:
        session_id = await self._session(ctx)
        start = 0
        if params.cursor is not None:
            if not params.cursor.isdecimal():
                raise MCPError(code=INVALID_PARAMS, message="tasks/list: invalid cursor")
            start = int(params.cursor)
        tasks = await in_thread(lambda: self._tasks(session_id))
        if start > len(tasks):
            raise MCPError(code=INVALID_PARAMS, message="tasks/list: invalid cursor")
        page = tasks[start:start + LIST_PAGE]
        more = start + LIST_PAGE < len(tasks)
        listed = ListTasksResult(tasks=page, next_cursor=str(start + LIST_PAGE) if more else None)
        return listed.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _cancel(self, ctx: Ctx, params: CancelTaskRequestParams) -> dict[str, Any]:
        session_id = await self._session(ctx)
        task_id = params.task_id
        task = await in_thread(lambda: self._task(session_id, task_id))
        if task.status not in _TERMINAL:
            doc = await in_thread(lambda: self._doc(session_id, task_id))

            def withdraw() -> None:
                self._service.tools.withdraw(
                    session_id, str(doc.body["interactionId"]),
                    reason="the client cancelled the task (tasks/cancel)",
                )

            try:
                await in_thread(withdraw)
            except SessionLedgerError as exc:
                task = await in_thread(lambda: self._task(session_id, task_id))
                if task.status not in _TERMINAL:  # e.g. the answer is recorded, the call runs
                    raise _refused(exc) from exc
            else:
                task = await in_thread(lambda: self._task(session_id, task_id))
                if task.status == "cancelled":
                    return CancelTaskResult.model_validate(_task_wire(task)).model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Cannot cancel task: already in terminal status {task.status!r}",
        )

    async def _result(self, ctx: Ctx, params: GetTaskPayloadRequestParams) -> dict[str, Any]:
        session_id = await self._session(ctx)
        task_id = params.task_id
        await in_thread(lambda: self._task(session_id, task_id))
        document = await self._settled(ctx, session_id, task_id)
        result = self._answer(ctx, session_id, document)
        meta = {**(result.meta or {}), RELATED_TASK: {"taskId": task_id}}
        wire = result.model_copy(update={"meta": meta}).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        # shaped as the tools/call result it stands for
        return wire_methods.serialize_server_result("tools/call", TASKS_VERSION, wire)

    async def _settled(self, ctx: Ctx, session_id: str, call_id: str) -> dict[str, Any]:
        """The call's document once it is no longer pending: the user is asked once, if the
        client can elicit, and then the call is read again each time a commit for it rings
        (an answer in this process) or every ``answer_poll_s`` (another process), as a call
        without a task waits (:class:`~sessionledger.mcp.asking.Wakeups`)."""
        asked = False
        with self._asking.wakeups.watching(call_id) as waiter:
            while True:
                current = await in_thread(lambda: self._service.tools.get(session_id, call_id))
                document = current.document
                if document["status"] != "pending":
                    return document
                if not asked and _asks_by_form(ctx):
                    doc = await in_thread(lambda: self._doc(session_id, call_id))
                    if doc.body.get("resolution") is None:
                        # a dismissed form is not asked again: the answer may come elsewhere
                        asked = True
                        form = FORMS[str(doc.body["tool"])](dict(doc.body.get("input") or {}))
                        document = await self._ask(ctx, session_id, form, document)
                        if document["status"] != "pending":
                            return document
                        continue
                # woken by a commit for the call (this process), else read at the slow poll
                await waiter.wait(self._asking.answer_poll_s)

    async def _ask(
        self, ctx: Ctx, session_id: str, form: Form, pending: dict[str, Any]
    ) -> dict[str, Any]:
        """Ask the user through the form a call without a task opens (:meth:`Asking.elicit`).

        A cancelled call withdraws its interaction, but a task outlives the requests about
        it: when this ``tasks/result`` is cancelled (by the client, its timeout, or the
        connection ending) the form is closed as if the client had failed to ask — the call
        stays pending — and only then does the cancellation go on."""
        session = _TaskSession(ctx.session, str(pending["callId"]))
        tagged = dataclasses.replace(ctx, session=session)
        done: list[dict[str, Any]] = []
        finished = anyio.Event()

        async def ask() -> None:
            try:
                with anyio.CancelScope(shield=True):
                    done.append(await self._asking.elicit(tagged, session_id, form, pending))
            finally:
                finished.set()

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            try:
                await finished.wait()
            except anyio.get_cancelled_exc_class():
                session.give_up()
                raise
        return done[0]

    # -- reading the log ---------------------------------------------------------------------

    def _doc(self, session_id: str, task_id: str) -> Doc:
        """The call document of the session's task ``task_id``; -32602 if there is none."""
        try:
            doc = self._service.ledger.call(session_id, task_id)
        except SessionLedgerError as exc:
            raise _refused(exc) from exc
        if doc is None or doc.body.get("tool") not in TASK_TOOLS:
            raise _not_found(task_id)
        return doc

    def _interaction(self, doc: Doc) -> Doc | None:
        interaction_id = doc.body.get("interactionId")
        resolution = doc.body.get("resolution") or {}
        if doc.status not in ("pending", "cancelled") and resolution.get("decision") != "withdrawn":
            return None  # a finished call's times are its own
        return self._service.ledger.interaction(interaction_id) if interaction_id else None

    def _task(self, session_id: str, task_id: str) -> Task:
        doc = self._doc(session_id, task_id)
        return task_of(doc, self._interaction(doc))

    def _tasks(self, session_id: str) -> list[Task]:
        service = self._service
        docs: list[Doc] = service.store.read_view(
            lambda tx: service.projections.tool_calls.of_session(tx, session_id)
        )
        return [task_of(d, self._interaction(d)) for d in docs if d.body.get("tool") in TASK_TOOLS]


def _asks_by_form(ctx: Ctx) -> bool:
    """Whether ``tasks/result`` asks the user itself: a client that can be sent a form. (A
    client offering only URL elicitation is not sent to the web page by a task: the answer is
    awaited from there, or from anywhere.)"""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    form_capable = elicitation is not None and (
        elicitation.form is not None or elicitation.url is None)
    return form_capable and can_elicit(ctx)


def _with_capability(result: HandlerResult) -> HandlerResult:
    """The initialize result declaring tasks when the negotiated version has them."""
    if isinstance(result, dict) and result.get("protocolVersion") == TASKS_VERSION:
        capabilities = dict(result.get("capabilities") or {})
        capabilities["tasks"] = TASKS_CAPABILITY
        return {**result, "capabilities": capabilities}
    return result


_OPTIONAL: dict[str, Literal["optional"]] = {"taskSupport": "optional"}


def _with_task_support(result: HandlerResult) -> HandlerResult:
    """The tool listing with ``execution.taskSupport: "optional"`` on the task tools."""
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return result
    tools = [
        {**t, "execution": _OPTIONAL} if isinstance(t, dict) and t.get("name") in TASK_TOOLS
        else t
        for t in result["tools"]
    ]
    return {**result, "tools": tools}
