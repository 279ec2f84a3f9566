"""Dark mode (issue 42, acceptance 3): the page follows ``prefers-color-scheme: dark``.

Over one real ``sessionledger serve``, in a browser context whose colour scheme is dark: the
page's background is dark and its text light, and axe-core finds no violation (colour contrast
included) on the inbox with a question and a plan waiting, a session with a question and its
countdown, and a revised plan with its diff beside grouped audit findings. In the light scheme
the same page is light.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from axe_support import violations
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, read_attached, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

QUESTION = {"questions": [{
    "question": "Which database should the ledger use?", "header": "Database",
    "multiSelect": False,
    "options": [{"label": "SQLite", "description": "one file", "preview": "[store]\nurl = 1"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
LUMINANCE = """(el) => {
  const [r, g, b] = getComputedStyle(el).%s.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);
  const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}"""


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", "0.3", "--question-deadline-s", "300")
    with running_server(tmp_path_factory.mktemp("web-dark"), args=args) as running:
        yield running


def _post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    assert response.status_code in (200, 201, 202), response.text
    return dict(response.json())


def _luminance(page: Page, selector: str, prop: str) -> float:
    """The relative luminance of ``prop`` on the first element ``selector`` finds, read while
    it is on the page (a countdown re-renders the inbox every second)."""
    return float(read_attached(page.locator(selector), LUMINANCE % prop))


def test_dark_mode_follows_the_system_and_keeps_its_contrast(
    browser: Browser, shots: Shots, web_server: ServerProcess, axe: str,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        asked = create_session(http)
        _post(http, f"/v1/sessions/{asked}/tool-calls",
              {"tool": "AskUserQuestion", "input": QUESTION})
        planned = create_session(http, mode="plan")
        calls = f"/v1/sessions/{planned}/tool-calls"
        for todos in (["Keep me", "Drop me"], ["Keep me"]):  # a finding
            _post(http, calls, {"tool": "TodoWrite", "input": {"todos": [
                {"content": c, "status": "pending", "priority": "medium"} for c in todos]}})
        first = _post(http, calls,
                      {"tool": "ExitPlanMode", "input": {"plan": "# Plan\n\n- a\n- b"}})
        _post(http, f"/v1/sessions/{planned}/interactions/{first['interactionId']}/respond",
              {"decision": "feedback", "feedback": "Add c."})
        _post(http, calls, {"tool": "ExitPlanMode", "input": {"plan": "# Plan\n\n- a\n- c"}})
    time.sleep(0.4)  # the question's grace is over: its countdown shows

    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1360, "height": 1000}, timezone_id="UTC",
                                  color_scheme="dark")
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(web_server.base_url)
        expect(page.locator("#inbox-list")).to_have_attribute("data-count", "2")
        assert _luminance(page, "html", "backgroundColor") < 0.03  # dark
        assert _luminance(page, "body", "color") > 0.6  # light text
        assert _luminance(page, ".inbox-entry >> nth=0", "backgroundColor") < 0.05
        shots.take(page, "dark-inbox")
        assert violations(page, axe) == []

        page.goto(session_url(web_server.base_url, asked))
        expect(page.locator(".question-card .countdown")).to_be_visible()
        shots.take(page, "dark-question")
        assert violations(page, axe) == []

        page.goto(session_url(web_server.base_url, planned))
        expect(page.locator(".plan-card .plan-diff")).to_be_visible()
        expect(page.locator("#findings .finding-group")).to_have_count(1)
        assert _luminance(page, ".plan-card", "backgroundColor") < 0.05
        shots.take(page, "dark-plan-diff")
        assert violations(page, axe) == []
    finally:
        context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"

    light = browser.new_context(viewport={"width": 1360, "height": 1000}, color_scheme="light")
    try:
        page = light.new_page()
        page.goto(web_server.base_url)
        expect(page.locator("#inbox-list")).to_have_attribute("data-count", "2")
        assert _luminance(page, "html", "backgroundColor") > 0.8
    finally:
        light.close()
