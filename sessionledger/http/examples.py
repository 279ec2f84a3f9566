"""The HTTP API's examples: one scenario run against the real app, every exchange recorded.

:func:`run_examples` builds the app in process (FastAPI's TestClient) over a fresh in-memory
store, a temporary workspace holding a small model catalog and a bearer token, and walks a
short story step by step — a session created, a message, a ``TodoWrite``, a question asked
and answered, a plan submitted and approved, a goal, the reads, the streams, a host's hooks,
errors — so each request runs in a state where it makes sense. Each exchange keeps the
request (method, path with query, the headers that matter, the JSON body) and the answer
(status, the headers that matter, the JSON body or the stream's text), normalised by
:func:`normalise` so the page stays the same from one run to the next.

``make docs`` renders the exchanges into docs/http-api.md (:func:`sessionledger.docgen.
render_http_api`); tests/test_http_examples.py runs the scenario again and compares every
documented exchange with the real one, and fails for a route of the app that has none.

What varies between runs and how it is shown (:func:`normalise`, applied to requests and
answers alike): ids ending in 26 base32 characters (``sess_…``, ``call_…``, ``int_…``) keep
their prefix; 64-hex hashes, a login cookie's value and an HTTP date (a cleared cookie's
``expires``) are ``…``; the temporary directory the examples run in is ``/home/me``. The
service's clock is a manual one: it starts at ``2026-01-01T00:00:00.000Z`` and moves one
second before each request, so times are shown as they were recorded.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import FastAPI
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog.envelope import ManualClock
from projections import open_projected_store

if TYPE_CHECKING:
    from starlette.testclient import TestClient

__all__ = [
    "EXAMPLE_TOKEN",
    "NOTES",
    "Exchange",
    "app_routes",
    "examples_by_route",
    "normalise",
    "normalise_text",
    "pretty_json",
    "run_examples",
]

EXAMPLE_TOKEN = "example-token"
"""The bearer token of the examples' server (one bound beyond loopback needs one)."""

NOTES: dict[tuple[str, str], str] = {
    ("GET", "/static/{path}"): "The page's JavaScript modules, CSS and icon "
    "(`/static/app.js`, `/static/app.css`, …), `Cache-Control: no-cache`, no token needed.",
    ("ANY", "/mcp"): "The MCP server's streamable-HTTP transport, for MCP clients that "
    "connect to a URL: see [mcp.md](mcp.md#over-http).",
    ("GET", "/openapi.json"): "The OpenAPI description of every route above, the error "
    "answers and (with a token) the bearer scheme included.",
    ("GET", "/docs"): "FastAPI's interactive page over `/openapi.json` (Swagger UI).",
    ("GET", "/docs/oauth2-redirect"): "Swagger UI's OAuth2 redirect page (unused here).",
    ("GET", "/redoc"): "FastAPI's ReDoc page over `/openapi.json`.",
}
"""The routes whose section is one line instead of an exchange: the page's files, MCP (whose
own page describes it) and FastAPI's description pages."""

_ULID_ID = re.compile(r"\b([a-z]+)_[0-9A-HJKMNP-TV-Z]{26}\b")
_HASH = re.compile(r"\b[0-9a-f]{64}\b")
_HTTP_DATE = re.compile(r"\b[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT\b")
_COOKIE = re.compile(r"(sessionledger_login_[0-9a-f]{16}=)(\"[^\"]*\"|[^;\s\"]+)")
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_SHOWN_REQUEST_HEADERS = ("authorization", "cookie", "content-type", "last-event-id")
_SHOWN_ANSWER_HEADERS = ("content-type", "set-cookie", "www-authenticate",
                         "content-security-policy")


def normalise_text(text: str, *, root: str | None = None) -> str:
    """``text`` with the values that vary between runs replaced (the module's docstring)."""
    if root:
        text = text.replace(root, "/home/me")
    text = _ULID_ID.sub(r"\1_…", text)
    text = _HASH.sub("…", text)
    text = _HTTP_DATE.sub("…", text)
    return _COOKIE.sub(r"\1…", text)


