"""The page's controls and keyboard in a real browser (issue 23 items 3, 6 and the web parts of 8).

Over one real ``sessionledger serve`` with short timers (grace 0.5 s, deadline 4 s): Shift+Tab
on a focused button or link moves the focus and leaves the mode alone, on the page itself it
still cycles (ES-4); ``/plan`` with a task records the task as the user's message; starting a
goal in Plan is refused with ES-5's sentence and changes nothing, then a goal starts and ends;
the audit panel gives its verdict; delete asks first; after "Submit answers" the page says what
was sent, an old "auto-continued" notice gives way to the next question, and the header chip
keeps its ellipsis; the auto-continue switch changes ``GET /v1/settings`` (HO-6), so a question
asked afterwards has no countdown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from eventlog import EventStore

EXCLUSIVE = "Plan and Goal cannot be active at the same time."
DB_QUESTION = "Which database?"
QUESTION = {"questions": [{
    "question": DB_QUESTION, "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
FORMAT_QUESTION = "Which anchor format?"
HEADER = "Formats anchored"
FORMAT = {"questions": [{
    "question": FORMAT_QUESTION, "header": HEADER, "multiSelect": False,
    "options": [{"label": "Slug", "description": "#my-heading"},
                {"label": "Number", "description": "#h-3"}],
}]}


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", "0.5", "--question-deadline-s", "4")
    with running_server(tmp_path_factory.mktemp("web-controls"), args=args) as running:
        yield running


def _open(page: Page, server: ServerProcess, sid: str, mode: str = "build") -> None:
    page.goto(session_url(server.base_url, sid))
    _expect()(page.locator("#mode-badge")).to_have_text(mode)
    _expect()(page.locator("#connection")).to_have_attribute("data-state", "live")


def _state(http: httpx.Client, sid: str) -> dict[str, Any]:
    return dict(http.get(f"/v1/sessions/{sid}").json()["executionState"])


def _events(http: httpx.Client, sid: str, kind: str) -> list[dict[str, Any]]:
    events = http.get(f"/v1/sessions/{sid}/events").json()["events"]
    return [e for e in events if e["type"] == kind]


def _ask(http: httpx.Client, sid: str, question: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/v1/sessions/{sid}/tool-calls",
                         json={"tool": "AskUserQuestion", "input": question})
    assert response.status_code == 202, response.text
    return dict(response.json())


def _card(page: Page, pending: dict[str, Any]) -> Locator:
    return page.locator(f".question-card[data-interaction-id='{pending['interactionId']}']")


def test_shift_tab_on_a_control_moves_the_focus_and_on_the_page_cycles_the_mode(  # issue 23.3
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http)
        _open(page, web_server, sid)
        badge = page.locator("#mode-badge")
        # the list redraws on every new session: a focused link keeps the focus
        page.locator(f".session-link[data-session-id='{sid}']").focus()
        other = create_session(http)
        expect(page.locator(f".session-link[data-session-id='{other}']")).to_have_count(1)
        assert page.evaluate("document.activeElement.dataset.sessionId") == sid
        for control in (page.locator(".mode-button[data-mode='yolo']"),
                        page.locator(f".session-link[data-session-id='{sid}']"),
                        page.locator("#delete-session"), page.locator("#audit-again")):
            control.focus()
            page.keyboard.press("Shift+Tab")
            assert page.evaluate("document.activeElement !== document.body")  # focus moved back
            expect(badge).to_have_text("build")
        assert _state(http, sid)["mode"] == "build"
        assert _events(http, sid, "ModeChanged") == []
        shots.take(page, "shift-tab-on-controls-keeps-the-mode")

        page.evaluate("document.activeElement.blur()")  # the page itself has the focus
        page.keyboard.press("Shift+Tab")  # ES-4: build → edit
        expect(badge).to_have_text("edit")
        assert _state(http, sid)["mode"] == "edit"
        shots.take(page, "shift-tab-on-the-page-cycles")


def test_plan_task_goal_refusal_goal_start_and_end_audit_and_delete(  # issue 23.6, ES-5, EL-4
    page: Page, shots: Shots, web_server: ServerProcess,
    tamper_factory: Callable[[EventStore], Any],
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http)
        _open(page, web_server, sid)
        badge = page.locator("#mode-badge")
        # /plan with a task: Plan on, the task recorded as the user's message
        page.get_by_label("Task for /plan").fill("Plan the <b>schema</b> migration")
        page.get_by_role("button", name="Plan this task").click()
        expect(badge).to_have_text("plan")
        expect(page.get_by_label("Task for /plan")).to_have_value("")
        (message,) = _events(http, sid, "MessageRecorded")
        assert message["data"]["role"] == "user" and message["actor"] == "user"
        assert message["data"]["content"] == "Plan the <b>schema</b> migration"
        assert _state(http, sid)["planEnabled"] is True

        # ES-5: a goal while Plan is on is refused, shown, and nothing changes
        goal = page.locator("#goal")
        objective = goal.get_by_label("Objective")
        objective.fill("Ship the release")
        version = http.get(f"/v1/sessions/{sid}").json()["version"]
        goal.get_by_role("button", name="Start goal").click()
        expect(goal.locator("#goal-error")).to_have_text(EXCLUSIVE)
        expect(goal).to_have_attribute("data-active", "false")
        expect(objective).to_have_value("Ship the release")
        assert http.get(f"/v1/sessions/{sid}").json()["version"] == version
        shots.take(page, "goal-refused-in-plan")

        page.locator(".mode-button[data-mode='build']").click()
        expect(badge).to_have_text("build")
        goal.get_by_role("button", name="Start goal").click()
        expect(goal.locator(".goal-objective")).to_have_text("Ship the release")
        expect(goal.locator("#goal-error")).to_be_hidden()
        assert _state(http, sid)["goal"]["objective"] == "Ship the release"
        shots.take(page, "goal-active")
        goal.get_by_role("button", name="End goal").click()
        expect(goal).to_have_attribute("data-active", "false")
        expect(goal.get_by_label("Objective")).to_be_visible()
        assert _state(http, sid)["goal"] is None

        # the audit's verdict
        page.get_by_role("button", name="Check again").click()
        verdict = page.locator("#audit-verdict")
        expect(verdict).to_have_attribute("data-ok", "true")
        events = http.get(f"/v1/sessions/{sid}/audit").json()["events"]
        expect(verdict).to_contain_text(f"Audit ok — {events} events")
        expect(page.locator("#findings")).to_contain_text("No findings.")

        # delete asks first: Cancel keeps the session, Delete deletes it
        page.get_by_role("button", name="Delete session…").click()
        confirm = page.locator("#delete-confirm")
        expect(confirm).to_be_visible()
        expect(page.locator("#cancel-delete")).to_be_focused()
        shots.take(page, "delete-confirmation")
        page.keyboard.press("Escape")
        expect(confirm).to_be_hidden()
        assert http.get(f"/v1/sessions/{sid}").status_code == 200
        page.get_by_role("button", name="Delete session…").click()
        confirm.get_by_role("button", name="Delete", exact=True).click()
        expect(page.locator("#session-banner")).to_contain_text("deleted")
        expect(page.locator("#delete-session")).to_be_disabled()
        assert http.get(f"/v1/sessions/{sid}").status_code == 410
        assert len(_events(http, sid, "SessionDeleted")) == 1
        shots.take(page, "deleted")

        # a tampered log: the verdict names the first bad seq (a deleted session's audit too)
        store = web_server.open_store()
        try:
            tamper_factory(store).update(sid, 3, "data", '{"content": "rewritten"}')
        finally:
            store.close()
        page.get_by_role("button", name="Check again").click()
        expect(verdict).to_have_attribute("data-ok", "false")
        expect(verdict).to_have_attribute("data-first-bad-seq", "3")
        expect(verdict.locator("strong")).to_have_text("Audit failed")
        expect(verdict.locator(".audit-problems li").first).to_have_text(
            "the hash chain is broken at seq 3")
        assert http.get(f"/v1/sessions/{sid}/audit").json()["chain"]["firstBadSeq"] == 3
        shots.take(page, "audit-failed")


def test_answers_are_confirmed_the_old_notice_gives_way_the_chip_keeps_its_ellipsis(  # issue 23.8
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http)
        _open(page, web_server, sid)
        first = _ask(http, sid, QUESTION)
        notice = page.locator("#auto-continued")
        expect(notice).to_contain_text("Unanswered — auto-continued", timeout=15_000)
        expect(_card(page, first)).to_have_count(0)

        second = _ask(http, sid, FORMAT)
        card = _card(page, second)
        expect(card).to_be_visible()
        expect(notice).to_be_hidden()  # the old notice does not stay above the next question
        chip = card.locator(".chip")
        expect(chip).to_have_text("Formats anc…")
        expect(chip).to_have_attribute("title", HEADER)
        assert chip.evaluate("el => el.scrollWidth <= el.clientWidth")  # nothing cut by CSS
        shots.take(page, "next-question-without-the-old-notice")

        card.locator(".option label", has_text="Number").click()
        expect(card).to_have_attribute("data-timer-state", "paused")
        card.locator(".notes").fill("Stable ids")
        card.get_by_role("button", name="Submit answers").click()
        expect(card).to_have_count(0)
        sent = page.locator("#answers-sent")
        expect(sent).to_be_visible()
        expect(sent.locator("strong")).to_have_text("Answers sent")
        expect(sent.locator("li")).to_have_text([f"{FORMAT_QUESTION} → Number · notes: Stable ids"])
        resolved = _events(http, sid, "InteractionResolved")[-1]["data"]
        assert resolved["decision"] == "modify"
        assert resolved["input"]["answers"] == {FORMAT_QUESTION: "Number"}
        shots.take(page, "answers-sent")
        sent.get_by_role("button", name="Dismiss this notice").click()
        expect(sent).to_be_hidden()


def test_the_auto_continue_switch_changes_the_setting_and_new_questions_wait(  # HO-6, issue 23.6
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        assert http.get("/v1/settings").json() == {"autoContinueQuestions": True}
        sid = create_session(http)
        _open(page, web_server, sid)
        switch = page.get_by_role("switch", name="Auto-continue questions")
        expect(switch).to_be_checked()
        try:
            switch.click()
            expect(switch).not_to_be_checked()
            expect(switch).to_be_enabled()
            assert http.get("/v1/settings").json() == {"autoContinueQuestions": False}
            pending = _ask(http, sid, QUESTION)
            card = _card(page, pending)
            expect(card).to_be_visible()
            timer = http.get(f"/v1/sessions/{sid}").json()["interactions"][0]["autoResolution"]
            assert timer is None or timer["state"] not in ("hiddenGrace", "countdown"), timer
            expect(card.locator(".countdown")).to_be_hidden()
            shots.take(page, "auto-continue-off-no-countdown")
            page.reload()
            switch = page.get_by_role("switch", name="Auto-continue questions")
            expect(switch).to_be_enabled()
            expect(switch).not_to_be_checked()
            switch.click()
            expect(switch).to_be_checked()
            expect(switch).to_be_enabled()
            assert http.get("/v1/settings").json() == {"autoContinueQuestions": True}
        finally:
            http.put("/v1/settings", json={"autoContinueQuestions": True})
