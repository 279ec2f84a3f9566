"""Reviewing plans on the page (issue 42, acceptance 3): sticky decisions and plan versions.

Over one real ``sessionledger serve``. A 6,800-character plan under review keeps Approve,
Reject and the feedback field on screen wherever it is scrolled to (desktop and phone). After
feedback sent from the page the agent submits a revised plan: the page marks it as v2, shows
the feedback that led to it and a line diff against v1 (each line marked + or a minus sign, in text
not by colour alone), also after a reload; a second round makes v3, diffed against v2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from axe_support import violations
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

STEPS = 83
LONG_PLAN = "# Move the ledger to PostgreSQL\n\n" + "\n".join(
    f"{n}. Step {n:03d}: move the next table of the ledger, then check its row counts twice."
    for n in range(1, STEPS + 1))
V1 = """# Tidy the tables

- Back up the database.
- Drop the unused columns.
- Vacuum."""
V2 = """# Tidy the tables

- Drop the unused columns.
- Vacuum.
- Add a rollback script."""
V3 = """# Tidy the tables

- Drop the unused columns.
- Vacuum, then analyze.
- Add a rollback script."""
FEEDBACK_1 = "No backup step: we have snapshots. Add a rollback script instead."
FEEDBACK_2 = "Analyze after the vacuum."
MINUS = "\N{MINUS SIGN}"  # the mark of a removed line


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("web-plan-review")) as running:
        yield running


def _plan_session_open(page: Page, http: httpx.Client, server: ServerProcess) -> str:
    """A new session in Plan, open on the page."""
    sid = create_session(http, mode="plan")
    page.goto(session_url(server.base_url, sid))
    _expect()(page.locator("#mode-badge")).to_have_text("plan")
    return sid


def _submit(http: httpx.Client, sid: str, plan: str) -> dict[str, Any]:
    response = http.post(f"/v1/sessions/{sid}/tool-calls",
                         json={"tool": "ExitPlanMode", "input": {"plan": plan}})
    assert response.status_code == 202, response.text
    return dict(response.json())


def _decision_on_screen(page: Page, card: Locator) -> None:
    expect = _expect()
    for name in ("Approve", "Reject", "Send feedback"):
        expect(card.get_by_role("button", name=name)).to_be_in_viewport(ratio=1)
    expect(card.get_by_label("Feedback")).to_be_in_viewport(ratio=1)


def _scroll_through(page: Page, card: Locator) -> None:
    items = card.locator(".plan-body li")
    assert items.count() == STEPS
    assert 6800 <= len(LONG_PLAN) < 7000
    for target in (card.locator(".plan-body h1"), items.nth(20), items.nth(45), items.nth(70)):
        target.evaluate("el => el.scrollIntoView({block: 'start'})")
        _expect()(target).to_be_in_viewport()
        _decision_on_screen(page, card)


def test_the_decision_on_a_long_plan_stays_on_screen_while_it_is_read(
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = _plan_session_open(page, http, web_server)
        asked = _submit(http, sid, LONG_PLAN)
    card = page.locator(f".plan-card[data-interaction-id='{asked['interactionId']}']")
    expect(card.locator(".plan-body li")).to_have_count(STEPS)
    assert page.evaluate("document.documentElement.scrollHeight") > 2 * 1000  # it scrolls
    _scroll_through(page, card)
    shots.take(page, "sticky-decision")

    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    _scroll_through(page, card)
    card.get_by_label("Feedback").fill("Do the small tables first.")
    card.get_by_role("button", name="Send feedback").click()
    expect(page.locator("#answers-sent")).to_contain_text("Feedback sent")


def test_a_revised_plan_is_marked_with_its_feedback_and_a_diff(
    page: Page, shots: Shots, web_server: ServerProcess, axe: str,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = _plan_session_open(page, http, web_server)
        first = _submit(http, sid, V1)
        card = page.locator(f".plan-card[data-interaction-id='{first['interactionId']}']")
        expect(card).to_have_attribute("data-version", "1")
        expect(card.locator(".plan-revision")).to_have_count(0)  # a first plan: no revision
        card.get_by_label("Feedback").fill(FEEDBACK_1)
        card.get_by_role("button", name="Send feedback").click()
        expect(page.locator("#answers-sent")).to_contain_text("Feedback sent")

        second = _submit(http, sid, V2)
        card = page.locator(f".plan-card[data-interaction-id='{second['interactionId']}']")
        expect(card).to_have_attribute("data-version", "2")

        def check_v2() -> None:
            expect(card.locator("h3")).to_have_text("Plan approval · v2")
            revision = card.locator(".plan-revision")
            expect(revision.locator(".revision-line")).to_contain_text("Revision v2")
            expect(revision.locator(".feedback-text")).to_have_text(FEEDBACK_1)
            expect(revision.locator(".plan-diff-box summary")).to_have_text(
                "Changes from v1: 1 line added, 1 removed")
            expect(revision.locator(".diff-line .diff-text")).to_have_text([
                "# Tidy the tables", "\u00a0", "- Back up the database.",
                "- Drop the unused columns.", "- Vacuum.", "- Add a rollback script."])
            # marked in text, not by colour alone: the mark, and the words a reader hears
            expect(revision.locator(".diff-line .diff-mark")).to_have_text(
                [" ", " ", MINUS, " ", " ", "+"])
            expect(revision.locator(".diff-del")).to_have_text(
                [f"{MINUS}removed: - Back up the database."])
            expect(revision.locator(".diff-add")).to_have_text(["+added: - Add a rollback script."])

        check_v2()
        shots.take(page, "plan-diff")
        assert violations(page, axe) == []

        page.reload()
        expect(card).to_have_attribute("data-version", "2")
        check_v2()  # read from the log again after a reload

        answered = http.post(
            f"/v1/sessions/{sid}/interactions/{second['interactionId']}/respond",
            json={"decision": "feedback", "feedback": FEEDBACK_2})
        assert answered.status_code == 200, answered.text
        third = _submit(http, sid, V3)
    card = page.locator(f".plan-card[data-interaction-id='{third['interactionId']}']")
    expect(card.locator("h3")).to_have_text("Plan approval · v3")
    expect(card.locator(".feedback-text")).to_have_text(FEEDBACK_2)
    expect(card.locator(".diff-del .diff-text")).to_have_text(["- Vacuum."])
    expect(card.locator(".diff-add .diff-text")).to_have_text(["- Vacuum, then analyze."])
