"""One MCP elicitation per questionnaire, and its answer as a ``respond`` decision (SPEC §5, §7).

An AskUserQuestion questionnaire becomes one form: per question ``qN`` (a single-select
``enum`` of the option labels, or a multi-select ``array`` of them) and ``qN_other`` (free text,
the Other every client offers). A question left empty is skipped; a non-blank Other wins over
a single pick and joins a multi-select's labels (joined by ``", "``, AQ-3). An ExitPlanMode
approval becomes the one-option questionnaire of PM-6: ``decision`` (``"Approve"``) plus free
``feedback``; non-blank feedback is a ``feedback`` decision, else ``Approve`` approves.

``decline`` is the user's refusal (``deny``); ``cancel`` (the form was dismissed), or an
accepted form that says nothing, leaves the interaction pending for another surface (D120).

Here too: the ``input_required`` rounds that carry a form on 2026-07-28 connections (D124).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp_types import (
    CallToolRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from ..errors import InvalidInput
from ..tools.plan import APPROVE_OPTION, REVIEW_QUESTION

__all__ = [
    "ANSWER_KEY",
    "Answer",
    "Form",
    "Round",
    "ask_form",
    "asking_round",
    "plan_form",
    "returned_round",
]


# -- the input_required rounds of 2026-07-28 connections (D124) --------------------------------
#
# The 2026-07-28 protocol's way to ask mid-call: an ``input_required`` round (D124).
#
# On a modern connection the server cannot send the elicitation request itself; it answers the
# ``tools/call`` with an ``InputRequiredResult`` holding the form, and the client asks the user
# and calls again with the response and the ``requestState`` it was given. Our state names the
# waiting call and its interaction; the retry is checked against the log (the call must be this
# session's, and still wait on that interaction), so a forged state can answer nothing a
# client could not answer through ``respond`` anyway.

ANSWER_KEY = "answer"


@dataclass(frozen=True, slots=True)
class Round:
    """A retried call: which waiting call it answers, and the user's response."""

    call_id: str
    interaction_id: str
    response: ElicitResult | None
    """``None`` when the client sent no form response (nothing to record)."""


def asking_round(form: Form, pending: dict[str, Any]) -> InputRequiredResult:
    """The ``input_required`` answer to a call that waits for the user."""
    request = ElicitRequest(params=ElicitRequestFormParams(
        message=form.message, requested_schema=form.schema,
    ))
    state = json.dumps({"callId": pending["callId"], "interactionId": pending["interactionId"]})
    return InputRequiredResult(input_requests={ANSWER_KEY: request}, request_state=state)


def returned_round(params: CallToolRequestParams) -> Round | None:
    """The round a retried call returns, or ``None`` for a first call."""
    if params.request_state is None:
        return None
    try:
        state = json.loads(params.request_state)
        call_id, interaction_id = str(state["callId"]), str(state["interactionId"])
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidInput("requestState does not name a waiting call") from exc
    response = (params.input_responses or {}).get(ANSWER_KEY)
    return Round(call_id, interaction_id, response if isinstance(response, ElicitResult) else None)


# -- the forms ---------------------------------------------------------------------------------
#
# One MCP elicitation per questionnaire, and its answer as a ``respond`` decision (SPEC §5, §7).
#
# An AskUserQuestion questionnaire becomes one form: per question ``qN`` (a single-select
# ``enum`` of the option labels, or a multi-select ``array`` of them) and ``qN_other`` (free text,
# the Other every client offers). A question left empty is skipped; a non-blank Other wins over
# a single pick and joins a multi-select's labels (joined by ``", "``, AQ-3). An ExitPlanMode
# approval becomes the one-option questionnaire of PM-6: ``decision`` (``"Approve"``) plus free
# ``feedback``; non-blank feedback is a ``feedback`` decision, else ``Approve`` approves.
#
# ``decline`` is the user's refusal (``deny``); ``cancel`` (the form was dismissed), or an
# accepted form that says nothing, leaves the interaction pending for another surface (D120).

