"""The hot tool-call route (issue 24, D193): ``POST …/tool-calls`` answered without FastAPI's
per-request machinery, every request it does not take handed to the FastAPI route.

The property: whatever arrives — any content type, any session id in the path, any JSON text
from outside or bytes that are not UTF-8, a valid call or a mutation of one — the app answers
it exactly as the FastAPI route alone does (the same status; for a refusal the same body; for
a call run, the same outcome). The reference is the same app with the hot route taken out of
the router for the one request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from payload_strategies import RAW_JSON
from server_support import TestClient, in_process_client
from test_hostile_input import HOSTILE_TEXT, VALID_INPUTS, mutations

from sessionledger import SessionService
from sessionledger.http.routes import TOOL_CALLS_PATH, HotToolCalls
from sessionledger.http.schemas import MAX_ID_CHARS

Served = tuple[TestClient, SessionService]
TOOLS = ("TodoWrite", "TodoRead", "EnterPlanMode")
"""Tools whose calls end at once in a ``yolo`` session (no question left waiting)."""

CONTENT_TYPES = st.sampled_from([
    "application/json", "application/json; charset=utf-8", "Application/JSON", " application/json",
    "application/vnd.api+json", "application/json garbage", "text/plain", "", None,
])
BODIES = st.one_of(
    st.tuples(st.sampled_from(TOOLS), st.sampled_from(TOOLS).flatmap(
        lambda tool: mutations(VALID_INPUTS[tool]))).map(
        lambda t: httpx.Request("POST", "/", json={"tool": t[0], "input": t[1]}).content),
    st.fixed_dictionaries({"tool": st.sampled_from(TOOLS) | HOSTILE_TEXT},
                          optional={"input": st.just({}) | st.integers(),
                                    "callId": st.text(max_size=3) | st.integers(),
                                    "extra": st.none()}).map(
        lambda body: httpx.Request("POST", "/", json=body).content),
    RAW_JSON.map(str.encode),
    st.binary(max_size=40),
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    root = tmp_path / "root"
    root.mkdir()
    url = f"sqlite:///{tmp_path / 'ledger.db'}?synchronous=normal"
    with in_process_client(root, store_url=url) as pair:
        yield pair


def _post(client: TestClient, session: str, body: bytes, content_type: str | None,
          *, hot: bool) -> httpx.Response:
    routes = client.app.router.routes  # type: ignore[attr-defined]
    taken = None if hot else routes.pop(0)
    try:
        headers = {} if content_type is None else {"content-type": content_type}
        return client.post(f"/v1/sessions/{session}/tool-calls", content=body, headers=headers)
    finally:
        if taken is not None:
            routes.insert(0, taken)


def _outcome(response: httpx.Response) -> Any:
    """What must be the same either way: a refusal whole, a call's status and result."""
    if response.status_code >= 300:
        return response.status_code, response.content
    body = response.json()
    return response.status_code, body["status"], body.get("success"), body.get("result"), body.get(
        "modelContent")


def test_the_hot_route_is_tried_first_and_the_route_documented_stays(served: Served) -> None:
    client, _service = served
    first = client.app.router.routes[0]  # type: ignore[attr-defined]
    assert first.path == TOOL_CALLS_PATH and isinstance(first.app, HotToolCalls)
    documented = client.get("/openapi.json").json()["paths"][TOOL_CALLS_PATH]
    assert set(documented) == {"post"} and "202" in documented["post"]["responses"]


@given(body=BODIES, content_type=CONTENT_TYPES, which=st.sampled_from(
    ["session", "unknown", "long", "dots", "unicode"]))
@example(body=b'{"tool": "TodoRead", "input": {}}', content_type="application/json",
         which="session")
@example(body=b'{"tool": "TodoRead", "input": {}}', content_type="text/plain", which="session")
@example(body=b'{"tool": "TodoRead", "input": {}}', content_type="application/json",
         which="long")
@example(body=b'{"tool": "TodoRead", "input": {"a": NaN}}', content_type="application/json",
         which="session")
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
def test_any_request_is_answered_as_the_fastapi_route_answers_it(  # issue 24, EG-1
    served: Served, body: bytes, content_type: str | None, which: str
) -> None:
    client, _service = served
    hot_id, reference_id = (  # two sessions in the same state: each call sees its own
        {"session": client.post("/v1/sessions", json={"mode": "yolo"}).json()["sessionId"],
         "unknown": "sess_01NOSUCHSESSION", "long": "s" * (MAX_ID_CHARS + 1), "dots": "..",
         "unicode": "séss\u202e"}[which] for _ in range(2))
    hot = _post(client, hot_id, body, content_type, hot=True)
    reference = _post(client, reference_id, body, content_type, hot=False)
    assert hot.status_code < 500, hot.text
    assert _outcome(hot) == _outcome(reference)
    assert hot.headers.get("content-type") == reference.headers.get("content-type")


def test_a_body_over_the_cap_is_413_on_the_hot_route(served: Served) -> None:
    client, _service = served
    session = client.post("/v1/sessions", json={"mode": "yolo"}).json()["sessionId"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it is read
        yield b'{"tool": "TodoWrite", "input": {"todos": [], "pad": "'
        for _ in range(70):
            yield b"x" * 16_384
        yield b'"}}'

    response = client.post(f"/v1/sessions/{session}/tool-calls", content=chunks(),
                           headers={"content-type": "application/json"})
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "payload_too_large"


def test_a_client_gone_mid_body_is_answered_as_the_fastapi_route_answers_it(
    served: Served,
) -> None:
    """The body stops half way with ``http.disconnect``: both routes answer alike (the status
    the request log records), and nothing is appended."""
    client, service = served
    session = client.post("/v1/sessions", json={"mode": "yolo"}).json()["sessionId"]
    app = client.app
    routes = app.router.routes  # type: ignore[attr-defined]
    path = f"/v1/sessions/{session}/tool-calls"

    def answer(hot: bool) -> list[Any]:
        messages = iter([
            {"type": "http.request", "body": b'{"tool": "TodoRead", ', "more_body": True},
        ])
        sent: list[Any] = []

        async def receive() -> Any:
            return next(messages, {"type": "http.disconnect"})

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": path,
                 "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 5555),
                 "headers": [(b"host", b"127.0.0.1:8765"),
                             (b"content-type", b"application/json")]}
        taken = None if hot else routes.pop(0)
        try:
            client.portal.call(app, scope, receive, send)  # type: ignore[union-attr]
        finally:
            if taken is not None:
                routes.insert(0, taken)
        return [(m["type"], m.get("status"), m.get("body")) for m in sent]

    version = service.store.version(session)
    hot = answer(hot=True)
    assert hot == answer(hot=False) and hot[0][1] == 400
    assert service.store.version(session) == version
