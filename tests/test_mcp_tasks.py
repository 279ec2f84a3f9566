"""MCP Tasks (protocol 2025-11-25) for AskUserQuestion and ExitPlanMode (issue 21, D158).

The ``mcp`` SDK's own ``ClientSession`` on a 2025-11-25 handshake drives a real
``sessionledger mcp`` over stdio and a real ``sessionledger serve`` at ``/mcp``. The SDK has no
task client: the task-augmented ``tools/call`` goes through the session's raw request API (its
JSON-RPC dispatcher, since the session would validate the answer as a ``CallToolResult``), the
``tasks/*`` requests through ``send_request`` with the SDK's 2025-11-25 task types. A task is
created, seen waiting (``input_required``), answered through the respond endpoint after the
request (and the connection) that created it ended, and its result taken on a new connection
resumed on the same session; a task is cancelled; another session's task is not found.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession, stdio_client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_support import (
    PLAN,
    QUESTION,
    TODOS,
    Answers,
    NeverAnswers,
    abandon_when,
    server_params,
    text_of,
)
from server_support import ServerProcess, in_process_client, running_server

from sessionledger import SessionService
from sessionledger.mcp import SESSION_META
from sessionledger.mcp.tasks import RELATED_TASK, TASK_TTL_MS
from sessionledger.tools.ask import ALL_ANSWERED_PREFIX
from sessionledger.tools.plan import APPROVED_PREFIX

VERSION = "2025-11-25"
ANSWERED = {**QUESTION, "answers": {"Which database?": "Postgres"}}


@dataclass
class Tasks:
    """A 2025-11-25 client session and the raw requests it needs for tasks."""

    session: ClientSession
    dispatcher: JSONRPCDispatcher[Any]
    initialized: types.InitializeResult

    async def call_as_task(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A task-augmented ``tools/call``; its raw result."""
        return await self.dispatcher.send_raw_request(
            "tools/call", {"name": name, "arguments": arguments, "task": {"ttl": 60_000}},
            {"headers": {"mcp-protocol-version": VERSION}},
        )

    async def get(self, task_id: str) -> types.GetTaskResult:
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        return await self.session.send_request(request, types.GetTaskResult)

    async def result(self, task_id: str, timeout: float | None = None) -> types.CallToolResult:
        request = types.GetTaskPayloadRequest(
            params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self.session.send_request(request, types.CallToolResult, timeout)

    async def cancel(self, task_id: str) -> types.CancelTaskResult:
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        return await self.session.send_request(request, types.CancelTaskResult)

    async def list(self) -> types.ListTasksResult:
        return await self.session.send_request(types.ListTasksRequest(), types.ListTasksResult)


@asynccontextmanager
async def tasks_session(
    read: Any, write: Any, elicitation: ElicitationFnT | None = None
) -> AsyncIterator[Tasks]:
    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
    async with ClientSession(dispatcher=dispatcher, elicitation_callback=elicitation) as session:
        initialized = await session.initialize()
        assert initialized.protocol_version == VERSION
        yield Tasks(session, dispatcher, initialized)


@asynccontextmanager
async def over_http(url: str, elicitation: ElicitationFnT | None = None) -> AsyncIterator[Tasks]:
    async with streamable_http_client(url) as (read, write), \
            tasks_session(read, write, elicitation) as tasks:
        yield tasks


@asynccontextmanager
async def over_stdio(
    ledger: tuple[str, Path], *args: str, elicitation: ElicitationFnT | None = None
) -> AsyncIterator[Tasks]:
    async with stdio_client(server_params(*ledger, *args)) as (read, write), \
            tasks_session(read, write, elicitation) as tasks:
        yield tasks


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, Path]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    return f"sqlite:///{tmp_path / 'ledger.db'}", workspace


