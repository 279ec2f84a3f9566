"""A session Claude Code created, in a real browser (SPEC CC-9; issue 22).

The session is appended through the real service's ledger into the SQLite file a real
``sessionledger serve`` then opens: its header and its entry in the session list name the
client (Claude Code) and Claude's session id; the audit timeline shows each event's own time
(``occurredAt``, in UTC here) with when it was recorded in the title, and an event recorded
live shows its recorded time as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from anthropic_model import ToolUse
from claude_binary_support import (
    DIALOG_QUESTION,
    QUESTION,
    answered,
    execution_state,
    installed_claude,
    interactive,
    ledger_session_of,
    plan_written,
    project_in,
)
from claude_code_display_support import (
    CREATED_AT,
    EXTERNAL,
    PROMPT_AT,
    REPLY_AT,
    imported_session,
)
from host_support import ClaudeCode
from server_support import ServerProcess, running_server
from web_support import Shots, session_url

from sessionledger import SessionService

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def _clock_ms(iso: str) -> str:
    """HH:MM:SS.mmm of an instant in UTC, the page's time zone in these tests."""
    return datetime.fromisoformat(iso).strftime("%H:%M:%S.%f")[:-3]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    directory = tmp_path_factory.mktemp("web-claude-code")
    service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}", workspace_root=directory)
    try:
        session = imported_session(service, directory)
    finally:
        service.close()
    with running_server(directory) as server:
        yield server, session


def test_header_list_and_timeline_name_the_client_and_show_occurred_at(  # CC-9
    page: Page, shots: Shots, imported: tuple[ServerProcess, str],
) -> None:
    server, session = imported
    expect = _expect()
    page.goto(session_url(server.base_url, session))
    expect(page.locator("#mode-badge")).to_have_text("build")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    header = page.locator("#session-client")
    expect(header).to_have_text(f"Claude Code · session {EXTERNAL}")
    expect(header).to_have_attribute("data-client", "claude-code")
    expect(header).to_have_attribute("title", "client claude-code")
    listed = page.locator(f".session-link[data-session-id='{session}'] .session-client")
    expect(listed).to_have_text("Claude Code")
    expect(listed).to_have_attribute("title", f"claude-code session {EXTERNAL}")

    with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
        events = http.get(f"/v1/sessions/{session}/events").json()["events"]
    expect(page.locator("#timeline > li")).to_have_count(4)
    for envelope, occurred in zip(events, (CREATED_AT, PROMPT_AT, REPLY_AT, None), strict=True):
        at = envelope["data"].get("occurredAt")
        assert at == occurred
        time = page.locator(f"#timeline > li[data-seq='{envelope['seq']}'] time")
        if at is None:
            expect(time).to_have_text(_clock_ms(envelope["recordedAt"]))
            expect(time).to_have_attribute("title", envelope["recordedAt"])
            expect(time).not_to_have_class("occurred")
            continue
        expect(time).to_have_text(_clock_ms(at))
        expect(time).to_have_attribute("datetime", at)
        expect(time).to_have_class("occurred")
        expect(time).to_have_attribute(
            "title", f"occurred {at} (the host's time) · recorded {envelope['recordedAt']}"
        )
    created = page.locator("#timeline > li[data-seq='1'] .summary")
    expect(created).to_contain_text("headless host · Claude Code")
    shots.take(page, "claude-code-session")


# -- the real Claude Code's questions answered on the page (issue 39, acceptance 7) -------------


@pytest.fixture(scope="module")
def claude() -> ClaudeCode:
    return installed_claude()


def test_the_real_claude_codes_question_and_plan_answered_on_the_page(
    page: Page, shots: Shots, claude: ClaudeCode, tmp_path: Path,
) -> None:
    # The TUI in tmux asks; the page switches the session to "answer here", shows the question
    # and the plan as cards, and answers them: the model gets the answers (no question dialog
    # was shown in Claude Code), feedback on the plan reaches the model and keeps Plan on, and
    # the plan submitted again and approved ends Plan.
    expect = _expect()
    script: list[list[Any]] = [
        [ToolUse("AskUserQuestion", QUESTION)],
        [ToolUse("Write", plan_written)],
        [ToolUse("ExitPlanMode", {})],
        [ToolUse("ExitPlanMode", {})],  # after the feedback, submitted again
    ]
    with running_server(tmp_path) as server:
        project = project_in(server)
        with interactive(claude, server, project, script, "--permission-mode", "plan") as (
                terminal, model):
            session_id = ledger_session_of(server, project)
            page.goto(session_url(server.base_url, session_id))
            expect(page.locator("#connection")).to_have_attribute("data-state", "live")
            switch = page.locator("#answer-in")
            expect(switch).to_be_visible()
            expect(switch.locator("[data-answer-in='host']")).to_have_text("in Claude Code")
            expect(switch.locator("[data-answer-in='host']")).to_have_attribute(
                "aria-pressed", "true")
            switch.locator("[data-answer-in='here']").click()
            expect(switch.locator("[data-answer-in='here']")).to_have_attribute(
                "aria-pressed", "true")
            shots.take(page, "claude-code-answer-here")

            terminal.submit("Plan the parser port.")
            card = page.locator(".question-card")
            expect(card).to_be_visible(timeout=60_000)
            question_screen = terminal.screen()
            card.locator(".option label", has_text="LALR").click()
            card.get_by_role("button", name="Submit answers").click()
            plan = page.locator(".plan-card")
            expect(plan).to_be_visible(timeout=60_000)
            expect(plan).to_contain_text("Read the grammar")
            shots.take(page, "claude-code-plan-here")
            first = plan.get_attribute("data-interaction-id")
            plan.locator("textarea.feedback").fill("Add a benchmark step")
            plan.get_by_role("button", name="Send feedback").click()
            again = page.locator(f".plan-card:not([data-interaction-id='{first}'])")
            expect(again).to_be_visible(timeout=60_000)  # the plan submitted again
            assert answered(model, "Add a benchmark step") is not None  # the feedback got there
            state = execution_state(server, session_id)
            assert state["planEnabled"] is True  # feedback keeps Plan on
            again.get_by_role("button", name="Approve").click()
            terminal.wait_for("Approved Claude's plan")
            terminal.wait_for("Done.")
        assert DIALOG_QUESTION not in question_screen, question_screen
        assert answered(model, '\\"Which parser?\\"=\\"LALR\\"') is not None
        state = execution_state(server, session_id)
        assert state["planEnabled"] is False
        expect(page.locator("#mode-badge")).to_have_text("build")
