"""The questionnaire's keys as pure state: what each HO-1 key does to the user's answers.

The TUI's question panel (:mod:`sessionledger.tui.panels`) only draws this state and feeds it
keys, so every rule of HO-1 — and what the ``modify`` input looks like once the user
submits (AQ-3, AQ-5) — lives here, testable without a terminal. No I/O.

All questions of one AskUserQuestion are shown at once; each has its options and a last
"Other" row (the client always offers Other, AQ-2). The cursor walks every row of every
question; the *current* question is the cursor's. Keys (HO-1):

* ``up``/``k`` and ``down``/``j`` move the cursor (across questions; no wrap);
* ``1``-``9`` pick option N of the current question directly (single-select: it becomes the
  answer and the cursor goes on to the next question; multi-select: N is toggled); the number
  of the Other row starts typing Other;
* ``space`` toggles the cursor's option in a multi-select question (on the Other row it
  starts typing Other, or drops the Other text); in a single-select question it chooses it;
* ``o`` starts typing Other for the current question (the panel shows a text field; the
  text is answer text, AQ-3);
* ``s`` skips the current question (clears its answer; no key for it in ``answers``);
* ``enter`` opens the confirmation page, and on that page submits;
* ``escape`` rejects (the panel answers ``deny``).

On the confirmation page a movement key goes back to the questions; no key outside HO-1 is
used anywhere (docs/decisions.md D81).

Here too: the keys of a plan approval (approve, reject with feedback), just as pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "APPROVE",
    "Approval",
    "ApprovalEffect",
    "Choice",
    "DIGITS",
    "Effect",
    "FEEDBACK",
    "MOVE_DOWN",
    "MOVE_UP",
    "Question",
    "QuestionState",
    "Questionnaire",
    "REJECT",
]


# -- a plan approval's keys --------------------------------------------------------------------
#
# An ordinary approval request as pure state: the TUI's view of a plan approval (PM-6).
#
# On the TUI host, ``ExitPlanMode`` is not a questionnaire but an ordinary approval request of
# the call (docs/decisions.md D62): the user approves, gives feedback text (Plan stays on and
# the text is steered into the turn, PM-8) or rejects (the turn ends, PM-9). Any other call a
# workspace rule makes ask (kind ``toolApproval``) gets the same request without feedback, which
# the executor accepts only for plan approvals. The keys are the questionnaire's (HO-1), so a
# user learns one set: ``up``/``k`` and ``down``/``j`` move, ``1``-``9`` pick a choice directly,
# ``enter`` takes the highlighted one, ``escape`` rejects. Feedback opens a text field whose
# Enter sends it. No I/O; :mod:`sessionledger.tui.panels` draws it and does what it says.

Choice = Literal["approve", "feedback", "deny"]
APPROVE: tuple[Choice, str] = ("approve", "Approve")
FEEDBACK: tuple[Choice, str] = ("feedback", "No, give feedback: keep planning")
REJECT: tuple[Choice, str] = ("deny", "Reject")

ApprovalEffect = Literal["none", "moved", "approve", "type_feedback", "reject"]
"""What a key asked the panel to do: redraw only, answer ``approve``, open the feedback
field, or answer ``deny``."""


@dataclass(slots=True)
class Approval:
    """The choices of one approval request and the highlighted one: none at first, so a
    stray Enter approves or rejects nothing (issue 42); a digit or a move then Enter does."""

    choices: tuple[tuple[Choice, str], ...]
    cursor: int | None = None

    @classmethod
    def for_kind(cls, kind: str) -> Approval:
        """Plan approvals take feedback; other approvals only approve or reject."""
        if kind == "planApproval":
            return cls((APPROVE, FEEDBACK, REJECT))
        return cls((APPROVE, REJECT))

    def press(self, key: str) -> ApprovalEffect:
        """Apply one key; what the panel must do besides redrawing."""
        if key == "escape":
            return "reject"
        if key in MOVE_UP or key in MOVE_DOWN:
            last = len(self.choices) - 1
            if self.cursor is None:  # the first move highlights the first (or last) choice
                self.cursor = last if key in MOVE_UP else 0
            else:
                step = -1 if key in MOVE_UP else 1
                self.cursor = max(0, min(self.cursor + step, last))
            return "moved"
        if key in DIGITS:
            picked = int(key) - 1
            if picked >= len(self.choices):
                return "none"
            self.cursor = picked
            return self._take()
        if key == "enter":
            return "none" if self.cursor is None else self._take()
        return "none"

    def _take(self) -> ApprovalEffect:
        assert self.cursor is not None
        choice = self.choices[self.cursor][0]
        if choice == "approve":
            return "approve"
        if choice == "feedback":
            return "type_feedback"
        return "reject"


# -- a questionnaire's keys (HO-1) -------------------------------------------------------------
#
# The questionnaire's keys as pure state: what each HO-1 key does to the user's answers.
#
# The TUI's question panel (:mod:`sessionledger.tui.panels`) only draws this state and feeds it
# keys, so every rule of HO-1 — and what the ``modify`` input looks like once the user
# submits (AQ-3, AQ-5) — lives here, testable without a terminal. No I/O.
#
# All questions of one AskUserQuestion are shown at once; each has its options and a last
# "Other" row (the client always offers Other, AQ-2). The cursor walks every row of every
# question; the *current* question is the cursor's. Keys (HO-1):
#
# * ``up``/``k`` and ``down``/``j`` move the cursor (across questions; no wrap);
# * ``1``-``9`` pick option N of the current question directly (single-select: it becomes the
#   answer and the cursor goes on to the next question; multi-select: N is toggled); the number
#   of the Other row starts typing Other;
# * ``space`` toggles the cursor's option in a multi-select question (on the Other row it
#   starts typing Other, or drops the Other text); in a single-select question it chooses it;
# * ``o`` starts typing Other for the current question (the panel shows a text field; the
#   text is answer text, AQ-3);
# * ``s`` skips the current question (clears its answer; no key for it in ``answers``);
# * ``enter`` opens the confirmation page, and on that page submits;
# * ``escape`` rejects (the panel answers ``deny``).
#
# On the confirmation page a movement key goes back to the questions; no key outside HO-1 is
# used anywhere (docs/decisions.md D81).

MOVE_UP = frozenset({"up", "k"})
MOVE_DOWN = frozenset({"down", "j"})
DIGITS = tuple(str(n) for n in range(1, 10))

Effect = Literal["none", "moved", "selected", "type_other", "confirm", "submit", "reject"]
"""What a key asked the panel to do besides redrawing: nothing, start typing Other, show
the confirmation page, submit (``modify``) or reject (``deny``). ``moved`` and ``selected``
are the user activity HO-5 counts."""


@dataclass(frozen=True, slots=True)
class Question:
    """One question as the interaction's payload carries it (AQ-2)."""

    text: str
    header: str
    labels: tuple[str, ...]
    descriptions: tuple[str, ...]
    previews: tuple[str | None, ...]
    multi_select: bool

    @classmethod
    def from_payload(cls, raw: Mapping[str, Any]) -> Question:
        options = list(raw["options"])
        return cls(
            text=str(raw["question"]), header=str(raw.get("header", "")),
            labels=tuple(str(o["label"]) for o in options),
            descriptions=tuple(str(o.get("description", "")) for o in options),
            previews=tuple(o.get("preview") for o in options),
            multi_select=bool(raw.get("multiSelect", False)),
        )

    @property
    def rows(self) -> int:
        """Its options and the Other row."""
        return len(self.labels) + 1

    @property
    def other_row(self) -> int:
        return len(self.labels)


