"""One elicitation form per questionnaire and its answer as a respond decision (issue 12, D120).

Pure functions, no server: the form of a questionnaire holds valid MCP elicitation fields; the
answers map to AQ-3's input (skipped questions left out, Other text, multi-select labels joined
by ", "); the plan approval maps to PM-6's decisions; decline denies, cancel decides nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition
from pydantic import TypeAdapter

from sessionledger.mcp.forms import Answer, ask_form, plan_form
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
