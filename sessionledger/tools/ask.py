"""AskUserQuestion, whole: its words, its contract with its handler, and the handler (AQ-1 … AQ-5).

What the model reads (:data:`DESCRIPTION`, :func:`model_schema`), what it may write
(:class:`AskInput`), what the handler runs on once the user answered (:class:`AskHandlerInput`),
what comes back to the model (:func:`result_text`, :func:`declined_text`, :data:`MISSING_ANSWERS`),
how texts a person reads are compared (:func:`visible`, :func:`text_key`, EG-7), and
:class:`AskUserQuestionHandler`, the executor's view of all this (HO-8). Pure code, no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

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

from eventlog import InteractionKind

from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .handlers import HandlerOutcome, Resolution, ToolContext

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
    "AnnotationLike",
    "AnswerAnnotation",
    "AskHandlerInput",
    "AskInput",
    "AskOption",
    "AskQuestion",
    "AskResult",
    "AskUserQuestionHandler",
    "QuestionLike",
    "blank",
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
    "text_key",
    "visible",
]

# -- the words (AQ-1, AQ-3, AQ-4, HO-8) ------------------------------------------------------
#
# Pure functions over plain data, so the contract below and the executor share one wording:
# DESCRIPTION is the tool description the model reads (AQ-1); result_text is what the model
# gets back once the user answered all, some or none of the questions (AQ-4). Pairs are
# ``"question"="answer"`` in question order, joined by ``", "``; an annotation adds
# `` (user notes: …; selected preview: …)`` after its pair. Texts are quoted verbatim, without
# escaping: the reader is the model, not a parser. declined_text is the result of a user
# ``deny``: declined, the turn goes on (HO-8). MISSING_ANSWERS is the exact AQ-3 message for an
# input that reached the handler without ``answers`` (an old client's plain approve, HO-8).
# visible and text_key are how texts a person reads are compared (EG-7), the one normalisation
# every rule that compares or blank-checks such texts uses (here, and the todo contract's
# blank check). Texts are stored as given; only comparisons normalise.

MISSING_ANSWERS = "AskUserQuestion requires user answers before execution"
"""AQ-3, exact: the handler ran on an input the approval step did not fill in."""

ALL_ANSWERED_PREFIX = "User has answered your questions: "
"""AQ-4, exact: the beginning of the text when every question was answered."""

DESCRIPTION = """\
Use this tool only when you are blocked on a decision that is genuinely the user's to make: \
one you cannot resolve from the request, the code, or sensible defaults.

Good uses: choosing between approaches with real trade-offs, clarifying an ambiguous \
requirement, getting a preference that changes what you build. Do not ask what you can find \
out yourself by reading the code, and do not ask the user to confirm what they already asked \
for.

How to ask:
- Ask 1 to 4 questions at once; each has 2 to 4 options and a unique question text.
- Put your recommended option first and add "(Recommended)" at the end of its label.
- `header` is a very short label of at most 12 characters (e.g. "Auth method"), shown as a \
chip above the question; longer headers are cut off.
- Each option has a short `label` the user picks and a `description` of what choosing it \
means or implies.
- Set `multiSelect` to true when the user may choose several options (their answer is then the \
chosen labels joined by ", "), false when exactly one applies.
- The user can always answer in their own words: the client adds an "Other" option to every \
question automatically, so never include an "Other" option yourself.
- `preview` (optional) is Markdown shown in a monospace box beside an option: a code snippet, \
an ASCII mockup, a config example, to compare concrete alternatives. Use previews for \
single-select questions only. HTML in a preview may only be a fragment: no <html>, <body>, \
<!doctype>, <script> or <style>.
- The user may skip questions; the result says which ones were answered.