def normalise(value: Any, *, root: str | None = None) -> Any:
    """A JSON value with every string (object keys included) normalised."""
    if isinstance(value, str):
        return normalise_text(value, root=root)
    if isinstance(value, list):
        return [normalise(item, root=root) for item in value]
    if isinstance(value, dict):
        return {normalise_text(key, root=root): normalise(item, root=root)
                for key, item in value.items()}
    return value


@dataclass(frozen=True)
class Exchange:
    """One documented request and the answer it got, normalised."""

    route: tuple[str, str]
    """The route it exercises: method and path template, as the OpenAPI description has it."""
    title: str
    method: str
    path: str
    """The path as sent, with its query."""
    headers: tuple[tuple[str, str], ...]
    body: Any
    """The JSON body sent, or None."""
    status: int
    answer_headers: tuple[tuple[str, str], ...]
    answer: Any
    """The JSON answer, or for a stream its text, or None when not shown (the page)."""

    def request_text(self) -> str:
        """The request as the page shows it: a request line, headers, the body."""
        lines = [f"{self.method} {self.path}", *(f"{k}: {v}" for k, v in self.headers)]
        if self.body is not None:
            lines += ["", pretty_json(self.body)]
        return "\n".join(lines)

    def answer_text(self) -> str:
        """The answer as the page shows it: a status line, headers, the body."""
        lines = [f"HTTP/1.1 {self.status} {_phrase(self.status)}",
                 *(f"{k}: {v}" for k, v in self.answer_headers)]
        if isinstance(self.answer, str):
            lines += ["", self.answer]
        elif self.answer is not None:
            lines += ["", pretty_json(self.answer)]
        return "\n".join(lines)


_RFC_9110_PHRASES = {413: "Content Too Large", 416: "Range Not Satisfiable",
                     422: "Unprocessable Content"}
"""The reason phrases HTTP names now, which Python's own tables use only from 3.13 on: the page
is the same whichever Python renders it."""


def _phrase(status: int) -> str:
    return _RFC_9110_PHRASES.get(status) or HTTPStatus(status).phrase


def pretty_json(value: Any, *, indent: int = 0, width: int = 92, used: int = 0) -> str:
    """JSON as the page shows it: a value that fits on its line (``used`` characters of it
    taken already) stays on one, others open with two spaces a level."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if indent + used + len(flat) <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + pretty_json(item, indent=indent + 2, width=width) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    entries = []
    for key, item in value.items():
        name = json.dumps(key, ensure_ascii=False) + ": "
        entries.append(pad + name + pretty_json(item, indent=indent + 2, width=width,
                                                 used=len(name)))
    return "{\n" + ",\n".join(entries) + "\n" + " " * indent + "}"


def app_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) the app answers, in its routing order, walking included routers;
    a mount is ``GET {prefix}/{path}``, a route of any method ``ANY``. ``HEAD`` (answered
    wherever ``GET`` is) and duplicates (the tool calls' fast path) are left out."""
    found: list[tuple[str, str]] = []

    def walk(routes: list[BaseRoute], prefix: str) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)
            if inner is not None:
                context = getattr(route, "include_context", None)
                walk(list(inner.routes), prefix + str(getattr(context, "prefix", "") or ""))
            elif isinstance(route, Mount):
                found.append(("GET", prefix + route.path + "/{path}"))
            elif isinstance(route, Route):
                methods = sorted((route.methods or {"ANY"}) - {"HEAD"})
                found.extend((method, prefix + route.path) for method in methods)

    walk(list(app.router.routes), "")
    return list(dict.fromkeys(found))


def _catalog() -> str:
    return """\
[models]
current = "anthropic/sonnet"

[[models.providers]]
id = "anthropic"
name = "Anthropic"

[[models.providers.models]]
id = "sonnet"
name = "Claude Sonnet"
contextWindow = 200000
reasoningLevels = ["low", "medium", "high"]
defaultLevel = "medium"

[[models.providers.models]]
id = "haiku"
name = "Claude Haiku"
contextWindow = 200000
"""