@dataclass(slots=True)
class QuestionState:
    """What the user made of one question so far."""

    chosen: set[int] = field(default_factory=set)
    other: str | None = None
    skipped: bool = False

    def clear(self) -> None:
        self.chosen.clear()
        self.other = None


@dataclass(slots=True)
class Questionnaire:
    """The user's answers to one AskUserQuestion, the cursor and the page shown."""

    questions: tuple[Question, ...]
    states: list[QuestionState]
    cursor: tuple[int, int] = (0, 0)
    confirming: bool = False

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Questionnaire:
        questions = tuple(Question.from_payload(q) for q in payload["questions"])
        return cls(questions, [QuestionState() for _ in questions])

    @property
    def current(self) -> int:
        """The index of the cursor's question."""
        return self.cursor[0]

    # -- keys --------------------------------------------------------------------------------

    def press(self, key: str) -> Effect:
        """Apply one key; what the panel must do besides redrawing."""
        if key == "escape":
            return "reject"
        if self.confirming:
            return self._press_confirming(key)
        if key in MOVE_UP or key in MOVE_DOWN:
            self._move(-1 if key in MOVE_UP else 1)
            return "moved"
        if key in DIGITS:
            return self._pick(int(key) - 1)
        if key == "space":
            return self._space()
        if key == "o":
            return "type_other"
        if key == "s":
            self._skip()
            return "selected"
        if key == "enter":
            self.confirming = True
            return "confirm"
        return "none"

    def _press_confirming(self, key: str) -> Effect:
        if key == "enter":
            return "submit"
        if key in MOVE_UP or key in MOVE_DOWN:
            self.confirming = False
            return "moved"
        return "none"

    def _move(self, step: int) -> None:
        flat = [(q, r) for q, question in enumerate(self.questions) for r in range(question.rows)]
        at = flat.index(self.cursor) + step
        self.cursor = flat[max(0, min(at, len(flat) - 1))]

    def _pick(self, row: int) -> Effect:
        question = self.questions[self.current]
        if row >= question.rows:
            return "none"
        self.cursor = (self.current, row)
        if row == question.other_row:
            return "type_other"
        state = self.states[self.current]
        state.skipped = False
        if question.multi_select:
            state.chosen ^= {row}
            return "selected"
        state.clear()
        state.chosen.add(row)
        self._next_question()
        return "selected"

    def _space(self) -> Effect:
        index, row = self.cursor
        question, state = self.questions[index], self.states[index]
        if row == question.other_row:
            if question.multi_select and state.other is not None:
                state.other = None
                return "selected"
            return "type_other"
        state.skipped = False
        if question.multi_select:
            state.chosen ^= {row}
        else:
            state.clear()
            state.chosen.add(row)
        return "selected"

    def _skip(self) -> None:
        state = self.states[self.current]
        state.clear()
        state.skipped = True
        self._next_question()

    def _next_question(self) -> None:
        if self.current + 1 < len(self.questions):
            self.cursor = (self.current + 1, 0)

    def type_other(self, text: str) -> None:
        """The Other text typed for the current question (blank drops Other)."""
        question, state = self.questions[self.current], self.states[self.current]
        self.cursor = (self.current, question.other_row)
        if not text.strip():
            state.other = None
            return
        state.skipped = False
        if not question.multi_select:
            state.clear()
            self._next_question()
        state.other = text

    # -- the answer ---------------------------------------------------------------------------

    def answer(self, index: int) -> str | None:
        """The answer text of a question, or ``None`` when skipped or unanswered (AQ-3:
        several labels joined by ``", "`` in option order, the Other text last)."""
        question, state = self.questions[index], self.states[index]
        if state.skipped:
            return None
        parts = [question.labels[row] for row in sorted(state.chosen)]
        if state.other is not None:
            parts.append(state.other)
        return ", ".join(parts) if parts else None

    def answers(self) -> dict[str, str]:
        """``answers`` of the ``modify`` input: only the answered questions (AQ-3)."""
        found = ((q.text, self.answer(i)) for i, q in enumerate(self.questions))
        return {text: answer for text, answer in found if answer is not None}

    def annotations(self) -> dict[str, dict[str, str]]:
        """``annotations``: the preview of a single-select question's chosen option."""
        notes: dict[str, dict[str, str]] = {}
        for question, state in zip(self.questions, self.states, strict=True):
            if question.multi_select or state.skipped or len(state.chosen) != 1:
                continue
            preview = question.previews[next(iter(state.chosen))]
            if preview is not None:
                notes[question.text] = {"preview": preview}
        return notes

    def modify_input(self, asked: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The new tool input the panel submits with ``modify``: the questions exactly as
        asked (``asked``, the payload's), the answers filled in (AQ-5, HO-2)."""
        new_input: dict[str, Any] = {
            "questions": [dict(q) for q in asked], "answers": self.answers()
        }
        annotations = self.annotations()
        if annotations:
            new_input["annotations"] = annotations
        return new_input

    def status(self, index: int) -> str:
        """What the confirmation page says for a question."""
        if self.states[index].skipped:
            return "(skipped)"
        answer = self.answer(index)
        return "(not answered)" if answer is None else answer
