"""Hostile input over HTTP (issue #10): nothing a client sends gives a 5xx or escapes its box.

What other suites already hold is not repeated here: workspaces such as ``/``, ``..`` or a
symlink out of the root (``test_http_sessions.py``), plan file names built from any session
id (``test_plan_files.py``), forbidden tags in previews (``test_ask_user_question.py``),
another workspace's session read in process (``test_read_session_context.py``) and the page
rendering plans and previews in a browser (``tests/browser/``). This file adds:

* every tool offered to a session, fed hypothesis-generated inputs (mutations of a valid one)
  through ``POST …/tool-calls``: never a 5xx; a bad input is 422 ``invalid_input`` naming the
  field, and the log does not grow;
* bodies over the cap (413, with and without ``Content-Length``, in process and on the wire)
  and strings over their limits (422 naming the field, the limit itself accepted);
* session ids with ``..``, ``%2e%2e``, NUL, slashes or 10,000 characters, and any string as a
  workspace: a clean 4xx, and nothing outside the workspace root;
* plans approved into a workspace whose ``.zcode`` or plan file is a symlink out of it;
* HTML and script in previews and plans: stored and served verbatim as JSON, never inserted
  into the page; the page's Markdown renderer (run by node) emits only its own tags;
* ReadSessionContext naming a session of a parent, child or sibling workspace over HTTP.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from httpx_sse import connect_sse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from payload_strategies import RAW_JSON
from server_support import (
    ServerProcess,
    TestClient,
    in_process_client,
    running_server,
    sessionledger_command,
)
from tool_support import CATALOG_TOML, write_config

from sessionledger import SessionService
from sessionledger.http.middleware import MAX_BODY_BYTES
from sessionledger.http.schemas import MAX_ID_CHARS, MAX_TEXT_CHARS
from sessionledger.tools.plan import PLAN_MAX
from sessionledger.web import STATIC_DIR

Served = tuple[TestClient, SessionService]

QUESTION = "Which database?"
ASK: dict[str, Any] = {"questions": [{
    "question": QUESTION, "header": "Database", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "one file"},
                {"label": "Postgres", "description": "a server"}],
}]}
VALID_INPUTS: dict[str, dict[str, Any]] = {
    "TodoRead": {},
    "TodoWrite": {"todos": [
        {"content": "Write the tests", "status": "in_progress", "priority": "high"},
        {"content": "Ship", "status": "pending", "priority": "low"},
    ]},
    "AskUserQuestion": ASK,
    "EnterPlanMode": {},
    "ExitPlanMode": {"plan": "# Plan\n1. step", "allowedPrompts": [
        {"tool": "Bash", "prompt": "run the tests"}]},
    "ReadSessionContext": {"sessionId": "sess_01NOSUCHSESSION", "query": "what was decided",
                           "strategy": "handoff", "maxTokens": 200},
    "ListModels": {},
    "CronCreate": {"cron": "*/15 9-17 * * 1-5", "prompt": "check the build", "recurring": True},
    "CronList": {},
    "CronUpdate": {"id": "cron_1", "cron": "0 9 * * *", "prompt": "later", "enabled": False},
    "CronDelete": {"id": "cron_1"},
    "OffPeakCreate": {"prompt": "run the long benchmark"},
    "OffPeakList": {},
}
"""A valid input of every tool a protocol session is offered (TR-1), to mutate."""

HOSTILE_TEXT = st.sampled_from([
    "", " ", "\x00", "../../etc/passwd", "%2e%2e/", "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>", "\u202e", "\ud7ff", "😀" * 3, "a" * (MAX_TEXT_CHARS + 1),
    "Other", "sess_../x", "* * * * *", "9" * 30,
])
JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20), HOSTILE_TEXT,
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)


def mutations(value: Any) -> st.SearchStrategy[Any]:
    """``value`` itself, another JSON value, or ``value`` with one part changed, removed or
    added, at any depth."""
    options: list[st.SearchStrategy[Any]] = [st.just(value), JSON_VALUES]
    if isinstance(value, dict) and value:
        keys = sorted(value)
        options += [
            st.sampled_from(keys).flatmap(
                lambda k: mutations(value[k]).map(lambda new: {**value, k: new})),
            st.sampled_from(keys).map(lambda k: {n: v for n, v in value.items() if n != k}),
            st.tuples(st.text(max_size=10), JSON_VALUES).map(
                lambda kv: {**value, kv[0]: kv[1]}),
        ]
    if isinstance(value, list) and value:
        options += [
            st.integers(0, len(value) - 1).flatmap(lambda i: mutations(value[i]).map(
                lambda new: [*value[:i], new, *value[i + 1:]])),
            JSON_VALUES.map(lambda extra: [*value, extra]),
            st.just(value * 3),
        ]
    if isinstance(value, str):
        options.append(HOSTILE_TEXT)
    return st.one_of(options)


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The SPEC §11 error body of ``response``, which must have ``status`` and ``code``."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]


def names_a_field(error: dict[str, Any], *fields: str) -> None:
    """A 422's details point at the failing fields (``loc``), each given one present."""
    details = error["details"]
    assert isinstance(details, list) and details, error
    locations = [detail["loc"] for detail in details]
    assert all(isinstance(loc, list) for loc in locations), error
    for name in fields:
        assert any(name in loc for loc in locations), (name, error)