Plan mode:
- To enter Plan mode, call EnterPlanMode; do not use this tool to ask whether you should plan.
- In Plan mode, use this tool to clarify requirements or choose between approaches before the \
plan is done, but never to ask "Is the plan OK?" or "Should I proceed?": the user cannot see \
your plan before you call ExitPlanMode. Ask for plan approval with ExitPlanMode."""
"""AQ-1: the description of AskUserQuestion; its first sentence is exact."""


# -- comparing what a person sees (EG-7) ---------------------------------------------------

_INVISIBLE_RANGES = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors (and the vowel separator)
    (0x2065, 0x2065),  # reserved among the invisible operators
    (0x2800, 0x2800),  # braille pattern blank
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # reserved before the interlinear annotation controls
    (0xE0000, 0xE0FFF),  # tags and variation selectors supplement
)
"""What renders as nothing besides categories Cf and Cc: Unicode's Default_Ignorable_Code_Point
characters that are not format characters, and the braille blank (D145)."""

_LOOK_ALIKES = {
    "o": "0\u039f\u03bf\u041e\u043e\u2c9e\u2c9f\u0555\u0585\u1d0f\u1d11\uab3d\ua4f3",
    "t": "\u03a4\u03c4\u0422\u0442\u2ca6\u2ca7\u13a2\uab72\u1d1b\ua4d4",
    "h": "\u0397\u03b7\u041d\u043d\u2c8e\u2c8f\u13bb\uab8b\u0570\u04bb\u029c\ua4e7",
    "e": "\u0395\u03b5\u0415\u0435\u13ac\uab7c\ua4f0\u04bd\uab32\u212e\u1d07",
    "r": "\u13a1\uab71\u13d2\uaba2\ua4e3\u0280\u01a6\u1d26\u2c85\u0433\uab47",
}
"""Unicode's confusables (UTS #39) of the letters of "other" that NFKC leaves alone: Greek,
Cyrillic, Coptic, Armenian, Cherokee and Lisu letters, Latin small capitals, the digit zero —
each in the case it has after case-folding. Letters that look alike only out of context
(Greek sigma, Arabic heh, Indic zeros) are left out: folding them would make distinct words
of their own script duplicates (D145)."""
_FOLD = {ord(c): latin for latin, alikes in _LOOK_ALIKES.items() for c in alikes}


_IN_RANGES = frozenset(
    chr(point) for low, high in _INVISIBLE_RANGES for point in range(low, high + 1)
)


def _invisible(char: str) -> bool:
    if char in _IN_RANGES:
        return True
    return unicodedata.category(char) in ("Cf", "Cc") and not char.isspace()


_ASCII_HIDDEN = re.compile(
    "[" + "".join(re.escape(chr(p)) for p in range(128) if _invisible(chr(p))) + "]"
)
"""The ASCII characters :func:`visible` removes (the controls that are not whitespace): NFKC
leaves ASCII as it is, so an ASCII text needs nothing else."""
_ASCII_SHOWN = re.compile("[!-~]")
"""An ASCII character that shows: a text holding one is never blank."""


def visible(text: str) -> str:
    """``text`` as a person sees it, for comparing: characters that render as nothing
    (format and control characters, fillers, variation selectors) removed, NFKC-normalised
    (fullwidth, ligatures, compatibility forms and NFC/NFD spellings become one), every run
    of whitespace one space, trimmed. ``""`` for a text that shows nothing."""
    if text.isascii():  # the same answer in one pass (a TodoWrite checks 20 texts, #24)
        if _ASCII_HIDDEN.search(text) is not None:
            text = _ASCII_HIDDEN.sub("", text)
        return " ".join(text.split())
    while True:  # removal can leave a string NFKC changes, and NFKC can make a filler
        hidden = {ord(c): None for c in set(text) if _invisible(c)}
        shown = unicodedata.normalize("NFKC", text.translate(hidden) if hidden else text)
        if shown == text:
            return " ".join(shown.split())
        text = shown


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing (``visible(text) == ""``), answered at once for an
    ASCII text with a printable character in it."""
    if text.isascii() and _ASCII_SHOWN.search(text) is not None:
        return False
    return not visible(text)


def text_key(text: str) -> str:
    """How two texts a person reads are compared (question texts, option labels, the
    reserved "Other"): :func:`visible`, case-folded, and the look-alikes of the letters of
    "other" folded to them, so ``"Oth\\u0435r"`` (a Cyrillic e) is ``other``."""
    return unicodedata.normalize("NFKC", visible(text).casefold()).translate(_FOLD)


class QuestionLike(Protocol):
    """Anything with a question text (an ``AskQuestion`` model qualifies)."""

    @property
    def question(self) -> str: ...


class AnnotationLike(Protocol):
    """The user's extras on one question: the chosen preview and free notes."""

    @property
    def preview(self) -> str | None: ...

    @property
    def notes(self) -> str | None: ...


def _text(question: str | QuestionLike) -> str:
    return question if isinstance(question, str) else question.question


def _extras(annotation: AnnotationLike | None) -> str:
    """`` (user notes: …; selected preview: …)`` or nothing."""
    if annotation is None:
        return ""
    parts = []
    if annotation.notes:
        parts.append(f"user notes: {annotation.notes}")
    if annotation.preview:
        parts.append(f"selected preview: {annotation.preview}")
    return f" ({'; '.join(parts)})" if parts else ""


def _plural(count: int) -> str:
    return "question" if count == 1 else "questions"


