"""TodoWrite and TodoRead over real HTTP (SPEC §4, §11; issue 5 acceptance 4).

One installed ``sessionledger serve`` (a real uvicorn process) shared by the module. Bad todo
input is a 422 ``invalid_input`` whose details name the field, and the session's event count
does not move; a good write shows in the session document in list order; the tools work in
Plan (TD-3); a deleted session answers 410 and shows no todos.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from server_support import create_session as create

from sessionledger.tools.todo import MAX_TODO_CHARS, MAX_TODOS

COMPLETED_KEYS = {
    "status", "callId", "success", "result", "modelContent", "turnControl", "followUpUserInput",
}


def item(content: str, status: str = "pending", priority: str = "medium") -> dict[str, Any]:
    return {"content": content, "status": status, "priority": priority}


def event_count(http: httpx.Client, sid: str) -> int:
    response = http.get(f"/v1/sessions/{sid}/events", params={"limit": 10000})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["version"] == len(body["events"])
    return len(body["events"])


def call(http: httpx.Client, sid: str, tool: str, raw: Any) -> httpx.Response:
    return http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": tool, "input": raw})


GOOD = [item("design", "completed", "high"), item("build", "in_progress"), item("ship")]

BAD_INPUTS = [
    pytest.param({"todos": [item("")]}, ["todos", 0, "content"], id="empty-content"),
    pytest.param({"todos": [item("a"), item("b", status="done")]}, ["todos", 1, "status"],
                 id="unknown-status"),
    pytest.param({"todos": [item("a", priority="urgent")]}, ["todos", 0, "priority"],
                 id="unknown-priority"),
    pytest.param({"todos": [{**item("a"), "id": "t1"}]}, ["todos", 0, "id"],
                 id="extra-item-field"),
    pytest.param({"todos": [item("a")], "replace": True}, ["replace"], id="extra-top-field"),
    pytest.param({"todos": "design, build"}, ["todos"], id="todos-not-a-list"),
    pytest.param({"todos": {"0": item("a")}}, ["todos"], id="todos-an-object"),
    pytest.param({}, ["todos"], id="missing-todos"),
    pytest.param({"todos": [{"status": "pending", "priority": "low"}]}, ["todos", 0, "content"],
                 id="missing-content"),
    pytest.param({"todos": [item(f"step {n}") for n in range(MAX_TODOS + 1)]}, ["todos"],
                 id="one-item-too-many"),  # issue 41, finding 5
    pytest.param({"todos": [item("x" * (MAX_TODO_CHARS + 1))]}, ["todos", 0, "content"],
                 id="an-item-too-long"),
]


@pytest.mark.parametrize(("raw", "loc"), BAD_INPUTS)
def test_acceptance4_td1_bad_todo_input_is_422_naming_the_field_and_appends_nothing(
    http: httpx.Client, raw: dict[str, Any], loc: list[Any]
) -> None:
    sid = create(http)
    assert call(http, sid, "TodoWrite", {"todos": GOOD}).status_code == 200
    before = event_count(http, sid)
    response = call(http, sid, "TodoWrite", raw)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert "TodoWrite" in error["message"]
    assert loc in [d["loc"] for d in error["details"]], error["details"]
    assert event_count(http, sid) == before
    assert http.get(f"/v1/sessions/{sid}").json()["todos"] == GOOD


def test_a_list_at_the_bounds_is_held_and_one_over_is_refused_naming_them(
        http: httpx.Client) -> None:  # issue 41, finding 5
    sid = create(http)
    longest = [item("x" * MAX_TODO_CHARS)] + [item(f"step {n}") for n in range(MAX_TODOS - 1)]
    assert call(http, sid, "TodoWrite", {"todos": longest}).status_code == 200
    assert len(http.get(f"/v1/sessions/{sid}").json()["todos"]) == MAX_TODOS
    for raw, bound in (({"todos": [*longest, item("one more")]}, f"at most {MAX_TODOS}"),
                       ({"todos": [item("x" * (MAX_TODO_CHARS + 1))]},
                        f"at most {MAX_TODO_CHARS}")):
        response = call(http, sid, "TodoWrite", raw)
        assert response.status_code == 422, response.text
        assert bound in str(response.json()["error"]["details"])
    assert len(http.get(f"/v1/sessions/{sid}").json()["todos"]) == MAX_TODOS


def test_acceptance4_input_that_is_not_an_object_is_422(http: httpx.Client) -> None:
    sid = create(http)
    before = event_count(http, sid)
    response = call(http, sid, "TodoWrite", [item("a")])
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_input"
    assert event_count(http, sid) == before


def test_td3_todo_write_over_http_shows_in_the_session_document_in_order(
    http: httpx.Client,
) -> None:
    sid = create(http)
    assert http.get(f"/v1/sessions/{sid}").json()["todos"] == []
    before = event_count(http, sid)
    response = call(http, sid, "TodoWrite", {"todos": GOOD})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == COMPLETED_KEYS and body["success"] is True
    assert body["result"]["todos"] == GOOD and body["result"]["oldTodos"] == []
    assert body["result"]["summary"] == {
        "pending": 1, "in_progress": 1, "completed": 1, "total": 3,
    }
    assert event_count(http, sid) == before + 4  # one batch: requested, decided, written, done
    document = http.get(f"/v1/sessions/{sid}").json()
    assert document["todos"] == GOOD
    assert [list(t) for t in document["todos"]] == [["content", "status", "priority"]] * 3
    read = call(http, sid, "TodoRead", {}).json()
    assert read["result"]["todos"] == GOOD
    audit = http.get(f"/v1/sessions/{sid}/audit").json()
    assert audit["ok"] is True, audit


@pytest.mark.parametrize("mode", ["plan", "build", "yolo"])
def test_td3_todo_write_is_allowed_in_plan_over_http(http: httpx.Client, mode: str) -> None:
    sid = create(http, mode=mode)
    todos = [item("explore", "in_progress"), item("ask", "in_progress")]  # two: TD-2
    response = call(http, sid, "TodoWrite", {"todos": todos})
    assert response.status_code == 200 and response.json()["success"] is True, response.text
    assert http.get(f"/v1/sessions/{sid}").json()["todos"] == todos


def test_td4_a_deleted_session_answers_410(http: httpx.Client) -> None:
    sid = create(http)
    call(http, sid, "TodoWrite", {"todos": GOOD})
    assert http.delete(f"/v1/sessions/{sid}").status_code == 200
    count = event_count(http, sid)
    for response in (http.get(f"/v1/sessions/{sid}"), call(http, sid, "TodoWrite", {"todos": []}),
                     call(http, sid, "TodoRead", {})):
        assert response.status_code == 410, response.text
        assert response.json()["error"]["code"] == "session_deleted"
    assert event_count(http, sid) == count