class _Answer(Protocol):
    """What the scenario reads of a response (the TestClient's, whichever httpx it uses)."""

    @property
    def headers(self) -> Any: ...

    def json(self) -> Any: ...


@dataclass
class _Recorder:
    """Sends the scenario's requests and keeps each exchange, normalised."""

    client: TestClient
    clock: ManualClock
    stopping: threading.Event
    root: str
    exchanges: list[Exchange] = field(default_factory=list)

    def send(
        self, route: tuple[str, str], title: str, path: str, *, body: Any = None,
        headers: Mapping[str, str] | None = None, token: bool = True,
        stream: bool = False, show_body: bool = True,
    ) -> _Answer:
        """Send one request (with the token unless ``token`` is false) and record it; the
        response. ``stream``: an event stream, which the server stops once it has sent its
        first events (:func:`_stopping_streams`; they are all there before it starts)."""
        self.clock.advance(1)
        method = route[0]
        sent: dict[str, str] = {}
        if token:
            sent["Authorization"] = f"Bearer {EXAMPLE_TOKEN}"
        sent.update(headers or {})
        if body is not None:
            sent["Content-Type"] = "application/json"
        content = None if body is None else json.dumps(body).encode()
        timer = None
        if stream:  # in case no event comes: the answer, empty, then differs from the page
            timer = threading.Timer(_STREAM_TIMEOUT_S, self.stopping.set)
            timer.start()
        try:
            response = self.client.request(method, path, headers=sent, content=content)
        finally:
            if timer is not None:
                timer.cancel()
                self.stopping.clear()
        self.client.cookies.clear()  # every request says which login it carries
        kind = response.headers.get("content-type", "")
        is_json = kind.startswith("application/json")
        answer: Any = None
        if is_json:
            answer = response.json()
        elif show_body:
            answer = response.text.rstrip("\n")  # a stream's last blank line is not shown
        shown = [(name, value) for name, value in sent.items()
                 if name.lower() in _SHOWN_REQUEST_HEADERS]
        answer_headers = [
            (name.title(), value) for name, value in response.headers.multi_items()
            if name.lower() in _SHOWN_ANSWER_HEADERS and not (is_json and name == "content-type")
        ]
        self.exchanges.append(Exchange(
            route=route, title=title, method=method,
            path=normalise_text(path, root=self.root),
            headers=tuple((k, normalise_text(v, root=self.root)) for k, v in shown),
            body=normalise(body, root=self.root), status=response.status_code,
            answer_headers=tuple((k, normalise_text(v, root=self.root))
                                 for k, v in answer_headers),
            answer=normalise(answer, root=self.root),
        ))
        return response


_QUESTION = {"question": "Which database should the export use?", "header": "Database",
             "multiSelect": False,
             "options": [{"label": "SQLite (Recommended)", "description": "one file, no server"},
                         {"label": "Postgres", "description": "the team's shared server"}]}
_TODOS = [{"content": "Add the --json flag", "status": "in_progress", "priority": "high"},
          {"content": "Test the export", "status": "pending", "priority": "medium"}]
_HOOK_SESSION = "6f1d2c3b-0a9e-4f8d-b7c6-5e4d3c2b1a09"
_CODEX_THREAD = "019af3c2-5b7e-7d31-9c4a-2e8f6a1b0c3d"
_PATCH = "*** Begin Patch\n*** Add File: export_json.py\n+import json\n*** End Patch\n"


