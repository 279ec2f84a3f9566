"""The question panel in a real browser (issue 9 acceptance 1; SPEC HO-4, HO-5, HO-7, AQ-2 to AQ-4).

A real ``sessionledger serve`` with short timers (grace 2 s, deadline 8 s, and 0.5 s / 2.5 s
for the question left unanswered): the question appears with no countdown, the countdown
appears after the grace with the server's deadline, a reload shows the same deadline to the
second, clicking an option pauses it for good, and the answer completes the pending call.
The full questionnaire (preview as text, multi-select, Other, skip, notes) writes exactly
the ``modify`` input of AQ-3; an unanswered question ends as "Unanswered — auto-continued",
also after a reload.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

from sessionledger.tools.ask import AnswerAnnotation, result_text

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

GRACE_S, DEADLINE_S = 2, 8
DB_QUESTION = "Which database?"
QUESTION = {"questions": [{
    "question": DB_QUESTION, "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
PREVIEW = '```sql\nCREATE TABLE t (id INTEGER); <img src=x onerror="window.__pwned = 1">\n```'
FEATURES, LICENSE = "Which features?", "Which license?"
QUESTIONNAIRE = {"questions": [
    {"question": DB_QUESTION, "header": "Database engine", "multiSelect": False,
     "options": [{"label": "SQLite (Recommended)", "description": "one file", "preview": PREVIEW},
                 {"label": "PostgreSQL", "description": "a server"}]},
    {"question": FEATURES, "header": "Features", "multiSelect": True,
     "options": [{"label": "Search", "description": "full text"},
                 {"label": "Export", "description": "CSV"},
                 {"label": "Sync", "description": "two-way"}]},
    {"question": LICENSE, "header": "License", "multiSelect": False,
     "options": [{"label": "MIT", "description": "short"},
                 {"label": "Apache-2.0", "description": "patents"}]},
]}


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def timer_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", str(GRACE_S), "--question-deadline-s", str(DEADLINE_S))
    with running_server(tmp_path_factory.mktemp("web-timers"), args=args) as running:
        yield running


@pytest.fixture(scope="module")
def quick_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", "0.5", "--question-deadline-s", "2.5")
    with running_server(tmp_path_factory.mktemp("web-quick"), args=args) as running:
        yield running


def _ask(http: httpx.Client, sid: str, question: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/v1/sessions/{sid}/tool-calls",
                         json={"tool": "AskUserQuestion", "input": question})
    assert response.status_code == 202, response.text
    return dict(response.json())


def _waiting(http: httpx.Client, sid: str) -> dict[str, Any]:
    (interaction,) = http.get(f"/v1/sessions/{sid}").json()["interactions"]
    return dict(interaction)


def _events(http: httpx.Client, sid: str, kind: str) -> list[dict[str, Any]]:
    events = http.get(f"/v1/sessions/{sid}/events").json()["events"]
    return [e for e in events if e["type"] == kind]


def _call(http: httpx.Client, sid: str, call_id: str) -> dict[str, Any]:
    return dict(http.get(f"/v1/sessions/{sid}/tool-calls/{call_id}").json())


def _clock(iso: str) -> str:
    """HH:MM:SS of an instant in UTC, the page's time zone in these tests."""
    return datetime.fromisoformat(iso).strftime("%H:%M:%S")


def _open(page: Page, server: ServerProcess, sid: str) -> None:
    page.goto(session_url(server.base_url, sid))
    _expect()(page.locator("#mode-badge")).to_have_text("build")
    _expect()(page.locator("#connection")).to_have_attribute("data-state", "live")


def _card(page: Page, pending: dict[str, Any]) -> Locator:
    return page.locator(f".question-card[data-interaction-id='{pending['interactionId']}']")


def _asked(
    page: Page, server: ServerProcess, http: httpx.Client, question: dict[str, Any],
) -> tuple[str, dict[str, Any], Locator]:
    """A new session open on the page with ``question`` asked in it and its card shown."""
    sid = create_session(http)
    _open(page, server, sid)
    pending = _ask(http, sid, question)
    card = _card(page, pending)
    _expect()(card).to_be_visible()
    return sid, pending, card


