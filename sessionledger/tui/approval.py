"""An ordinary approval request as pure state: the TUI's view of a plan approval (PM-6).

On the TUI host, ``ExitPlanMode`` is not a questionnaire but an ordinary approval request of
the call (docs/decisions.md D62): the user approves, gives feedback text (Plan stays on and
the text is steered into the turn, PM-8) or rejects (the turn ends, PM-9). Any other call a
workspace rule makes ask (kind ``toolApproval``) gets the same request without feedback, which
the executor accepts only for plan approvals. The keys are the questionnaire's (HO-1), so a
user learns one set: ``up``/``k`` and ``down``/``j`` move, ``1``-``9`` pick a choice directly,
``enter`` takes the highlighted one, ``escape`` rejects. Feedback opens a text field whose
Enter sends it. No I/O; :mod:`sessionledger.tui.panels` draws it and does what it says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .questionnaire import DIGITS, MOVE_DOWN, MOVE_UP

__all__ = ["APPROVE", "FEEDBACK", "REJECT", "Approval", "ApprovalEffect", "Choice"]

Choice = Literal["approve", "feedback", "deny"]
APPROVE: tuple[Choice, str] = ("approve", "Approve")
FEEDBACK: tuple[Choice, str] = ("feedback", "No, give feedback: keep planning")
REJECT: tuple[Choice, str] = ("deny", "Reject")

ApprovalEffect = Literal["none", "moved", "approve", "type_feedback", "reject"]
"""What a key asked the panel to do: redraw only, answer ``approve``, open the feedback
field, or answer ``deny``."""


@dataclass(slots=True)
class Approval:
    """The choices of one approval request and the highlighted one."""

    choices: tuple[tuple[Choice, str], ...]
    cursor: int = 0

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
            step = -1 if key in MOVE_UP else 1
            self.cursor = max(0, min(self.cursor + step, len(self.choices) - 1))
            return "moved"
        if key in DIGITS:
            picked = int(key) - 1
            if picked >= len(self.choices):
                return "none"
            self.cursor = picked
            return self._take()
        if key == "enter":
            return self._take()
        return "none"

    def _take(self) -> ApprovalEffect:
        choice = self.choices[self.cursor][0]
        if choice == "approve":
            return "approve"
        if choice == "feedback":
            return "type_feedback"
        return "reject"
