"""What the TUI shows at 80x24: hostile plans and questions in full (SPEC EG-7), the queue header
and key hints that stay put, and a protocol session's countdown and auto-continued notice
(HO-4, HO-5, HO-7; issue 23 items 1 and 5).

Real SQLite files and the real service; the app runs under a Textual pilot at 80x24, with an
injected clock for the countdown.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from hostile_text import COMMENT, DROP, LONG_LINE, SHOWN, long_plan
from textual.pilot import Pilot
from tui_support import drive, opened, plain, question, rendered, resolutions, screen, until

from eventlog import ManualClock
from sessionledger.tui import SessionApp
from sessionledger.tui.panels import ApprovalPanel, QuestionPanel

SMALL = (80, 24)
QUEUE_HEADER = "Approval queue: 1 waiting"


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _panel_text(lines: list[str]) -> str:
    """The text inside the plan's box, rows joined (wrapping undone), whitespace dropped."""
    inside = [m.group(1) for line in lines if (m := re.search(r"│ (.*) │", line))]
    return _squeezed("".join(inside))


def _in_order(expected: list[str], shown: str) -> list[str]:
    """The expected lines not found in ``shown`` one after the other."""
    missing, at = [], 0
    for line in expected:
        found = shown.find(_squeezed(line), at)
        if found < 0:
            missing.append(line)
        else:
            at = found + len(_squeezed(line))
    return missing


def _on_screen(app: SessionApp, text: str) -> bool:
    return any(text in row for row in screen(app))


def test_eg7_a_hostile_3000_line_plan_is_shown_line_for_line_and_enter_approves_it(
    tmp_path: Path,
) -> None:  # EG-7, issue 23.1, issue 23.5
    plan = long_plan(3000)
    with opened(tmp_path) as service:
        session = service.create_session(host="tui", mode="plan")["sessionId"]
        assert service.tools.call(session, "ExitPlanMode", {"plan": plan}).status_code == 202

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert isinstance(app.panel, ApprovalPanel)
            # The first screen: the queue header, the hostile lines, the key hints.
            assert _on_screen(app, QUEUE_HEADER)
            assert _on_screen(app, "Then run DROP TABLE users;") and _on_screen(app, COMMENT)
            assert _on_screen(app, "[red]x[/red]") and _on_screen(app, "<script>alert(1)")
            assert _on_screen(app, "onerror=") and _on_screen(app, "<U+200B>")
            # Every line of the plan, HTML, comments and markup included, in order (EG-7).
            expected = [SHOWN.get(line, line) for line in plan.split("\n")]
            assert _in_order(expected, _panel_text(rendered(app.panel.plan))) == []
            hints = " ".join(screen(app)[-4:])
            assert "PgDn" in hints and "End" in hints and "Enter choose" in hints
            # 80 columns: the sidebar takes well under half (issue 23.5).
            assert app.sidebar.size.width <= 80 // 3
            # End reaches the last line; the queue header has not moved.
            await pilot.press("end")
            await until(pilot, lambda: _on_screen(app, "The last line of the plan.")
                         and _on_screen(app, "1. Approve"))
            assert _on_screen(app, QUEUE_HEADER)
            await pilot.press("home")
            await until(pilot, lambda: _on_screen(app, "# Migrate the users table"))
            await pilot.press("pagedown")
            await until(pilot, lambda: app.scroller.scroll_y > 0)
            assert _on_screen(app, QUEUE_HEADER)
            await pilot.press("1")  # Approve: what was shown is what is recorded
            await until(pilot, lambda: plain(app.sidebar.badge).startswith(" build "))

        drive(service, session, scenario, size=SMALL)
        (resolved,) = resolutions(service, session)
        assert resolved["decision"] == "approve"
        workspace = Path(service.document(session)["workspace"])
        written = workspace / ".zcode" / "plans" / f"plan-{session}.md"
        assert written.read_text(encoding="utf-8") == plan
        assert DROP in plan and COMMENT in plan and LONG_LINE in plan


