"""An accessibility check of the page (issue 23 acceptance 3) and its screenshots (acceptance 4).

axe-core, pinned exactly in ``tests/node/package.json`` and installed from the lock file by
``node_support.install`` (``npm ci`` into ``.cache/node``), is injected into the real page and
``axe.run()`` checks it in several states: the session list, a question with its countdown, a
plan approval whose plan holds HTML (shown as text, EG-7), the controls (the ES-5 refusal, the
delete confirmation, the answers sent, the audit verdict) and a phone-sized viewport. No
violation of impact serious or critical is allowed.

The page's Content-Security-Policy refuses inline scripts, so ``page.add_script_tag`` (which
inserts the file's text as an inline script) is refused; ``page.evaluate`` of the file's
text runs it through the DevTools protocol, which the policy does not govern. The page keeps
its policy: nothing is bypassed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import axe_support
import httpx
import pytest
from hostile_text import COMMENT, DROP
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

BLOCKING = ("serious", "critical")
MOBILE = {"width": 390, "height": 844}
EXCLUSIVE = "Plan and Goal cannot be active at the same time."
QUESTION = {"questions": [
    {"question": "Which database should the service use for its ledger?",
     "header": "Database engine", "multiSelect": False,
     "options": [{"label": "SQLite (Recommended)", "description": "one file, embedded",
                  "preview": "```toml\n[store]\nurl = \"sqlite:///ledger.db\"\n```"},
                 {"label": "PostgreSQL", "description": "a server, for several writers"}]},
    {"question": "Which features?", "header": "Features", "multiSelect": True,
     "options": [{"label": "Search", "description": "full text"},
                 {"label": "Export", "description": "CSV"}]},
]}
HTML_LINE, COMMENT_LINE = DROP, COMMENT  # the hostile lines the TUI and replay tests show too
PLAN = f"""# Tidy the tables

1. Back up the database.
2. Drop the unused columns.

{HTML_LINE}

{COMMENT_LINE}
"""


BROKEN_TYPE_NAMES = """() => [...document.querySelectorAll('#timeline .type')].filter((el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1;
}).map((el) => el.textContent)"""
"""The timeline's event type names laid out on more than one line (each is one word)."""


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def axe_source() -> str:
    """The pinned axe-core's ``axe.min.js``, installed from the lock file."""
    return axe_support.axe_source()


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", "0.5", "--question-deadline-s", "300")
    with running_server(tmp_path_factory.mktemp("web-a11y"), args=args) as running:
        yield running


def _serious(page: Page, axe_source: str) -> list[str]:
    """Inject axe-core (once per document) and run it; its serious and critical violations."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(axe_source + "\n;0")
    violations: list[dict[str, Any]] = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:5]}"
        for v in violations if v["impact"] in BLOCKING
    ]


def _check(page: Page, axe_source: str, state: str) -> None:
    found = _serious(page, axe_source)
    assert found == [], f"axe-core in state {state!r}: {found}"


def _open(page: Page, server: ServerProcess, sid: str, mode: str) -> None:
    page.goto(session_url(server.base_url, sid))
    _expect()(page.locator("#mode-badge")).to_have_text(mode)
    _expect()(page.locator("#connection")).to_have_attribute("data-state", "live")


def _call(http: httpx.Client, sid: str, tool: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": tool, "input": body})
    assert response.status_code == 202, response.text
    return dict(response.json())


def _card(page: Page, kind: str, pending: dict[str, Any]) -> Locator:
    return page.locator(f".{kind}-card[data-interaction-id='{pending['interactionId']}']")


def test_the_page_has_no_serious_accessibility_violation_in_any_state(  # issue 23 acc. 3, EG-7
    page: Page, shots: Shots, web_server: ServerProcess, axe_source: str,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        asked = create_session(http)
        page.goto(web_server.base_url)
        expect(page.locator(f".session-link[data-session-id='{asked}']")).to_be_visible()
        expect(page.locator("body")).to_have_attribute("data-ready", "true")
        _check(page, axe_source, "session list")

        _open(page, web_server, asked, "build")
        question = _card(page, "question", _call(http, asked, "AskUserQuestion", QUESTION))
        countdown = question.locator(".countdown")
        expect(countdown).to_be_visible()
        expect(countdown.locator(".countdown-remaining")).to_contain_text("Auto-continues in")
        shots.take(page, "question-countdown")
        _check(page, axe_source, "question with countdown")

        planned = create_session(http, mode="plan")
        _open(page, web_server, planned, "plan")
        plan = _card(page, "plan", _call(http, planned, "ExitPlanMode", {"plan": PLAN}))
        body = plan.locator(".plan-body")
        expect(body.get_by_text(HTML_LINE, exact=True)).to_be_visible()  # EG-7: seen as text
        expect(body.get_by_text(COMMENT_LINE, exact=True)).to_be_visible()
        assert body.locator("div").count() == 0
        shots.take(page, "plan-with-html")
        _check(page, axe_source, "plan approval")

        # the controls: the ES-5 refusal, the delete confirmation, the audit's verdict
        page.get_by_label("Objective").fill("Ship it")
        page.get_by_role("button", name="Start goal").click()
        expect(page.locator("#goal-error")).to_have_text(EXCLUSIVE)
        page.get_by_role("button", name="Delete session…").click()
        expect(page.locator("#delete-confirm")).to_be_visible()
        expect(page.locator("#audit-verdict")).to_have_attribute("data-ok", "true")
        plan.get_by_role("button", name="Approve").click()
        expect(page.locator("#answers-sent")).to_contain_text("Plan approved")
        shots.take(page, "controls")
        _check(page, axe_source, "controls")


def test_a_question_fits_a_phone_screen(  # issue 23 acceptance 4, issue 23.8
    browser: Browser, shots: Shots, web_server: ServerProcess, axe_source: str,
) -> None:
    expect = _expect()
    context = browser.new_context(viewport=MOBILE, timezone_id="UTC", is_mobile=True,
                                  has_touch=True, device_scale_factor=2)
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        with web_server.client() as http:
            sid = create_session(http)
            _open(page, web_server, sid, "build")
            card = _card(page, "question", _call(http, sid, "AskUserQuestion", QUESTION))
            expect(card.locator(".countdown")).to_be_visible()
            card.locator(".question").first.scroll_into_view_if_needed()
            widths = page.evaluate(
                "({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
            assert widths["scroll"] <= widths["inner"], widths  # no horizontal overflow
            chip = card.locator(".chip").first
            expect(chip).to_have_text("Database en…")
            assert chip.evaluate("el => el.scrollWidth <= el.clientWidth")  # issue 23.8
            expect(page.locator("#timeline .type").nth(5)).to_be_attached()
            assert page.evaluate(BROKEN_TYPE_NAMES) == []  # issue 23.8: no name cut mid-word
            shots.take(page, "mobile-width")
            _check(page, axe_source, "phone width")
    finally:
        context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"
