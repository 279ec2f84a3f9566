"""What the session list says about each session (issue 23.4, 23.6), over HTTP in process.

``GET /v1/sessions`` names every session by its workspace and its first real user message,
else its goal, else its id, and counts what waits in it (questions, plan approvals, tool
approvals) with the earliest deadline of a question timer still counting; a paused timer has
none, an answer clears the count, a deleted session is not listed and its summary counts
nothing. The summary's new fields are a fold of the log like the rest (the audit agrees).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import TestClient, in_process_client

from sessionledger import SessionService

QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
NO_WAIT = {"questions": 0, "planApprovals": 0, "toolApprovals": 0, "deadlineAt": None}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[TestClient, SessionService]]:
    (tmp_path / "shop").mkdir()
    with in_process_client(tmp_path, store_url=f"sqlite:///{tmp_path / 'ledger.db'}") as pair:
        yield pair


def _session(client: TestClient, **body: Any) -> str:
    response = client.post("/v1/sessions", json={"workspace": "shop", **body})
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


def _call(client: TestClient, sid: str, tool: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": tool, "input": body})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


def _entries(client: TestClient) -> dict[str, dict[str, Any]]:
    response = client.get("/v1/sessions")
    assert response.status_code == 200, response.text
    return {e["sessionId"]: e for e in response.json()["sessions"]}


def _message(client: TestClient, sid: str, role: str, content: str, **extra: Any) -> None:
    response = client.post(f"/v1/sessions/{sid}/messages",
                           json={"role": role, "content": content, **extra})
    assert response.status_code == 201, response.text


def test_sessions_are_named_by_workspace_and_first_user_message_or_goal(  # issue 23.6
    app: tuple[TestClient, SessionService], tmp_path: Path,
) -> None:
    client, _service = app
    bare, goal, talk = _session(client), _session(client), _session(client)
    assert client.post(f"/v1/sessions/{goal}/goal",
                       json={"objective": "Ship the checkout"}).status_code == 200
    _message(client, talk, "assistant", "Hello, how can I help?")
    _message(client, talk, "user", "Fix the\nlogin\u200b bug " + "x" * 80)
    _message(client, talk, "user", "and then the signup")
    entries = _entries(client)
    assert entries[bare]["name"] == f"shop · {bare}"
    assert entries[bare]["workspace"] == str((tmp_path / "shop").resolve())
    assert entries[goal]["name"] == "shop · Ship the checkout"
    name = entries[talk]["name"]
    assert name.startswith("shop · Fix the login bug xxx") and name.endswith("…")
    assert len(name) == len("shop · ") + 60
    for entry in entries.values():
        assert entry["pending"] == NO_WAIT
    assert client.delete(f"/v1/sessions/{goal}/goal").status_code == 200
    assert _entries(client)[goal]["name"] == f"shop · {goal}"


def test_the_list_counts_what_waits_with_the_nearest_counting_deadline(  # issue 23.4, HO-4
    app: tuple[TestClient, SessionService],
) -> None:
    client, service = app
    quiet, asking, planning = _session(client), _session(client), _session(client, mode="yolo")
    first = _call(client, asking, "AskUserQuestion", QUESTION)
    second = _call(client, asking, "AskUserQuestion", QUESTION)
    assert _call(client, planning, "EnterPlanMode", {})["success"] is True
    plan = _call(client, planning, "ExitPlanMode", {"plan": "Migrate the orders."})

    entries = _entries(client)
    head = client.get(f"/v1/sessions/{asking}").json()["interactions"][0]["autoResolution"]
    assert head["state"] == "hiddenGrace"
    assert entries[asking]["pending"] == {**NO_WAIT, "questions": 2,
                                         "deadlineAt": head["deadlineAt"]}
    assert entries[planning]["pending"] == {**NO_WAIT, "planApprovals": 1}  # no timer
    assert entries[quiet]["pending"] == NO_WAIT

    activity = f"/v1/sessions/{asking}/interactions/{first['interactionId']}/activity"
    assert client.post(activity).status_code == 200  # paused for good: no deadline now
    assert _entries(client)[asking]["pending"] == {**NO_WAIT, "questions": 2}

    answered = client.post(
        f"/v1/sessions/{asking}/interactions/{first['interactionId']}/respond",
        json={"decision": "deny"})
    assert answered.status_code == 200, answered.text
    nxt = client.get(f"/v1/sessions/{asking}").json()["interactions"][0]["autoResolution"]
    assert _entries(client)[asking]["pending"] == {**NO_WAIT, "questions": 1,
                                                  "deadlineAt": nxt["deadlineAt"]}
    approved = client.post(
        f"/v1/sessions/{planning}/interactions/{plan['interactionId']}/respond",
        json={"decision": "approve"})
    assert approved.status_code == 200, approved.text
    assert _entries(client)[planning]["pending"] == NO_WAIT

    assert client.delete(f"/v1/sessions/{asking}").status_code == 200
    assert asking not in _entries(client)
    summary = service.find_summary(asking)
    assert summary is not None and summary.deleted and summary.waiting == 0
    assert second["status"] == "pending"
    for sid in (quiet, asking, planning):  # the new summary fields fold from the log
        assert client.get(f"/v1/sessions/{sid}/audit").json()["ok"] is True