def version(client: TestClient, session_id: str) -> int:
    return int(client.get(f"/v1/sessions/{session_id}/events?limit=1").json()["version"])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    write_config(path, CATALOG_TOML)  # the flag and port that offer every tool
    return path


@pytest.fixture
def served(root: Path, tmp_path: Path) -> Iterator[Served]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}?synchronous=normal"
    with in_process_client(root, store_url=url) as pair:
        yield pair


@pytest.fixture
def client(served: Served) -> TestClient:
    return served[0]


def create(client: TestClient, **body: Any) -> str:
    response = client.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["sessionId"])


# -- every tool, any input ------------------------------------------------------------------


def test_the_inputs_cover_every_tool_offered(served: Served) -> None:
    client, service = served
    assert set(service.tools.surface(create(client))) == set(VALID_INPUTS)


@pytest.mark.parametrize("tool", sorted(VALID_INPUTS))
def test_any_tool_input_is_answered_or_refused_naming_the_field(
    client: TestClient, tool: str, depth: str
) -> None:
    # yolo lets every valid call reach its handler; ExitPlanMode needs Plan to ask.
    session = create(client, mode="plan" if tool == "ExitPlanMode" else "yolo")

    @settings(max_examples=25 if depth == "fast" else 400, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(raw=mutations(VALID_INPUTS[tool]))
    def check(raw: Any) -> None:
        before = version(client, session)
        response = client.post(f"/v1/sessions/{session}/tool-calls",
                               json={"tool": tool, "input": raw})
        assert response.status_code in (200, 202, 422), response.text
        if response.status_code == 422:
            names_a_field(error_of(response, 422, "invalid_input"))
            assert version(client, session) == before
        else:
            assert response.json()["status"] in ("completed", "pending", "denied")
            assert version(client, session) > before

    check()


# -- oversized bodies and strings -----------------------------------------------------------


def test_a_body_over_the_cap_is_413_and_appends_nothing(client: TestClient) -> None:
    session = create(client)
    before = version(client, session)
    huge = {"role": "user", "content": "x" * MAX_BODY_BYTES}
    response = client.post(f"/v1/sessions/{session}/messages", json=huge)
    error = error_of(response, 413, "payload_too_large")
    assert str(MAX_BODY_BYTES) in error["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it is read
        yield b'{"role": "user", "content": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    response = client.post(f"/v1/sessions/{session}/messages", content=chunks(),
                           headers={"content-type": "application/json"})
    error_of(response, 413, "payload_too_large")
    assert version(client, session) == before


def test_a_body_at_the_cap_is_read(client: TestClient) -> None:
    session = create(client)
    body = json.dumps({"role": "user", "content": "x"}).encode()
    padded = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"
    assert len(padded) == MAX_BODY_BYTES
    response = client.post(f"/v1/sessions/{session}/messages", content=padded,
                           headers={"content-type": "application/json"})
    assert response.status_code == 201, response.text


def test_oversized_bodies_on_the_wire(server: ServerProcess, http: httpx.Client) -> None:
    """uvicorn in front: the refusal arrives whole, and the server keeps serving."""
    session = http.post("/v1/sessions", json={}).json()["sessionId"]
    huge = json.dumps({"role": "user", "content": "x" * (2 * MAX_BODY_BYTES)})
    response = http.post(f"/v1/sessions/{session}/messages", content=huge,
                         headers={"content-type": "application/json"})
    error_of(response, 413, "payload_too_large")
    chunked = http.post(f"/v1/sessions/{session}/messages",
                        content=iter([huge[:10].encode(), huge[10:].encode()]),
                        headers={"content-type": "application/json"})
    error_of(chunked, 413, "payload_too_large")
    page = http.get(f"/v1/sessions/{session}/events").json()
    assert [e["type"] for e in page["events"]] == ["SessionCreated"]
    assert http.get("/healthz").status_code == 200


def _just_over(limit: int) -> str:
    return "é" * (limit + 1)  # code points, not bytes, are counted


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("messages", {"role": "user", "content": _just_over(MAX_TEXT_CHARS)}, "content"),
        ("goal", {"objective": _just_over(MAX_TEXT_CHARS)}, "objective"),
        ("mode", {"mode": "plan", "task": _just_over(MAX_TEXT_CHARS)}, "task"),
        ("interactions/int_x/respond",
         {"decision": "feedback", "feedback": _just_over(MAX_TEXT_CHARS)}, "feedback"),
        ("tool-calls", {"tool": _just_over(200), "input": {}}, "tool"),
        ("tool-calls", {"tool": "TodoRead", "input": {}, "callId": _just_over(MAX_ID_CHARS)},
         "callId"),
        ("tool-calls", {"tool": "ExitPlanMode", "input": {"plan": _just_over(PLAN_MAX)}},
         "plan"),
        ("tool-calls", {"tool": "ReadSessionContext",
                        "input": {"sessionId": "sess_x", "query": _just_over(4000)}}, "query"),
        ("prepare-request", {"tools": [_just_over(200)]}, "tools"),
        ("model", {"model": _just_over(400)}, "model"),
    ],
    ids=["message", "goal", "plan-task", "feedback", "tool-name", "call-id", "plan",
         "context-query", "tool-list", "model-ref"],
)
def test_a_string_over_its_limit_is_422_naming_it(
    client: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    session = create(client, mode="plan")
    before = version(client, session)
    method = client.put if path == "model" else client.post
    error = error_of(method(f"/v1/sessions/{session}/{path}", json=body), 422, "invalid_input")
    names_a_field(error, field)
    assert version(client, session) == before


def test_free_text_at_its_limit_is_taken(client: TestClient) -> None:
    session = create(client)
    content = "é" * MAX_TEXT_CHARS
    response = client.post(f"/v1/sessions/{session}/messages",
                           json={"role": "user", "content": content})
    assert response.status_code == 201, response.text
    events = client.get(f"/v1/sessions/{session}/events").json()["events"]
    assert events[-1]["data"]["content"] == content


# -- what schemathesis found, kept as plain regression tests --------------------------------


def test_a_body_that_is_not_utf8_is_422_like_any_non_json(client: TestClient) -> None:
    session = create(client)
    for body in (b"\xff\xfe{", b'{"role": "user", "content": "\xc3"}', b"{not json"):
        response = client.post(f"/v1/sessions/{session}/messages", content=body,
                               headers={"content-type": "application/json"})
        names_a_field(error_of(response, 422, "invalid_input"), "body")


@pytest.mark.parametrize("after", ["0.0", "+1", "1_0", " 1", "1e0"])
def test_a_cursor_is_decimal_digits(client: TestClient, after: str) -> None:
    session = create(client)
    for path in (f"/v1/sessions/{session}/events", "/v1/events/stream",
                 f"/v1/sessions/{session}/events/stream"):
        names_a_field(error_of(client.get(path, params={"after": after}), 422,
                               "invalid_input"), "after")
    limited = client.get(f"/v1/sessions/{session}/events", params={"limit": "5.0"})
    names_a_field(error_of(limited, 422, "invalid_input"), "limit")


def test_a_405_names_every_method_of_the_path(client: TestClient) -> None:
    session = create(client)
    for path, allowed in [("/v1/sessions", "GET, HEAD, POST"),
                          (f"/v1/sessions/{session}", "DELETE, GET, HEAD"),
                          (f"/v1/sessions/{session}/goal", "DELETE, POST"),
                          ("/v1/settings", "GET, HEAD, PUT"), ("/static/app.js", "GET, HEAD"),
                          (f"/v1/sessions/{session}/events/stream", "GET")]:
        response = client.request("PATCH", path)
        error_of(response, 405, "method_not_allowed")
        assert response.headers["allow"] == allowed, path


# -- path traversal: session ids and workspaces ---------------------------------------------

HOSTILE_IDS = [
    "..", "../x", "%2e%2e", "%2e%2e%2fx", "..%2f..%2fetc%2fpasswd", "%00", "sess_%00x",
    "sess_01%2F..%2F..", "%252e%252e", "~", "%20", "sess_%C3%A9", "\u202e", "s" * MAX_ID_CHARS,
]
"""Path segments, percent-encoded where shown; the server decodes them into the session id."""
ROUTES = [
    ("GET", "{}"), ("DELETE", "{}"), ("GET", "{}/events"), ("GET", "{}/audit"),
    ("GET", "{}/events/stream"), ("POST", "{}/mode"), ("POST", "{}/tool-calls"),
    ("GET", "{}/tool-calls/call_1"), ("POST", "{}/messages"), ("PUT", "{}/model"),
]
BODIES = {"mode": {"cycle": True}, "tool-calls": {"tool": "TodoRead", "input": {}},
          "messages": {"role": "user", "content": "hi"}, "model": {"model": "sonnet"}}


def _files(directory: Path) -> set[Path]:
    """Every path under ``directory`` but the store's own files."""
    return {p for p in directory.rglob("*") if not p.name.startswith("ledger.db")}


@pytest.mark.parametrize("segment", HOSTILE_IDS)
def test_a_hostile_session_id_is_a_clean_404(
    served: Served, tmp_path: Path, segment: str
) -> None:
    client, service = served
    before = (_files(tmp_path), service.store.head_position())
    for method, template in ROUTES:
        # Dots encoded: a client would remove a literal ".." segment before sending it.
        path = "/v1/sessions/" + template.format(quote(segment, safe="%").replace(".", "%2E"))
        body = BODIES.get(template.rsplit("/", 1)[-1])
        response = client.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] in ("session_not_found", "not_found")
    assert (_files(tmp_path), service.store.head_position()) == before


