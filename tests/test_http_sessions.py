"""The session endpoints over HTTP: shapes exactly as SPEC §11, errors as JSON, no 500s.

Most tests serve the app in process over a fresh in-memory store; the last one runs the
installed ``sessionledger serve`` command (acceptance: ``make run`` serves GET /v1/sessions).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gate_support import Gate
from hypothesis import given
from hypothesis import strategies as st
from server_support import TestClient, in_process_client, running_server

from eventlog import NewEvent, SessionCreated
from sessionledger import ServerSettings, SessionService
from sessionledger.config import is_loopback
from sessionledger.errors import ConfigurationError

DOCUMENT_KEYS = {
    "sessionId", "version", "workspace", "parentSessionId", "executionState", "displayMode",
    "todos", "interactions",
}
SUMMARY_KEYS = {
    "sessionId", "displayMode", "version", "updatedAt", "parentSessionId", "name", "workspace",
    "pending",
}
ENVELOPE_KEYS = {
    "seq", "globalPosition", "sessionId", "type", "schemaVersion", "data", "recordedAt",
    "actor", "causationId", "correlationId", "prevHash", "hash",
}
INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def served(workspace: Path) -> Iterator[tuple[TestClient, SessionService]]:
    with in_process_client(workspace) as pair:
        yield pair


@pytest.fixture
def client(served: tuple[TestClient, SessionService]) -> TestClient:
    return served[0]


def create(client: TestClient, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = client.post("/v1/sessions", json=body or {})
    assert response.status_code == 201, response.text
    document: dict[str, Any] = response.json()
    return document


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body


# -- create, read, list (SPEC §11, EL "creating a session appends exactly one event") ------


def test_create_returns_201_with_the_session_document(
    served: tuple[TestClient, SessionService], workspace: Path
) -> None:
    client, service = served
    document = create(client)
    assert set(document) == DOCUMENT_KEYS
    assert document["sessionId"].startswith("sess_")
    assert document == {
        "sessionId": document["sessionId"], "version": 1, "workspace": str(workspace),
        "parentSessionId": None,
        "executionState": {"mode": "build", "planEnabled": False, "goal": None},
        "displayMode": "build", "todos": [], "interactions": [],
    }
    (event,) = service.store.read_session(document["sessionId"])
    assert event.type == "SessionCreated" and event.seq == 1


def test_get_returns_the_same_document_as_create(client: TestClient) -> None:
    created = create(client, {"mode": "edit", "host": "tui"})
    response = client.get(f"/v1/sessions/{created['sessionId']}")
    assert response.status_code == 200
    assert response.json() == created
    assert created["executionState"]["mode"] == "edit"


def test_mode_plan_means_build_with_plan_enabled(client: TestClient) -> None:  # ES-1, ES-2
    document = create(client, {"mode": "plan"})
    assert document["executionState"] == {"mode": "build", "planEnabled": True, "goal": None}
    assert document["displayMode"] == "plan"


def test_subagent_of_a_plan_session_starts_in_plan(client: TestClient) -> None:  # ES-7
    parent = create(client, {"mode": "plan"})
    child = create(client, {"parentSessionId": parent["sessionId"], "mode": "yolo"})
    assert child["parentSessionId"] == parent["sessionId"]
    assert child["executionState"] == {"mode": "yolo", "planEnabled": True, "goal": None}


def test_unknown_parent_is_404_and_appends_nothing(
    served: tuple[TestClient, SessionService],
) -> None:
    client, service = served
    response = client.post("/v1/sessions", json={"parentSessionId": "sess_missing"})
    body = assert_error(response, 404, "session_not_found")
    assert body["error"]["details"]["sessionId"] == "sess_missing"
    assert service.store.head_position() == 0


def test_list_is_newest_first_in_the_summary_shape(client: TestClient) -> None:
    first = create(client)
    second = create(client, {"mode": "plan", "parentSessionId": first["sessionId"]})
    response = client.get("/v1/sessions")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"sessions", "next"} and body["next"] is None
    assert [s["sessionId"] for s in body["sessions"]] == [second["sessionId"], first["sessionId"]]
    for summary in body["sessions"]:
        assert set(summary) == SUMMARY_KEYS
        assert INSTANT.match(summary["updatedAt"])
    assert body["sessions"][0]["displayMode"] == "plan"
    assert body["sessions"][0]["parentSessionId"] == first["sessionId"]
    assert body["sessions"][1]["version"] == 1


def _pages(client: TestClient, **params: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = client.get("/v1/sessions", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([s["sessionId"] for s in body["sessions"]])
        cursor = body["next"]
        if cursor is None:
            return pages
        assert len(pages) < 100


@pytest.mark.parametrize("store_url", [
    "memory://", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_the_list_is_read_page_by_page_and_the_waiting_found_alone(  # issue 41
    workspace: Path, tmp_path: Path, store_url: str, request: pytest.FixtureRequest,
) -> None:
    """25 sessions (two deleted, three with a question waiting) read 10 at a time: every
    live one once, newest first, the last page's ``next`` null; ``waiting=true`` pages only
    the three; a session written between pages moves to the front (read again from the top);
    a bad limit or cursor is 422 and changes nothing."""
    if store_url == "sqlite":
        store_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    elif store_url == "postgresql":
        store_url = f"{request.getfixturevalue('pg_database')}?schema=session_pages"
    settings = ServerSettings(workspace_root=workspace, question_grace_s=600,
                              question_deadline_s=1200)
    with in_process_client(workspace, store_url=store_url, settings=settings) as (client, _):
        ids = [create(client)["sessionId"] for _ in range(25)]
        for sid in (ids[0], ids[7]):
            assert client.delete(f"/v1/sessions/{sid}").status_code == 200
        asking = {"tool": "AskUserQuestion", "input": {"questions": [{
            "question": "Which?", "header": "Q", "multiSelect": False,
            "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}],
        }]}}
        for sid in (ids[2], ids[11], ids[20]):
            answer = client.post(f"/v1/sessions/{sid}/tool-calls", json=asking)
            assert answer.status_code == 202, answer.text
        everything = client.get("/v1/sessions", params={"limit": 1000}).json()
        order = [s["sessionId"] for s in everything["sessions"]]
        assert everything["next"] is None and len(order) == 23
        assert order[:3] == [ids[20], ids[11], ids[2]]  # the last written first

        pages = _pages(client, limit=10)
        assert [len(p) for p in pages] == [10, 10, 3]
        assert [sid for page in pages for sid in page] == order
        assert _pages(client, limit=23) == [order]
        waiting = _pages(client, waiting="true", limit=2)
        assert waiting == [[ids[20], ids[11]], [ids[2]]]
        assert client.get("/v1/sessions").json()["next"] is None  # default limit 200

        first = client.get("/v1/sessions", params={"limit": 10}).json()
        moved = order[15]
        assert client.post(f"/v1/sessions/{moved}/messages",
                           json={"role": "user", "content": "still here"}).status_code == 201
        rest = client.get("/v1/sessions", params={"limit": 100, "cursor": first["next"]})
        assert moved not in [s["sessionId"] for s in rest.json()["sessions"]]
        assert client.get("/v1/sessions", params={"limit": 1}).json()["sessions"][0][
            "sessionId"] == moved

        for params in ({"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"limit": "1.0"},
                       {"cursor": "abc"}, {"cursor": "-1"}, {"cursor": "9" * 20},
                       {"cursor": "x" * 40}, {"waiting": "maybe"}):
            assert_error(client.get("/v1/sessions", params=params), 422, "invalid_input")


# -- the workspace root --------------------------------------------------------------------


@pytest.mark.parametrize("outside", ["/", "..", "../elsewhere", "sub/../../x", "link-out"])
def test_workspace_outside_root_is_422_and_appends_nothing(
    served: tuple[TestClient, SessionService], workspace: Path, outside: str
) -> None:
    client, service = served
    (workspace / "link-out").symlink_to(workspace.parent)
    response = client.post("/v1/sessions", json={"workspace": outside})
    assert_error(response, 422, "workspace_outside_root")
    assert service.store.head_position() == 0


def test_workspace_inside_root_is_resolved(client: TestClient, workspace: Path) -> None:
    (workspace / "pkg").mkdir()
    assert create(client, {"workspace": "pkg/./"})["workspace"] == str(workspace / "pkg")
    nested = str(workspace / "pkg" / "new")
    assert create(client, {"workspace": nested})["workspace"] == nested


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b"])
def test_unusable_workspace_is_invalid_input(client: TestClient, bad: str) -> None:
    assert_error(client.post("/v1/sessions", json={"workspace": bad}), 422, "invalid_input")


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "/events", "/events/stream", "/audit"])
def test_unknown_session_is_404_json(client: TestClient, path: str) -> None:
    response = client.get(f"/v1/sessions/sess_nope{path}")
    body = assert_error(response, 404, "session_not_found")
    assert body["error"]["details"] == {"sessionId": "sess_nope"}


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'"text"', b"42", b'{"mode": "plan-ish"}', b'{"unknown": 1}',
     b'{"host": "browser"}', b'{"workspace": 7}', b'{"parentSessionId": []}', b"\xff\xfe"],
)
def test_malformed_body_is_422_invalid_input(
    served: tuple[TestClient, SessionService], content: bytes
) -> None:
    client, service = served
    response = client.post(
        "/v1/sessions", content=content, headers={"content-type": "application/json"}
    )
    body = assert_error(response, 422, "invalid_input")
    assert isinstance(body["error"]["details"], list) and body["error"]["details"]
    assert service.store.head_position() == 0


def test_unknown_route_and_method_are_json_errors(client: TestClient) -> None:
    assert_error(client.get("/v1/nothing"), 404, "not_found")
    assert_error(client.delete("/v1/sessions"), 405, "method_not_allowed")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
create_bodies = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(["plan", "build", "edit", "yolo", "auto", "PLAN", ""]),
        "workspace": st.text(max_size=20) | st.sampled_from(["/", "..", "/tmp", "a/b"]),
        "parentSessionId": st.text(max_size=10) | st.none(),
        "host": st.sampled_from(["protocol", "tui", "headless", "x"]) | json_values,
    },
)


def test_no_create_body_produces_a_500(workspace: Path) -> None:
    with in_process_client(workspace) as (client, _service):

        @given(body=create_bodies | json_values)
        def check(body: Any) -> None:
            response = client.post("/v1/sessions", json=body)
            assert response.status_code in (201, 404, 422), response.text

        check()


def test_no_cursor_produces_a_500(workspace: Path) -> None:
    with in_process_client(workspace) as (client, _service):
        session = create(client)["sessionId"]

        @given(after=st.text(max_size=25), limit=st.text(max_size=25),
               last_id=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=25))
        def check(after: str, limit: str, last_id: str) -> None:
            response = client.get(
                f"/v1/sessions/{session}/events", params={"after": after, "limit": limit}
            )
            assert response.status_code in (200, 422), response.text
            response = client.get(
                "/v1/sessions/sess_x/events/stream", headers={"Last-Event-ID": last_id}
            )
            assert response.status_code in (404, 422), response.text

        check()


# -- events paging ---------------------------------------------------------------------------


def add_events(service: SessionService, session_id: str, count: int) -> None:
    """Extra events for a session (only SessionCreated exists yet; the log accepts it)."""
    for _ in range(count):
        service.store.append(
            session_id, [NewEvent(SessionCreated(workspace="/w"), actor="system")]
        )


def test_events_page_after_and_limit(served: tuple[TestClient, SessionService]) -> None:
    client, service = served
    session = create(client)["sessionId"]
    add_events(service, session, 4)
    response = client.get(f"/v1/sessions/{session}/events", params={"after": 2, "limit": 2})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"events", "version"}
    assert body["version"] == 5
    assert [e["seq"] for e in body["events"]] == [3, 4]
    for envelope in body["events"]:
        assert set(envelope) == ENVELOPE_KEYS
        assert envelope["sessionId"] == session
        assert INSTANT.match(envelope["recordedAt"])
    first = client.get(f"/v1/sessions/{session}/events").json()["events"]
    assert [e["seq"] for e in first] == [1, 2, 3, 4, 5]
    assert first[0]["prevHash"] == "0" * 64 and first[1]["prevHash"] == first[0]["hash"]
    past_end = client.get(f"/v1/sessions/{session}/events", params={"after": 5}).json()
    assert past_end == {"events": [], "version": 5}


def test_events_default_limit_is_1000(served: tuple[TestClient, SessionService]) -> None:
    client, service = served
    session = create(client)["sessionId"]
    service.store.append(
        session,
        [NewEvent(SessionCreated(workspace="/w"), actor="system") for _ in range(1000)],
    )
    body = client.get(f"/v1/sessions/{session}/events").json()
    assert len(body["events"]) == 1000 and body["version"] == 1001
    big = client.get(f"/v1/sessions/{session}/events", params={"limit": 10000}).json()
    assert len(big["events"]) == 1001


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 10001}, {"limit": -1}, {"limit": "many"}, {"after": -1},
     {"after": "x"}, {"after": 2**63}, {"limit": 1.5}],
)
def test_events_bounds_are_invalid_input(client: TestClient, params: dict[str, Any]) -> None:
    session = create(client)["sessionId"]
    response = client.get(f"/v1/sessions/{session}/events", params=params)
    assert_error(response, 422, "invalid_input")


# -- audit, health, auth, logs ---------------------------------------------------------------


def test_audit_of_a_sound_session(client: TestClient) -> None:  # EL-4
    session = create(client)["sessionId"]
    response = client.get(f"/v1/sessions/{session}/audit")
    assert response.status_code == 200
    assert response.json() == {
        "ok": True, "events": 1, "chain": {"ok": True, "firstBadSeq": None},
        "projections": {"ok": True, "differences": []}, "findings": [],
    }


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_head_answers_like_get_without_a_body(client: TestClient) -> None:
    # RFC 9110 9.3.2: GET's status and headers, no content; monitors probe /healthz so.
    session = create(client)["sessionId"]
    for path in ("/healthz", "/v1/sessions", f"/v1/sessions/{session}",
                 f"/v1/sessions/{session}/events", f"/v1/sessions/{session}/audit",
                 "/v1/sessions/sess_none", "/", "/openapi.json", "/v1/settings"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code, path
        assert head.content == b"", path
        for name in ("content-type", "content-length"):
            assert head.headers.get(name) == got.headers.get(name), (path, name)
    events_before = client.get(f"/v1/sessions/{session}/events").json()
    assert client.head(f"/v1/sessions/{session}/events").status_code == 200
    assert client.get(f"/v1/sessions/{session}/events").json() == events_before
    # Event streams never end: HEAD stays refused there, and GET's Allow names HEAD.
    for stream in ("/v1/events/stream", f"/v1/sessions/{session}/events/stream"):
        refused = client.head(stream)
        assert refused.status_code == 405 and refused.headers["allow"] == "GET"
    assert client.post("/healthz").headers["allow"] == "GET, HEAD"


def test_openapi_is_served(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/sessions", "/v1/sessions/{session_id}/events/stream"} <= set(paths)


def test_bearer_token_is_required_when_configured(workspace: Path) -> None:
    settings = ServerSettings(host="0.0.0.0", token="s3cret", workspace_root=workspace)
    with in_process_client(workspace, settings=settings) as (client, _service):
        assert_error(client.get("/v1/sessions"), 401, "unauthorized")
        wrong = client.get("/v1/sessions", headers={"Authorization": "Bearer nope"})
        assert_error(wrong, 401, "unauthorized")
        right = client.get("/v1/sessions", headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200
        assert client.get("/healthz").status_code == 200


def test_non_loopback_binding_requires_a_token(workspace: Path) -> None:
    with pytest.raises(ConfigurationError, match="token"):
        ServerSettings(host="0.0.0.0", workspace_root=workspace)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


def test_one_structured_log_line_per_request(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="sessionledger"):
        response = client.post("/v1/sessions", json={}, headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    requests = [r for r in caplog.records if r.getMessage() == "request"]
    appended = [r for r in caplog.records if r.getMessage() == "appended"]
    assert len(requests) == 1 and len(appended) == 1
    fields = getattr(requests[0], "sessionledger_fields")  # noqa: B009 - set via extra=
    assert fields["requestId"] == "abc-123" and fields["status"] == 201
    assert fields["method"] == "POST" and fields["path"] == "/v1/sessions"
    assert fields["durationMs"] >= 0
    from sessionledger.logs import JsonLineFormatter

    line = json.loads(JsonLineFormatter().format(appended[0]))
    assert line["event"] == "appended" and line["count"] == 1


# -- the installed command (acceptance: make run serves GET /v1/sessions) -------------------


def test_installed_serve_answers_get_sessions(tmp_path: Path) -> None:
    with running_server(tmp_path) as server, server.client() as http:
        assert http.get("/v1/sessions").json() == {"sessions": [], "next": None}
        created = http.post("/v1/sessions", json={"mode": "auto"})
        assert created.status_code == 201
        assert created.json()["workspace"] == str(server.workspace.resolve())
        listed = http.get("/v1/sessions").json()["sessions"]
        assert [s["sessionId"] for s in listed] == [created.json()["sessionId"]]
    assert server.process.returncode == 0


def test_audits_beyond_two_wait_on_the_loop_and_other_routes_answer(  # issue 41
    served: tuple[TestClient, SessionService], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    client, service = served
    sid = create(client)["sessionId"]
    gate = Gate()
    monkeypatch.setattr(service, "audit", gate.wrap(service.audit))
    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(
        client.get(f"/v1/sessions/{sid}/audit").status_code)) for _ in range(6)]
    for thread in threads:
        thread.start()
    try:
        gate.wait_for(2)
        assert gate.running == 2
        assert client.get("/v1/sessions").status_code == 200  # not stuck behind them
        assert client.get(f"/v1/sessions/{sid}").status_code == 200
        assert gate.running == 2
    finally:
        gate.open()
        for thread in threads:
            thread.join()
    assert gate.most == 2 and answers == [200] * 6
