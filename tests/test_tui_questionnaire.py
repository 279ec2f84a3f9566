"""The TUI's questionnaire panel: every key of HO-1, checked in the ``modify`` the log records.

Each test opens a real SQLite ledger, asks an AskUserQuestion on a ``tui`` session through the
service (so it waits in the queue), drives the Textual app with a pilot and reads back the
``InteractionResolved`` event and the completed call. The keys: arrows or ``j``/``k`` move,
``1``-``9`` pick, space toggles in multi-select, ``o`` types Other, ``s`` skips, Enter opens
the confirmation page and Enter again submits, Esc rejects (SPEC HO-1, AQ-3, AQ-5, HO-8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from tui_support import QUESTION, drive, opened, plain, question, resolutions

from sessionledger import SessionService
from sessionledger.tui import SessionApp
from sessionledger.tui.panels import QuestionPanel


def _ask(service: SessionService, tool_input: dict[str, Any]) -> tuple[str, str]:
    session = service.create_session(host="tui")["sessionId"]
    answer = service.tools.call(session, "AskUserQuestion", tool_input)
    assert answer.status_code == 202  # AQ-5: always asks; the TUI waits (HO-1)
    return session, answer.document["callId"]


def _panel(app: SessionApp) -> QuestionPanel:
    assert isinstance(app.panel, QuestionPanel)
    return app.panel


def _modified(service: SessionService, session: str) -> dict[str, Any]:
    (resolved,) = resolutions(service, session)
    assert resolved["decision"] == "modify"  # HO-2/AQ-5: the host answers modify
    result: dict[str, Any] = resolved["input"]
    return result


def test_ho1_digit_picks_enter_opens_the_confirmation_page_and_enter_submits(
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session, call_id = _ask(service, QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("2")  # HO-1: 1-9 pick directly
            await pilot.press("enter")  # HO-1: Enter opens the confirmation page
            assert _panel(app).state.confirming
            assert "Which database? → PostgreSQL" in plain(_panel(app).body)
            assert resolutions(service, session) == []  # nothing is sent yet
            await pilot.press("enter")  # HO-1: Enter again submits
            assert app.panel is None
            assert "nothing waits for you" in plain(app.queue)

        drive(service, session, scenario)
        assert _modified(service, session) == {
            "questions": QUESTION["questions"],
            "answers": {"Which database?": "PostgreSQL"},
        }
        call = service.tools.get(session, call_id).document
        assert call["status"] == "completed" and call["success"] is True
        assert call["modelContent"].startswith("User has answered your questions: ")  # AQ-4


def test_ho1_arrows_and_j_k_move_and_space_chooses_the_highlighted_option(
    tmp_path: Path,
) -> None:
    asked = {"questions": [question("Which database?", ["SQLite", "PostgreSQL", "DuckDB"]),
                           question("Which cache?", ["Redis", "Memcached"])]}
    with opened(tmp_path) as service:
        session, _call = _ask(service, asked)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            state = _panel(app).state
            await pilot.press("down", "down")  # HO-1: arrows move
            assert state.cursor == (0, 2)
            await pilot.press("up")
            assert state.cursor == (0, 1)
            await pilot.press("j", "j", "j")  # HO-1: j/k move, across questions
            assert state.cursor == (1, 0)
            await pilot.press("k", "k")
            assert state.cursor == (0, 2)
            await pilot.press("space")  # chooses DuckDB; moving alone never answers
            await pilot.press("j", "j", "j")
            assert state.cursor == (1, 1)
            await pilot.press("space", "enter", "enter")

        drive(service, session, scenario)
        assert _modified(service, session)["answers"] == {
            "Which database?": "DuckDB", "Which cache?": "Memcached",
        }


def test_ho1_multi_select_space_and_digits_toggle_and_labels_join_with_comma(
    tmp_path: Path,
) -> None:
    asked = {"questions": [question("Which checks?", ["ruff", "mypy", "pytest"], multi=True)]}
    with opened(tmp_path) as service:
        session, _call = _ask(service, asked)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("1", "3")  # HO-1: digits toggle in multi-select
            await pilot.press("k", "space")  # HO-1: space toggles the highlighted option
            await pilot.press("1")  # toggled off again
            assert _panel(app).state.states[0].chosen == {1, 2}
            await pilot.press("o", *"tox", "enter")  # Other adds free text
            await pilot.press("enter")
            assert "Which checks? → mypy, pytest, tox" in plain(_panel(app).body)
            await pilot.press("enter")

        drive(service, session, scenario)
        # AQ-3: labels joined by ", " in option order, the Other text last
        assert _modified(service, session)["answers"] == {"Which checks?": "mypy, pytest, tox"}


def test_ho1_o_types_other_and_s_skips_a_question(tmp_path: Path) -> None:
    asked = {"questions": [question("Which database?", ["SQLite", "PostgreSQL"]),
                           question("Which cache?", ["Redis", "Memcached"])]}
    with opened(tmp_path) as service:
        session, call_id = _ask(service, asked)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("o")  # HO-1: o types Other
            assert _panel(app).field is not None
            await pilot.press(*"maria", "space", *"db", "enter")
            assert _panel(app).field is None
            assert _panel(app).state.cursor == (1, 0)  # answered: on to the next question
            await pilot.press("s")  # HO-1: s skips the question
            await pilot.press("enter")
            text = plain(_panel(app).body)
            assert "Which database? → maria db" in text and "Which cache? → (skipped)" in text
            await pilot.press("enter")

        drive(service, session, scenario)
        # AQ-3: Other is free text; a skipped question has no key
        assert _modified(service, session)["answers"] == {"Which database?": "maria db"}
        content = service.tools.get(session, call_id).document["modelContent"]
        assert "skipped" in content  # AQ-4: some answered


def test_ho1_the_other_row_number_types_other_and_s_clears_an_answer(tmp_path: Path) -> None:
    asked = {"questions": [question("Which database?", ["SQLite", "PostgreSQL"]),
                           question("Which cache?", ["Redis", "Memcached"])]}
    with opened(tmp_path) as service:
        session, call_id = _ask(service, asked)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("1")  # SQLite, then the cursor is on the cache question
            await pilot.press("3", *"none", "enter")  # 3 is the Other row of two options
            await pilot.press("k", "k", "k", "s")  # back on the database question: skip it
            await pilot.press("9")  # no ninth row: nothing happens
            await pilot.press("enter", "enter")

        drive(service, session, scenario)
        assert _modified(service, session)["answers"] == {"Which cache?": "none"}
        assert service.tools.get(session, call_id).document["success"] is True


def test_ho1_all_skipped_submits_empty_answers(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session, call_id = _ask(service, QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("s", "enter", "enter")

        drive(service, session, scenario)
        assert _modified(service, session)["answers"] == {}  # AQ-3: {} is valid
        content = service.tools.get(session, call_id).document["modelContent"]
        assert "rejection" in content  # AQ-4: none answered is not a rejection


def test_ho1_movement_on_the_confirmation_page_goes_back_to_the_questions(
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session, _call = _ask(service, QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("tab", "1", "enter")  # Tab cannot move the keys elsewhere
            assert _panel(app).state.confirming
            await pilot.press("k")
            assert not _panel(app).state.confirming
            await pilot.press("3", "enter", "enter")

        drive(service, session, scenario)
        assert _modified(service, session)["answers"] == {"Which database?": "DuckDB"}


def test_ho1_escape_rejects_and_the_call_completes_declined(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session, call_id = _ask(service, QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("o", *"abc")
            await pilot.press("escape")  # Esc in the Other field only closes the field
            assert _panel(app).field is None and resolutions(service, session) == []
            await pilot.press("escape")  # HO-1: Esc rejects

        drive(service, session, scenario)
        (resolved,) = resolutions(service, session)
        assert resolved["decision"] == "deny" and resolved["input"] is None
        call = service.tools.get(session, call_id).document
        assert call["status"] == "completed" and call["success"] is False  # HO-8
        assert "declined" in call["modelContent"]


def test_ho1_escape_on_the_confirmation_page_rejects(tmp_path: Path) -> None:
    with opened(tmp_path) as service:
        session, _call = _ask(service, QUESTION)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("2", "enter", "escape")

        drive(service, session, scenario)
        assert [r["decision"] for r in resolutions(service, session)] == ["deny"]


def test_aq3_the_chosen_preview_is_annotated(tmp_path: Path) -> None:
    asked = {"questions": [question("Which layout?", ["Tabs", "Split"],
                                    previews={"Split": "+---+---+\n| a | b |\n+---+---+"})]}
    with opened(tmp_path) as service:
        session, _call = _ask(service, asked)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            await pilot.press("j")
            assert "| a | b |" in plain(_panel(app).body)  # the preview box of the cursor
            await pilot.press("space", "enter", "enter")

        drive(service, session, scenario)
        new_input = _modified(service, session)
        assert new_input["answers"] == {"Which layout?": "Split"}
        assert new_input["annotations"] == {
            "Which layout?": {"preview": "+---+---+\n| a | b |\n+---+---+"}
        }


def test_ho4_the_queue_shows_the_head_and_the_next_question_after_an_answer(
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]
        first = service.tools.call(session, "AskUserQuestion", QUESTION).document
        second_input = {"questions": [question("Which cache?", ["Redis", "Memcached"])]}
        second = service.tools.call(session, "AskUserQuestion", second_input).document

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert "2 waiting" in plain(app.queue)
            assert _panel(app).interaction_id == first["interactionId"]
            await pilot.press("1", "enter", "enter")
            assert _panel(app).interaction_id == second["interactionId"]
            assert "1 waiting" in plain(app.queue)
            await pilot.press("2", "enter", "enter")

        drive(service, session, scenario)
        assert [r["input"]["answers"] for r in resolutions(service, session)] == [
            {"Which database?": "SQLite"}, {"Which cache?": "Memcached"},
        ]