def test_question_countdown_after_grace_same_deadline_on_reload_paused_by_a_click_answered(
    page: Page, shots: Shots, timer_server: ServerProcess,
) -> None:
    expect = _expect()
    with timer_server.client() as http:
        sid, pending, card = _asked(page, timer_server, http, QUESTION)
        expect(card).to_have_attribute("data-timer-state", "hiddenGrace")
        expect(card.locator(".countdown")).to_be_hidden()
        timer = _waiting(http, sid)["autoResolution"]
        assert timer["state"] == "hiddenGrace"
        shots.take(page, "question-without-countdown")

        countdown = card.locator(".countdown")
        expect(countdown).to_be_visible(timeout=(GRACE_S + 8) * 1000)
        deadline = countdown.locator(".countdown-deadline")
        expect(deadline).to_have_attribute("data-deadline-at", timer["deadlineAt"])
        expect(deadline).to_have_text(_clock(timer["deadlineAt"]))
        expect(countdown.locator(".countdown-remaining")).to_have_text(
            re.compile(r"^Auto-continues in 0:0[1-8]$"))
        shown = deadline.text_content()
        shots.take(page, "countdown-after-grace")

        page.reload()
        deadline = _card(page, pending).locator(".countdown .countdown-deadline")
        expect(deadline).to_have_attribute("data-deadline-at", timer["deadlineAt"])
        expect(deadline).to_have_text(shown or "")
        shots.take(page, "same-deadline-after-reload")

        card = _card(page, pending)
        card.locator(".option label", has_text="PostgreSQL").click()
        expect(card).to_have_attribute("data-timer-state", "paused")
        expect(card.locator(".countdown")).to_contain_text("paused")
        assert _waiting(http, sid)["autoResolution"] == {**timer, "state": "paused"}
        (activity,) = _events(http, sid, "InteractionUserActivity")
        assert activity["data"]["action"] == "select"
        shots.take(page, "paused-by-a-click")

        card.get_by_role("button", name="Submit answers").click()
        expect(card).to_have_count(0)
        done = _call(http, sid, pending["callId"])
        assert done["status"] == "completed" and done["success"] is True
        assert done["modelContent"] == result_text([DB_QUESTION], {DB_QUESTION: "PostgreSQL"})
        assert len(_events(http, sid, "InteractionUserActivity")) == 1  # posted once
        expect(page.locator("#timeline > li[data-type='ToolCallCompleted']")).to_have_count(1)
        shots.take(page, "answered")


@pytest.mark.parametrize("step_s", [-3600, 86_400], ids=["hour-back", "day-ahead"])
def test_a_browser_clock_that_is_off_shows_the_servers_countdown(  # issue 41 finding 2
    page: Page, shots: Shots, timer_server: ServerProcess, step_s: int,
) -> None:
    """The browser's clock an hour behind or a day ahead of the server's (or stepped there):
    the countdown still appears after the grace and counts the server's seconds down."""
    expect = _expect()
    page.clock.set_system_time(time.time() + step_s)
    with timer_server.client() as http:
        sid, pending, card = _asked(page, timer_server, http, QUESTION)
        assert abs(page.evaluate("Date.now()") / 1000 - time.time() - step_s) < 60
        countdown = card.locator(".countdown")
        expect(countdown).to_be_hidden()
        expect(countdown).to_be_visible(timeout=(GRACE_S + 8) * 1000)
        expect(countdown.locator(".countdown-remaining")).to_have_text(
            re.compile(r"^Auto-continues in 0:0[1-6]$"))
        shots.take(page, "countdown-on-the-servers-clock")
        card.get_by_role("button", name="Submit answers").click()
        expect(card).to_have_count(0)
        assert _call(http, sid, pending["callId"])["status"] == "completed"


