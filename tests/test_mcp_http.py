"""The MCP server's streamable-HTTP transport on ``serve`` at ``/mcp`` (issue 12).

A real ``sessionledger serve`` process, driven by the ``mcp`` SDK's own HTTP client: the
tools are listed, todos written and read, a question asked and plan approvals answered with
feedback and declined through elicitation, a plan approval left pending (a client without
elicitation) and approved through the respond endpoint of the same server; a second
connection resumes the session by ``?session=``.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, ClientSession
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp_support import PLAN, QUESTION, TODOS, Answers, NeverAnswers, text_of
from server_support import running_server

from sessionledger.claude_code.observations import ledger_session_id
from sessionledger.http.server import GRACEFUL_SHUTDOWN_S
from sessionledger.mcp import SESSION_META
from sessionledger.mcp.resources import resource_uri
from sessionledger.tools.ask import ALL_ANSWERED_PREFIX
from sessionledger.tools.plan import APPROVED_PREFIX, NOT_APPROVED


@asynccontextmanager
async def http_client(
    url: str, elicitation: ElicitationFnT | None = None
) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, elicitation_callback=elicitation) as session,
    ):
        await session.initialize()
        yield session


def test_the_tools_over_streamable_http_on_serve(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        url = f"{server.base_url}/mcp"
        seen: dict[str, Any] = {}

        async def first() -> None:
            answers = Answers(
                ("accept", {"q1": "Postgres"}), ("accept", {"feedback": "Smaller steps"}),
                ("decline", None),
            )
            async with http_client(url, answers) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"TodoWrite", "AskUserQuestion", "InteractionStatus"} <= names
                written = await client.call_tool("TodoWrite", TODOS)
                assert written.meta is not None
                seen["session"] = written.meta[SESSION_META]
                asked = await client.call_tool("AskUserQuestion", QUESTION)
                assert text_of(asked).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"=')
                await client.call_tool("EnterPlanMode", {})
                feedback = await client.call_tool("ExitPlanMode", PLAN)
                assert feedback.is_error and text_of(feedback) == NOT_APPROVED
                declined = await client.call_tool("ExitPlanMode", PLAN)
                assert declined.structured_content["turnControl"] == {
                    "reason": "plan_exit_denied", "stopTurnAfterResult": True}

        async def second() -> None:
            async with http_client(f"{url}?session={seen['session']}") as client:
                read = await client.call_tool("TodoRead", {})
                assert read.structured_content["result"]["todos"] == TODOS["todos"]
                pending = await client.call_tool("ExitPlanMode", PLAN)
                iid = pending.structured_content["interactionId"]
                assert f"{server.base_url}/#/sessions/{seen['session']}" in text_of(pending)
                await anyio.to_thread.run_sync(lambda: respond(iid))
                done = await client.call_tool("InteractionStatus", {"interactionId": iid})
                assert text_of(done).startswith(APPROVED_PREFIX)

        def respond(iid: str) -> None:
            with server.client() as http:
                response = http.post(
                    f"/v1/sessions/{seen['session']}/interactions/{iid}/respond",
                    json={"decision": "approve"},
                )
                assert response.status_code == 200, response.text

        anyio.run(first)
        anyio.run(second)
        with server.client() as http:
            document = http.get(f"/v1/sessions/{seen['session']}").json()
            assert document["executionState"]["planEnabled"] is False
            assert len(http.get("/v1/sessions").json()["sessions"]) == 1


def test_serve_with_no_elicitation_leaves_questions_for_the_page(  # issue 40
    tmp_path: Path,
) -> None:
    # ``serve --no-elicitation``: a client that offers forms is never sent one (Codex's
    # headless run declines them all by itself); the question waits, pending, and the answer
    # given through the respond route reaches the model's next InteractionStatus.
    answers = Answers(("decline", None))
    with running_server(tmp_path, args=["--no-elicitation"]) as server:
        url = f"{server.base_url}/mcp"

        def respond(session: str, iid: str) -> None:
            with server.client() as http:
                response = http.post(
                    f"/v1/sessions/{session}/interactions/{iid}/respond",
                    json={"decision": "modify", "input": {
                        **QUESTION, "answers": {"Which database?": "Postgres"}}},
                )
                assert response.status_code == 200, response.text

        async def scenario() -> None:
            async with http_client(url, answers) as client:
                asked = await client.call_tool("AskUserQuestion", QUESTION)
                assert asked.structured_content["status"] == "pending"
                iid = asked.structured_content["interactionId"]
                session = (asked.meta or {})[SESSION_META]
                await anyio.to_thread.run_sync(lambda: respond(session, iid))
                done = await client.call_tool("InteractionStatus", {"interactionId": iid})
                assert text_of(done).startswith(ALL_ANSWERED_PREFIX), text_of(done)

        anyio.run(scenario)
    assert answers.asked == []


def test_the_mcp_endpoint_refuses_a_foreign_host(tmp_path: Path) -> None:  # EG-3
    with running_server(tmp_path) as server:
        response = httpx.post(
            f"{server.base_url}/mcp", headers={"Host": "evil.example"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
    # The app's one Host rule answers, with the JSON error of every route (not the SDK's text).
    assert response.status_code == 421
    assert response.json()["error"]["code"] == "misdirected_request"


@pytest.mark.parametrize("last_event_id", ["5", "garbage %$#", "", "0" * 300])
def test_a_get_asking_to_resume_gets_a_new_stream_not_a_500(  # issue 41, finding 8
        tmp_path: Path, last_event_id: str) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    with running_server(tmp_path) as server, httpx.Client(base_url=server.base_url,
                                                         timeout=10) as http:
        opened = http.post("/mcp", json=initialize, headers=accept)
        assert opened.status_code == 200, opened.text
        headers = {"Accept": "text/event-stream", "Mcp-Protocol-Version": "2025-11-25",
                   "Mcp-Session-Id": opened.headers["mcp-session-id"],
                   "Last-Event-ID": last_event_id}
        with http.stream("GET", "/mcp", headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
        assert http.get("/healthz").status_code == 200
        assert "without starting response" not in server.log()


def test_a_2026_client_names_its_session_in_the_url(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        with server.client() as http:
            session_id = http.post("/v1/sessions", json={}).json()["sessionId"]

        async def scenario() -> None:
            async with Client(f"{server.base_url}/mcp") as sessionless:
                names = {t.name for t in (await sessionless.list_tools()).tools}
                assert "TodoRead" in names
                # issue 21 finding 2: no longer refused; its own session (D156)
                answered = await sessionless.call_tool("TodoRead", {})
                assert not answered.is_error and answered.meta is not None
                assert answered.meta[SESSION_META] != session_id
            answers = Answers(("accept", {"q1": "Postgres"}))
            url = f"{server.base_url}/mcp?session={session_id}"
            async with Client(url, elicitation_callback=answers) as client:
                asked = await client.call_tool("AskUserQuestion", QUESTION)
                assert text_of(asked).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"=')
                assert asked.meta is not None and asked.meta[SESSION_META] == session_id

        anyio.run(scenario)
        with server.client() as http:
            assert len(http.get("/v1/sessions").json()["sessions"]) == 2


def test_a_form_answered_on_the_web_is_withdrawn_and_the_call_answers_so(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path) as server:
        with server.client() as http:
            session_id = http.post("/v1/sessions", json={}).json()["sessionId"]
        form = NeverAnswers()

        def answer_on_the_web() -> None:
            with server.client() as http:
                deadline = time.monotonic() + 30
                while True:
                    document = http.get(f"/v1/sessions/{session_id}").json()
                    if document["interactions"] or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                (waiting,) = document["interactions"]
                answered = {**QUESTION, "answers": {"Which database?": "Postgres"}}
                response = http.post(
                    f"/v1/sessions/{session_id}/interactions/{waiting['interactionId']}/respond",
                    json={"decision": "modify", "input": answered},
                )
                assert response.status_code == 200, response.text

        async def scenario() -> None:
            url = f"{server.base_url}/mcp?session={session_id}"
            async with http_client(url, form) as client, anyio.create_task_group() as group:
                group.start_soon(anyio.to_thread.run_sync, answer_on_the_web)
                with anyio.fail_after(30):
                    asked = await client.call_tool("AskUserQuestion", QUESTION)
                assert text_of(asked).startswith(
                    f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')
                assert asked.structured_content["status"] == "completed"

        anyio.run(scenario)
        assert (form.opened, form.withdrawn) == (1, 1)


def test_stopping_serve_with_an_mcp_stream_open_ends_it_cleanly(tmp_path: Path) -> None:
    # The SDK's GET stream stops without its last body message on shutdown; uvicorn used to
    # log that as an error. The stream is ended properly and the server exits 0.
    with running_server(tmp_path) as server:
        connected = threading.Event()

        async def hold_the_stream() -> None:
            with suppress(Exception):  # the server goes away under the client
                async with http_client(f"{server.base_url}/mcp") as client:
                    await client.list_tools()
                    connected.set()
                    await anyio.sleep(30)

        holder = threading.Thread(target=anyio.run, args=(hold_the_stream,), daemon=True)
        holder.start()
        assert connected.wait(30)
        time.sleep(0.5)  # the client's GET stream is open
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=GRACEFUL_SHUTDOWN_S) == 0
        errors = [r for r in server.log_records() if r.get("level") == "error" or "unparsed" in r]
        assert any(r.get("event") == "stopped" for r in server.log_records())  # records parsed
    assert errors == []


def test_a_codex_call_over_http_binds_its_connection_to_the_hooks_session(  # issue 40
    tmp_path: Path,
) -> None:
    # Codex names its thread in each call's _meta (D219): over serve's /mcp the call runs in
    # the hooks' session, and what the connection reads afterwards (its resources) is that
    # session, not a new one of the connection's; a refused call names the session it named.
    hooked = ledger_session_id("thread-a", None, "codex")
    meta = {"callId": "call_1", "x-codex-turn-metadata": {
        "session_id": "thread-a", "thread_id": "thread-a", "turn_id": "t1"}}
    with running_server(tmp_path) as server:

        async def scenario() -> None:
            async with http_client(f"{server.base_url}/mcp") as client:
                written = await client.call_tool("TodoWrite", TODOS, meta=meta)
                assert (written.meta or {}).get(SESSION_META) == hooked, written.meta
                uris = {str(r.uri) for r in (await client.list_resources()).resources}
                assert resource_uri(hooked, "todos") in uris, uris
                bad = await client.call_tool("TodoWrite", {"todos": "x"}, meta=meta)
                assert bad.is_error and (bad.meta or {}).get(SESSION_META) == hooked, bad.meta
                # a call naming no session would run in the connection's own (none yet)
                bad = await client.call_tool("TodoWrite", {"todos": "x"})
                assert bad.is_error and SESSION_META not in (bad.meta or {}), bad.meta

        anyio.run(scenario)
        with server.client() as http:
            sessions = http.get("/v1/sessions").json()["sessions"]
            assert [(s["sessionId"], s["client"]) for s in sessions] == [(hooked, "codex")]