@pytest.mark.parametrize("length", [MAX_ID_CHARS + 1, 10_000])
def test_a_very_long_session_id_is_422(client: TestClient, length: int) -> None:
    error = error_of(client.get("/v1/sessions/" + "s" * length), 422, "invalid_input")
    names_a_field(error, "session_id")


def test_hostile_session_ids_on_the_wire(http: httpx.Client) -> None:
    """Through uvicorn's own URL parsing: NUL, encoded dots and a 10,000-character id."""
    for segment in ("%00", "%2e%2e", "sess_%00", "%C3%A9%2e%2e"):
        error_of(http.get(f"/v1/sessions/{segment}/events"), 404, "session_not_found")
    for segment in ("..%2f..%2fetc", "sess_%2e%2e%2f%2e%2e"):  # a decoded "/" matches no route
        error_of(http.get(f"/v1/sessions/{segment}/events"), 404, "not_found")
    error_of(http.get("/v1/sessions/" + "s" * 10_000), 422, "invalid_input")
    assert http.get("/healthz").status_code == 200


WORKSPACES = st.one_of(
    st.lists(st.sampled_from(["..", ".", "a", "b b", "é", "~", "\x00", "", "//", "\\", "$HOME"]),
             max_size=6).map("/".join),
    st.text(max_size=30),
    st.sampled_from(["/", "/etc", "/tmp", "~/x", "a" * 5000, "link-out/x"]),
)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workspace=WORKSPACES)
def test_any_workspace_is_inside_the_root_or_refused(
    served: Served, root: Path, workspace: str
) -> None:
    client, _service = served
    link = root / "link-out"
    if not link.is_symlink():
        link.symlink_to(root.parent, target_is_directory=True)
    response = client.post("/v1/sessions", json={"workspace": workspace})
    assert response.status_code in (201, 422), response.text
    if response.status_code == 201:
        assert Path(response.json()["workspace"]).is_relative_to(root.resolve())
    else:
        assert response.json()["error"]["code"] in ("invalid_input", "workspace_outside_root")


