"""Execution-state commands and the session lifecycle over HTTP (SPEC §3 ES-1…ES-7, §11).

The behaviour tests run against the installed ``sessionledger serve`` (one real uvicorn
subprocess for the module); the error-shape checks and the internal service paths
(EnterPlanMode tool, plan approval) run in process over the in-memory store.

Acceptance (ES-5): entering Plan during a goal over HTTP — ``POST …/mode`` with ``plan`` and
Shift+Tab (``cycle``) from ``yolo`` — is 409 with exactly "Plan and Goal cannot be active at
the same time." and the session's event count is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from hypothesis import given
from hypothesis import strategies as st
from server_support import TestClient, in_process_client
from server_support import create_session as create

from sessionledger import SessionService
from sessionledger.errors import CommandRefused

PLAN_GOAL = "Plan and Goal cannot be active at the same time."


def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    document: dict[str, Any] = response.json()
    return document


def events(http: httpx.Client | TestClient, session_id: str) -> list[dict[str, Any]]:
    body = ok(http.get(f"/v1/sessions/{session_id}/events"))
    assert body["version"] == len(body["events"])
    listed: list[dict[str, Any]] = body["events"]
    return listed


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"code", "message", "details"} and error["code"] == code
    return error


def state(document: dict[str, Any]) -> tuple[str, str, bool, Any]:
    execution = document["executionState"]
    assert set(execution) == {"mode", "planEnabled", "goal"}  # ES-1, exactly these keys
    return document["displayMode"], execution["mode"], execution["planEnabled"], execution["goal"]


# -- modes (ES-1, ES-3, ES-4) ----------------------------------------------------------------


def test_mode_command_and_cycle_walk_the_display_modes(http: httpx.Client) -> None:  # ES-4
    session = create(http)
    mode = f"/v1/sessions/{session}/mode"
    assert state(ok(http.post(mode, json={"mode": "yolo"}))) == ("yolo", "yolo", False, None)
    # Shift+Tab from yolo enters Plan, keeping yolo underneath (ES-3: Plan is a switch)
    assert state(ok(http.post(mode, json={"cycle": True}))) == ("plan", "yolo", True, None)
    assert state(ok(http.post(mode, json={"cycle": True}))) == ("build", "build", False, None)
    assert state(ok(http.post(mode, json={"cycle": True}))) == ("edit", "edit", False, None)
    assert state(ok(http.post(mode, json={"mode": "auto"}))) == ("auto", "auto", False, None)
    assert state(ok(http.post(mode, json={"cycle": True}))) == ("plan", "auto", True, None)
    # /mode X leaves Plan and sets X
    document = ok(http.post(mode, json={"mode": "edit"}))
    assert state(document) == ("edit", "edit", False, None)
    assert document == ok(http.get(f"/v1/sessions/{session}"))  # read from the projection
    changes = [e for e in events(http, session) if e["type"] == "SessionModeChanged"]
    assert [e["data"]["via"] for e in changes] == [
        "mode_command", "cycle", "cycle", "cycle", "mode_command", "cycle", "mode_command",
    ]
    assert {e["actor"] for e in changes} == {"user"}
    assert changes[1]["data"] == {
        "mode": "yolo", "planEnabled": True, "previousMode": "yolo",
        "previousPlanEnabled": False, "via": "cycle",
    }


def test_plan_with_a_task_records_it_as_a_user_message(http: httpx.Client) -> None:  # ES-4
    session = create(http, mode="edit")
    document = ok(http.post(f"/v1/sessions/{session}/mode",
                            json={"mode": "plan", "task": "Split the parser module"}))
    assert state(document) == ("plan", "edit", True, None)
    assert document["version"] == 3
    changed, message = events(http, session)[1:]
    assert changed["type"] == "SessionModeChanged" and changed["data"]["via"] == "plan_command"
    assert message["type"] == "MessageRecorded" and message["actor"] == "user"
    assert message["data"]["role"] == "user" and message["data"]["kind"] == "real"
    assert message["data"]["content"] == "Split the parser module"


def test_mode_plan_without_task_is_the_mode_command(http: httpx.Client) -> None:  # ES-4
    session = create(http)
    ok(http.post(f"/v1/sessions/{session}/mode", json={"mode": "plan"}))
    assert events(http, session)[-1]["data"]["via"] == "mode_command"


def test_mode_plan_while_in_plan_appends_no_event(http: httpx.Client) -> None:  # ES-3
    session = create(http, mode="plan")
    before = events(http, session)
    document = ok(http.post(f"/v1/sessions/{session}/mode", json={"mode": "plan"}))
    assert state(document) == ("plan", "build", True, None) and document["version"] == 1
    assert events(http, session) == before
    # /plan with a task in Plan: the task is still recorded, but no state event (ES-3)
    ok(http.post(f"/v1/sessions/{session}/mode", json={"mode": "plan", "task": "next step"}))
    assert [e["type"] for e in events(http, session)] == ["SessionCreated", "MessageRecorded"]


def test_same_mode_again_appends_no_event(http: httpx.Client) -> None:  # ES-3
    session = create(http, mode="yolo")
    assert ok(http.post(f"/v1/sessions/{session}/mode", json={"mode": "yolo"}))["version"] == 1


# -- goals and Plan/Goal exclusivity (ES-5) --------------------------------------------------


def test_goal_start_and_end(http: httpx.Client) -> None:
    session = create(http, mode="yolo")
    goal = f"/v1/sessions/{session}/goal"
    started = ok(http.post(goal, json={"objective": "Make the suite green"}))
    assert state(started) == ("yolo", "yolo", False, {"objective": "Make the suite green"})
    # a mode change keeps the goal
    moved = ok(http.post(f"/v1/sessions/{session}/mode", json={"mode": "edit"}))
    assert moved["executionState"]["goal"] == {"objective": "Make the suite green"}
    ended = ok(http.delete(goal))
    assert state(ended) == ("edit", "edit", False, None)
    types = [(e["type"], e["actor"]) for e in events(http, session)]
    assert types == [("SessionCreated", "host"), ("GoalStarted", "user"),
                     ("SessionModeChanged", "user"), ("GoalEnded", "user")]


def test_ending_a_goal_when_there_is_none_is_409(http: httpx.Client) -> None:
    session = create(http)
    error = assert_error(http.delete(f"/v1/sessions/{session}/goal"), 409, "refused")
    assert error["details"] == {"reason": "no_goal"}
    assert len(events(http, session)) == 1


def test_a_second_goal_is_409(http: httpx.Client) -> None:
    session = create(http)
    goal = f"/v1/sessions/{session}/goal"
    ok(http.post(goal, json={"objective": "first"}))
    assert_error(http.post(goal, json={"objective": "second"}), 409, "refused")
    assert len(events(http, session)) == 2


@pytest.mark.parametrize(
    ("setup_mode", "command"),
    [
        ("build", {"mode": "plan"}),
        ("edit", {"mode": "plan", "task": "plan the refactor"}),
        ("yolo", {"cycle": True}),  # Shift+Tab from yolo would enter Plan: no skipping ahead
        ("auto", {"cycle": True}),
    ],
)
def test_acceptance_entering_plan_during_a_goal_is_409_and_appends_nothing(
    http: httpx.Client, setup_mode: str, command: dict[str, Any]
) -> None:  # ES-5 (acceptance)
    session = create(http, mode=setup_mode)
    ok(http.post(f"/v1/sessions/{session}/goal", json={"objective": "ship it"}))
    before = events(http, session)
    document_before = ok(http.get(f"/v1/sessions/{session}"))
    response = http.post(f"/v1/sessions/{session}/mode", json=command)
    error = assert_error(response, 409, "refused")
    assert error["message"] == PLAN_GOAL
    assert error["details"] == {"reason": "plan_goal_exclusive"}
    assert events(http, session) == before  # event count (and every event) unchanged
    assert ok(http.get(f"/v1/sessions/{session}")) == document_before


def test_starting_a_goal_in_plan_is_409_and_appends_nothing(http: httpx.Client) -> None:  # ES-5
    session = create(http, mode="plan")
    error = assert_error(
        http.post(f"/v1/sessions/{session}/goal", json={"objective": "x"}), 409, "refused"
    )
    assert error["message"] == PLAN_GOAL
    assert len(events(http, session)) == 1


def test_cycle_during_a_goal_from_build_keeps_the_goal(http: httpx.Client) -> None:  # ES-4/5
    session = create(http)
    ok(http.post(f"/v1/sessions/{session}/goal", json={"objective": "keep going"}))
    document = ok(http.post(f"/v1/sessions/{session}/mode", json={"cycle": True}))
    assert state(document) == ("edit", "edit", False, {"objective": "keep going"})


# -- creation: legacy plan (ES-2), subagents (ES-7) ------------------------------------------


def test_legacy_mode_plan_at_creation_is_build_with_plan_on(http: httpx.Client) -> None:  # ES-2
    session = create(http, mode="plan")
    assert state(ok(http.get(f"/v1/sessions/{session}"))) == ("plan", "build", True, None)
    (created,) = events(http, session)
    assert created["data"]["executionState"] == {
        "mode": "build", "planEnabled": True, "goal": None,
    }  # plan is never written as a permission mode


def test_subagent_snapshots_the_parents_plan_switch(http: httpx.Client) -> None:  # ES-7
    parent = create(http, mode="yolo")
    ok(http.post(f"/v1/sessions/{parent}/mode", json={"cycle": True}))  # Plan on, yolo under
    child = ok(http.post("/v1/sessions", json={"parentSessionId": parent}), 201)
    assert state(child) == ("plan", "yolo", True, None)
    with_mode = ok(
        http.post("/v1/sessions", json={"parentSessionId": parent, "mode": "edit"}), 201
    )
    assert state(with_mode) == ("plan", "edit", True, None)  # a mode sets only what's under
    ok(http.post(f"/v1/sessions/{parent}/mode", json={"mode": "build"}))
    # a snapshot at spawn: the parent leaving Plan does not change the child
    assert state(ok(http.get(f"/v1/sessions/{child['sessionId']}")))[2] is True


def test_subagent_never_inherits_the_goal(http: httpx.Client) -> None:  # ES-7
    parent = create(http)
    ok(http.post(f"/v1/sessions/{parent}/goal", json={"objective": "parent's own"}))
    child = ok(http.post("/v1/sessions", json={"parentSessionId": parent}), 201)
    assert state(child) == ("build", "build", False, None)


# -- lifecycle: delete answers 410 afterwards ------------------------------------------------


def test_delete_then_the_sessions_routes_answer_410(http: httpx.Client) -> None:
    session = create(http)
    ok(http.post(f"/v1/sessions/{session}/mode", json={"mode": "edit"}))
    deleted = ok(http.delete(f"/v1/sessions/{session}"))
    assert deleted == {"sessionId": session, "deleted": True, "version": 3}
    base = f"/v1/sessions/{session}"
    gone = [
        http.get(base), http.delete(base), http.get(f"{base}/events/stream"),
        http.post(f"{base}/mode", json={"mode": "plan"}), http.post(f"{base}/mode",
                                                                     json={"cycle": True}),
        http.post(f"{base}/goal", json={"objective": "x"}), http.delete(f"{base}/goal"),
        http.post("/v1/sessions", json={"parentSessionId": session}),
    ]
    for response in gone:
        error = assert_error(response, 410, "session_deleted")
        assert error["details"] == {"sessionId": session}
    # its events and its audit stay readable until purged; nothing was appended by the 410s
    log = events(http, session)
    assert [e["type"] for e in log][-1] == "SessionDeleted" and len(log) == 3
    assert log[-1]["actor"] == "user"
    audit = ok(http.get(f"{base}/audit"))
    assert audit["ok"] is True and audit["events"] == 3
    listed = [s["sessionId"] for s in ok(http.get("/v1/sessions"))["sessions"]]
    assert session not in listed


def test_an_open_stream_ends_after_the_deletion(http: httpx.Client) -> None:
    session = create(http)
    seen: list[str] = []
    timeout = httpx.Timeout(10.0, read=8.0)
    with httpx.Client(base_url=str(http.base_url), timeout=timeout) as streaming, connect_sse(
        streaming, "GET", f"/v1/sessions/{session}/events/stream"
    ) as source:
        for sse in source.iter_sse():
            seen.append(sse.event)
            if sse.event == "SessionCreated":
                ok(http.delete(f"/v1/sessions/{session}"))
    assert seen == ["SessionCreated", "SessionDeleted"]  # and then the server closed it


# -- error shapes and internal paths, in process ---------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, SessionService]]:
    with in_process_client(tmp_path) as pair:
        yield pair


@pytest.mark.parametrize(
    "body",
    [{}, {"mode": "plan", "cycle": True}, {"cycle": False}, {"cycle": "true"}, {"cycle": 1},
     {"mode": "build", "task": "x"}, {"cycle": True, "task": "x"}, {"mode": "plan", "task": ""},
     {"mode": "plan", "task": "   "}, {"mode": "PLAN"}, {"mode": None}, {"mode": "plan", "x": 1},
     [], "plan"],
)
def test_bad_mode_bodies_are_422_and_append_nothing(
    served: tuple[TestClient, SessionService], body: Any
) -> None:
    client, service = served
    session = create(client)
    response = client.post(f"/v1/sessions/{session}/mode", json=body)
    assert_error(response, 422, "invalid_input")
    assert service.store.version(session) == 1


@pytest.mark.parametrize(
    "body", [{}, {"objective": ""}, {"objective": " \n"}, {"objective": 5}, {"goal": "x"}, []]
)
def test_bad_goal_bodies_are_422(served: tuple[TestClient, SessionService], body: Any) -> None:
    client, service = served
    session = create(client)
    response = client.post(f"/v1/sessions/{session}/goal", json=body)
    assert_error(response, 422, "invalid_input")
    assert service.store.version(session) == 1


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/mode", {"mode": "edit"}), ("POST", "/goal", {"objective": "x"}),
     ("DELETE", "/goal", None), ("DELETE", "", None)],
)
def test_unknown_session_commands_are_404(
    served: tuple[TestClient, SessionService], method: str, path: str, body: Any
) -> None:
    client, _service = served
    response = client.request(method, f"/v1/sessions/sess_nope{path}", json=body)
    assert_error(response, 404, "session_not_found")


def test_no_mode_body_produces_a_500(tmp_path: Path) -> None:
    with in_process_client(tmp_path) as (client, _service):
        session = create(client)
        values = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
        bodies = st.fixed_dictionaries({}, optional={
            "mode": st.sampled_from(["plan", "build", "edit", "yolo", "auto"]) | values,
            "cycle": values, "task": values,
        })

        @given(body=bodies | values)
        def check(body: Any) -> None:
            response = client.post(f"/v1/sessions/{session}/mode", json=body)
            assert response.status_code in (200, 409, 422), response.text

        check()


def test_enter_plan_tool_and_plan_approval(served: tuple[TestClient, SessionService]) -> None:
    client, service = served  # the internal paths later issues call (ES-3)
    session = create(client, mode="yolo")
    entered = service.enter_plan_tool(session, causation_id="call_1")
    assert (entered.state.plan_enabled, entered.state.mode) == (True, "yolo")
    (event,) = entered.events
    assert (event.actor, event.causation_id, event.type) == ("model", "call_1",
                                                              "SessionModeChanged")
    assert json.loads(json.dumps(event.to_wire()["data"]))["via"] == "enter_plan_tool"
    again = service.enter_plan_tool(session)  # EnterPlanMode in Plan: succeeds, no event
    assert again.events == () and again.state.plan_enabled
    approved = service.approve_plan_exit(session)
    assert (approved.state.mode, approved.state.plan_enabled) == ("yolo", False)  # back to yolo
    assert approved.events[0].to_wire()["data"]["via"] == "plan_approval"
    with pytest.raises(CommandRefused) as refused:
        service.approve_plan_exit(session)
    assert refused.value.reason == "not_in_plan"
    service.start_goal(session, "long task")
    with pytest.raises(CommandRefused, match=PLAN_GOAL):  # ES-5 by the tool path too
        service.enter_plan_tool(session)
    assert service.document(session)["executionState"]["planEnabled"] is False
