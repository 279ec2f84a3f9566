"""The AskUserQuestion contract: input schemas, limits and results (SPEC §5, HO-8).

Pure code for the executor to call, no I/O. Two schemas, one shape:

* :class:`AskInput` — what the model writes: ``{"questions": [question…]}`` (AQ-2). Its JSON
  schema (:func:`model_schema`) is what the model is given; ``multiSelect`` is required there
  although it defaults to false.
* :class:`AskHandlerInput` — what the handler runs on once the approval step (the host's
  ``modify``) filled in ``answers`` and maybe ``annotations`` (AQ-3, AQ-5). Without
  ``answers`` validation fails with the exact :data:`MISSING_ANSWERS`.

Every model forbids unknown fields and is strict (no ``"true"`` for a bool). Texts are compared
as a person sees them (EG-7, :func:`.ask_texts.text_key`): without the characters that render
as nothing, NFKC-normalised, whitespace runs as one space, trimmed, case-folded, with the
look-alikes of the letters of "other" folded to them; two questions or labels a user cannot
tell apart are duplicates; only a label that is exactly "other" so compared is reserved
("Others", "Other option" are fine, ``"Oth\\u0435r"`` with a Cyrillic e is not); question texts and
labels that show nothing (blank, or only zero-width characters) are rejected like empty ones.
The texts are recorded as given. Where the SPEC is silent this module decides: a ``null`` preview
or ``null`` answers count as absent; the forbidden preview tags are looked for in the whole
text, code fences included, in any case, opening or closing, with or without attributes, but
only where a tag name follows ``<`` directly, as in HTML. The texts live in :mod:`.ask_texts`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from .ask_texts import (
    ALL_ANSWERED_PREFIX,
    DESCRIPTION,
    MISSING_ANSWERS,
    declined_text,
    result_text,
    text_key,
    visible,
)

__all__ = [
    "ALL_ANSWERED_PREFIX",
    "DESCRIPTION",
    "FORBIDDEN_PREVIEW_TAGS",
    "HEADER_CHIP_WIDTH",
    "MAX_OPTIONS",
    "MAX_QUESTIONS",
    "MIN_OPTIONS",
    "MIN_QUESTIONS",
    "MISSING_ANSWERS",
    "RESERVED_LABEL",
    "TOOL_NAME",
    "AnswerAnnotation",
    "AskHandlerInput",
    "AskInput",
    "AskOption",
    "AskQuestion",
    "AskResult",
    "declined_text",
    "error_text",
    "forbidden_preview_tag",
    "handler_schema",
    "missing_answers",
    "model_schema",
    "parse_handler_input",
    "parse_model_input",
    "result",
    "result_text",
]

TOOL_NAME = "AskUserQuestion"
MIN_QUESTIONS, MAX_QUESTIONS = 1, 4
MIN_OPTIONS, MAX_OPTIONS = 2, 4
HEADER_CHIP_WIDTH = 12
"""A header is described as at most this many characters; hosts truncate, we never reject."""
RESERVED_LABEL = "other"
"""The label the client always adds itself (compared as :func:`.ask_texts.text_key`)."""
FORBIDDEN_PREVIEW_TAGS = ("html", "body", "!doctype", "script", "style")
"""Tags that make a preview a document rather than a fragment (opening or closing form)."""

_FORBIDDEN_TAG = re.compile(r"</?(!doctype|html|body|script|style)(?![\w-])", re.IGNORECASE)
"""As in HTML, the name follows ``<`` or ``</`` directly; attributes, whitespace, ``/`` or
``>`` may follow it. ``a < body`` in a code snippet is text, ``<bodyguard>`` another tag."""


def forbidden_preview_tag(text: str) -> str | None:
    """The first forbidden tag in a preview, normalised (``"<script>"``), or ``None``."""
    found = _FORBIDDEN_TAG.search(text)
    if found is None:
        return None
    return f"<{found.group(1).lower()}>"


def _not_blank(text: str, what: str) -> str:
    if not visible(text):
        raise ValueError(f"{what} must not be blank (nothing in it is visible)")
    return text


def _duplicates(texts: list[str]) -> list[str]:
    seen: set[str] = set()
    repeated = []
    for text in texts:
        key = text_key(text)
        if key in seen:
            repeated.append(text)
        seen.add(key)
    return repeated


def _drop_default(schema: dict[str, Any]) -> None:
    """An optional field shows as absent, not as ``default: null``, to the model."""
    schema.pop("default", None)


def _drop_docstring(schema: dict[str, Any]) -> None:
    """Class docstrings are for developers; the model reads the field descriptions."""
    schema.pop("description", None)


def _question_schema(schema: dict[str, Any]) -> None:
    """AQ-2: ``multiSelect`` defaults to false but the model must always write it."""
    _drop_docstring(schema)
    required = schema.setdefault("required", [])
    if "multiSelect" not in required:
        required.append("multiSelect")


_STRICT = ConfigDict(
    extra="forbid", strict=True, frozen=True, json_schema_extra=_drop_docstring
)


class AskOption(BaseModel):
    """One choice of a question; the client adds "Other" by itself."""

    model_config = _STRICT

    label: str = Field(
        min_length=1,
        description="What the user picks: a few words. Add \"(Recommended)\" at the end of the "
        "label of the option you recommend, and put that option first.",
    )
    description: str = Field(description="What choosing this option means or implies.")
    preview: str | SkipJsonSchema[None] = Field(
        default=None,
        json_schema_extra=_drop_default,
        description="Optional Markdown shown in a monospace box (code, ASCII mockup, config), "
        "for single-select questions only. HTML may only be a fragment: no <html>, <body>, "
        "<!doctype>, <script> or <style>.",
    )

    @field_validator("label")
    @classmethod
    def _label(cls, label: str) -> str:
        _not_blank(label, "option label")
        if text_key(label) == RESERVED_LABEL:
            raise ValueError(
                f'an option may not be labelled {label.strip()!r}: the client always adds '
                'an "Other" option for a free-text answer'
            )
        return label

    @field_validator("preview")
    @classmethod
    def _preview(cls, preview: str | None) -> str | None:
        tag = forbidden_preview_tag(preview) if preview is not None else None
        if tag is not None:
            raise ValueError(
                f"preview must be an HTML fragment: the {tag} tag is not allowed "
                "(no <html>, <body>, <!doctype>, <script> or <style>)"
            )
        return preview


class AskQuestion(BaseModel):
    """One question: its text (the key of its answer), a chip header and 2-4 options."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, json_schema_extra=_question_schema
    )

    question: str = Field(
        min_length=1, description="The full question, ending with a question mark; unique."
    )
    header: str = Field(
        description=f"A very short label shown as a chip, at most {HEADER_CHIP_WIDTH} "
        "characters (e.g. \"Auth method\"); longer ones are cut off."
    )
    options: list[AskOption] = Field(
        min_length=MIN_OPTIONS,
        max_length=MAX_OPTIONS,
        description="2 to 4 distinct choices, recommended first; never an \"Other\" option "
        "(the client adds it).",
    )
    multi_select: bool = Field(
        default=False,
        alias="multiSelect",
        description="True if the user may pick several options, false if exactly one.",
    )

    @field_validator("question")
    @classmethod
    def _question(cls, question: str) -> str:
        return _not_blank(question, "question text")

    @field_validator("options")
    @classmethod
    def _unique_labels(cls, options: list[AskOption]) -> list[AskOption]:
        repeated = _duplicates([o.label for o in options])
        if repeated:
            raise ValueError(f"option labels must be unique; repeated: {repeated}")
        return options