# -- plan files that would leave the workspace ----------------------------------------------


def _approve_plan(client: TestClient, session: str) -> dict[str, Any]:
    pending = client.post(f"/v1/sessions/{session}/tool-calls",
                          json={"tool": "ExitPlanMode", "input": {"plan": "# Plan\nescape"}})
    assert pending.status_code == 202, pending.text
    iid = pending.json()["interactionId"]
    done = client.post(f"/v1/sessions/{session}/interactions/{iid}/respond",
                       json={"decision": "approve"})
    assert done.status_code == 200, done.text
    answer: dict[str, Any] = done.json()
    return answer


def _swap_for_symlink(root: Path, session: str, link: str, outside: Path) -> None:
    """After the session was created: one part of its plan file's path now leads outside."""
    workspace = root / "project"
    if link == "workspace":  # the whole workspace, moved away and replaced by a link
        workspace.rename(root / "project-moved")
        workspace.symlink_to(outside, target_is_directory=True)
    elif link == ".zcode":
        (workspace / ".zcode").symlink_to(outside, target_is_directory=True)
    elif link == "plans":
        (workspace / ".zcode").mkdir()
        (workspace / ".zcode" / "plans").symlink_to(outside, target_is_directory=True)
    else:
        plans = workspace / ".zcode" / "plans"
        plans.mkdir(parents=True)
        (plans / f"plan-{session}.md").symlink_to(outside / "victim.md")


def _written_outside_nothing(outside: Path) -> None:
    assert sorted(p.relative_to(outside).as_posix() for p in outside.rglob("*")) == [
        "victim.md"]  # no plan, no directory, no temporary file
    assert (outside / "victim.md").read_text(encoding="utf-8") == "untouched"


LINKS = ["workspace", ".zcode", "plans", "plan file"]


@pytest.mark.parametrize("link", LINKS)
def test_a_plan_never_follows_a_symlink_out_of_the_workspace(
    client: TestClient, root: Path, tmp_path: Path, link: str
) -> None:  # EG-4, PM-7
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.md").write_text("untouched", encoding="utf-8")
    (root / "project").mkdir()
    session = create(client, mode="plan", workspace="project")
    _swap_for_symlink(root, session, link, outside)
    answer = _approve_plan(client, session)
    assert answer["success"] is True  # PM-7: the write error is recorded, Plan is left anyway
    assert answer["result"]["fileWritten"] is False
    _written_outside_nothing(outside)
    document = client.get(f"/v1/sessions/{session}").json()
    assert document["executionState"]["planEnabled"] is False
    events = client.get(f"/v1/sessions/{session}/events").json()["events"]
    assert "PlanFileWriteFailed" in [e["type"] for e in events]


@pytest.mark.parametrize("link", ["workspace", "plans"])
def test_a_real_server_writes_no_plan_through_a_swapped_symlink(
    tmp_path: Path, link: str
) -> None:  # EG-4, PM-7: against the installed serve
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.md").write_text("untouched", encoding="utf-8")
    (tmp_path / "server").mkdir()
    with running_server(tmp_path / "server") as server, server.client() as http:
        root = server.workspace
        (root / "project").mkdir()
        response = http.post("/v1/sessions", json={"mode": "plan", "workspace": "project"})
        assert response.status_code == 201, response.text
        session = response.json()["sessionId"]
        _swap_for_symlink(root, session, link, outside)
        pending = http.post(f"/v1/sessions/{session}/tool-calls",
                            json={"tool": "ExitPlanMode", "input": {"plan": "# Plan\nescape"}})
        assert pending.status_code == 202, pending.text
        done = http.post(
            f"/v1/sessions/{session}/interactions/{pending.json()['interactionId']}/respond",
            json={"decision": "approve"})
        assert done.status_code == 200, done.text
        assert done.json()["result"]["fileWritten"] is False
        events = http.get(f"/v1/sessions/{session}/events").json()["events"]
        failed = [e for e in events if e["type"] == "PlanFileWriteFailed"]
        assert len(failed) == 1 and failed[0]["data"]["path"] == (
            f".zcode/plans/plan-{session}.md")
    _written_outside_nothing(outside)


