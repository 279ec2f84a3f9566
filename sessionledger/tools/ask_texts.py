"""The words of AskUserQuestion: its description and the texts returned to the model.

Pure functions over plain data, no models and no I/O, so the contract module
(:mod:`sessionledger.tools.ask_user_question`) and the executor share one wording:

* :data:`DESCRIPTION` — the tool description the model reads (SPEC AQ-1);
* :func:`result_text` — what the model gets back once the user answered all, some or none of
  the questions (AQ-4). Pairs are ``"question"="answer"`` in question order, joined by ``", "``;
  an annotation adds `` (user notes: …; selected preview: …)`` after its pair. Texts are quoted
  verbatim, without escaping: the reader is the model, not a parser;
* :func:`declined_text` — the result of a user ``deny``: declined, the turn goes on (HO-8);
* :data:`MISSING_ANSWERS` — the exact AQ-3 message for an input that reached the handler
  without ``answers`` (an old client's plain approve, HO-8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

__all__ = [
    "ALL_ANSWERED_PREFIX",
    "DESCRIPTION",
    "MISSING_ANSWERS",
    "AnnotationLike",
    "QuestionLike",
    "declined_text",
    "result_text",
]

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
