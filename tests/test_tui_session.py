"""The TUI around the questionnaire: mode badge and Shift+Tab, todos, Goal, plan approval,
refreshing from the log, HO-5 activity and the ``tui`` command.

Real SQLite files and the real service; the app is driven with a Textual pilot (SPEC ES-4,
ES-5, TD-6, PM-6 … PM-9, HO-1, HO-5, §11 CLI).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from server_support import sessionledger_command
from textual.pilot import Pilot
from tui_support import QUESTION, drive, opened, plain, resolutions, types, until

from sessionledger import SessionService
from sessionledger.tui import SessionApp
from sessionledger.tui.panels import ApprovalPanel, QuestionPanel

PLAN = "1. Write the parser\n2. Test it"
TODOS = {"todos": [
    {"content": "Read the SPEC", "status": "completed", "priority": "high"},
    {"content": "Build the panel", "status": "in_progress", "priority": "high"},
    {"content": "Write the docs", "status": "pending", "priority": "low"},
]}


def test_es4_shift_tab_cycles_the_mode_through_the_service(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            seen = []
            for _ in range(4):
                await pilot.press("shift+tab")  # ES-4: build → edit → yolo → plan → build
                seen.append(service.document(session)["displayMode"])
                assert plain(app.sidebar.badge).startswith(f" {seen[-1]} ")
            assert seen == ["edit", "yolo", "plan", "build"]

        drive(service, session, scenario)
        vias = [e.to_wire()["data"]["via"] for e in service.store.read_session(session)
                if e.type == "SessionModeChanged"]
        assert vias == ["cycle"] * 4


def test_es5_a_refused_cycle_shows_the_machines_message_and_appends_nothing(
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui", mode="yolo")["sessionId"]
        service.start_goal(session, "ship the TUI")

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert "Goal: ship the TUI" in plain(app.sidebar.goal)
            version = service.store.version(session)
            await pilot.press("shift+tab")  # yolo → plan, refused during a goal (ES-5)
            assert plain(app.status).strip() == "Plan and Goal cannot be active at the same time."
            assert service.store.version(session) == version
            assert plain(app.sidebar.badge).startswith(" yolo ")

        drive(service, session, scenario)


def test_es4_shift_tab_cycles_even_while_typing_other(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]
        service.tools.call(session, "AskUserQuestion", QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("o", *"x")
            await pilot.press("shift+tab")
            assert service.document(session)["displayMode"] == "edit"
            assert isinstance(app.panel, QuestionPanel) and app.panel.field is not None

        drive(service, session, scenario)


def test_td6_the_sidebar_shows_todos_with_progress_and_follows_other_writers(
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]
        service.tools.call(session, "TodoWrite", TODOS)
        # A second service on the same file: the app only learns of it from the log.
        other = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}",
                                    workspace_root=tmp_path / "root")

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            text = plain(app.sidebar.todos)
            assert text.startswith("Todos 1/3 completed")  # TD-6
            assert "Read the SPEC" in text and "Write the docs" in text
            done = {"todos": [{**t, "status": "completed"} for t in TODOS["todos"]]}
            other.tools.call(session, "TodoWrite", done)
            other.start_goal(session, "finish")
            await until(pilot, lambda: "3/3 completed" in plain(app.sidebar.todos))
            await until(pilot, lambda: "Goal: finish" in plain(app.sidebar.goal))
            assert "GoalStarted" in plain(app.sidebar.events)

        try:
            drive(service, session, scenario)
        finally:
            other.close()


def test_td6_an_empty_list_says_so(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert plain(app.sidebar.todos).splitlines()[:2] == ["Todos 0/0 completed",
                                                                 "no todos"]

        drive(service, session, scenario)


def _plan_session(service: SessionService) -> tuple[str, str]:
    session = service.create_session(host="tui", mode="plan")["sessionId"]
    answer = service.tools.call(session, "ExitPlanMode", {"plan": PLAN})
    assert answer.status_code == 202
    return session, answer.document["callId"]


def test_pm6_a_plan_is_an_ordinary_approval_request_and_1_approves(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session, call_id = _plan_session(service)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert isinstance(app.panel, ApprovalPanel)
            assert "Write the parser" in plain(app.panel.plan)
            assert plain(app.panel.request).startswith("Plan approval\n")  # the page's words
            assert "ExitPlanMode" not in plain(app.panel.request)
            assert "1. Approve" in plain(app.panel.body)
            assert "▸" not in plain(app.panel.body)  # nothing is chosen before the user does
            await pilot.press("enter")  # a stray Enter approves nothing (issue 42)
            await pilot.pause(0.3)
            assert resolutions(service, session) == [] and app.panel is not None
            await pilot.press("down")
            assert "▸ 1. Approve" in plain(app.panel.body)
            await pilot.press("enter")  # the highlighted choice: Approve
            await until(pilot, lambda: plain(app.sidebar.badge).startswith(" build "))
            assert plain(app.status).strip() == "Plan approved"

        drive(service, session, scenario)
        (resolved,) = resolutions(service, session)
        assert resolved["decision"] == "approve"
        call = service.tools.get(session, call_id).document
        assert call["success"] is True  # PM-7
        assert call["modelContent"].endswith("## Approved Plan:\n" + PLAN)
        plan_file = Path(service.document(session)["workspace"]) / ".zcode" / "plans"
        assert (plan_file / f"plan-{session}.md").read_text(encoding="utf-8") == PLAN


def test_pm8_feedback_text_keeps_plan_on(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session, call_id = _plan_session(service)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("2", *"add", "space", *"tests", "enter")

        drive(service, session, scenario)
        (resolved,) = resolutions(service, session)
        assert resolved["decision"] == "feedback" and resolved["feedback"] == "add tests"
        call = service.tools.get(session, call_id).document
        assert call["modelContent"] == "The plan was not approved by the user."
        assert call["followUpUserInput"] == {
            "input": "add tests", "reasonSource": "plan_approval_feedback"
        }
        assert service.document(session)["displayMode"] == "plan"


def test_pm9_escape_rejects_a_plan_and_the_turn_stops(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session, call_id = _plan_session(service)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("j", "j", "k")  # moving changes nothing
            await pilot.press("escape")

        drive(service, session, scenario)
        assert [r["decision"] for r in resolutions(service, session)] == ["deny"]
        call = service.tools.get(session, call_id).document
        assert call["turnControl"] == {"reason": "plan_exit_denied", "stopTurnAfterResult": True}
        assert service.document(session)["displayMode"] == "plan"


def test_ho1_a_tui_question_never_counts_down_and_records_no_activity(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]
        service.tools.call(session, "AskUserQuestion", QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("j", "k", "1")
            assert service.document(session)["interactions"][0]["autoResolution"] is None

        drive(service, session, scenario)
        assert "InteractionUserActivity" not in types(service, session)


def test_ho5_the_first_action_on_a_counting_down_question_pauses_it_once(
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="protocol")["sessionId"]
        service.tools.call(session, "AskUserQuestion", QUESTION)
        timer = service.document(session)["interactions"][0]["autoResolution"]
        assert timer["state"] == "hiddenGrace"

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("j")  # HO-5: moving is activity
            await pilot.press("k", "2")
            paused = service.document(session)["interactions"][0]["autoResolution"]
            assert paused["state"] == "paused"
            assert paused["deadlineAt"] == timer["deadlineAt"]  # the times are kept
            await pilot.press("enter", "enter")

        drive(service, session, scenario)
        assert types(service, session).count("InteractionUserActivity") == 1
        assert resolutions(service, session)[0]["input"]["answers"] == {
            "Which database?": "PostgreSQL"
        }


def test_cli_tui_has_help_and_refuses_an_unknown_session(tmp_path: Path) -> None:
    helped = subprocess.run([*sessionledger_command(), "tui", "--help"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert helped.returncode == 0 and "SESSION" in helped.stdout and "--db" in helped.stdout
    with opened(tmp_path):
        pass  # the store exists (reading never creates one)
    missing = subprocess.run(
        [*sessionledger_command(), "tui", "sess_nope", "--db", f"sqlite:///{tmp_path}/ledger.db"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip() == "error: session 'sess_nope' not found"
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]
        service.delete_session(session)
    deleted = subprocess.run(
        [*sessionledger_command(), "tui", session, "--db", f"sqlite:///{tmp_path}/ledger.db"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )
    assert deleted.returncode == 1
    assert deleted.stderr.strip() == f"error: session {session!r} was deleted"