def _scenario(ex: _Recorder, workspace: Path) -> None:
    """The story every example is a step of (the module's docstring)."""
    sessions = "/v1/sessions"
    doc = "/v1/sessions/{session_id}"
    ex.send(("GET", "/healthz"), "The service answers (no token needed).", "/healthz",
            token=False)
    ex.send(("GET", "/v1/sessions"), "Without the token: 401 and nothing read.", sessions,
            token=False)
    ex.send(("GET", "/v1/login"), "A browser asks whether it must log in.", "/v1/login",
            token=False)
    login = ex.send(("POST", "/v1/login"), "It logs in with the token and gets the cookie.",
                    "/v1/login", body={"token": EXAMPLE_TOKEN}, token=False)
    cookie = login.headers["set-cookie"].split(";", 1)[0]
    created = ex.send(("POST", sessions), "A session in build mode, in the server's "
                      "workspace.", sessions, body={"mode": "build"})
    sid = created.json()["sessionId"]
    here = f"{sessions}/{sid}"
    ex.send(("POST", sessions), "An unknown mode: 422 `invalid_input`, one detail per "
            "field, nothing appended.", sessions, body={"mode": "careful"})
    ex.send(("POST", f"{doc}/messages"), "The user's first message.", f"{here}/messages",
            body={"role": "user", "content": "Add a --json flag to the export command.",
                  "messageId": "msg-1"})
    ex.send(("POST", f"{doc}/messages"), "The same `messageId` again: the original receipt, "
            "nothing appended.", f"{here}/messages",
            body={"role": "user", "content": "Add a --json flag to the export command.",
                  "messageId": "msg-1"})
    ex.send(("POST", f"{doc}/prepare-request"), "Before the model request: the reminders "
            "to inject (none yet).", f"{here}/prepare-request",
            body={"tools": ["TodoWrite", "AskUserQuestion", "ExitPlanMode"]})
    ex.send(("POST", f"{doc}/tool-calls"), "The model writes its todo list (TodoWrite, the "
            "whole list).", f"{here}/tool-calls", body={"tool": "TodoWrite",
                                                        "input": {"todos": _TODOS}})
    ex.send(("POST", f"{doc}/permission-check"), "The host asks before running its own "
            "Bash tool.", f"{here}/permission-check",
            body={"tool": "Bash", "input": {"command": "git status"}})
    asked = ex.send(("POST", f"{doc}/tool-calls"), "The model asks the user a question: "
                    "202, waiting.", f"{here}/tool-calls",
                    body={"tool": "AskUserQuestion", "callId": "call-ask-1",
                          "input": {"questions": [_QUESTION]}})
    question = asked.json()["interactionId"]
    ex.send(("GET", doc), "The session document, the question pending in it.", here)
    ex.send(("GET", sessions), "The sessions with something waiting for a person.",
            f"{sessions}?waiting=true")
    ex.send(("GET", f"{doc}/tool-calls/{{call_id}}"), "The waiting call.",
            f"{here}/tool-calls/call-ask-1")
    ex.send(("POST", f"{doc}/interactions/{{interaction_id}}/activity"), "The user moves "
            "through the options: the countdown pauses for good.",
            f"{here}/interactions/{question}/activity", body={"action": "move"})
    ex.send(("POST", f"{doc}/interactions/{{interaction_id}}/respond"), "The user answers: "
            "the completed call.", f"{here}/interactions/{question}/respond",
            body={"decision": "modify", "input": {
                "questions": [_QUESTION],
                "answers": {_QUESTION["question"]: "SQLite (Recommended)"}}})
    ex.send(("POST", f"{doc}/interactions/{{interaction_id}}/respond"), "Answered twice: "
            "409, the first answer stands.", f"{here}/interactions/{question}/respond",
            body={"decision": "deny"})
    ex.send(("POST", f"{doc}/mode"), "The user turns Plan on (`/plan`).", f"{here}/mode",
            body={"mode": "plan"})
    planned = ex.send(("POST", f"{doc}/tool-calls"), "The model submits its plan "
                      "(ExitPlanMode): 202, waiting for approval.", f"{here}/tool-calls",
                      body={"tool": "ExitPlanMode", "input": {
                          "plan": "1. Add --json to `export`.\n2. Test both formats."}})
    ex.send(("POST", f"{doc}/interactions/{{interaction_id}}/respond"), "The user approves "
            "the plan: Plan is off, the model builds.",
            f"{here}/interactions/{planned.json()['interactionId']}/respond",
            body={"decision": "approve"})
    ex.send(("POST", f"{doc}/goal"), "A goal the agent pursues on its own.", f"{here}/goal",
            body={"objective": "Ship the --json flag with its tests."})
    ex.send(("POST", f"{doc}/goal"), "A blank objective: 422.", f"{here}/goal",
            body={"objective": ""})
    ex.send(("DELETE", f"{doc}/goal"), "The goal ends.", f"{here}/goal")
    ex.send(("DELETE", f"{doc}/goal"), "No goal to end: 409 `refused`.", f"{here}/goal")
    ex.send(("POST", f"{doc}/compact"), "The host compacted its context.", f"{here}/compact",
            body={})
    ex.send(("GET", "/v1/models"), "The models of the session's workspace.",
            f"/v1/models?sessionId={sid}")
    ex.send(("GET", "/v1/models/resolve"), "A reference resolved.",
            "/v1/models/resolve?ref=sonnet%24high")
    ex.send(("GET", "/v1/models/resolve"), "A level the model does not have: 422.",
            "/v1/models/resolve?ref=haiku%24high")
    ex.send(("PUT", f"{doc}/model"), "The user picks the session's model.", f"{here}/model",
            body={"model": "sonnet$high"})
    ex.send(("GET", "/v1/settings"), "The service-wide settings.", "/v1/settings")
    ex.send(("PUT", "/v1/settings"), "Unanswered questions no longer auto-continue.",
            "/v1/settings", body={"autoContinueQuestions": False})
    ex.send(("GET", f"{doc}/timeline"), "The newest two timeline entries.",
            f"{here}/timeline?limit=2")
    ex.send(("GET", f"{doc}/events"), "The session's first event.", f"{here}/events?limit=1")
    ex.send(("GET", f"{doc}/audit"), "The session's audit: chain and projections agree.",
            f"{here}/audit")
    version = int(ex.client.get(f"{here}/events?limit=1", headers={
        "Authorization": f"Bearer {EXAMPLE_TOKEN}"}).json()["version"])
    ex.send(("GET", f"{doc}/events/stream"), "The session's stream resumed after an id: "
            "the events after it, then live ones (here the stream stays open; shown are "
            "the first events).", f"{here}/events/stream",
            headers={"Last-Event-ID": str(version - 2)}, stream=True)
    head = int(ex.client.get("/healthz").json()["headPosition"])
    ex.send(("GET", "/v1/events/stream"), "Every session's stream from a global position.",
            f"/v1/events/stream?after={head - 1}", stream=True)
    ex.send(("GET", "/v1/event-types"), "The `event:` names the streams send.",
            "/v1/event-types")
    ex.send(("POST", "/v1/hooks/claude-code"), "Claude Code starts a session in the "
            "workspace (its `http` hook).", "/v1/hooks/claude-code",
            body={"session_id": _HOOK_SESSION, "transcript_path":
                  f"/home/me/.claude/projects/-home-me-shop/{_HOOK_SESSION}.jsonl",
                  "cwd": str(workspace), "hook_event_name": "SessionStart",
                  "permission_mode": "default", "source": "startup"})
    from ..claude_code.observations import ledger_session_id

    hosted = f"{sessions}/{ledger_session_id(_HOOK_SESSION)}"
    ex.send(("PUT", f"{doc}/answer-in"), "Its questions and plan approvals answered on "
            "these pages while its hook waits.", f"{hosted}/answer-in",
            body={"answerIn": "here"})
    ex.send(("PUT", f"{doc}/answer-in"), "A session this service runs itself: 409.",
            f"{here}/answer-in", body={"answerIn": "here"})
    codex = {"session_id": _CODEX_THREAD, "turn_id": "turn-1", "cwd": str(workspace),
             "model": "gpt-5.5", "permission_mode": "default"}
    ex.send(("POST", "/v1/hooks/codex"), "Codex CLI starts a thread (its command hook "
            "forwards the event here): nothing to add.", "/v1/hooks/codex",
            body={**codex, "hook_event_name": "SessionStart", "source": "startup"})
    ex.send(("POST", f"{doc}/mode"), "The user turns Plan on for the Codex session.",
            f"{sessions}/{ledger_session_id(_CODEX_THREAD, None, 'codex')}/mode",
            body={"mode": "plan"})
    ex.send(("POST", "/v1/hooks/codex"), "Codex wants to apply a patch while planning: "
            "refused, with the reason Codex passes to its model.", "/v1/hooks/codex",
            body={**codex, "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
                  "tool_input": {"command": _PATCH}, "tool_use_id": "call-patch-1"})
    ex.send(("POST", "/v1/hooks/gemini"), "Gemini CLI starts a session.", "/v1/hooks/gemini",
            body={"session_id": "b7e4a1d0-gemini", "cwd": str(workspace),
                  "hook_event_name": "SessionStart", "source": "startup",
                  "timestamp": "2026-01-01T00:00:40.000Z"})
    ex.send(("GET", "/"), "The web page (no token needed; it logs in with `/v1/login`).",
            "/", token=False, show_body=False)
    ex.send(("DELETE", doc), "The session is deleted.", here)
    ex.send(("GET", doc), "A deleted session: 410.", here)
    ex.send(("GET", doc), "An unknown session: 404 `session_not_found`.",
            f"{sessions}/sess_missing")
    ex.send(("POST", "/v1/logout"), "The browser logs out: its cookie is cleared.",
            "/v1/logout", token=False,
            headers={"Cookie": cookie})




