"""The page for someone running many agents (issue 42, acceptance 3): the inbox and the sidebar.

One real ``sessionledger serve`` over 50 sessions (written in process before it starts: each
in its own workspace ``project-NN``, every tenth from ``codex``), of which three wait: a
question in ``project-05``, a question asked a moment later in ``project-20`` (so its deadline
is later) and a plan approval in ``project-40`` (no deadline). The session list orders them
newest first (40, 20, 5); the inbox orders them by deadline (5, 20, then 40), names each by
its session name, says what waits and links to it. It is the landing view, reachable from any
session by the top bar's link with its count, and on a phone it comes before the session list.
The sidebar is searched and filtered; long names wrap; a session's heading is its name.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from axe_support import requirement_ids, violations
from server_support import ServerProcess, running_server
from web_support import Shots, read_attached, session_url

from sessionledger import SessionService

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SESSIONS = 50
WAITING = (5, 20, 40)
QUESTION = {"questions": [{
    "question": "Which database should the ledger use?", "header": "Database",
    "multiSelect": False,
    "options": [{"label": "SQLite", "description": "one file"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
LONG_MESSAGE = "Migrate the billing service to the new invoice schema and backfill"
MOBILE = {"width": 390, "height": 844}


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, list[str]]]:
    directory = tmp_path_factory.mktemp("web-inbox")
    workspace = directory / "workspace"
    workspace.mkdir()
    service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}", workspace_root=workspace)
    try:
        ids = []
        for n in range(SESSIONS):
            (workspace / f"project-{n:02d}").mkdir()
            ids.append(service.create_session(
                workspace=str(workspace / f"project-{n:02d}"),
                client="codex" if n % 10 == 3 else None,
                mode="plan" if n == 40 else None)["sessionId"])
    finally:
        service.close()
    args = ("--question-grace-s", "0.5", "--question-deadline-s", "300")
    with running_server(directory, args=args) as server, server.client() as http:
        for n in WAITING:
            _post(http, f"/v1/sessions/{ids[n]}/messages",
                  {"role": "user", "content": f"{LONG_MESSAGE} (agent {n})"})
        _call(http, ids[5], "AskUserQuestion", QUESTION)
        time.sleep(0.3)  # the second question's deadline is later
        _call(http, ids[20], "AskUserQuestion", QUESTION)
        _call(http, ids[40], "ExitPlanMode", {"plan": "# Split the invoices table\n\n1. Copy."})
        yield server, ids


def _post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    assert response.status_code in (200, 201, 202), response.text
    return dict(response.json())


def _call(http: httpx.Client, sid: str, tool: str, body: dict[str, Any]) -> dict[str, Any]:
    return _post(http, f"/v1/sessions/{sid}/tool-calls", {"tool": tool, "input": body})


def _names(server: ServerProcess) -> dict[str, str]:
    with server.client() as http:
        listed = http.get("/v1/sessions", params={"limit": 1000}).json()["sessions"]
    return {s["sessionId"]: s["name"] for s in listed}


def _check_inbox(page: Page, server: ServerProcess, ids: list[str]) -> None:
    expect = _expect()
    names = _names(server)
    entries = page.locator("#inbox-list > li.inbox-entry")
    expect(page.locator("#inbox-list")).to_have_attribute("data-ready", "true")
    expect(entries).to_have_count(3)
    expected = [ids[n] for n in WAITING]  # by deadline: 5, then 20; the plan has none
    assert entries.evaluate_all("els => els.map(e => e.dataset.sessionId)") == expected
    expect(entries.locator(".inbox-session")).to_have_text([names[sid] for sid in expected])
    assert all(names[sid] != sid for sid in expected)  # a name, not the raw id
    expect(entries.locator(".inbox-what")).to_have_text([
        "Question: Which database should the ledger use?",
        "Question: Which database should the ledger use?",
        "Plan approval: Split the invoices table"])
    expect(entries.nth(0).locator(".time-left")).to_have_text(re.compile(r"^[45]:\d\d$"))
    expect(entries.nth(2).locator(".inbox-deadline")).to_have_text("no deadline: waits for you")
    first, second = (entries.nth(i).locator("time").get_attribute("datetime") for i in (0, 1))
    assert first is not None and second is not None and first < second
    for n, sid in enumerate(expected):
        expect(entries.nth(n).locator("a")).to_have_attribute("href", f"#/sessions/{sid}")


def test_the_page_lands_on_an_inbox_of_what_waits_across_sessions_oldest_deadline_first(
    page: Page, shots: Shots, many: tuple[ServerProcess, list[str]], axe: str,
) -> None:
    expect = _expect()
    server, ids = many
    page.goto(server.base_url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator(".session-link")).to_have_count(SESSIONS)
    expect(page.get_by_text("Choose a session")).to_have_count(0)
    _check_inbox(page, server, ids)
    expect(page.locator("#inbox-count")).to_have_text("3")
    expect(page.locator("#inbox-link")).to_have_text("Inbox 3 waiting for you")
    shots.take(page, "inbox")
    assert violations(page, axe) == []
    assert requirement_ids(page) == []  # no "HO-6" in what a person reads

    page.locator("#inbox-list > li").nth(1).locator("a").click()  # the entry opens its session
    expect(page).to_have_url(session_url(server.base_url, ids[20]))
    expect(page.locator(".question-card")).to_have_count(1)
    page.locator("#inbox-link").click()  # and the inbox is one click away from any view
    expect(page).to_have_url(re.compile(r"#/$"))
    _check_inbox(page, server, ids)


def test_on_a_phone_the_inbox_comes_before_the_session_list(
    browser: Browser, shots: Shots, many: tuple[ServerProcess, list[str]], axe: str,
) -> None:
    expect = _expect()
    server, ids = many
    context = browser.new_context(viewport=MOBILE, timezone_id="UTC", is_mobile=True,
                                  has_touch=True, device_scale_factor=2)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.base_url)
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        _check_inbox(page, server, ids)
        inbox = page.locator("#inbox").bounding_box()
        sessions = page.locator("#session-list").bounding_box()
        assert inbox is not None and sessions is not None
        assert inbox["y"] + inbox["height"] <= sessions["y"]  # what waits, then the list
        expect(page.locator("#inbox-list > li").first).to_be_in_viewport()
        widths = page.evaluate(
            "({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
        assert widths["scroll"] <= widths["inner"], widths
        shots.take(page, "phone-inbox")
        assert violations(page, axe) == []

        page.goto(session_url(server.base_url, ids[5]))  # a session: its card before the list
        card = page.locator(".question-card")
        expect(card).to_be_visible()
        box = card.bounding_box()
        sessions = page.locator("#session-list").bounding_box()
        assert box is not None and sessions is not None and box["y"] < sessions["y"]
        assert violations(page, axe) == []
    finally:
        context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def test_the_sidebar_is_searched_and_filtered_and_names_are_whole(
    page: Page, shots: Shots, many: tuple[ServerProcess, list[str]], axe: str,
) -> None:
    expect = _expect()
    server, ids = many
    names = _names(server)
    page.goto(server.base_url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    links = page.locator(".session-link")
    expect(links).to_have_count(SESSIONS)
    shown = "els => els.map(e => e.dataset.sessionId)"

    long_name = links.locator(f"xpath=self::*[@data-session-id='{ids[20]}']").locator(
        ".session-name")
    expect(long_name).to_have_text(names[ids[20]])
    assert len(names[ids[20]]) > 40
    box = read_attached(long_name, "el => ({cut: el.scrollWidth > el.clientWidth, "
                                   "height: el.getBoundingClientRect().height})")
    assert box["cut"] is False  # wrapped, not cut
    assert box["height"] > 25  # two lines

    search = page.get_by_label("Search sessions")
    search.fill("project-07")  # the workspace
    expect(links).to_have_count(1)
    assert links.evaluate_all(shown) == [ids[7]]
    expect(page.locator("#session-count")).to_have_text(f"1 of {SESSIONS} sessions shown")
    search.fill(ids[33][-8:].lower())  # a piece of the id, any case
    assert links.evaluate_all(shown) == [ids[33]]
    search.fill("BILLING project-20")  # words of the name, in any order and case
    expect(links).to_have_count(1)
    assert links.evaluate_all(shown) == [ids[20]]
    search.fill("nothing like this")
    expect(page.locator("#session-list")).to_have_text("No session matches.")
    search.fill("")
    expect(links).to_have_count(SESSIONS)

    page.get_by_label("Client").select_option(label="Codex CLI")
    expect(links).to_have_count(5)
    assert sorted(links.evaluate_all(shown)) == sorted(ids[n] for n in range(3, SESSIONS, 10))
    page.get_by_label("Client").select_option(label="none (sessionledger)")
    expect(links).to_have_count(SESSIONS - 5)
    page.get_by_label("Client").select_option(label="any")
    page.get_by_label("Mode").select_option("plan")
    expect(links).to_have_count(1)
    assert links.evaluate_all(shown) == [ids[40]]
    page.get_by_label("Mode").select_option("")
    page.get_by_label("Waiting only").check()
    expect(links).to_have_count(3)
    assert sorted(links.evaluate_all(shown)) == sorted(ids[n] for n in WAITING)
    shots.take(page, "filtered-sidebar")
    assert violations(page, axe) == []
    page.get_by_label("Waiting only").uncheck()
    expect(links).to_have_count(SESSIONS)
    page.get_by_label("Waiting first").check()
    assert sorted(links.evaluate_all(shown)[:3]) == sorted(ids[n] for n in WAITING)
    expect(page.locator(".session-list li.waiting")).to_have_count(3)

    links.first.click()  # the header names the session
    sid = links.first.get_attribute("data-session-id")
    assert sid is not None
    expect(page.locator("#session-title")).to_have_text(names[sid])
    expect(page.locator(".session-head .session-id")).to_have_text(sid)
