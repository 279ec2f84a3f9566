"""One MCP elicitation per questionnaire, and its answer as a ``respond`` decision (AQ-3, PM-6).

An AskUserQuestion questionnaire becomes one form: per question ``qN`` (a single-select
``enum`` of the option labels, or a multi-select ``array`` of them; each option's description
and preview shown in full, as text, EG-7), ``qN_other`` (free text, the Other every client
offers) and ``qN_notes`` (the user's notes, AQ-3's ``annotations``). A question left empty is
skipped; a non-blank Other wins over a single pick and joins a multi-select's labels (joined
by ``", "``, AQ-3); a single pick with a preview records it as the chosen preview. A value
that is not one of the offered labels is refused (:class:`~sessionledger.errors.InvalidInput`
naming it; nothing is recorded). An ExitPlanMode approval becomes the one-option
questionnaire of PM-6: ``decision`` (``"Approve"``) plus free ``feedback``; non-blank feedback
is a ``feedback`` decision, else ``Approve`` approves.

``decline`` is the user's refusal (``deny``); ``cancel`` (the form was dismissed) leaves the
interaction pending for another surface (D120); an accepted form that says nothing is asked
once more (:meth:`Form.again`), then left pending (issue 21 finding 5).

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

AGAIN_NOTE = ("Nothing was answered. Answer at least one question, or submit the form empty "
              "again to leave it for later (it stays waiting; it can be answered elsewhere).")
"""Put before the message of a form asked again after an accepted empty one."""

__all__ = [
    "AGAIN_NOTE",
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
    again: bool = False
    """The form was already asked again after an empty answer (ask no more)."""


def asking_round(
    form: Form, pending: dict[str, Any], *, again: bool = False
) -> InputRequiredResult:
    """The ``input_required`` answer to a call that waits for the user (``again``: the
    second asking after an accepted empty form, :meth:`Form.again`)."""
    request = ElicitRequest(params=ElicitRequestFormParams(
        message=form.message, requested_schema=form.schema,
    ))
    state: dict[str, Any] = {"callId": pending["callId"], "interactionId": pending["interactionId"]}
    if again:
        state["again"] = True
    return InputRequiredResult(
        input_requests={ANSWER_KEY: request}, request_state=json.dumps(state)
    )


def returned_round(params: CallToolRequestParams) -> Round | None:
    """The round a retried call returns, or ``None`` for a first call."""
    if params.request_state is None:
        return None
    try:
        state = json.loads(params.request_state)
        call_id, interaction_id = str(state["callId"]), str(state["interactionId"])
        again = state.get("again") is True
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidInput("requestState does not name a waiting call") from exc
    response = (params.input_responses or {}).get(ANSWER_KEY)
    answered = response if isinstance(response, ElicitResult) else None
    return Round(call_id, interaction_id, answered, again)


# -- the forms ---------------------------------------------------------------------------------
#
# One MCP elicitation per questionnaire, and its answer as a ``respond`` decision (AQ-3, PM-6):
# the fields and the reading of an answer are described at the top of this module.

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
        """The decision the user's answer means; ``None`` leaves the call pending (a
        dismissed form, or an accepted one that says nothing: :meth:`said_nothing`). A value
        the form did not offer is :class:`InvalidInput` naming it."""
        if action == "decline":
            return Answer("deny")
        if action != "accept":
            return None
        values = content or {}
        if self.kind == "planApproval":
            return _plan_answer(values)
        questions = list(self.original.get("questions", []))
        answers, annotations = _answers(questions, values)
        if not answers and not annotations:
            return None
        answered: dict[str, Any] = {**self.original, "answers": answers}
        if annotations:
            answered["annotations"] = annotations
        return Answer("modify", input=answered)

    def said_nothing(self, action: Action, content: Mapping[str, Any] | None) -> bool:
        """An accepted form with nothing in it (asked once more, then left pending)."""
        return action == "accept" and self.answer(action, content) is None

    def again(self) -> Form:
        """The same form asked once more after an accepted empty one."""
        return Form(self.kind, f"{AGAIN_NOTE}\n\n{self.message}", self.schema, self.original)

    @property
    def noun(self) -> str:
        """What the form asks, for the texts about it."""
        return "plan approval" if self.kind == "planApproval" else "question"


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(
            f"the form's {name} must be text, not {json.dumps(value)}; nothing was recorded "
            "and the call still waits", details=[{"loc": [name]}],
        )
    return value.strip()


def _refused(name: str, value: Any, offered: list[str]) -> InvalidInput:
    choices = ", ".join(json.dumps(o, ensure_ascii=False) for o in offered)
    return InvalidInput(
        f"the form's {name} is {json.dumps(value, ensure_ascii=False)}, which is not one of the "
        f"options offered ({choices}); nothing was recorded and the call still waits",
        details=[{"loc": [name], "message": "not an offered option"}],
    )


def _plan_answer(values: Mapping[str, Any]) -> Answer | None:
    feedback = _text(values.get("feedback"), "feedback")
    decision = values.get("decision")
    if decision not in (None, "", APPROVE_OPTION):
        raise _refused("decision", decision, [APPROVE_OPTION])
    if feedback:
        return Answer("feedback", feedback=feedback)
    if decision == APPROVE_OPTION:
        return Answer("approve")
    return None


def _picked(number: int, question: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    """The offered labels picked for question ``number`` (refusing any other value)."""
    name = f"q{number}"
    labels = [str(o["label"]) for o in question.get("options", [])]
    picked = values.get(name)
    if picked is None or picked == "" or picked == []:
        return []
    if question.get("multiSelect"):
        if not isinstance(picked, list):
            raise _refused(name, picked, labels)
        for label in picked:
            if label not in labels:
                raise _refused(name, label, labels)
        return [label for label in labels if label in picked]  # in the offered order
    if picked not in labels:
        raise _refused(name, picked, labels)
    return [str(picked)]


def _answers(
    questions: list[Mapping[str, Any]], values: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """AQ-3's ``answers`` and ``annotations`` (notes, the chosen preview) of a form."""
    answers: dict[str, str] = {}
    annotations: dict[str, dict[str, str]] = {}
    for number, question in enumerate(questions, start=1):
        text = str(question["question"])
        labels = _picked(number, question, values)
        other = _text(values.get(f"q{number}_other"), f"q{number}_other")
        notes = _text(values.get(f"q{number}_notes"), f"q{number}_notes")
        annotation: dict[str, str] = {}
        if question.get("multiSelect"):
            answer = ", ".join([*labels, *([other] if other else [])])
        else:
            answer = other or (labels[0] if labels else "")
            chosen = [o for o in question.get("options", [])
                      if labels and not other and o["label"] == labels[0]]
            if chosen and isinstance(chosen[0].get("preview"), str) and chosen[0]["preview"]:
                annotation["preview"] = chosen[0]["preview"]
        if answer:
            answers[text] = answer
        if notes:
            annotation["notes"] = notes
        if annotation:
            annotations[text] = annotation
    return answers, annotations


def _option_lines(option: Mapping[str, Any]) -> list[str]:
    """An option as the form shows it: its label and description, then its preview in full
    (as text: a client shows a field description as it is, HTML included, EG-7)."""
    label = str(option["label"])
    line = f"- {label}: {option['description']}" if option.get("description") else f"- {label}"
    preview = option.get("preview")
    if not isinstance(preview, str) or not preview:
        return [line]
    return [line, f"  Preview of {label}:", *(f"    {p}" for p in preview.splitlines())]


def _question_fields(number: int, question: Mapping[str, Any]) -> dict[str, Any]:
    options = list(question.get("options", []))
    labels = [str(o["label"]) for o in options]
    lines = [str(question["question"])]
    for option in options:
        lines += _option_lines(option)
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
    notes = {
        "type": "string", "title": "Notes",
        "description": f"Notes for the agent about: {question['question']} (optional)",
    }
    return {f"q{number}": pick, f"q{number}_other": other, f"q{number}_notes": notes}


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