def test_questionnaire_preview_as_text_multi_select_other_skip_and_notes(
    page: Page, shots: Shots, timer_server: ServerProcess,
) -> None:
    expect = _expect()
    with timer_server.client() as http:
        sid, pending, card = _asked(page, timer_server, http, QUESTIONNAIRE)
        database, features, license_ = (
            card.locator(f".question[data-question='{text}']")
            for text in (DB_QUESTION, FEATURES, LICENSE)
        )
        # the preview is a monospace box of text: its markup is shown, never parsed
        expect(database.locator("pre.preview")).to_have_text(PREVIEW)
        assert card.locator("img").count() == 0
        assert page.evaluate("window.__pwned") is None
        expect(database.locator(".chip")).to_have_text("Database en…")  # AQ-2 chip width 12

        database.locator(".option label", has_text="SQLite (Recommended)").click()
        expect(card).to_have_attribute("data-timer-state", "paused")
        database.locator(".notes").fill("Keep it embedded.")
        features.locator(".option label", has_text="Search").click()
        features.locator(".option label", has_text="Sync").click()
        features.locator(".other-choice").check()
        card.get_by_role("button", name="Submit answers").click()
        expect(card.locator(".card-error")).to_contain_text("type your answer for Other")
        assert _call(http, sid, pending["callId"])["status"] == "pending"
        features.locator(".other-text").fill("Audit log")
        license_.locator(".skip-box").check()
        shots.take(page, "questionnaire-filled")

        card.get_by_role("button", name="Submit answers").click()
        expect(card).to_have_count(0)
        answers = {DB_QUESTION: "SQLite (Recommended)", FEATURES: "Search, Sync, Audit log"}
        annotations = {DB_QUESTION: {"preview": PREVIEW, "notes": "Keep it embedded."}}
        (resolved,) = _events(http, sid, "InteractionResolved")
        assert resolved["data"]["decision"] == "modify"
        assert resolved["data"]["input"] == {**QUESTIONNAIRE, "answers": answers,
                                             "annotations": annotations}
        done = _call(http, sid, pending["callId"])
        assert done["status"] == "completed" and done["success"] is True
        texts = [DB_QUESTION, FEATURES, LICENSE]
        notes = {k: AnswerAnnotation(**v) for k, v in annotations.items()}
        assert done["modelContent"] == result_text(texts, answers, notes)
        shots.take(page, "questionnaire-answered")



@pytest.mark.parametrize("action", ["move", "type"])
def test_moving_with_the_keyboard_or_typing_also_pauses_the_countdown(
    page: Page, shots: Shots, timer_server: ServerProcess, action: str,
) -> None:
    expect = _expect()
    with timer_server.client() as http:
        sid, _pending, card = _asked(page, timer_server, http, QUESTION)
        if action == "move":
            card.locator("input[type=radio]").first.focus()
            page.keyboard.press("ArrowDown")
        else:
            card.locator(".notes").press_sequentially("Not sure yet")
        expect(card).to_have_attribute("data-timer-state", "paused")
        (activity,) = _events(http, sid, "InteractionUserActivity")
        assert activity["data"]["action"] == action
        assert _waiting(http, sid)["autoResolution"]["state"] == "paused"
        shots.take(page, f"paused-by-{action}")

def test_unanswered_question_is_shown_as_auto_continued_also_after_reload(
    page: Page, shots: Shots, quick_server: ServerProcess,
) -> None:
    expect = _expect()
    with quick_server.client() as http:
        sid = create_session(http)
        _open(page, quick_server, sid)
        pending = _ask(http, sid, QUESTION)
        expect(_card(page, pending)).to_be_visible()
        shots.take(page, "question-waiting")
        notice = page.locator("#auto-continued")
        expect(notice).to_be_visible(timeout=15_000)
        expect(notice).to_contain_text("Unanswered — auto-continued")
        expect(notice).to_contain_text(DB_QUESTION)
        expect(_card(page, pending)).to_have_count(0)
        done = _call(http, sid, pending["callId"])
        assert done["status"] == "completed" and done["modelContent"] == result_text(
            [DB_QUESTION], {})
        (resolved,) = _events(http, sid, "InteractionResolved")
        assert resolved["data"]["decision"] == "autoContinued"
        shots.take(page, "auto-continued")
        page.reload()
        expect(page.locator("#auto-continued")).to_contain_text("Unanswered — auto-continued")
        shots.take(page, "auto-continued-after-reload")

