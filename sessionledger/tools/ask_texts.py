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
  without ``answers`` (an old client's plain approve, HO-8);
* :func:`visible` and :func:`text_key` — how texts a person reads are compared (EG-7), the
  one normalisation every rule that compares or blank-checks such texts uses (here, and the
  todo contract's blank check). Texts are stored as given; only comparisons normalise.
"""

from __future__ import annotations

import unicodedata
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
    "text_key",
    "visible",
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


def _invisible(char: str) -> bool:
    if unicodedata.category(char) in ("Cf", "Cc") and not char.isspace():
        return True
    point = ord(char)
    return any(low <= point <= high for low, high in _INVISIBLE_RANGES)


def visible(text: str) -> str:
    """``text`` as a person sees it, for comparing: characters that render as nothing
    (format and control characters, fillers, variation selectors) removed, NFKC-normalised
    (fullwidth, ligatures, compatibility forms and NFC/NFD spellings become one), every run
    of whitespace one space, trimmed. ``""`` for a text that shows nothing."""
    while True:  # removal can leave a string NFKC changes, and NFKC can make a filler
        shown = unicodedata.normalize("NFKC", "".join(c for c in text if not _invisible(c)))
        if shown == text:
            return " ".join(shown.split())
        text = shown


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
