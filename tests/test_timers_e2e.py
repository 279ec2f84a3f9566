"""The question timer end to end: a real server, its event stream, SIGKILL and restart (HO-4, HO-7).

Issue 6's acceptance 3, over the installed ``sessionledger serve`` started with
``--question-grace-s 1 --question-deadline-s 3``: a protocol host's AskUserQuestion waits; a
client reading the session's SSE stream sees the timer start with its three absolute times,
disconnects, reconnects with ``Last-Event-ID`` and is sent the same three times; the server
is SIGKILLed and started again on the same database, and every timer event it appends
afterwards carries the very same times (a deadline that passed while it was down fires at
once, HO-7); after the deadline the call reads completed with the "none answered" text and
the log shows ``autoContinued``, recorded by the timer no earlier than ``deadlineAt``.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from server_support import ServerProcess, running_server

from sessionledger.tools.ask import result_text

ARGS = ("--question-grace-s", "1", "--question-deadline-s", "3")
QUESTION_TEXT = "Which database?"
QUESTION = {"questions": [{
    "question": QUESTION_TEXT, "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
TIMES = ("startedAt", "visibleAt", "deadlineAt")
WAIT_S = 20.0


def _timer_events(client: httpx.Client, sid: str, *, after: int = 0) -> list[dict[str, Any]]:
    """Read the session's stream after ``after`` until a timer change arrives; disconnect."""
    received: list[dict[str, Any]] = []
    headers = {"Last-Event-ID": str(after)}
    with connect_sse(client, "GET", f"/v1/sessions/{sid}/events/stream",
                     headers=headers) as source:
        assert source.response.status_code == 200
        for sse in source.iter_sse():
            if not sse.data:
                continue
            envelope = json.loads(sse.data)
            assert int(sse.id) == envelope["seq"] and sse.event == envelope["type"]
            received.append(envelope)
            if envelope["type"] == "InteractionAutoResolutionChanged":
                return received
    raise AssertionError(f"the stream ended before a timer change: {received}")


def _times(data: dict[str, Any]) -> tuple[str, str, str]:
    return data["startedAt"], data["visibleAt"], data["deadlineAt"]


def _events(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/sessions/{sid}/events")
    assert response.status_code == 200, response.text
    return list(response.json()["events"])


def _wait_completed(client: httpx.Client, sid: str, call_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        document = client.get(f"/v1/sessions/{sid}/tool-calls/{call_id}").json()
        if document["status"] != "pending":
            return dict(document)
        time.sleep(0.1)
    raise AssertionError(f"call {call_id} still pending after {WAIT_S}s")


def _start_question(server: ServerProcess) -> tuple[str, dict[str, Any], tuple[str, str, str]]:
    with server.client(timeout=httpx.Timeout(10.0, read=10.0)) as client:
        sid = client.post("/v1/sessions", json={"host": "protocol"}).json()["sessionId"]
        response = client.post(f"/v1/sessions/{sid}/tool-calls",
                               json={"tool": "AskUserQuestion", "input": QUESTION})
        assert response.status_code == 202, response.text
        pending = response.json()
        first = _timer_events(client, sid)
        started = first[-1]
        assert started["data"]["state"] == "hiddenGrace"
        assert started["data"]["interactionId"] == pending["interactionId"]
        times = _times(started["data"])
        begin, visible, end = (datetime.fromisoformat(t) for t in times)
        assert (visible - begin, end - begin) == (timedelta(seconds=1), timedelta(seconds=3))
        # a reconnecting client is sent the same change again, with the same three times
        before_timer = started["seq"] - 1
        again = _timer_events(client, sid, after=before_timer)
        assert again[0]["seq"] == started["seq"] and _times(again[0]["data"]) == times
        assert again[0]["hash"] == started["hash"]
    return sid, pending, times


@pytest.mark.slow  # a server killed or restarted under load: make verify (D182)
def test_acceptance3_ho4_ho7_timer_survives_reconnect_and_sigkill_then_auto_continues(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, args=ARGS) as first:
        sid, pending, times = _start_question(first)
        first.process.kill()  # SIGKILL: no shutdown, nothing flushed beyond what was committed
        first.process.wait(timeout=10)
    with running_server(tmp_path, args=ARGS) as second, second.client() as client:
        document = client.get(f"/v1/sessions/{sid}").json()
        for listed in document["interactions"]:  # still waiting if the restart was quick
            assert _times(listed["autoResolution"]) == times
        done = _wait_completed(client, sid, pending["callId"])
        assert done["status"] == "completed" and done["success"] is True
        assert done["modelContent"] == result_text([QUESTION_TEXT], {})
        events = _events(client, sid)
        changes = [e for e in events if e["type"] == "InteractionAutoResolutionChanged"]
        assert [c["data"]["state"] for c in changes] == ["hiddenGrace", "countdown"]
        assert all(_times(c["data"]) == times for c in changes)  # the log's times, unchanged
        (resolved,) = [e for e in events if e["type"] == "InteractionResolved"]
        assert resolved["data"]["decision"] == "autoContinued" and resolved["actor"] == "timer"
        assert resolved["recordedAt"] >= times[2]  # never before the deadline
        assert resolved["seq"] > changes[-1]["seq"]  # in order: countdown, then the answer
        assert client.get(f"/v1/sessions/{sid}").json()["interactions"] == []
        assert client.get(f"/v1/sessions/{sid}/audit").json()["ok"] is True