class AskInput(BaseModel):
    """What the model writes (AQ-2): 1-4 questions with unique texts."""

    model_config = _STRICT

    questions: list[AskQuestion] = Field(
        min_length=MIN_QUESTIONS,
        max_length=MAX_QUESTIONS,
        description="1 to 4 questions to ask the user at once.",
    )

    @field_validator("questions")
    @classmethod
    def _unique_questions(cls, questions: list[AskQuestion]) -> list[AskQuestion]:
        repeated = _duplicates([q.question for q in questions])
        if repeated:
            raise ValueError(f"question texts must be unique; repeated: {repeated}")
        return questions

    def question_texts(self) -> list[str]:
        """The question texts in order: the only valid keys of answers and annotations."""
        return [q.question for q in self.questions]


class AnswerAnnotation(BaseModel):
    """What the user added to one question besides the answer (AQ-3)."""

    model_config = _STRICT

    preview: str | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra=_drop_default, description="The preview chosen."
    )
    notes: str | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra=_drop_default, description="The user's notes."
    )


class AskHandlerInput(AskInput):
    """The input the handler runs on: the questions plus what the approval step wrote (AQ-3).

    ``answers`` maps a question text to the chosen label, the labels joined by ``", "`` for a
    multi-select question, or the user's free text (Other) — so answers are never checked
    against the labels. ``{}`` means nothing was answered; a skipped question has no key.
    """

    answers: dict[str, str] = Field(
        description="Each answered question text and its answer; {} if none was answered."
    )
    annotations: dict[str, AnswerAnnotation] = Field(
        default_factory=dict,
        description="Per question text: the chosen preview and the user's notes.",
    )

    @model_validator(mode="before")
    @classmethod
    def _answers_present(cls, data: Any) -> Any:
        if missing_answers(data):
            raise PydanticCustomError("missing_answers", MISSING_ANSWERS)
        return data

    @field_validator("answers")
    @classmethod
    def _no_blank_answer(cls, answers: dict[str, str]) -> dict[str, str]:
        blank = [question for question, answer in answers.items() if not answer.strip()]
        if blank:
            raise ValueError(f"answers must not be blank; blank for: {blank}")
        return answers

    @model_validator(mode="after")
    def _keys_are_questions(self) -> AskHandlerInput:
        texts = set(self.question_texts())
        for field, keyed in (("answers", self.answers), ("annotations", self.annotations)):
            unknown = [key for key in keyed if key not in texts]
            if unknown:
                raise ValueError(f"{field} keys must be question texts; unknown: {unknown}")
        return self