# -- HTML and script in previews and plans --------------------------------------------------

PREVIEW = "<img src=x onerror=alert(1)><b onclick=alert(2)>bold</b> <a href=javascript:x>l</a>"
PLAN_HTML = "# Plan\n<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n[x](javascript:y)"


def test_html_in_previews_and_plans_is_stored_verbatim_and_served_as_json(
    client: TestClient,
) -> None:
    session = create(client, mode="plan")
    ask = {"questions": [{**ASK["questions"][0], "options": [
        {"label": "<i>A</i>", "description": "<script>alert(3)</script>", "preview": PREVIEW},
        {"label": "B", "description": "b"}]}]}
    asked = client.post(f"/v1/sessions/{session}/tool-calls",
                        json={"tool": "AskUserQuestion", "input": ask})
    assert asked.status_code == 202, asked.text
    planned = client.post(f"/v1/sessions/{session}/tool-calls",
                          json={"tool": "ExitPlanMode", "input": {"plan": PLAN_HTML}})
    assert planned.status_code == 202, planned.text
    document = client.get(f"/v1/sessions/{session}")
    assert document.headers["content-type"] == "application/json"
    payloads = [i["payload"] for i in document.json()["interactions"]]
    assert payloads[0]["questions"][0]["options"][0] == ask["questions"][0]["options"][0]
    assert payloads[1]["plan"] == PLAN_HTML
    events = client.get(f"/v1/sessions/{session}/events").text
    assert json.dumps(PLAN_HTML)[1:-1] in events  # JSON-escaped, never HTML-rewritten
    page = client.get("/")
    assert "alert(" not in page.text  # the page is static: log text never enters it
    assert "script-src 'self'" in page.headers["content-security-policy"]


ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "code", "blockquote", "ul",
    "ol", "li", "span", "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "del", "a",
}


