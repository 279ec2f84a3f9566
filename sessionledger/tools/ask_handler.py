"""AskUserQuestion as a service tool: the executor's view of the contract (SPEC §5, HO-8).

It always needs the user (AQ-5); the question set is the interaction's payload. A ``modify``
carries the input with the user's answers and must pass the handler schema (else 422, still
pending); an ``approve`` without answers (an old client) is never taken as ``{}``: the handler
schema refuses it and the call completes with ``success: false`` and the exact AQ-3 message; a
``deny`` completes with the declined text and the turn goes on; the auto-continue timer
(``autoContinued``) answers with ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from eventlog import InteractionKind

from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .ask_texts import declined_text
from .ask_user_question import (
    DESCRIPTION,
    error_text,
    model_schema,
    parse_handler_input,
    parse_model_input,
    result,
)
from .handlers import HandlerOutcome, Resolution, ToolContext

__all__ = ["AskUserQuestionHandler"]


class AskUserQuestionHandler:
    """The AskUserQuestion handler."""

    descriptor: ToolDescriptor = SERVICE_TOOLS["AskUserQuestion"]
    description: str = DESCRIPTION

    def model_schema(self) -> dict[str, Any]:
        return model_schema()

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        parse_model_input(raw)

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        answered = parse_handler_input(raw)
        if answered.questions != parse_model_input(original).questions:
            raise ValueError("the answer must keep the questions exactly as they were asked")

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        questions = parse_model_input(raw).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )["questions"]
        return "askUserQuestion", {"questions": questions}

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        if resolution is not None and resolution.decision == "deny":
            return HandlerOutcome(
                success=False, model_content=declined_text(resolution.feedback),
                result={"declined": True},
            )
        answered_input: Mapping[str, Any] = raw
        if resolution is not None and resolution.decision == "autoContinued":
            answered_input = {**raw, "answers": {}}
        try:
            handler_input = parse_handler_input(answered_input)
        except ValidationError as exc:
            return HandlerOutcome(success=False, model_content=error_text(exc))
        answer = result(handler_input)
        return HandlerOutcome(
            success=True,
            model_content=answer.text,
            result=answer.model_dump(mode="json", exclude={"text"}),
        )
