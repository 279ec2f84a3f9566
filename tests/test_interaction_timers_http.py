"""The timer's routes over HTTP, in process (SPEC §11; HO-5 activity, HO-6 settings).

``POST …/interactions/{iid}/activity`` with no body, ``{}`` or ``{"action"}``; its 404, 409,
410 and 422 answers; ``GET|PUT /v1/settings`` with partial updates; and bad input of every
kind answered 422 with nothing appended. The app's own scheduler thread runs meanwhile (the
default 60 s / 300 s durations never fall due here).
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


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[TestClient, SessionService]]:
    with in_process_client(tmp_path, store_url=f"sqlite:///{tmp_path / 'ledger.db'}") as pair:
        yield pair


def _session(client: TestClient, **body: Any) -> str:
    response = client.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


def _ask(client: TestClient, sid: str) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{sid}/tool-calls",
                           json={"tool": "AskUserQuestion", "input": QUESTION})
    assert response.status_code == 202, response.text
    return dict(response.json())


def _marks(service: SessionService, sid: str) -> tuple[int, int]:
    return service.store.head_position(), service.store.version(sid)


def _error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("body", [None, {}, {"action": "type"}])
def test_ho5_activity_answers_the_interaction_with_its_timer_paused(
    app: tuple[TestClient, SessionService], body: dict[str, Any] | None,
) -> None:
    client, service = app
    sid = _session(client)
    pending = _ask(client, sid)
    before = client.get(f"/v1/sessions/{sid}").json()["interactions"][0]
    url = f"/v1/sessions/{sid}/interactions/{pending['interactionId']}/activity"
    response = client.post(url) if body is None else client.post(url, json=body)
    assert response.status_code == 200, response.text
    wire = response.json()
    assert set(wire) == {"interactionId", "callId", "kind", "payload", "autoResolution"}
    assert wire["autoResolution"] == {**before["autoResolution"], "state": "paused"}
    assert client.get(f"/v1/sessions/{sid}").json()["interactions"] == [wire]
    kinds = [e["type"] for e in client.get(f"/v1/sessions/{sid}/events").json()["events"]]
    assert kinds[-2:] == ["InteractionUserActivity", "InteractionAutoResolutionChanged"]
    action = (body or {}).get("action", "other")
    activity = service.store.read_session(sid, after=len(kinds) - 2, limit=1)
    assert next(activity).data.action == action  # type: ignore[attr-defined]


@pytest.mark.parametrize("body", [
    {"action": "dance"}, {"action": None}, {"extra": 1}, [1], "move",
])
def test_ho5_bad_activity_input_is_422_and_appends_nothing(
    app: tuple[TestClient, SessionService], body: Any,
) -> None:
    client, service = app
    sid = _session(client)
    pending = _ask(client, sid)
    marks = _marks(service, sid)
    response = client.post(
        f"/v1/sessions/{sid}/interactions/{pending['interactionId']}/activity", json=body)
    _error(response, 422, "invalid_input")
    assert _marks(service, sid) == marks


def test_ho5_activity_on_unknown_resolved_or_deleted_is_404_409_410(
    app: tuple[TestClient, SessionService],
) -> None:
    client, service = app
    sid = _session(client)
    pending = _ask(client, sid)
    iid = pending["interactionId"]
    _error(client.post(f"/v1/sessions/{sid}/interactions/int_nope/activity"), 404, "not_found")
    _error(client.post(f"/v1/sessions/sess_nope/interactions/{iid}/activity"), 404,
           "session_not_found")
    response = client.post(f"/v1/sessions/{sid}/interactions/{iid}/respond",
                           json={"decision": "deny"})
    assert response.status_code == 200
    marks = _marks(service, sid)
    _error(client.post(f"/v1/sessions/{sid}/interactions/{iid}/activity"), 409, "conflict")
    assert _marks(service, sid) == marks
    assert client.delete(f"/v1/sessions/{sid}").status_code == 200
    _error(client.post(f"/v1/sessions/{sid}/interactions/{iid}/activity"), 410,
           "session_deleted")


def test_ho6_settings_default_on_partial_put_and_turning_off_pauses(
    app: tuple[TestClient, SessionService],
) -> None:
    client, service = app
    assert client.get("/v1/settings").json() == {"autoContinueQuestions": True}
    assert client.put("/v1/settings", json={}).json() == {"autoContinueQuestions": True}
    assert service.store.session_head("sys_settings") is None  # nothing changed, nothing kept
    sid = _session(client)
    _ask(client, sid)
    response = client.put("/v1/settings", json={"autoContinueQuestions": False})
    assert response.status_code == 200 and response.json() == {"autoContinueQuestions": False}
    (listed,) = client.get(f"/v1/sessions/{sid}").json()["interactions"]
    assert listed["autoResolution"]["state"] == "paused"  # before the answer was sent
    assert client.get("/v1/settings").json() == {"autoContinueQuestions": False}
    events = client.get("/v1/sessions/sys_settings/events").json()["events"]
    assert [(e["type"], e["data"]) for e in events] == [
        ("SettingChanged", {"name": "autoContinueQuestions", "previous": True, "value": False})]
    assert client.get("/v1/sessions/sys_settings").status_code == 404  # not a session
    listed_ids = [s["sessionId"] for s in client.get("/v1/sessions").json()["sessions"]]
    assert "sys_settings" not in listed_ids
    assert client.get("/v1/sessions/sys_settings/audit").json()["ok"] is True


@pytest.mark.parametrize("body", [
    {"autoContinueQuestions": "yes"}, {"autoContinueQuestions": 1},
    {"autoContinueQuestions": None}, {"autoContinue": True}, [True], "off",
])
def test_ho6_bad_settings_are_422_and_append_nothing(
    app: tuple[TestClient, SessionService], body: Any,
) -> None:
    client, service = app
    head = service.store.head_position()
    _error(client.put("/v1/settings", json=body), 422, "invalid_input")
    assert service.store.head_position() == head
    assert client.get("/v1/settings").json() == {"autoContinueQuestions": True}


def test_ho6_the_settings_service_refuses_bad_input_with_details(
    app: tuple[TestClient, SessionService],
) -> None:
    from sessionledger.errors import InvalidInput

    _client, service = app
    with pytest.raises(InvalidInput) as refused:
        service.settings.update({"autoContinueQuestions": "no"})
    assert refused.value.details and "autoContinueQuestions" in refused.value.message
