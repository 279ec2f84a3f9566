"""The turn-loop routes over real HTTP (SPEC §11; TD-5, PM-5): the installed ``serve``.

One uvicorn subprocess serves the module: messages (201 with where they landed), compact,
prepare-request and its wire shape, strict bodies (422 ``invalid_input``, nothing appended),
404 and 410. A server of its own is stopped and started again over the same database to show
that the counters behind the reminders survive a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ServerProcess, running_server
from server_support import create_session as create
from server_support import session_version as version

from eventlog import NewEvent, TodoItemData, TodosWritten

TODO_OPENING = "The TodoWrite tool hasn't been used recently."
PLAN_OPENING = (
    "Plan mode is active. The user indicated that they do not want you to execute yet -- you "
    "MUST NOT make any edits, run any non-readonly tools (including changing configs or making "
    "commits), or otherwise make any changes to the system."
)
REMINDER_KEYS = {"kind", "variant", "text"}


def say(http: httpx.Client, sid: str, role: str, count: int = 1, **extra: Any) -> None:
    for i in range(count):
        body = {"role": role, "content": f"{role} {i}", **extra}
        response = http.post(f"/v1/sessions/{sid}/messages", json=body)
        assert response.status_code == 201, response.text


def prepare(http: httpx.Client, sid: str, tools: list[str], **extra: Any) -> list[dict[str, Any]]:
    response = http.post(f"/v1/sessions/{sid}/prepare-request", json={"tools": tools, **extra})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"reminders"}
    reminders: list[dict[str, Any]] = body["reminders"]
    for reminder in reminders:
        assert set(reminder) == REMINDER_KEYS
    return reminders


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"code", "message", "details"} and error["code"] == code
    return error


def test_a_message_is_201_with_its_seq_and_the_version(http: httpx.Client) -> None:
    sid = create(http)
    response = http.post(f"/v1/sessions/{sid}/messages",
                         json={"role": "assistant", "content": "on it", "continuation": False})
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"sessionId", "seq", "version", "recordedAt"}
    assert body["sessionId"] == sid and body["seq"] == body["version"] == 2
    (event,) = http.get(f"/v1/sessions/{sid}/events", params={"after": 1}).json()["events"]
    assert event["type"] == "MessageRecorded" and event["actor"] == "model"
    assert event["data"] == {"role": "assistant", "kind": "real", "continuation": False,
                             "content": "on it", "source": None}


def test_compact_is_200_and_records_context_compacted(http: httpx.Client) -> None:
    sid = create(http)
    for body in (None, {}):
        response = http.post(f"/v1/sessions/{sid}/compact", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["version"] == version(http, sid)
    events = http.get(f"/v1/sessions/{sid}/events").json()["events"]
    assert [e["type"] for e in events[1:]] == ["ContextCompacted"] * 2


def test_pm5_plan_reminders_over_http(http: httpx.Client) -> None:
    sid = create(http, mode="plan")
    (first,) = prepare(http, sid, ["TodoWrite"])
    assert (first["kind"], first["variant"]) == ("runtime_mode", "full")
    assert first["text"].startswith(PLAN_OPENING)
    assert prepare(http, sid, ["TodoWrite"]) == []  # recorded: not idempotent
    say(http, sid, "user", 4)
    assert prepare(http, sid, []) == []
    say(http, sid, "user")
    assert [r["variant"] for r in prepare(http, sid, [])] == ["sparse"]
    response = http.post(f"/v1/sessions/{sid}/mode", json={"mode": "build"})
    assert response.status_code == 200, response.text
    (left,) = prepare(http, sid, [], continuation=True)
    assert (left["kind"], left["variant"]) == ("plan_exit", None)
    assert prepare(http, sid, []) == []


def test_td5_todo_reminder_over_http_with_the_synthetic_notice(
    http: httpx.Client, server: ServerProcess
) -> None:
    sid = create(http)
    store = server.open_store()  # a second writer, with the projections attached
    try:
        items = (TodoItemData(content="wire it", status="in_progress", priority="high"),)
        store.append(sid, [NewEvent(TodosWritten(todos=items), actor="model")])
    finally:
        store.close()
    say(http, sid, "assistant", 9)
    say(http, sid, "assistant", 3, continuation=True)
    say(http, sid, "user", 3)
    assert prepare(http, sid, ["TodoWrite"]) == []
    say(http, sid, "assistant")
    assert prepare(http, sid, ["Read"]) == []
    assert prepare(http, sid, ["TodoWrite"], continuation=True) == []
    (reminder,) = prepare(http, sid, ["TodoWrite"])
    assert reminder["kind"] == "todo_reminder" and reminder["variant"] is None
    assert reminder["text"].startswith(TODO_OPENING)
    assert reminder["text"].endswith("\n\n1. [in_progress] wire it")
    injected, notice = http.get(f"/v1/sessions/{sid}/events").json()["events"][-2:]
    assert injected["type"] == "ReminderInjected" and injected["data"]["text"] == reminder["text"]
    assert notice["data"] == {"role": "user", "kind": "synthetic", "continuation": False,
                              "content": reminder["text"], "source": "todo_reminder"}


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("messages", {"role": "assistant", "content": "   "}),
        ("messages", {"role": "assistant", "content": ""}),
        ("messages", {"role": "system", "content": "hi"}),
        ("messages", {"role": "user"}),
        ("messages", {"role": "user", "content": "hi", "continuation": "no"}),
        ("messages", {"role": "user", "content": "hi", "kind": "synthetic"}),
        ("compact", {"reason": "full"}),
        ("compact", []),
        ("prepare-request", {}),
        ("prepare-request", {"tools": "TodoWrite"}),
        ("prepare-request", {"tools": ["TodoWrite", " "]}),
        ("prepare-request", {"tools": [""]}),
        ("prepare-request", {"tools": [1]}),
        ("prepare-request", {"tools": [], "continuation": 1}),
        ("prepare-request", {"tools": [], "extra": True}),
    ],
)
def test_strict_bodies_are_422_and_append_nothing(
    http: httpx.Client, route: str, body: Any
) -> None:
    sid = create(http, mode="plan")
    error = assert_error(http.post(f"/v1/sessions/{sid}/{route}", json=body), 422,
                         "invalid_input")
    assert error["details"]
    assert version(http, sid) == 1


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("messages", {"role": "user", "content": "hi"}),
        ("compact", {}),
        ("prepare-request", {"tools": ["TodoWrite"]}),
    ],
)
def test_unknown_session_404_deleted_410(http: httpx.Client, route: str, body: Any) -> None:
    assert_error(http.post(f"/v1/sessions/sess_nope/{route}", json=body), 404,
                 "session_not_found")
    sid = create(http, mode="plan")
    assert http.delete(f"/v1/sessions/{sid}").status_code == 200
    assert_error(http.post(f"/v1/sessions/{sid}/{route}", json=body), 410, "session_deleted")
    assert version(http, sid) == 2


@pytest.mark.slow  # a server killed or restarted under load: make verify (D182)
def test_counters_survive_a_server_restart(tmp_path: Path) -> None:
    with running_server(tmp_path) as first, first.client() as http:
        sid = create(http, mode="plan")
        prepare(http, sid, [])
        say(http, sid, "user", 4)
        say(http, sid, "assistant", 10)
    with running_server(tmp_path) as second, second.client() as http:
        assert prepare(http, sid, []) == []  # 4 user messages: still not enough
        say(http, sid, "user")
        reminders = prepare(http, sid, ["TodoWrite"])
        assert [(r["kind"], r["variant"]) for r in reminders] == [
            ("runtime_mode", "sparse"), ("todo_reminder", None),
        ]
        audit = http.get(f"/v1/sessions/{sid}/audit").json()
        assert audit["ok"] is True, audit