def created(raw: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The session, task id and task of a ``CreateTaskResult``."""
    task = raw["task"]
    return raw["_meta"][SESSION_META], task["taskId"], task


def respond_over_http(server: ServerProcess, session_id: str, body: dict[str, Any]) -> None:
    """Answer the session's one waiting interaction through the respond endpoint."""
    with server.client() as http:
        (waiting,) = http.get(f"/v1/sessions/{session_id}").json()["interactions"]
        response = http.post(
            f"/v1/sessions/{session_id}/interactions/{waiting['interactionId']}/respond",
            json=body,
        )
        assert response.status_code == 200, response.text


def events_of(db_url: str, workspace: Path, session_id: str) -> list[dict[str, Any]]:
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        return [{"type": e.type, **e.to_wire()["data"]} for e in service.iter_events(session_id)]
    finally:
        service.close()


def test_a_task_answered_after_its_request_ended_gives_its_answer_from_tasks_result(
    tmp_path: Path,
) -> None:  # AQ-4, issue 21 finding 8, acceptance 2 (third clause) and 5 (first sentence)
    with running_server(tmp_path) as server:
        url = f"{server.base_url}/mcp"
        seen: dict[str, Any] = {}

        async def create() -> None:
            async with over_http(url) as tasks:
                capabilities = tasks.initialized.capabilities.model_dump(
                    by_alias=True, exclude_none=True)
                assert capabilities["tasks"] == {
                    "list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
                listed = {t.name: t for t in (await tasks.session.list_tools()).tools}
                support = {n: t.execution.task_support if t.execution else None
                           for n, t in listed.items()}
                assert support["AskUserQuestion"] == support["ExitPlanMode"] == "optional"
                assert {support[n] for n in support if n not in (
                    "AskUserQuestion", "ExitPlanMode")} == {None}  # forbidden
                with anyio.fail_after(30):  # answers at once, nobody asked
                    raw = await tasks.call_as_task("AskUserQuestion", QUESTION)
                session_id, task_id, task = created(raw)
                assert task_id.startswith("call_") and task["status"] == "input_required"
                assert task["ttl"] == TASK_TTL_MS and task["pollInterval"] > 0
                assert "Waiting for the user" in raw["_meta"][
                    "io.modelcontextprotocol/model-immediate-response"]
                got = await tasks.get(task_id)
                assert (got.task_id, got.status) == (task_id, "input_required")
                assert got.created_at == task["createdAt"]
                assert [t.task_id for t in (await tasks.list()).tasks] == [task_id]
                seen.update(session=session_id, task=task_id)

        async def collect() -> None:
            async with over_http(f"{url}?session={seen['session']}") as tasks:
                assert (await tasks.get(seen["task"])).status == "completed"
                result = await tasks.result(seen["task"])
                assert text_of(result).startswith(
                    f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')
                assert not result.is_error
                assert result.structured_content["status"] == "completed"
                assert result.meta is not None
                assert result.meta[RELATED_TASK] == {"taskId": seen["task"]}
                assert result.meta[SESSION_META] == seen["session"]

        anyio.run(create)  # the creating request and its connection are gone
        respond_over_http(server, seen["session"], {"decision": "modify", "input": ANSWERED})
        anyio.run(collect)


def test_tasks_result_blocks_until_an_answer_arrives_from_elsewhere(tmp_path: Path) -> None:
    # issue 21 finding 8: tasks/result waits for the web page / respond endpoint
    with running_server(tmp_path) as server:
        url = f"{server.base_url}/mcp"

        async def scenario() -> None:
            async with over_http(url) as tasks:
                session_id, task_id, _task = created(
                    await tasks.call_as_task("AskUserQuestion", QUESTION))
                results: list[types.CallToolResult] = []

                async def wait() -> None:
                    results.append(await tasks.result(task_id))

                async with anyio.create_task_group() as group:
                    group.start_soon(wait)
                    assert (await tasks.get(task_id)).status == "input_required"
                    await anyio.to_thread.run_sync(lambda: respond_over_http(
                        server, session_id, {"decision": "modify", "input": ANSWERED}))
                    with anyio.fail_after(30):
                        while not results:
                            await anyio.sleep(0.05)
                (result,) = results
                assert text_of(result).startswith(ALL_ANSWERED_PREFIX)

        anyio.run(scenario)


def test_a_plan_approval_as_a_task_over_stdio_is_approved_through_respond(
    ledger: tuple[str, Path],
) -> None:  # PM-, issue 21 finding 8
    db_url, workspace = ledger
    seen: dict[str, Any] = {}

    async def create() -> None:
        async with over_stdio(ledger) as tasks:
            await tasks.session.call_tool("EnterPlanMode", {})
            session_id, task_id, task = created(await tasks.call_as_task("ExitPlanMode", PLAN))
            assert task["status"] == "input_required"
            seen.update(session=session_id, task=task_id)

    def approve() -> None:
        with in_process_client(workspace, store_url=db_url) as (http, _service):
            (waiting,) = http.get(f"/v1/sessions/{seen['session']}").json()["interactions"]
            response = http.post(
                f"/v1/sessions/{seen['session']}/interactions/{waiting['interactionId']}"
                "/respond", json={"decision": "approve"})
            assert response.status_code == 200, response.text

    async def collect() -> None:
        async with over_stdio(ledger, "--session", seen["session"]) as tasks:
            result = await tasks.result(seen["task"])
            assert text_of(result).startswith(APPROVED_PREFIX) and not result.is_error
            assert (await tasks.get(seen["task"])).status == "completed"

    anyio.run(create)
    approve()
    anyio.run(collect)
    decisions = [e["decision"] for e in events_of(db_url, workspace, seen["session"])
                 if e["type"] == "InteractionResolved"]
    assert decisions == ["approve"]


def test_tasks_result_asks_the_user_through_the_form_tagged_with_its_task(
    ledger: tuple[str, Path],
) -> None:  # AQ-4, issue 21 finding 8
    answers = Answers(("accept", {"q1": "Postgres"}))

    async def scenario() -> None:
        async with over_stdio(ledger, elicitation=answers) as tasks:
            _session, task_id, task = created(
                await tasks.call_as_task("AskUserQuestion", QUESTION))
            assert task["status"] == "input_required" and answers.asked == []
            result = await tasks.result(task_id)
            assert text_of(result).startswith(
                f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')
            (asked,) = answers.asked
            assert asked.meta is not None and asked.meta[RELATED_TASK] == {"taskId": task_id}
            assert (await tasks.get(task_id)).status == "completed"

    anyio.run(scenario)


def test_a_task_outlives_a_tasks_result_the_client_gave_up_on(
    ledger: tuple[str, Path],
) -> None:  # issue 21 finding 8, acceptance 2: a task outlives the requests about it
    db_url, workspace = ledger
    form = NeverAnswers()

    async def scenario() -> None:
        async with over_stdio(ledger, elicitation=form) as tasks:
            session_id, task_id, _task = created(
                await tasks.call_as_task("AskUserQuestion", QUESTION))
            # The client gives up on its request (as its own timeout would) once the form is
            # open.
            await abandon_when(lambda: tasks.result(task_id), lambda: form.opened == 1)
            assert (await tasks.get(task_id)).status == "input_required"
            results: list[types.CallToolResult] = []

            async def wait() -> None:
                results.append(await tasks.result(task_id))

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                with anyio.fail_after(30):
                    while form.opened < 2:  # asked again, by the new tasks/result
                        await anyio.sleep(0.05)
                await anyio.to_thread.run_sync(lambda: respond_in_process(session_id))
            (result,) = results
            assert text_of(result).startswith(ALL_ANSWERED_PREFIX)

    def respond_in_process(session_id: str) -> None:
        with in_process_client(workspace, store_url=db_url) as (http, _service):
            (waiting,) = http.get(f"/v1/sessions/{session_id}").json()["interactions"]
            response = http.post(
                f"/v1/sessions/{session_id}/interactions/{waiting['interactionId']}/respond",
                json={"decision": "modify", "input": ANSWERED})
            assert response.status_code == 200, response.text

    anyio.run(scenario)
    assert (form.opened, form.withdrawn) == (2, 2)  # each form closed with its request


def test_a_failed_call_is_a_failed_task_with_the_same_error_result(
    ledger: tuple[str, Path],
) -> None:  # issue 21 finding 8: isError → failed
    async def scenario() -> None:
        async with over_stdio(ledger, "--host-kind", "headless") as tasks:
            _session, task_id, task = created(
                await tasks.call_as_task("AskUserQuestion", QUESTION))
            assert task["status"] == "failed"
            result = await tasks.result(task_id)
            plain = await tasks.session.call_tool("AskUserQuestion", QUESTION)
            assert result.is_error and text_of(result) == text_of(plain)

    anyio.run(scenario)


def test_cancelling_a_task_withdraws_its_interaction(tmp_path: Path) -> None:
    # issue 21 finding 8, acceptance 5: tasks/cancel records the cancellation
    with running_server(tmp_path) as server:
        url = f"{server.base_url}/mcp"
        seen: dict[str, Any] = {}

        async def scenario() -> None:
            async with over_http(url) as tasks:
                session_id, kept, _task = created(
                    await tasks.call_as_task("AskUserQuestion", QUESTION))
                _same, dropped, _task = created(
                    await tasks.call_as_task("AskUserQuestion", QUESTION))
                cancelled = await tasks.cancel(dropped)
                assert (cancelled.task_id, cancelled.status) == (dropped, "cancelled")
                assert (await tasks.get(dropped)).status == "cancelled"
                assert (await tasks.get(kept)).status == "input_required"
                with pytest.raises(MCPError) as again:
                    await tasks.cancel(dropped)
                assert again.value.code == types.INVALID_PARAMS
                assert "terminal" in again.value.message
                statuses = {t.task_id: t.status for t in (await tasks.list()).tasks}
                assert statuses == {kept: "input_required", dropped: "cancelled"}
                seen.update(session=session_id, dropped=dropped)

        anyio.run(scenario)
        with server.client() as http:
            document = http.get(f"/v1/sessions/{seen['session']}").json()
            assert seen["dropped"] not in [i["callId"] for i in document["interactions"]]
            call = http.get(f"/v1/sessions/{seen['session']}/tool-calls/{seen['dropped']}")
            assert call.json()["status"] == "cancelled", call.text
    resolved = [e for e in events_of(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path,
                                     seen["session"]) if e["type"] == "InteractionResolved"]
    assert [(e["callId"], e["decision"]) for e in resolved] == [(seen["dropped"], "withdrawn")]


def test_a_task_of_another_session_is_not_found(tmp_path: Path) -> None:
    # issue 21 finding 8: a task is bound to its ledger session
    with running_server(tmp_path) as server:
        url = f"{server.base_url}/mcp"

        async def scenario() -> None:
            async with over_http(url) as owner:
                _session, task_id, _task = created(
                    await owner.call_as_task("AskUserQuestion", QUESTION))
                async with over_http(url) as stranger:
                    await stranger.session.call_tool("TodoWrite", TODOS)  # its own session
                    for ask in (stranger.get, stranger.result, stranger.cancel):
                        with pytest.raises(MCPError) as refused:
                            await ask(task_id)
                        assert refused.value.code == types.INVALID_PARAMS
                    assert (await stranger.list()).tasks == []
                assert (await owner.get(task_id)).status == "input_required"

        anyio.run(scenario)
        assert "Traceback" not in server.log()  # refusals are JSON-RPC errors, not crashes


def test_task_augmentation_is_refused_where_it_is_not_offered(
    ledger: tuple[str, Path],
) -> None:  # issue 21 finding 8; bad input changes nothing
    db_url, workspace = ledger

    async def scenario() -> None:
        async with over_stdio(ledger) as tasks:
            with pytest.raises(MCPError) as forbidden:
                await tasks.call_as_task("TodoWrite", TODOS)
            assert forbidden.value.code == types.METHOD_NOT_FOUND
            with pytest.raises(MCPError) as bad:
                await tasks.call_as_task("AskUserQuestion", {"questions": []})
            assert bad.value.code == types.INVALID_PARAMS
            with pytest.raises(MCPError) as unknown:
                await tasks.get("call_NOSUCHTASK")
            assert unknown.value.code == types.INVALID_PARAMS
            written = await tasks.session.call_tool("TodoWrite", TODOS)
            assert written.meta is not None
            with pytest.raises(MCPError) as not_a_task:  # a call id, but not of a task tool
                await tasks.get(written.structured_content["callId"])
            assert not_a_task.value.code == types.INVALID_PARAMS
            with pytest.raises(MCPError) as cursor:
                await tasks.session.send_request(
                    types.ListTasksRequest(params=types.PaginatedRequestParams(cursor="x")),
                    types.ListTasksResult)
            assert cursor.value.code == types.INVALID_PARAMS
            return written.meta[SESSION_META]

    session_id: list[str] = []

    async def run() -> None:
        session_id.append(await scenario())

    anyio.run(run)
    types_seen = [e["type"] for e in events_of(db_url, workspace, session_id[0])]
    assert types_seen.count("ToolCallRequested") == 1  # the plain TodoWrite only


def test_a_2026_connection_has_no_tasks(ledger: tuple[str, Path]) -> None:
    # D158: 2026-07-28 moved tasks out of the core protocol
    async def scenario() -> None:
        async with Client(server_params(*ledger)) as client:
            capabilities = client.session.server_capabilities
            assert capabilities is not None and capabilities.tasks is None
            request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="call_X"))
            with pytest.raises(MCPError) as refused:
                await client.session.send_request(request, types.GetTaskResult)
            assert refused.value.code == types.METHOD_NOT_FOUND

    anyio.run(scenario)