class AskResult(BaseModel):
    """What the handler returns: the answers, the model's text, answered and skipped texts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answers: dict[str, str]
    annotations: dict[str, AnswerAnnotation]
    text: str
    answered: tuple[str, ...]
    skipped: tuple[str, ...]


def missing_answers(raw: object) -> bool:
    """True for a mapping without ``answers`` (or with ``null``): an old client's approve."""
    return isinstance(raw, Mapping) and raw.get("answers") is None


def parse_model_input(raw: Mapping[str, Any]) -> AskInput:
    """Validate what the model wrote; raises :class:`pydantic.ValidationError`."""
    return AskInput.model_validate(raw)


def parse_handler_input(raw: Mapping[str, Any]) -> AskHandlerInput:
    """Validate the input after approval; raises :class:`pydantic.ValidationError`.

    Without ``answers`` the error's only message is :data:`MISSING_ANSWERS`, verbatim.
    """
    return AskHandlerInput.model_validate(raw)


def error_text(error: ValidationError) -> str:
    """A one-line message for a failed tool call: exactly MISSING_ANSWERS when that is why."""
    problems = error.errors(include_url=False)
    if any(p["type"] == "missing_answers" for p in problems):
        return MISSING_ANSWERS
    return "; ".join(
        f"{'.'.join(str(part) for part in p['loc']) or 'input'}: {p['msg']}" for p in problems
    )


def result(handler_input: AskHandlerInput) -> AskResult:
    """The handler's result: the AQ-4 text and which questions were answered or skipped."""
    texts = handler_input.question_texts()
    return AskResult(
        answers=dict(handler_input.answers),
        annotations=dict(handler_input.annotations),
        text=result_text(texts, handler_input.answers, handler_input.annotations),
        answered=tuple(t for t in texts if t in handler_input.answers),
        skipped=tuple(t for t in texts if t not in handler_input.answers),
    )


def model_schema() -> dict[str, Any]:
    """The JSON schema given to the model (AQ-2): ``multiSelect`` required, no extra keys."""
    return AskInput.model_json_schema(by_alias=True)


def handler_schema() -> dict[str, Any]:
    """The JSON schema of the handler's input: the model's plus ``answers``, ``annotations``."""
    return AskHandlerInput.model_json_schema(by_alias=True)
