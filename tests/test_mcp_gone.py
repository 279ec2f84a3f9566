"""A host that dies with its form open over streamable HTTP (issue 21 finding 6, D157).

A real ``sessionledger serve``; the client that leaves is a real process
(``tests/gone_client.py``, the SDK's ``ClientSession`` over streamable HTTP, its form never
answered) killed with SIGKILL while its form is open. On a 2025 handshake connection the call's
request is cancelled when its POST's connection drops (nothing can resume it: the server keeps
no event store), so the interaction is withdrawn and the queue moves on; a ``tasks/result``
dropped the same way closes its form and leaves the task waiting. A 2026-07-28 call answered
``input_required`` at once: nothing in the server waited for the client, and the question is
still answered on another surface.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_support import QUESTION, text_of
from server_support import ServerProcess, create_session, running_server

from sessionledger import SessionService
from sessionledger.mcp import asking
from sessionledger.mcp.asking import WITHDRAW_REASON
from sessionledger.mcp.server import LedgerMcp, McpOptions
from sessionledger.tools.ask import ALL_ANSWERED_PREFIX
from sessionledger.tools.executor import withdrawn_text

CLIENT = Path(__file__).with_name("gone_client.py")
DEADLINE_S = 20.0
SECOND = {"questions": [{**QUESTION["questions"][0], "question": "Which queue?"}]}
ANSWERED = {**QUESTION, "answers": {"Which database?": "Postgres"}}


@contextmanager
def leaving_client(mode: str, url: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``gone_client.py MODE URL`` running until its form is open (the lines it printed);
    killed on exit if the test did not kill it."""
    process = subprocess.Popen(
        [sys.executable, str(CLIENT), mode, url], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        while "asked" not in lines:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([process.stdout], [], [], max(left, 0))
            line = process.stdout.readline() if ready else ""
            if not line:
                raise AssertionError(f"the client did not open its form: {lines}")
            lines.append(line.strip())
        yield process, lines
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def kill(process: subprocess.Popen[str]) -> None:
    """The host dies at once: no cancellation, no DELETE, its sockets closed by the kernel."""
    process.send_signal(signal.SIGKILL)
    process.wait()


class Log:
    """The server's log, read from the test process."""

    def __init__(self, server: ServerProcess, session_id: str) -> None:
        self.server, self.session_id = server, session_id

    def _read(self, read: Callable[[SessionService], Any]) -> Any:
        service = SessionService.open(self.server.db_url, workspace_root=self.server.workspace)
        try:
            return read(service)
        finally:
            service.close()

    def decisions(self) -> list[tuple[str, str]]:
        return self._read(lambda s: [
            (e.actor, e.to_wire()["data"]["decision"]) for e in s.iter_events(self.session_id)
            if e.type == "InteractionResolved"])

    def pending(self) -> list[dict[str, Any]]:
        return list(self._read(lambda s: s.tools.pending_interactions(self.session_id)))

    def call(self, call_id: str) -> dict[str, Any]:
        return dict(self._read(lambda s: s.tools.get(self.session_id, call_id).document))

    def until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not check():
            assert time.monotonic() < deadline, f"not within {DEADLINE_S:g} s: {what}"
            time.sleep(0.1)


def mcp_url(server: ServerProcess, session_id: str) -> str:
    return f"{server.base_url}/mcp?session={session_id}"


@pytest.mark.slow  # a host process killed: make verify (D182)
def test_a_host_killed_with_its_form_open_withdraws_it_and_the_queue_moves_on(  # issue 21 finding 6
    tmp_path: Path,
) -> None:  # AQ-3, D157
    with running_server(tmp_path) as server:
        with server.client() as http:
            session_id = create_session(http)
        log = Log(server, session_id)
        with leaving_client("ask", mcp_url(server, session_id)) as (client, _lines):
            (first,) = log.pending()
            kill(client)
        log.until(lambda: log.decisions() == [("host", "withdrawn")],
                  "the dead host's question was withdrawn")
        document = log.call(first["callId"])
        assert document["status"] == "cancelled" and document["result"]["withdrawn"] is True
        assert document["modelContent"] == withdrawn_text(WITHDRAW_REASON)
        assert log.pending() == []

        heads: list[list[str]] = []

        async def answer(
            _context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult:
            heads.append([i["payload"]["questions"][0]["question"]
                          for i in await anyio.to_thread.run_sync(log.pending)])
            return types.ElicitResult(action="accept", content={"q1": "Postgres"})

        async def second() -> types.CallToolResult:
            async with (
                streamable_http_client(mcp_url(server, session_id)) as (read, write),
                ClientSession(read, write, elicitation_callback=answer) as session,
            ):
                await session.initialize()
                with anyio.fail_after(DEADLINE_S):
                    return await session.call_tool("AskUserQuestion", SECOND)

        answered = anyio.run(second)
        assert heads == [["Which queue?"]]  # the only question waiting: the head of the queue
        assert text_of(answered).startswith(f'{ALL_ANSWERED_PREFIX}"Which queue?"=')
        assert log.decisions() == [("host", "withdrawn"), ("user", "modify")]


@pytest.mark.slow  # a host process killed: make verify (D182)
def test_a_host_killed_during_tasks_result_leaves_its_task_waiting(  # issue 21 finding 6
    tmp_path: Path,
) -> None:  # D158: a task outlives the requests about it
    with running_server(tmp_path) as server:
        with server.client() as http:
            task_session, witness_session = create_session(http), create_session(http)
        tasks, witness = Log(server, task_session), Log(server, witness_session)
        with leaving_client("task", mcp_url(server, task_session)) as (client, lines):
            task_id = next(line.split()[1] for line in lines if line.startswith("task "))
            kill(client)
        # a second host killed after it: once its question is withdrawn, the server has seen
        # both connections drop
        with leaving_client("ask", mcp_url(server, witness_session)) as (client, _lines):
            kill(client)
        witness.until(lambda: witness.decisions() == [("host", "withdrawn")],
                      "the second dead host's question was withdrawn")
        assert tasks.decisions() == []
        assert [i["callId"] for i in tasks.pending()] == [task_id]

        async def resumed() -> tuple[str, types.CallToolResult]:
            async def answer(
                _context: ClientRequestContext, _params: types.ElicitRequestParams
            ) -> types.ElicitResult:
                return types.ElicitResult(action="accept", content={"q1": "Postgres"})

            async with (
                streamable_http_client(mcp_url(server, task_session)) as (read, write),
                ClientSession(read, write, elicitation_callback=answer) as session,
            ):
                await session.initialize()
                get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
                status = (await session.send_request(get, types.GetTaskResult)).status
                result = types.GetTaskPayloadRequest(
                    params=types.GetTaskPayloadRequestParams(task_id=task_id))
                with anyio.fail_after(DEADLINE_S):
                    return status, await session.send_request(result, types.CallToolResult)

        status, result = anyio.run(resumed)
        assert status == "input_required"
        assert text_of(result).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')
        assert tasks.decisions() == [("user", "modify")]


@pytest.mark.slow  # a host process killed: make verify (D182)
def test_a_2026_host_killed_with_its_form_open_left_nothing_waiting(  # issue 21 finding 6
    tmp_path: Path,
) -> None:  # D156, D157: the round answered input_required at once
    with running_server(tmp_path) as server:
        with server.client() as http:
            session_id = create_session(http)
        log = Log(server, session_id)
        with leaving_client("modern", mcp_url(server, session_id)) as (client, _lines):
            kill(client)
        (waiting,) = log.pending()  # the question waits for a person, not for the client
        with server.client() as http:
            response = http.post(
                f"/v1/sessions/{session_id}/interactions/{waiting['interactionId']}/respond",
                json={"decision": "modify", "input": ANSWERED})
        assert response.status_code == 200, response.text
        assert log.call(waiting["callId"])["status"] == "completed"
        assert log.decisions() == [("user", "modify")]


# -- tasks/result waits on the commit notice, as a waiting call does (D157, D158) --------------


def test_a_waiting_tasks_result_reads_the_log_only_when_an_answer_commits(  # issue 21 finding 6
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # D158
    # Three tasks/result requests of a client that cannot elicit wait for an answer given
    # elsewhere; the slow poll is a minute here. Each reads its call when it starts, then only
    # when an answer commits (the old wait read the log every 0.5 s).
    service = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=tmp_path)
    reads: list[str] = []
    get, call = service.tools.get, service.ledger.call

    def counted_get(session_id: str, call_id: str) -> Any:
        reads.append(call_id)
        return get(session_id, call_id)

    def counted_call(session_id: str, call_id: str) -> Any:
        reads.append(call_id)
        return call(session_id, call_id)

    # Each waiter's first wait for its bell: its reads at the start are done by then (known,
    # not slept on: issue 36).
    parked: list[float] = []
    wait = asking._Waiter.wait

    async def counted_wait(waiter: Any, timeout_s: float) -> None:
        parked.append(timeout_s)
        await wait(waiter, timeout_s)

    monkeypatch.setattr(asking._Waiter, "wait", counted_wait)
    session_id = str(service.create_session(host="protocol")["sessionId"])
    ledger = LedgerMcp(service, McpOptions(session_id=session_id, answer_poll_s=60))
    results: dict[str, types.CallToolResult] = {}

    async def result(client: Client, task_id: str) -> None:
        request = types.GetTaskPayloadRequest(
            params=types.GetTaskPayloadRequestParams(task_id=task_id))
        results[task_id] = await client.session.send_request(request, types.CallToolResult)

    async def scenario() -> None:
        async with Client(ledger.server(), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            task_ids = []
            for number in range(3):  # no elicitation: each call answers pending at once
                asked = {"questions": [{**QUESTION["questions"][0],
                                        "question": f"Which {number}?"}]}
                pending = await client.call_tool("AskUserQuestion", asked)
                task_ids.append(str(pending.structured_content["callId"]))  # type: ignore[index]
            monkeypatch.setattr(service.tools, "get", counted_get)
            monkeypatch.setattr(service.ledger, "call", counted_call)
            async with anyio.create_task_group() as group:
                for task_id in task_ids:
                    group.start_soon(result, client, task_id)
                with anyio.fail_after(30):  # each started, read its call and waits now
                    while len(set(reads)) < 3 or len(parked) < 3:
                        await anyio.sleep(0.01)
                started = list(reads)
                await anyio.sleep(1.5)
                assert reads == started, "a tasks/result read the log with nothing committed"
                first = (await anyio.to_thread.run_sync(
                    service.tools.pending_interactions, session_id))[0]
                answer = {"questions": first["payload"]["questions"],
                          "answers": {first["payload"]["questions"][0]["question"]: "Postgres"}}
                await anyio.to_thread.run_sync(lambda: service.tools.respond(
                    session_id, first["interactionId"], "modify", input=answer))
                with anyio.fail_after(30):
                    while not results:
                        await anyio.sleep(0.05)
                assert list(results) == [first["callId"]]
                woken = reads[len(started):]
                assert woken and set(woken) == {first["callId"]}  # only the answered one looked
                group.cancel_scope.cancel()

    try:
        anyio.run(scenario)
        (answered,) = results.values()
        assert text_of(answered).startswith(f'{ALL_ANSWERED_PREFIX}"Which 0?"="Postgres"')
        decisions = [e.to_wire()["data"]["decision"] for e in service.iter_events(session_id)
                     if e.type == "InteractionResolved"]
        assert decisions == ["modify"]  # the two given up on are still waiting: tasks outlive them
    finally:
        service.close()