class _Tags(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _safe_attributes(tag: str, attrs: dict[str, str | None]) -> bool:
    if tag == "a":
        href = attrs.get("href") or ""
        return set(attrs) == {"href", "rel", "target"} and href.lower().startswith(
            ("http://", "https://", "mailto:"))
    if tag == "ol":
        return set(attrs) <= {"start"} and (attrs.get("start") or "1").isdigit()
    if tag == "span":
        return attrs == {"class": "task"}
    if tag == "code":
        return set(attrs) <= {"class"} and (attrs.get("class") or "language-").startswith(
            "language-")
    return not attrs


@pytest.fixture(scope="module")
def markdown() -> Iterator[subprocess.Popen[str]]:
    """The web client's renderer under node, one JSON line in, one HTML line out."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the browser tests render plans instead)")
    module = (STATIC_DIR / "markdown.js").as_uri()
    program = (
        f"import {{ renderMarkdown }} from {json.dumps(module)};"
        "import readline from 'node:readline';"
        "const lines = readline.createInterface({ input: process.stdin });"
        "lines.on('line', (l) => process.stdout.write("
        "JSON.stringify(renderMarkdown(JSON.parse(l))) + '\\n'));"
    )
    process = subprocess.Popen(
        [node, "--input-type=module", "-e", program], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, encoding="utf-8",
    )
    try:
        yield process
    finally:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        process.wait(timeout=10)
        process.stdout.close()


def render(process: subprocess.Popen[str], source: str) -> str:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(source) + "\n")
    process.stdin.flush()
    return str(json.loads(process.stdout.readline()))


MARKDOWNISH = st.lists(
    st.one_of(
        st.sampled_from([
            "<script>", "</script>", "<img src=x onerror=alert(1)>", "<a href='x'>", "\"", "'",
            "&", "&lt;", "`", "```", "~~~", "*", "**", "_", "~~", "[", "](", ")", "|", "---",
            "# ", "> ", "- ", "1. ", "- [ ] ", "\n", "\n\n", "  \n", "javascript:",
            "https://x.test/\"onmouseover=\"a", "mailto:a@b", "\x00", "\ufffd", "<!--", "-->",
            "<![CDATA[", "<svg/onload=alert(1)>", "\\", "language-", "```<b>\n",
        ]),
        st.text(max_size=6),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=MARKDOWNISH)
def test_the_plan_renderer_emits_only_its_own_tags(
    markdown: subprocess.Popen[str], source: str
) -> None:
    parser = _Tags()
    parser.feed(render(markdown, source))
    parser.close()
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, (tag, source)
        assert _safe_attributes(tag, attrs), (tag, attrs, source)


def test_the_plan_renderer_shows_a_script_as_text(markdown: subprocess.Popen[str]) -> None:
    html = render(markdown, PLAN_HTML)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html and "<img" not in html and "javascript:y" in html


# -- ReadSessionContext across workspaces ---------------------------------------------------

SECRET = "zanzibar-7731"


def _read(client: TestClient, caller: str, target: str) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{caller}/tool-calls", json={
        "tool": "ReadSessionContext", "input": {"sessionId": target, "query": SECRET}})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize(
    ("caller_ws", "target_ws"),
    [(None, "child"), ("child", None), ("child", "sibling"), ("child", "child/grand")],
    ids=["root-reads-child", "child-reads-root", "sibling", "child-reads-grandchild"],
)
def test_read_session_context_refuses_another_workspace_over_http(
    client: TestClient, root: Path, caller_ws: str | None, target_ws: str | None
) -> None:
    for name in ("child", "sibling", "child/grand"):
        (root / name).mkdir(parents=True, exist_ok=True)
    caller = create(client, **({"workspace": caller_ws} if caller_ws else {}))
    target = create(client, **({"workspace": target_ws} if target_ws else {}))
    said = client.post(f"/v1/sessions/{target}/messages",
                       json={"role": "user", "content": f"the key is {SECRET}"})
    assert said.status_code == 201, said.text
    answer = _read(client, caller, target)
    assert answer["success"] is False
    assert answer["result"]["error"]["code"] == "other_workspace"
    assert SECRET not in json.dumps(answer)


def test_read_session_context_takes_the_same_workspace_however_spelled(
    client: TestClient, root: Path
) -> None:
    (root / "child").mkdir()
    (root / "alias").symlink_to(root / "child", target_is_directory=True)
    target = create(client, workspace="child")
    client.post(f"/v1/sessions/{target}/messages",
                json={"role": "user", "content": f"the key is {SECRET}"})
    for spelling in ("child/../child", "./child", "alias", str(root / "child")):
        caller = create(client, workspace=spelling)
        assert _read(client, caller, target)["success"] is True, spelling


@pytest.mark.parametrize("target", ["sess_../x", "../sess_x", "sess_x/../../y", "sess_\x00"])
def test_read_session_context_refuses_a_path_as_session_id(
    client: TestClient, target: str
) -> None:
    caller = create(client)
    before = version(client, caller)
    response = client.post(f"/v1/sessions/{caller}/tool-calls", json={
        "tool": "ReadSessionContext", "input": {"sessionId": target, "query": "q"}})
    names_a_field(error_of(response, 422, "invalid_input"), "sessionId")
    assert version(client, caller) == before


# -- EG-1: what is accepted reads back; what would not is refused at the edge ---------------

HOLE = "\x00HOLE\x00"
"""Where raw JSON text goes in a body: its JSON string is replaced by the text."""


def with_raw(template: Any, raw: str) -> str:
    """``template`` as JSON text, with ``raw`` in place of :data:`HOLE`."""
    return json.dumps(template).replace(json.dumps(HOLE), raw)


def serve_catalog(directory: Path, port: int | None = None) -> Any:
    """A real ``serve`` whose workspace offers every tool (TR-1)."""
    write_config(directory / "workspace", CATALOG_TOML)
    return running_server(directory, port=port)


def _int_or_text(digits: str) -> int | str:
    """An integer token as an int, or as its text past Python's 4,300-digit conversion limit.
    The server refuses integers of more than 640 digits, so such a token reaches an accepted
    body only where a later duplicate key replaced it (``{"": [1…1], "": []}``, read as
    ``{"": []}`` by every JSON reader): the test's own reading of what it sent must not fail
    on it, and a text left in a value that survived would fail the comparison."""
    return int(digits) if len(digits.lstrip("-")) <= 4300 else digits


def post_raw(http: httpx.Client | TestClient, path: str, text: str) -> httpx.Response:
    return http.post(path, content=text.encode("utf-8"),
                     headers={"content-type": "application/json"})


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


FINDING_ONE = [
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, deep(220)),
    ("EnterPlanMode", {"x": HOLE}, deep(220)),
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, deep(254)),
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, deep(990)),
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, deep(100_000)),
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, '"\\ud800"'),
    ("EnterPlanMode", {HOLE: 1}, '"\\udc00"'),  # a key: the hole's string becomes the key
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, "NaN"),
    ("ExitPlanMode", {"plan": "p", "x": [1, HOLE]}, "-Infinity"),
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, "1e999"),
    ("ExitPlanMode", {"plan": "p", "x": HOLE}, "7" * 5000),
]


@pytest.mark.parametrize(("tool", "template", "raw"), FINDING_ONE,
                         ids=["exit-220", "enter-220", "254", "990", "100k", "surrogate",
                              "surrogate-key", "nan", "-infinity", "overflow", "5000-digits"])
def test_finding_one_inputs_are_422_over_the_wire_and_append_nothing(
    server: ServerProcess, http: httpx.Client, tool: str, template: dict[str, Any], raw: str
) -> None:  # EG-1, EG-2
    session = create(http, mode="plan")
    body = with_raw({"tool": tool, "input": template}, raw)
    error = error_of(post_raw(http, f"/v1/sessions/{session}/tool-calls", body), 422,
                     "invalid_input")
    (detail,) = error["details"]
    assert detail["loc"][:2] == ["body", "input"] and detail["type"] == "json_shape", error
    assert version(http, session) == 1
    page = http.get(f"/v1/sessions/{session}/events")
    assert page.status_code == 200 and len(page.json()["events"]) == 1
    assert "Traceback" not in server.log()


def test_every_route_with_a_body_decodes_it_strictly(client: TestClient) -> None:  # EG-1
    """One decoder for every body: each route the API describes with a request body refuses
    a ``NaN`` token at its path, before it looks at the session or anything else."""
    routes = [(method, path) for path, operations in client.get("/openapi.json").json()[
        "paths"].items() for method, operation in operations.items()
        if "requestBody" in operation]
    assert len(routes) >= 12, routes
    for method, path in routes:
        url = re.sub(r"\{[^}]+\}", "sess_x", path)
        response = client.request(method.upper(), url, content=b'{"a": [1, NaN]}',
                                  headers={"content-type": "application/json"})
        (detail,) = error_of(response, 422, "invalid_input")["details"]
        assert detail == {"loc": ["body", "a", 1], "message": "NaN is not a JSON number",
                          "type": "json_shape"}, (method, path)


def test_a_deep_or_broken_value_in_any_body_is_422(http: httpx.Client) -> None:  # EG-1
    session = create(http)
    for path, template, raw in [
        ("messages", {"role": "user", "content": HOLE}, '"\\ud800"'),
        ("messages", {"role": "user", "content": "hi", "x": HOLE}, deep(300)),
        ("goal", {"objective": HOLE}, '"a\\udfffb"'),
        ("permission-check", {"tool": "Bash", "input": {"command": HOLE}}, "NaN"),
        ("prepare-request", {"tools": HOLE}, deep(5000)),
    ]:
        response = post_raw(http, f"/v1/sessions/{session}/{path}", with_raw(template, raw))
        error = error_of(response, 422, "invalid_input")
        assert error["details"][0]["loc"][0] == "body", (path, error)
    error_of(post_raw(http, "/v1/sessions", with_raw({"workspace": HOLE}, deep(65))),
             422, "invalid_input")
    assert version(http, session) == 1


def test_a_modify_answer_with_a_deep_input_is_422_and_the_question_still_waits(
    http: httpx.Client,
) -> None:  # EG-1
    session = create(http)
    asked = http.post(f"/v1/sessions/{session}/tool-calls",
                      json={"tool": "AskUserQuestion", "input": ASK})
    assert asked.status_code == 202, asked.text
    before = version(http, session)
    iid = asked.json()["interactionId"]
    respond = f"/v1/sessions/{session}/interactions/{iid}/respond"
    for raw in (deep(70), deep(500), '"\\ud800"', "Infinity"):
        body = with_raw({"decision": "modify", "input": {"answers": {QUESTION: HOLE}}}, raw)
        names_a_field(error_of(post_raw(http, respond, body), 422, "invalid_input"), "input")
    assert version(http, session) == before
    document = http.get(f"/v1/sessions/{session}").json()
    assert [i["interactionId"] for i in document["interactions"]] == [iid]  # still pending


def test_the_cli_call_refuses_a_deep_input_with_exit_2(tmp_path: Path) -> None:  # EG-1
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    service = SessionService.open(db, workspace_root=tmp_path)
    try:
        session = str(service.create_session(mode="plan")["sessionId"])
    finally:
        service.close()
    for raw, says in [(deep(220), "deeper than 64"), ("NaN", "NaN")]:  # loads_json: all others
        done = subprocess.run(
            [*sessionledger_command(), "call", "--db", db, session, "ExitPlanMode",
             "--input", with_raw({"plan": "p", "x": HOLE}, raw)],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )
        assert done.returncode == 2, done
        assert done.stderr.startswith("error: the --input cannot be accepted") and says in \
            done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    service = SessionService.open(db, workspace_root=tmp_path)
    try:
        assert [s.version for s in service.summaries()] == [1]
    finally:
        service.close()


def test_an_mcp_tool_call_with_a_deep_input_is_refused(tmp_path: Path) -> None:  # EG-1
    import anyio
    from mcp_support import mcp_client

    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    nested: Any = []
    for _ in range(100):  # within what the SDK parses, past the shape check's limit
        nested = [nested]

    async def scenario() -> None:
        async with mcp_client(db, tmp_path) as client:
            entered = await client.call_tool("EnterPlanMode", {"x": nested})
            plan = await client.call_tool("ExitPlanMode", {"plan": "p", "x": {"y": nested}})
        for result in (entered, plan):
            assert result.is_error, result
            error = result.structured_content["error"]
            assert error["code"] == "invalid_input" and "deeper than 64" in error["message"]

    anyio.run(scenario)
    service = SessionService.open(db, workspace_root=tmp_path)
    try:
        assert [s.version for s in service.summaries()] == [1]  # SessionCreated only
    finally:
        service.close()


def leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every scalar in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaf_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaf_paths(item, (*prefix, index))
    else:
        yield prefix


def holed(value: Any, path: tuple[Any, ...]) -> Any:
    """A copy of ``value`` with :data:`HOLE` at ``path``."""
    if not path:
        return HOLE
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: holed(value[head], tuple(rest))}
    return [holed(item, tuple(rest)) if i == head else item for i, item in enumerate(value)]


def _targets() -> list[tuple[str, Any]]:
    """``(route, body)`` with a :data:`HOLE`: every tool's whole input, each of its fields,
    an extra field (the plan tools' contracts keep them), and a message's content and an
    extra field of it."""
    targets: list[tuple[str, Any]] = []
    for tool, valid in sorted(VALID_INPUTS.items()):
        inputs = [HOLE, {**valid, "x": HOLE}]
        inputs += [holed(valid, path) for path in leaf_paths(valid) if path]
        targets += [("tool-calls", {"tool": tool, "input": i}) for i in inputs]
    targets += [("messages", {"role": "user", "content": HOLE}),
                ("messages", {"role": "user", "content": "hi", "x": HOLE})]
    return targets


TARGETS = _targets()
EXTRAS = [("tool-calls", {"tool": "ExitPlanMode", "input": {"plan": "# Plan", "x": HOLE}}),
          ("tool-calls", {"tool": "EnterPlanMode", "input": {"x": HOLE}})]
"""The inputs whose contracts keep any extra field: what most values reach the log through."""
AT_THE_LIMIT = "[" * 62 + '{"é😀\\u202e": [-0.0, 5e-324, 1E2, ' + "9" * 640 + "]}" + "]" * 62
"""An extra field's value that makes the body exactly 64 levels deep, with edge numbers."""


def streamed(base_url: str, path: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` envelopes an SSE stream sends (a read timeout fails the test)."""
    got: list[dict[str, Any]] = []
    with httpx.Client(base_url=base_url, timeout=httpx.Timeout(10.0, read=10.0)) as client, \
            connect_sse(client, "GET", path) as source:
        for sse in source.iter_sse():
            got.append(json.loads(sse.data))
            if len(got) == count:
                break
    return got


def pages(http: httpx.Client, sessions: list[str]) -> dict[str, list[dict[str, Any]]]:
    read = {s: http.get(f"/v1/sessions/{s}/events", params={"limit": 1000}) for s in sessions}
    assert all(r.status_code == 200 for r in read.values()), read
    return {s: r.json()["events"] for s, r in read.items()}


def test_whatever_is_accepted_reads_back_unchanged_everywhere(
    tmp_path: Path, depth: str
) -> None:  # EG-1, EG-2 (acceptance 1 of issue 19)
    """Random JSON text — up to 300 levels deep, lone surrogates, NaN and Infinity tokens,
    huge integers, any unicode — in every tool's input and fields and in messages, over a
    real ``serve``: a 4xx appends nothing; an accepted value is on the events page as sent,
    and both streams, ``audit``, ``rebuild`` and a restart read every session back the same.
    No answer is a 5xx."""
    sessions: list[str] = []
    accepted: list[str] = []
    with serve_catalog(tmp_path) as server, server.client() as http:

        @settings(max_examples=25 if depth == "fast" else 600, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(target=st.sampled_from(EXTRAS) | st.sampled_from(TARGETS), raw=RAW_JSON)
        @example(target=EXTRAS[0], raw=AT_THE_LIMIT)
        @example(target=EXTRAS[1], raw='{"\\ud83d\\ude00": "e\\u0301\\u0000"}')
        @example(target=TARGETS[-2], raw='"\\ud83d\\ude00 \\u202e \\uffff"')
        @example(target=EXTRAS[0], raw="[" * 63 + "]" * 63)  # one level too many
        @example(target=EXTRAS[0], raw='{"": [' + "1" * 4301 + '], "": []}')  # replaced
        def check(target: tuple[str, Any], raw: str) -> None:
            route, body = target
            plan = body.get("tool") == "ExitPlanMode"
            session = create(http, mode="plan" if plan else "yolo")
            sessions.append(session)
            response = post_raw(http, f"/v1/sessions/{session}/{route}", with_raw(body, raw))
            assert response.status_code < 500, response.text
            events = http.get(f"/v1/sessions/{session}/events").json()["events"]
            if response.status_code >= 400:
                assert [e["type"] for e in events] == ["SessionCreated"], response.text
                return
            accepted.append(session)
            sent = json.loads(with_raw(body, raw), parse_int=_int_or_text)
            if route == "messages":
                assert events[1]["data"]["content"] == sent["content"]
            else:
                assert events[1]["type"] == "ToolCallRequested"
                assert events[1]["data"]["input"] == sent["input"]

        check()
        assert accepted, "no example was accepted: the property proved nothing"
        before = pages(http, sessions)
        every = sorted((e for p in before.values() for e in p), key=lambda e: e["seq"] and
                       e["globalPosition"])
        assert streamed(server.base_url, "/v1/events/stream", len(every)) == every
        for session in accepted:
            assert streamed(server.base_url, f"/v1/sessions/{session}/events/stream",
                            len(before[session])) == before[session]
        port = int(server.base_url.rsplit(":", 1)[1])
        server.terminate()
        for command in ("audit", "rebuild"):
            done = subprocess.run([*sessionledger_command(), command, "--db", server.db_url],
                                  capture_output=True, text=True, timeout=120, cwd=tmp_path)
            assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in server.log()
    with serve_catalog(tmp_path, port=port) as again, again.client() as http:
        assert pages(http, sessions) == before