_STREAM_TIMEOUT_S = 30.0


def _stopping_streams(app: ASGIApp, stopping: threading.Event) -> ASGIApp:
    """``app``, whose event streams end once they have sent their first events: the server
    is told it is stopping then (an open stream would never end, and the TestClient hands
    over an answer only once it has)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            await send(message)
            if (message["type"] == "http.response.body" and message.get("body")
                    and str(scope.get("path", "")).endswith("/stream")):
                stopping.set()

        await app(scope, receive, sending)

    return wrapped


def run_examples() -> list[Exchange]:
    """Run the scenario against a fresh app and answer its exchanges, in order, normalised."""
    from ..config import ServerSettings
    from ..config.workspace import config_path
    from ..service.sessions import SessionService
    from . import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Starlette's note about the httpx2 package
        from starlette.testclient import TestClient

    with tempfile.TemporaryDirectory(prefix="sessionledger-examples-") as directory:
        temporary = Path(directory).resolve()
        workspace = temporary / "shop"
        config_path(workspace).parent.mkdir(parents=True)
        config_path(workspace).write_text(_catalog(), encoding="utf-8")
        clock = ManualClock(_EPOCH)
        store, projections = open_projected_store("memory://", clock=clock)
        service = SessionService(store, projections, workspace_root=workspace, clock=clock)
        stopping = threading.Event()
        settings = ServerSettings(workspace_root=workspace, token=EXAMPLE_TOKEN,
                                  stream_poll_s=0.05)
        app = create_app(service=service, settings=settings, stopping=stopping)
        app.state.logins.clock = lambda: clock.now().timestamp()
        try:
            with TestClient(_stopping_streams(app, stopping), base_url=f"http://127.0.0.1:{settings.port}",
                            raise_server_exceptions=False) as client:
                recorder = _Recorder(client, clock, stopping, str(temporary))
                _scenario(recorder, workspace)
        finally:
            service.close()
        return recorder.exchanges


def examples_by_route(exchanges: list[Exchange]) -> Iterator[tuple[tuple[str, str],
                                                                    list[Exchange]]]:
    """The exchanges grouped by route, routes in the order first exercised."""
    routes: dict[tuple[str, str], list[Exchange]] = {}
    for exchange in exchanges:
        routes.setdefault(exchange.route, []).append(exchange)
    yield from routes.items()
