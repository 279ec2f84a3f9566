"""What waits in other sessions, in a real browser (issue 23.4; sessions by name, 23.6).

A real ``sessionledger serve`` (question grace 1 s, a deadline far enough off that nothing
auto-continues while the test looks). Session A is open on the page. A question asked in
session B puts a badge on B's entry in the sidebar ("1 question" and the time left until its
deadline, the server's ``deadlineAt``), and the title reads "(1) sessionledger"; a plan approval
in B makes it "(2)". With the notification permission granted, each of them creates a desktop
notification for B; a question asked in A, the session on screen, creates none. Answering
everything clears the badges and the count. Sessions are listed by their names. Without the
permission the page never asks for it on load; "Notify me" asks when clicked. With 130
sessions the sidebar lists the newest 100 and the waiting one below them, the rest on "Show
more sessions", every list request paged (issue 41).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
ASKED_FIRST = "Refactor the billing module"
RECORD_NOTIFICATIONS = """
(() => {
  const real = window.Notification;
  let permission = real ? real.permission : 'default';
  window.__notes = [];
  window.__permissionRequests = 0;
  class Recorded {
    constructor(title, options = {}) {
      window.__notes.push({ title, body: options.body || '', tag: options.tag || '' });
    }
    close() {}
    static get permission() { return permission; }
    static async requestPermission() {
      window.__permissionRequests += 1;
      permission = 'denied';
      return permission;
    }
  }
  window.Notification = Recorded;
})();
"""


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", "1", "--question-deadline-s", "170")
    with running_server(tmp_path_factory.mktemp("web-attention"), args=args) as running:
        yield running


def _call(http: httpx.Client, sid: str, tool: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": tool, "input": body})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


def _respond(http: httpx.Client, sid: str, asked: dict[str, Any], decision: str) -> None:
    response = http.post(
        f"/v1/sessions/{sid}/interactions/{asked['interactionId']}/respond",
        json={"decision": decision})
    assert response.status_code == 200, response.text


def _entry(http: httpx.Client, sid: str) -> dict[str, Any]:
    (entry,) = [e for e in http.get("/v1/sessions").json()["sessions"] if e["sessionId"] == sid]
    return dict(entry)


def _notes(page: Page) -> list[dict[str, str]]:
    notes: list[dict[str, str]] = page.evaluate("window.__notes")
    return notes


def test_the_sidebar_and_title_tell_what_waits_elsewhere_and_notify(  # issue 23.4, 23.6
    browser: Browser, shots: Shots, server: ServerProcess,
) -> None:
    expect = _expect()
    context = browser.new_context(viewport={"width": 1360, "height": 1000}, timezone_id="UTC")
    context.grant_permissions(["notifications"], origin=server.base_url)
    context.add_init_script(RECORD_NOTIFICATIONS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        with server.client() as http:
            a, b = create_session(http), create_session(http, mode="yolo")
            message = http.post(f"/v1/sessions/{b}/messages",
                                json={"role": "user", "content": ASKED_FIRST})
            assert message.status_code == 201, message.text
            b_name = _entry(http, b)["name"]
            assert b_name.endswith(f" · {ASKED_FIRST}")
            page.goto(session_url(server.base_url, a))
            expect(page.locator("#connection")).to_have_attribute("data-state", "live")
            entry_a = page.locator(f".session-link[data-session-id='{a}']")
            entry_b = page.locator(f".session-link[data-session-id='{b}']")
            expect(entry_b.locator(".session-name")).to_have_text(b_name)
            expect(entry_b.locator(".session-name")).to_have_attribute(
                "title", re.compile(re.escape(b)))
            expect(entry_a.locator(".session-name")).to_have_text(_entry(http, a)["name"])
            expect(page).to_have_title("sessionledger")
            expect(page.locator("#notify")).to_be_hidden()  # already allowed: nothing to ask

            question_b = _call(http, b, "AskUserQuestion", QUESTION)
            badge_b = entry_b.locator(".attention")
            expect(badge_b.locator(".attention-what")).to_have_text("1 question")
            deadline = _entry(http, b)["pending"]["deadlineAt"]
            assert deadline is not None
            left = badge_b.locator(".time-left")
            expect(left).to_have_attribute("data-deadline-at", deadline)
            expect(left).to_have_text(re.compile(r"^[23]:\d\d$"))
            expect(page).to_have_title("(1) sessionledger")
            expect(entry_a.locator(".attention")).to_have_count(0)
            page.wait_for_function("window.__notes.length === 1")
            (note,) = _notes(page)
            assert note["title"] == f"Waiting for you: {b_name}"
            assert note["body"] == "1 question" and note["tag"] == f"sessionledger-{b}"

            assert _call(http, b, "EnterPlanMode", {})["success"] is True
            plan_b = _call(http, b, "ExitPlanMode", {"plan": "Split the invoices table."})
            expect(badge_b.locator(".attention-what")).to_have_text(
                "1 question, 1 plan approval")
            expect(page).to_have_title("(2) sessionledger")
            page.wait_for_function("window.__notes.length === 2")
            assert _notes(page)[1]["body"] == "1 question, 1 plan approval"

            question_a = _call(http, a, "AskUserQuestion", QUESTION)  # the session on screen
            expect(page.locator(".question-card")).to_have_count(1)
            expect(page).to_have_title("(3) sessionledger")
            expect(entry_a.locator(".attention-what")).to_have_text("1 question")
            assert [n["tag"] for n in _notes(page)] == [f"sessionledger-{b}"] * 2
            shots.take(page, "attention-badges")

            _respond(http, b, question_b, "deny")
            expect(badge_b.locator(".attention-what")).to_have_text("1 plan approval")
            expect(badge_b.locator(".time-left")).to_have_count(0)  # no timer on a plan
            expect(page).to_have_title("(2) sessionledger")
            _respond(http, b, plan_b, "approve")
            _respond(http, a, question_a, "deny")
            expect(page).to_have_title("sessionledger")
            expect(page.locator(".session-link .attention")).to_have_count(0)
            assert len(_notes(page)) == 2
            shots.take(page, "nothing-waits")
    finally:
        context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def test_notify_me_asks_for_the_permission_only_when_clicked(  # issue 23.4
    browser: Browser, server: ServerProcess,
) -> None:
    expect = _expect()
    context = browser.new_context(timezone_id="UTC")
    context.add_init_script(RECORD_NOTIFICATIONS)
    page = context.new_page()
    try:
        page.goto(server.base_url)
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        button = page.get_by_role("button", name="Notify me")
        expect(button).to_be_visible()
        assert page.evaluate("window.__permissionRequests") == 0  # never on load
        button.click()
        expect(button).to_be_hidden()  # refused: there is nothing left to ask
        assert page.evaluate("window.__permissionRequests") == 1
    finally:
        context.close()


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", "600", "--question-deadline-s", "1200")
    with running_server(tmp_path_factory.mktemp("web-crowded"), args=args) as running:
        yield running


def test_the_sidebar_reads_the_list_a_page_at_a_time_and_finds_what_waits(  # issue 41
    page: Page, shots: Shots, crowded: ServerProcess,
) -> None:
    """130 sessions, the oldest with a question waiting: the sidebar lists the newest 100 and
    the waiting one below them (the title counts it), and "Show more sessions" the rest —
    the page no longer reads the whole list at once. A search finds an older session too."""
    expect = _expect()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    with crowded.client() as http:
        waiting = create_session(http)
        _call(http, waiting, "AskUserQuestion", QUESTION)
        made = [create_session(http) for _ in range(129)]
        newest = made[-1]
        page.goto(session_url(crowded.base_url, newest))
        links = page.locator(".session-link")
        expect(links).to_have_count(101)
        expect(page).to_have_title("(1) sessionledger")
        last = links.last
        expect(last).to_have_attribute("data-session-id", waiting)
        expect(last.locator(".attention-what")).to_have_text("1 question")
        more = page.get_by_role("button", name="Show more sessions")
        expect(more).to_be_visible()
        shots.take(page, "newest-100-and-the-waiting-one")
        lists = [url for url in asked if "/v1/sessions?" in url]
        assert lists and all("limit=" in url for url in lists), lists
        assert any("waiting=true" in url for url in lists)

        more.click()
        expect(links).to_have_count(130)
        expect(more).to_have_count(0)
        expect(links.last).to_have_attribute("data-session-id", waiting)
        shots.take(page, "all-130")

        # A search reads past the sessions listed: the oldest but one (not waiting, not among
        # the newest 100) is found by a piece of its id; cleared, the list is as it was.
        page.reload()
        expect(links).to_have_count(101)
        search = page.get_by_label("Search sessions")
        search.fill(made[0][-10:].lower())
        expect(links).to_have_count(1)
        expect(links.first).to_have_attribute("data-session-id", made[0])
        expect(page.locator("#session-count")).to_have_text("1 of 130 sessions shown")
        expect(more).to_have_count(0)  # nothing more to read while searching
        search.fill("")
        expect(links).to_have_count(101)
        expect(more).to_be_visible()
        # a filter every session matches: its matches a page at a time, and no count
        page.locator("#filter-mode").select_option("build")
        expect(links).to_have_count(100)
        expect(page.locator("#session-count")).to_have_text("")
        more.click()
        expect(links).to_have_count(130)
        expect(more).to_have_count(0)
