"""docs/http-api.md shows a request and its answer for every route, and they are true.

The examples are read back from the page itself (its ``### `METHOD path` `` sections and
their pairs of ``http`` blocks), the story that produced them is run again against the real
app (sessionledger/http/examples.py, in process), and each documented exchange must be the
one the app gives now: the same request, the exact status, the same headers shown and the
same body once the values that vary between runs are replaced alike on both sides. Every
route the app answers (its routes walked, included routers and mounts too) must have an
example or a one-line note on the page, so a route added without one fails here by name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from sessionledger import ServerSettings, SessionService
from sessionledger.http import create_app
from sessionledger.http.examples import (
    EXAMPLE_TOKEN,
    NOTES,
    Exchange,
    app_routes,
    normalise,
    normalise_text,
    run_examples,
)

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "http-api.md"

_SECTION = re.compile(r"^### `(\S+) (\S+)`$", re.M)
_BLOCK = re.compile(r"^```http\n(.*?)\n```$", re.M | re.S)


@dataclass(frozen=True)
class Documented:
    """One exchange as the page shows it."""

    route: tuple[str, str]
    number: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int
    answer_headers: dict[str, str]
    answer: Any

    @property
    def name(self) -> str:
        return f"{self.route[0]} {self.route[1]} #{self.number + 1}"


def _split(block: str) -> tuple[str, dict[str, str], str | None]:
    """A block's first line, its headers and what follows the blank line (None: nothing)."""
    head, _, rest = block.partition("\n\n")
    first, *header_lines = head.split("\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return first, headers, (rest if _ else None)


def _body(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # a stream's text


def sections(page: str) -> dict[tuple[str, str], str]:
    """The example sections of the page by route: each one's text."""
    examples = page.split("\n## Examples\n", 1)[1]
    found = list(_SECTION.finditer(examples))
    return {
        (match[1], match[2]): examples[match.end():found[i + 1].start() if i + 1 < len(found)
                                      else len(examples)]
        for i, match in enumerate(found)
    }


def documented(page: str) -> list[Documented]:
    """Every exchange the page shows, in its order."""
    result = []
    for route, text in sections(page).items():
        blocks = _BLOCK.findall(text)
        assert len(blocks) % 2 == 0, f"{route}: a request without its answer"
        for number in range(len(blocks) // 2):
            request, answer = blocks[2 * number], blocks[2 * number + 1]
            line, headers, body = _split(request)
            method, path = line.split(" ", 1)
            status_line, answer_headers, answer_body = _split(answer)
            result.append(Documented(
                route=route, number=number, method=method, path=path, headers=headers,
                body=_body(body), status=int(status_line.split(" ")[1]),
                answer_headers=answer_headers, answer=_body(answer_body)))
    return result


def missing_examples(app: FastAPI, page: str) -> list[str]:
    """The routes of ``app`` the page neither shows an exchange for nor notes, by name."""
    shown = sections(page)
    return [f"{method} {path}" for method, path in app_routes(app)
            if not _BLOCK.search(shown.get((method, path), ""))
            and (method, path) not in NOTES]


def _app(workspace: Path) -> tuple[FastAPI, SessionService]:
    service = SessionService.open("memory://", workspace_root=workspace)
    return create_app(service=service, settings=ServerSettings(workspace_root=workspace)), service


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def fresh() -> dict[tuple[str, str], list[Exchange]]:
    """The story run again now, its exchanges by route."""
    by_route: dict[tuple[str, str], list[Exchange]] = {}
    for exchange in run_examples():
        by_route.setdefault(exchange.route, []).append(exchange)
    return by_route


DOCUMENTED = documented(PAGE.read_text(encoding="utf-8"))


def test_the_page_shows_many_exchanges() -> None:
    assert len(DOCUMENTED) >= 40
    assert {d.route for d in DOCUMENTED} >= {("POST", "/v1/sessions"), ("GET", "/healthz")}


@pytest.mark.parametrize("shown", DOCUMENTED, ids=lambda d: d.name)
def test_documented_exchange_is_the_real_one(
    shown: Documented, fresh: dict[tuple[str, str], list[Exchange]]
) -> None:
    real = fresh.get(shown.route, [])
    assert shown.number < len(real), f"{shown.name}: the story no longer sends it (make docs)"
    now = real[shown.number]
    assert (now.method, now.path) == (shown.method, normalise_text(shown.path)), shown.name
    assert dict(now.headers) == normalise(shown.headers), shown.name
    assert now.body == normalise(shown.body), shown.name
    assert now.status == shown.status, f"{shown.name}: the status is now {now.status}"
    assert dict(now.answer_headers) == normalise(shown.answer_headers), shown.name
    assert now.answer == normalise(shown.answer), f"{shown.name}: the answer differs"


def test_the_story_shows_nothing_the_page_lacks(
    page: str, fresh: dict[tuple[str, str], list[Exchange]]
) -> None:
    counted: dict[tuple[str, str], int] = {}
    for shown in DOCUMENTED:
        counted[shown.route] = counted.get(shown.route, 0) + 1
    assert {route: len(exchanges) for route, exchanges in fresh.items()} == counted


def test_every_route_of_the_app_has_an_example(tmp_path: Path, page: str) -> None:
    app, service = _app(tmp_path)
    try:
        routes = app_routes(app)
        spec = app.openapi()
        missing = missing_examples(app, page)
    finally:
        service.close()
    # the walk sees every route the OpenAPI description lists, the included routers' too
    described = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    assert described <= set(routes)
    assert {("GET", "/"), ("POST", "/v1/login"), ("GET", "/static/{path}")} <= set(routes)
    assert missing == [], (
        f"docs/http-api.md has no example for {', '.join(missing)}: add a step to the story "
        "in sessionledger/http/examples.py and run `make docs`")


def test_a_route_added_without_an_example_is_named(tmp_path: Path, page: str) -> None:
    app, service = _app(tmp_path)
    try:
        @app.get("/v1/sessions/{session_id}/brand-new")
        def brand_new(session_id: str) -> dict[str, str]:
            return {"sessionId": session_id}

        assert missing_examples(app, page) == ["GET /v1/sessions/{session_id}/brand-new"]
    finally:
        service.close()


def test_every_example_exercises_a_route_of_the_app(
    tmp_path: Path, fresh: dict[tuple[str, str], list[Exchange]]
) -> None:
    app, service = _app(tmp_path)
    try:
        routes = set(app_routes(app))
    finally:
        service.close()
    for (method, template), exchanges in fresh.items():
        assert (method, template) in routes, f"{method} {template} is not a route"
        pattern = re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/?]+", re.escape(template))
                             + r"(\?.*)?$")
        for exchange in exchanges:
            assert pattern.match(exchange.path), (exchange.path, template)
            assert exchange.method == method


def _find(title_part: str) -> Documented:
    for route, text in sections(PAGE.read_text(encoding="utf-8")).items():
        for number, title in enumerate(re.findall(r"^(?!```|\{|\}|HTTP/)(\S.*)\n\n```http",
                                                  text, re.M)):
            if title_part in title:
                return next(d for d in DOCUMENTED if d.route == route and d.number == number)
    raise AssertionError(f"no example titled like {title_part!r}")


def test_the_story_covers_what_a_reader_needs() -> None:
    errors = [d for d in DOCUMENTED if d.status >= 400]
    assert {404, 422, 409, 410, 401} <= {d.status for d in errors}
    for error in errors:  # every error body has the one shape
        assert set(error.answer) == {"error"}, error.name
        assert set(error.answer["error"]) == {"code", "message", "details"}, error.name
    todo = _find("todo list")
    assert todo.body["tool"] == "TodoWrite" and todo.answer["status"] == "completed"
    asked = _find("asks the user a question")
    assert (asked.body["tool"], asked.status) == ("AskUserQuestion", 202)
    answered = _find("The user answers")
    assert answered.answer["result"]["answers"] == {
        "Which database should the export use?": "SQLite (Recommended)"}
    submitted, approved = _find("submits its plan"), _find("approves the plan")
    assert (submitted.body["tool"], submitted.status) == ("ExitPlanMode", 202)
    assert approved.answer["result"]["approved"] is True
    stream = next(d for d in DOCUMENTED if d.route == ("GET", "/v1/events/stream"))
    assert stream.answer_headers["Content-Type"].startswith("text/event-stream")
    assert re.search(r"^event: \w+\ndata: \{.*\}\nid: \d+$", stream.answer, re.M)
    protected = [d for d in DOCUMENTED if d.route[1].startswith("/v1/sessions") and d.status != 401]
    assert all(d.headers.get("Authorization") == f"Bearer {EXAMPLE_TOKEN}" for d in protected)


def test_normalisation_hides_what_varies_and_nothing_else() -> None:
    text = ("sess_01M97HZ8SGH1V3216AFT9DEFKC call_01M97HZ8SXXP3N66K00Z8W75K8 "
            "int_01M97HZ8T44F4QPXFNXV607XY0 " + "ab" * 32 + " /tmp/run-1/shop "
            "sessionledger_login_eb45bebb2c3c4920=1767312004.abc.def; "
            "expires=Mon, 07 Dec 2026 06:12:15 GMT")
    assert normalise_text(text, root="/tmp/run-1") == (
        "sess_… call_… int_… … /home/me/shop sessionledger_login_eb45bebb2c3c4920=…; "
        "expires=…")
    kept = {"callId": "call-ask-1", "sessionId": "sess_missing", "seq": 27,
            "recordedAt": "2026-01-01T00:00:26.000Z", "short": "abc123"}
    assert normalise(kept) == kept
    once = normalise({"sess_01M97HZ8SGH1V3216AFT9DEFKC": [text]}, root="/tmp/run-1")
    assert normalise(once) == once  # applying it to the page's side changes nothing
    assert list(once) == ["sess_…"]
