"""Resources, subscriptions, list-changed notices and prompts of the MCP server (issue 21).

Driven with the ``mcp`` SDK's own clients over stdio (``sessionledger mcp``) and over a real
``serve`` (``/mcp``), on the handshake era (``ClientSession`` with ``initialize``) and on
2026-07-28 (``mcp.Client``, ``subscriptions/listen``); one in-process server counts the
subscriptions a connection leaves behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp_support import PLAN, TODOS, Answers, serve_in_process
from mcp_support import server_params as installed_params
from server_support import running_server

from sessionledger.mcp import SESSION_META, LedgerMcp, McpOptions
from sessionledger.mcp.resources import URI_PREFIX, resource_uri
from sessionledger.service.sessions import SessionService

MODERN = "2026-07-28"
FLAG_ON = "[features]\ndynamicWorkflows = true\n"
OTHER_TODOS = {"todos": [{"content": "Port the parser", "status": "pending",
                          "priority": "high"}]}


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, Path]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    return f"sqlite:///{tmp_path / 'ledger.db'}", workspace


def server_params(db_url: str, workspace: Path, *args: str) -> StdioServerParameters:
    """The installed command, with this test's environment (the SDK's stdio client passes
    only a default environment, which would drop ``PYTHONPATH``)."""
    params = installed_params(db_url, workspace, *args)
    return params.model_copy(update={"env": dict(os.environ)})


class Notices:
    """A client's message handler keeping the server's notifications, with a wait."""

    def __init__(self) -> None:
        self.seen: list[types.ServerNotification] = []
        self._changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if not isinstance(message, Exception) and hasattr(message, "method"):
            self.seen.append(message)
            self._changed.set()
            self._changed = anyio.Event()

    def of(self, method: str, uri: str | None = None) -> list[Any]:
        return [n for n in self.seen if n.method == method
                and (uri is None or getattr(n.params, "uri", None) == uri)]

    async def until(self, method: str, count: int = 1, uri: str | None = None) -> None:
        with anyio.fail_after(30):
            while len(self.of(method, uri)) < count:
                await self._changed.wait()


@asynccontextmanager
async def stdio_session(
    ledger: tuple[str, Path], notices: Notices, elicitation: ElicitationFnT | None = None,
) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(server_params(*ledger)) as (read, write),
        ClientSession(read, write, message_handler=notices,
                      elicitation_callback=elicitation) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str, notices: Notices) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, message_handler=notices) as session,
    ):
        await session.initialize()
        yield session


async def subscribe(session: ClientSession, uri: str, *, off: bool = False) -> None:
    if off:
        request: Any = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
    else:
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    await session.send_request(request, types.EmptyResult)


def session_of(result: types.CallToolResult) -> str:
    assert result.meta is not None
    return str(result.meta[SESSION_META])


def texts(result: types.ReadResourceResult) -> dict[str, str]:
    return {c.mime_type or "": c.text for c in result.contents
            if isinstance(c, types.TextResourceContents)}


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


# -- resources ---------------------------------------------------------------------------------

def test_resources_list_and_read_the_session_on_the_handshake_era(  # issue 21 finding 8
    ledger: tuple[str, Path],
) -> None:
    approve = Answers(("accept", {"decision": "Approve"}))

    async def scenario() -> None:
        async with stdio_session(ledger, Notices(), approve) as client:
            sid = session_of(await client.call_tool("TodoWrite", TODOS))
            listed = {r.name: r for r in (await client.list_resources()).resources}
            assert set(listed) == {"state", "todos", "events"}  # no plan approved yet
            assert listed["todos"].uri == f"{URI_PREFIX}{sid}/todos"
            templates = (await client.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == {
                f"{URI_PREFIX}{{sessionId}}/{k}" for k in ("state", "todos", "plan", "events")}

            todos = texts(await client.read_resource(listed["todos"].uri))
            assert json.loads(todos["application/json"])["todos"] == TODOS["todos"]
            assert todos["text/markdown"].startswith("- [~] Write the tests")
            with pytest.raises(MCPError) as missing:
                await client.read_resource(resource_uri(sid, "plan"))
            assert missing.value.code == -32002 and "no plan" in missing.value.message

            await client.call_tool("EnterPlanMode", {})
            state = texts(await client.read_resource(listed["state"].uri))
            document = json.loads(state["application/json"])
            assert document["executionState"]["planEnabled"] is True
            assert document["todos"] == TODOS["todos"]
            await client.call_tool("ExitPlanMode", PLAN)
            names = {r.name for r in (await client.list_resources()).resources}
            assert names == {"state", "todos", "plan", "events"}
            plan = texts(await client.read_resource(resource_uri(sid, "plan")))
            assert plan == {"text/markdown": PLAN["plan"]}
            events = json.loads(texts(await client.read_resource(
                resource_uri(sid, "events")))["application/json"])
            assert events["events"][0]["type"] == "SessionCreated"
            assert events["version"] == events["events"][-1]["seq"]

            for bad in ("sessionledger://sessions/sess_NOPE/state", "file:///etc/passwd",
                        f"{URI_PREFIX}{sid}/secrets"):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(bad)
                assert refused.value.code == -32002
                assert refused.value.error.data == {"uri": bad}

    run(scenario)


def test_resources_on_2026_and_another_workspace_is_not_found(  # issue 21 finding 8
    ledger: tuple[str, Path], tmp_path: Path,
) -> None:
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        neighbour = str(service.create_session()["sessionId"])
        service.tools.call(neighbour, "TodoWrite", OTHER_TODOS)
        elsewhere = SessionService.open(ledger[0], workspace_root=tmp_path)
        stranger = str(elsewhere.create_session()["sessionId"])
        elsewhere.close()
    finally:
        service.close()

    async def scenario() -> None:
        async with Client(server_params(*ledger), cache=None) as client:
            assert client.protocol_version == MODERN
            sid = session_of(await client.call_tool("TodoWrite", TODOS))
            uris = {r.uri for r in (await client.list_resources()).resources}
            assert resource_uri(sid, "todos") in uris
            mine = texts(await client.read_resource(resource_uri(sid, "todos")))
            assert "Write the tests" in mine["text/markdown"]
            # a session of the same workspace reads as ReadSessionContext would read it
            theirs = texts(await client.read_resource(resource_uri(neighbour, "todos")))
            assert "Port the parser" in theirs["text/markdown"]
            with pytest.raises(MCPError) as refused:
                await client.read_resource(resource_uri(stranger, "state"))
            assert refused.value.code == types.INVALID_PARAMS  # 2026-07-28 retired -32002
            assert "another workspace" in refused.value.message

    run(scenario)


# -- subscriptions -----------------------------------------------------------------------------

def test_a_subscription_hears_todowrites_over_mcp_and_http_until_unsubscribed(  # issue 21 finding 8
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        notices = Notices()

        def post_todos(session_id: str) -> None:
            response = httpx.post(f"{server.base_url}/v1/sessions/{session_id}/tool-calls",
                                  json={"tool": "TodoWrite", "input": OTHER_TODOS})
            assert response.status_code == 200, response.text

        async def scenario() -> None:
            async with http_session(f"{server.base_url}/mcp", notices) as client:
                sid = session_of(await client.call_tool("TodoRead", {}))
                todos, events = resource_uri(sid, "todos"), resource_uri(sid, "events")
                await subscribe(client, todos)
                await subscribe(client, events)
                await client.call_tool("TodoWrite", TODOS)  # over MCP
                await notices.until("notifications/resources/updated", 1, todos)
                await anyio.to_thread.run_sync(lambda: post_todos(sid))  # over HTTP
                await notices.until("notifications/resources/updated", 2, todos)

                await subscribe(client, todos, off=True)
                heard = len(notices.of("notifications/resources/updated", events))
                await anyio.to_thread.run_sync(lambda: post_todos(sid))
                await notices.until("notifications/resources/updated", heard + 1, events)
                await anyio.to_thread.run_sync(lambda: post_todos(sid))
                await notices.until("notifications/resources/updated", heard + 2, events)
                assert len(notices.of("notifications/resources/updated", todos)) == 2
                seen["session"] = sid

        async def modern() -> None:  # a 2026-07-28 request names its session in the URL
            sid = seen["session"]
            url = f"{server.base_url}/mcp?session={sid}"
            async with Client(url, cache=None) as client:
                assert client.protocol_version == MODERN
                listed = {r.uri for r in (await client.list_resources()).resources}
                assert resource_uri(sid, "todos") in listed
                uri = resource_uri(sid, "todos")
                async with client.listen(resource_subscriptions=[uri]) as stream:
                    await anyio.to_thread.run_sync(lambda: post_todos(sid))
                    with anyio.fail_after(30):
                        async for event in stream:
                            assert getattr(event, "uri", None) == uri
                            break
                read = texts(await client.read_resource(uri))
                assert "Port the parser" in read["text/markdown"]

        seen: dict[str, str] = {}
        run(scenario)
        run(modern)


def test_stdio_hears_another_process_and_2026_listens(  # issue 21 finding 8
    ledger: tuple[str, Path],
) -> None:
    notices = Notices()

    def write_elsewhere(session_id: str) -> None:  # another process's append: the slow poll
        service = SessionService.open(ledger[0], workspace_root=ledger[1])
        try:
            service.tools.call(session_id, "TodoWrite", OTHER_TODOS)
        finally:
            service.close()

    async def handshake() -> None:
        async with stdio_session(ledger, notices) as client:
            sid = session_of(await client.call_tool("TodoRead", {}))
            await subscribe(client, resource_uri(sid, "todos"))
            await anyio.to_thread.run_sync(lambda: write_elsewhere(sid))
            await notices.until("notifications/resources/updated", 1,
                                resource_uri(sid, "todos"))

    async def modern() -> None:
        async with Client(server_params(*ledger), cache=None) as client:
            assert client.protocol_version == MODERN
            capabilities = client.server_capabilities
            assert capabilities.resources is not None and capabilities.resources.subscribe
            assert capabilities.tools is not None and capabilities.tools.list_changed
            sid = session_of(await client.call_tool("TodoRead", {}))
            uri = resource_uri(sid, "todos")
            async with client.listen(resource_subscriptions=[uri]) as stream:
                await client.call_tool("TodoWrite", TODOS)
                with anyio.fail_after(30):
                    async for event in stream:
                        assert getattr(event, "uri", None) == uri
                        break

    run(handshake)
    run(modern)


def test_subscriptions_end_with_their_connection(tmp_path: Path) -> None:  # issue 21 finding 8
    service = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=tmp_path)
    ledger = LedgerMcp(service, McpOptions())
    server = ledger.server()
    watcher = ledger.features.watcher

    async def scenario() -> None:
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: server.run(
                    *server_streams, server.create_initialization_options()))
                async with ClientSession(*client_streams) as client:
                    await client.initialize()
                    sid = session_of(await client.call_tool("TodoRead", {}))
                    for kind in ("state", "todos", "events"):
                        await subscribe(client, resource_uri(sid, kind))
                    assert watcher.subscription_count == 3
                    await subscribe(client, resource_uri(sid, "state"), off=True)
                    assert watcher.subscription_count == 2
                with anyio.fail_after(10):
                    while watcher.subscription_count:
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()

    try:
        run(scenario)
    finally:
        service.close()
    assert watcher.subscription_count == 0


# -- the tool list changes with the workspace flag ---------------------------------------------

def test_tools_list_changed_follows_the_dynamic_workflows_flag(  # issue 21 finding 7
    ledger: tuple[str, Path],
) -> None:
    config = ledger[1] / ".sessionledger" / "config.toml"
    config.parent.mkdir()
    notices = Notices()

    async def handshake() -> None:
        async with stdio_session(ledger, notices) as client:
            assert (await client.list_tools()).tools  # listed: no ListModels
            names = {t.name for t in (await client.list_tools()).tools}
            assert "ListModels" not in names
            await client.call_tool("TodoRead", {})
            assert notices.of("notifications/tools/list_changed") == []
            config.write_text(FLAG_ON)
            await client.call_tool("TodoRead", {})
            await notices.until("notifications/tools/list_changed", 1)
            assert "ListModels" in {t.name for t in (await client.list_tools()).tools}
            config.write_text("")
            await client.call_tool("TodoRead", {})
            await notices.until("notifications/tools/list_changed", 2)
            assert "ListModels" not in {t.name for t in (await client.list_tools()).tools}

    async def modern() -> None:
        async with Client(server_params(*ledger), cache=None) as client:
            assert client.protocol_version == MODERN
            await client.call_tool("TodoRead", {})
            assert "ListModels" not in {t.name for t in (await client.list_tools()).tools}
            async with client.listen(tools_list_changed=True) as stream:
                config.write_text(FLAG_ON)
                await client.call_tool("TodoRead", {})
                with anyio.fail_after(30):
                    async for _event in stream:
                        break
            assert "ListModels" in {t.name for t in (await client.list_tools()).tools}

    run(handshake)
    config.write_text("")
    run(modern)


def test_a_listener_over_http_hears_each_change_of_a_sessions_tools(  # issue 40 finding 4
    tmp_path: Path,
) -> None:
    # 2026-07-28 over HTTP has no connection that knows the session: each call names it in its
    # arguments, and the listen stream is a request of its own. ListModels leaves the surface
    # and comes back; the listener hears both.
    with serve_in_process(tmp_path, config=FLAG_ON) as serve:
        config = tmp_path / "workspace" / ".sessionledger" / "config.toml"

        async def heard(client: Client, session: str, text: str) -> set[str]:
            async with client.listen(tools_list_changed=True) as stream:
                config.write_text(text)
                await client.call_tool("TodoRead", {"sessionId": session})
                with anyio.fail_after(30):
                    async for _event in stream:
                        break
            read = await client.call_tool("TodoRead", {"sessionId": session})
            assert not read.is_error
            return {t.name for t in (await client.list_tools()).tools}

        async def scenario() -> None:
            async with Client(serve.mcp_url) as client:
                assert client.protocol_version == MODERN
                first = await client.call_tool("TodoRead", {})
                session = (first.meta or {})[SESSION_META]
                assert "ListModels" in {t.name for t in (await client.list_tools()).tools}
                assert "ListModels" not in await heard(client, session, "")
                assert "ListModels" in await heard(client, session, FLAG_ON)

        run(scenario)


def test_the_handshake_advertises_changing_lists_over_http(  # issue 21 finding 7
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        async def scenario() -> None:
            async with (
                streamable_http_client(f"{server.base_url}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
            capabilities = init.capabilities
            assert capabilities.tools is not None and capabilities.tools.list_changed is True
            assert capabilities.resources is not None
            assert capabilities.resources.subscribe and capabilities.resources.list_changed
            assert capabilities.prompts is not None

        run(scenario)


# -- prompts -----------------------------------------------------------------------------------

def test_prompts_plan_and_continue_a_session_on_both_eras(  # issue 21 finding 8
    ledger: tuple[str, Path],
) -> None:
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        other = str(service.create_session()["sessionId"])
        service.tools.call(other, "TodoWrite", OTHER_TODOS)
    finally:
        service.close()

    async def check(client: Any) -> None:
        names = {p.name for p in (await client.list_prompts()).prompts}
        assert names == {"plan", "continue-session"}
        plan = await client.get_prompt("plan", {"task": "Add a cache"})
        text = plan.messages[0].content.text
        assert text.startswith("Add a cache") and "EnterPlanMode" in text
        assert "ExitPlanMode" in text and "explore the codebase" in text
        handoff = (await client.get_prompt("continue-session", {"sessionId": other}))
        text = handoff.messages[0].content.text
        assert "Port the parser" in text and "not instructions" in text
        assert f"Continue the work of session {other}" in text
        for name, arguments, words in (
            ("nonsense", {}, "unknown prompt"), ("plan", {}, "`task`"),
            ("continue-session", {}, "`sessionId`"),
            ("continue-session", {"sessionId": "sess_NOPE"}, "no such session"),
        ):
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, arguments)
            assert refused.value.code == types.INVALID_PARAMS and words in refused.value.message
        completed = await client.complete(
            types.PromptReference(type="ref/prompt", name="continue-session"),
            {"name": "sessionId", "value": "sess_"},
        )
        assert other in completed.completion.values

    async def handshake() -> None:
        async with stdio_session(ledger, Notices()) as client:
            await check(client)

    async def modern() -> None:
        async with Client(server_params(*ledger), cache=None) as client:
            assert client.protocol_version == MODERN
            await check(client)

    run(handshake)
    run(modern)
