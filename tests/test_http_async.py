"""The async request path (issue 24.2): command routes call the service on the event loop.

Over a real ``sessionledger serve``: 32 clients writing their todo lists at once each get every
call recorded once, in a chain that verifies, and the server does not start a thread per
request. In process: a refusal raised inside a service call run on the loop is answered with
the same status and JSON body the service's error carries (nothing appended), and a log line
written straight to the JSON handler is the line its formatter renders.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import create_session, in_process_client, running_server

from sessionledger.errors import SessionLedgerError
from sessionledger.logs import JsonLineFormatter, configure_logging, log_event

CLIENTS = 32
CALLS = 3


def _todos(client: int, call: int) -> dict[str, Any]:
    return {"todos": [
        {"content": f"client {client} step {j}", "priority": "medium",
         "status": "completed" if j < call else "in_progress" if j == call else "pending"}
        for j in range(4)
    ]}


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_32_concurrent_todo_writes_each_append_once_without_a_thread_each(
    tmp_path: Path,
) -> None:  # issue 24.2, ES-6, EL-1
    with running_server(tmp_path) as server:
        with server.client() as http:
            sessions = [create_session(http) for _ in range(CLIENTS)]
            warm = http.post(f"/v1/sessions/{sessions[0]}/tool-calls",
                             json={"tool": "TodoWrite", "input": _todos(99, 0)})
            assert warm.status_code == 200
        before = _threads(server.process.pid)

        async def client(index: int, http: httpx.AsyncClient) -> list[str]:
            ids = []
            for call in range(CALLS):
                response = await http.post(
                    f"/v1/sessions/{sessions[index]}/tool-calls",
                    json={"tool": "TodoWrite", "input": _todos(index, call)})
                assert response.status_code == 200, response.text
                ids.append(response.json()["callId"])
            return ids

        async def run() -> tuple[list[list[str]], int]:
            limits = httpx.Limits(max_connections=CLIENTS)
            async with httpx.AsyncClient(base_url=server.base_url, limits=limits,
                                         timeout=30) as http:
                calls = asyncio.gather(*(client(i, http) for i in range(CLIENTS)))
                peak = 0
                while not calls.done():
                    peak = max(peak, _threads(server.process.pid))
                    await asyncio.sleep(0.01)
                return await calls, peak

        call_ids, peak = asyncio.run(run())
        # The sync routes' worker pool would grow toward one thread per client; the loop
        # path needs none (the store's committer may keep a few of its own).
        assert peak - before <= 8, (before, peak)
        with server.client() as http:
            todos = [http.get(f"/v1/sessions/{sid}").json()["todos"] for sid in sessions]

    store = server.open_store()
    try:
        assert all(report.ok for report in store.verify())
        per_call: Counter[str] = Counter()
        for index, sid in enumerate(sessions):
            events = list(store.read_session(sid))
            caused = {e.causation_id for e in events if e.causation_id is not None}
            assert set(call_ids[index]) <= caused
            per_call.update(e.causation_id for e in events if e.causation_id in call_ids[index])
            assert [t["content"] for t in todos[index]] == [
                t["content"] for t in _todos(index, CALLS - 1)["todos"]]
        assert len(per_call) == CLIENTS * CALLS
        assert len(set(per_call.values())) == 1  # every call wrote the same batch, once
    finally:
        store.close()


def _refused(call: Any) -> SessionLedgerError:
    with pytest.raises(SessionLedgerError) as caught:
        call()
    return caught.value


def test_errors_raised_on_the_loop_are_the_service_errors_json(tmp_path: Path) -> None:
    # issue 24.2, EG-1, ES-5
    with in_process_client(tmp_path, store_url=f"sqlite:///{tmp_path / 'l.db'}") as (
            http, service):
        sid = create_session(http, mode="plan")
        gone = create_session(http)
        assert http.delete(f"/v1/sessions/{gone}").status_code == 200
        blank = {"todos": [{"content": " ", "status": "pending", "priority": "low"}]}
        cases = [  # (request, the same call through the synchronous face)
            (lambda: http.post(f"/v1/sessions/{sid}/tool-calls",
                               json={"tool": "TodoWrite", "input": blank}),
             lambda: service.tools.call(sid, "TodoWrite", blank)),
            (lambda: http.post(f"/v1/sessions/{sid}/goal", json={"objective": "ship"}),
             lambda: service.start_goal(sid, "ship")),
            (lambda: http.post(f"/v1/sessions/{gone}/permission-check",
                               json={"tool": "Bash", "input": {"command": "ls"}}),
             lambda: service.tools.permission_check(gone, "Bash", {"command": "ls"})),
            (lambda: http.post("/v1/sessions/sess_none/messages",
                               json={"role": "user", "content": "hi"}),
             lambda: service.turns.message("sess_none", "user", "hi")),
            (lambda: http.post(f"/v1/sessions/{sid}/interactions/int_none/respond",
                               json={"decision": "deny"}),
             lambda: service.tools.respond(sid, "int_none", "deny")),
        ]
        version = service.store.version(sid)
        for request, direct in cases:
            response = request()
            error = _refused(direct)
            assert 400 <= response.status_code < 500
            assert (response.status_code, response.json()) == (error.status, error.to_wire())
        assert service.store.version(sid) == version


def test_a_line_written_straight_is_the_formatters_line() -> None:  # issue 24.2, SPEC §11
    stream = io.StringIO()
    target = logging.getLogger("sessionledger.test_fast_line")
    configure_logging(stream=stream, names=("sessionledger.test_fast_line",))
    try:
        log_event(target, "request", requestId="req_1", path="/v1/é", status=201,
                  durationMs=0.5, types=["A", "B"])
        log_event(target, "quiet", level=logging.DEBUG, skipped=True)
        (line,) = stream.getvalue().splitlines()
        record = target.makeRecord(target.name, logging.INFO, __file__, 0, "request", (), None,
                                   extra={"sessionledger_fields": {
                                       "requestId": "req_1", "path": "/v1/é", "status": 201,
                                       "durationMs": 0.5, "types": ["A", "B"]}})
        expected = json.loads(JsonLineFormatter().format(record))
        written = json.loads(line)
        assert written.pop("ts").endswith("Z") and expected.pop("ts").endswith("Z")
        assert written == expected
    finally:
        for handler in list(target.handlers):
            target.removeHandler(handler)
        target.propagate = True
