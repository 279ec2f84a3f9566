"""One elicitation form per questionnaire and its answer as a respond decision (issue 12, D120).

Pure functions, no server: the form of a questionnaire holds valid MCP elicitation fields; the
answers map to AQ-3's input (skipped questions left out, Other text, multi-select labels joined
by ", "); the plan approval maps to PM-6's decisions; decline denies, cancel decides nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import CallToolRequestParams
from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition
from pydantic import TypeAdapter

from sessionledger.errors import InvalidInput
from sessionledger.mcp.forms import (
    AGAIN_NOTE,
    Answer,
    ask_form,
    asking_round,
    plan_form,
    returned_round,
)
from sessionledger.tools.ask import parse_handler_input

FIELD = TypeAdapter[Any](PrimitiveSchemaDefinition)
QUESTIONS: dict[str, Any] = {"questions": [
    {"question": "Which database?", "header": "DB", "multiSelect": False,
     "options": [{"label": "SQLite", "description": "a file"}, {"label": "Postgres",
                                                                "description": "a server"}]},
    {"question": "Which checks?", "header": "Checks", "multiSelect": True,
     "options": [{"label": "ruff", "description": ""}, {"label": "mypy", "description": ""}]},
    {"question": "Which name?", "header": "Name", "multiSelect": False,
     "options": [{"label": "ledger", "description": ""}, {"label": "log", "description": ""}]},
]}


def test_every_field_of_the_forms_is_a_valid_elicitation_field() -> None:
    for form in (ask_form(QUESTIONS), plan_form({"plan": "Do it"})):
        assert form.schema["type"] == "object" and "required" not in form.schema
        for field in form.schema["properties"].values():
            FIELD.validate_python(field)


def test_answers_skip_empty_questions_join_multi_select_and_prefer_other() -> None:
    answer = ask_form(QUESTIONS).answer("accept", {
        "q1": "SQLite", "q1_other": "DuckDB",
        "q2": ["ruff", "mypy"], "q2_other": "pytest",
        "q3_other": "   ",
    })
    assert answer is not None and answer.decision == "modify" and answer.input is not None
    assert answer.input["answers"] == {
        "Which database?": "DuckDB", "Which checks?": "ruff, mypy, pytest",
    }
    parse_handler_input(answer.input)  # what the executor validates the answer with


@pytest.mark.parametrize(
    ("action", "content", "expected"),
    [
        ("accept", {"decision": "Approve"}, Answer("approve")),
        ("accept", {"decision": "Approve", "feedback": "Smaller"}, Answer("feedback",
                                                                         feedback="Smaller")),
        ("accept", {"feedback": "  "}, None),
        ("decline", None, Answer("deny")),
        ("cancel", None, None),
    ],
)
def test_plan_answers(action: Any, content: dict[str, Any] | None, expected: Answer | None) -> None:
    assert plan_form({"plan": "Do it"}).answer(action, content) == expected


def test_a_declined_questionnaire_denies_and_a_cancelled_one_decides_nothing() -> None:
    form = ask_form(QUESTIONS)
    assert form.answer("decline", None) == Answer("deny")
    assert form.answer("cancel", None) is None


PREVIEWED: dict[str, Any] = {"questions": [
    {"question": "Which table?", "header": "Table", "multiSelect": False,
     "options": [{"label": "Narrow", "description": "two columns",
                  "preview": "```sql\nCREATE TABLE t (id INTEGER);\n<b>bold?</b>\n```"},
                 {"label": "Wide", "description": "ten columns"}]},
    {"question": "Which checks?", "header": "Checks", "multiSelect": True,
     "options": [{"label": "ruff", "description": ""}, {"label": "mypy", "description": ""}]},
]}


def test_option_previews_are_shown_in_full_as_text() -> None:  # issue 21 finding 7, EG-7
    description = ask_form(PREVIEWED).schema["properties"]["q1"]["description"]
    assert description.splitlines() == [
        "Which table?", "- Narrow: two columns", "  Preview of Narrow:", "    ```sql",
        "    CREATE TABLE t (id INTEGER);", "    <b>bold?</b>", "    ```", "- Wide: ten columns",
    ]


def test_notes_and_the_chosen_preview_become_annotations() -> None:  # issue 21 finding 7, AQ-3
    form = ask_form(PREVIEWED)
    assert {"q1_notes", "q2_notes"} <= set(form.schema["properties"])
    answer = form.answer("accept", {"q1": "Narrow", "q1_notes": " keep it small ",
                                    "q2_notes": "no opinion"})
    assert answer is not None and answer.input is not None
    assert answer.input["answers"] == {"Which table?": "Narrow"}
    assert answer.input["annotations"] == {
        "Which table?": {"preview": PREVIEWED["questions"][0]["options"][0]["preview"],
                         "notes": "keep it small"},
        "Which checks?": {"notes": "no opinion"},
    }
    parsed = parse_handler_input(answer.input)
    assert parsed.annotations["Which checks?"].notes == "no opinion"
    other = form.answer("accept", {"q1": "Narrow", "q1_other": "Medium"})
    assert other is not None and other.input is not None
    assert other.input["answers"] == {"Which table?": "Medium"} and "annotations" not in other.input


@pytest.mark.parametrize(("content", "named"), [
    ({"q1": "Medium"}, '"Medium"'),
    ({"q2": ["ruff", "pytest"]}, '"pytest"'),
    ({"q2": "ruff"}, '"ruff"'),
    ({"q1": 3}, "3"),
    ({"q1_other": ["x"]}, '["x"]'),
])
def test_a_value_the_form_did_not_offer_is_refused_naming_it(  # issue 21 finding 7
    content: dict[str, Any], named: str,
) -> None:
    with pytest.raises(InvalidInput) as refused:
        ask_form(PREVIEWED).answer("accept", content)
    assert named in refused.value.message and "nothing was recorded" in refused.value.message


def test_a_plan_decision_the_form_did_not_offer_is_refused() -> None:  # issue 21 finding 7
    with pytest.raises(InvalidInput, match='"Reject"'):
        plan_form({"plan": "Do it"}).answer("accept", {"decision": "Reject"})


def test_an_accepted_empty_form_says_nothing_and_is_asked_again_once() -> None:  # finding 5
    form = ask_form(QUESTIONS)
    for empty in ({}, {"q1": "", "q2": [], "q3_other": "  ", "q1_notes": ""}):
        assert form.answer("accept", empty) is None and form.said_nothing("accept", empty)
    assert not form.said_nothing("cancel", None) and not form.said_nothing("decline", None)
    assert not form.said_nothing("accept", {"q1_notes": "later"})  # notes say something
    again = form.again()
    assert again.message == f"{AGAIN_NOTE}\n\n{form.message}" and again.schema == form.schema
    assert plan_form({"plan": "Do it"}).said_nothing("accept", {"feedback": " "})


def test_a_round_asked_again_says_so_in_its_state() -> None:  # issue 21 finding 5
    pending = {"callId": "call_1", "interactionId": "int_1"}
    first, second = (asking_round(ask_form(QUESTIONS), pending, again=a) for a in (False, True))
    for state, again in ((first.request_state, False), (second.request_state, True)):
        params = CallToolRequestParams(name="AskUserQuestion", arguments={}, request_state=state)
        returned = returned_round(params)
        assert returned is not None and returned.again is again