def result_text(
    questions: Sequence[str | QuestionLike],
    answers: Mapping[str, str],
    annotations: Mapping[str, AnnotationLike] | None = None,
) -> str:
    """The AQ-4 text for the model: every question answered, some, or none.

    ``questions`` gives the order; ``answers`` and ``annotations`` are keyed by question text
    (validated input: a key that is not a question text is a ``ValueError``). Notes the user
    left on a skipped question are reported with it.
    """
    texts = [_text(q) for q in questions]
    unknown = sorted(set(answers) - set(texts))
    if unknown:
        raise ValueError(f"answers to unknown questions: {unknown}")
    notes = annotations or {}
    answered = [t for t in texts if t in answers]
    skipped = [t for t in texts if t not in answers]
    pairs = ", ".join(f'"{t}"="{answers[t]}"{_extras(notes.get(t))}' for t in answered)
    if not skipped:
        return (
            f"{ALL_ANSWERED_PREFIX}{pairs}. "
            "You can now continue with the user's answers in mind."
        )
    skipped_list = ", ".join(f'"{t}"{_extras(notes.get(t))}' for t in skipped)
    if answered:
        return (
            f"User has answered {len(answered)} of {len(texts)} {_plural(len(texts))}: {pairs}. "
            f"The user skipped {len(skipped)} of {len(texts)} {_plural(len(texts))}: "
            f"{skipped_list}. For the skipped {_plural(len(skipped))}, use your own judgment "
            "and sensible defaults, and say which choices you made; do not invent user "
            "preferences."
        )
    return (
        f"The user did not answer any of your questions ({skipped_list}). This is not a "
        "rejection: the user has not declined your request or your approach. Do not invent or "
        "assume user preferences; continue with your own judgment and sensible defaults, and "
        "state the assumptions you make."
    )


def declined_text(reason: str | None = None) -> str:
    """The result of a user ``deny`` on the question (HO-8): declined, the turn continues.

    ``reason`` is whatever the user typed when declining, quoted after the sentence.
    """
    text = (
        "The user declined to answer your questions. Do not ask the same questions again; "
        "continue the task without these answers, using your own judgment where you can, or "
        "explain what you need if you cannot go on without them."
    )
    if reason and reason.strip():
        text += f' The user said: "{reason.strip()}"'
    return text

# -- the contract: input schemas, limits and results (AQ-1 … AQ-5, HO-8) --------------------
#
# Two schemas, one shape: AskInput is what the model writes, ``{"questions": [question…]}``
# (AQ-2). Its JSON schema (model_schema) is what the model is given; ``multiSelect`` is
# required there although it defaults to false. AskHandlerInput is what the handler runs on
# once the approval step (the host's ``modify``) filled in ``answers`` and maybe
# ``annotations`` (AQ-3, AQ-5). Without ``answers`` validation fails with the exact
# MISSING_ANSWERS.
#
# Every model forbids unknown fields and is strict (no ``"true"`` for a bool). Texts are
# compared as a person sees them (EG-7, text_key): without the characters that render as
# nothing, NFKC-normalised, whitespace runs as one space, trimmed, case-folded, with the
# look-alikes of the letters of "other" folded to them; two questions or labels a user cannot
# tell apart are duplicates; only a label that is exactly "other" so compared is reserved
# ("Others", "Other option" are fine, ``"Oth\u0435r"`` with a Cyrillic e is not); question
# texts and labels that show nothing (blank, or only zero-width characters) are rejected like
# empty ones. The texts are recorded as given. Where docs/spec.md is silent this module decides: a
# ``null`` preview or ``null`` answers count as absent; the forbidden preview tags are looked
# for in the whole text, code fences included, in any case, opening or closing, with or
# without attributes, but only where a tag name follows ``<`` directly, as in HTML.

TOOL_NAME = "AskUserQuestion"
MIN_QUESTIONS, MAX_QUESTIONS = 1, 4
MIN_OPTIONS, MAX_OPTIONS = 2, 4
HEADER_CHIP_WIDTH = 12
"""A header is described as at most this many characters; hosts truncate, we never reject."""
RESERVED_LABEL = "other"
"""The label the client always adds itself (compared as :func:`text_key`)."""
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

# -- the handler: the executor's view of the contract (AQ-1 … AQ-5, HO-8) --------------------
#
# It always needs the user (AQ-5); the question set is the interaction's payload. A ``modify``
# carries the input with the user's answers and must pass the handler schema (else 422, still
# pending); an ``approve`` without answers (an old client) is never taken as ``{}``: the
# handler schema refuses it and the call completes with ``success: false`` and the exact AQ-3
# message; a ``deny`` completes with the declined text and the turn goes on; the auto-continue
# timer (``autoContinued``) answers with ``{}``.

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