Action = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What to pass to :meth:`ToolService.respond`."""

    decision: Literal["modify", "approve", "deny", "feedback"]
    input: dict[str, Any] | None = None
    feedback: str | None = None


@dataclass(frozen=True, slots=True)
class Form:
    """An elicitation request and how to read its answer."""

    kind: Literal["askUserQuestion", "planApproval"]
    message: str
    schema: dict[str, Any]
    original: Mapping[str, Any]

    def answer(self, action: Action, content: Mapping[str, Any] | None) -> Answer | None:
        """The decision the user's answer means; ``None`` leaves the call pending."""
        if action == "decline":
            return Answer("deny")
        if action != "accept":
            return None
        values = content or {}
        if self.kind == "planApproval":
            return _plan_answer(values)
        answers = _answers(self.original.get("questions", []), values)
        return Answer("modify", input={**self.original, "answers": answers})


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _plan_answer(values: Mapping[str, Any]) -> Answer | None:
    feedback = _text(values.get("feedback"))
    if feedback:
        return Answer("feedback", feedback=feedback)
    if values.get("decision") == APPROVE_OPTION:
        return Answer("approve")
    return None


def _answers(questions: list[Mapping[str, Any]], values: Mapping[str, Any]) -> dict[str, str]:
    answers: dict[str, str] = {}
    for number, question in enumerate(questions, start=1):
        picked = values.get(f"q{number}")
        other = _text(values.get(f"q{number}_other"))
        if question.get("multiSelect"):
            labels = [p for p in picked if isinstance(p, str)] if isinstance(picked, list) else []
            answer = ", ".join([*labels, *([other] if other else [])])
        else:
            answer = other or _text(picked)
        if answer.strip():
            answers[str(question["question"])] = answer
    return answers


def _question_fields(number: int, question: Mapping[str, Any]) -> dict[str, Any]:
    options = list(question.get("options", []))
    labels = [str(o["label"]) for o in options]
    lines = [str(question["question"])] + [
        f"- {o['label']}: {o['description']}" if o.get("description") else f"- {o['label']}"
        for o in options
    ]
    title = str(question.get("header") or question["question"])
    pick: dict[str, Any] = {"title": title, "description": "\n".join(lines)}
    if question.get("multiSelect"):
        pick |= {"type": "array", "items": {"type": "string", "enum": labels}}
    else:
        pick |= {"type": "string", "enum": labels}
    other = {
        "type": "string", "title": "Other",
        "description": f"Your own answer to: {question['question']} (instead of the options)",
    }
    return {f"q{number}": pick, f"q{number}_other": other}


def ask_form(raw: Mapping[str, Any]) -> Form:
    """The AskUserQuestion questionnaire of ``raw`` (validated input) as one form."""
    properties: dict[str, Any] = {}
    questions = list(raw.get("questions", []))
    for number, question in enumerate(questions, start=1):
        properties |= _question_fields(number, question)
    noun = "question" if len(questions) == 1 else "questions"
    message = (f"The agent asks {len(questions)} {noun}; leave one empty to skip it.\n\n"
               + "\n".join(str(q["question"]) for q in questions))
    schema = {"type": "object", "properties": properties}
    return Form("askUserQuestion", message, schema, raw)


def plan_form(raw: Mapping[str, Any]) -> Form:
    """ExitPlanMode's approval (PM-6) as one form: Approve, or free-text feedback."""
    schema = {"type": "object", "properties": {
        "decision": {"type": "string", "title": "Plan", "description": REVIEW_QUESTION,
                     "enum": [APPROVE_OPTION]},
        "feedback": {"type": "string", "title": "Feedback",
                     "description": "What to change instead (the plan stays unapproved)"},
    }}
    message = f"{REVIEW_QUESTION}\n\n{raw.get('plan', '')}"
    return Form("planApproval", message, schema, raw)