HOSTILE_QUESTION = {"questions": [{
    "question": "Run <b>[red]this[/red]</b>\u200b on <!-- prod -->?",
    "header": "[b]DB",
    "multiSelect": False,
    "options": [
        {"label": "<img src=x onerror=alert(1)>", "description": "<!-- hidden -->",
         "preview": "<img src=y onerror=alert(2)><!-- c -->\n<b>[bold]p[/bold]</b> \u202eq"},
        {"label": "[link=https://evil.example]safe[/link]", "description": "[dim]d[/dim]"},
    ],
}]}


def test_eg7_hostile_questions_options_and_previews_show_literally(
    tmp_path: Path,
) -> None:  # EG-7, issue 23.1
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]
        service.tools.call(session, "AskUserQuestion", HOSTILE_QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert isinstance(app.panel, QuestionPanel)
            body = _squeezed("".join(rendered(app.panel.body)))  # wrapping undone
            for literal in ("Run <b>[red]this[/red]</b><U+200B> on <!-- prod -->?", "[b]DB",
                            "<img src=x onerror=alert(1)>", "<!-- hidden -->",
                            "[link=https://evil.example]safe[/link]", "[dim]d[/dim]",
                            "<img src=y onerror=alert(2)><!-- c -->",
                            "<b>[bold]p[/bold]</b> <U+202E>q"):
                assert _squeezed(literal) in body, literal
            assert _on_screen(app, "Question: Run <b>[red]this[/red]")
            assert "o Other" in " ".join(screen(app)[-4:])
            await pilot.press("1", "enter", "enter")  # the first option, as shown

        drive(service, session, scenario, size=SMALL)
        (resolved,) = resolutions(service, session)
        asked = HOSTILE_QUESTION["questions"][0]
        assert resolved["input"]["answers"] == {asked["question"]: "<img src=x onerror=alert(1)>"}


def _local(instant: str) -> str:
    moment = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return moment.astimezone().strftime("%H:%M:%S")


def test_ho4_a_protocol_session_shows_the_countdown_pause_and_auto_continued_notice(
    tmp_path: Path,
) -> None:  # HO-4, HO-5, HO-7, issue 23.5
    with opened(tmp_path) as service:
        session = service.create_session(host="protocol")["sessionId"]
        first = {"questions": [question("Which database?", ["SQLite", "PostgreSQL"])]}
        second = {"questions": [question("Which cache?", ["Redis", "none"])]}
        service.tools.call(session, "AskUserQuestion", first)
        service.tools.call(session, "AskUserQuestion", second)
        timer = service.document(session)["interactions"][0]["autoResolution"]
        started = datetime.fromisoformat(timer["startedAt"].replace("Z", "+00:00"))
        clock = ManualClock(started + timedelta(seconds=10))

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            # The silent grace: nothing counts down on screen.
            assert not app.countdown.display and not _on_screen(app, "Auto-continues")
            assert _on_screen(app, "Approval queue: 2 waiting")
            clock.advance(60)  # past visibleAt: 3:50 left of 5:00
            await until(pilot, lambda: _on_screen(app, "Auto-continues in 3:50"))
            assert _on_screen(app, f"deadline {_local(timer['deadlineAt'])}")
            clock.advance(5)
            await until(pilot, lambda: _on_screen(app, "Auto-continues in 3:45"))
            await pilot.press("j")  # HO-5: moving pauses it for good
            await until(pilot, lambda: _on_screen(app, "Countdown paused"))
            assert not _on_screen(app, "Auto-continues")
            await pilot.press("k", "1", "enter", "enter")  # answer the first question
            await until(pilot, lambda: _on_screen(app, "Approval queue: 1 waiting"))
            # The second question's timer runs out (a running serve would do this).
            head = service.document(session)["interactions"][0]["autoResolution"]
            deadline = datetime.fromisoformat(head["deadlineAt"].replace("Z", "+00:00"))
            service.timers.settle(session, now=deadline)
            await until(pilot, lambda: _on_screen(app, "Unanswered — auto-continued"))
            assert _on_screen(app, "Which cache?")
            assert _on_screen(app, "Approval queue: nothing waits for you")
            assert not app.countdown.display

        drive(service, session, scenario, size=SMALL, clock=clock)
        decisions = [r["decision"] for r in resolutions(service, session)]
        assert decisions == ["modify", "autoContinued"]
